"""lm-evaluation-harness on a MiniTF GPT, offline: `lm_eval --model hf` with the local task of tests/data/lm_eval (a
YAML task over a JSONL file) gives the same word perplexity, byte perplexity and bits per byte on the MiniTF folder
(its own code, trust_remote_code) and on its native export (transformers' GPT2LMHeadModel), each run in a process
of its own."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from factories import model_folder

from hf_minitf.export import export_native

ROOT = Path(__file__).parents[2]
TASKS = ROOT / "tests" / "data" / "lm_eval"
TASK = "minitf_tiny_text"
METRICS = ("word_perplexity,none", "byte_perplexity,none", "bits_per_byte,none")


def lm_eval(folder: Path, out: Path) -> dict:
    """`lm_eval --model hf` on `folder` with the local task, from the repository root (the task names its JSONL file
    from there); the task's results."""
    command = [
        str(Path(sys.executable).with_name("lm_eval")),
        "--model", "hf",
        "--model_args", f"pretrained={folder},trust_remote_code=True,dtype=float32",
        "--include_path", str(TASKS),
        "--tasks", TASK,
        "--device", "cpu",
        "--batch_size", "1",
        "--output_path", str(out),
    ]  # fmt: skip
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "HF_ALLOW_CODE_EVAL": "0"}
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, env=environment)
    assert result.returncode == 0, result.stderr[-3000:]
    (results,) = out.rglob("results_*.json")
    return json.loads(results.read_text())["results"][TASK]


@pytest.mark.lm_eval
@pytest.mark.skipif(shutil.which("lm_eval", path=str(Path(sys.executable).parent)) is None, reason="lm-eval missing")
def test_lm_eval_gives_a_minitf_folder_and_its_native_export_the_same_numbers(tmp_path):
    source = model_folder("gpt", "learned")
    native = export_native(source, tmp_path / "native")
    minitf = lm_eval(source, tmp_path / "minitf_results")
    exported = lm_eval(native, tmp_path / "native_results")
    assert all(metric in minitf for metric in METRICS), minitf
    for metric in METRICS:
        assert minitf[metric] == pytest.approx(exported[metric], rel=1e-6), metric
    assert minitf["bits_per_byte,none"] > 1  # a random model: far from the text
