"""What `minitf train` says while it trains and when it is stopped: log lines on stderr with numbers as numbers
(stdout keeps the result line), progress bars only when asked or on a terminal, the expected time of a long run
after its first steps, and SIGTERM / Ctrl-C stopping at the end of a step with a resumable checkpoint (or saying
that nothing was kept) and the exit status a shell expects."""

import json
import re
import signal
import subprocess
import sys
from types import SimpleNamespace

import pytest
from helpers import run_cli

from hf_minitf.training import console
from hf_minitf.training.interrupts import StopOnSignal
from hf_minitf.training.runs import RUN_RECORD

CORPUS = "the cat sat on the mat\n" * 30
SMALL = ["--block-size", "16", "--batch-size", "4", "--logging-steps", "1", "--eval-fraction", "0.1"]
NUMBER = r"-?\d+(\.\d+)?(e[-+]\d+)?"


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "cat.txt"
    path.write_text(CORPUS)
    return path


def train_argv(corpus, out, *options):
    return ["train", "gpt", "--data", corpus, "--out", out, *SMALL, *options]


def test_a_log_is_one_line_of_numbers():
    logs = {"loss": 4.53912, "grad_norm": 1.2137, "learning_rate": 0.0003, "epoch": 0.0714, "total_flos": 1e12}
    assert (
        console.log_line(logs, 20, 300) == "step 20/300: loss 4.539, grad norm 1.214, learning rate 3.0e-04, epoch 0.07"
    )
    held_out = {"eval_loss": 1.68612, "eval_runtime": 0.8071}
    assert console.log_line(held_out, 300, 300) == "step 300/300: held-out loss 1.686, held-out runtime 0.807 s"
    assert [console.duration(seconds) for seconds in (44.6, 1020, 9000)] == ["45 s", "17 min", "2.5 h"]


@pytest.mark.parametrize("bars", ["--progress", "--no-progress"])
def test_log_lines_go_to_stderr_and_stdout_keeps_the_result(bars, corpus, tmp_path, capsys):
    """transformers' ProgressCallback wrote each log to stdout as a dict of strings (`{'loss': '4.539', ...}`) and
    its PrinterCallback printed dicts: each log is now one line on stderr, numbers as numbers."""
    status, out, err = run_cli(train_argv(corpus, tmp_path / "out", "--max-steps", "2", bars), capsys)
    assert status == 0, err
    assert out.startswith("Saved gpt model (") and out.count("\n") == 1, out
    lines = [line for line in re.split(r"[\r\n]", err) if line.startswith("step ")]
    assert re.fullmatch(
        rf"step 1/2: loss {NUMBER}, grad norm {NUMBER}, learning rate {NUMBER}, epoch {NUMBER}", lines[0]
    )
    assert any(line.startswith("step 2/2: held-out loss ") for line in lines), lines
    assert "{" not in err and "'loss'" not in err
    assert ("%|" in err) == (bars == "--progress")


def test_bars_follow_the_terminal_by_default(corpus, tmp_path, capsys):
    """Without --progress or --no-progress the bars are drawn only when stderr is a terminal (here it is not)."""
    status, _, err = run_cli(train_argv(corpus, tmp_path / "out", "--max-steps", "2"), capsys)
    assert status == 0, err
    assert "%|" not in err and "\r" not in err and "step 1/2: loss " in err


@pytest.mark.parametrize("threshold, said", [(10.0, True), (14.0, False)])
def test_a_long_run_says_its_expected_time_after_its_first_steps(
    threshold, said, corpus, tmp_path, capsys, monkeypatch
):
    """Timed over ESTIMATE_STEPS steps after the first (a clock that reads 3.4 s more for each step): 4 steps at
    3.4 s are 13.6 s, said above a threshold of 10 s and not above 14 s."""
    readings = iter([100.0, 106.8])
    monkeypatch.setattr(console, "time", SimpleNamespace(monotonic=lambda: next(readings)))
    monkeypatch.setattr(console, "ESTIMATE_STEPS", 2)
    monkeypatch.setattr(console, "ESTIMATE_ABOVE_SECONDS", threshold)
    status, out, err = run_cli(train_argv(corpus, tmp_path / "out", "--max-steps", "4", "--no-progress"), capsys)
    assert status == 0, err
    estimate = (
        "4 steps at 3.4 s per step: about 3 s left; Ctrl-C stops it and keeps nothing (no checkpoint folder was "
        "given)\n"
    )
    assert (estimate in err) == said, err
    if said:  # at the end of step 3 (the first step, then two timed), before that step's log
        assert err.index("step 2/4: loss") < err.index(estimate) < err.index("step 3/4: loss")
    assert "steps at" not in out


