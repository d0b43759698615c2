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

import random
import tempfile
from pathlib import Path

import common

# How a row is printed (filled in by its fields)
ROW_LINE = "{group:<28} {engine:<16} {seconds:9.4f} s  {speed_vs_reference:5.2f}x  {agreement}"
QUANTIZED = ("float32", "int8")  # CTranslate2's weights beside float32


def model_settings(smoke: bool) -> dict:
    """Config fields of each model and the run's sizes: full sizes from the catalog's presets, smoke sizes from the
    tests' tiny ones (the factory is imported here: the engines' worker processes do not load torch for it)."""
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
    }


# ------------------------------------------------------------------------------------------ models and exports
def build_models(settings: dict, root: Path) -> dict:
    """MiniTF folders with random weights and matching tokenizers, and their engine exports."""
    from factories import random_model_folder

    from hf_minitf import char_tokenizer
    from hf_minitf.export.ctranslate2 import export_ctranslate2
    from hf_minitf.export.onnx import export_onnx

    def with_ct2(name: str, folder: Path) -> dict:
        quantized = {f"ct2 {q}": export_ctranslate2(folder, root / f"{name}_{q}", quantization=q) for q in QUANTIZED}
        return {"minitf": folder, **quantized}

    folders: dict = {}
    for name, fields in settings["gpt"].items():
        tokenizer = char_tokenizer([chr(0x4E00 + index) for index in range(fields["vocab_size"])], special_tokens=None)
        folders[name] = with_ct2(name, random_model_folder("gpt", root / name, tokenizer, **fields))
    folders["translator"] = with_ct2(
        "translator", common.translator_folder(root / "translator", settings["translator"])
    )
    folder = common.encoder_folder(root / "encoder", settings["encoder"])
    folders["encoder"] = {"minitf": folder, "onnx": export_onnx(folder, root / "encoder_onnx", quantize="q8")}
    return folders


# -------------------------------------------------------------------------------------------------- workers
def worker(spec: dict) -> None:
    """Load one case, run it once to warm up, then time it on each "go" line from stdin (after `pause` s)."""
    import hf_minitf  # noqa: F401 (registers the MiniTF classes with the Auto classes)

    common.serve(make_case(spec), spec["pause"])


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
            generate.update(cache_implementation="static", compile_config=common.compile_everywhere())

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
        return lambda: common.embed_in_length_order(embedder.encode, data, 32)
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
    sources = common.random_sentences(rng, 32, "s", settings["translator"]["src_vocab_size"] - 4, (8, 24))
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
    sentences = common.random_sentences(rng, settings["sentences"], "w", settings["encoder"]["vocab_size"] - 4, (4, 40))
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
        return f"least cosine {common.least_cosine(reference, result):.6f}"
    equal = sum(x == y for x, y in zip(reference, result))
    return f"{equal}/{len(reference)} rows equal"


def main(argv: list[str] | None = None) -> list[dict]:
    parser = common.interleaved_parser(__doc__, unit="case")
    parser.add_argument(
        "--only",
        nargs="+",
        default=None,
        metavar="GROUP",
        help="run only the groups whose name starts with one of these (nanogpt-char, frawdllm-small, "
        "translator, encoder)",
    )
    args = common.parse_interleaved(parser, argv)
    settings = model_settings(args.smoke)
    with tempfile.TemporaryDirectory() as root:
        folders = build_models(settings, Path(root))
        specs = [
            spec
            for spec in cases(settings, folders, args.pause)
            if args.only is None or spec["group"].startswith(tuple(args.only))
        ]
        timings = {}
        for group in dict.fromkeys(spec["group"] for spec in specs):  # one group's workers at a time (memory)
            group_specs = {f"{group} / {spec['engine']}": spec for spec in specs if spec["group"] == group}
            timings.update(common.time_interleaved(__file__, group_specs, args.rounds))
    rows, references = [], {}
    for spec in specs:
        timing = timings[f"{spec['group']} / {spec['engine']}"]
        reference = references.setdefault(spec["group"], timing)  # the group's first case
        rows.append(
            {
                "group": spec["group"],
                "engine": spec["engine"],
                "seconds": timing.median,
                "speed_vs_reference": reference.median / timing.median,
                "agreement": agreement(reference.result, timing.result, spec["family"]),
            }
        )
    return common.show_and_save(rows, ROW_LINE, args.json)


if __name__ == "__main__":
    common.main_or_worker(main, worker)
