"""What each `minitf` command does. Arguments, help and dispatch are in the `minitf_cli` module beside this
package, so that every `--help` and wrong argument is answered without importing torch; `main` and `build_parser`
are re-exported.

Every command returns its exit status: 0 when done, 2 with a one-line error on stderr for unusable input (a
missing folder, a non-empty --out, data in the wrong shape). Folders are written atomically and an --out that
is, or holds, one of the command's inputs is refused.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Iterable
from functools import wraps
from pathlib import Path

from minitf_cli import build_parser, main

from .export import export_command  # noqa: F401 (`minitf export` runs export's command, found by name)
from .publishing import push_command  # noqa: F401 (`minitf push` runs publishing's command, found by name)


class CommandError(ValueError):
    """Input a command cannot use; the message says what to change."""


def _reports_errors(command: str) -> Callable:
    """Turn the errors of unusable input into `minitf COMMAND: error: ...` on stderr and exit status 2."""

    def decorate(function: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        @wraps(function)
        def run(args: argparse.Namespace) -> int:
            try:
                return function(args)
            except (ValueError, OSError) as error:
                message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                print(f"minitf {command}: error: {message}", file=sys.stderr)
                return 2

        return run

    return decorate


def check_out_spares_inputs(out: Path, inputs: Iterable[Path]) -> None:
    """Refuse an --out that is one of the inputs or a folder holding one (replacing it would delete it)."""
    target = out.resolve()
    for path in inputs:
        source = path.resolve()
        if source == target or target in source.parents:
            raise CommandError(f"--out {out} holds the input {path}; writing there would delete it. "
                               "Choose another --out.")


def _model_folder(path: Path) -> Path:
    if not path.is_dir():
        raise CommandError(f"{path} is not a folder; give a model folder written by minitf train, quickstart or "
                           "convert")
    if not (path / "config.json").is_file():
        raise CommandError(f"{path} has no config.json; it is not a saved model folder")
    return path


def _quiet_transformers() -> None:
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()


@_reports_errors("quickstart")
def quickstart_command(args: argparse.Namespace) -> int:
    from .quickstart import QuickstartSteps, run

    run(args.out, steps=QuickstartSteps().scaled(args.steps_scale), overwrite=args.overwrite,
        progress=not args.no_progress, seed=args.seed)
    return 0


@_reports_errors("train")
def train_command(args: argparse.Namespace) -> int:
    from . import training
    from .conversion.output import check_output_dir

    if args.no_progress:  # also the bars of saving and loading weights
        from transformers.utils import logging

        logging.disable_progress_bar()
    data = Path(args.data)
    check_out_spares_inputs(args.out, [data] if data.exists() else [])
    if args.checkpoint_dir is not None:
        check_out_spares_inputs(args.out, [args.checkpoint_dir])
    check_output_dir(args.out, args.overwrite)
    settings = training.TrainSettings(
        epochs=args.epochs, max_steps=args.max_steps or -1, batch_size=args.batch_size,
        learning_rate=args.learning_rate, warmup=args.warmup, weight_decay=args.weight_decay, seed=args.seed,
        logging_steps=args.logging_steps, eval_steps=args.eval_steps, save_steps=args.save_steps,
        checkpoint_dir=args.checkpoint_dir, resume=args.resume, mixed_precision=args.mixed_precision,
        report_to=args.report_to, progress=not args.no_progress,
    )
    training.get_preset(args.family, args.preset)
    columns = [column.strip() for column in args.columns.split(",")]
    common = dict(preset=args.preset, settings=settings, eval_fraction=args.eval_fraction, overwrite=args.overwrite,
                  dataset_name=data.name or str(args.data))
    if args.family == "gpt":
        texts = training.load_texts(args.data, columns[0], args.split)
        result = training.train_gpt(texts, args.out, tokenizer=args.tokenizer, vocab_size=args.vocab_size,
                                    block_size=args.block_size, **common)
    elif args.family == "embedding":
        pairs = training.load_pairs(args.data, columns, args.split)
        result = training.train_embedding(pairs, args.out, vocab_size=args.vocab_size, **common)
    else:
        pairs = training.load_pairs(args.data, columns, args.split)
        result = training.train_seq2seq(pairs, args.out, **common)
    if result.folder is not None:
        figures = ", ".join(f"{key} {value:.4g}" for key, value in result.eval_results.items())
        print(f"Saved {args.family} model ({result.model.num_parameters():,} parameters) to {result.folder}"
              + (f"; held out: {figures}" if figures else ""))
    return 0


@_reports_errors("generate")
def generate_command(args: argparse.Namespace) -> int:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, TextStreamer

    from .engines import load_engine

    _quiet_transformers()
    folder = _model_folder(args.model)
    engine = load_engine(folder, "generator")  # a CTranslate2 export (minitf export ctranslate2) runs in its engine
    if engine is None:
        model = AutoModelForCausalLM.from_pretrained(folder).eval()
        tokenizer = AutoTokenizer.from_pretrained(folder)
        config = model.config
        limit = config.max_position_embeddings if getattr(config, "position_embedding_type", None) == "learned" \
            and getattr(config, "context_overflow", "error") == "error" else None
    else:
        tokenizer, limit = engine.tokenizer, engine.position_limit
    torch.manual_seed(args.seed)
    for prompt in args.prompts:
        ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt").input_ids
        if ids.shape[1] == 0:
            raise CommandError(f"none of the characters of the prompt {prompt!r} are in the model's vocabulary")
        kept = tokenizer.decode(ids[0], skip_special_tokens=True)
        sys.stdout.flush()
        unknown = sorted({char for char in prompt if char not in kept})
        if unknown:
            print(f"minitf generate: note: {''.join(unknown)!r} not in the model's vocabulary; read as "
                  f"{tokenizer.unk_token or 'nothing'}", file=sys.stderr)
        new_tokens = args.max_new_tokens
        if limit is not None:
            room = limit - ids.shape[1]
            if room <= 0:
                raise CommandError(f"the prompt is {ids.shape[1]} tokens; this model reads at most {limit}")
            if room < new_tokens:
                print(f"minitf generate: note: {new_tokens} new tokens would pass the model's {limit} positions; "
                      f"generating {room}", file=sys.stderr)
                new_tokens = room
        if engine is not None:
            new_ids = engine.generate([ids[0].tolist()], new_tokens, sample=args.sample, temperature=args.temperature,
                                      top_k=args.top_k, seed=args.seed)[0]
            print(tokenizer.decode(ids[0].tolist() + new_ids, skip_special_tokens=True), flush=True)
            continue
        options = {"do_sample": True, "temperature": args.temperature, "top_k": args.top_k} if args.sample else \
            {"do_sample": False}
        with torch.no_grad():
            model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                           pad_token_id=tokenizer.pad_token_id,
                           streamer=TextStreamer(tokenizer, skip_special_tokens=True), **options)
    return 0


@_reports_errors("embed")
def embed_command(args: argparse.Namespace) -> int:
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import cos_sim

    from .engines import load_engine

    _quiet_transformers()
    folder = _model_folder(args.model)
    engine = load_engine(folder, "embedder")  # an ONNX export (minitf export onnx) runs in ONNX Runtime
    if engine is None:
        embedder = SentenceTransformer(str(folder))
        vectors, similarity = embedder.encode(args.texts, convert_to_tensor=True), embedder.similarity
    else:
        vectors, similarity = torch.from_numpy(engine.encode(args.texts)), cos_sim
    if not args.similarity:
        for vector in vectors.tolist():
            print(json.dumps([round(value, 6) for value in vector]))
        return 0
    scores = similarity(vectors, vectors).tolist()
    width = max(len(f"[{index}]") for index in range(len(args.texts)))
    print(" " * width + "".join(f"{f'[{index}]':>8}" for index in range(len(args.texts))))
    for index, row in enumerate(scores):
        print(f"{f'[{index}]':>{width}}" + "".join(f"{score:8.3f}" for score in row))
    for index, text in enumerate(args.texts):
        print(f"[{index}] {text}")
    return 0


@_reports_errors("translate")
def translate_command(args: argparse.Namespace) -> int:
    from transformers import pipeline

    from .pipeline_minitf_translation import TASK

    from .engines import load_engine

    _quiet_transformers()
    folder = _model_folder(args.model)
    engine = load_engine(folder, "translator")  # a CTranslate2 export (minitf export ctranslate2) runs in its engine
    if engine is not None:
        for text in engine.translate(list(args.texts), num_beams=args.num_beams, max_new_tokens=args.max_new_tokens):
            print(text)
        return 0
    translate = pipeline(TASK, model=str(folder))
    options = {"num_beams": args.num_beams}
    if args.max_new_tokens is not None:
        options["max_new_tokens"] = args.max_new_tokens
    for output in translate(list(args.texts), **options):
        print(output["translation_text"])
    return 0


def _safetensors_parameters(folder: Path) -> int:
    """Parameters stored in the folder's safetensors files, read from their headers (no tensor is loaded)."""
    total = 0
    for path in sorted(folder.glob("*.safetensors")):
        with path.open("rb") as handle:
            size = int.from_bytes(handle.read(8), "little")
            header = json.loads(handle.read(size))
        total += sum(math.prod(entry["shape"]) for name, entry in header.items() if name != "__metadata__")
    return total


@_reports_errors("info")
def info_command(args: argparse.Namespace) -> int:
    from huggingface_hub import ModelCard

    folder = _model_folder(args.model)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    sizes = ("vocab_size", "src_vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
             "intermediate_size", "max_position_embeddings", "position_embedding_type")
    print(f"folder: {folder}")
    print(f"family: {config.get('model_type', 'unknown')} ({', '.join(config.get('architectures') or ['?'])})")
    print(f"parameters: {_safetensors_parameters(folder):,}")
    for key in sizes:
        if config.get(key) is not None:
            print(f"{key}: {config[key]}")
    print("files:")
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        print(f"  {path.relative_to(folder).as_posix()} ({path.stat().st_size:,} bytes)")
    card = folder / "README.md"
    if card.is_file():
        metadata = ModelCard.load(card).data.to_dict()
        print("card metadata:")
        for key, value in metadata.items():
            print(f"  {key}: {json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value}")
    return 0


def convert_command(args: argparse.Namespace) -> int:
    """`minitf convert SOURCE ...`: the converter of that source (hf_minitf.conversion)."""
    from .conversion.cli import run_conversion

    return run_conversion(args.source, args)


__all__ = ["build_parser", "check_out_spares_inputs", "main"]
