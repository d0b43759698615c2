"""Tiny MiniTF folders of every family for the engine export tests, and a runner for code in a fresh process.

Weights are random with a wide init so that greedy choices are not near-ties (float32 rounding in another engine
must not flip them); each engine runs in a subprocess of its own, as its idle threads slow torch in the same one.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

from hf_minitf import (
    MiniTFEncoderConfig,
    MiniTFEncoderModel,
    MiniTFGPTConfig,
    MiniTFGPTForCausalLM,
    MiniTFSeq2SeqConfig,
    MiniTFSeq2SeqForConditionalGeneration,
    char_tokenizer,
    save_sentence_transformer,
    train_translation_tokenizers,
    train_wordlevel_tokenizer,
)

TEXT = "the quick brown fox jumps over the lazy dog. a stitch in time saves nine!\n"
PAIRS = [
    ("the cat sat on the mat", "il gatto sedeva sul tappeto"),
    ("the dog runs in the park", "il cane corre nel parco"),
    ("a bird sings a song", "un uccello canta una canzone"),
    ("the sun is warm today", "il sole è caldo oggi"),
    ("we read a good book", "leggiamo un buon libro"),
]
SENTENCES = ["the quick brown fox", "a lazy dog sleeps in the sun", "time saves nine", "dog"]
GPT_PROMPTS = ["the qu", "a stitch", "fox"]


def make_gpt(folder: Path, position_embedding_type: str = "learned", rope_interleaved: bool = True,
             seed: int = 0) -> Path:
    torch.manual_seed(seed)
    tokenizer = char_tokenizer(TEXT)
    config = MiniTFGPTConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=64, position_embedding_type=position_embedding_type, rope_interleaved=rope_interleaved,
        initializer_range=0.3, eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    MiniTFGPTForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def make_seq2seq(folder: Path, seed: int = 0, **config_fields) -> Path:
    torch.manual_seed(seed)
    tokenizer = train_translation_tokenizers(PAIRS, min_frequency=1)
    config = MiniTFSeq2SeqConfig(
        src_vocab_size=tokenizer.source_vocab_size, vocab_size=tokenizer.target_vocab_size, hidden_size=32,
        num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, max_position_embeddings=24,
        initializer_range=0.3, **config_fields,
    )
    MiniTFSeq2SeqForConditionalGeneration(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def make_encoder(folder: Path, seed: int = 0) -> Path:
    torch.manual_seed(seed)
    tokenizer = train_wordlevel_tokenizer(SENTENCES + [TEXT], vocab_size=64, min_frequency=1, max_length=32)
    config = MiniTFEncoderConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=64, max_position_embeddings=32)
    save_sentence_transformer(MiniTFEncoderModel(config).eval(), tokenizer, folder)
    return folder


def run_python(code: str, timeout: int = 300) -> dict:
    """Run `code` in a fresh Python process; it prints one JSON object last, which is returned."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, f"subprocess failed:\n{result.stdout}\n{result.stderr}"
    return json.loads(result.stdout.strip().splitlines()[-1])


def run_minitf(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """`minitf ARGS` in a fresh process."""
    return subprocess.run([sys.executable, "-m", "hf_minitf.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "OMP_NUM_THREADS": "1"})
