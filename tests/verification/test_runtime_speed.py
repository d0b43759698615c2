"""The Speed column is measured the same way for every runtime (`hf_minitf.verification.worker`): in a process kept
to one CPU core before the runtime is imported (PyTorch's threads then number one: two spin-waiting threads on a
busy machine made transformers' rows read 14 tokens/s beside ONNX Runtime's 2,763), the file loaded and run once on
the first input outside the clock, then the same inputs timed. Checked on runs with a clock of their own
(clocked_runs.py), so no figure here depends on this machine's speed."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hf_minitf.verification.worker import RESULT_FILE

HERE = Path(__file__).parent
PROMPTS, NEW_TOKENS, TEXTS = [[5, 6, 7], [8, 9, 10, 11], [12, 13, 14]], 6, ["a b", "c d e", "f"]


def run_worker(tmp_path: Path, kind: str) -> tuple[dict, list[dict]]:
    """The worker run on `clocked_runs`' loader of `kind`: its result and the log of the run's calls."""
    log = tmp_path / f"{kind}.log"
    request = {
        "kind": kind,
        "targets": [
            {"loader": f"clocked_runs:{kind}", "folder": str(tmp_path), "file": "x", "info": {"log": str(log)}}
        ],
        "prompts": PROMPTS,
        "new_tokens": NEW_TOKENS,
        "sequences": [],
        "texts": TEXTS,
        "distributions": [],
    }
    (tmp_path / "request.json").write_text(json.dumps(request))
    environment = os.environ | {"PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    process = subprocess.run(
        [sys.executable, "-m", "hf_minitf.verification.worker", str(tmp_path / "request.json")],
        capture_output=True,
        text=True,
        env=environment,
    )
    assert process.returncode == 0, process.stderr
    (result,) = json.loads((tmp_path / RESULT_FILE).read_text())["results"]
    return result, [json.loads(line) for line in log.read_text().splitlines()]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="the system cannot keep a process to one core")
@pytest.mark.parametrize(
    ("kind", "call", "inputs", "count"),
    [
        ("generator", "generate", {"prompts": PROMPTS, "new_tokens": NEW_TOKENS}, len(PROMPTS) * NEW_TOKENS),
        ("embedder", "encode", {"texts": TEXTS}, len(TEXTS)),
        ("translator", "translate", {"texts": TEXTS}, len(TEXTS)),
    ],
)
def test_every_runtime_is_timed_on_one_core_warm_on_the_same_inputs_without_its_load(
    tmp_path, kind, call, inputs, count
):
    result, calls = run_worker(tmp_path, kind)
    load, warm_up, timed = calls
    assert load["call"] == "load" and load["cores"] == 1 and load["torch_threads"] == 1, load
    first = {name: value[:1] if isinstance(value, list) else value for name, value in inputs.items()}
    assert warm_up == {"call": call, **first, "at": warm_up["at"]}  # once on the first input, before the clock
    assert timed == {"call": call, **inputs, "at": timed["at"]}  # then the request's inputs, the same for every runtime
    # the seconds are those of the timed call alone: neither the load (100 s) nor the warm-up counted
    assert result["count"] == count and result["seconds"] == 0.5 * count


def test_a_speed_that_was_not_measured_as_for_every_runtime_is_left_out(tmp_path):
    """Where the worker could not keep to one core it gives no seconds: the Speed cell stays empty."""
    from hf_minitf.verification.runners import Target
    from hf_minitf.verification.verify import Inputs, check_of

    target = Target("ctranslate2", "embedder", tmp_path, "model.bin", "float32", label="model.bin")
    embeddings = np.array([[1.0, 0.0]], np.float32)
    output = {"embeddings": embeddings, "seconds": None, "count": 1, "versions": {}}
    check = check_of(target, {"embeddings": embeddings}, output, Inputs("embedder", texts=["a"]), str)
    assert check.agrees and check.row.speed == "" and "speed" not in check.figures
