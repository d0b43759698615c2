"""Errors of `minitf train` point at what to fix: a bad row or byte by file and line (the JSON and UTF-8 decoders
said only the column inside a line, or the position inside a chunk), a full disk by the folder whose disk is full
(the temporary folder, `--checkpoint-dir`), and a folder deleted under the run by name."""

import errno
import json
import os
import shutil

import pytest
import torch
from helpers import assert_one_line_error, run_cli
from safetensors import SafetensorError

import hf_minitf.training.encoder as encoder_trainer
import hf_minitf.training.gpt as gpt_trainer
from hf_minitf.safety.output_folders import OutputDiskFull
from hf_minitf.training.data import TextFile, TrainingDataError, load_pairs, load_texts


def lazily(path):
    """The texts of a TextFile, read as `minitf train gpt` reads them (in chunks of 16 characters)."""
    return ["".join(document) for document in TextFile(path).documents(chunk_chars=16)]


BAD_JSONL = b'{"text": "one"}\n\n{"text": "two"}\n{"text": }\n'
NOT_UTF8_LATE = b"word " * 40 + b"\n\nfine\nbad \xff here\n"
# (file name, its bytes, how it is read, what the error says; a list: the texts it reads instead)
READS = {
    "a bad .jsonl line": ("a.jsonl", BAD_JSONL, load_texts, "a.jsonl is not valid JSON lines: line 4, column 10:"),
    "a bad .jsonl line, read lazily": ("a.jsonl", BAD_JSONL, lazily, "a.jsonl is not valid JSON lines: line 4, col"),
    "a bad .json file": (
        "a.json",
        b'[{"text": "one"},\n {"text" "two"}]',
        load_texts,
        "a.json is not valid JSON: line 2",
    ),
    "a .jsonl row that is no text": (
        "a.jsonl",
        b'{"text": "one"}\n\n{"text": 3}\n',
        load_texts,
        "a.jsonl line 3: column 'text' is 3, not a text",
    ),
    "a byte that is not UTF-8 in a .txt": (
        "a.txt",
        NOT_UTF8_LATE,
        load_texts,
        "a.txt is not UTF-8 text: line 4, byte 5 (0xff: invalid start byte); save it as UTF-8",
    ),
    "the same, read lazily past the first chunk": (
        "a.txt",
        NOT_UTF8_LATE,
        lazily,
        "a.txt is not UTF-8 text: line 4, byte 5",
    ),
    "a byte that is not UTF-8 in a .tsv": (
        "p.tsv",
        b"a cat\tun gatto\nthe dog\til cane \xe9\n",
        lambda path: load_pairs(path, ["source", "target"]),
        "p.tsv is not UTF-8 text: line 2, byte 17 (0xe9: invalid continuation byte)",
    ),
    "a byte that is not UTF-8 in a .jsonl": (
        "a.jsonl",
        b'{"text": "one"}\n{"text": "tw\xff"}\n',
        load_texts,
        "a.jsonl is not UTF-8 text: line 2, byte 13",
    ),
    "the same, read lazily": (
        "a.jsonl",
        b'{"text": "one"}\n{"text": "tw\xff"}\n',
        lazily,
        "a.jsonl is not UTF-8 text: line 2, byte 13",
    ),
    "U+2028 and a form feed inside a row are no line ends": (
        "a.jsonl",
        json.dumps({"text": "one\u2028two\x0cthree"}, ensure_ascii=False).encode() + b"\n",
        load_texts,
        ["one\u2028two\x0cthree"],
    ),
}


@pytest.mark.parametrize("case", READS)
def test_training_data_errors_name_the_file_and_line(case, tmp_path):
    name, content, read, expected = READS[case]
    (tmp_path / name).write_bytes(content)
    if isinstance(expected, list):
        assert read(tmp_path / name) == expected
        return
    with pytest.raises(TrainingDataError) as error:
        read(tmp_path / name)
    assert str(error.value).startswith(str(tmp_path / name)) and expected in str(error.value), str(error.value)


NO_SPACE = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
REAL_ENCODE = gpt_trainer.encode_to_file
REAL_SAVE = torch.save


def temporary_disk_full(monkeypatch, tmp_path):
    def full(tokenizer, documents, path, *args, **kwargs):
        path.write_bytes(b"")  # the file is made, then the disk is full
        raise NO_SPACE

    monkeypatch.setattr(gpt_trainer, "encode_to_file", full)


