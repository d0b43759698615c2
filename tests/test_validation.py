"""Bad input across the public surface, one row each: the exception type (or the command's exit) and a message that
names the problem (the field, file, tensor or value). Add a row with one `bad(...)` line: an id, a callable taking
the test's temporary folder, the exception type and a regex its message must match.

After every row the temporary folder must hold no half-written output (no `.NAME.writing-*` folder)."""

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import tiny_model
from export_models import make_seq2seq_source
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from hf_minitf import (
    MiniTFEncoderConfig,
    MiniTFEncoderModel,
    MiniTFGPTConfig,
    MiniTFGPTForCausalLM,
    MiniTFSeq2SeqConfig,
    MiniTFSeq2SeqForConditionalGeneration,
    MiniTFSeq2SeqTokenizer,
    char_tokenizer,
    load_bpe_tokenizer,
    miniembed_tokenizer,
    save_sentence_transformer,
    train_bpe_tokenizer,
    train_translation_tokenizers,
    train_wordlevel_tokenizer,
)
from hf_minitf.cli import main as minitf_main
from hf_minitf.conversion import ConversionError
from hf_minitf.conversion.base import require_heads
from hf_minitf.conversion.char_gpt import convert_char_gpt
from hf_minitf.conversion.output import TensorPlan, write_safetensors
from hf_minitf.export.gguf import export_gguf
from hf_minitf.safety.output_folders import OutputFolderError, atomic_output_dir, check_output_dir
from hf_minitf.tokenization.gpt import wrap_tokenizer
from hf_minitf.training.quickstart import QuickstartSteps
from hf_minitf.training.trainers import TrainingError, TrainSettings, train_gpt

DATA = Path(__file__).parent / "data"
CHAR_GPT = DATA / "char_gpt"
MINIEMBED_VOCAB = DATA / "miniembed_tokenizer" / "tokenizer.json"
TINY = dict(
    vocab_size=40,
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=32,
    max_position_embeddings=16,
)


class CommandFailed(Exception):
    """A command line that exited non-zero; the message is what it printed on stderr."""


def minitf(*argv) -> None:
    """Run `minitf ...`; raise CommandFailed with its stderr when it exits non-zero."""
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors):
        code = minitf_main([str(arg) for arg in argv])
    if code != 0:
        raise CommandFailed(f"exit {code}: {errors.getvalue()}")


def convert(*argv) -> None:
    """Run `minitf convert ...`; raise CommandFailed with its stderr when it exits non-zero."""
    minitf("convert", *argv)


def refused_arguments(*argv) -> None:
    """Run `minitf ...` expecting argparse to refuse its arguments; raise CommandFailed with what it printed."""
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors), pytest.raises(SystemExit) as exit:
        minitf_main([str(arg) for arg in argv])
    raise CommandFailed(f"exit {exit.value.code}: {errors.getvalue()}")


TRAIN_GPT = ("train", "gpt", "--data", "corpus.txt", "--out", "model")


def keeping(path: Path, action) -> None:
    """Run `action` and check, whatever it raises, that `path` is still there (nothing lost)."""
    try:
        action()
    finally:
        assert path.exists(), f"{path} was deleted"


def untouched(folder: Path, action) -> None:
    """Run `action` and check, whatever it raises, that every file under `folder` is as it was."""
    before = {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()}
    try:
        action()
    finally:
        assert {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()} == before, f"{folder} changed"


def project_checkout(tmp: Path) -> Path:
    """A folder like a project's checkout: `.git`, `pyproject.toml`, sources, even a `config.json`."""
    write(tmp / "project/.git/HEAD", "ref: refs/heads/main\n")
    write(tmp / "project/pyproject.toml", "[project]\nname = 'mine'\n")
    write(tmp / "project/src/main.py", "print('mine')\n")
    write(tmp / "project/config.json", "{}")
    return tmp / "project"


def folder_of(folder: Path, *names: str) -> Path:
    """`folder` holding the files `names` (paths inside it), each holding its name."""
    for name in names:
        write(folder / name, name)
    return folder


def linked(tmp: Path, target: Path) -> Path:
    """A symbolic link `tmp/link` to `target` (which need not exist)."""
    (tmp / "link").symlink_to(target)
    return tmp / "link"


def text_file(tmp: Path) -> Path:
    return write(tmp / "text.txt", "the cat sat on the mat\n" * 20)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def word_level(tmp: Path, name: str, words: list[str]) -> Path:
    tokenizer = Tokenizer(models.WordLevel({word: i for i, word in enumerate(words)}, unk_token=words[0]))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp / name))
    return tmp / name


def pair_tokenizer() -> MiniTFSeq2SeqTokenizer:
    return train_translation_tokenizers([("a small cat", "un petit chat"), ("a dog", "un chien")] * 2)


def broken_pair_folder(tmp: Path) -> Path:
    """A saved seq2seq tokenizer whose target vocabulary file was overwritten with something else."""
    pair_tokenizer().save_pretrained(tmp / "tok")
    write(tmp / "tok" / "target_tokenizer.json", "[]")
    return tmp / "tok"


def saved_gpt(tmp: Path, edit=None, **config) -> Path:
    """A tiny GPT folder; `edit(folder)` then breaks something in it."""
    MiniTFGPTForCausalLM(MiniTFGPTConfig(**{**TINY, **config})).save_pretrained(tmp / "gpt")
    if edit is not None:
        edit(tmp / "gpt")
    return tmp / "gpt"


