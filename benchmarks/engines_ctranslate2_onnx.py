"""MiniTF beside CTranslate2 and ONNX Runtime, on CPU: the engine exports' speed and agreement.

Cases (random weights at the real models' dimensions; the engines get the same weights through
`export_ctranslate2` / `export_onnx`):
- GPT, greedy, batch 1 and 8: MiniTF `generate()` (default, and its fastest fp32 path: static cache + compile
  with eager attention) beside CTranslate2 float32 and int8, at nanoGPT char dims and FrawdLLM-small dims (RoPE).
- translator at hkproj dims, batch 32, greedy: MiniTF `generate()` beside CTranslate2 float32 and int8.
- encoder at MiniEmbed-mini dims, 256 sentences: SentenceTransformer fp32 and bf16 beside ONNX Runtime fp32 and
  int8 (uint8 matrix products).

Every case runs in a worker process of its own (an engine's idle threads slow torch in the same process 2-90x),
loaded and warmed before timing; the cases of a group (one model and batch) are interleaved round by round, with
a pause before each timed run, and the group's workers stopped before the next group starts.
Reported: median seconds, speed relative to the family's MiniTF/SentenceTransformer fp32 reference, and
agreement with it (rows of greedy tokens equal; least cosine of the embeddings).

    python benchmarks/engines_ctranslate2_onnx.py              # full dims (the figures)
    python benchmarks/engines_ctranslate2_onnx.py --smoke      # tiny dims, one round: checks that it runs
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUANTIZED = ("float32", "int8")  # CTranslate2's weights beside float32


def model_settings(smoke: bool) -> dict:
    """Config fields of each model and the run's sizes: full sizes from the catalog's presets, smoke sizes from the
    tests' tiny ones (the factory is imported here: the engines' worker processes do not load torch for it)."""
    sys.path.insert(0, str(HERE.parent / "tests"))
    from factories import TINY_SIZES, preset_fields

    if not smoke:
        return {
            "gpt": {
                "nanogpt-char": preset_fields("gpt", "shakespeare-char", vocab_size=65, initializer_range=0.1),
                "frawdllm-small": preset_fields("gpt", "frawdllm-small-llama", initializer_range=0.1),
            },
            "translator": preset_fields(
                "seq2seq", "hkproj", src_vocab_size=15000, vocab_size=22000, initializer_range=0.1
            ),
            "encoder": preset_fields("encoder", "miniembed-mini"),
            "new_tokens": 200,
            "translate_tokens": 64,
            "sentences": 256,
            "rounds": 3,
        }
    return {
        "gpt": {
            "nanogpt-char": dict(TINY_SIZES["gpt"], vocab_size=65, max_position_embeddings=64, initializer_range=0.1),
            "frawdllm-small": dict(
                TINY_SIZES["gpt"], vocab_size=256, max_position_embeddings=64, position_embedding_type="rope"
            ),
        },
        "translator": dict(TINY_SIZES["seq2seq"], src_vocab_size=60, vocab_size=70, initializer_range=0.1),
        "encoder": dict(TINY_SIZES["encoder"], vocab_size=80, max_position_embeddings=32),
        "new_tokens": 16,
        "translate_tokens": 12,
        "sentences": 16,
        "rounds": 1,
    }


# ------------------------------------------------------------------------------------------ models and exports
def _words(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{index}" for index in range(count)]


def build_models(settings: dict, root: Path) -> dict:
    """MiniTF folders with random weights and matching tokenizers, and their engine exports."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    from hf_minitf import MiniTFSeq2SeqTokenizer, char_tokenizer
    from hf_minitf.export.ctranslate2 import export_ctranslate2
    from hf_minitf.export.onnx import export_onnx
    from hf_minitf.tokenization.miniembed import train_wordlevel_tokenizer

    sys.path.insert(0, str(HERE.parent / "tests"))
    from factories import random_model_folder

    def with_ct2(name: str, folder: Path) -> dict:
        quantized = {f"ct2 {q}": export_ctranslate2(folder, root / f"{name}_{q}", quantization=q) for q in QUANTIZED}
        return {"minitf": folder, **quantized}

    folders: dict = {}
    for name, fields in settings["gpt"].items():
        tokenizer = char_tokenizer([chr(0x4E00 + index) for index in range(fields["vocab_size"])], special_tokens=None)
        folders[name] = with_ct2(name, random_model_folder("gpt", root / name, tokenizer, **fields))

    def word_level(prefix: str, size: int) -> Tokenizer:
        vocab = {
            token: index for index, token in enumerate(["[UNK]", "[PAD]", "[SOS]", "[EOS]", *_words(prefix, size - 4)])
        }
        tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
        tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
        return tokenizer

    fields = settings["translator"]
    pair = MiniTFSeq2SeqTokenizer(word_level("s", fields["src_vocab_size"]), word_level("t", fields["vocab_size"]))
    folders["translator"] = with_ct2("translator", random_model_folder("seq2seq", root / "translator", pair, **fields))

    fields = settings["encoder"]
    tokenizer = train_wordlevel_tokenizer(
        [" ".join(_words("w", fields["vocab_size"]))],
        vocab_size=fields["vocab_size"],
        min_frequency=1,
        max_length=fields["max_position_embeddings"],
    )
    folder = random_model_folder("encoder", root / "encoder", tokenizer, **fields)
    folders["encoder"] = {"minitf": folder, "onnx": export_onnx(folder, root / "encoder_onnx", quantize="q8")}
    return folders


