"""What an installed hf-minitf costs processes that never use it: interpreter start and transformers' imports,
timed as whole processes with and without the package.

Each statement runs in a fresh process of each interpreter given, interleaved (A, B, C, A, B, C, ...) so that a
busy machine slows every side alike; the figure is the median of `--runs` processes, with the fewest and most
modules any side imported (`python -X importtime`, one line per module). An interpreter is named `LABEL=PATH` (a
venv's python); `LABEL=PATH:off` runs it with HF_MINITF_NO_AUTOREGISTER=1. The first is the one measured, the last
the baseline (a venv without hf-minitf); the bound is the issue's: at most 5% or 50 ms over the baseline, whichever
is larger. Results are printed and written as JSON into benchmarks/results/.

Usage: python benchmarks/startup.py with=VENV_A/bin/python off=VENV_A/bin/python:off without=VENV_B/bin/python
       [--runs 10]
(`make test-wheel` with KEEP=1 leaves a venv with the wheel installed; a copy of it with `pip uninstall hf-minitf`
is the baseline.)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from common import dated_results_path, machine, write_json

ROOT = Path(__file__).resolve().parents[1]
STATEMENTS = (
    "pass",
    "import transformers",
    "from transformers import AutoTokenizer",
    "from transformers import AutoModel, pipeline",
)
BOUND_RATIO, BOUND_SECONDS = 0.05, 0.050
# Where the processes run: not a checkout, whose `hf_minitf` (first on `python -c`'s sys.path) would shadow the
# installed one.
NEUTRAL_FOLDER = tempfile.gettempdir()


def run_once(python: str, hook_off: bool, statement: str) -> tuple[float, int]:
    """Seconds of one process running `statement`, and the modules it imported."""
    env = {key: value for key, value in os.environ.items() if key != "HF_MINITF_NO_AUTOREGISTER"}
    if hook_off:
        env["HF_MINITF_NO_AUTOREGISTER"] = "1"
    start = time.perf_counter()
    done = subprocess.run(
        [python, "-X", "importtime", "-c", statement], env=env, capture_output=True, text=True, cwd=NEUTRAL_FOLDER
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{python} -c {statement!r} failed:\n{done.stderr[-2000:]}")
    return seconds, sum(line.startswith("import time:") for line in done.stderr.splitlines()) - 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sides", nargs="+", metavar="LABEL=PYTHON[:off]")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    sides = {}
    for side in args.sides:
        label, _, python = side.partition("=")
        sides[label] = (python.removesuffix(":off"), python.endswith(":off"))
    results: dict[str, dict[str, dict]] = {}
    for statement in STATEMENTS:
        timings: dict[str, list[float]] = {label: [] for label in sides}
        modules: dict[str, set[int]] = {label: set() for label in sides}
        for python, off in sides.values():  # a warm-up process each: the file cache, not the figure
            run_once(python, off, statement)
        for _ in range(args.runs):
            for label, (python, off) in sides.items():
                seconds, count = run_once(python, off, statement)
                timings[label].append(seconds)
                modules[label].add(count)
        results[statement] = {
            label: {
                "median_s": statistics.median(timings[label]),
                "min_s": min(timings[label]),
                "max_s": max(timings[label]),
                "modules": sorted(modules[label]),
            }
            for label in sides
        }
    measured, baseline = next(iter(sides)), list(sides)[-1]
    print(f"{args.runs} runs each, interleaved; median seconds (modules imported)")
    print(f"{'statement':<46}" + "".join(f"{label:>20}" for label in sides) + f"{'over ' + baseline:>22}  bound")
    for statement, by_side in results.items():
        over = by_side[measured]["median_s"] - by_side[baseline]["median_s"]
        allowed = max(BOUND_RATIO * by_side[baseline]["median_s"], BOUND_SECONDS)
        cells = "".join(
            f"{value['median_s']:>11.3f} ({'/'.join(map(str, value['modules'])):>6})" for value in by_side.values()
        )
        ratio = by_side[measured]["median_s"] / by_side[baseline]["median_s"]
        print(f"{statement:<46}{cells}{over * 1000:>+12.0f} ms {ratio:>5.2f}x  {'ok' if over <= allowed else 'OVER'}")
        by_side["over_baseline_s"] = over  # type: ignore[assignment]
        by_side["within_bound"] = over <= allowed  # type: ignore[assignment]
    out = write_json(
        dated_results_path("startup"),
        {
            "machine": machine(),
            "sides": {label: {"python": python, "hook_off": off} for label, (python, off) in sides.items()},
            "runs": args.runs,
            "results": results,
        },
    )
    print(f"written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
