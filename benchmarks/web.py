"""The page `minitf export web` writes, timed: transformers.js in Node and in headless Chromium beside MiniTF and
ONNX Runtime in Python, on the same weights.

Cases, per model (random weights, no end token, so every engine generates the same number of tokens):
- GPT, greedy, one prompt at a time: MiniTF `generate()`, ONNX Runtime (Python, `minitf generate`'s engine) on
  the export's float32 and q8 files, transformers.js in Node (fp32, q8) and the web page in Chromium (fp32, q8).
  Models: the quickstart's GPT size (2 x 128, 64 learned positions) and nanoGPT char dims (6 x 384, 256).
- encoder, one batch of sentences: SentenceTransformer, ONNX Runtime float32 and q8, transformers.js in Node
  (fp32, q8) and the page's similarity box in Chromium (fp32, q8), at MiniEmbed-mini dims (4 x 256, FFN 1024).
- translator, greedy, batch 1, one text at a time: MiniTF `generate()`, ONNX Runtime (Python, `minitf translate`'s
  engine) on the export's float32 graphs, the page's translator.js in Node (fp32) and the page in Chromium (fp32,
  q8), at the quickstart's translator size (2+2 layers x 128, FFN 256, 64 positions). Random weights can reach the
  end token early: tokens/s counts the tokens each case generated.

Every case runs in a process of its own (an engine's threads slow torch in the same process), loaded and warmed
up before timing; the cases of a model are interleaved round by round with a pause before each timed run, and
each process times its own work (the page: the model call, as its status line shows it). Reported: median tokens/s
(GPT) or seconds (encoder), the ratio to MiniTF / SentenceTransformer, and agreement with it (greedy tokens equal;
least cosine of the embeddings, or largest difference of the page's similarity scores).

Then the variants: each file `export onnx --quantize q8 fp16 q4` writes, its size and its agreement with MiniTF
(greedy tokens over 100 new tokens of the longer-context GPT; the least cosine of the encoder's embeddings).

Needs Node (tests/js is installed with `npm ci` as the tests do) and, for the Chromium rows, Debian's chromium.

    python benchmarks/web.py --json benchmarks/results/web-DATE.json     # the figures (an otherwise idle machine)
    python benchmarks/web.py --smoke                                     # tiny dims, one round: checks that it runs
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the tests' factories, Node and Chromium runners of transformers.js

GPT_ENGINES = ("minitf generate()", "onnxruntime fp32", "onnxruntime q8", "node fp32", "node q8", "chromium fp32",
               "chromium q8")  # fmt: skip
ENCODER_ENGINES = ("sentence-transformers", "onnxruntime fp32", "onnxruntime q8", "node fp32", "node q8",
                   "chromium fp32", "chromium q8")  # fmt: skip
TRANSLATOR_ENGINES = ("minitf generate()", "onnxruntime fp32", "node fp32", "chromium fp32", "chromium q8")
ENGINES = {"gpt": GPT_ENGINES, "encoder": ENCODER_ENGINES, "seq2seq": TRANSLATOR_ENGINES}
ONNX_FILES = {"fp32": "onnx/model.onnx", "q8": "onnx/model_quantized.onnx"}
VARIANT_TOKENS = 100


# ------------------------------------------------------------------------------------------ models and sites
def settings_of(smoke: bool) -> dict:
    """The models' config fields (the tests' factories: `minitf quickstart`'s, preset and tiny sizes; random
    weights, a wide init for the generating models), each GPT's new tokens and the run's sizes."""
    from factories import TINY_LAYERS, preset_fields, quickstart_fields

    wide = {"initializer_range": 0.2}
    if smoke:
        tiny = dict(TINY_LAYERS, intermediate_size=64)
        return {
            "gpt": {"tiny-gpt": (dict(TINY_LAYERS, vocab_size=20, max_position_embeddings=32, **wide), 8)},
            "encoder": {"tiny-encoder": dict(tiny, vocab_size=80, max_position_embeddings=32)},
            "seq2seq": {
                "tiny-translator": dict(tiny, src_vocab_size=40, vocab_size=40, max_position_embeddings=16, **wide)
            },
            "translation_tokens": 8,
            "prompts": 2,
            "sentences": 8,
            "rounds": 1,
            "pause": 0.0,
        }
    return {
        "gpt": {
            "quickstart-gpt": (quickstart_fields("gpt", vocab_size=40, **wide), 56),
            "nanogpt-char": (preset_fields("gpt", "shakespeare-char", vocab_size=65, **wide), 200),
        },
        "encoder": {"miniembed-mini": preset_fields("encoder", "miniembed-mini")},
        "seq2seq": {"quickstart-translator": quickstart_fields("seq2seq", src_vocab_size=300, vocab_size=300, **wide)},
        "translation_tokens": 48,
        "prompts": 3,
        "sentences": 64,
        "rounds": 3,
        "pause": 2.0,
    }


def _characters(count: int) -> list[str]:
    return [chr(0x4E00 + index) for index in range(count)]


def _words(prefix: str, count: int) -> str:
    return " ".join(f"{prefix}{index}" for index in range(count))


def random_sentences(rng: random.Random, vocab_size: int, count: int, lengths: tuple[int, int] = (4, 40)) -> list:
    """`count` sentences of random words w0, w1, ... of the vocabulary, each of `lengths` words (range)."""
    return [" ".join(f"w{rng.randrange(vocab_size)}" for _ in range(rng.randrange(*lengths))) for _ in range(count)]


def build_sites(settings: dict, root: Path) -> dict[str, tuple[Path, Path]]:
    """name -> (the MiniTF folder, the `export web` site of it), random weights."""
    from factories import random_model_folder

    from hf_minitf import char_tokenizer, train_translation_tokenizers
    from hf_minitf.export.web import export_web
    from hf_minitf.tokenization.miniembed import train_wordlevel_tokenizer

    folders = {}
    for name, (fields, _) in settings["gpt"].items():
        tokenizer = char_tokenizer(_characters(fields["vocab_size"]), special_tokens=None)
        folders[name] = random_model_folder("gpt", root / name, tokenizer, **fields)
    for name, fields in settings["encoder"].items():
        vocab_size, max_length = fields["vocab_size"], fields["max_position_embeddings"]
        tokenizer = train_wordlevel_tokenizer(
            [_words("w", vocab_size)], vocab_size=vocab_size, min_frequency=1, max_length=max_length
        )
        folders[name] = random_model_folder("encoder", root / name, tokenizer, **fields)
    for name, fields in settings["seq2seq"].items():
        tokenizer = train_translation_tokenizers(
            source_texts=[_words("w", fields["src_vocab_size"] - 4)],
            target_texts=[_words("v", fields["vocab_size"] - 4)],
            min_frequency=1,
        )
        folders[name] = random_model_folder("seq2seq", root / name, tokenizer, **fields)
    return {name: (folder, export_web(folder, root / f"{name}_site")) for name, folder in folders.items()}


# ------------------------------------------------------------------------------------------------ the cases
class PythonCase:
    """MiniTF, SentenceTransformer or ONNX Runtime in a worker process of this script (`--worker`)."""

    def __init__(self, spec: dict) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.process.stdin.write(json.dumps(spec) + "\n")
        self.process.stdin.flush()
        if not json.loads(self.process.stdout.readline() or "{}").get("ready"):
            raise RuntimeError(f"the worker for {spec['engine']} failed to start (see stderr above)")

    def run(self, request: dict) -> dict:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


class NodeCase:
    """transformers.js in Node (tests/js/run.mjs)."""

    def __init__(self, task: str, folder: Path, dtype: str) -> None:
        from transformers_js import NodeRunner

        self.runner = NodeRunner(task, folder, dtype)

    def run(self, request: dict) -> dict:
        if "texts" in request:
            answer = self.runner.ask(request)
            return {
                "seconds": answer["seconds"],
                "tokens": [translation["ids"][1:] for translation in answer["result"]],
            }
        if "prompts" in request:
            answer = self.runner.ask({"prompts": request["prompts"], "max_new_tokens": request["max_new_tokens"]})
            return {"seconds": answer["seconds"], "tokens": answer["result"]}
        answer = self.runner.ask({"sentences": request["sentences"]})
        return {"seconds": answer["seconds"], "embeddings": answer["result"]}

    def close(self) -> None:
        self.runner.close()


class PageCase:
    """The `export web` page in headless Chromium (tests/js/browser.mjs), served from 127.0.0.1."""

    def __init__(self, site: Path, dtype: str) -> None:
        from transformers_js import BrowserPage, StaticServer

        self.dtype = dtype
        self.server = StaticServer(site)
        self.page = BrowserPage(self.server.url)

    def run(self, request: dict) -> dict:
        if "prompts" in request or "texts" in request:
            seconds, texts, tokens = 0.0, [], 0
            key = "prompt" if "prompts" in request else "text"
            for prompt in request.get("prompts") or request["texts"]:
                answer = self.page.ask({"dtype": self.dtype, key: prompt, "max_new_tokens": request["max_new_tokens"]})
                seconds += answer["seconds"]
                texts.append(answer["text"])
                tokens += int(re.match(r"(\d+) tokens", answer["status"]).group(1))
            return {"seconds": seconds, "texts": texts, "token_count": tokens}
        source, *others = request["sentences"]
        answer = self.page.ask({"dtype": self.dtype, "source": source, "sentences": others})
        return {"seconds": answer["seconds"], "scores": answer["scores"]}

    def close(self) -> None:
        self.page.close()
        self.server.stop()


def worker(spec: dict) -> None:
    """Load one Python case, then answer each request line with its result and the seconds it took."""
    run = make_python_case(spec)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        start = time.perf_counter()
        result = run(json.loads(line))
        print(json.dumps({"seconds": time.perf_counter() - start, **result}), flush=True)


def make_python_case(spec: dict):
    engine, folder = spec["engine"], Path(spec["folder"])
    if engine == "minitf generate()":
        import torch
        from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

        model_class = AutoModelForSeq2SeqLM if spec["family"] == "seq2seq" else AutoModelForCausalLM
        model, tokenizer = model_class.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)

        start = 1 if spec["family"] == "seq2seq" else None  # a translation's tokens after the start token

        def generate(request: dict) -> dict:
            """Greedy: the new tokens of each prompt, or each text's translation."""
            tokens = []
            for text in request.get("prompts") or request["texts"]:
                ids = tokenizer(text, return_tensors="pt").input_ids
                with torch.no_grad():
                    output = model.generate(ids, max_new_tokens=request["max_new_tokens"], do_sample=False)
                tokens.append(output[0, start or ids.shape[1] :].tolist())
            return {"tokens": tokens}

        return generate
    if engine == "sentence-transformers":
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(folder), device="cpu")
        return lambda request: {"embeddings": model.encode(request["sentences"], normalize_embeddings=True).tolist()}
    from hf_minitf.engines import OnnxEmbedder, OnnxGenerator, OnnxTranslator, export_info

    if spec["family"] == "seq2seq":
        translator = OnnxTranslator(folder, export_info(folder) or {}, engine.split()[-1])

        def translate_onnx(request: dict) -> dict:
            sources = [translator.tokenizer(text).input_ids for text in request["texts"]]
            length = 1 + request["max_new_tokens"]
            return {"tokens": [translator.translate_ids(ids, 1, length)[1:] for ids in sources]}

        return translate_onnx
    file_name = ONNX_FILES[engine.split()[-1]]
    if spec["family"] == "gpt":
        generator = OnnxGenerator(folder, export_info(folder) or {}, file_name)

        def generate_onnx(request: dict) -> dict:
            prompts = [generator.tokenizer(prompt).input_ids for prompt in request["prompts"]]
            return {"tokens": generator.generate(prompts, request["max_new_tokens"])}

        return generate_onnx
    embedder = OnnxEmbedder(folder, export_info(folder) or {}, file_name)
    return lambda request: {"embeddings": embedder.encode(request["sentences"]).tolist()}


