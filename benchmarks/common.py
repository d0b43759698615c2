"""What the benchmark scripts share: their common options, the worker processes that keep engines apart, the
interleaved timing rounds, the machine and results files, and the small inputs they build (word vocabularies,
random sentences).

A script runs as `python benchmarks/NAME.py`, so this folder is first on sys.path and `import common` finds this
module. Importing it also puts tests/ on sys.path: scripts make their models with tests/factories.py (the one
factory of test and benchmark models, which imports torch) by `from factories import ...` where they need it.

Worker protocol: `SCRIPT --worker` reads its case (a JSON spec) from stdin's first line, loads and warms it up
(`serve`), says `{"ready": true}`, then times one run on each "go" line, answering `{"seconds", "result"}`.
Each engine runs in a process of its own because an engine's idle threads slow the others in the same process.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
TESTS = HERE.parent / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

Key = TypeVar("Key", bound=Hashable)
WORD_LEVEL_SPECIALS = ("[UNK]", "[PAD]", "[SOS]", "[EOS]")  # hkproj's translator vocabularies start with these


# ------------------------------------------------------------------------------------------------------ options
def interleaved_parser(description: str, unit: str = "engine") -> argparse.ArgumentParser:
    """A parser with the options of a benchmark whose cases run interleaved in worker processes: --smoke,
    --rounds, --pause and --json (`parse_interleaved` fills in the defaults of --rounds and --pause)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny dims, one round: check that everything runs")
    parser.add_argument("--rounds", type=int, default=None, help=f"timed runs per {unit} (default 3, smoke 1)")
    parser.add_argument("--pause", type=float, default=None, help="seconds of rest before each timed run (2; smoke 0)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows to this JSON file")
    return parser


