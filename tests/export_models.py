"""MiniTF folders the export tests export: every GPT and encoder conversion fixture of tests/data, plus small random
models covering what the fixtures do not (trained BPE with merges, untied head, no attention bias, relu, rotate-half
rotary, learned-position encoder, a context long enough for 50 greedy tokens)."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from hf_minitf import (
    MiniTFEncoderConfig,
    MiniTFEncoderModel,
    MiniTFGPTConfig,
    MiniTFGPTForCausalLM,
    char_tokenizer,
    save_sentence_transformer,
    train_bpe_tokenizer,
    train_wordlevel_tokenizer,
)
from hf_minitf.conversion.char_gpt import convert_char_gpt
from hf_minitf.conversion.frawdllm import convert_frawdllm
from hf_minitf.conversion.hkproj import convert_hkproj
from hf_minitf.conversion.miniembed import convert_miniembed

DATA = Path(__file__).parent / "data"
TEXT = (
    "the quick brown fox jumps over the lazy dog. " * 20
    + "hello world, a tiny model exported everywhere. " * 20
    + "café naïve résumé — 1234567890\n"
)


def _frawdllm_tokenizer(root: Path) -> Path:
    symbols = sorted(pre_tokenizers.ByteLevel.alphabet())[:92]
    vocab = {token: index for index, token in enumerate(["<|pad|>", "<|unk|>", "<|bos|>", "<|eos|>", *symbols])}
    bpe = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<|unk|>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.save(str(root / "frawdllm_tokenizer.json"))
    return root / "frawdllm_tokenizer.json"


def _random_gpt(folder: Path, tokenizer, seed: int, **config) -> Path:
    torch.manual_seed(seed)
    settings = dict(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=80,
        initializer_range=0.3,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    model = MiniTFGPTForCausalLM(MiniTFGPTConfig(**{**settings, **config})).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


GPT_FIXTURES = ("char_gpt", "frawdllm_learned", "frawdllm_rope")
"""The GPT conversion fixtures of tests/data."""


def convert_gpt_fixture(root: Path, name: str) -> Path:
    """The GPT conversion fixture `name` (GPT_FIXTURES) converted into `root / name`."""
    root.mkdir(parents=True, exist_ok=True)
    if name == "char_gpt":
        convert_char_gpt(
            DATA / "char_gpt/checkpoint.pt", root / "char_gpt", vocab=DATA / "char_gpt/vocab.json", num_heads=4
        )
        # The converted char GPT crops like the original (refused by the native export): the same model with
        # context_overflow="error" is exported.
        config_path = root / "char_gpt/config.json"
        config_path.write_text(json.dumps({**json.loads(config_path.read_text()), "context_overflow": "error"}))
    else:
        tokenizer = root / "frawdllm_tokenizer.json"
        convert_frawdllm(
            DATA / name / "checkpoint.pt",
            root / name,
            tokenizer=tokenizer if tokenizer.is_file() else _frawdllm_tokenizer(root),
        )
    return root / name


def make_gpt_sources(root: Path) -> dict[str, Path]:
    """name -> MiniTF GPT folder."""
    sources = {name: convert_gpt_fixture(root, name) for name in GPT_FIXTURES}
    bpe = train_bpe_tokenizer([TEXT], vocab_size=300, min_frequency=1)
    sources["bpe_learned"] = _random_gpt(root / "bpe_learned", bpe, 1)
    sources["bpe_rope_untied"] = _random_gpt(
        root / "bpe_rope_untied", bpe, 2, position_embedding_type="rope", tie_word_embeddings=False, rope_theta=500.0
    )
    chars = char_tokenizer(TEXT)
    sources["char_rope_no_bias"] = _random_gpt(
        root / "char_rope_no_bias", chars, 3, position_embedding_type="rope", attention_bias=False, layer_norm_eps=1e-6
    )
    sources["char_learned_relu"] = _random_gpt(
        root / "char_learned_relu", chars, 4, hidden_act="relu", intermediate_size=64
    )
    sources["char_rope_rotate_half"] = _random_gpt(
        root / "char_rope_rotate_half", chars, 5, position_embedding_type="rope", rope_interleaved=False
    )
    return sources


def make_encoder_sources(root: Path) -> dict[str, Path]:
    """name -> MiniTF encoder folder (SentenceTransformer folders, as conversion and training write them)."""
    root.mkdir(parents=True, exist_ok=True)
    words = json.loads((DATA / "miniembed_tokenizer/tokenizer.json").read_text())["word_to_id"]
    vocabulary = root / "miniembed_tokenizer.json"
    vocabulary.write_text(json.dumps({"vocab_size": 97, "word_to_id": {w: i for w, i in words.items() if i < 97}}))
    convert_miniembed(
        DATA / "minitf_embedding/checkpoint.pt",
        root / "miniembed",
        tokenizer=vocabulary,
        config=DATA / "minitf_embedding/config.json",
    )
    tokenizer = train_wordlevel_tokenizer([TEXT], vocab_size=60, min_frequency=1, max_length=24)
    torch.manual_seed(6)
    config = MiniTFEncoderConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=24,
        position_embedding_type="learned",
        scale_embeddings=False,
        attention_bias=False,
        initializer_range=0.3,
    )
    save_sentence_transformer(MiniTFEncoderModel(config).eval(), tokenizer, root / "learned_encoder")
    return {"miniembed": root / "miniembed", "learned_encoder": root / "learned_encoder"}


def make_seq2seq_source(root: Path) -> Path:
    """The hkproj fixture converted (a seq2seq folder, which no export takes)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, size, prefix in (("tokenizer_en.json", 40, "s"), ("tokenizer_it.json", 45, "t")):
        vocab = {
            token: index
            for index, token in enumerate(
                ["[UNK]", "[PAD]", "[SOS]", "[EOS]", *(f"{prefix}{i}" for i in range(4, size))]
            )
        }
        word_level = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
        word_level.pre_tokenizer = pre_tokenizers.Whitespace()
        word_level.save(str(root / name))
    convert_hkproj(
        DATA / "seq2seq_transformer_trained_like/checkpoint.pt",
        root / "seq2seq",
        num_heads=4,
        source_tokenizer=root / "tokenizer_en.json",
        target_tokenizer=root / "tokenizer_it.json",
    )
    return root / "seq2seq"


def prompt_ids(folder: Path, count: int = 4) -> list[int]:
    """The first `count` ids of a text in the folder's tokenizer."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)("hello world, the quick fox", add_special_tokens=False).input_ids[
        :count
    ]


def minitf_greedy(folder: Path, prompt: list[int], new_tokens: int) -> list[int]:
    """MiniTF's greedy continuation (KV cache on, no stop at an end token): the new tokens."""
    model = MiniTFGPTForCausalLM.from_pretrained(folder).eval()
    model.generation_config.eos_token_id = None
    with torch.no_grad():
        output = model.generate(
            torch.tensor([prompt]),
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            max_new_tokens=new_tokens,
            do_sample=False,
            use_cache=True,
            pad_token_id=model.config.pad_token_id or 0,
        )
    return output[0, len(prompt) :].tolist()
