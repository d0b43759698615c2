"""Sentence embeddings per second of one MiniTF encoder in every engine it exports to, on CPU: SentenceTransformer
(the MiniTF folder, the reference), ONNX Runtime (`export onnx`, fp32), CTranslate2 (`export ctranslate2`, float32
and int8) and llama.cpp (`export gguf`, f32, f16 and q8_0, through llama-cpp-python), with each engine's least
cosine to the reference embeddings.

Random weights at MiniEmbed-mini dims (4 layers x 256, 30000 words, 128 positions) and a word vocabulary; 256
sentences of 4 to 40 words, embedded in batches of 32 texts (llama.cpp: as many texts as fit its 2048-token
batch, llama-cpp-python's `embed`). Each engine runs in a worker process of its own (an engine's idle threads slow
the others in the same process), loaded and warmed before timing; the engines are interleaved round by round,
with a pause before each timed run (benchmarks/common.py's worker processes).

    python benchmarks/encoder_engines.py              # full dims (the figures)
    python benchmarks/encoder_engines.py --smoke      # tiny dims, one round: checks that it runs
"""

from __future__ import annotations

import importlib.util
import random
import tempfile
from pathlib import Path

import common

BATCH = 32  # texts per call (SentenceTransformer's default batch size)
LLAMA_BATCH_TOKENS = 2048
# How a row is printed (filled in by its fields)
ROW_LINE = (
    "{engine:<28} {embeddings_per_second:9.1f} /s  {speed_vs_sentence_transformers:5.2f}x  "
    "least cosine {least_cosine:.6f}"
)
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
    from factories import TINY_SIZES, preset_fields

    if smoke:
        return {"fields": dict(TINY_SIZES["encoder"], vocab_size=80, max_position_embeddings=48), "sentences": 16}
    return {"fields": preset_fields("encoder", "miniembed-mini"), "sentences": 256}


def build_exports(fields: dict, root: Path, engines: list[str]) -> dict[str, Path]:
    """The MiniTF folder (random weights, a word vocabulary) and each export the engines need."""
    from hf_minitf.export import export_gguf  # a GPT or an encoder
    from hf_minitf.export.ctranslate2 import export_ctranslate2
    from hf_minitf.export.onnx import export_onnx

    folder = common.encoder_folder(root / "minitf", fields)
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
    return lambda: common.embed_in_length_order(embedder.encode, texts, BATCH)


def worker(spec: dict) -> None:
    """Load one engine, embed once to warm up, then time an embedding on each "go" line from stdin."""
    common.serve(make_run(spec["engine"], spec["path"], spec["texts"]), spec["pause"])


# ---------------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> list[dict]:
    args = common.parse_interleaved(common.interleaved_parser(__doc__), argv)
    settings = settings_of(args.smoke)
    engines = [name for name in ENGINES if ENGINES[name][0] != "gguf" or importlib.util.find_spec("llama_cpp")]
    if len(engines) < len(ENGINES):
        print('llama-cpp-python is not installed: llama.cpp is left out (pip install "hf-minitf[llama]")')
    fields = settings["fields"]
    longest = min(40, fields["max_position_embeddings"] - 2)  # [CLS] and [SEP] take two positions
    texts = common.random_sentences(
        random.Random(0), settings["sentences"], "w", fields["vocab_size"] - 4, (4, longest + 1)
    )
    with tempfile.TemporaryDirectory() as root:
        paths = build_exports(fields, Path(root), engines)
        specs = {
            engine: {"engine": engine, "path": str(paths[engine]), "texts": texts, "pause": args.pause}
            for engine in engines
        }
        timings = common.time_interleaved(__file__, specs, args.rounds)
    reference = timings[engines[0]]
    rows = [
        {
            "engine": engine,
            "seconds": timing.median,
            "embeddings_per_second": len(texts) / timing.median,
            "speed_vs_sentence_transformers": reference.median / timing.median,
            "least_cosine": common.least_cosine(reference.result, timing.result),
        }
        for engine, timing in timings.items()
    ]
    print(f"{len(texts)} sentences, {args.rounds} round(s), median of each engine:")
    return common.show_and_save(rows, ROW_LINE, args.json)


if __name__ == "__main__":
    common.main_or_worker(main, worker)