def parse_interleaved(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """The parsed options, with 3 rounds after 2 s of rest each unless told (--smoke: 1 round, no rest)."""
    args = parser.parse_args(argv)
    args.rounds = args.rounds or (1 if args.smoke else 3)
    if args.pause is None:
        args.pause = 0.0 if args.smoke else 2.0
    return args


# ------------------------------------------------------------------------------------------------------ workers
def main_or_worker(main: Callable[[], object], worker: Callable[[dict], None]) -> None:
    """A script's entry point: `SCRIPT --worker` serves the case whose spec is stdin's first line, else `main()`."""
    if sys.argv[1:2] == ["--worker"]:
        worker(json.loads(sys.stdin.readline()))
    else:
        main()


def serve(run: Callable[[], object], pause: float) -> None:
    """A worker's loop: run once (warm-up), say so, then time `run` on each "go" line from stdin (after `pause` s)
    and print its seconds and result as one JSON line."""
    run()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip() != "go":
            break
        time.sleep(pause)
        start = time.perf_counter()
        result = run()
        print(json.dumps({"seconds": time.perf_counter() - start, "result": result}), flush=True)


def start_worker(script: str, spec: dict, name: str) -> subprocess.Popen:
    """A worker process for one case (`script --worker`, `spec` on its stdin), returned once it has loaded the
    case and run it once; `name` says which case in the error when it fails."""
    process = subprocess.Popen(
        [sys.executable, script, "--worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(json.dumps(spec) + "\n")
    process.stdin.flush()
    if not json.loads(process.stdout.readline() or "{}").get("ready"):
        raise RuntimeError(f"the worker for {name} failed to start (see stderr above)")
    return process


@dataclass
class Timing:
    """One case's timed runs: their seconds, and what the last one (and each one) returned."""

    seconds: list[float] = field(default_factory=list)
    result: Any = None
    results: list = field(default_factory=list)  # what every run returned, in order

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def time_interleaved(script: str, specs: Mapping[Key, dict], rounds: int) -> dict[Key, Timing]:
    """Start a worker of `script` for each spec (each loads and warms up before the next starts), time every case
    once per round, interleaved so that machine noise hits all alike, and stop the workers."""
    workers: dict[Key, subprocess.Popen] = {}
    try:
        for key, spec in specs.items():
            workers[key] = start_worker(script, spec, str(key))
        timings = {key: Timing() for key in workers}
        for _ in range(rounds):
            for key, process in workers.items():
                assert process.stdin is not None and process.stdout is not None
                process.stdin.write("go\n")
                process.stdin.flush()
                answer = json.loads(process.stdout.readline())
                timings[key].seconds.append(answer["seconds"])
                timings[key].result = answer["result"]
                timings[key].results.append(answer["result"])
    finally:
        for process in workers.values():
            assert process.stdin is not None
            process.stdin.close()
            process.wait()
    return timings


def compile_everywhere():
    """generate()'s compile config for MiniTF's fastest fp32 path, compiling on CPUs too (transformers compiles
    generate's step on GPUs only unless told)."""
    from transformers import CompileConfig

    config = CompileConfig(fullgraph=False)
    config._compile_all_devices = True
    return config


# ------------------------------------------------------------------------------------------------------ figures
def least_cosine(reference: Sequence, vectors: Sequence) -> float:
    """The least cosine between matching rows of two lists of embeddings."""
    import numpy as np

    a, b = np.array(reference), np.array(vectors)
    return float(((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min())


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown CPU"


def machine() -> str:
    """The machine the figures were measured on, in one line: CPU, cores, memory and Python."""
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30
    return (
        f"{cpu_name()}, {platform.machine()}, {os.cpu_count()} cores, {memory:.0f} GiB, "
        f"Python {platform.python_version()}"
    )


def write_json(path: Path, data: object) -> Path:
    """Write `data` as indented JSON (a results file, or a file named by --json)."""
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def show_and_save(rows: list[dict], line: str, path: Path | None) -> list[dict]:
    """Print each row as the format string `line` fills it (`line.format_map(row)`) and, given a path (--json),
    write the rows there as JSON; the rows."""
    for row in rows:
        print(line.format_map(row))
    if path:
        write_json(path, rows)
    return rows


def dated_results_path(stem: str) -> Path:
    """benchmarks/results/STEM-YYYY-MM-DD.json, today's."""
    return RESULTS / f"{stem}-{time.strftime('%Y-%m-%d')}.json"


# ------------------------------------------------------------------------------------------------------- inputs
def random_sentences(rng: random.Random, count: int, prefix: str, words: int, lengths: tuple[int, int]) -> list[str]:
    """`count` sentences of `lengths[0]` to `lengths[1] - 1` random words `{prefix}{index}`, index below `words`."""
    return [" ".join(f"{prefix}{rng.randrange(words)}" for _ in range(rng.randrange(*lengths))) for _ in range(count)]


def word_level_tokenizer(prefix: str, size: int):
    """A whitespace word-level vocabulary of `size` entries, hkproj's specials then `{prefix}0`, `{prefix}1`, ..."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = [*WORD_LEVEL_SPECIALS, *(f"{prefix}{index}" for index in range(size - len(WORD_LEVEL_SPECIALS)))]
    tokenizer = Tokenizer(models.WordLevel(vocab={word: index for index, word in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    return tokenizer


def translator_folder(folder: Path, fields: dict) -> Path:
    """A MiniTF translator with random weights and the config `fields`, its vocabularies word-level ones of
    `s0 s1 ...` (source) and `t0 t1 ...` (target) of the fields' sizes."""
    from factories import random_model_folder

    from hf_minitf import MiniTFSeq2SeqTokenizer

    pair = MiniTFSeq2SeqTokenizer(
        word_level_tokenizer("s", fields["src_vocab_size"]), word_level_tokenizer("t", fields["vocab_size"])
    )
    return random_model_folder("seq2seq", folder, pair, **fields)


def encoder_folder(folder: Path, fields: dict) -> Path:
    """A MiniTF encoder (a SentenceTransformer folder) with random weights and the config `fields`, its vocabulary
    the words `w0 w1 ...` of the fields' size."""
    from factories import random_model_folder

    from hf_minitf.tokenization.miniembed import train_wordlevel_tokenizer

    tokenizer = train_wordlevel_tokenizer(
        [" ".join(f"w{index}" for index in range(fields["vocab_size"]))],
        vocab_size=fields["vocab_size"],
        min_frequency=1,
        max_length=fields["max_position_embeddings"],
    )
    return random_model_folder("encoder", folder, tokenizer, **fields)


def embed_in_length_order(encode: Callable[[list[str]], Any], texts: list[str], batch: int) -> list:
    """`encode`'s vectors (lists) of `texts`, encoded in batches of similar lengths as SentenceTransformer does, in
    the texts' order."""
    order = sorted(range(len(texts)), key=lambda index: len(texts[index]))
    vectors: list = [None] * len(texts)
    for start in range(0, len(order), batch):
        chunk = order[start : start + batch]
        for index, vector in zip(chunk, encode([texts[i] for i in chunk]).tolist()):
            vectors[index] = vector
    return vectors