def start_case(engine: str, family: str, source: Path, site: Path):
    model = site / "model"
    if engine.startswith("node"):
        if family == "seq2seq":  # the page's own translator.js, on the page's folder
            return NodeCase("translate", site, engine.split()[-1])
        return NodeCase("generate" if family == "gpt" else "embed", model, engine.split()[-1])
    if engine.startswith("chromium"):
        return PageCase(site, engine.split()[-1])
    folder = source if engine in ("minitf generate()", "sentence-transformers") else model
    return PythonCase({"engine": engine, "family": family, "folder": str(folder)})


# ---------------------------------------------------------------------------------------------------- main
def agreement(family: str, reference: dict, result: dict, tokenizer) -> str:
    import numpy as np

    if family in ("gpt", "seq2seq"):
        expected = reference["tokens"]
        if "texts" in result:
            decode = {"skip_special_tokens": True} if family == "seq2seq" else {}
            equal = sum(text == tokenizer.decode(ids, **decode) for text, ids in zip(result["texts"], expected))
        else:
            equal = sum(ids == want for ids, want in zip(result["tokens"], expected))
        return f"{equal}/{len(expected)} {'texts' if family == 'seq2seq' else 'prompts'}' tokens equal"
    vectors = np.array(reference["embeddings"])
    if "scores" in result:
        expected = vectors[1:] @ vectors[0]
        return f"scores within {float(np.abs(np.array(result['scores']) - expected).max()):.1e}"
    least = float((vectors * np.array(result["embeddings"])).sum(axis=1).min())
    return f"least cosine {least:.6f}"


