"""A write failure in the middle of any save (disk full, a read-only folder) leaves the previous folder as it was
and nothing behind: no partial output, no temporary folder beside it or in the temp directory. Commands end in
one line naming the failure and exit status 2, never a traceback.

Faults are injected where Python writes files (`open` for writing under the test's folder fails with ENOSPC once
a given number of files have been written) and where a finished folder is put in place (`os.replace` of the
work folder fails). Writes of the Rust-backed savers (safetensors, tokenizers) come between them.
"""

import builtins
import errno
import io
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from factories import tiny_model, tiny_model_folder
from helpers import assert_one_line_error, run_cli
from huggingface_hub import ModelCard

import hf_minitf.safety.output_folders as output_folder_module
from hf_minitf import (
    char_tokenizer,
    push_folder,
    save_sentence_transformer,
    train_wordlevel_tokenizer,
    update_model_card,
)
from hf_minitf.conversion.char_gpt import convert_char_gpt
from hf_minitf.conversion.frawdllm import convert_frawdllm
from hf_minitf.conversion.hkproj import convert_hkproj
from hf_minitf.conversion.miniembed import convert_miniembed
from hf_minitf.hub.push import PushError
from hf_minitf.safety.output_folders import OutputFolder, OutputFolderError
from hf_minitf.training.trainers import TrainSettings, train_gpt

DATA = Path(__file__).parents[1] / "data"
NO_SPACE = os.strerror(errno.ENOSPC)
# When the write fails: at the first file, after one file, or when the finished folder is put in place.
FAULTS = ["first file", "second file", "commit"]


class WriteFaults:
    """Fails writes to paths starting with `prefix`: `open` for writing once `files_before_failure` files have
    been opened there (the file is created or emptied first, as when a disk fills up mid-write), or the
    `os.replace` or atomic swap (`exchange_paths`) that puts a finished work folder (`.NAME.writing-...`) in place.
    Counts the failures it caused."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, prefix: Path, fault: str, error: int = errno.ENOSPC) -> None:
        self.prefix, self.error, self.failures, self.opened = str(prefix), error, 0, 0
        self.files_before_failure = {"first file": 0, "second file": 1}.get(fault)
        real_open, real_replace = builtins.open, os.replace

        def failing_open(file, mode="r", *args, **kwargs):
            writing = isinstance(file, (str, os.PathLike)) and any(flag in mode for flag in "wax+")
            if writing and self.files_before_failure is not None and os.path.abspath(file).startswith(self.prefix):
                if self.opened >= self.files_before_failure:  # the file is opened (emptied), then the disk is full
                    self.failures += 1
                    real_open(file, mode, *args, **kwargs).close()
                    raise OSError(self.error, os.strerror(self.error), str(file))
                self.opened += 1
            return real_open(file, mode, *args, **kwargs)

        def failing_replace(source, target, *args, **kwargs):
            if fault == "commit" and ".writing-" in Path(source).name:
                self.failures += 1
                raise OSError(self.error, os.strerror(self.error), str(target))
            return real_replace(source, target, *args, **kwargs)

        real_exchange = output_folder_module.exchange_paths

        def failing_exchange(first, second):
            if fault == "commit" and ".writing-" in Path(first).name:
                self.failures += 1
                raise OSError(self.error, os.strerror(self.error), str(second))
            return real_exchange(first, second)

        monkeypatch.setattr(builtins, "open", failing_open)
        monkeypatch.setattr(io, "open", failing_open)
        monkeypatch.setattr(os, "replace", failing_replace)
        monkeypatch.setattr(output_folder_module, "exchange_paths", failing_exchange)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` with its bytes."""
    return {
        path.relative_to(folder).as_posix(): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()
    }


