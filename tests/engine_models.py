"""Tiny MiniTF folders of every family for the engine export tests, and a runner for code in a fresh process.

Weights are random with a wide init so that greedy choices are not near-ties (float32 rounding in another engine
must not flip them); each engine runs in a subprocess of its own, as its idle threads slow torch in the same one.
"""

import atexit
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
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


def make_gpt(
    folder: Path, position_embedding_type: str = "learned", rope_interleaved: bool = True, seed: int = 0
) -> Path:
    torch.manual_seed(seed)
    tokenizer = char_tokenizer(TEXT)
    config = MiniTFGPTConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=64,
        position_embedding_type=position_embedding_type,
        rope_interleaved=rope_interleaved,
        initializer_range=0.3,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    MiniTFGPTForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def make_seq2seq(folder: Path, seed: int = 0, **config_fields) -> Path:
    torch.manual_seed(seed)
    tokenizer = train_translation_tokenizers(PAIRS, min_frequency=1)
    config = MiniTFSeq2SeqConfig(
        src_vocab_size=tokenizer.source_vocab_size,
        vocab_size=tokenizer.target_vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=16,
        initializer_range=0.3,
        **config_fields,
    )
    MiniTFSeq2SeqForConditionalGeneration(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def make_encoder(folder: Path, seed: int = 0) -> Path:
    torch.manual_seed(seed)
    tokenizer = train_wordlevel_tokenizer(SENTENCES + [TEXT], vocab_size=64, min_frequency=1, max_length=32)
    config = MiniTFEncoderConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=32,
    )
    save_sentence_transformer(MiniTFEncoderModel(config).eval(), tokenizer, folder)
    return folder


def run_python(code: str, timeout: int = 300) -> dict:
    """Run `code` in a fresh Python process; it prints one JSON object last, which is returned."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, f"subprocess failed:\n{result.stdout}\n{result.stderr}"
    last_line = (result.stdout.strip().splitlines() or [""])[-1]
    try:
        return json.loads(last_line)
    except json.JSONDecodeError:
        raise AssertionError(f"no JSON printed last:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}") from None


def run_minitf(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """`minitf ARGS` in a fresh process."""
    return subprocess.run(
        [sys.executable, "-m", "hf_minitf.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


GPT_KINDS = {
    "learned": {},
    "rope_interleaved": {"position_embedding_type": "rope"},
    "rope_halves": {"position_embedding_type": "rope", "rope_interleaved": False},
}
SEQ2SEQ_KINDS = {
    "layer_norm": {},
    "hkproj_first_norm": {
        "norm_type": "scalar_std_times_eps",
        "attention_mask_value": -1e9,
        "output_log_softmax": True,
    },
}


@functools.cache
def workspace() -> Path:
    """One folder per test process for the models and exports the engine test modules share (made once)."""
    root = Path(tempfile.mkdtemp(prefix="hf_minitf_engines_"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


DATA = Path(__file__).parent / "data"


def convert_miniembed_fixture(folder: Path) -> Path:
    """The MiniEmbed conversion fixture (tests/data/minitf_embedding) as a SentenceTransformer folder, with
    MiniEmbed's released vocabulary cut to the fixture model's 97 ids."""
    from hf_minitf.conversion.miniembed import convert_miniembed

    words = json.loads((DATA / "miniembed_tokenizer" / "tokenizer.json").read_text())["word_to_id"]
    vocabulary = {"vocab_size": 97, "word_to_id": {word: index for word, index in words.items() if index < 97}}
    convert_miniembed(
        DATA / "minitf_embedding" / "checkpoint.pt",
        folder,
        tokenizer=vocabulary,
        config=DATA / "minitf_embedding" / "config.json",
    )
    return folder


@functools.cache
def model_folder(family: str, kind: str) -> Path:
    """A tiny MiniTF folder: family gpt (GPT_KINDS), seq2seq (SEQ2SEQ_KINDS) or encoder (kind "tiny", or
    "miniembed": the converted MiniEmbed fixture)."""
    folder = workspace() / f"{family}_{kind}"
    if family == "gpt":
        return make_gpt(folder, **GPT_KINDS[kind])
    if family == "seq2seq":
        return make_seq2seq(folder, **SEQ2SEQ_KINDS[kind])
    return convert_miniembed_fixture(folder) if kind == "miniembed" else make_encoder(folder)


@functools.cache
def ctranslate2_export(family: str, kind: str, quantization: str = "float32") -> Path:
    from hf_minitf.export.ctranslate2 import export_ctranslate2

    return export_ctranslate2(
        model_folder(family, kind), workspace() / f"{family}_{kind}_ct2_{quantization}", quantization=quantization
    )


@functools.cache
def onnx_export(quantize: tuple[str, ...] = ("q8",)) -> Path:
    """The converted MiniEmbed fixture exported to ONNX with the variants `quantize`."""
    from hf_minitf.export.onnx import export_onnx

    return export_onnx(
        model_folder("encoder", "miniembed"), workspace() / f"encoder_onnx_{'_'.join(quantize)}", quantize=quantize
    )


@functools.cache
def gpt_source(name: str) -> Path:
    """A GPT conversion fixture (export_models.GPT_FIXTURES) converted, or a tiny GPT of GPT_KINDS."""
    from export_models import GPT_FIXTURES, convert_gpt_fixture

    return convert_gpt_fixture(workspace() / "fixtures", name) if name in GPT_FIXTURES else model_folder("gpt", name)


@functools.cache
def onnx_gpt_export(name: str, quantize: tuple[str, ...] = ()) -> Path:
    """`gpt_source(name)` exported to ONNX with the variants `quantize`."""
    from hf_minitf.export.onnx import export_onnx

    return export_onnx(gpt_source(name), workspace() / f"gpt_{name}_onnx_{'_'.join(quantize)}", quantize=quantize)
