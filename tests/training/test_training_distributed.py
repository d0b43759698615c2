"""The same training runs on two processes with torchrun (gloo on CPU), through transformers' Trainer."""

import json
import os
import subprocess
import sys
from pathlib import Path

WORKER = Path(__file__).parents[1] / "training_worker.py"


def test_two_processes_train_the_same_weights_and_the_loss_falls(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            str(WORKER),
            str(tmp_path),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    assert [rank["world_size"] for rank in ranks] == [2, 2]
    assert ranks[0]["weights_sha256"] == ranks[1]["weights_sha256"]
    losses = ranks[0]["losses"]
    assert len(losses) >= 8 and losses[-1] < 0.9 * losses[0], losses
    # Only the main process writes the folder.
    assert [rank["wrote_folder"] for rank in ranks] == [True, False]
    assert (tmp_path / "model" / "model.safetensors").is_file()