# -------------------------------------------------------------------------------------------------- workers
def worker(spec: dict) -> None:
    """Load one case, run it once to warm up, then time it on each "go" line from stdin (after `pause` s)."""
    import hf_minitf  # noqa: F401 (registers the MiniTF classes with the Auto classes)

    serve(make_case(spec), spec["pause"])


def serve(run, pause: float) -> None:
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


def make_case(spec: dict):
    """A function running the case once and returning its tokens (lists of ids) or embeddings (lists)."""
    engine, folder, data = spec["engine"], spec["folder"], spec["data"]
    if spec["family"] == "gpt":
        if engine.startswith("ct2"):
            from hf_minitf.engines import CTranslate2Generator, export_info

            generator = CTranslate2Generator(Path(folder), export_info(folder))
            return lambda: generator.generate(data, spec["new_tokens"])
        import torch
        from transformers import AutoModelForCausalLM

        options = {"attn_implementation": "eager"} if engine == "minitf fastest" else {}
        model = AutoModelForCausalLM.from_pretrained(folder, **options).eval()
        ids = torch.tensor(data)
        generate = {"max_new_tokens": spec["new_tokens"], "do_sample": False}
        if engine == "minitf fastest":
            sys.path.insert(0, str(HERE))
            from speed import compile_everywhere

            generate.update(cache_implementation="static", compile_config=compile_everywhere())

        def run_minitf():
            with torch.no_grad():
                return model.generate(ids, attention_mask=torch.ones_like(ids), **generate)[:, ids.shape[1] :].tolist()

        return run_minitf
    if spec["family"] == "translator":
        from hf_minitf.engines import CTranslate2Translator, export_info

        if engine.startswith("ct2"):
            translator = CTranslate2Translator(Path(folder), export_info(folder))
            return lambda: translator.translate(data, max_new_tokens=spec["new_tokens"])
        import torch
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        model, tokenizer = AutoModelForSeq2SeqLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)

        def run_translate():
            with torch.no_grad():
                output = model.generate(
                    **tokenizer(data, padding=True, return_tensors="pt"),
                    max_new_tokens=spec["new_tokens"],
                    do_sample=False,
                )
            return tokenizer.batch_decode(output, skip_special_tokens=True)

        return run_translate
    if engine.startswith("onnx"):
        from hf_minitf.engines import OnnxEmbedder
        from hf_minitf.export.onnx import SENTENCE_TRANSFORMERS_Q8_FILE

        embedder = OnnxEmbedder(
            Path(folder), {}, "onnx/model.onnx" if engine == "onnx fp32" else SENTENCE_TRANSFORMERS_Q8_FILE
        )
        order = sorted(range(len(data)), key=lambda index: len(data[index]))  # batches of similar lengths, as ST

        def run_onnx():
            vectors = [None] * len(data)
            for start in range(0, len(order), 32):
                chunk = order[start : start + 32]
                for index, vector in zip(chunk, embedder.encode([data[i] for i in chunk]).tolist()):
                    vectors[index] = vector
            return vectors

        return run_onnx
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(folder, device="cpu")
    if engine == "st bf16":
        model.to(torch.bfloat16)
    return lambda: model.encode(data, batch_size=32, convert_to_numpy=True).astype("float32").tolist()


