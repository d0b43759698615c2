"""Peak memory of `minitf train gpt` on generated corpora of 10 MB, 100 MB and 1 GB of text.

Writes, in a temporary folder, a text of random words (a fixed seed; lines of 4-16 words from a 5,000-word
made-up vocabulary), then runs `minitf train gpt` on it in a fresh process per case with a few training steps
(the point is the data path: reading, training the tokenizer, tokenizing, splitting) and reports that process's
peak resident memory (from `wait4`) and its time. Each run gets an address-space limit (`--memory-cap`, default
12 GiB) so that a run that would exhaust the machine fails instead; such a run is reported as failed.
`--code` runs another checkout of the package (e.g. one made with `git worktree add` at an older commit).
Results are printed and written as JSON into benchmarks/results/.

Usage: python benchmarks/training_memory.py [--sizes 10,100,1000] [--tokenizer char|bpe] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import dated_results_path, machine, write_json

ROOT = Path(__file__).resolve().parents[1]
RUN_CLI = "import sys; from hf_minitf.cli import main; sys.exit(main())"


def write_corpus(path: Path, megabytes: float, seed: int = 0) -> int:
    """Random lines of made-up words, `megabytes` MB (10**6 bytes) of UTF-8; returns the byte count."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyzàé"))
    words = ["".join(rng.choice(letters, size=rng.integers(1, 10))) for _ in range(5000)]
    weights = 1.0 / np.arange(1, len(words) + 1)  # Zipf-like, as in real text
    weights /= weights.sum()
    target, written = int(megabytes * 10**6), 0
    with path.open("w", encoding="utf-8") as handle:
        while written < target:
            picks = rng.choice(len(words), size=200_000, p=weights)
            breaks = rng.integers(4, 17, size=len(picks)) == 4  # about one line end in 13 words
            block = "".join(words[index] + ("\n" if end else " ") for index, end in zip(picks, breaks))
            block = block.encode("utf-8")[: target - written].decode("utf-8", "ignore")
            handle.write(block)
            written += len(block.encode("utf-8"))
    return written


def run_case(corpus: Path, out: Path, code: Path, tokenizer: str, steps: int, cap_gib: float) -> dict:
    """`minitf train gpt` in a fresh process under an address-space cap; its peak RSS, time and exit status."""
    command = [
        sys.executable,
        "-c",
        RUN_CLI,
        "train",
        "gpt",
        "--data",
        str(corpus),
        "--out",
        str(out),
        "--preset",
        "tiny",
        "--tokenizer",
        tokenizer,
        "--max-steps",
        str(steps),
        "--batch-size",
        "8",
        "--no-progress",
    ]
    cap = int(cap_gib * 2**30)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    env = dict(os.environ, PYTHONPATH=str(code), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="true")
    started = time.perf_counter()
    with tempfile.TemporaryFile() as stderr:
        # run from `code` itself: `python -c` puts the current folder before PYTHONPATH on sys.path
        process = subprocess.Popen(
            command, env=env, cwd=code, stdout=subprocess.DEVNULL, stderr=stderr, preexec_fn=limit
        )
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        stderr.seek(0)
        tail = stderr.read().decode("utf-8", "replace").strip().splitlines()[-1:]
    return dict(
        peak_rss_mib=round(usage.ru_maxrss / 1024),
        seconds=round(time.perf_counter() - started, 1),
        exit_status=process.returncode,
        ok=process.returncode == 0 and out.is_dir(),
        last_stderr_line=tail[0][:300] if tail else "",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,100,1000", help="corpus sizes in MB, comma-separated")
    parser.add_argument("--tokenizer", choices=("char", "bpe"), default="char")
    parser.add_argument("--steps", type=int, default=5, help="training steps per run")
    parser.add_argument("--memory-cap", type=float, default=12.0, help="address-space limit per run, GiB")
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose package is measured")
    parser.add_argument("--label", default="", help="a name for this run in the results file")
    parser.add_argument("--smoke", action="store_true", help="one 1 MB case, 2 steps, nothing written to results/")
    args = parser.parse_args()
    sizes = [1.0] if args.smoke else [float(size) for size in args.sizes.split(",")]
    steps = 2 if args.smoke else args.steps
    cases = []
    with tempfile.TemporaryDirectory(prefix="minitf-training-memory-") as tmp:
        for size in sizes:
            corpus = Path(tmp) / f"corpus-{size:g}MB.txt"
            write_corpus(corpus, size)
            numbers = run_case(corpus, Path(tmp) / f"out-{size:g}", args.code, args.tokenizer, steps, args.memory_cap)
            corpus.unlink()
            cases.append(dict(megabytes=size, tokenizer=args.tokenizer, steps=steps, **numbers))
            outcome = (
                "ok" if numbers["ok"] else f"FAILED (exit {numbers['exit_status']}): {numbers['last_stderr_line']}"
            )
            print(
                f"{size:6g} MB  {args.tokenizer}  peak RSS {numbers['peak_rss_mib']:6d} MiB  "
                f"{numbers['seconds']:7.1f} s  {outcome}",
                flush=True,
            )
    if args.smoke:
        if not cases[0]["ok"]:
            raise SystemExit("smoke run failed")
        return
    import torch

    results = dict(
        label=args.label,
        code=str(args.code),
        memory_cap_gib=args.memory_cap,
        torch=torch.__version__,
        machine=machine(),
        cases=cases,
    )
    path = write_json(dated_results_path(f"training-memory-{args.tokenizer}-{args.label or 'run'}"), results)
    print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
