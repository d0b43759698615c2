"""`python -m hf_minitf.verification.worker REQUEST.json`: one runtime measuring the files of an export, in a process
of its own (an engine's threads would slow PyTorch in the process that runs the MiniTF model).

The request names the files (folder, file, the export's metadata, the loader of `runs`), the kind and its inputs
(prompts and new tokens, the MiniTF sequences whose logits to compute, or texts). The worker writes `result.json`
beside the request: per file its outputs (tokens, translations), the seconds and the count of what they produced,
or the error that stopped it (`missing`: the runtime does not import); logits and embeddings as `.npy` files; and
the runtime's versions.
"""

from __future__ import annotations

import json
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


def timed(function, *args) -> tuple[Any, float]:
    """`function(*args)` and the seconds it took, after one warm-up call on the first input."""
    function(*(arg[:1] if isinstance(arg, list) else arg for arg in args))
    start = time.perf_counter()
    output = function(*args)
    return output, time.perf_counter() - start


def measure(run, kind: str, request: dict, out: Path, index: int) -> dict[str, Any]:
    """What one file's run produced for the request's inputs: outputs, seconds, how many tokens or texts."""
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
    from hf_minitf.verification.runs import load_run

    path = Path(request_path)
    request = read_json(path)
    results = []
    for index, target in enumerate(request["targets"]):
        try:
            run = load_run(target["loader"], target["folder"], target["file"], target["info"])
            results.append(measure(run, request["kind"], request, path.parent, index))
        except ImportError as error:  # the runtime, or a module it needs, does not import: the file is not run
            results.append({"missing": str(error).strip().splitlines()[0]})
        except Exception as error:  # the runtime's own errors share no base class: reported as the file's
            message = str(error).strip().splitlines()
            results.append({"error": message[0] if message else type(error).__name__})
    result = {"results": results, "versions": versions(request["distributions"])}
    (path.parent / RESULT_FILE).write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
