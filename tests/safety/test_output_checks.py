"""An output that cannot be written is refused before the work, not after it: `minitf train` into a read-only
`--out` used to train (172 s on a real corpus) and then fail. The folder where the output goes is tried by making
a folder there (`write_refusal`), and its disk's free space is compared with a lower bound of what will be written
(`space_refusal`): the weights for `--out`, a checkpoint (the weights and AdamW's two moments) for
`--checkpoint-dir`; the exports and conversions check their OUT the same way.

The tests run as root, which mode bits do not stop (`chmod 0555` would not refuse anything), and a read-only mount
needs privileges, so a read-only folder is simulated where every writer makes its folders: `os.mkdir` of an entry
in it fails with EROFS, as on a read-only mount. A small disk is simulated by what `shutil.disk_usage` reports."""

import errno
import os
import shutil
from pathlib import Path

import pytest
from factories import make_gpt
from helpers import assert_one_line_error, run_cli

DATA = Path(__file__).parents[1] / "data"
FREE = 16 * 1024  # what the small disk has free: less than any model here takes


def read_only(monkeypatch, folder: Path) -> None:
    real_mkdir = os.mkdir

    def mkdir(path, *args, **kwargs):
        if Path(path).absolute().is_relative_to(folder):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)


def small_disk(monkeypatch, folder: Path) -> None:
    real_usage = shutil.disk_usage

    def usage(path):
        total, used, free = real_usage(path)
        return shutil._ntuple_diskusage(total, used, FREE if Path(path).absolute().is_relative_to(folder) else free)

    monkeypatch.setattr(shutil, "disk_usage", usage)


TRAIN = ["train", "gpt", "--data", "{tmp}/text.txt", "--block-size", "16", "--max-steps", "1", "--no-progress"]
EXPORT = ["export", "native", "{tmp}/gpt"]
# (command line, the folder made read-only or small, what the one-line refusal says)
OUTPUTS = {
    "train into a read-only --out": (
        [*TRAIN, "--out", "{tmp}/ro/model"],
        (read_only, "ro"),
        ["--out {tmp}/ro/model cannot be written: {tmp}/ro refuses new files (Read-only file system)"],
    ),
    "train with a read-only --checkpoint-dir": (
        [*TRAIN, "--out", "{tmp}/model", "--checkpoint-dir", "{tmp}/ro/checkpoints"],
        (read_only, "ro"),
        ["--checkpoint-dir {tmp}/ro/checkpoints cannot be written: {tmp}/ro refuses new files"],
    ),
    "train with a --checkpoint-dir under a file": (
        [*TRAIN, "--out", "{tmp}/model", "--checkpoint-dir", "{tmp}/text.txt/checkpoints"],
        None,
        ["--checkpoint-dir {tmp}/text.txt/checkpoints cannot be made: {tmp}/text.txt is not a folder"],
    ),
    "train into an --out whose disk is too small": (
        [*TRAIN, "--out", "{tmp}/small/model"],
        (small_disk, "small"),
        ["--out {tmp}/small/model needs at least", "MiB for the weights, but its disk has 16.0 KiB free"],
    ),
    "train with a --checkpoint-dir whose disk is too small": (
        [*TRAIN, "--out", "{tmp}/model", "--checkpoint-dir", "{tmp}/small/checkpoints"],
        (small_disk, "small"),
        ["--checkpoint-dir {tmp}/small/checkpoints needs at least", "for a checkpoint (the weights and AdamW"],
    ),
    "export native into a read-only folder": (
        [*EXPORT, "{tmp}/ro/native"],
        (read_only, "ro"),
        ["OUT {tmp}/ro/native cannot be written: {tmp}/ro refuses new files"],
    ),
    "export native onto a disk too small": (
        [*EXPORT, "{tmp}/small/native"],
        (small_disk, "small"),
        ["OUT {tmp}/small/native needs at least", "KiB for the weights, but its disk has 16.0 KiB free"],
    ),
    "export gguf into a read-only folder": (
        ["export", "gguf", "{tmp}/gpt", "{tmp}/ro/model.gguf"],
        (read_only, "ro"),
        ["OUT {tmp}/ro/model.gguf cannot be written: {tmp}/ro refuses new files"],
    ),
    "convert into a read-only folder": (
        ["convert", "char-gpt", DATA / "char_gpt/checkpoint.pt", "--vocab", DATA / "char_gpt/vocab.json"]
        + ["--num-heads", "4", "--out", "{tmp}/ro/converted"],
        (read_only, "ro"),
        ["--out {tmp}/ro/converted cannot be written: {tmp}/ro refuses new files"],
    ),
}


@pytest.mark.parametrize("case", OUTPUTS)
def test_an_output_that_cannot_be_written_is_refused_before_the_work(case, tmp_path, monkeypatch, capsys):
    argv, fault, words = OUTPUTS[case]
    (tmp_path / "text.txt").write_text("the cat sat on the mat\n" * 20)
    make_gpt(tmp_path / "gpt")
    for name in ("ro", "small"):
        (tmp_path / name).mkdir()
    if fault is not None:
        apply, folder = fault
        apply(monkeypatch, tmp_path / folder)

    def no_work(*args, **kwargs):
        raise AssertionError("the work started before the output was checked")

    monkeypatch.setattr("transformers.Trainer.train", no_work)
    status, _, err = run_cli([str(arg).format(tmp=tmp_path) for arg in argv], capsys)
    assert_one_line_error(status, err, *(word.format(tmp=tmp_path) for word in words))
    assert not list((tmp_path / "ro").iterdir()) and not list((tmp_path / "small").iterdir())
    assert not (tmp_path / "model").exists()