def token_count(result: dict) -> int:
    return result["token_count"] if "token_count" in result else sum(len(ids) for ids in result["tokens"])


def measure(name: str, family: str, source: Path, site: Path, request: dict, rounds: int, pause: float) -> list:
    """Every engine of the family on one model, interleaved round by round; a row per engine."""
    from transformers import AutoTokenizer

    engines = ENGINES[family]
    cases = {engine: start_case(engine, family, source, site) for engine in engines}
    seconds: dict[str, list[float]] = {engine: [] for engine in engines}
    results: dict[str, dict] = {}
    try:
        for case in cases.values():  # warm-up
            case.run(request)
        for _ in range(rounds):
            for engine, case in cases.items():
                time.sleep(pause)
                results[engine] = case.run(request)
                seconds[engine].append(results[engine]["seconds"])
    finally:
        for case in cases.values():
            case.close()
    tokenizer = AutoTokenizer.from_pretrained(source)
    reference = results[engines[0]]
    rows = []
    for engine in engines:
        median = statistics.median(seconds[engine])
        row = {"model": name, "engine": engine, "seconds": median}
        if family != "encoder":
            row["tokens_per_second"] = token_count(results[engine]) / median
        row["speed_vs_reference"] = statistics.median(seconds[engines[0]]) / median
        row["agreement"] = agreement(family, reference, results[engine], tokenizer)
        rows.append(row)
        rate = f"{median:8.4f} s       " if family == "encoder" else f"{row['tokens_per_second']:8.1f} tokens/s"
        print(f"{name:<16} {engine:<22} {rate} {row['speed_vs_reference']:6.2f}x  {row['agreement']}", flush=True)
    return rows


