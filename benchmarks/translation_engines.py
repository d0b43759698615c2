"""Translation, greedy, batch 1, on CPU: MiniTF `generate()` beside the ONNX Runtime translator (the export's
encoder and cached decoder graphs, numpy search) and CTranslate2's Translator, float32 all three.

The translator has random weights at the quickstart's dimensions (`--preset tiny`) or hkproj's pytorch-transformer
defaults (`--preset hkproj`), with word-level vocabularies; the engines get the same weights through `export_onnx`
and `export_ctranslate2`. Each engine runs in a worker process of its own (an engine's idle threads slow torch in
the same process), loaded and warmed before timing; the engines are interleaved round by round, with a pause before
each timed run. A run translates the sentences one at a time (batch 1) to [EOS] or `--new-tokens`.
Reported: median seconds per run, speed relative to MiniTF, and the translations equal to MiniTF's.

    python benchmarks/translation_engines.py                   # quickstart dims
    python benchmarks/translation_engines.py --preset hkproj   # hkproj dims
    python benchmarks/translation_engines.py --smoke           # tiny dims, one round: checks that it runs
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import common

# How a row is printed (filled in by its fields)
ROW_LINE = (
    "{engine:<16} {seconds:9.4f} s  {speed_vs_minitf:5.2f}x  "
    "{equal_to_minitf}/{sentences} translations equal to MiniTF's"
)
VOCABULARIES = {"tiny": (400, 450), "hkproj": (15000, 22000)}  # the preset's source and target vocabulary sizes


def translator_fields(preset: str, smoke: bool) -> dict:
    """The translator's config fields: the catalog preset's (the tests' tiny sizes for --smoke), a wide init."""
    from factories import TINY_SIZES, preset_fields

    source, target = VOCABULARIES[preset]
    if smoke:
        fields = dict(TINY_SIZES["seq2seq"], src_vocab_size=60, vocab_size=70)
    else:
        fields = preset_fields("seq2seq", preset, src_vocab_size=source, vocab_size=target)
    return {**fields, "initializer_range": 0.1}


def build_folders(root: Path, fields: dict) -> dict[str, Path]:
    """A MiniTF translator with random weights and its two exports, by engine."""
    from hf_minitf.export.ctranslate2 import export_ctranslate2
    from hf_minitf.export.onnx import export_onnx

    folder = common.translator_folder(root / "minitf", fields)
    return {
        "minitf generate": folder,
        "onnxruntime": export_onnx(folder, root / "onnxruntime"),
        "ctranslate2": export_ctranslate2(folder, root / "ctranslate2"),
    }


def worker(spec: dict) -> None:
    """Load one engine, translate once to warm up, then time a run on each "go" line from stdin."""
    folder, texts, new_tokens = Path(spec["folder"]), spec["texts"], spec["new_tokens"]
    if spec["engine"] == "minitf generate":
        import torch
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        import hf_minitf  # noqa: F401 (registers the MiniTF classes with the Auto classes)

        model, tokenizer = AutoModelForSeq2SeqLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)

        def translate(text: str) -> str:
            with torch.no_grad():
                ids = model.generate(**tokenizer(text, return_tensors="pt"), max_new_tokens=new_tokens, do_sample=False)
            return tokenizer.batch_decode(ids, skip_special_tokens=True)[0]
    else:
        from hf_minitf.engines import load_engine

        engine = load_engine(folder, "translator")
        assert engine is not None

        def translate(text: str) -> str:
            return engine.translate([text], max_new_tokens=new_tokens)[0]

    common.serve(lambda: [translate(text) for text in texts], spec["pause"])


def main(argv: list[str] | None = None) -> list[dict]:
    parser = common.interleaved_parser(__doc__)
    parser.add_argument("--preset", choices=tuple(VOCABULARIES), default="tiny", help="the translator's dims")
    parser.add_argument("--sentences", type=int, default=None, help="sentences per run (default 16, smoke 2)")
    parser.add_argument("--new-tokens", type=int, default=32, help="longest translation (default 32)")
    args = common.parse_interleaved(parser, argv)
    count = args.sentences or (2 if args.smoke else 16)
    new_tokens = min(args.new_tokens, 11) if args.smoke else args.new_tokens
    with tempfile.TemporaryDirectory() as root:
        fields = translator_fields(args.preset, args.smoke)
        folders = build_folders(Path(root), fields)
        texts = common.random_sentences(random.Random(0), count, "s", fields["src_vocab_size"] - 4, (6, 10))
        specs = {
            engine: {
                "engine": engine,
                "folder": str(folder),
                "texts": texts,
                "new_tokens": new_tokens,
                "pause": args.pause,
            }
            for engine, folder in folders.items()
        }
        timings = common.time_interleaved(__file__, specs, args.rounds)
    reference = timings["minitf generate"]
    rows = [
        {
            "engine": engine,
            "seconds": timing.median,
            "speed_vs_minitf": reference.median / timing.median,
            "equal_to_minitf": sum(a == b for a, b in zip(timing.result, reference.result)),
            "sentences": len(texts),
        }
        for engine, timing in timings.items()
    ]
    return common.show_and_save(rows, ROW_LINE, args.json)


if __name__ == "__main__":
    common.main_or_worker(main, worker)