def edit_config(**changes):
    def edit(folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        config.update(changes)
        (folder / "config.json").write_text(json.dumps(config))

    return edit


def truncate_weights(keep: int):
    def edit(folder: Path) -> None:
        data = (folder / "model.safetensors").read_bytes()
        (folder / "model.safetensors").write_bytes(data[:keep])

    return edit


def checkpoint_folder(tmp: Path) -> Path:
    """A folder holding a char-GPT checkpoint, as a user keeps it."""
    folder = tmp / "run"
    folder.mkdir()
    shutil.copy(CHAR_GPT / "checkpoint.pt", folder / "checkpoint.pt")
    return folder


def huge_weight_checkpoint(tmp: Path) -> Path:
    state = load_file(CHAR_GPT / "original.safetensors")
    state["ln_f.weight"] = state["ln_f.weight"] * 0 + 1e6
    save_file(state, str(tmp / "huge.safetensors"))
    return tmp / "huge.safetensors"


def tiny_gpt() -> MiniTFGPTForCausalLM:
    return tiny_model("gpt", **{**TINY, "intermediate_size": None}, pad_token_id=0)


def tiny_encoder() -> MiniTFEncoderModel:
    return tiny_model("encoder", **TINY)


def tiny_seq2seq(**config) -> MiniTFSeq2SeqForConditionalGeneration:
    return tiny_model("seq2seq", **{**TINY, "src_vocab_size": 40, "vocab_size": 50}, **config)


def saved_model(tmp: Path, family: str) -> Path:
    """A tiny model folder of `family` (config and weights, no tokenizer: the commands refuse it before that)."""
    {"gpt": tiny_gpt, "encoder": tiny_encoder, "seq2seq": tiny_seq2seq}[family]().save_pretrained(tmp / family)
    return tmp / family


def engine_export(tmp: Path, engine: str, kind: str, family: str) -> Path:
    """A folder named an engine export by its minitf_export.json, as `minitf export` writes it."""
    write(tmp / "export/config.json", "{}")
    write(tmp / "export/minitf_export.json", json.dumps({"engine": engine, "kind": kind, "family": family}))
    return tmp / "export"


def with_safetensors_header(header: bytes):
    """An edit replacing model.safetensors with a file of this JSON header and 16 bytes of data."""

    def edit(folder: Path) -> None:
        (folder / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + bytes(16))

    return edit


def char_gpt_folder(tmp: Path, **config) -> Path:
    """A tiny GPT folder with a character tokenizer (of "abc "), ready for `minitf generate`."""
    tokenizer = char_tokenizer("abc ")
    tiny_model(
        "gpt",
        **{
            **TINY,
            "intermediate_size": None,
            "vocab_size": len(tokenizer),
            "pad_token_id": tokenizer.pad_token_id,
            **config,
        },
    ).save_pretrained(tmp / "chars")
    tokenizer.save_pretrained(tmp / "chars")
    return tmp / "chars"


def native_gpt_folder(tmp: Path) -> Path:
    """`char_gpt_folder` exported as transformers' own GPT-2 (learned positions, 16 of them)."""
    minitf("export", "native", char_gpt_folder(tmp), tmp / "native")
    return tmp / "native"


BAD_YAML_CARD = "---\nlicense: [mit\ntags: x\n---\n\n# My model\n"


def bad(case_id: str, action, error: type[BaseException], message: str):
    return pytest.param(action, error, message, id=case_id)


BAD_INPUTS = [
    # Configs: types, ranges and names, from the constructor, a later assignment, a from_pretrained kwarg or JSON.
    bad(
        "gpt-zero-heads",
        lambda tmp: MiniTFGPTConfig(num_attention_heads=0),
        ValueError,
        r"num_attention_heads must be a positive integer, got 0",
    ),
    bad(
        "encoder-zero-heads",
        lambda tmp: MiniTFEncoderConfig(num_attention_heads=0),
        ValueError,
        r"num_attention_heads must be a positive integer, got 0",
    ),
    bad(
        "seq2seq-zero-heads",
        lambda tmp: MiniTFSeq2SeqConfig(num_attention_heads=0),
        ValueError,
        r"num_attention_heads must be a positive integer, got 0",
    ),
    bad(
        "gpt-string-size",
        lambda tmp: MiniTFGPTConfig(hidden_size="256"),
        ValueError,
        r"MiniTFGPTConfig: hidden_size must be a positive integer, got '256' \(str\)",
    ),
    bad(
        "encoder-float-size",
        lambda tmp: MiniTFEncoderConfig(hidden_size=64.0),
        ValueError,
        r"hidden_size must be a positive integer, got 64.0 \(float\)",
    ),
    bad(
        "seq2seq-string-vocab",
        lambda tmp: MiniTFSeq2SeqConfig(src_vocab_size="100"),
        ValueError,
        r"src_vocab_size must be a positive integer, got '100'",
    ),
    bad(
        "gpt-bool-layers",
        lambda tmp: MiniTFGPTConfig(num_hidden_layers=True),
        ValueError,
        r"num_hidden_layers must be a positive integer, got True \(bool\)",
    ),
    bad("gpt-alias-size", lambda tmp: MiniTFGPTConfig(n_embd="64"), ValueError, r"hidden_size .* got '64'"),
    bad(
        "gpt-unknown-activation",
        lambda tmp: MiniTFGPTConfig(hidden_act="swishy"),
        ValueError,
        r"hidden_act must be an activation name .* got 'swishy'",
    ),
    bad(
        "encoder-unknown-activation",
        lambda tmp: MiniTFEncoderConfig(hidden_act="Gelu"),
        ValueError,
        r"hidden_act must be an activation name .*'gelu'.* got 'Gelu'",
    ),
    bad(
        "seq2seq-no-activation",
        lambda tmp: MiniTFSeq2SeqConfig(hidden_act=None),
        ValueError,
        r"hidden_act must be an activation name .* got None",
    ),
    bad(
        "gpt-pad-outside-vocab",
        lambda tmp: MiniTFGPTConfig(vocab_size=100, pad_token_id=100),
        ValueError,
        r"pad_token_id=100 is outside the vocabulary \(ids 0..99\)",
    ),
    bad(
        "gpt-eos-list-outside-vocab",
        lambda tmp: MiniTFGPTConfig(vocab_size=100, eos_token_id=[3, 250]),
        ValueError,
        r"eos_token_id=\[3, 250\] is outside the vocabulary",
    ),
    bad(
        "gpt-negative-bos",
        lambda tmp: MiniTFGPTConfig(bos_token_id=-1),
        ValueError,
        r"bos_token_id must be null, an integer >= 0, got -1",
    ),
    bad(
        "encoder-pad-outside-vocab",
        lambda tmp: MiniTFEncoderConfig(vocab_size=10, pad_token_id=10),
        ValueError,
        r"pad_token_id=10 is outside the vocabulary",
    ),
    bad(
        "seq2seq-start-outside-vocab",
        lambda tmp: MiniTFSeq2SeqConfig(vocab_size=50, decoder_start_token_id=60),
        ValueError,
        r"decoder_start_token_id=60 is outside the source or target vocabulary",
    ),
    bad(
        "seq2seq-eos-outside-source-vocab",
        lambda tmp: MiniTFSeq2SeqConfig(src_vocab_size=3),
        ValueError,
        r"eos_token_id=3 is outside the source or target vocabulary \(ids 0..2\)",
    ),
    bad(
        "gpt-dropout-above-1",
        lambda tmp: MiniTFGPTConfig(hidden_dropout=1.5),
        ValueError,
        r"hidden_dropout must be a finite number in \[0.0, 1.0\), got 1.5",
    ),
    bad(
        "encoder-negative-dropout",
        lambda tmp: MiniTFEncoderConfig(attention_dropout=-0.1),
        ValueError,
        r"attention_dropout must be a finite number in \[0.0, 1.0\), got -0.1",
    ),
    bad(
        "encoder-classifier-dropout",
        lambda tmp: MiniTFEncoderConfig(classifier_dropout=2),
        ValueError,
        r"classifier_dropout must be a finite number in \[0.0, 1.0\) or null, got 2",
    ),
    bad(
        "seq2seq-string-dropout",
        lambda tmp: MiniTFSeq2SeqConfig(hidden_dropout="0.1"),
        ValueError,
        r"hidden_dropout must be a finite number in \[0.0, 1.0\), got '0.1' \(str\)",
    ),
    bad(
        "seq2seq-label-smoothing-1",
        lambda tmp: MiniTFSeq2SeqConfig(label_smoothing=1.0),
        ValueError,
        r"label_smoothing must be a finite number in \[0, 1\), got 1.0",
    ),
    bad(
        "seq2seq-positive-mask-value",
        lambda tmp: MiniTFSeq2SeqConfig(attention_mask_value=1e9),
        ValueError,
        r"attention_mask_value must be a finite number <= 0 or null, got 1000000000.0",
    ),
    bad(
        "gpt-zero-eps",
        lambda tmp: MiniTFGPTConfig(layer_norm_eps=0),
        ValueError,
        r"layer_norm_eps must be a finite number > 0",
    ),
    bad(
        "gpt-nan-rope-theta",
        lambda tmp: MiniTFGPTConfig(rope_theta=float("nan")),
        ValueError,
        r"rope_theta must be a finite number > 0, got nan",
    ),
    bad(
        "gpt-infinite-eps",
        lambda tmp: MiniTFGPTConfig(layer_norm_eps=float("inf")),
        ValueError,
        r"layer_norm_eps must be a finite number > 0, got inf",
    ),
    bad(
        "encoder-infinite-eps",
        lambda tmp: MiniTFEncoderConfig(layer_norm_eps=float("inf")),
        ValueError,
        r"layer_norm_eps must be a finite number > 0, got inf",
    ),
    bad(
        "seq2seq-infinite-eps",
        lambda tmp: MiniTFSeq2SeqConfig(layer_norm_eps=float("inf")),
        ValueError,
        r"layer_norm_eps must be a finite number > 0, got inf",
    ),
    bad(
        "gpt-infinite-rope-theta",
        lambda tmp: MiniTFGPTConfig(rope_theta=float("inf")),
        ValueError,
        r"rope_theta must be a finite number > 0, got inf",
    ),
    bad(
        "encoder-infinite-initializer-range",
        lambda tmp: MiniTFEncoderConfig(initializer_range=float("inf")),
        ValueError,
        r"initializer_range must be a finite number >= 0, got inf",
    ),
    bad(
        "seq2seq-minus-infinite-mask-value",
        lambda tmp: MiniTFSeq2SeqConfig(attention_mask_value=float("-inf")),
        ValueError,
        r"attention_mask_value must be a finite number <= 0 or null, got -inf",
    ),
    bad(
        "gpt-dropout-1",
        lambda tmp: MiniTFGPTConfig(attention_dropout=1.0),
        ValueError,
        r"attention_dropout must be a finite number in \[0.0, 1.0\), got 1.0",
    ),
    bad(
        "folder-config-infinite-eps",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, edit_config(layer_norm_eps=float("inf")))),
        ValueError,
        r"layer_norm_eps must be a finite number > 0, got inf",
    ),
    bad(
        "folder-config-infinite-eps-remote-code",
        lambda tmp: AutoModelForCausalLM.from_pretrained(
            saved_gpt(tmp, edit_config(layer_norm_eps=float("inf"))), trust_remote_code=True
        ),
        ValueError,
        r"layer_norm_eps must be a finite number > 0, got inf",
    ),
    # Numbers given to the command line and to the API it calls: finite and in range, refused before any work.
    bad(
        "cli-learning-rate-inf",
        lambda tmp: refused_arguments(*TRAIN_GPT, "--learning-rate", "inf"),
        CommandFailed,
        r"exit 2: minitf train gpt: error: argument --learning-rate: must be a finite number > 0, got inf",
    ),
    bad(
        "cli-learning-rate-nan",
        lambda tmp: refused_arguments(*TRAIN_GPT, "--learning-rate", "nan"),
        CommandFailed,
        r"argument --learning-rate: must be a finite number > 0, got nan",
    ),
    bad(
        "cli-weight-decay-inf",
        lambda tmp: refused_arguments(*TRAIN_GPT, "--weight-decay", "inf"),
        CommandFailed,
        r"argument --weight-decay: must be a finite number >= 0, got inf",
    ),
    bad(
        "cli-epochs-inf",
        lambda tmp: refused_arguments(*TRAIN_GPT, "--epochs", "inf"),
        CommandFailed,
        r"argument --epochs: must be a finite number > 0 and <= 1,000,000, got inf",
    ),
    bad(
        "cli-epochs-1e300",
        lambda tmp: refused_arguments(*TRAIN_GPT, "--epochs", "1e300"),
        CommandFailed,
        r"argument --epochs: must be a finite number > 0 and <= 1,000,000, got 1e300",
    ),
    bad(
        "cli-warmup-inf",
        lambda tmp: refused_arguments(*TRAIN_GPT, "--warmup", "inf"),
        CommandFailed,
        r"argument --warmup: must be a finite number >= 0 and <= 1,000,000,000, got inf",
    ),
    bad(
        "cli-max-steps-2-63",
        lambda tmp: refused_arguments(*TRAIN_GPT, "--max-steps", 2**63),
        CommandFailed,
        r"argument --max-steps: must be >= 1 and <= 1,000,000,000, got 9223372036854775808",
    ),
    bad(
        "cli-batch-size-1e30",
        lambda tmp: refused_arguments(*TRAIN_GPT, "--batch-size", 10**30),
        CommandFailed,
        r"argument --batch-size: must be >= 1 and <= 1,000,000,000",
    ),
    bad(
        "cli-vocab-size-1e12",
        lambda tmp: refused_arguments(*TRAIN_GPT, "--vocab-size", 10**12),
        CommandFailed,
        r"argument --vocab-size: must be >= 1 and <= 1,000,000, got 1000000000000",
    ),
    bad(
        "cli-seed-2-70",
        lambda tmp: refused_arguments(*TRAIN_GPT, "--seed", 2**70),
        CommandFailed,
        r"argument --seed: must be >= 0 and < 4,294,967,296, got 1180591620717411303424",
    ),
    bad(
        "cli-seed-negative",
        lambda tmp: refused_arguments("generate", "model", "hi", "--seed", -1),
        CommandFailed,
        r"exit 2: minitf generate: error: argument --seed: must be >= 0 and < 4,294,967,296, got -1",
    ),
    bad(
        "cli-steps-scale-inf",
        lambda tmp: refused_arguments("quickstart", "--steps-scale", "inf"),
        CommandFailed,
        r"argument --steps-scale: must be a finite number > 0 and <= 1,000, got inf",
    ),
    bad(
        "cli-temperature-1e-300",
        lambda tmp: refused_arguments("generate", "model", "hi", "--sample", "--temperature", "1e-300"),
        CommandFailed,
        r"argument --temperature: must be a finite number >= 0.0001, got 1e-300 \(a lower temperature is greedy",
    ),
    bad(
        "cli-max-new-tokens-1e12",
        lambda tmp: refused_arguments("generate", "model", "hi", "--max-new-tokens", 10**12),
        CommandFailed,
        r"argument --max-new-tokens: must be >= 1 and <= 1,000,000, got 1000000000000",
    ),
    bad(
        "cli-num-beams-1e9",
        lambda tmp: refused_arguments("translate", "model", "hi", "--num-beams", 10**9),
        CommandFailed,
        r"argument --num-beams: must be >= 1 and <= 1,000, got 1000000000",
    ),
    bad(
        "cli-port-past-65535",
        lambda tmp: refused_arguments("serve", "model", "--port", 70000),
        CommandFailed,
        r"argument --port: must be >= 1 and <= 65,535, got 70000",
    ),
    bad(
        "cli-convert-max-length-1e30",
        lambda tmp: refused_arguments(
            "convert", "miniembed", "model.safetensors", "--tokenizer", "t.json", "--out", "o", "--max-length", 10**30
        ),
        CommandFailed,
        r"argument --max-length: must be >= 1 and <= 1,000,000,000",
    ),
    bad(
        "api-learning-rate-inf",
        lambda tmp: TrainSettings(learning_rate=float("inf")),
        TrainingError,
        r"learning_rate must be a finite number > 0, got inf",
    ),
    bad(
        "api-epochs-inf",
        lambda tmp: TrainSettings(epochs=float("inf")),
        TrainingError,
        r"epochs must be a finite number in \(0, 1000000\], got inf",
    ),
    bad(
        "api-warmup-nan",
        lambda tmp: TrainSettings(warmup=float("nan")),
        TrainingError,
        r"warmup must be a finite number in \[0, 1000000000\], got nan",
    ),
    bad(
        "api-warmup-past-max-steps",
        lambda tmp: TrainSettings(max_steps=10, warmup=1e300),
        TrainingError,
        r"warmup must be a finite number in \[0, 1000000000\], got 1e\+300",
    ),
    bad(
        "api-warmup-past-the-epochs",
        lambda tmp: train_gpt(
            "abcd " * 40,
            tmp / "out",
            settings=TrainSettings(warmup=500, batch_size=4, progress=False),
            config_overrides=dict(
                max_position_embeddings=16, hidden_size=16, num_hidden_layers=1, num_attention_heads=2
            ),
        ),
        TrainingError,
        r"warmup=500 steps is more than this run's \d+ steps \(1 epochs of \d+ batches\)",
    ),
    bad(
        "api-warmup-more-than-steps",
        lambda tmp: TrainSettings(max_steps=10, warmup=20),
        TrainingError,
        r"warmup=20 steps is more than max_steps=10",
    ),
    bad(
        "api-seed-2-70",
        lambda tmp: TrainSettings(seed=2**70),
        TrainingError,
        r"seed must be an integer in \[0, 4294967295\], got 1180591620717411303424",
    ),
    bad(
        "api-float-batch-size",
        lambda tmp: TrainSettings(batch_size=8.5),
        TrainingError,
        r"batch_size must be an integer in \[1, 1000000000\], got 8.5",
    ),
    bad(
        "api-steps-scale-inf",
        lambda tmp: QuickstartSteps().scaled(float("inf")),
        ValueError,
        r"step scale \(--steps-scale\) must be a finite number in \(0, 1000\], got inf",
    ),
    bad(
        "api-bpe-vocab-1e9",
        lambda tmp: train_bpe_tokenizer(["abc"], vocab_size=10**9),
        ValueError,
        r"vocab_size=1000000000 is more than the 1,000,000 tokens",
    ),
    bad(
        "api-wordlevel-vocab-1e30",
        lambda tmp: train_wordlevel_tokenizer(["a b"], vocab_size=10**30),
        ValueError,
        r"vocab_size=10+ is more than the 1,000,000 tokens",
    ),
    bad(
        "gpt-unknown-positions",
        lambda tmp: MiniTFGPTConfig(position_embedding_type="alibi"),
        ValueError,
        r"position_embedding_type must be one of \('learned', 'rope'\), got 'alibi'",
    ),
    bad(
        "gpt-unknown-overflow",
        lambda tmp: MiniTFGPTConfig(context_overflow="wrap"),
        ValueError,
        r"context_overflow must be one of \('error', 'crop'\)",
    ),
    bad(
        "seq2seq-unknown-norm",
        lambda tmp: MiniTFSeq2SeqConfig(norm_type="rms"),
        ValueError,
        r"norm_type must be one of .*'layer_norm'.* got 'rms'",
    ),
    bad(
        "gpt-string-bool",
        lambda tmp: MiniTFGPTConfig(use_cache="yes"),
        ValueError,
        r"use_cache must be true or false, got 'yes'",
    ),
    bad(
        "encoder-int-bool",
        lambda tmp: MiniTFEncoderConfig(scale_embeddings=1),
        ValueError,
        r"scale_embeddings must be true or false, got 1 \(int\)",
    ),
    bad(
        "gpt-heads-do-not-divide",
        lambda tmp: MiniTFGPTConfig(hidden_size=30, num_attention_heads=4),
        ValueError,
        r"hidden_size=30 is not divisible by num_attention_heads=4.*\[1, 2, 3, 5, 6, 10, 15, 30\]",
    ),
    bad(
        "gpt-rope-odd-head-dim",
        lambda tmp: MiniTFGPTConfig(hidden_size=18, num_attention_heads=2, position_embedding_type="rope"),
        ValueError,
        r"Rotary positions need an even head dimension.*= 9",
    ),
    bad(
        "seq2seq-odd-hidden-size",
        lambda tmp: MiniTFSeq2SeqConfig(hidden_size=9, num_attention_heads=3),
        ValueError,
        r"sinusoidal positions need an even hidden_size, got 9",
    ),
    bad(
        "gpt-assignment-after-construction",
        lambda tmp: setattr(MiniTFGPTConfig(), "hidden_dropout", 3),
        ValueError,
        r"hidden_dropout must be a finite number in \[0.0, 1.0\), got 3",
    ),
    bad(
        "gpt-from-pretrained-kwarg",
        lambda tmp: AutoConfig.from_pretrained(saved_gpt(tmp), num_attention_heads=0),
        ValueError,
        r"num_attention_heads must be a positive integer, got 0",
    ),
    # Saved folders: a hand-edited or damaged config.json or model.safetensors.
    bad(
        "folder-config-string-size",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, edit_config(hidden_size="16"))),
        ValueError,
        r"hidden_size must be a positive integer, got '16'",
    ),
    bad(
        "folder-config-unknown-activation",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, edit_config(hidden_act="gelu2"))),
        ValueError,
        r"hidden_act .* got 'gelu2'",
    ),
    bad(
        "folder-config-pad-outside-vocab",
        lambda tmp: AutoConfig.from_pretrained(saved_gpt(tmp, edit_config(pad_token_id=40))),
        ValueError,
        r"pad_token_id=40 is outside the vocabulary",
    ),
    bad(
        "folder-config-not-json",
        lambda tmp: AutoModelForCausalLM.from_pretrained(
            saved_gpt(tmp, lambda folder: write(folder / "config.json", "{hidden_size: 16"))
        ),
        OSError,
        r"config.json' is not a valid JSON file",
    ),
    bad(
        "folder-weights-missing",
        lambda tmp: AutoModelForCausalLM.from_pretrained(
            saved_gpt(tmp, lambda folder: (folder / "model.safetensors").unlink())
        ),
        OSError,
        r"no file named model.safetensors",
    ),
    bad(
        "folder-weights-truncated",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, truncate_weights(-64))),
        SafetensorError,
        r"deserializing header: incomplete metadata",
    ),
    bad(
        "folder-weights-header-cut",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, truncate_weights(6))),
        SafetensorError,
        r"deserializing header",
    ),
    bad(
        "folder-config-disagrees-with-weights",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, edit_config(hidden_size=32))),
        RuntimeError,
        r"ignore_mismatched_sizes",
    ),
    bad(
        "folder-config-billion-layers",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, edit_config(num_hidden_layers=10**9))),
        ValueError,
        r"num_hidden_layers=1000000000 is more than",
    ),
    bad(
        "folder-config-hidden-2-40",
        lambda tmp: AutoConfig.from_pretrained(saved_gpt(tmp, edit_config(hidden_size=2**40, intermediate_size=None))),
        ValueError,
        r"hidden_size=1099511627776 .* more than this machine's",
    ),
    bad(
        "folder-config-layers-not-on-disk",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, edit_config(num_hidden_layers=2))),
        ValueError,
        r"the weights lack 12 tensors .*model.layers.1",
    ),
    bad(
        "convert-api-out-holds-input",
        lambda tmp: keeping(
            checkpoint_folder(tmp) / "checkpoint.pt",
            lambda: convert_char_gpt(
                tmp / "run" / "checkpoint.pt", tmp / "run", vocab=CHAR_GPT / "vocab.json", num_heads=4, overwrite=True
            ),
        ),
        OutputFolderError,
        r"output folder .*run holds the input .*checkpoint.pt: writing there would delete",
    ),
    # Commands meeting folders they do not use: each names the folder, what it holds and the command that fits it.
    bad(
        "embed-gpt-folder",
        lambda tmp: minitf("embed", saved_model(tmp, "gpt"), "hi"),
        CommandFailed,
        r"exit 2: .*gpt holds a gpt model \(minitf_gpt, MiniTFGPTForCausalLM\); `minitf embed` needs an encoder "
        r"model: use `minitf generate`",
    ),
    bad(
        "embed-seq2seq-folder",
        lambda tmp: minitf("embed", saved_model(tmp, "seq2seq"), "hi"),
        CommandFailed,
        r"seq2seq holds a seq2seq model \(minitf_seq2seq, .*`minitf embed` needs an encoder model: use `minitf "
        r"translate`",
    ),
    bad(
        "embed-native-gpt-export",
        lambda tmp: minitf(
            "embed",
            saved_gpt(
                tmp,
                lambda folder: write(
                    folder / "config.json", json.dumps({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]})
                ),
            ),
            "hi",
        ),
        CommandFailed,
        r"holds a gpt model \(gpt2, GPT2LMHeadModel\); `minitf embed` needs an encoder model",
    ),
    bad(
        "generate-encoder-folder",
        lambda tmp: minitf("generate", saved_model(tmp, "encoder"), "hi"),
        CommandFailed,
        r"encoder holds an encoder model \(minitf_encoder, MiniTFEncoderModel\); `minitf generate` needs a gpt "
        r"model: use `minitf embed`",
    ),
    bad(
        "generate-seq2seq-folder",
        lambda tmp: minitf("generate", saved_model(tmp, "seq2seq"), "hi"),
        CommandFailed,
        r"`minitf generate` needs a gpt model: use `minitf translate`",
    ),
    bad(
        "translate-gpt-folder",
        lambda tmp: minitf("translate", saved_model(tmp, "gpt"), "hi"),
        CommandFailed,
        r"gpt holds a gpt model .*`minitf translate` needs a seq2seq model: use `minitf generate`",
    ),
    bad(
        "translate-encoder-folder",
        lambda tmp: minitf("translate", saved_model(tmp, "encoder"), "hi"),
        CommandFailed,
        r"`minitf translate` needs a seq2seq model: use `minitf embed`",
    ),
    bad(
        "generate-onnx-export",
        lambda tmp: minitf("generate", engine_export(tmp, "onnxruntime", "embedder", "minitf_encoder"), "hi"),
        CommandFailed,
        r"export is an onnxruntime embedder export of a minitf_encoder model, which `minitf generate` does not "
        r"run; use `minitf embed`",
    ),
    bad(
        "embed-ctranslate2-export",
        lambda tmp: minitf("embed", engine_export(tmp, "ctranslate2", "generator", "minitf_gpt"), "hi"),
        CommandFailed,
        r"a ctranslate2 generator export of a minitf_gpt model, which `minitf embed` does not run; use `minitf "
        r"generate`",
    ),
    bad(
        "info-gguf-file",
        lambda tmp: minitf("info", write(tmp / "model.gguf", "GGUF\x03")),
        CommandFailed,
        r"model.gguf is a GGUF file \(minitf export gguf\), which runs in llama.cpp or Ollama",
    ),
    bad(
        "info-config-not-json",
        lambda tmp: minitf("info", saved_gpt(tmp, lambda folder: write(folder / "config.json", "{hidden_size: 16"))),
        CommandFailed,
        r"exit 2: minitf info: error: .*config.json is not JSON \(Expecting property name.*save or convert",
    ),
    bad(
        "info-config-a-list",
        lambda tmp: minitf("info", saved_gpt(tmp, lambda folder: write(folder / "config.json", "[1, 2]"))),
        CommandFailed,
        r"config.json holds a JSON list, not an object",
    ),
    bad(
        "info-safetensors-not-json",
        lambda tmp: minitf("info", saved_gpt(tmp, with_safetensors_header(b"{not json"))),
        CommandFailed,
        r"model.safetensors is not a readable safetensors file \(.*invalid JSON",
    ),
    bad(
        "info-safetensors-header-a-list",
        lambda tmp: minitf("info", saved_gpt(tmp, with_safetensors_header(b"[1, 2]"))),
        CommandFailed,
        r"model.safetensors is not a readable safetensors file \(.*invalid type",
    ),
    bad(
        "info-safetensors-offsets-past-end",
        lambda tmp: minitf(
            "info",
            saved_gpt(
                tmp, with_safetensors_header(b'{"w": {"dtype": "F32", "shape": [400], "data_offsets": [0, 1600]}}')
            ),
        ),
        CommandFailed,
        r"model.safetensors is not a readable safetensors file \(.*file not fully covered",
    ),
    bad(
        "info-safetensors-unknown-dtype",
        lambda tmp: minitf(
            "info",
            saved_gpt(tmp, with_safetensors_header(b'{"w": {"dtype": "F99", "shape": [4], "data_offsets": [0, 16]}}')),
        ),
        CommandFailed,
        r"model.safetensors is not a readable safetensors file \(.*unknown variant `F99`",
    ),
    bad(
        "info-card-bad-yaml",
        lambda tmp: minitf("info", saved_gpt(tmp, lambda folder: write(folder / "README.md", BAD_YAML_CARD))),
        CommandFailed,
        r"exit 2: minitf info: error: .*README.md: its YAML metadata does not parse \(line 3, column 5: expected "
        r"',' or '\]'.*fix the lines between its --- markers",
    ),
    bad(
        "push-card-bad-yaml",
        lambda tmp: minitf(
            "push", saved_gpt(tmp, lambda folder: write(folder / "README.md", BAD_YAML_CARD)), "me/model"
        ),
        CommandFailed,
        r"exit 2: minitf push: error: .*gpt/README.md: its YAML metadata does not parse \(line 3",
    ),
    bad(
        "serve-ctranslate2-export",
        lambda tmp: minitf("serve", engine_export(tmp, "ctranslate2", "generator", "minitf_gpt")),
        CommandFailed,
        r"exit 2: minitf serve: error: cannot serve .*export: it is an engine export \(ctranslate2 generator\), which "
        r"minitf generate, translate or embed run; serve the MiniTF folder",
    ),
    bad(
        "info-export-file-not-json",
        lambda tmp: minitf("info", write(tmp / "export/minitf_export.json", "{engine").parent),
        CommandFailed,
        r"minitf_export.json is not JSON \(Expecting property name.*export the model again with minitf export",
    ),
    bad(
        "generate-export-file-a-list",
        lambda tmp: minitf("generate", write(tmp / "export/minitf_export.json", "[1]").parent, "hi"),
        CommandFailed,
        r"minitf_export.json holds a JSON list, not an object; export the model again",
    ),
    bad(
        "translate-empty-text",
        lambda tmp: minitf("translate", make_seq2seq_source(tmp), ""),
        CommandFailed,
        r"exit 2: minitf translate: error: Cannot translate an empty text; give at least one word",
    ),
    bad(
        "export-ctranslate2-export",
        lambda tmp: minitf(
            "export", "gguf", engine_export(tmp, "ctranslate2", "generator", "minitf_gpt"), tmp / "out.gguf"
        ),
        CommandFailed,
        r"export is an engine export \(it holds minitf_export.json\); export the MiniTF folder it was made from",
    ),
    bad(
        "export-config-a-list",
        lambda tmp: minitf(
            "export", "native", saved_gpt(tmp, lambda folder: write(folder / "config.json", "[1]")), tmp / "out"
        ),
        CommandFailed,
        r"gpt holds no model_type, not a MiniTF model \(model_type minitf_gpt",
    ),
    bad(
        "export-out-named-as-positional",
        lambda tmp: minitf("export", "native", char_gpt_folder(tmp), write(tmp / "notes/todo.txt", "mine").parent),
        CommandFailed,
        r"exit 2: minitf export native: error: OUT .*notes is not empty; choose another folder or pass --overwrite",
    ),
    bad(
        "export-config-not-json",
        lambda tmp: minitf(
            "export", "native", saved_gpt(tmp, lambda folder: write(folder / "config.json", "{model")), tmp / "out"
        ),
        CommandFailed,
        r"config.json is not JSON \(Expecting",
    ),
    bad(
        "generate-empty-prompt",
        lambda tmp: minitf("generate", char_gpt_folder(tmp), "ab", ""),
        CommandFailed,
        r"exit 2: minitf generate: error: prompt \[1\] is empty; give the text to continue",
    ),
    bad(
        "generate-native-gpt2-past-positions",
        lambda tmp: minitf("generate", native_gpt_folder(tmp), "abc " * 10),
        CommandFailed,
        r"exit 2: minitf generate: error: the prompt is 40 tokens; this model reads at most 16",
    ),
    bad(
        "embed-empty-text",
        lambda tmp: minitf("embed", saved_model(tmp, "encoder"), "a cat", ""),
        CommandFailed,
        r"exit 2: minitf embed: error: text \[1\] is empty; every text to embed needs at least one character",
    ),
    # Model inputs and generation: the argument, its shape or value, and what is expected.
    bad(
        "gpt-float-ids",
        lambda tmp: tiny_gpt()(torch.ones(1, 4)),
        ValueError,
        r"input_ids must hold integer token ids \(torch.long\), got dtype torch.float32",
    ),
    bad(
        "gpt-1d-ids",
        lambda tmp: tiny_gpt()(torch.ones(4, dtype=torch.long)),
        ValueError,
        r"input_ids must have shape \(batch_size, sequence_length\), got \(4,\).*input_ids\[None\]",
    ),
    bad(
        "gpt-id-past-vocab",
        lambda tmp: tiny_gpt()(torch.tensor([[1, 40]])),
        ValueError,
        r"token id 40, outside the vocabulary \(vocab_size=40\)",
    ),
    bad(
        "gpt-negative-position",
        lambda tmp: tiny_gpt()(torch.ones(1, 3, dtype=torch.long), position_ids=torch.tensor([[-1, 0, 1]])),
        ValueError,
        r"position_ids must be >= 0, got -1",
    ),
    bad(
        "gpt-position-past-table",
        lambda tmp: tiny_gpt()(torch.ones(1, 3, dtype=torch.long), position_ids=torch.tensor([[14, 15, 16]])),
        ValueError,
        r"Position 16 is past this model's max_position_embeddings=16",
    ),
    bad(
        "gpt-labels-past-vocab",
        lambda tmp: tiny_gpt()(torch.ones(1, 3, dtype=torch.long), labels=torch.tensor([[1, 2, 45]])),
        ValueError,
        r"labels contains token id 45, outside the vocabulary \(vocab_size=40\)",
    ),
    bad(
        "gpt-embeds-wrong-width",
        lambda tmp: tiny_gpt()(inputs_embeds=torch.zeros(1, 3, 8)),
        ValueError,
        r"inputs_embeds must have shape \(batch_size, sequence_length, hidden_size=16\), got \(1, 3, 8\)",
    ),
    bad(
        "gpt-mask-longer-than-ids",
        lambda tmp: tiny_gpt()(torch.ones(1, 3, dtype=torch.long), attention_mask=torch.ones(1, 5)),
        ValueError,
        r"attention_mask must have the shape .* = \(1, 3\).* got \(1, 5\)",
    ),
    bad(
        "gpt-ids-and-embeds",
        lambda tmp: tiny_gpt()(torch.ones(1, 3, dtype=torch.long), inputs_embeds=torch.zeros(1, 3, 16)),
        ValueError,
        r"exactly one of input_ids or inputs_embeds",
    ),
    bad(
        "gpt-generate-past-positions",
        lambda tmp: tiny_gpt().generate(torch.ones(1, 10, dtype=torch.long), max_new_tokens=20, do_sample=False),
        ValueError,
        r"max_position_embeddings=16 \(learned positions\)",
    ),
    bad(
        "gpt-tuple-cache",
        lambda tmp: tiny_gpt()(torch.ones(1, 3, dtype=torch.long), past_key_values=((1, 2),)),
        ValueError,
        r"KV cache must be a transformers `Cache`.*got tuple",
    ),
    bad(
        "encoder-float-ids",
        lambda tmp: tiny_encoder()(torch.ones(2, 4)),
        ValueError,
        r"input_ids must hold integer token ids",
    ),
    bad(
        "encoder-negative-position",
        lambda tmp: tiny_encoder()(torch.ones(1, 3, dtype=torch.long), position_ids=torch.tensor([[0, -2, 1]])),
        ValueError,
        r"position_ids must be >= 0, got -2",
    ),
    bad(
        "encoder-embeds-wrong-width",
        lambda tmp: tiny_encoder()(inputs_embeds=torch.zeros(2, 3, 15)),
        ValueError,
        r"hidden_size=16\), got \(2, 3, 15\)",
    ),
    bad(
        "seq2seq-target-id-as-source",
        lambda tmp: tiny_seq2seq()(torch.tensor([[1, 45]]), decoder_input_ids=torch.tensor([[2]])),
        ValueError,
        r"token id 45, outside the source vocabulary \(src_vocab_size=40\). It lies in the target",
    ),
    bad(
        "seq2seq-float-decoder-ids",
        lambda tmp: tiny_seq2seq()(torch.tensor([[1, 5]]), decoder_input_ids=torch.ones(1, 2)),
        ValueError,
        r"decoder_input_ids \(target\) must hold integer token ids",
    ),
    bad(
        "seq2seq-labels-past-vocab",
        lambda tmp: tiny_seq2seq()(torch.tensor([[1, 5]]), labels=torch.tensor([[3, 60]])),
        ValueError,
        r"labels \(target\) contains token id 60, outside the vocabulary \(vocab_size=50\)",
    ),
    bad(
        "seq2seq-float16-original-norm",
        lambda tmp: tiny_seq2seq(norm_type="scalar_std_times_eps").half()(
            torch.tensor([[1, 5]]), decoder_input_ids=torch.tensor([[2]])
        ),
        ValueError,
        r"overflows float16.*dtype=torch.bfloat16 or float32",
    ),
    bad(
        "seq2seq-all-padding-source",
        lambda tmp: tiny_seq2seq()(
            torch.tensor([[1, 5]]), attention_mask=torch.zeros(1, 2), decoder_input_ids=torch.tensor([[2]])
        ),
        ValueError,
        r"Source rows \[0\] are all padding",
    ),
    # Tokenizers: malformed files name the file; text that cannot be tokenized says why.
    bad(
        "miniembed-vocab-not-json",
        lambda tmp: miniembed_tokenizer(write(tmp / "vocab.json", "{'word_to_id': {}")),
        ValueError,
        r"MiniEmbed tokenizer file .*vocab.json cannot be read as JSON",
    ),
    bad(
        "miniembed-vocab-missing",
        lambda tmp: miniembed_tokenizer(tmp / "absent.json"),
        ValueError,
        r"MiniEmbed tokenizer file .*absent.json does not exist",
    ),
    bad(
        "miniembed-vocab-a-list",
        lambda tmp: miniembed_tokenizer(write(tmp / "vocab.json", "[1, 2]")),
        ValueError,
        r"vocab.json must be a JSON object with a 'word_to_id' mapping .*got a JSON list",
    ),
    bad(
        "miniembed-vocab-string-id",
        lambda tmp: miniembed_tokenizer(write(tmp / "v.json", json.dumps({"word_to_id": {"[PAD]": 0, "cat": "x"}}))),
        ValueError,
        r"v.json: word_to_id must map each word to an integer id >= 0; got \[\('cat', 'x'\)\]",
    ),
    bad(
        "miniembed-vocab-duplicate-id",
        lambda tmp: miniembed_tokenizer({"word_to_id": {"[PAD]": 0, "a": 1, "b": 1}}),
        ValueError,
        r"maps two words to the same id",
    ),
    bad(
        "miniembed-vocab-special-ids",
        lambda tmp: miniembed_tokenizer(
            write(tmp / "v.json", json.dumps({"word_to_id": {"[UNK]": 0, "[PAD]": 1, "[CLS]": 2, "[SEP]": 3}}))
        ),
        ValueError,
        r"v.json must map \[PAD\] to 0",
    ),
    bad(
        "miniembed-max-length",
        lambda tmp: miniembed_tokenizer(MINIEMBED_VOCAB, max_length=1),
        ValueError,
        r"max_length must leave room for \[CLS\] and \[SEP\]",
    ),
    bad(
        "seq2seq-source-not-json",
        lambda tmp: MiniTFSeq2SeqTokenizer(write(tmp / "tokenizer_en.json", "{broken"), tmp / "tokenizer_it.json"),
        ValueError,
        r"source tokenizer file .*tokenizer_en.json is not a valid `tokenizers` JSON file",
    ),
    bad(
        "seq2seq-target-missing",
        lambda tmp: MiniTFSeq2SeqTokenizer(
            word_level(tmp, "en.json", ["[UNK]", "[PAD]", "[SOS]", "[EOS]"]), tmp / "it.json"
        ),
        ValueError,
        r"target tokenizer is missing.*it.json",
    ),
    bad(
        "seq2seq-special-ids-differ",
        lambda tmp: MiniTFSeq2SeqTokenizer(
            word_level(tmp, "en.json", ["[UNK]", "[PAD]", "[SOS]", "[EOS]"]),
            word_level(tmp, "it.json", ["[PAD]", "[UNK]", "[SOS]", "[EOS]"]),
        ),
        ValueError,
        r"ids \[0, 1, 2, 3\] in the source vocabulary but \[1, 0, 2, 3\] in the target",
    ),
    bad(
        "seq2seq-folder-vocab-broken",
        lambda tmp: AutoTokenizer.from_pretrained(broken_pair_folder(tmp)),
        ValueError,
        r"target tokenizer file .*target_tokenizer.json is not a valid",
    ),
    bad(
        "seq2seq-lone-surrogate",
        lambda tmp: pair_tokenizer()("a \ud800 cat"),
        ValueError,
        r"lone surrogate '\\ud800' at character 2",
    ),
    bad(
        "seq2seq-lone-surrogate-target",
        lambda tmp: pair_tokenizer()(text_target=["un chat", "\udcff"]),
        ValueError,
        r"lone surrogate '\\udcff' at character 0",
    ),
    bad(
        "bpe-file-not-json",
        lambda tmp: load_bpe_tokenizer(write(tmp / "bpe.json", "not json")),
        ValueError,
        r"bpe.json is not a `tokenizers` JSON file",
    ),
    bad(
        "bpe-file-missing",
        lambda tmp: load_bpe_tokenizer(tmp / "bpe.json"),
        ValueError,
        r"Tokenizer file .*bpe.json does not exist",
    ),
    bad(
        "bpe-vocab-too-small",
        lambda tmp: train_bpe_tokenizer(["abc"], vocab_size=100),
        ValueError,
        r"vocab_size=100 is too small for byte-level BPE: it needs at least 260",
    ),
    bad("char-empty-text", lambda tmp: char_tokenizer(""), ValueError, r"needs at least one character"),
    bad(
        "char-lone-surrogate",
        lambda tmp: char_tokenizer("ab\ud800"),
        ValueError,
        r"The characters \['\\ud800'\] are lone surrogates",
    ),
    bad(
        "bpe-training-lone-surrogate",
        lambda tmp: train_bpe_tokenizer(["ab\udc80"], vocab_size=300),
        ValueError,
        r"can't encode character '\\udc80' in position 2: surrogates not allowed",
    ),
    bad("char-duplicate-chars", lambda tmp: char_tokenizer(["a", "b", "a"]), ValueError, r"has duplicates"),
    bad(
        "wrap-missing-special",
        lambda tmp: wrap_tokenizer(Tokenizer(models.WordLevel({"a": 0}, unk_token="a")), {"pad_token": "<pad>"}),
        ValueError,
        r"Special tokens \['<pad>'\] are not in the tokenizer's vocabulary",
    ),
    # Conversion output: nothing lost, nothing silently wrong.
    bad(
        "convert-out-holds-input",
        lambda tmp: keeping(
            checkpoint_folder(tmp) / "checkpoint.pt",
            lambda: convert(
                "char-gpt",
                tmp / "run/checkpoint.pt",
                "--vocab",
                CHAR_GPT / "vocab.json",
                "--num-heads",
                4,
                "--out",
                tmp / "run",
                "--overwrite",
            ),
        ),
        CommandFailed,
        r"exit 2: .*--out .*run holds the input .*checkpoint.pt",
    ),
    bad(
        "output-is-input",
        lambda tmp: check_output_dir(tmp, True, [tmp, None]),
        OutputFolderError,
        r"output folder .* is the input .*writing there would delete it",
    ),
    bad(
        "convert-out-is-a-file",
        lambda tmp: convert(
            "char-gpt",
            CHAR_GPT / "checkpoint.pt",
            "--vocab",
            CHAR_GPT / "vocab.json",
            "--num-heads",
            4,
            "--out",
            write(tmp / "out", "x"),
        ),
        CommandFailed,
        r"--out .*out exists and is not a folder",
    ),
    bad(
        "convert-out-not-empty",
        lambda tmp: convert(
            "char-gpt",
            CHAR_GPT / "checkpoint.pt",
            "--vocab",
            CHAR_GPT / "vocab.json",
            "--num-heads",
            4,
            "--out",
            write(tmp / "out/keep.txt", "mine").parent,
        ),
        CommandFailed,
        r"--out .*out is not empty.*--overwrite",
    ),
    bad(
        "convert-overwrite-project-checkout",
        lambda tmp: untouched(
            project_checkout(tmp),
            lambda: convert(
                "char-gpt",
                CHAR_GPT / "checkpoint.pt",
                "--vocab",
                CHAR_GPT / "vocab.json",
                "--num-heads",
                4,
                "--out",
                tmp / "project",
                "--overwrite",
            ),
        ),
        CommandFailed,
        r"exit 2: .*--out .*project holds \.git/, pyproject.toml, which no model folder holds; --overwrite only "
        r"replaces a model folder: choose another folder or delete it yourself",
    ),
    bad(
        "overwrite-folder-without-model",
        lambda tmp: untouched(
            folder_of(tmp / "mine", "notes.txt", "photos/a.jpg"), lambda: check_output_dir(tmp / "mine", True)
        ),
        OutputFolderError,
        r"output folder .*mine holds no model \(found: notes.txt, photos/\); overwrite=True only "
        r"replaces a model folder",
    ),
    bad(
        "sentence-transformer-save-over-a-home",
        lambda tmp: untouched(
            folder_of(tmp / "home", ".bashrc", ".ssh/id_rsa"),
            lambda: save_sentence_transformer(tiny_encoder(), char_tokenizer("abc"), tmp / "home"),
        ),
        OutputFolderError,
        r"output folder .*home holds \.bashrc, \.ssh/, which no model folder holds",
    ),
    bad(
        "train-out-dangling-link",
        lambda tmp: minitf(
            "train",
            "gpt",
            "--data",
            text_file(tmp),
            "--out",
            linked(tmp, tmp / "nowhere"),
            "--max-steps",
            1,
            "--no-progress",
        ),
        CommandFailed,
        r"exit 2: minitf train: error: --out .*link is a symbolic link to .*nowhere, which does not exist; remove "
        r"the link or choose another path",
    ),
    bad(
        "train-out-link-to-a-folder",
        lambda tmp: minitf(
            "train",
            "gpt",
            "--data",
            text_file(tmp),
            "--out",
            linked(tmp, write(tmp / "real/config.json", "{}").parent),
            "--max-steps",
            1,
            "--no-progress",
        ),
        CommandFailed,
        r"exit 2: .*--out .*link is a symbolic link to .*real; give that path itself or another one: the output "
        r"would replace the link",
    ),
    bad(
        "convert-out-under-a-file",
        lambda tmp: convert(
            "char-gpt",
            CHAR_GPT / "checkpoint.pt",
            "--vocab",
            CHAR_GPT / "vocab.json",
            "--num-heads",
            4,
            "--out",
            write(tmp / "notes.txt", "mine") / "model",
        ),
        CommandFailed,
        r"exit 2: .*--out .*notes.txt/model cannot be made: .*notes.txt is not a folder; choose a path inside a "
        r"folder",
    ),
    bad(
        "gguf-overwrite-not-a-gguf",
        lambda tmp: untouched(
            write(tmp / "notes/todo.txt", "mine").parent,
            lambda: export_gguf(tmp / "nowhere", tmp / "notes/todo.txt", overwrite=True),
        ),
        OutputFolderError,
        r"output file .*todo.txt is not a GGUF file \(it does not start with b'GGUF'\); overwrite=True only replaces "
        r"a GGUF file",
    ),
    bad(
        "gguf-out-dangling-link",
        lambda tmp: export_gguf(tmp / "nowhere", linked(tmp, tmp / "gone.gguf")),
        OutputFolderError,
        r"output file .*link is a symbolic link to .*gone.gguf, which does not exist",
    ),
    bad(
        "convert-heads-unknown",
        lambda tmp: require_heads(None, 12, "--num-heads"),
        ConversionError,
        r"hidden size 12 splits into any of \[1, 2, 3, 4, 6, 12\] heads",
    ),
    bad(
        "convert-heads-not-dividing",
        lambda tmp: require_heads(5, 12, "--num-heads"),
        ConversionError,
        r"5 heads do not divide hidden size 12; valid: \[1, 2, 3, 4, 6, 12\]",
    ),
    bad(
        "convert-heads-of-a-huge-width",
        lambda tmp: require_heads(None, 2**40, "--num-heads"),
        ConversionError,
        r"hidden size 1099511627776 splits into any of \[1, 2, 4, .*, 549755813888, 1099511627776\] heads",
    ),
    bad(
        "convert-float16-overflow",
        lambda tmp: convert_char_gpt(
            huge_weight_checkpoint(tmp),
            tmp / "out",
            vocab=json.loads((CHAR_GPT / "vocab.json").read_text()),
            num_heads=4,
            dtype="float16",
        ),
        ConversionError,
        r"model.norm.weight \(from ln_f.weight\) has values up to 1e\+06, beyond float16's range "
        r"\(largest 6.55e\+04\).*bfloat16",
    ),
    bad(
        "convert-cli-float16-overflow",
        lambda tmp: convert(
            "char-gpt",
            huge_weight_checkpoint(tmp),
            "--vocab",
            CHAR_GPT / "vocab.json",
            "--num-heads",
            4,
            "--dtype",
            "float16",
            "--out",
            tmp / "out",
        ),
        CommandFailed,
        r"exit 2: .*model.norm.weight \(from ln_f.weight\) has values up to",
    ),
    bad(
        "output-holds-input",
        lambda tmp: check_output_dir(tmp, True, [write(tmp / "sub/a.pt", "x")]),
        OutputFolderError,
        r"holds the input .*a.pt",
    ),
    bad(
        "output-shape-mismatch",
        lambda tmp: write_safetensors(
            tmp / "w.safetensors", [TensorPlan("w", (2, 2), torch.float32, lambda: torch.zeros(3), origin="orig.w")]
        ),
        ConversionError,
        r"w \(from orig.w\) has shape \[3\], the model expects \[2, 2\]",
    ),
    bad(
        "output-overflow-in-atomic-folder",
        lambda tmp: _write_in_atomic_folder(tmp, [TensorPlan("big", (1,), torch.float16, lambda: torch.tensor([1e5]))]),
        ConversionError,
        r"big has values up to 1e\+05, beyond float16's range",
    ),
]


