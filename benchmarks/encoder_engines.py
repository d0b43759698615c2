"""Sentence embeddings per second of one MiniTF encoder in every engine it exports to, on CPU: SentenceTransformer
(the MiniTF folder, the reference), ONNX Runtime (`export onnx`, fp32), CTranslate2 (`export ctranslate2`, float32
and int8) and llama.cpp (`export gguf`, f32, f16 and q8_0, through llama-cpp-python), with each engine's least
cosine to the reference embeddings.

Random weights at MiniEmbed-mini dims (4 layers x 256, 30000 words, 128 positions) and a word vocabulary; 256
sentences of 4 to 40 words, embedded in batches of 32 texts (llama.cpp: as many texts as fit its 2048-token
batch, llama-cpp-python's `embed`). Each engine runs in a worker process of its own (an engine's idle threads slow
the others in the same process), loaded and warmed before timing; the engines are interleaved round by round,
with a pause before each timed run, as benchmarks/engines_ctranslate2_onnx.py does.

    python benchmarks/encoder_engines.py              # full dims (the figures)
    python benchmarks/encoder_engines.py --smoke      # tiny dims, one round: checks that it runs
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BATCH = 32  # texts per call (SentenceTransformer's default batch size)
LLAMA_BATCH_TOKENS = 2048
# engine -> (the export it runs, the export's option)
ENGINES = {
    "sentence-transformers fp32": ("minitf", None),
    "onnxruntime fp32": ("onnx", None),
    "ctranslate2 float32": ("ctranslate2", "float32"),
    "ctranslate2 int8": ("ctranslate2", "int8"),
    "llama.cpp f32": ("gguf", "f32"),
    "llama.cpp f16": ("gguf", "f16"),
    "llama.cpp q8_0": ("gguf", "q8_0"),
}


def settings_of(smoke: bool) -> dict:
    """The encoder's config fields and the run's sizes (the tests' factories: preset and tiny sizes)."""
    sys.path.insert(0, str(HERE.parent / "tests"))
    from factories import TINY_SIZES, preset_fields

    if smoke:
        return {"fields": dict(TINY_SIZES["encoder"], vocab_size=80, max_position_embeddings=48), "sentences": 16}
    return {"fields": preset_fields("encoder", "miniembed-mini"), "sentences": 256, "rounds": 3}


def build_exports(fields: dict, root: Path, engines: list[str]) -> dict[str, Path]:
    """The MiniTF folder (random weights, a word vocabulary) and each export the engines need."""
    from hf_minitf.export.ctranslate2 import export_ctranslate2
    from hf_minitf.export.gguf_encoder import export_gguf  # a GPT or an encoder
    from hf_minitf.export.onnx import export_onnx
    from hf_minitf.tokenization.miniembed import train_wordlevel_tokenizer

    sys.path.insert(0, str(HERE.parent / "tests"))
    from factories import random_model_folder

    words = " ".join(f"w{index}" for index in range(fields["vocab_size"]))
    tokenizer = train_wordlevel_tokenizer(
        [words], vocab_size=fields["vocab_size"], min_frequency=1, max_length=fields["max_position_embeddings"]
    )
    folder = random_model_folder("encoder", root / "minitf", tokenizer, **fields)
    writers = {
        "minitf": lambda option: folder,
        "onnx": lambda option: export_onnx(folder, root / "onnx"),
        "ctranslate2": lambda option: export_ctranslate2(folder, root / f"ct2_{option}", quantization=option),
        "gguf": lambda option: export_gguf(folder, root / f"model_{option}.gguf", dtype=option),
    }
    return {engine: writers[ENGINES[engine][0]](ENGINES[engine][1]) for engine in engines}


# -------------------------------------------------------------------------------------------------- workers
def make_run(engine: str, path: str, texts: list[str]):
    """A function embedding `texts` once with `engine` and returning the unit vectors (lists)."""
    kind = ENGINES[engine][0]
    if kind == "minitf":
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(path, device="cpu")
        return lambda: model.encode(texts, batch_size=BATCH, convert_to_numpy=True).tolist()
    if kind == "gguf":
        from llama_cpp import Llama

        llm = Llama(
            path,
            embedding=True,
            n_ctx=LLAMA_BATCH_TOKENS,
            n_batch=LLAMA_BATCH_TOKENS,
            n_ubatch=LLAMA_BATCH_TOKENS,  # non-causal attention: every text's tokens in one ubatch
            verbose=False,
        )
        return lambda: llm.embed(texts, normalize=True)
    from hf_minitf.engines import load_engine

    embedder = load_engine(path, "embedder")
    order = sorted(range(len(texts)), key=lambda index: len(texts[index]))  # batches of similar lengths, as ST

    def run_engine() -> list:
        vectors: list = [None] * len(texts)
        for start in range(0, len(order), BATCH):
            chunk = order[start : start + BATCH]
            for index, vector in zip(chunk, embedder.encode([texts[i] for i in chunk]).tolist()):
                vectors[index] = vector
        return vectors

    return run_engine


def worker(spec: dict) -> None:
    """Load one engine, embed once to warm up, then time an embedding on each "go" line from stdin."""
    run = make_run(spec["engine"], spec["path"], spec["texts"])
    run()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip() != "go":
            break
        time.sleep(spec["pause"])
        start = time.perf_counter()
        vectors = run()
        print(json.dumps({"seconds": time.perf_counter() - start, "vectors": vectors}), flush=True)


def start_worker(spec: dict) -> subprocess.Popen:
    """A worker process for one engine, returned once it has loaded the model and run it once."""
    process = subprocess.Popen(
        [sys.executable, __file__, "--worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(json.dumps(spec) + "\n")
    process.stdin.flush()
    if not json.loads(process.stdout.readline() or "{}").get("ready"):
        raise RuntimeError(f"the worker for {spec['engine']} failed to start (see stderr above)")
    return process


# ---------------------------------------------------------------------------------------------------- main
def least_cosine(reference: list, vectors: list) -> float:
    import numpy as np

    a, b = np.array(reference), np.array(vectors)
    return float(((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min())


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny dims, one round: check that everything runs")
    parser.add_argument("--rounds", type=int, default=None, help="timed runs per engine (default: 3, smoke 1)")
    parser.add_argument("--pause", type=float, default=None, help="seconds before each timed run (default 2, smoke 0)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    settings = settings_of(args.smoke)
    rounds = args.rounds or settings.get("rounds", 1)
    pause = args.pause if args.pause is not None else (0.0 if args.smoke else 2.0)
    engines = [name for name in ENGINES if ENGINES[name][0] != "gguf" or importlib.util.find_spec("llama_cpp")]
    if len(engines) < len(ENGINES):
        print("llama-cpp-python is not installed: llama.cpp is left out (pip install llama-cpp-python)")
    fields = settings["fields"]
    rng = random.Random(0)
    longest = min(40, fields["max_position_embeddings"] - 2)  # [CLS] and [SEP] take two positions
    texts = [
        " ".join(f"w{rng.randrange(fields['vocab_size'] - 4)}" for _ in range(rng.randrange(4, longest + 1)))
        for _ in range(settings["sentences"])
    ]
    with tempfile.TemporaryDirectory() as root:
        paths = build_exports(fields, Path(root), engines)
        workers = {
            engine: start_worker({"engine": engine, "path": str(paths[engine]), "texts": texts, "pause": pause})
            for engine in engines  # each loads and warms up before the next starts
        }
        times: dict[str, list[float]] = {engine: [] for engine in engines}
        vectors: dict[str, list] = {}
        for _ in range(rounds):  # interleaved: every engine once per round
            for engine, process in workers.items():
                assert process.stdin is not None and process.stdout is not None
                process.stdin.write("go\n")
                process.stdin.flush()
                answer = json.loads(process.stdout.readline())
                times[engine].append(answer["seconds"])
                vectors[engine] = answer["vectors"]
        for process in workers.values():
            assert process.stdin is not None
            process.stdin.close()
            process.wait()
    reference = engines[0]
    rows = [
        {
            "engine": engine,
            "seconds": statistics.median(times[engine]),
            "embeddings_per_second": len(texts) / statistics.median(times[engine]),
            "speed_vs_sentence_transformers": statistics.median(times[reference]) / statistics.median(times[engine]),
            "least_cosine": least_cosine(vectors[reference], vectors[engine]),
        }
        for engine in engines
    ]
    print(f"{len(texts)} sentences, {rounds} round(s), median of each engine:")
    for row in rows:
        print(
            f"{row['engine']:<28} {row['embeddings_per_second']:9.1f} /s  {row['speed_vs_sentence_transformers']:5.2f}x  "
            f"least cosine {row['least_cosine']:.6f}"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return rows


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(json.loads(sys.stdin.readline()))
    else:
        main()