def checkpoint_weights_full(monkeypatch, tmp_path):
    def full(tensors, filename, *args, **kwargs):
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr("transformers.modeling_utils.safe_save_file", full)


def checkpoint_optimizer_full(monkeypatch, tmp_path):
    """torch.save's zip writer on a full disk: a RuntimeError with no errno; the disk then has (almost) no room."""
    failed = []

    def full(obj, path, *args, **kwargs):
        if str(tmp_path / "checkpoints") in str(path):
            failed.append(path)
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 1801920 vs 1801808")
        return REAL_SAVE(obj, path, *args, **kwargs)

    real_usage = shutil.disk_usage

    def usage(path):
        total, used, free = real_usage(path)
        return shutil._ntuple_diskusage(total, used, 4096 if failed else free)

    monkeypatch.setattr(torch, "save", full)
    monkeypatch.setattr(shutil, "disk_usage", usage)


def encoder_temporary_full(monkeypatch, tmp_path):
    def full(model, tokenizer, folder):
        raise OutputDiskFull(folder)  # what save_sentence_transformer raises on a full disk

    monkeypatch.setattr(encoder_trainer, "save_sentence_transformer", full)


def token_folder_deleted(monkeypatch, tmp_path):
    def deleted(tokenizer, documents, path, *args, **kwargs):
        shutil.rmtree(path.parent)  # a cleaner of old files in the temporary folder
        return REAL_ENCODE(tokenizer, documents, path, *args, **kwargs)

    monkeypatch.setattr(gpt_trainer, "encode_to_file", deleted)


def current_folder_deleted(monkeypatch, tmp_path):
    (tmp_path / "gone").mkdir()
    monkeypatch.chdir(tmp_path / "gone")
    (tmp_path / "gone").rmdir()


GPT = ["gpt", "--data", "{tmp}/text.txt"]
WITH_CHECKPOINTS = ["--checkpoint-dir", "{tmp}/checkpoints", "--save-steps", "1"]
# (the fault, the family and its data, more options, what the one-line error names)
FAULTS = {
    "the temporary folder's disk full while tokenizing": (
        temporary_disk_full,
        GPT,
        [],
        ["the disk holding the temporary folder", "minitf-tokens-", "is full (No space left on device)", "TMPDIR"],
    ),
    "--checkpoint-dir's disk full (the weights)": (
        checkpoint_weights_full,
        GPT,
        WITH_CHECKPOINTS,
        ["the disk holding --checkpoint-dir {tmp}/checkpoints is full", "choose another --checkpoint-dir"],
    ),
    "--checkpoint-dir's disk full (the optimizer, torch.save)": (
        checkpoint_optimizer_full,
        GPT,
        WITH_CHECKPOINTS,
        ["the disk holding --checkpoint-dir {tmp}/checkpoints is full", "choose another --checkpoint-dir"],
    ),
    "the temporary folder's disk full (the encoder's first save)": (
        encoder_temporary_full,
        ["encoder", "--data", "{tmp}/pairs.tsv"],
        [],
        ["the disk holding the temporary folder", "minitf-encoder-", "TMPDIR"],
    ),
    "the temporary folder deleted while tokenizing": (
        token_folder_deleted,
        GPT,
        [],
        ["the temporary folder", "minitf-tokens-", "was deleted while the run used it"],
    ),
    "the current folder deleted": (
        current_folder_deleted,
        GPT,
        [],
        ["the current folder", "no longer exists (it was deleted); cd to an existing folder"],
    ),
}


@pytest.mark.parametrize("case", FAULTS)
def test_faults_name_the_folder(case, tmp_path, monkeypatch, capsys):
    fault, family, options, words = FAULTS[case]
    (tmp_path / "text.txt").write_text("the cat sat on the mat\n" * 20)
    (tmp_path / "pairs.tsv").write_text("".join(f"a red cat {i}\tthe red cat {i}\n" for i in range(12)))
    fault(monkeypatch, tmp_path)
    argv = ["train", *family, "--out", "{tmp}/out", *options, "--max-steps", "1", "--batch-size", "4", "--no-progress"]
    status, _, err = run_cli([arg.format(tmp=tmp_path) for arg in argv], capsys)
    assert_one_line_error(status, err, "minitf train: error:", *(word.format(tmp=tmp_path) for word in words))
    assert not (tmp_path / "out").exists()