def _write_in_atomic_folder(tmp: Path, plans: list[TensorPlan]) -> None:
    with atomic_output_dir(tmp / "out") as work:
        write_safetensors(work / "model.safetensors", plans)


@pytest.mark.parametrize("action, error, message", BAD_INPUTS)
def test_bad_input_is_refused_naming_the_problem(tmp_path, action, error, message):
    with pytest.raises(error, match=message):
        action(tmp_path)
    leftovers = [path for path in tmp_path.rglob(".*") if ".writing-" in path.name or ".old-" in path.name]
    assert not leftovers, f"half-written output left behind: {leftovers}"


def test_bad_input_table_is_large_and_ids_unique():
    ids = [row.id for row in BAD_INPUTS]
    assert len(ids) >= 60 and len(set(ids)) == len(ids)


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_leftovers_of_killed_runs_are_removed_or_restored_and_reported(tmp_path, caplog):
    out = tmp_path / "out"
    stale = tmp_path / f".out.converting-{_dead_pid()}-0123abcd"
    legacy = tmp_path / ".out.converting-89abcdef"  # named before the PID was part of the name
    running = tmp_path / f".out.converting-{os.getpid()}-fedcba98"
    other = tmp_path / f".elsewhere.converting-{_dead_pid()}-0123abcd"
    for folder in (stale, legacy, running, other):
        write(folder / "model.safetensors", "partial")
    previous = tmp_path / f".out.old-{_dead_pid()}-11112222"  # killed between moving `out` away and moving in the new
    write(previous / "config.json", "{}")
    with caplog.at_level("WARNING", logger="hf_minitf.safety.output_folders"):
        with pytest.raises(OutputFolderError, match="not empty"):
            with atomic_output_dir(out):
                pass
    assert (out / "config.json").read_text() == "{}", "the interrupted run's previous folder was not restored"
    assert not stale.exists() and not legacy.exists() and not previous.exists()
    assert running.exists(), "a folder a live process is writing was removed"
    assert other.exists(), "a leftover of another output folder was removed"
    reported = caplog.text
    assert f"restored {out}" in reported and stale.name in reported and legacy.name in reported


