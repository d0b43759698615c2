"""vLLM's two ways to run a MiniTF GPT, side by side: its own kernels on the `minitf export native` folder, and its
transformers backend on the MiniTF folder itself (`model_impl="transformers"`, `trust_remote_code=True`).

Run in vLLM's environment (`make vllm-env`): `.venv-vllm/bin/python benchmarks/vllm_backends.py [--json FILE]`.
A random MiniTF GPT of nanoGPT shakespeare-char dims (as benchmarks/serving.py: 6 layers x 384, heads of 64 values,
learned positions), and the same with rotary positions; for each, offline `LLM.generate` of `--prompts` greedy
prompts of `--new-tokens` tokens each (EOS ignored, so both paths generate the same number), each path in a
process of its own, one after the other, in alternating order over `--rounds`. Reported: load seconds, generation
seconds and tokens/s (medians), and whether both paths give the same token ids.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULT = "vllm_backends result: "
CHARACTERS = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def save_models(root: Path) -> dict[str, dict[str, str]]:
    """position type -> {"minitf": folder, "native": its native export}."""
    from hf_minitf import char_tokenizer
    from hf_minitf.export.native import export_native

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from factories import preset_fields, random_model_folder

    tokenizer = char_tokenizer(CHARACTERS)
    folders = {}
    for positions in ("learned", "rope"):
        fields = preset_fields("gpt", "shakespeare-char", position_embedding_type=positions, initializer_range=0.2)
        folder = random_model_folder("gpt", root / positions, tokenizer, **fields)
        folders[positions] = {"minitf": str(folder), "native": str(export_native(folder, root / f"{positions}_native"))}
    return folders


def worker(spec: dict) -> None:
    """Load vLLM on one folder and generate once to warm up, then time one generation; print the figures."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    from vllm import LLM, SamplingParams

    started = time.perf_counter()
    transformers_backend = spec["path"] == "minitf"
    llm = LLM(
        model=spec["folder"],
        dtype="float32",
        seed=0,
        trust_remote_code=transformers_backend,
        model_impl="transformers" if transformers_backend else "auto",
    )
    load = time.perf_counter() - started
    params = SamplingParams(temperature=0, max_tokens=spec["new_tokens"], ignore_eos=True)
    prompts = [{"prompt_token_ids": ids} for ids in spec["prompts"]]
    llm.generate(prompts, params, use_tqdm=False)  # warm-up
    started = time.perf_counter()
    outputs = llm.generate(prompts, params, use_tqdm=False)
    seconds = time.perf_counter() - started
    ids = [list(output.outputs[0].token_ids) for output in outputs]
    print(RESULT + json.dumps({"load_s": load, "seconds": seconds, "ids": ids}), flush=True)


def run_worker(spec: dict) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(spec)], capture_output=True, text=True, timeout=1800
    )
    if done.returncode != 0:
        raise RuntimeError(f"the worker for {spec['path']} failed:\n{done.stderr[-3000:]}")
    (line,) = [line for line in done.stdout.splitlines() if line.startswith(RESULT)]  # vLLM prints on stdout too
    return json.loads(line.removeprefix(RESULT))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=64, help="prompts per generation (default 64)")
    parser.add_argument("--new-tokens", type=int, default=64, help="tokens per prompt (default 64)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds over the two paths (default 2)")
    parser.add_argument("--json", type=Path, help="write the figures to this JSON file")
    args = parser.parse_args(argv)
    report: dict = {"settings": vars(args) | {"json": None}, "models": {}}
    with tempfile.TemporaryDirectory() as root:
        folders = save_models(Path(root))
        for positions, paths in folders.items():
            prompts = [[1 + (index * 7 + step) % 60 for step in range(6)] for index in range(args.prompts)]
            runs: dict[str, list[dict]] = {"native": [], "minitf": []}
            for round_index in range(args.rounds):
                for path in ("native", "minitf") if round_index % 2 == 0 else ("minitf", "native"):
                    spec = {"path": path, "folder": paths[path], "prompts": prompts, "new_tokens": args.new_tokens}
                    runs[path].append(run_worker(spec))
            rows = {}
            for path, path_runs in runs.items():
                seconds = statistics.median(run["seconds"] for run in path_runs)
                rows[path] = {
                    "load_s": statistics.median(run["load_s"] for run in path_runs),
                    "seconds": seconds,
                    "tokens_per_s": args.prompts * args.new_tokens / seconds,
                }
            same = all(run["ids"] == runs["native"][0]["ids"] for path_runs in runs.values() for run in path_runs)
            report["models"][positions] = {"paths": rows, "same_ids": same}
            for path, row in rows.items():
                name = "native export" if path == "native" else "transformers backend"
                print(
                    f"{positions:8} {name:22} load {row['load_s']:6.1f} s  {row['seconds']:7.2f} s  "
                    f"{row['tokens_per_s']:8.1f} tokens/s  same ids: {same}",
                    flush=True,
                )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker(json.loads(sys.argv[2]))
    else:
        main()
