"""Helpers of the bad-input tables (tests/*/test_bad_*.py): one row each, an id, a callable taking the test's temporary
folder, the exception type (or the command's exit) and a regex its message must match (`bad`); `check_bad_input` also
checks that no half-written output (no `.NAME.writing-*` folder) is left behind."""

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest
from factories import tiny_model
from helpers import update_json
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, models, pre_tokenizers

from hf_minitf import (
    MiniTFEncoderModel,
    MiniTFGPTConfig,
    MiniTFGPTForCausalLM,
    MiniTFSeq2SeqForConditionalGeneration,
    MiniTFSeq2SeqTokenizer,
    char_tokenizer,
    train_translation_tokenizers,
)
from hf_minitf.cli import main as minitf_main
from hf_minitf.conversion.output import TensorPlan, write_safetensors
from hf_minitf.safety.output_folders import atomic_output_dir

DATA = Path(__file__).parent / "data"
CHAR_GPT = DATA / "char_gpt"
MINIEMBED_VOCAB = DATA / "miniembed_tokenizer" / "tokenizer.json"
_ONE_LAYER = dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
TINY = dict(_ONE_LAYER, vocab_size=40, max_position_embeddings=16)
"""The tables' tiny models: one layer of 16 with 2 heads and an FFN of 32, 40 tokens, 16 positions."""


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
    """An edit setting the config.json fields `changes`."""

    def edit(folder: Path) -> None:
        update_json(folder / "config.json", **changes)

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


def tiny_encoder(**config) -> MiniTFEncoderModel:
    return tiny_model("encoder", **TINY, **config)


def tiny_seq2seq(**config) -> MiniTFSeq2SeqForConditionalGeneration:
    return tiny_model("seq2seq", **{**TINY, "src_vocab_size": 40, "vocab_size": 50}, **config)


def saved_model(tmp: Path, family: str) -> Path:
    """A tiny model folder of `family` (config and weights, no tokenizer: the commands refuse it before that)."""
    {"gpt": tiny_gpt, "encoder": tiny_encoder, "seq2seq": tiny_seq2seq}[family]().save_pretrained(tmp / family)
    return tmp / family


def engine_export(tmp: Path, engine: str, kind: str, family: str) -> Path:
    """A folder named an engine export by its minitf_export.json, as `minitf export` writes it."""
    write(tmp / "export/config.json", "{}")
    info = {"engine": engine, "kind": kind, "family": family}
    positions = {} if kind == "embedder" else {"max_position_embeddings": 16}  # what the runners of the kind read
    write(tmp / "export/minitf_export.json", json.dumps({**info, **positions}))
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
    minitf("export", "native", char_gpt_folder(tmp), tmp / "native", "--no-verify")
    return tmp / "native"


BAD_YAML_CARD = "---\nlicense: [mit\ntags: x\n---\n\n# My model\n"


def bad(case_id: str, action, error: type[BaseException], message: str):
    return pytest.param(action, error, message, id=case_id)


def write_in_atomic_folder(tmp: Path, plans: list[TensorPlan]) -> None:
    with atomic_output_dir(tmp / "out") as work:
        write_safetensors(work / "model.safetensors", plans)


def check_bad_input(tmp_path: Path, action, error: type[BaseException], message: str) -> None:
    """`action(tmp_path)` raises `error` with a message matching `message`, and leaves no half-written output."""
    with pytest.raises(error, match=message):
        action(tmp_path)
    leftovers = [path for path in tmp_path.rglob(".*") if ".writing-" in path.name or ".old-" in path.name]
    assert not leftovers, f"half-written output left behind: {leftovers}"


def assert_ids_unique(rows: list) -> None:
    ids = [row.id for row in rows]
    assert len(set(ids)) == len(ids), sorted(i for i in ids if ids.count(i) > 1)


def bad_input_tests(rows: list) -> tuple:
    """The two tests of a bad-input table: each row refused as it says (`check_bad_input`), and ids unique."""

    @pytest.mark.parametrize("action, error, message", rows)
    def test_bad_input_is_refused(tmp_path, action, error, message):
        check_bad_input(tmp_path, action, error, message)

    def test_ids_are_unique():
        assert_ids_unique(rows)

    return test_bad_input_is_refused, test_ids_are_unique