class Workspace:
    """A test folder with a previous output folder `out` in it and its own temp directory (which must end empty)."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch, previous: Path | None = None) -> None:
        self.root, self.out, self.temp = root, root / "out", root / "tmp"
        self.temp.mkdir()
        monkeypatch.setattr(tempfile, "tempdir", str(self.temp))
        if previous is None:
            self.out.mkdir()
            (self.out / "config.json").write_text('{"previous": true}\n')
            (self.out / "README.md").write_text("# the previous model\n")
            (self.out / "model.safetensors").write_bytes(b"previous weights")
        self.before = snapshot(self.out)
        self.entries = sorted(path.name for path in root.iterdir())

    def assert_untouched(self) -> None:
        assert snapshot(self.out) == self.before, "the previous folder changed"
        assert sorted(path.name for path in self.root.iterdir()) == self.entries, "something was left beside it"
        assert not list(self.temp.iterdir()), f"left in the temp directory: {list(self.temp.iterdir())}"


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    return Workspace(tmp_path, monkeypatch)


def tiny_gpt_folder(folder: Path) -> Path:
    tokenizer = char_tokenizer("abcdefgh \n", model_max_length=16)
    return tiny_model_folder("gpt", folder, tokenizer, max_position_embeddings=16)


def tiny_encoder():
    tokenizer = train_wordlevel_tokenizer(["a small test", "another small one"], min_frequency=1, max_length=16)
    return tiny_model("encoder", tokenizer=tokenizer, max_position_embeddings=16), tokenizer


# ------------------------------------------------------------------------------------------- minitf convert
def convert_arguments(source: str, tokenizers: Path, miniembed_tokenizer: Path) -> list:
    """The arguments of `minitf convert SOURCE` on this project's fixture of that source."""
    return {
        "char-gpt": [DATA / "char_gpt/checkpoint.pt", "--vocab", DATA / "char_gpt/vocab.json", "--num-heads", "4"],
        "frawdllm": [DATA / "frawdllm_rope/checkpoint.pt", "--tokenizer", tokenizers / "frawdllm_tokenizer.json"],
        "miniembed": [
            DATA / "minitf_embedding/checkpoint.pt",
            "--tokenizer",
            miniembed_tokenizer,
            "--config",
            DATA / "minitf_embedding/config.json",
        ],
        "hkproj": [
            DATA / "seq2seq_transformer_trained_like/checkpoint.pt",
            "--num-heads",
            "4",
            "--source-tokenizer",
            tokenizers / "tokenizer_en.json",
            "--target-tokenizer",
            tokenizers / "tokenizer_it.json",
        ],
        "transformer-embedding": [DATA / "transformer_embedding/checkpoint.pt"],
        "frawdllm-embeddings": [DATA / "frawdllm_embeddings_learned/original.safetensors"],
    }[source]


# The embedding-layer sources write two files, the weights (through safetensors) first: their first Python write
# already comes after a file.
CONVERT_CASES = [(source, fault) for source in ("char-gpt", "frawdllm", "miniembed", "hkproj") for fault in FAULTS] + [
    (source, fault) for source in ("transformer-embedding", "frawdllm-embeddings") for fault in ("first file", "commit")
]


@pytest.mark.parametrize("source,fault", CONVERT_CASES)
def test_convert_keeps_the_previous_folder(
    source, fault, workspace, tokenizer_files, miniembed_tokenizer_file, monkeypatch, capsys
):
    arguments = convert_arguments(source, tokenizer_files, miniembed_tokenizer_file)
    faults = WriteFaults(monkeypatch, workspace.root, fault)
    status, out, err = run_cli(["convert", source, *arguments, "--out", workspace.out, "--overwrite"], capsys)
    assert faults.failures >= 1
    assert_one_line_error(status, err, f"minitf convert {source}: error:", NO_SPACE)
    workspace.assert_untouched()


def test_convert_into_a_read_only_folder_is_one_line(workspace, monkeypatch, capsys):
    WriteFaults(monkeypatch, workspace.root, "first file", errno.EROFS)
    status, out, err = run_cli(
        ["convert", "char-gpt", *convert_arguments("char-gpt", Path(), Path()), "--out", workspace.out, "--overwrite"],
        capsys,
    )
    assert_one_line_error(status, err, "minitf convert char-gpt: error:", os.strerror(errno.EROFS))
    workspace.assert_untouched()


