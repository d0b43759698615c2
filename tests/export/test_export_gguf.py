"""`export_gguf`: every GPT source written at f32, f16 and q8_0 and read back with gguf.GGUFReader (architecture,
context length, every tensor against the MiniTF weights after the documented layout changes, tokens, merges,
special ids, chat template); the GPT-2 GGUF loaded with transformers' `gguf_file=` loader gives MiniTF's tokens;
refusals."""

import json
import shutil

import gguf
import numpy as np
import pytest
import torch
from factories import GPT_FIXTURES, make_gpt_sources, make_seq2seq_source, minitf_greedy
from helpers import assert_one_line_error, assert_refused_writing_nothing, copy_with_config, run_cli
from transformers import AutoModelForCausalLM, AutoTokenizer

from hf_minitf import MiniTFGPTForCausalLM, char_tokenizer
from hf_minitf.cli import main as minitf_main
from hf_minitf.export import export_gguf
from hf_minitf.export.gguf import gguf_vocabulary

DTYPES = ("f32", "f16", "q8_0")
GPT_CASES = [*GPT_FIXTURES, "bpe_learned", "bpe_rope_untied", "char_rope_no_bias", "char_rope_rotate_half"]


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    return make_gpt_sources(tmp_path_factory.mktemp("gguf_sources"))


@pytest.fixture(scope="module")
def files(sources, tmp_path_factory):
    root = tmp_path_factory.mktemp("gguf")
    return {
        (name, dtype): export_gguf(sources[name], root / f"{name}.{dtype}.gguf", dtype=dtype)
        for name in GPT_CASES
        for dtype in DTYPES
    }


def _byte_spelling() -> dict[int, str]:
    """GPT-2's byte alphabet, spelled out independently of the exporter: printable Latin-1 bytes stand for
    themselves, the other 68 bytes take the code points from U+0100 on, in byte order."""
    keep = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF]
    others = [b for b in range(256) if b not in keep]
    return {**{b: chr(b) for b in keep}, **{b: chr(0x100 + i) for i, b in enumerate(others)}}


def _expected_tensors(model, config) -> dict[str, np.ndarray]:
    """The GGUF tensors written out by hand from the MiniTF weights (the layout changes of export_gguf's table)."""
    state = {name: tensor.float().numpy() for name, tensor in model.state_dict().items()}
    head_dim, hidden = config.hidden_size // config.num_attention_heads, config.hidden_size
    expected = {
        "token_embd.weight": state["model.embed_tokens.weight"],
        "output_norm.weight": state["model.norm.weight"],
        "output_norm.bias": state["model.norm.bias"],
    }
    rotary = config.position_embedding_type == "rope"
    if not rotary:
        expected["position_embd.weight"] = state["model.embed_positions.weight"]
    if rotary or not config.tie_word_embeddings:
        expected["output.weight"] = state["lm_head.weight"]
    for i in range(config.num_hidden_layers):
        layer = {
            name.split(f"model.layers.{i}.", 1)[1]: value
            for name, value in state.items()
            if name.startswith(f"model.layers.{i}.")
        }
        qkv = layer["self_attn.qkv_proj.weight"].copy()
        qkv_bias = layer.get("self_attn.qkv_proj.bias", np.zeros(3 * hidden, np.float32)).copy()
        if rotary and config.rope_interleaved:  # row h*d + j of q and k: even j first, then odd j
            for start in range(0, 2 * hidden, head_dim):
                rows = [start + j for j in range(0, head_dim, 2)] + [start + j for j in range(1, head_dim, 2)]
                qkv[start : start + head_dim], qkv_bias[start : start + head_dim] = qkv[rows], qkv_bias[rows]
        expected |= {
            f"blk.{i}.attn_norm.weight": layer["self_attn_layer_norm.weight"],
            f"blk.{i}.attn_norm.bias": layer["self_attn_layer_norm.bias"],
            f"blk.{i}.attn_qkv.weight": qkv,
            f"blk.{i}.attn_qkv.bias": qkv_bias,
            f"blk.{i}.attn_output.weight": layer["self_attn.o_proj.weight"],
            f"blk.{i}.attn_output.bias": layer.get("self_attn.o_proj.bias", np.zeros(hidden, np.float32)),
            f"blk.{i}.ffn_norm.weight": layer["mlp_layer_norm.weight"],
            f"blk.{i}.ffn_norm.bias": layer["mlp_layer_norm.bias"],
            f"blk.{i}.ffn_up.weight": layer["mlp.fc1.weight"],
            f"blk.{i}.ffn_up.bias": layer["mlp.fc1.bias"],
            f"blk.{i}.ffn_down.weight": layer["mlp.fc2.weight"],
            f"blk.{i}.ffn_down.bias": layer["mlp.fc2.bias"],
        }
    return expected


