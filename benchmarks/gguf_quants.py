"""Each `minitf export gguf --dtype` on one GPT: the file's size, its tensors that fell back, its agreement with the
MiniTF folder (what the export measures: greedy tokens over 8 prompts x 64 tokens, perplexity beside float32's,
the weights dequantized and run in MiniTF) and its decode speed in llama.cpp (llama-cpp-python, greedy, batch 1,
one thread, one process per file, after a warm-up run; "not run" without llama-cpp-python).

Random weights at nanoGPT shakespeare-char's dims (6 layers x 384, context 256, a character vocabulary): rows of
384 are multiples of 32, not of 256, but ffn_down's rows of 1536 are, so the K-quant mixes keep Q4_K / Q5_K / Q6_K
there and are refused (the gguf package cannot write them); the refusal is the row. Random weights have near-tied
top logits, so their greedy tokens flip more easily than a trained model's.

    python benchmarks/gguf_quants.py                 # the figures
    python benchmarks/gguf_quants.py --smoke         # tiny dims, few tokens: checks that it runs
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from common import write_json

LLAMA_DECODE = """
import json, sys, time
from llama_cpp import Llama
spec = json.loads(sys.argv[1])
llm = Llama(model_path=spec["path"], n_ctx=spec["n_ctx"], n_threads=spec["threads"], verbose=False)
def decode():
    llm.reset()
    llm.eval(spec["prompt"])
    start = time.perf_counter()
    for _ in range(spec["new_tokens"]):
        llm.eval([int(llm.sample(temp=0.0, top_k=1))])
    return time.perf_counter() - start
decode()  # warm-up
seconds = sorted(decode() for _ in range(spec["repeats"]))[spec["repeats"] // 2]
print(json.dumps({"tokens_per_s": spec["new_tokens"] / seconds}))
"""


def make_source(root: Path, smoke: bool) -> Path:
    """The MiniTF GPT folder: shakespeare-char's dims (tiny ones for --smoke), random weights, characters."""
    from factories import EXPORT_TEXT, TINY_SIZES, preset_fields, random_model_folder

    from hf_minitf import char_tokenizer

    fields = dict(TINY_SIZES["gpt"]) if smoke else preset_fields("gpt", "shakespeare-char")
    fields.pop("vocab_size", None)
    return random_model_folder("gpt", root / "gpt", char_tokenizer(EXPORT_TEXT), 0, **fields)


def llama_speed(path: Path, prompt: list[int], new_tokens: int, n_ctx: int) -> float | None:
    """llama.cpp's greedy decode speed on the file, in a process of its own; None without llama-cpp-python."""
    if importlib.util.find_spec("llama_cpp") is None:
        return None
    spec = {"path": str(path), "prompt": prompt, "new_tokens": new_tokens, "n_ctx": n_ctx, "threads": 1, "repeats": 3}
    completed = subprocess.run(
        [sys.executable, "-c", LLAMA_DECODE, json.dumps(spec)], capture_output=True, text=True, timeout=600
    )
    if completed.returncode != 0:
        raise RuntimeError(completed.stderr[-2000:])
    return json.loads(completed.stdout.strip().splitlines()[-1])["tokens_per_s"]


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny dims and few tokens: checks that it runs")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows to this file")
    args = parser.parse_args(argv)

    from transformers import AutoTokenizer

    from hf_minitf.catalog.limits import GGUF_DTYPES
    from hf_minitf.export.gguf import export_gguf_report
    from hf_minitf.export.source import ExportRefused

    rows = []
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        source = make_source(root, args.smoke)
        prompt = AutoTokenizer.from_pretrained(source)("the quick brown fox", add_special_tokens=False).input_ids
        n_ctx = json.loads((source / "config.json").read_text())["max_position_embeddings"]
        new_tokens = 16 if args.smoke else n_ctx - len(prompt)
        for dtype in GGUF_DTYPES:
            try:
                written = export_gguf_report(source, root / f"{dtype}.gguf", dtype=dtype)
            except ExportRefused as refusal:
                rows.append({"dtype": dtype, "refused": str(refusal)})
                continue
            agreement = written.agreement
            rows.append(
                {
                    "dtype": dtype,
                    "bytes": written.size,
                    "fallbacks": len(written.fallbacks),
                    "types": sorted({tensor.type for tensor in written.types.values()}),
                    "prompts_equal": f"{agreement.equal_prompts}/{agreement.prompts}",
                    "tokens_equal": f"{agreement.equal_tokens}/{agreement.prompts * agreement.new_tokens}",
                    "first_difference": agreement.first_difference,
                    "perplexity": round(agreement.perplexity, 4),
                    "float32_perplexity": round(agreement.float32_perplexity, 4),
                    "llama_cpp_tokens_per_s": llama_speed(written.path, prompt, new_tokens, n_ctx),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    if args.json:
        write_json(args.json, rows)
    header = "| dtype | size | fell back | types | prompts equal | tokens equal | first diff | perplexity (f32) | llama.cpp tok/s |"
    print(header + "\n|" + "---|" * 9)
    for row in rows:
        if "refused" in row:
            print(f"| {row['dtype']} | refused: {row['refused'][:80]}... |")
            continue
        speed = row["llama_cpp_tokens_per_s"]
        print(
            f"| {row['dtype']} | {row['bytes'] / 2**20:.2f} MiB | {row['fallbacks']} | {' '.join(row['types'])} | "
            f"{row['prompts_equal']} | {row['tokens_equal']} | {row['first_difference']} | "
            f"{row['perplexity']} ({row['float32_perplexity']}) | {'not run' if speed is None else f'{speed:.0f}'} |"
        )
    return rows


if __name__ == "__main__":
    main()
