"""`python -m hf_minitf.verification.worker REQUEST.json`: one runtime measuring the files of an export, in a process
of its own (an engine's threads would slow PyTorch in the process that runs the MiniTF model).

The request names the files (folder, file, the export's metadata, the loader of `runs`), the kind and its inputs
(prompts and new tokens, the MiniTF sequences whose logits to compute, or texts). The worker writes `result.json`
beside the request: per file its outputs (tokens, translations), the seconds and the count of what they produced,
or the error that stopped it (`missing`: the runtime does not import); logits and embeddings as `.npy` files; and
the runtime's versions.

Every runtime's speed is measured the same way (`catalog.verification.SPEED_MEASURE`): the worker keeps to one CPU
core before any runtime is imported (each runtime's own thread pool then has one core, as PyTorch's, whose threads
spin-waiting on a busy machine made transformers' rows read 14 tokens/s beside ONNX Runtime's 2,763), the file is
loaded and run once on the first input outside the clock, then the same inputs are timed. Where the process cannot
keep to one core (no `os.sched_setaffinity`: macOS, Windows), no seconds are given and the Speed cell stays empty.
"""

from __future__ import annotations

import json
import os
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from hf_minitf.safety.json_files import read_json

RESULT_FILE = "result.json"


def versions(distributions: list[str]) -> dict[str, str]:
    """The installed version of each distribution (those absent left out)."""
    found = {}
    for name in distributions:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def one_core() -> bool:
    """Keep this process (and the threads it starts from now on) to one CPU core of those it may use (picked by its
    process id, so that workers running at once spread over the cores); False where the system cannot (no
    `os.sched_setaffinity`)."""
    if not hasattr(os, "sched_setaffinity"):
        return False
    cores = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cores[os.getpid() % len(cores)]})
    if "torch" in sys.modules:  # imported at interpreter start (a .pth file): its pool sized before the pinning
        sys.modules["torch"].set_num_threads(1)
    return True


def timed(function, *args) -> tuple[Any, float]:
    """`function(*args)` and the seconds it took, after one warm-up call on the first input (not timed)."""
    function(*(arg[:1] if isinstance(arg, list) else arg for arg in args))
    start = time.perf_counter()
    output = function(*args)
    return output, time.perf_counter() - start


def measure(run, kind: str, request: dict, out: Path, index: int) -> dict[str, Any]:
    """What one file's run (loaded: its load is not timed) produced for the request's inputs: outputs, seconds
    (`timed`, the same call for every runtime), how many tokens or texts."""
    if kind == "generator":
        tokens, seconds = timed(run.generate, request["prompts"], request["new_tokens"])
        for number, sequence in enumerate(request["sequences"]):
            np.save(out / f"logits_{index}_{number}.npy", run.logits(sequence))
        return {"tokens": tokens, "seconds": seconds, "count": sum(map(len, tokens))}
    if kind == "embedder":
        embeddings, seconds = timed(run.encode, request["texts"])
        np.save(out / f"embeddings_{index}.npy", np.asarray(embeddings, dtype=np.float32))
        return {"seconds": seconds, "count": len(request["texts"])}
    translations, seconds = timed(run.translate, request["texts"])
    return {"translations": translations, "seconds": seconds, "count": len(request["texts"])}


def main(request_path: str) -> None:
    pinned = one_core()  # before any runtime (or torch) is imported: their thread pools size themselves from it
    from hf_minitf.verification.runs import load_run

    path = Path(request_path)
    request = read_json(path)
    results = []
    for index, target in enumerate(request["targets"]):
        try:
            run = load_run(target["loader"], target["folder"], target["file"], target["info"])
            measured = measure(run, request["kind"], request, path.parent, index)
            results.append(measured if pinned else measured | {"seconds": None})
        except ImportError as error:  # the runtime, or a module it needs, does not import: the file is not run
            results.append({"missing": str(error).strip().splitlines()[0]})
        except Exception as error:  # the runtime's own errors share no base class: reported as the file's
            message = str(error).strip().splitlines()
            results.append({"error": message[0] if message else type(error).__name__})
    result = {"results": results, "versions": versions(request["distributions"])}
    (path.parent / RESULT_FILE).write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