def variants(settings: dict, root: Path) -> list[dict]:
    """Each ONNX file `export onnx --quantize q8 fp16 q4` writes, beside the float32 one: its size and its
    agreement with MiniTF (greedy tokens of each prompt over `VARIANT_TOKENS`, or the least embedding cosine)."""
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModelForCausalLM

    from hf_minitf.engines import OnnxEmbedder, OnnxGenerator, export_info
    from hf_minitf.export.onnx import MODEL_FILE, QUANTIZED_FILES, export_onnx

    gpt_name = max(settings["gpt"], key=lambda name: settings["gpt"][name][0]["max_position_embeddings"])
    rows, rng = [], random.Random(1)
    for name in (gpt_name, *settings["encoder"]):
        source = root / name
        folder = export_onnx(source, root / f"{name}_variants", quantize=tuple(QUANTIZED_FILES))
        files = {"fp32": MODEL_FILE, **QUANTIZED_FILES}
        if name == gpt_name:
            fields, _ = settings["gpt"][name]
            new_tokens = min(VARIANT_TOKENS, fields["max_position_embeddings"] - 4)
            model = AutoModelForCausalLM.from_pretrained(source).eval()
            prompts = [[rng.randrange(fields["vocab_size"]) for _ in range(4)] for _ in range(settings["prompts"])]
            with torch.no_grad():
                expected = [
                    model.generate(torch.tensor([ids]), max_new_tokens=new_tokens, do_sample=False)[0, 4:].tolist()
                    for ids in prompts
                ]
        else:
            sentences = random_sentences(rng, settings["encoder"][name]["vocab_size"], settings["sentences"])
            reference = SentenceTransformer(str(source), device="cpu").encode(sentences, normalize_embeddings=True)
        for dtype, file_name in files.items():
            row = {"model": name, "dtype": dtype, "file": file_name, "mb": (folder / file_name).stat().st_size / 1e6}
            if name == gpt_name:
                got = OnnxGenerator(folder, export_info(folder) or {}, file_name).generate(prompts, new_tokens)
                differing = [sum(a != b for a, b in zip(ids, want)) for ids, want in zip(got, expected)]
                first = [
                    next((i for i, (a, b) in enumerate(zip(ids, want)) if a != b), None)
                    for ids, want in zip(got, expected)
                ]
                row["agreement"] = (
                    f"{sum(d == 0 for d in differing)}/{len(prompts)} prompts equal over {new_tokens} tokens"
                    + (
                        ""
                        if all(d == 0 for d in differing)
                        else f"; first difference at token {min(i for i in first if i is not None)}"
                    )
                )
            else:
                vectors = OnnxEmbedder(folder, export_info(folder) or {}, file_name).encode(sentences)
                row["agreement"] = f"least cosine {float((vectors * reference).sum(axis=1).min()):.6f}"
                row["max_difference"] = float(np.abs(vectors - reference).max())
            rows.append(row)
            print(f"{name:<16} {dtype:<5} {file_name:<28} {row['mb']:8.2f} MB  {row['agreement']}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny dims, one round: check that everything runs")
    parser.add_argument("--rounds", type=int, default=None, help="timed runs per case (default: 3, smoke 1)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows to this JSON file")
    parser.add_argument(
        "--family",
        action="append",
        choices=tuple(ENGINES),
        help="measure only these families (repeat it; default: all)",
    )
    args = parser.parse_args(argv)
    families = set(args.family or ENGINES)
    settings = settings_of(args.smoke)
    for family in set(ENGINES) - families:
        settings[family] = {}
    rounds = args.rounds or settings["rounds"]
    from transformers_js import install_node_modules

    install_node_modules()
    rng = random.Random(0)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as root:
        sites = build_sites(settings, Path(root))
        for name, (fields, new_tokens) in settings["gpt"].items():
            characters = _characters(fields["vocab_size"])
            prompts = ["".join(rng.choice(characters) for _ in range(4)) for _ in range(settings["prompts"])]
            request = {"prompts": prompts, "max_new_tokens": new_tokens}
            rows += measure(name, "gpt", *sites[name], request, rounds, settings["pause"])
        for name, fields in settings["encoder"].items():
            sentences = random_sentences(rng, fields["vocab_size"], settings["sentences"])
            rows += measure(name, "encoder", *sites[name], {"sentences": sentences}, rounds, settings["pause"])
        for name, fields in settings["seq2seq"].items():
            texts = random_sentences(rng, fields["src_vocab_size"] - 4, settings["prompts"], lengths=(4, 12))
            request = {"texts": texts, "max_new_tokens": settings["translation_tokens"]}
            rows += measure(name, "seq2seq", *sites[name], request, rounds, settings["pause"])
        quantized = variants(settings, Path(root)) if {"gpt", "encoder"} <= families else []
    if args.json:
        args.json.write_text(json.dumps({"speed": rows, "variants": quantized}, indent=2) + "\n")
    return rows


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker(json.loads(sys.stdin.readline()))
    else:
        main()
