"""`minitf train --resume` resumes only the run its checkpoint was started with: the corpus, the tokenizer's
vocabulary and the model config are recorded in every checkpoint (`RUN_RECORD`) and compared before any training;
a mismatch is one line naming what differs (it used to exit 0, training the checkpoint's weights on the ids of
another tokenizer of the same size)."""

import json
import shutil

import pytest
import transformers
from helpers import assert_one_line_error, run_cli

from hf_minitf.cli import main
from hf_minitf.training.runs import RUN_RECORD

FIRST = "the cat sat on the mat\n" * 30
STEPS = ["--block-size", "16", "--batch-size", "4", "--save-steps", "2", "--no-progress"]


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """The checkpoints of a two-step run of `minitf train gpt` on FIRST (first.txt)."""
    root = tmp_path_factory.mktemp("first_run")
    (root / "first.txt").write_text(FIRST)
    argv = [
        "train",
        "gpt",
        "--data",
        root / "first.txt",
        "--out",
        root / "out",
        "--checkpoint-dir",
        root / "checkpoints",
    ]
    assert main([str(arg) for arg in [*argv, *STEPS, "--max-steps", "2"]]) == 0
    assert (root / "checkpoints" / "checkpoint-2" / RUN_RECORD).is_file()
    return root


# (the text resumed on, its file name, more options, what the one-line refusal names; None: it resumes)
RESUMES = {
    "the same corpus under another name": (FIRST, "renamed.txt", [], None),
    "another corpus with a tokenizer of the same size": (
        "the rat sat on the mat\n" * 30,  # 11 characters as FIRST, `r` for `c`: 15 tokens with the specials
        "other.txt",
        [],
        ["another corpus and tokenizer", "first.txt with sha256", "other.txt with sha256", "(15 tokens", "; 15 tokens"],
    ),
    "the same characters in another order": (
        "the mat sat on the cat\n" * 30,  # the same tokenizer, another corpus
        "reordered.txt",
        [],
        ["was trained with another corpus: the corpus (first.txt with sha256"],
    ),
    "another preset": (FIRST, "first.txt", ["--preset", "shakespeare-char"], ["another config: config fields", "more"]),
}


@pytest.mark.parametrize("case", RESUMES)
def test_resume_checks_the_corpus_tokenizer_and_config(case, first_run, tmp_path, monkeypatch, capsys):
    text, name, options, refusal = RESUMES[case]
    checkpoints = tmp_path / "checkpoints"
    shutil.copytree(first_run / "checkpoints", checkpoints)
    (tmp_path / name).write_text(text)
    trained = []
    real_train = transformers.Trainer.train
    monkeypatch.setattr(transformers.Trainer, "train", lambda *a, **k: trained.append(1) or real_train(*a, **k))
    argv = ["train", "gpt", "--data", tmp_path / name, "--out", tmp_path / "out", "--checkpoint-dir", checkpoints]
    status, _, err = run_cli([*argv, *STEPS, *options, "--max-steps", "4", "--resume"], capsys)
    if refusal is None:
        assert status == 0, err
        state = json.loads((checkpoints / "checkpoint-4" / "trainer_state.json").read_text())
        assert state["global_step"] == 4 and (checkpoints / "checkpoint-4" / RUN_RECORD).is_file()
        return
    assert_one_line_error(status, err, f"--resume: {checkpoints / 'checkpoint-2'} was trained with", *refusal)
    assert not trained, "training started before the mismatch was found"
    assert not (tmp_path / "out").exists() and not (checkpoints / "checkpoint-4").exists()


def test_a_checkpoint_without_a_record_resumes_with_a_warning(first_run, tmp_path, capsys, caplog):
    """Checkpoints written before RUN_RECORD existed (or by another program) still resume, saying what is unchecked."""
    checkpoints = tmp_path / "checkpoints"
    shutil.copytree(first_run / "checkpoints", checkpoints)
    (checkpoints / "checkpoint-2" / RUN_RECORD).unlink()
    argv = ["train", "gpt", "--data", first_run / "first.txt", "--out", tmp_path / "out", "--checkpoint-dir"]
    with caplog.at_level("WARNING", logger="hf_minitf.training.runs"):
        status, _, err = run_cli([*argv, checkpoints, *STEPS, "--max-steps", "3", "--resume"], capsys)
    assert status == 0, err
    assert f"has no {RUN_RECORD}" in caplog.text and "cannot be compared" in caplog.text