# --------------------------------------------------------------------------- the conversion Python functions
CONVERSIONS = {
    "convert_char_gpt": lambda files, vocab_file, out: convert_char_gpt(
        DATA / "char_gpt/original.safetensors", out, vocab=DATA / "char_gpt/vocab.json", num_heads=4, overwrite=True
    ),
    "convert_frawdllm": lambda files, vocab_file, out: convert_frawdllm(
        DATA / "frawdllm_learned/original.safetensors",
        out,
        tokenizer=files / "frawdllm_tokenizer.json",
        num_heads=4,
        overwrite=True,
    ),
    "convert_miniembed": lambda files, vocab_file, out: convert_miniembed(
        DATA / "minitf_embedding/original.safetensors",
        out,
        tokenizer=vocab_file,
        config=DATA / "minitf_embedding/config.json",
        overwrite=True,
    ),
    "convert_hkproj": lambda files, vocab_file, out: convert_hkproj(
        DATA / "seq2seq_transformer_trained_like/original.safetensors",
        out,
        num_heads=4,
        source_tokenizer=files / "tokenizer_en.json",
        target_tokenizer=files / "tokenizer_it.json",
        overwrite=True,
    ),
}


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("function", CONVERSIONS)
def test_conversion_function_keeps_the_previous_folder(
    function, fault, workspace, tokenizer_files, miniembed_tokenizer_file, monkeypatch
):
    faults = WriteFaults(monkeypatch, workspace.root, fault)
    with pytest.raises(OSError) as error:
        CONVERSIONS[function](tokenizer_files, miniembed_tokenizer_file, workspace.out)
    assert error.value.errno == errno.ENOSPC and faults.failures >= 1
    workspace.assert_untouched()


# ----------------------------------------------------------------------------------------- library writers
@pytest.mark.parametrize("fault", FAULTS)
def test_save_sentence_transformer_keeps_the_previous_folder(fault, workspace, monkeypatch):
    model, tokenizer = tiny_encoder()
    faults = WriteFaults(monkeypatch, workspace.root, fault)
    with pytest.raises(OSError, match=NO_SPACE):
        save_sentence_transformer(model, tokenizer, workspace.out)
    assert faults.failures >= 1
    workspace.assert_untouched()


def test_save_sentence_transformer_replaces_a_previous_folder_whole(workspace):
    model, tokenizer = tiny_encoder()
    save_sentence_transformer(model, tokenizer, workspace.out)
    files = set(snapshot(workspace.out))
    assert "modules.json" in files and "model.safetensors" in files and "1_Pooling/config.json" in files
    assert b"previous" not in (workspace.out / "config.json").read_bytes()
    assert ".writing-" not in (workspace.out / "README.md").read_text()  # the card names no temporary folder
    assert sorted(path.name for path in workspace.root.iterdir()) == workspace.entries
    assert not list(workspace.temp.iterdir())


