"""`minitf serve` under load: concurrent completion requests to each engine, beside sequential generate() calls.

    python benchmarks/serving.py [MODEL_DIR] [--requests 1 16 64] [--new-tokens 64] [--rounds 2] [--json serving.json]
        [--engines] [--vllm-python .venv-vllm/bin/python]
    python benchmarks/serving.py --tiny --rounds 1     # checks the script runs; measures nothing

Without MODEL_DIR it saves a MiniTF GPT of nanoGPT shakespeare-char dims (65 characters, 6 layers, 6 heads, 384
wide, context 256) or, with `--size quickstart`, of the quickstart GPT's (2 layers, 4 heads, 128 wide; context 128),
random weights and no end token, so every request generates exactly --new-tokens, to a temporary folder. Cases:
- `generate() sequential`: each burst's prompts through `model.generate()` one after another, in this process
  (once: it is the reference text and speed);
- `ONNX export sequential`: the same through the folder's verified ONNX export (`hf_minitf.serving.engine_cache`,
  made here first, timed once: what `minitf generate --engine onnx` runs), the export's own speed;
- `serve --engine torch`: all requests of a burst sent at once (one client thread each, the `openai` client) to
  `minitf serve MODEL_DIR --engine torch` (the default before 0.x: `generate()` one request after another);
- `serve --engine torch --continuous-batching`: the same, concurrent greedy requests generated together in
  left-padded batches;
- `serve (default: auto)`: `minitf serve MODEL_DIR`, which answers greedy requests on the folder's verified ONNX
  export (made at its first start-up, reused after), one after another; and the same with `--continuous-batching`
  (a lone request on the export, requests waiting together in a torch batch);
- `serve ONNX export`, `serve CTranslate2 export` (with --engines): the same to `minitf serve EXPORT`, the folder's
  `minitf export onnx` / `minitf export ctranslate2` made first, run by ONNX Runtime / CTranslate2;
- `serve --engine vllm` (with --vllm-python): the same to vLLM's server behind `minitf serve`, as it starts, and
  with `VLLM_CPU_NUM_OF_RESERVED_CPU=0` (vLLM's CPU build keeps a core for its scheduler by default).
The servers run one at a time, in alternating order round by round (a, b, c, then c, b, a), each a subprocess
started fresh each round (its start-up time: until /health answers) and warmed up with one request; each burst
size runs once per round. Reports, as medians over the rounds: requests per second (requests / wall time of the
burst), median and 95th-percentile request latency, generated tokens per second, start-up seconds, the server's
peak RSS (its process tree, sampled every 0.1 s), and how many answers are the text greedy `generate()` gives
(the fewest over the rounds).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai
import psutil
import torch
from common import write_json
from factories import preset_fields  # tests/factories.py, on sys.path through common
from transformers import AutoModelForCausalLM, AutoTokenizer

from hf_minitf import MiniTFGPTConfig, MiniTFGPTForCausalLM, char_tokenizer
from hf_minitf.serving.engine_cache import choose_engine
from hf_minitf.serving.process import server_process

CHARACTERS = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # shakespeare-char's 65
DIMS = {
    "nanogpt": preset_fields("gpt", "shakespeare-char"),
    "quickstart": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=128),
    "tiny": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=64),
}
LINES = [
    "ROMEO:",
    "JULIET:",
    "First Citizen:",
    "KING RICHARD:",
    "To be, or not",
    "What light",
    "O, speak again",
    "Now is the winter",
    "Friends, Romans",
    "All the world",
    "If music be",
    "Shall I compare",
    "Cry havoc",
    "Once more unto",
    "The quality of",
    "Lord, what fools",
]


def save_model(folder: Path, size: str) -> None:
    """A random MiniTF GPT with a character tokenizer and no special tokens (so nothing ends a request early),
    weights large enough that greedy text does not repeat."""
    tokenizer = char_tokenizer(CHARACTERS, special_tokens=None)
    torch.manual_seed(0)
    config = MiniTFGPTConfig(
        vocab_size=len(tokenizer),
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        initializer_range=0.2,
        **DIMS[size],
    )
    MiniTFGPTForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def prompts(count: int) -> list[str]:
    return [LINES[index % len(LINES)] + " " * (index // len(LINES)) for index in range(count)]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def burst_figures(wall: float, latencies: list[float], tokens: int) -> dict:
    return {
        "requests_per_s": len(latencies) / wall,
        "wall_s": wall,
        "median_latency_s": statistics.median(latencies),
        "p95_latency_s": percentile(latencies, 0.95),
        "tokens_per_s": tokens / wall,
    }


def in_turn(one: Callable[[str], tuple[str, float, int]], texts: list[str]) -> tuple[dict, list[str]]:
    """`one` (text -> answer, seconds, new tokens) over `texts` one after another, after a warm-up: the burst's
    figures (a caller's latency for the i-th request is everything up to its answer) and the answers."""
    one(texts[0])  # warm-up
    start = time.perf_counter()
    results = [one(text) for text in texts]
    wall = time.perf_counter() - start
    latencies = [sum(result[1] for result in results[: index + 1]) for index in range(len(results))]
    return burst_figures(wall, latencies, sum(result[2] for result in results)), [result[0] for result in results]


def generate_sequentially(folder: Path, texts: list[str], new_tokens: int) -> tuple[dict, list[str]]:
    """One burst of `texts` through generate(), one after another: a caller's latency for the i-th request is
    everything up to its answer."""
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)

    def one(text: str) -> tuple[str, float, int]:
        ids = tokenizer(text, return_tensors="pt").input_ids
        start = time.perf_counter()
        with torch.no_grad():
            output = model.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens, do_sample=False
            )
        generated = output[0, ids.shape[1] :]
        return tokenizer.decode(generated, skip_special_tokens=True), time.perf_counter() - start, len(generated)

    return in_turn(one, texts)


