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

import argparse
import json
import random
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from engines_ctranslate2_onnx import serve, start_worker  # noqa: E402 (the worker processes, as that benchmark runs them)

ENGINES = ("minitf generate", "onnxruntime", "ctranslate2")


def translator_folder(root: Path, preset: str, smoke: bool) -> tuple[Path, int]:
    """A MiniTF translator with random weights (its source vocabulary size returned too), and its two exports."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    from hf_minitf import MiniTFSeq2SeqTokenizer
    from hf_minitf.export.ctranslate2 import export_ctranslate2
    from hf_minitf.export.onnx import export_onnx

    sys.path.insert(0, str(HERE.parent / "tests"))
    from factories import TINY_SIZES, preset_fields, random_model_folder

    sizes = {"tiny": (400, 450), "hkproj": (15000, 22000)}[preset]
    fields = (
        dict(TINY_SIZES["seq2seq"], src_vocab_size=60, vocab_size=70)
        if smoke
        else preset_fields("seq2seq", preset, src_vocab_size=sizes[0], vocab_size=sizes[1])
    )
    fields["initializer_range"] = 0.1

    def word_level(prefix: str, size: int) -> Tokenizer:
        words = ["[UNK]", "[PAD]", "[SOS]", "[EOS]", *(f"{prefix}{index}" for index in range(size - 4))]
        tokenizer = Tokenizer(models.WordLevel(vocab={word: i for i, word in enumerate(words)}, unk_token="[UNK]"))
        tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
        return tokenizer

    pair = MiniTFSeq2SeqTokenizer(word_level("s", fields["src_vocab_size"]), word_level("t", fields["vocab_size"]))
    folder = random_model_folder("seq2seq", root / "minitf", pair, **fields)
    export_onnx(folder, root / "onnxruntime")
    export_ctranslate2(folder, root / "ctranslate2")
    return folder, fields["src_vocab_size"]


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

    serve(lambda: [translate(text) for text in texts], spec["pause"])


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=("tiny", "hkproj"), default="tiny", help="the translator's dims")
    parser.add_argument("--smoke", action="store_true", help="tiny dims, one round: check that everything runs")
    parser.add_argument("--sentences", type=int, default=None, help="sentences per run (default 16, smoke 2)")
    parser.add_argument("--new-tokens", type=int, default=32, help="longest translation (default 32)")
    parser.add_argument("--rounds", type=int, default=None, help="timed runs per engine (default 3, smoke 1)")
    parser.add_argument("--pause", type=float, default=None, help="seconds of rest before each timed run (2; smoke 0)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    rounds = args.rounds or (1 if args.smoke else 3)
    pause = args.pause if args.pause is not None else (0.0 if args.smoke else 2.0)
    count = args.sentences or (2 if args.smoke else 16)
    new_tokens = min(args.new_tokens, 11) if args.smoke else args.new_tokens
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as root:
        folder, source_words = translator_folder(Path(root), args.preset, args.smoke)
        texts = [
            " ".join(f"s{rng.randrange(source_words - 4)}" for _ in range(rng.randrange(6, 10))) for _ in range(count)
        ]
        workers = {
            engine: start_worker(
                {
                    "group": "translation batch 1",
                    "engine": engine,
                    "folder": str(folder.parent / ("minitf" if engine == "minitf generate" else engine)),
                    "texts": texts,
                    "new_tokens": new_tokens,
                    "pause": pause,
                },
                __file__,
            )
            for engine in ENGINES
        }
        times: dict[str, list[float]] = {engine: [] for engine in ENGINES}
        results: dict[str, list[str]] = {}
        for _ in range(rounds):  # interleaved: every engine once per round
            for engine, process in workers.items():
                assert process.stdin is not None and process.stdout is not None
                process.stdin.write("go\n")
                process.stdin.flush()
                answer = json.loads(process.stdout.readline())
                times[engine].append(answer["seconds"])
                results[engine] = answer["result"]
        for process in workers.values():
            assert process.stdin is not None
            process.stdin.close()
            process.wait()
    reference = statistics.median(times["minitf generate"])
    rows = [
        {
            "engine": engine,
            "seconds": statistics.median(times[engine]),
            "speed_vs_minitf": reference / statistics.median(times[engine]),
            "equal_to_minitf": sum(a == b for a, b in zip(results[engine], results["minitf generate"])),
            "sentences": len(texts),
        }
        for engine in ENGINES
    ]
    for row in rows:
        print(
            f"{row['engine']:<16} {row['seconds']:9.4f} s  {row['speed_vs_minitf']:5.2f}x  "
            f"{row['equal_to_minitf']}/{row['sentences']} translations equal to MiniTF's"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return rows


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(json.loads(sys.stdin.readline()))
    else:
        main()
