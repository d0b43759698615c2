"""Batch-1 greedy decoding of the same model in other engines beside MiniTF: MiniTF's default `generate()` and its
fastest fp32 path (static cache + torch.compile + eager attention, see speed.py), llama.cpp on the GGUF export at f32,
f16 and q8_0; at nanoGPT char dims (6 x 384, 65 characters, learned positions) and FrawdLLM-small dims (8 x 512,
BPE 8192, rotary positions).

Each engine runs in its own worker process (an engine loaded beside torch slows torch 2-90x on a few cores: its idle
threads spin), started once and warmed up; the timed cases are interleaved (one run of each engine per round), with
a pause before each. Results: seconds per run (median), speed as a ratio to MiniTF's default generate(), and whether
each engine's tokens equal MiniTF's. JSON into benchmarks/results/engines-<date>.json.

Engines are a registry (`ENGINES`): a name, the model file it needs (`native` folder, `gguf-<dtype>` file or the
MiniTF folder) and a loader returning `generate(prompt_ids, new_tokens) -> token ids`. Another engine is one more
entry. Run: `python benchmarks/engines.py` (final figures: on an otherwise idle machine), `--tiny` for a smoke run.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from common import RESULTS, compile_everywhere, main_or_worker, serve, time_interleaved, write_json

Generate = Callable[[list[int], int], list[int]]


# ------------------------------------------------------------------------------------------------------ engines
def _minitf(folder: Path, fastest: bool) -> Generate:
    import torch

    from hf_minitf import MiniTFGPTForCausalLM

    model = MiniTFGPTForCausalLM.from_pretrained(folder).eval()
    model.generation_config.eos_token_id = None
    options = {}
    if fastest:
        model.set_attn_implementation("eager")
        options = dict(cache_implementation="static", compile_config=compile_everywhere())

    def generate(prompt: list[int], new_tokens: int) -> list[int]:
        ids = torch.tensor([prompt])
        with torch.inference_mode():
            output = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                do_sample=False,
                pad_token_id=0,
                **options,
            )
        return output[0, len(prompt) :].tolist()

    return generate


def _llama_cpp(path: Path) -> Generate:
    from llama_cpp import Llama

    llm = Llama(model_path=str(path), n_ctx=0, n_threads=os.cpu_count(), verbose=False)  # n_ctx 0: the model's context

    def generate(prompt: list[int], new_tokens: int) -> list[int]:
        llm.reset()
        llm.eval(prompt)
        tokens = []
        for _ in range(new_tokens):
            token = int(llm.sample(temp=0.0, top_k=1))
            tokens.append(token)
            llm.eval([token])
        return tokens

    return generate


@dataclass
class Engine:
    """One engine: the file it runs (`minitf`, `native` or `gguf-<dtype>`) and its loader."""

    model_file: str
    load: Callable[[Path], Generate]
    needs: str = ""  # the module it imports, to skip the engine when it is not installed


ENGINES: dict[str, Engine] = {
    "minitf generate()": Engine("minitf", lambda path: _minitf(path, fastest=False)),
    "minitf static + compile + eager": Engine("minitf", lambda path: _minitf(path, fastest=True)),
    "llama.cpp f32": Engine("gguf-f32", _llama_cpp, "llama_cpp"),
    "llama.cpp f16": Engine("gguf-f16", _llama_cpp, "llama_cpp"),
    "llama.cpp q8_0": Engine("gguf-q8_0", _llama_cpp, "llama_cpp"),
}
REFERENCE = "minitf generate()"


# ------------------------------------------------------------------------------------------------------- models
MODELS = {"nanogpt-char": "shakespeare-char", "frawdllm-small-rope": "frawdllm-small-llama"}  # name -> GPT preset
TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4)
TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\nAll:\nSpeak, speak.\n" * 40


def build_model(name: str, folder: Path, tiny: bool) -> list[int]:
    """A MiniTF model of the named dims (random weights, seeded) with its tokenizer and exports; returns a prompt."""
    import torch
    from factories import preset_fields

    from hf_minitf import MiniTFGPTConfig, MiniTFGPTForCausalLM, char_tokenizer, train_bpe_tokenizer
    from hf_minitf.catalog.presets import PRESETS
    from hf_minitf.export import export_gguf, export_native

    settings = {**preset_fields("gpt", MODELS[name]), **(TINY if tiny else {})}
    vocab_size = settings.pop("vocab_size", None)
    if PRESETS["gpt"][MODELS[name]].tokenizer == "char":
        tokenizer = char_tokenizer(sorted(set(TEXT)), special_tokens=None, model_max_length=None)
    else:
        tokenizer = train_bpe_tokenizer(
            [TEXT], vocab_size=min(vocab_size, 512) if tiny else vocab_size, min_frequency=1
        )
    torch.manual_seed(0)
    config = MiniTFGPTConfig(vocab_size=max(len(tokenizer), vocab_size or 0), initializer_range=0.05, **settings)
    MiniTFGPTForCausalLM(config).eval().save_pretrained(folder / "minitf")
    tokenizer.save_pretrained(folder / "minitf")
    export_native(folder / "minitf", folder / "native")
    for dtype in ("f32", "f16", "q8_0"):
        export_gguf(folder / "minitf", folder / f"gguf-{dtype}", dtype=dtype)
    return tokenizer(TEXT[:40], add_special_tokens=False).input_ids[:8]


# ------------------------------------------------------------------------------------------------------- worker
def worker(spec: dict) -> None:
    """Load one engine, generate once to warm up, then time a generation on each "go" line from stdin."""
    generate = ENGINES[spec["engine"]].load(Path(spec["path"]))
    serve(lambda: generate(spec["prompt"], spec["new_tokens"]), spec["pause"])


def bench_model(name: str, engines: list[str], args) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        prompt = build_model(name, folder, args.tiny)
        specs = {
            engine: {
                "engine": engine,
                "path": str(folder / ENGINES[engine].model_file),
                "prompt": prompt,
                "new_tokens": args.new_tokens,
                "pause": args.pause,
            }
            for engine in engines
        }
        timings = time_interleaved(__file__, specs, args.repeats)
    reference = timings[REFERENCE]
    return [
        {
            "model": name,
            "engine": engine,
            "median_s": timing.median,
            "tokens_per_s": args.new_tokens / timing.median,
            "speed_vs_minitf_generate": reference.median / timing.median,
            "tokens_equal_minitf": timing.result == reference.result,
            "runs": timing.seconds,
        }
        for engine, timing in timings.items()
    ]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="small dims and few tokens: a smoke run")
    parser.add_argument("--new-tokens", type=int, default=None, help="tokens per run (default 200; tiny: 16)")
    parser.add_argument("--repeats", type=int, default=None, help="timed rounds (default 5; tiny: 1)")
    parser.add_argument("--pause", type=float, default=None, help="seconds of rest before each run (default 2)")
    parser.add_argument("--engines", default=",".join(ENGINES), help="comma-separated engine names")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated model names")
    parser.add_argument("--no-save", action="store_true", help="print only, write no JSON")
    args = parser.parse_args(argv)
    args.new_tokens = args.new_tokens or (16 if args.tiny else 200)
    args.repeats = args.repeats or (1 if args.tiny else 5)
    args.pause = args.pause if args.pause is not None else (0.0 if args.tiny else 2.0)
    engines = [
        name
        for name in args.engines.split(",")
        if not ENGINES[name].needs or importlib.util.find_spec(ENGINES[name].needs) is not None
    ]
    if REFERENCE not in engines:
        engines.insert(0, REFERENCE)
    rows = [row for model in args.models.split(",") for row in bench_model(model, engines, args)]
    print(f"{'model':<22}{'engine':<34}{'median s':>10}{'tok/s':>9}{'x generate()':>14}  tokens equal")
    for row in rows:
        print(
            f"{row['model']:<22}{row['engine']:<34}{row['median_s']:>10.3f}{row['tokens_per_s']:>9.1f}"
            f"{row['speed_vs_minitf_generate']:>14.2f}  {row['tokens_equal_minitf']}"
        )
    report = {
        "date": datetime.date.today().isoformat(),
        "cpu_count": os.cpu_count(),
        "tiny": args.tiny,
        "new_tokens": args.new_tokens,
        "repeats": args.repeats,
        "batch": 1,
        "rows": rows,
    }
    if not args.no_save:
        path = write_json(RESULTS / f"engines-{report['date']}{'-tiny' if args.tiny else ''}.json", report)
        print(f"wrote {path}")
    return report


if __name__ == "__main__":
    main_or_worker(main, worker)