def engine_sequentially(runner, texts: list[str], new_tokens: int) -> tuple[dict, list[str]]:
    """One burst of `texts` through an engine runner's greedy `generate`, one after another (as
    `generate_sequentially`)."""
    tokenizer = runner.tokenizer

    def one(text: str) -> tuple[str, float, int]:
        ids = tokenizer(text, add_special_tokens=False).input_ids
        start = time.perf_counter()
        generated = runner.generate([ids], new_tokens)[0]
        return tokenizer.decode(generated, skip_special_tokens=True), time.perf_counter() - start, len(generated)

    return in_turn(one, texts)


class PeakRSS:
    """The largest summed RSS of a process and its children, sampled every 0.1 s while the block runs."""

    def __init__(self, pid: int) -> None:
        self.process, self.peak, self.done = psutil.Process(pid), 0, threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self.done.wait(0.1):
            try:
                tree = [self.process, *self.process.children(recursive=True)]
                self.peak = max(self.peak, sum(member.memory_info().rss for member in tree))
            except psutil.Error:  # a child ended between the listing and the reading
                pass

    def __enter__(self) -> PeakRSS:
        self.thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.done.set()
        self.thread.join()


@contextlib.contextmanager
def environment_set(variables: dict[str, str]) -> Iterator[None]:
    """`variables` in this process's environment (which the server subprocess inherits) while the block runs."""
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name)
            else:
                os.environ[name] = value


def export(folder: Path, engine: str) -> Path:
    """`minitf export ENGINE FOLDER` into a folder beside it (in a subprocess: the engine's threads stay there)."""
    out = folder.parent / f"{folder.name}-{engine}"
    if not out.exists():
        subprocess.run([sys.executable, "-m", "hf_minitf.cli", "export", engine, str(folder), str(out)], check=True)
    return out