def test_the_current_folder_is_never_replaced(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    model, tokenizer = tiny_encoder()
    for folder in (".", tmp_path, tmp_path.parent):
        with pytest.raises(ValueError, match="current folder"):
            save_sentence_transformer(model, tokenizer, folder)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["notes.txt"]


def test_update_model_card_keeps_the_previous_card(tmp_path, monkeypatch):
    folder = tiny_gpt_folder(tmp_path / "out")
    workspace = Workspace(tmp_path, monkeypatch, previous=folder)
    faults = WriteFaults(monkeypatch, tmp_path, "first file")
    with pytest.raises(OSError, match=NO_SPACE):
        update_model_card(folder, eval_results={"eval_loss": 1.5}, dataset_name="a held-out set")
    assert faults.failures == 1
    workspace.assert_untouched()
    monkeypatch.undo()
    update_model_card(folder, eval_results={"eval_loss": 1.5}, dataset_name="a held-out set")
    card = ModelCard.load(folder / "README.md")
    assert card.data.eval_results[0].metric_value == 1.5
    assert sorted(path.name for path in folder.iterdir()) == sorted(workspace.before)


# ------------------------------------------------------------------------------------------------ minitf push
@pytest.mark.parametrize("fault", ["first file", "second file"])
def test_push_staging_failure_leaves_the_folder_and_no_copy(fault, tmp_path, monkeypatch, capsys):
    folder = tiny_gpt_folder(tmp_path / "out")
    workspace = Workspace(tmp_path, monkeypatch, previous=folder)
    faults = WriteFaults(monkeypatch, tmp_path, fault)
    status, out, err = run_cli(["push", folder, "someone/tiny-gpt"], capsys)
    assert faults.failures >= 1
    assert_one_line_error(status, err, "minitf push: error:", NO_SPACE)
    workspace.assert_untouched()
    with pytest.raises(PushError, match=NO_SPACE):
        push_folder(folder, "someone/tiny-gpt")
    workspace.assert_untouched()


# -------------------------------------------------------------------------------------- minitf train, quickstart
TRAIN_STEPS = ["--max-steps", "1", "--batch-size", "4", "--logging-steps", "1", "--no-progress"]


@pytest.mark.parametrize(
    "family,fault", [("gpt", "first file"), ("gpt", "commit"), ("encoder", "second file"), ("seq2seq", "second file")]
)
def test_train_keeps_the_previous_folder(family, fault, workspace, monkeypatch, capsys):
    data = workspace.root / "data.tsv"
    lines = {
        "gpt": "the cat sat on the mat\n" * 20,
        "encoder": "".join(f"a red cat {i}\tthe red cat {i}\n" for i in range(12)),
        "seq2seq": "".join(f"the cat {i}\til gatto {i}\n" for i in range(12)),
    }[family]
    data.write_text(lines)
    workspace.entries.append(data.name)
    workspace.entries.sort()
    faults = WriteFaults(monkeypatch, workspace.root / ".out.writing-", fault)  # the new folder beside `out`
    extra = ["--columns", "source,target"] if family == "seq2seq" else []
    status, out, err = run_cli(
        ["train", family, "--data", data, "--out", workspace.out, "--overwrite", *extra, *TRAIN_STEPS], capsys
    )
    assert faults.failures >= 1
    # sentence-transformers' card draws a transient bar ("Computing widget examples") that --no-progress cannot
    # reach: the error is still one line, and the only one.
    lines = [line for line in re.split(r"[\r\n]+", err) if line.strip() and "widget examples" not in line]
    assert_one_line_error(status, "\n".join(lines), "minitf train: error:", NO_SPACE)
    workspace.assert_untouched()


def test_a_folder_written_under_a_temporary_name_is_named_by_its_final_one(tmp_path):
    """What quickstart relies on: the card's snippets load `model_id`, not the folder the model was written to."""
    result = train_gpt(
        "the cat sat on the mat\n" * 20,
        tmp_path / "work",
        model_id="models/gpt",
        settings=TrainSettings(max_steps=1, batch_size=4, progress=False),
    )
    card = (result.folder / "README.md").read_text()
    assert 'from_pretrained("models/gpt")' in card and "work" not in card


def test_quickstart_keeps_the_previous_folder_when_a_later_model_fails(tmp_path, monkeypatch, capsys):
    """The three models are written as one folder: the GPT folder is complete when the encoder's save
    fails, and still nothing of the run replaces the previous `out`. (Training is stubbed: the folders are what
    matters here; tests/test_quickstart.py trains for real.)"""
    out = tmp_path / "out"
    for name in ("gpt", "encoder", "seq2seq"):
        (out / name).mkdir(parents=True)
        (out / name / "config.json").write_text("{}\n")
        (out / name / "README.md").write_text(f"# the previous {name} model\n")
    workspace = Workspace(tmp_path, monkeypatch, previous=out)
    written = []

    def save_gpt_then_disk_full(family, folder, model_id, steps, progress, seed, license):
        """Quickstart's training step: the GPT saved, then the encoder's save failing with the disk full."""
        if family == "gpt":
            tiny_gpt_folder(folder)
            written.append((model_id, (Path(folder) / "model.safetensors").is_file()))
            return None, None, 0.0
        Path(folder).mkdir()
        (Path(folder) / "config.json").write_text("{}")
        raise OSError(errno.ENOSPC, NO_SPACE, str(Path(folder) / "model.safetensors"))

    monkeypatch.setattr("hf_minitf.training.quickstart._train", save_gpt_then_disk_full)
    monkeypatch.setattr("hf_minitf.training.quickstart._gpt", lambda folder, task, result, seconds: {})
    status, printed, err = run_cli(["quickstart", "--out", out, "--overwrite", "--no-progress"], capsys)
    assert written == [(str(out / "gpt"), True)]  # the GPT folder was complete, then dropped with the rest
    assert_one_line_error(status, err, "minitf quickstart: error:", NO_SPACE)
    workspace.assert_untouched()


# ------------------------------------------------------------------------------------------ the output folder
def test_output_folder_errors_are_worded_by_their_caller(tmp_path):
    """The library names `overwrite=True`; the command line words the same error for its options."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(OutputFolderError) as error:
        OutputFolder(out)
    assert str(error.value) == (
        f"the output folder {out} is not empty; choose another folder or pass overwrite=True to replace it."
    )
    assert error.value.worded("--out", "--overwrite") == (
        f"--out {out} is not empty; choose another folder or pass --overwrite to replace it."
    )
    assert (out / "keep.txt").read_text() == "mine"


def test_a_folder_filled_during_the_write_is_not_replaced(tmp_path):
    target = OutputFolder(tmp_path / "out")
    with pytest.raises(OutputFolderError, match="was filled while this output was written"):
        with target.write() as work:
            (work / "model.txt").write_text("new")
            (tmp_path / "out").mkdir()
            (tmp_path / "out" / "theirs.txt").write_text("theirs")
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["theirs.txt"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out"]


# A process that reads `config.json` of a folder until told to stop, then prints how often it read it and how
# often the file was missing.
POLLING_READER = """
import os, sys
path, ready, stop = sys.argv[1:]
open(ready, "w").close()
reads = misses = 0
while not os.path.exists(stop):
    try:
        with open(path, "rb") as file:
            file.read()
        reads += 1
    except FileNotFoundError:
        misses += 1
print(reads, misses)
"""


def overwrite_while_a_process_reads(tmp_path: Path, times: int) -> tuple[int, int]:
    """Replace `out` (a model folder) `times` times with `overwrite=True` while another process polls
    `out/config.json`; returns (reads, misses) of that process and checks each write's content."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "config.json").write_text("-1")
    ready, stop = tmp_path / "ready", tmp_path / "stop"
    reader = subprocess.Popen(
        [sys.executable, "-c", POLLING_READER, str(out / "config.json"), str(ready), str(stop)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        while not ready.exists() and reader.poll() is None:
            time.sleep(0.001)
        for index in range(times):
            with OutputFolder(out, overwrite=True).write() as work:
                (work / "config.json").write_text(str(index))
            assert (out / "config.json").read_text() == str(index)
    finally:
        stop.touch()
        printed, _ = reader.communicate(timeout=30)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out", "ready", "stop"], "a work folder was left"
    reads, misses = map(int, printed.split())
    return reads, misses


def test_a_process_reading_the_folder_during_overwrites_never_finds_it_missing(tmp_path):
    """The previous folder and the new one are swapped in one step (renameat2 RENAME_EXCHANGE): no moment without
    `out`. (With two renames, the fallback, the reader finds it missing between them.)"""
    if not sys.platform.startswith("linux"):
        pytest.skip("the atomic swap is Linux's renameat2; elsewhere the folder is replaced in two renames")
    assert output_folder_module._renameat2() is not None, "Linux's C library has no renameat2: no atomic swap"
    reads, misses = overwrite_while_a_process_reads(tmp_path, 300)
    assert reads > 0 and misses == 0, f"the reader found out/config.json missing {misses} times in {reads + misses}"


@pytest.mark.parametrize("unavailable", ["no renameat2", "ENOSYS", "EINVAL"])
def test_without_an_atomic_swap_the_folder_is_replaced_in_two_renames(unavailable, tmp_path, monkeypatch):
    """Other systems, old kernels, file systems without RENAME_EXCHANGE: two renames, still whole and correct."""
    if unavailable == "no renameat2":
        monkeypatch.setattr(output_folder_module, "_renameat2", lambda: None)
    else:
        code = getattr(errno, unavailable)

        def refusing_exchange(first, second):
            raise OSError(code, os.strerror(code), str(first))

        monkeypatch.setattr(output_folder_module, "exchange_paths", refusing_exchange)
    real_replace, replaced = os.replace, []

    def counting_replace(source, target, *args, **kwargs):
        replaced.append((Path(source).name, Path(target).name))
        return real_replace(source, target, *args, **kwargs)

    monkeypatch.setattr(os, "replace", counting_replace)
    out = tmp_path / "out"
    out.mkdir()
    (out / "config.json").write_text("previous")
    (out / "old.bin").write_text("previous")
    with OutputFolder(out, overwrite=True).write() as work:
        (work / "config.json").write_text("new")
    assert sorted(path.name for path in out.iterdir()) == ["config.json"]
    assert (out / "config.json").read_text() == "new"
    assert [target for _, target in replaced][-1] == "out" and ".old-" in replaced[0][1], replaced
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out"]


def test_a_failed_swap_leaves_the_previous_folder(tmp_path, monkeypatch):
    """A swap that fails for another reason (not 'unsupported') is an error, and nothing was replaced."""

    def failing_exchange(first, second):
        raise OSError(errno.EIO, os.strerror(errno.EIO), str(first))

    monkeypatch.setattr(output_folder_module, "exchange_paths", failing_exchange)
    out = tmp_path / "out"
    out.mkdir()
    (out / "config.json").write_text("previous")
    with pytest.raises(OSError, match=os.strerror(errno.EIO)):
        with OutputFolder(out, overwrite=True).write() as work:
            (work / "config.json").write_text("new")
    assert (out / "config.json").read_text() == "previous"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out"]


# What each writer leaves (and what the Hub's clients add), as the files that make it a model folder.
MODEL_FOLDER_LAYOUTS = {
    "transformers": ["config.json", "model.safetensors"],
    "sentence-transformers": ["modules.json", "config_sentence_transformers.json", "1_Pooling/config.json"],
    "ctranslate2": ["minitf_export.json", "model.bin"],
    "converted embedding": ["embedding_config.json", "embeddings.safetensors"],
    "checkpoint folder": ["checkpoint-10/trainer_state.json", "checkpoint-10/config.json"],
    "quickstart": ["gpt/config.json", "encoder/modules.json", "seq2seq/config.json"],
    "hub download": [".gitattributes", ".cache/huggingface/download/config.json.metadata", "config.json"],
}


@pytest.mark.parametrize("layout", MODEL_FOLDER_LAYOUTS)
def test_overwrite_replaces_every_kind_of_model_folder(layout, tmp_path):
    out = tmp_path / "out"
    for name in MODEL_FOLDER_LAYOUTS[layout]:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text("previous")
    with OutputFolder(out, overwrite=True).write() as work:
        (work / "config.json").write_text("new")
    assert sorted(path.name for path in out.iterdir()) == ["config.json"]


def test_each_write_checks_its_output_folder_once(tmp_path, monkeypatch, capsys):
    """A command checks --out before the work (training, reading a checkpoint) and the write does not check again."""
    checked = []
    real_check = output_folder_module.check_output_dir

    def counting_check(out, *args, **kwargs):
        checked.append(Path(out).name)
        return real_check(out, *args, **kwargs)

    monkeypatch.setattr(output_folder_module, "check_output_dir", counting_check)
    (tmp_path / "text.txt").write_text("the cat sat on the mat\n" * 20)
    assert (
        run_cli(["train", "gpt", "--data", tmp_path / "text.txt", "--out", tmp_path / "gpt", *TRAIN_STEPS], capsys)[0]
        == 0
    )
    assert (
        run_cli(
            ["convert", "char-gpt", *convert_arguments("char-gpt", Path(), Path()), "--out", tmp_path / "converted"],
            capsys,
        )[0]
        == 0
    )
    assert checked == ["gpt", "converted"]
