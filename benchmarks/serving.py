"""`minitf serve` under load: concurrent completion requests, with and without --continuous-batching, beside the
same number of sequential generate() calls.

    python benchmarks/serving.py [MODEL_DIR] [--requests 16] [--new-tokens 64] [--repeats 3] [--json serving.json]
    python benchmarks/serving.py --tiny --repeats 1     # checks the script runs; measures nothing

Without MODEL_DIR it saves a MiniTF GPT of nanoGPT shakespeare-char dims (vocab 65, 6 layers, 6 heads, 384 wide,
context 256; random weights) to a temporary folder. Cases, one after another (a running server idles beside the
others, so none runs during another's measurement):
- `generate() sequential`: the requests' prompts through `model.generate()` one after another, in this process;
- `serve`: all requests sent at once (one client thread each, the `openai` client) to `minitf serve MODEL_DIR`,
  whose transformers GenerateManager runs them one after another on its inference thread;
- `serve --continuous-batching`: the same to `minitf serve MODEL_DIR --continuous-batching` (paged attention).
Each server is a subprocess, warmed up with one request before the timed repeats. Reports, as medians over the
repeats: requests per second (requests / wall time of the whole burst), median and slowest request latency,
generated tokens per second, and whether every answer is the text greedy `generate()` gives its prompt.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from hf_minitf import MiniTFGPTConfig, MiniTFGPTForCausalLM, char_tokenizer
from hf_minitf.serving.process import server_process

CHARACTERS = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # shakespeare-char's 65
DIMS = {
    "full": dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=6, max_position_embeddings=256),
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


def save_model(folder: Path, tiny: bool) -> None:
    """A random MiniTF GPT with a character tokenizer (weights large enough that greedy text does not repeat)."""
    tokenizer = char_tokenizer(CHARACTERS)
    torch.manual_seed(0)
    config = MiniTFGPTConfig(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        initializer_range=0.2,
        **DIMS["tiny" if tiny else "full"],
    )
    MiniTFGPTForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def prompts(count: int) -> list[str]:
    return [LINES[index % len(LINES)] + " " * (index // len(LINES)) for index in range(count)]


def generate_sequentially(folder: Path, texts: list[str], new_tokens: int, repeats: int) -> tuple[dict, list[str]]:
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)

    def one(text: str) -> tuple[str, float, int]:
        inputs = tokenizer(text, return_tensors="pt")
        start = time.perf_counter()
        with torch.no_grad():
            output = model.generate(**inputs, max_new_tokens=new_tokens, do_sample=False)
        generated = output[0, inputs["input_ids"].shape[1] :]
        return tokenizer.decode(generated, skip_special_tokens=True), time.perf_counter() - start, len(generated)

    one(texts[0])  # warm-up
    runs, answers = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        results = [one(text) for text in texts]
        # A sequential caller's latency for the i-th request is everything up to its answer.
        latencies = [sum(result[1] for result in results[: index + 1]) for index in range(len(results))]
        runs.append((time.perf_counter() - start, latencies, sum(result[2] for result in results)))
        answers = [result[0] for result in results]
    return summarize(runs, len(texts)), answers


def serve_concurrently(
    folder: Path,
    texts: list[str],
    new_tokens: int,
    repeats: int,
    *options: str,
) -> tuple[dict, list[str]]:
    with (
        server_process([folder], "--log-level", "warning", *options) as server,
        openai.OpenAI(base_url=f"{server.url}/v1", api_key="none", max_retries=0, timeout=3600) as client,
    ):

        def one(text: str) -> tuple[str, float, int]:
            start = time.perf_counter()
            completion = client.completions.create(model=str(folder), prompt=text, max_tokens=new_tokens, temperature=0)
            return completion.choices[0].text, time.perf_counter() - start, completion.usage.completion_tokens

        one(texts[0])  # warm-up (continuous batching sets its cache up on the first request)
        runs, answers = [], []
        with ThreadPoolExecutor(len(texts)) as pool:
            for _ in range(repeats):
                start = time.perf_counter()
                results = list(pool.map(one, texts))
                runs.append(
                    (
                        time.perf_counter() - start,
                        [result[1] for result in results],
                        sum(result[2] for result in results),
                    )
                )
                answers = [result[0] for result in results]
    return summarize(runs, len(texts)), answers


def summarize(runs: list[tuple[float, list[float], int]], requests: int) -> dict:
    """Medians over the bursts; each run is (wall seconds, latency of each request, tokens generated)."""
    wall = statistics.median(run[0] for run in runs)
    return {
        "requests_per_s": requests / wall,
        "wall_s": wall,
        "median_latency_s": statistics.median(statistics.median(run[1]) for run in runs),
        "max_latency_s": statistics.median(max(run[1]) for run in runs),
        "tokens_per_s": statistics.median(run[2] / run[0] for run in runs),
        "wall_s_per_repeat": [run[0] for run in runs],
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", type=Path, help="a GPT folder (default: a random MiniTF GPT)")
    parser.add_argument("--requests", type=int, default=16, help="concurrent requests (default 16)")
    parser.add_argument("--new-tokens", type=int, default=64, help="tokens each request generates (default 64)")
    parser.add_argument("--repeats", type=int, default=3, help="timed bursts per case (default 3)")
    parser.add_argument("--json", type=Path, help="write every figure to this JSON file")
    parser.add_argument("--tiny", action="store_true", help="tiny model and 4 tokens: checks the script runs")
    args = parser.parse_args(argv)
    new_tokens = 4 if args.tiny else args.new_tokens
    texts = prompts(args.requests)
    with tempfile.TemporaryDirectory() as work:
        folder = args.model or Path(work) / "gpt"
        if args.model is None:
            save_model(folder, args.tiny)
        reference, expected = generate_sequentially(folder, texts, new_tokens, args.repeats)
        report = {
            "settings": {
                "model": str(args.model or "random MiniTF GPT" + (" (tiny)" if args.tiny else "")),
                "requests": args.requests,
                "new_tokens": new_tokens,
                "repeats": args.repeats,
                "torch_threads": torch.get_num_threads(),
            },
            "cases": {"generate() sequential": {**reference, "same_text_as_generate": True}},
        }
        for case, options in (("serve", ()), ("serve --continuous-batching", ("--continuous-batching",))):
            figures, answers = serve_concurrently(folder, texts, new_tokens, args.repeats, *options)
            report["cases"][case] = {**figures, "same_text_as_generate": answers == expected}
    baseline = report["cases"]["generate() sequential"]["requests_per_s"]
    print(f"{args.requests} requests of {new_tokens} new tokens, medians of {args.repeats} bursts")
    print(f"{'case':32} {'req/s':>8} {'x generate':>10} {'median lat s':>13} {'max lat s':>10} {'tok/s':>8} same text")
    for case, row in report["cases"].items():
        row["speedup_vs_generate"] = row["requests_per_s"] / baseline
        print(
            f"{case:32} {row['requests_per_s']:8.2f} {row['speedup_vs_generate']:10.2f} "
            f"{row['median_latency_s']:13.3f} {row['max_latency_s']:10.3f} {row['tokens_per_s']:8.1f} "
            f"{row['same_text_as_generate']}"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
