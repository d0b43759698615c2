"""`minitf push` of a folder a trainer wrote (transformers' Trainer, TRL's SFTTrainer): its training by-products
(training_args.bin, optimizer and scheduler state, rng states, trainer_state.json, checkpoint-*/) stay behind, each
named on stderr, against the loopback Hub; any other pickle is still refused, and nothing is uploaded then."""

import pytest
import torch
import transformers.trainer as transformers_trainer
from factories import tiny_model
from helpers import run_cli
from transformers import TrainingArguments
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from hf_minitf.catalog.publishing import TRAINING_BYPRODUCTS, training_byproduct
from hf_minitf.safety.pickles import pickle_reason

BYPRODUCT_FILES = (
    "training_args.bin",
    "optimizer.pt",
    "scheduler.pt",
    "scaler.pt",
    "rng_state.pth",
    "rng_state_1.pth",
    "trainer_state.json",
)


@pytest.fixture
def trained_folder(tmp_path):
    """A saved tiny GPT with what `Trainer.save_model` and its checkpoints leave beside it, pickles included."""
    folder = tmp_path / "sft-out"
    tiny_model("gpt").save_pretrained(folder)
    torch.save(TrainingArguments(output_dir=str(tmp_path / "unused"), report_to="none"), folder / "training_args.bin")
    for name in ("optimizer.pt", "scheduler.pt", "scaler.pt", "rng_state.pth", "rng_state_1.pth"):
        torch.save({"state": {}, "step": 3}, folder / name)
    (folder / "trainer_state.json").write_text('{"global_step": 3, "log_history": []}\n')
    checkpoint = folder / f"{PREFIX_CHECKPOINT_DIR}-3"
    checkpoint.mkdir()
    torch.save({"state": {}}, checkpoint / "optimizer.pt")
    (checkpoint / "config.json").write_text("{}\n")
    return folder


def test_the_byproduct_names_are_transformers_trainer_names():
    """The names declared once in catalog.publishing are the ones transformers' Trainer writes."""
    for constant in ("TRAINING_ARGS_NAME", "OPTIMIZER_NAME", "OPTIMIZER_NAME_BIN", "SCHEDULER_NAME", "SCALER_NAME"):
        assert getattr(transformers_trainer, constant) in TRAINING_BYPRODUCTS, constant
    assert training_byproduct(transformers_trainer.TRAINER_STATE_NAME, is_folder=False)
    assert training_byproduct(f"{PREFIX_CHECKPOINT_DIR}-500", is_folder=True)
    assert training_byproduct("rng_state_7.pth", is_folder=False)
    # a same-named file further down, or a checkpoint-like file, is not a trainer's by-product
    assert training_byproduct("1_Pooling/optimizer.pt", is_folder=False) is None
    assert training_byproduct(f"{PREFIX_CHECKPOINT_DIR}-500", is_folder=False) is None


def test_trainer_byproducts_are_left_out_and_named(hub, trained_folder, capsys):
    assert pickle_reason(trained_folder / "training_args.bin")  # a real pickle, which push refused until now
    status, out, err = run_cli(["push", trained_folder, "org/sft-model"], capsys)
    assert status == 0, err
    assert "Pushed" in out
    uploaded = hub.files("org/sft-model")
    assert {"config.json", "model.safetensors", "README.md"} <= uploaded
    assert not any(name in uploaded for name in BYPRODUCT_FILES)
    assert not any(name.startswith(PREFIX_CHECKPOINT_DIR) for name in uploaded)
    notes = err.strip().splitlines()
    assert len(notes) == len(BYPRODUCT_FILES) + 1  # one line each, the checkpoint folder as one
    for name in (*BYPRODUCT_FILES, f"{PREFIX_CHECKPOINT_DIR}-3/"):
        line = next(line for line in notes if f"left out {name}:" in line)
        assert line.startswith("minitf push: note: ") and "not needed to load the model" in line
    assert "a pickle" in next(line for line in notes if "training_args.bin" in line)
    assert (trained_folder / "training_args.bin").is_file()  # the local folder is left as it was


def test_any_other_pickle_is_still_refused(hub, trained_folder, capsys):
    torch.save({"weights": torch.zeros(2)}, trained_folder / "extra_state.pt")
    uploads = len(hub.uploads)
    status, out, err = run_cli(["push", trained_folder, "org/refused-pickle"], capsys)
    assert status == 2 and not out
    assert "pickle files (extra_state.pt)" in err and err.count("\n") == 1
    assert len(hub.uploads) == uploads and "org/refused-pickle" not in hub.repos
