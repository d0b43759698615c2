"""`minitf train --compile` (torch.compile of the model in training) and bf16 autocast on a CPU: both train a tiny GPT
whose losses follow the float32 eager run's (same seed); bf16 on a CPU without bf16 instructions is refused."""

import pytest
import torch
from helpers import run_cli

import hf_minitf.training.common as training_common
from hf_minitf.training.trainers import TrainingError, TrainSettings, train_gpt

TEXT = "First Citizen: Before we proceed any further, hear me speak.\n" * 30
TINY = dict(
    hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, max_position_embeddings=32
)


def losses(**options) -> list[float]:
    """The training loss of each of 4 steps of a tiny GPT (seed 0) trained with the TrainSettings `options`."""
    settings = TrainSettings(max_steps=4, batch_size=4, logging_steps=1, progress=False, **options)
    result = train_gpt(TEXT, None, block_size=16, eval_fraction=0, settings=settings, config_overrides=TINY)
    return [loss for _, loss in result.losses]


def assert_close_losses(losses: list[float], reference: list[float], relative: float) -> None:
    assert len(losses) == len(reference) == 4
    for loss, expected in zip(losses, reference):
        assert abs(loss - expected) <= relative * abs(expected), (losses, reference)


def test_compile_trains_the_compiled_model_to_the_same_losses():
    eager = losses()
    torch._dynamo.reset()
    compiled_frames = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    compiled = losses(compile=True)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] > compiled_frames  # the model went through dynamo
    assert_close_losses(compiled, eager, 1e-4)
    assert eager[-1] < eager[0]  # it learns


@pytest.mark.skipif(not training_common.cpu_has_bf16(), reason="this CPU has no bf16 instructions")
def test_bf16_autocast_on_a_cpu_with_bf16_trains_like_float32():
    autocast = losses(mixed_precision="bf16")
    assert autocast != losses()  # computed in bf16: not the float32 figures
    assert_close_losses(autocast, losses(), 0.02)


def test_bf16_on_a_cpu_without_it_is_refused(monkeypatch):
    monkeypatch.setattr(training_common, "has_gpu", lambda: False)
    monkeypatch.setattr(training_common, "cpu_has_bf16", lambda: False)
    with pytest.raises(TrainingError, match="bf16 needs a GPU or a CPU with bf16 instructions.*--mixed-precision no"):
        losses(mixed_precision="bf16")


def test_the_command_passes_compile_and_bf16_to_the_trainer(tmp_path, capsys, monkeypatch):
    """`--compile` and `--mixed-precision bf16` reach the settings the Trainer's arguments are built from (the
    run stops there: the tests above train)."""
    (tmp_path / "text.txt").write_text(TEXT)
    seen = []

    def recording(settings, *args, **kwargs):
        seen.append(settings)
        raise TrainingError("stopped by the test")

    monkeypatch.setattr(training_common, "training_arguments", recording)
    argv = ["train", "gpt", "--data", tmp_path / "text.txt", "--out", tmp_path / "model", "--no-progress"]
    status, _, err = run_cli([*argv, "--compile", "--mixed-precision", "bf16"], capsys)
    assert status != 0 and "stopped by the test" in err
    assert seen[0].compile is True and seen[0].mixed_precision == "bf16"
    run_cli(argv, capsys)
    assert seen[1].compile is False
