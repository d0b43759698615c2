"""Bad input, one row each: conversion output: nothing lost, nothing silently wrong."""

import json

import torch
from bad_inputs import (
    CHAR_GPT,
    CommandFailed,
    bad,
    bad_input_tests,
    checkpoint_folder,
    convert,
    folder_of,
    huge_weight_checkpoint,
    keeping,
    linked,
    minitf,
    project_checkout,
    text_file,
    tiny_encoder,
    untouched,
    write,
    write_in_atomic_folder,
)

from hf_minitf import char_tokenizer, save_sentence_transformer
from hf_minitf.conversion import ConversionError
from hf_minitf.conversion.base import require_heads
from hf_minitf.conversion.char_gpt import convert_char_gpt
from hf_minitf.conversion.output import TensorPlan, write_safetensors
from hf_minitf.export.gguf import export_gguf
from hf_minitf.safety.output_folders import OutputFolderError, check_output_dir


def convert_char_gpt_fixture(out, *options, checkpoint=CHAR_GPT / "checkpoint.pt") -> None:
    """`minitf convert char-gpt` of `checkpoint` (default: the char-GPT fixture) with the fixture's vocabulary and
    head count into `out`, then `options`."""
    convert("char-gpt", checkpoint, "--vocab", CHAR_GPT / "vocab.json", "--num-heads", 4, "--out", out, *options)


def train_gpt_into(tmp, out) -> None:
    """`minitf train gpt` for one step on a small text, into `out`."""
    minitf("train", "gpt", "--data", text_file(tmp), "--out", out, "--max-steps", 1, "--no-progress")


BAD_INPUTS = [
    # Conversion output: nothing lost, nothing silently wrong.
    bad(
        "convert-out-holds-input",
        lambda tmp: keeping(
            checkpoint_folder(tmp) / "checkpoint.pt",
            lambda: convert_char_gpt_fixture(tmp / "run", "--overwrite", checkpoint=tmp / "run/checkpoint.pt"),
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
        lambda tmp: convert_char_gpt_fixture(write(tmp / "out", "x")),
        CommandFailed,
        r"--out .*out exists and is not a folder",
    ),
    bad(
        "convert-out-not-empty",
        lambda tmp: convert_char_gpt_fixture(write(tmp / "out/keep.txt", "mine").parent),
        CommandFailed,
        r"--out .*out is not empty.*--overwrite",
    ),
    bad(
        "convert-overwrite-project-checkout",
        lambda tmp: untouched(project_checkout(tmp), lambda: convert_char_gpt_fixture(tmp / "project", "--overwrite")),
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
        lambda tmp: train_gpt_into(tmp, linked(tmp, tmp / "nowhere")),
        CommandFailed,
        r"exit 2: minitf train: error: --out .*link is a symbolic link to .*nowhere, which does not exist; remove "
        r"the link or choose another path",
    ),
    bad(
        "train-out-link-to-a-folder",
        lambda tmp: train_gpt_into(tmp, linked(tmp, write(tmp / "real/config.json", "{}").parent)),
        CommandFailed,
        r"exit 2: .*--out .*link is a symbolic link to .*real; give that path itself or another one: the output "
        r"would replace the link",
    ),
    bad(
        "convert-out-under-a-file",
        lambda tmp: convert_char_gpt_fixture(write(tmp / "notes.txt", "mine") / "model"),
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
        lambda tmp: convert_char_gpt_fixture(tmp / "out", "--dtype", "float16", checkpoint=huge_weight_checkpoint(tmp)),
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
        lambda tmp: write_in_atomic_folder(tmp, [TensorPlan("big", (1,), torch.float16, lambda: torch.tensor([1e5]))]),
        ConversionError,
        r"big has values up to 1e\+05, beyond float16's range",
    ),
]
test_bad_input_is_refused_naming_the_problem, test_ids_are_unique = bad_input_tests(BAD_INPUTS)