def test_ctrl_c_stops_at_the_end_of_the_step_and_says_nothing_was_kept(corpus, tmp_path, capsys, monkeypatch):
    """Ctrl-C (SIGINT) at step 2 of a run without --checkpoint-dir: the run ends after that step, with one line
    saying nothing was kept and how to keep a checkpoint next time, status 130; no output folder; the handlers
    in place before are back."""
    real_step_end = StopOnSignal.on_step_end

    def ctrl_c_at_step_2(self, args, state, control, **kwargs):
        if state.global_step == 2:
            signal.raise_signal(signal.SIGINT)
        return real_step_end(self, args, state, control, **kwargs)

    monkeypatch.setattr(StopOnSignal, "on_step_end", ctrl_c_at_step_2)
    before = signal.getsignal(signal.SIGINT)
    status, out, err = run_cli(train_argv(corpus, tmp_path / "out", "--max-steps", "50", "--no-progress"), capsys)
    assert status == 130 and out == "", err
    assert err.splitlines()[-1] == (
        "minitf train: interrupted at step 2 of 50: nothing was kept (no --checkpoint-dir); run again "
        "with --checkpoint-dir DIR to keep a checkpoint that Ctrl-C or SIGTERM saves and --resume continues from"
    )
    assert "step 3/50" not in err and not (tmp_path / "out").exists()
    assert signal.getsignal(signal.SIGINT) is before


def test_sigterm_saves_a_checkpoint_that_resumes(corpus, tmp_path, capsys):
    """SIGTERM to a `minitf train` process once its second step is logged: it saves checkpoint-N at the step under
    way (with the run's record), says so in one line naming --resume, and exits 143; the checkpoint resumes (and is
    refused for another corpus, as every checkpoint is)."""
    checkpoints, out = tmp_path / "checkpoints", tmp_path / "out"
    argv = [*train_argv(corpus, out, "--checkpoint-dir", checkpoints, "--no-progress"), "--save-steps", "1000"]
    process = subprocess.Popen(
        [sys.executable, "-m", "hf_minitf.cli", *map(str, argv), "--max-steps", "200"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = []
    for line in process.stderr:  # the log lines come one per step
        seen.append(line)
        if line.startswith("step 2/200: loss"):
            process.send_signal(signal.SIGTERM)
            break
    stdout, rest = process.communicate(timeout=300)
    err = "".join(seen) + rest
    assert process.returncode == 143 and stdout == "", err
    last = err.splitlines()[-1]
    match = re.fullmatch(
        r"minitf train: interrupted at step (\d+) of 200: checkpoint saved to (.+); resume with the same "
        r"command plus --resume \(`minitf train gpt \.\.\. --checkpoint-dir (.+) --resume`\)",
        last,
    )
    assert match and match[2] == str(checkpoints / f"checkpoint-{match[1]}") and match[3] == str(checkpoints), last
    step = int(match[1])
    assert 2 <= step < 200 and sorted(path.name for path in checkpoints.iterdir()) == [f"checkpoint-{step}"]
    assert json.loads((checkpoints / f"checkpoint-{step}" / "trainer_state.json").read_text())["global_step"] == step
    assert (checkpoints / f"checkpoint-{step}" / RUN_RECORD).is_file() and not out.exists()

    other = tmp_path / "other.txt"
    other.write_text(CORPUS.replace("cat", "rat"))
    status, _, err = run_cli([*argv[:3], other, *argv[4:], "--max-steps", str(step + 1), "--resume"], capsys)
    assert status == 2 and "was trained with another corpus" in err, err
    status, printed, err = run_cli([*argv, "--max-steps", str(step + 1), "--resume"], capsys)
    assert status == 0 and printed.startswith("Saved gpt model"), err
    assert f"step {step + 1}/{step + 1}: loss" in err and "step 1/" not in err, err
    assert (out / "model.safetensors").is_file()


@pytest.mark.parametrize("number, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"])
def test_the_quickstart_stopped_by_a_signal_ends_as_before(number, status, tmp_path, capsys, monkeypatch):
    """The quickstart keeps nothing to resume: a signal stops its run at the end of the step, then acts as it did
    before the run (`minitf`'s SIGTERM exit, 143; Ctrl-C's one line, 130), leaving no output folder."""
    real_step_end = StopOnSignal.on_step_end

    def signal_at_step_1(self, args, state, control, **kwargs):
        if state.global_step == 1:
            signal.raise_signal(number)
        return real_step_end(self, args, state, control, **kwargs)

    monkeypatch.setattr(StopOnSignal, "on_step_end", signal_at_step_1)
    code, out, err = run_cli(["quickstart", "--out", tmp_path / "models", "--no-progress"], capsys)
    assert code == status and "Training the gpt model" in out and "encoder" not in out, err
    assert ("interrupted; no output was put in place" in err) == (number == signal.SIGINT), err
    assert not (tmp_path / "models").exists()


def test_a_signal_after_the_last_step_names_the_checkpoints_there_are(tmp_path):
    """A signal that came after the last step's end stopped no step, so no checkpoint was saved at it: the line
    says so and where --resume looks, rather than naming a folder that is not there."""
    from hf_minitf.commands.train import interrupted_line
    from hf_minitf.training.interrupts import TrainingInterrupted

    late = TrainingInterrupted(signal.SIGTERM, 300, 300, None)
    assert late.exit_status == 143
    assert interrupted_line(late, "gpt", tmp_path) == (
        f"interrupted at step 300 of 300: no checkpoint saved at this step; --resume continues from the last one in "
        f"{tmp_path}"
    )