def test_save_pretrained_keeps_an_unreadable_card_and_saves_the_rest(tmp_path, caplog):
    """A card whose YAML does not parse neither stops save_pretrained half-way (the tokenizer saved after it) nor
    is rewritten: the one in the target folder is kept as it was, the source folder's is not carried over."""
    model = AutoModelForCausalLM.from_pretrained(
        saved_gpt(tmp_path, lambda folder: write(folder / "README.md", BAD_YAML_CARD))
    )
    kept = write(tmp_path / "kept/README.md", BAD_YAML_CARD).parent
    with caplog.at_level("WARNING", logger="hf_minitf.hub.cards"):
        model.save_pretrained(kept)
        model.save_pretrained(tmp_path / "fresh")
    assert (kept / "README.md").read_text() == BAD_YAML_CARD and (kept / "model.safetensors").is_file()
    fresh_card = (tmp_path / "fresh/README.md").read_text()
    assert "tags: x" not in fresh_card and "- minitf" in fresh_card
    assert "the card was left as it was" in caplog.text and "not carried over" in caplog.text


def test_generate_says_when_a_rotary_model_reads_past_its_trained_positions(tmp_path, capsys):
    """Rotary positions have no table to run out of, so generation goes on, with a note (learned positions refuse)."""
    folder = char_gpt_folder(tmp_path, position_embedding_type="rope")
    assert minitf_main(["generate", str(folder), "abc " * 3, "--max-new-tokens", "8"]) == 0
    assert (
        "note: the prompt (12 tokens) and 8 new tokens pass the 16 positions this model was trained on; its "
        "rotary positions go on past them" in capsys.readouterr().err
    )


def test_saved_code_keeps_a_card_that_is_not_utf8(tmp_path):
    """Without hf_minitf, save_pretrained's card step reads the target's card as text: bytes that are not UTF-8
    must keep it (it is not blank), not raise after the weights were saved."""
    from hf_minitf.modeling.modeling_minitf import keep_source_card

    card = tmp_path / "saved/README.md"
    card.parent.mkdir()
    card.write_bytes(b"# My model \xff\n")
    keep_source_card(card.parent, saved_gpt(tmp_path, lambda folder: write(folder / "README.md", "# Source\n")))
    assert card.read_bytes() == b"# My model \xff\n"