# ---------------------------------------------------------------------------------------------------- main
def cases(settings: dict, folders: dict, pause: float) -> list[dict]:
    rng = random.Random(0)
    specs = []
    for name, fields in settings["gpt"].items():
        vocab = fields["vocab_size"]
        for batch in (1, 8):
            prompts = [[rng.randrange(vocab) for _ in range(8)] for _ in range(batch)]
            for engine in ("minitf default", "minitf fastest", "ct2 float32", "ct2 int8"):
                folder = folders[name]["minitf" if engine.startswith("minitf") else engine]
                specs.append(
                    {
                        "group": f"{name} batch {batch}",
                        "family": "gpt",
                        "engine": engine,
                        "folder": str(folder),
                        "data": prompts,
                        "new_tokens": settings["new_tokens"],
                    }
                )
    vocab = settings["translator"]["src_vocab_size"] - 4
    sources = [" ".join(f"s{rng.randrange(vocab)}" for _ in range(rng.randrange(8, 24))) for _ in range(32)]
    for engine in ("minitf default", "ct2 float32", "ct2 int8"):
        folder = folders["translator"]["minitf" if engine.startswith("minitf") else engine]
        specs.append(
            {
                "group": "translator batch 32",
                "family": "translator",
                "engine": engine,
                "folder": str(folder),
                "data": sources,
                "new_tokens": settings["translate_tokens"],
            }
        )
    vocab = settings["encoder"]["vocab_size"] - 4
    sentences = [
        " ".join(f"w{rng.randrange(vocab)}" for _ in range(rng.randrange(4, 40))) for _ in range(settings["sentences"])
    ]
    for engine in ("st fp32", "st bf16", "onnx fp32", "onnx int8"):
        folder = folders["encoder"]["minitf" if engine.startswith("st") else "onnx"]
        specs.append(
            {
                "group": f"encoder {len(sentences)} sentences",
                "family": "encoder",
                "engine": engine,
                "folder": str(folder),
                "data": sentences,
            }
        )
    for spec in specs:
        spec["pause"] = pause
    return specs


def agreement(reference, result, family: str) -> str:
    if family == "encoder":
        import numpy as np

        a, b = np.array(reference), np.array(result)
        return (
            f"least cosine {float(((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min()):.6f}"
        )
    equal = sum(x == y for x, y in zip(reference, result))
    return f"{equal}/{len(reference)} rows equal"


def start_worker(spec: dict, script: str = __file__) -> subprocess.Popen:
    """A worker process for one case (`script --worker`, reading `spec` from stdin), returned once it has loaded
    the case and run it once."""
    process = subprocess.Popen(
        [sys.executable, script, "--worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    process.stdin.write(json.dumps(spec) + "\n")
    process.stdin.flush()
    if not json.loads(process.stdout.readline() or "{}").get("ready"):
        raise RuntimeError(f"the worker for {spec['group']} / {spec['engine']} failed to start (see stderr above)")
    return process


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny dims, one round: check that everything runs")
    parser.add_argument("--rounds", type=int, default=None, help="timed runs per case (default: 3, smoke 1)")
    parser.add_argument("--pause", type=float, default=None, help="seconds of rest before each timed run (2; smoke 0)")
    parser.add_argument(
        "--only",
        nargs="+",
        default=None,
        metavar="GROUP",
        help="run only the groups whose name starts with one of these (nanogpt-char, frawdllm-small, "
        "translator, encoder)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    settings = model_settings(args.smoke)
    rounds = args.rounds or settings["rounds"]
    pause = args.pause if args.pause is not None else (0.0 if args.smoke else 2.0)
    with tempfile.TemporaryDirectory() as root:
        folders = build_models(settings, Path(root))
        specs = [
            spec
            for spec in cases(settings, folders, pause)
            if args.only is None or spec["group"].startswith(tuple(args.only))
        ]
        times: list[list[float]] = [[] for _ in specs]
        results: list = [None] * len(specs)
        for group in dict.fromkeys(spec["group"] for spec in specs):  # one group's workers at a time (memory)
            indices = [index for index, spec in enumerate(specs) if spec["group"] == group]
            workers = {index: start_worker(specs[index]) for index in indices}  # each loads and warms up alone
            for _ in range(rounds):  # interleaved: every case of the group once per round
                for index, process in workers.items():
                    process.stdin.write("go\n")
                    process.stdin.flush()
                    answer = json.loads(process.stdout.readline())
                    times[index].append(answer["seconds"])
                    results[index] = answer["result"]
            for process in workers.values():
                process.stdin.close()
                process.wait()
    rows, references = [], {}
    for spec, seconds, result in zip(specs, times, results):
        median = statistics.median(seconds)
        if spec["group"] not in references:
            references[spec["group"]] = (median, result)
        reference_seconds, reference_result = references[spec["group"]]
        rows.append(
            {
                "group": spec["group"],
                "engine": spec["engine"],
                "seconds": median,
                "speed_vs_reference": reference_seconds / median,
                "agreement": agreement(reference_result, result, spec["family"]),
            }
        )
    for row in rows:
        print(
            f"{row['group']:<28} {row['engine']:<16} {row['seconds']:9.4f} s  {row['speed_vs_reference']:5.2f}x  "
            f"{row['agreement']}"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return rows


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(json.loads(sys.stdin.readline()))
    else:
        main()