@pytest.mark.parametrize("name", GPT_CASES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_gguf_reads_back_with_the_model_and_its_settings(sources, files, name, dtype):
    model = MiniTFGPTForCausalLM.from_pretrained(sources[name]).eval()
    config = model.config
    reader = gguf.GGUFReader(str(files[name, dtype]))
    arch = reader.fields["general.architecture"].contents()
    assert arch == {"learned": "gpt2", "rope": "gptneox"}[config.position_embedding_type]
    assert reader.fields[f"{arch}.context_length"].contents() == config.max_position_embeddings
    assert reader.fields[f"{arch}.block_count"].contents() == config.num_hidden_layers
    assert reader.fields[f"{arch}.attention.head_count"].contents() == config.num_attention_heads
    assert reader.fields[f"{arch}.attention.layer_norm_epsilon"].contents() == pytest.approx(config.layer_norm_eps)
    if arch == "gptneox":
        assert (
            reader.fields["gptneox.rope.dimension_count"].contents() == config.hidden_size // config.num_attention_heads
        )
        assert reader.fields["gptneox.rope.freq_base"].contents() == pytest.approx(config.rope_theta)
        assert reader.fields["gptneox.use_parallel_residual"].contents() is False
    expected = _expected_tensors(model, config)
    tensors = {tensor.name: tensor for tensor in reader.tensors}
    assert set(tensors) == set(expected)
    for tensor_name, tensor in tensors.items():
        values = gguf.quants.dequantize(tensor.data, tensor.tensor_type).reshape(expected[tensor_name].shape)
        want = expected[tensor_name]
        if want.ndim == 1 or dtype == "f32":
            assert tensor.tensor_type == gguf.GGMLQuantizationType.F32 and np.array_equal(values, want), tensor_name
        elif dtype == "f16" or tensor_name == "position_embd.weight":  # llama.cpp leaves position tables unquantized
            assert np.array_equal(values, want.astype(np.float16).astype(np.float32)), tensor_name
        else:  # q8_0: blocks of 32 with one scale, |error| <= half a step (absmax / 127) plus the f16 scale's rounding
            assert tensor.tensor_type == gguf.GGMLQuantizationType.Q8_0
            blocks = want.reshape(-1, 32)
            step = np.abs(blocks).max(axis=1, keepdims=True) / 127
            assert np.all(np.abs(values.reshape(-1, 32) - blocks) <= step * 0.51 + 1e-3 * np.abs(blocks) + 1e-12)


@pytest.mark.parametrize("name", GPT_CASES)
def test_gguf_tokenizer_is_the_model_tokenizer_in_the_byte_alphabet(sources, files, name):
    tokenizer = AutoTokenizer.from_pretrained(sources[name])
    backend = json.loads(tokenizer.backend_tokenizer.to_str())
    reader = gguf.GGUFReader(str(files[name, "f32"]))
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    types = reader.fields["tokenizer.ggml.token_type"].contents()
    merges = reader.fields["tokenizer.ggml.merges"].contents()
    assert reader.fields["tokenizer.ggml.model"].contents() == "gpt2"
    assert reader.fields["tokenizer.ggml.pre"].contents() == "gpt-2"
    specials = {token.content for token in tokenizer.added_tokens_decoder.values()}
    spelling = _byte_spelling()
    vocab = tokenizer.get_vocab()
    assert len(tokens) == len(types) == MiniTFGPTForCausalLM.config_class.from_pretrained(sources[name]).vocab_size
    for token, index in vocab.items():
        if token in specials:
            assert (tokens[index], types[index]) == (token, 3), token
        elif backend["pre_tokenizer"] is None:  # a character: its UTF-8 bytes in the byte alphabet
            assert (tokens[index], types[index]) == ("".join(spelling[b] for b in token.encode()), 1), token
        else:
            assert (tokens[index], types[index]) == (token, 1), token
    if backend["pre_tokenizer"] is None:
        multi_byte = [token for token in vocab if token not in specials and len(token.encode()) > 1]
        for char in multi_byte:  # each multi-byte character is built by its merges, left to right
            pieces = [spelling[b] for b in char.encode()]
            for end in range(2, len(pieces) + 1):
                assert f"{''.join(pieces[: end - 1])} {pieces[end - 1]}" in merges
    else:
        assert (
            merges == [" ".join(m) if isinstance(m, list) else m for m in backend["model"]["merges"]]
            or len(merges) == 1
        )  # a vocabulary without merges gets one that never applies (llama.cpp needs the key)
    for name_, token_id in (
        ("bos", tokenizer.bos_token_id),
        ("eos", tokenizer.eos_token_id),
        ("padding", tokenizer.pad_token_id),
        ("unknown", tokenizer.unk_token_id),
    ):
        key = f"tokenizer.ggml.{name_}_token_id"
        assert (reader.fields[key].contents() if key in reader.fields else None) == token_id, key


def test_character_merges_come_once_each_in_first_seen_order():
    """Characters sharing lead bytes (é è: C3; € ₤: E2 82) need some merges twice; each is written once, where
    it is first needed, in vocabulary order."""
    tokenizer = char_tokenizer(["é", "€", "a", "è", "₤"], special_tokens=None)
    tokens, types, merges = gguf_vocabulary(json.loads(tokenizer.backend_tokenizer.to_str()), 7)
    assert tokens == ["Ã©", "âĤ¬", "a", "Ã¨", "âĤ¤", "[PAD5]", "[PAD6]"]
    assert types == [1, 1, 1, 1, 1, 5, 5]
    assert merges == ["Ã ©", "â Ĥ", "âĤ ¬", "Ã ¨", "âĤ ¤"]


def test_large_character_vocabulary_gives_every_merge_once_in_order():
    """50,000 characters (CJK, then the 4-byte planes past U+FFFF), as a big character GPT has: every merge
    that builds a character, none twice, in the order the vocabulary first needs them."""
    chars = [chr(code) for code in range(0x4E00, 0x4E00 + 52_100) if not 0xD800 <= code <= 0xDFFF][:50_000]
    assert len(chars[-1].encode()) == 4
    tokenizer = char_tokenizer(chars)
    tokens, types, merges = gguf_vocabulary(json.loads(tokenizer.backend_tokenizer.to_str()), len(tokenizer))
    spelling = _byte_spelling()
    specials = len(tokenizer) - len(chars)
    assert tokens[specials:] == ["".join(spelling[b] for b in char.encode()) for char in chars]
    assert types == [3] * specials + [1] * len(chars)
    expected, seen = [], set()
    for char in chars:
        pieces = [spelling[b] for b in char.encode()]
        for end in range(2, len(pieces) + 1):
            merge = f"{''.join(pieces[: end - 1])} {pieces[end - 1]}"
            if merge not in seen:
                seen.add(merge)
                expected.append(merge)
    assert len(merges) == len(set(merges)) > len(chars)
    assert merges == expected


def test_gpt2_gguf_loads_in_transformers_and_gives_minitf_tokens(sources, files):
    """transformers' own GGUF loader: the tokenizer from the file, the model from its tensors (its loader maps the
    context length to GPT-2's legacy `n_ctx` only, so `n_positions` is passed)."""
    path = files["bpe_learned", "f32"]
    config = json.loads((sources["bpe_learned"] / "config.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, n_positions=config["max_position_embeddings"]
    ).eval()
    minitf_tokenizer = AutoTokenizer.from_pretrained(sources["bpe_learned"])
    for text in ("hello world, the quick brown fox", "café naïve résumé"):
        assert tokenizer(text).input_ids == minitf_tokenizer(text).input_ids
    prompt = minitf_tokenizer("hello world", add_special_tokens=False).input_ids
    model.generation_config.eos_token_id = None
    with torch.no_grad():
        output = model.generate(
            torch.tensor([prompt]), max_new_tokens=50, do_sample=False, pad_token_id=config["pad_token_id"]
        )
    assert output[0, len(prompt) :].tolist() == minitf_greedy(sources["bpe_learned"], prompt, 50)


def test_chat_template_goes_into_the_file(sources, tmp_path):
    folder = tmp_path / "chat"
    shutil.copytree(sources["bpe_learned"], folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.chat_template = "{% for m in messages %}<|bos|>{{ m['content'] }}<|eos|>{% endfor %}"
    tokenizer.save_pretrained(folder)
    reader = gguf.GGUFReader(str(export_gguf(folder, tmp_path / "chat.gguf", dtype="f32")))
    assert reader.fields["tokenizer.chat_template"].contents() == tokenizer.chat_template


# Models llama.cpp cannot run exactly (`refused`), and what the refusal of each names.
REFUSALS = {
    "relu": "hidden_act='relu'",
    "crop": "context_overflow='crop'",
    "seq2seq": "model_type='minitf_seq2seq'.*T5's.*`minitf export ctranslate2` or `minitf export onnx`",
}


@pytest.fixture(scope="module")
def refused(tmp_path_factory, sources):
    root = tmp_path_factory.mktemp("gguf_refused")
    return {
        "relu": sources["char_learned_relu"],
        "crop": copy_with_config(sources["char_gpt"], root / "crop", context_overflow="crop"),
        "seq2seq": make_seq2seq_source(root),
    }


@pytest.mark.parametrize("name", REFUSALS)
def test_models_llama_cpp_cannot_run_exactly_are_refused(refused, tmp_path, name):
    assert_refused_writing_nothing(export_gguf, refused[name], tmp_path / "model.gguf", REFUSALS[name])


def test_command_line_writes_refuses_and_keeps_existing_files(sources, refused, tmp_path, capsys):
    out = tmp_path / "model.gguf"
    arguments = ["export", "gguf", str(sources["frawdllm_rope"]), str(out), "--dtype", "q8_0", "--no-verify"]
    assert minitf_main(arguments) == 0
    assert gguf.GGUFReader(str(out)).fields["general.file_type"].contents() == gguf.LlamaFileType.MOSTLY_Q8_0
    existing = run_cli(["export", "gguf", sources["frawdllm_rope"], out], capsys)
    assert_one_line_error(*existing[::2], "--overwrite")
    relu = run_cli(["export", "gguf", refused["relu"], tmp_path / "relu.gguf"], capsys)
    assert_one_line_error(*relu[::2], "minitf export gguf: error: ", "hidden_act")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["model.gguf"]
