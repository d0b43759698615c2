"""GGUF exports of the encoder, read back with the gguf package's reader: llama.cpp's gpt2 graph with non-causal
attention and mean pooling, the WordPiece tokenizer holding MiniEmbed's words, tensors equal to the MiniTF weights,
and llama.cpp's gpt2 graph written out in numpy over the file's tensors giving SentenceTransformer's embeddings.
Encoders llama.cpp cannot reproduce are refused with nothing written. llama.cpp itself runs in
test_engines_llama_cpp_encoder.py."""

import json
import math
import shutil

import gguf
import numpy as np
import pytest
import torch
from factories import ENCODER_KINDS, engine_encoder, random_model_folder
from sentence_transformers import SentenceTransformer
from transformers import AutoTokenizer

from hf_minitf import MiniTFEncoderModel, train_encoder_bpe_tokenizer
from hf_minitf.cli import main as minitf_main
from hf_minitf.export import export_gguf

TEXTS = ["the cat sat on the mat", "what time is it?", "dog", "The QUICK brown fox, jumps over the lazy dog!"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, gguf.GGUFReader]:
    root = tmp_path_factory.mktemp("gguf_encoders")
    return {
        kind: gguf.GGUFReader(str(export_gguf(engine_encoder(kind), root / f"{kind}.gguf", dtype="f32")))
        for kind in ENCODER_KINDS
    }


def tensors_of(reader: gguf.GGUFReader) -> dict[str, np.ndarray]:
    return {tensor.name: np.array(tensor.data, dtype=np.float32) for tensor in reader.tensors}


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * weight + bias


def gpt2_graph_embedding(tensors: dict[str, np.ndarray], ids: list[int], heads: int, eps: float) -> np.ndarray:
    """llama.cpp's gpt2 graph (models/gpt2.cpp) written out over the file's tensors, every token seeing every other
    (causal = false), then the mean over the tokens (pooling_type = mean) and the L2 norm. Exact GELU: llama.cpp's
    tanh form is its own rounding, measured in the engine tests."""
    x = tensors["token_embd.weight"][ids] + tensors["position_embd.weight"][: len(ids)]
    layers = len({name.split(".")[1] for name in tensors if name.startswith("blk.")})
    for index in range(layers):
        block = {name.split(".", 2)[2]: value for name, value in tensors.items() if name.startswith(f"blk.{index}.")}
        h = layer_norm(x, block["attn_norm.weight"], block["attn_norm.bias"], eps)
        q, k, v = np.split(h @ block["attn_qkv.weight"].T + block["attn_qkv.bias"], 3, axis=-1)
        q, k, v = (part.reshape(len(ids), heads, -1).transpose(1, 0, 2) for part in (q, k, v))
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        attended = (weights / weights.sum(-1, keepdims=True)) @ v
        x = x + attended.transpose(1, 0, 2).reshape(len(ids), -1) @ block["attn_output.weight"].T
        x = x + block["attn_output.bias"]
        h = layer_norm(x, block["ffn_norm.weight"], block["ffn_norm.bias"], eps)
        up = torch.nn.functional.gelu(torch.from_numpy(h @ block["ffn_up.weight"].T + block["ffn_up.bias"])).numpy()
        x = x + up @ block["ffn_down.weight"].T + block["ffn_down.bias"]
    pooled = layer_norm(x, tensors["output_norm.weight"], tensors["output_norm.bias"], eps).mean(0)
    return pooled / np.linalg.norm(pooled)


@pytest.mark.parametrize("kind", ENCODER_KINDS)
def test_the_gpt2_graph_over_the_file_gives_sentence_transformers_embeddings(exported, kind):
    reader, folder = exported[kind], engine_encoder(kind)
    fields = {name: field.contents() for name, field in reader.fields.items()}
    tokenizer = AutoTokenizer.from_pretrained(folder)
    expected = SentenceTransformer(str(folder)).encode(TEXTS)
    tensors = tensors_of(reader)
    for text, reference in zip(TEXTS, expected):
        embedding = gpt2_graph_embedding(
            tensors,
            tokenizer(text).input_ids,
            fields["gpt2.attention.head_count"],
            fields["gpt2.attention.layer_norm_epsilon"],
        )
        assert np.abs(embedding - reference).max() <= 1e-5


def test_metadata_says_non_causal_mean_pooled_wordpiece(exported):
    reader, folder = exported["miniembed"], engine_encoder("miniembed")
    fields = {name: field.contents() for name, field in reader.fields.items()}
    config = json.loads((folder / "config.json").read_text())
    assert fields["general.architecture"] == "gpt2"
    assert fields["gpt2.attention.causal"] is False
    assert fields["gpt2.pooling_type"] == gguf.PoolingType.MEAN
    assert fields["gpt2.context_length"] == config["max_position_embeddings"] == 24
    assert fields["tokenizer.ggml.model"] == "bert"
    assert fields["tokenizer.ggml.normalizer.lowercase"] is True
    assert fields["tokenizer.ggml.normalizer.strip_accents"] is False
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert fields["tokenizer.ggml.bos_token_id"] == tokenizer.convert_tokens_to_ids("[CLS]") == 2
    assert fields["tokenizer.ggml.seperator_token_id"] == tokenizer.convert_tokens_to_ids("[SEP]") == 3
    assert fields["tokenizer.ggml.unknown_token_id"] == tokenizer.convert_tokens_to_ids("[UNK]") == 1
    vocabulary = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]
    tokens, types = fields["tokenizer.ggml.tokens"], fields["tokenizer.ggml.token_type"]
    assert len(tokens) == config["vocab_size"] == len(vocabulary)
    for word, index in vocabulary.items():
        special = word.startswith("[") and word.endswith("]")
        assert tokens[index] == (word if special else "\u2581" + word)
        assert types[index] == (
            gguf.TokenType.NORMAL
            if not special
            else gguf.TokenType.UNKNOWN
            if word == "[UNK]"
            else gguf.TokenType.CONTROL
        )