def serve_bursts(folder: Path, bursts: dict[int, list[str]], new_tokens: int, options: tuple[str, ...]) -> dict:
    """Start `minitf serve MODEL OPTIONS`, warm it up, send each burst at once; its figures and answers."""
    started = time.perf_counter()
    with (
        server_process([folder], "--log-level", "warning", *options, timeout=900) as server,
        PeakRSS(server.process.pid) as memory,
        openai.OpenAI(base_url=f"{server.url}/v1", api_key="none", max_retries=0, timeout=3600) as client,
    ):
        startup = time.perf_counter() - started

        def one(text: str) -> tuple[str, float, int]:
            start = time.perf_counter()
            completion = client.completions.create(model=str(folder), prompt=text, max_tokens=new_tokens, temperature=0)
            return completion.choices[0].text, time.perf_counter() - start, completion.usage.completion_tokens

        one(next(iter(bursts.values()))[0])  # warm-up (continuous batching sets its cache up on the first request)
        figures = {}
        for size, texts in bursts.items():
            with ThreadPoolExecutor(size) as pool:
                start = time.perf_counter()
                results = list(pool.map(one, texts))
                wall = time.perf_counter() - start
            figures[size] = {
                **burst_figures(wall, [result[1] for result in results], sum(result[2] for result in results)),
                "answers": [result[0] for result in results],
            }
    return {"startup_s": startup, "peak_rss_mb": memory.peak / 2**20, "bursts": figures}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", type=Path, help="a GPT folder (default: a random MiniTF GPT)")
    parser.add_argument("--requests", type=int, nargs="+", default=[1, 16, 64], help="burst sizes (default: 1 16 64)")
    parser.add_argument("--new-tokens", type=int, default=64, help="tokens each request generates (default 64)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds over the servers (default 2)")
    parser.add_argument("--vllm-python", type=Path, help="vLLM's Python: adds `minitf serve --engine vllm`")
    parser.add_argument(
        "--engines", action="store_true", help="add the model's ONNX and CTranslate2 exports, served by minitf serve"
    )
    parser.add_argument("--json", type=Path, help="write every figure to this JSON file")
    parser.add_argument(
        "--size",
        choices=[name for name in DIMS if name != "tiny"],
        default="nanogpt",
        help="the random GPT's dims: nanogpt (6 x 384, context 256; default) or quickstart (2 x 128, context 128)",
    )
    parser.add_argument("--tiny", action="store_true", help="tiny model and 4 tokens: checks the script runs")
    args = parser.parse_args(argv)
    new_tokens = 4 if args.tiny else args.new_tokens
    bursts = {size: prompts(size) for size in args.requests}
    # name -> (the folder served: the model or one of its exports, options, environment)
    servers: dict[str, tuple[str, tuple[str, ...], dict[str, str]]] = {
        "serve --engine torch": ("model", ("--engine", "torch"), {}),
        "serve --engine torch --continuous-batching": ("model", ("--engine", "torch", "--continuous-batching"), {}),
        "serve (default: auto)": ("model", (), {}),
        "serve --continuous-batching (auto)": ("model", ("--continuous-batching",), {}),
    }
    if args.engines:
        servers["serve ONNX export"] = ("onnx", (), {})
        servers["serve CTranslate2 export"] = ("ctranslate2", (), {})
    if args.vllm_python:
        vllm = ("--engine", "vllm", "--vllm-python", str(args.vllm_python))
        servers["serve --engine vllm"] = ("model", vllm, {})
        # vLLM's CPU build keeps one core for its scheduler: on 2 cores the model gets one thread, unless told not to
        servers["serve --engine vllm, no core reserved"] = ("model", vllm, {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0"})
    with tempfile.TemporaryDirectory() as work:
        folder = args.model or Path(work) / "gpt"
        if args.model is None:
            save_model(folder, "tiny" if args.tiny else args.size)
        served = {"model": folder}
        if args.engines:
            served.update({engine: export(folder, engine) for engine in ("onnx", "ctranslate2")})
        reference = {size: generate_sequentially(folder, texts, new_tokens) for size, texts in bursts.items()}
        started = time.perf_counter()
        choice = choose_engine(folder, "onnx")  # the export auto serves, made and verified once here
        export_seconds = time.perf_counter() - started
        print(f"ONNX export of {folder}: {choice.reason} ({export_seconds:.1f} s)", flush=True)
        on_engine = {size: engine_sequentially(choice.runner, texts, new_tokens) for size, texts in bursts.items()}
        runs: dict[str, list[dict]] = {name: [] for name in servers}
        for round_index in range(args.rounds):
            order = list(servers) if round_index % 2 == 0 else list(reversed(servers))
            for name in order:
                which, options, environment = servers[name]
                with environment_set(environment):
                    runs[name].append(serve_bursts(served[which], bursts, new_tokens, options))
    report: dict = {
        "settings": {
            "model": str(args.model or f"random MiniTF GPT ({'tiny' if args.tiny else args.size} dims)"),
            "requests": args.requests,
            "new_tokens": new_tokens,
            "rounds": args.rounds,
            "torch_threads": torch.get_num_threads(),
            "onnx_export_and_verification_s": export_seconds,
        },
        "cases": {},
    }
    for size in args.requests:
        figures, expected = reference[size]
        rows = {"generate() sequential": {**figures, "same_text_as_generate": True, "answers_as_generate": "-"}}
        engine_figures, engine_answers = on_engine[size]
        equal = sum(a == b for a, b in zip(engine_answers, expected))
        rows["ONNX export sequential"] = {
            **engine_figures,
            "same_text_as_generate": equal == size,
            "answers_as_generate": f"{equal}/{size}",
        }
        for name, server_runs in runs.items():
            row = {
                field: statistics.median(run["bursts"][size][field] for run in server_runs)
                for field in ("requests_per_s", "wall_s", "median_latency_s", "p95_latency_s", "tokens_per_s")
            }
            row["startup_s"] = statistics.median(run["startup_s"] for run in server_runs)
            row["peak_rss_mb"] = max(run["peak_rss_mb"] for run in server_runs)
            equal = min(sum(a == b for a, b in zip(run["bursts"][size]["answers"], expected)) for run in server_runs)
            row["same_text_as_generate"] = equal == size
            row["answers_as_generate"] = f"{equal}/{size}"
            rows[name] = row
        for row in rows.values():
            row["speedup_vs_generate"] = row["requests_per_s"] / figures["requests_per_s"]
        report["cases"][str(size)] = rows
        print(f"{size} concurrent requests of {new_tokens} new tokens, medians of {args.rounds} rounds")
        print(
            f"{'case':44} {'req/s':>8} {'x generate':>10} {'median s':>9} {'p95 s':>8} {'tok/s':>8} "
            f"{'start s':>8} {'peak MB':>8} as generate()"
        )
        for name, row in rows.items():
            print(
                f"{name:44} {row['requests_per_s']:8.2f} {row['speedup_vs_generate']:10.2f} "
                f"{row['median_latency_s']:9.3f} {row['p95_latency_s']:8.3f} {row['tokens_per_s']:8.1f} "
                f"{row.get('startup_s', 0):8.1f} {row.get('peak_rss_mb', 0):8.0f} {row['answers_as_generate']}"
            )
    if args.json:
        write_json(args.json, report)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