def test_tensors_hold_the_minitf_weights(exported):
    """The f32 file's tensors: embeddings pre-scaled by sqrt(d), the sinusoid of the original (sin on even, cos on
    odd features) as the position table, q|k|v stacked, missing biases zeros."""
    for kind in ("miniembed", "learned"):
        model = MiniTFEncoderModel.from_pretrained(engine_encoder(kind)).eval()
        config, state = model.config, {name: value.numpy() for name, value in model.state_dict().items()}
        tensors = tensors_of(exported[kind])
        scale = math.sqrt(config.hidden_size) if config.scale_embeddings else 1.0
        assert np.array_equal(tensors["token_embd.weight"], state["embed_tokens.weight"] * np.float32(scale))
        if config.position_embedding_type == "learned":
            assert np.array_equal(tensors["position_embd.weight"], state["embed_positions.weight"])
        else:
            position, feature = np.meshgrid(
                np.arange(config.max_position_embeddings), np.arange(config.hidden_size), indexing="ij"
            )
            angle = position / 10000 ** ((feature - feature % 2) / config.hidden_size)
            sinusoid = np.where(feature % 2 == 0, np.sin(angle), np.cos(angle))
            assert np.abs(tensors["position_embd.weight"] - sinusoid).max() <= 1e-5
        for index in range(config.num_hidden_layers):
            prefix = f"layers.{index}.self_attn."
            qkv = np.concatenate([state[f"{prefix}{name}_proj.weight"] for name in "qkv"])
            assert np.array_equal(tensors[f"blk.{index}.attn_qkv.weight"], qkv)
            if config.attention_bias:
                bias = np.concatenate([state[f"{prefix}{name}_proj.bias"] for name in "qkv"])
                assert np.array_equal(tensors[f"blk.{index}.attn_qkv.bias"], bias)
            else:
                assert (
                    not tensors[f"blk.{index}.attn_qkv.bias"].any()
                    and not tensors[f"blk.{index}.attn_output.bias"].any()
                )
            assert np.array_equal(tensors[f"blk.{index}.ffn_down.weight"], state[f"layers.{index}.mlp.fc2.weight"])
        assert np.array_equal(tensors["output_norm.weight"], state["norm.weight"])


def test_f16_file_stores_half_precision_matrices(tmp_path):
    reader = gguf.GGUFReader(str(export_gguf(engine_encoder("miniembed"), tmp_path / "model.gguf", dtype="f16")))
    types = {tensor.name: tensor.tensor_type for tensor in reader.tensors}
    assert types["blk.0.attn_qkv.weight"] == types["token_embd.weight"] == gguf.GGMLQuantizationType.F16
    assert types["blk.0.attn_qkv.bias"] == types["output_norm.weight"] == gguf.GGMLQuantizationType.F32


def refused_source(tmp_path, change: str):
    """The learned-position encoder with one thing llama.cpp cannot reproduce."""
    source = tmp_path / change
    if change == "bpe_tokenizer":
        tokenizer = train_encoder_bpe_tokenizer(
            ["the quick brown fox jumps over the lazy dog"] * 3, vocab_size=60, min_frequency=1
        )
        return random_model_folder(
            "encoder", source, tokenizer, 0, hidden_size=16, num_attention_heads=2, intermediate_size=32
        )
    shutil.copytree(engine_encoder("learned"), source)
    if change == "relu":
        config = json.loads((source / "config.json").read_text())
        (source / "config.json").write_text(json.dumps({**config, "hidden_act": "relu"}))
    else:
        pooling = json.loads((source / "1_Pooling/config.json").read_text())
        (source / "1_Pooling/config.json").write_text(json.dumps({**pooling, "pooling_mode": "max"}))
    return source


@pytest.mark.parametrize(
    "change,message",
    [
        ("relu", "hidden_act='relu': llama.cpp's gpt2 graph, which runs the encoder, computes GELU only"),
        ("bpe_tokenizer", "the encoder's tokenizer is 'BPE', not MiniEmbed's word-level one"),
        ("max_pooling", "pooling_mode='max'; the export reproduces mean pooling only"),
    ],
)
def test_encoders_llama_cpp_cannot_reproduce_are_refused(tmp_path, change, message):
    source = refused_source(tmp_path, change)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        export_gguf(source, tmp_path / "out" / "model.gguf")
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_command_line_exports_an_encoder(tmp_path, capsys):
    out, source = tmp_path / "embedder.gguf", engine_encoder("miniembed")
    assert minitf_main(["export", "gguf", str(source), str(out), "--dtype", "f16", "--no-verify"]) == 0
    assert str(out) in capsys.readouterr().out
    assert gguf.GGUFReader(str(out)).fields["gpt2.pooling_type"].contents() == gguf.PoolingType.MEAN
