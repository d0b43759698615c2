"""What each `minitf` command does, run by `minitf_cli.main` (the parser beside this package, so that every
`--help` and wrong argument is answered without importing torch) as `<command>_command(args)`.

Every command returns its exit status: 0 when done, 2 with a one-line error on stderr for unusable input (a
missing folder, a non-empty --out, data in the wrong shape, a refused push): `reports_errors` is the one place
that turns an error into that line. Folders are written atomically and an --out that is, or holds, one of the
command's inputs is refused.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import pickle
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path

from .file_safety import refused_pickle_message
from .output_folder import OutputFolder, OutputFolderError, existing_paths
from .publishing import PushError

# The errors a command reports in one line: input it cannot use, a file system that refused, a refused push, a
# pickle torch refused to load (it holds code).
REPORTED_ERRORS = (ValueError, OSError, PushError, pickle.UnpicklingError)


class CommandError(ValueError):
    """Input a command cannot use; the message says what to change."""


def error_line(error: BaseException, out: str = "--out") -> str:
    """The first line of an error's message, in the command line's words (`out` for the output, `--overwrite`)."""
    if isinstance(error, OutputFolderError):
        return error.worded(out, "--overwrite")
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def reports_errors(command: str | Callable[[argparse.Namespace], str], out: str = "--out") -> Callable:
    """Turn a command's reported errors into `minitf COMMAND: error: ...` on stderr and exit status 2.
    `command` is the command's name, or a function of the arguments giving it (`convert SOURCE`); `out` is
    how the command's output is given (`--out`, or a positional `OUT`)."""

    def decorate(function: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        @wraps(function)
        def run(args: argparse.Namespace) -> int:
            try:
                return function(args)
            except BrokenPipeError:  # the output's reader left: minitf_cli.main ends quietly, no error line
                raise
            except REPORTED_ERRORS as error:
                if isinstance(error, pickle.UnpicklingError):  # torch refused a pickle of a folder the command read
                    error = ValueError(refused_pickle_message(error, [value for value in vars(args).values()
                                                                      if isinstance(value, (str, Path))]))
                name = command(args) if callable(command) else command
                print(f"minitf {name}: error: {error_line(error, out)}", file=sys.stderr)
                return 2

        return run

    return decorate


# The command that uses each family's folders, and the engine export each command runs.
FAMILY_COMMANDS = {"gpt": "generate", "encoder": "embed", "seq2seq": "translate"}
ENGINE_KINDS = {"generate": "generator", "embed": "embedder", "translate": "translator"}
GGUF_MAGIC = b"GGUF"
# The positions of transformers' own architectures that `minitf export native` writes (a GPT-2 past its table
# fails inside torch's embedding lookup).
NATIVE_POSITIONS = {"gpt2": "learned", "gpt_neox": "rope"}


def read_config(folder: Path) -> dict:
    """The folder's config.json as a dict; a CommandError naming the file when it is not a JSON object."""
    path = folder / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CommandError(f"{path} is not JSON ({error}); it is not a saved model's config: save or convert the "
                           "model again") from None
    if not isinstance(config, dict):
        raise CommandError(f"{path} holds a JSON {type(config).__name__}, not an object of config fields; it is not "
                           "a saved model's config: save or convert the model again")
    return config


def _architectures(config: dict) -> list[str]:
    names = config.get("architectures")
    return [name for name in names if isinstance(name, str)] if isinstance(names, list) else []


def folder_family(config: dict, folder: Path) -> str | None:
    """gpt, encoder or seq2seq, as the folder's config (model_type, architectures) or its SentenceTransformer
    modules.json says; None where neither tells (a model of another library: its loader decides)."""
    model_type, architectures = config.get("model_type"), _architectures(config)
    if model_type == "minitf_gpt" or any(name.endswith(("ForCausalLM", "LMHeadModel")) for name in architectures):
        return "gpt"
    if model_type == "minitf_seq2seq" or config.get("is_encoder_decoder") is True or any(
            name.endswith("ForConditionalGeneration") for name in architectures):
        return "seq2seq"
    if model_type == "minitf_encoder" or (folder / "modules.json").is_file():
        return "encoder"
    return None


def _a(word: str) -> str:
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def _described(config: dict) -> str:
    """The model a config describes, as `model_type: Architecture`."""
    return ", ".join([str(config.get("model_type", "no model_type")), *_architectures(config)])


def _model_folder(path: Path, command: str | None = None) -> Path:
    """`path` when it is a model folder (or an engine export) that `minitf COMMAND` uses; a CommandError naming what
    the folder is and which command fits it otherwise."""
    from .engines import export_info

    if path.is_file():
        with path.open("rb") as handle:
            if handle.read(4) == GGUF_MAGIC:
                raise CommandError(f"{path} is a GGUF file (minitf export gguf), which runs in llama.cpp or Ollama; "
                                   "give minitf the MiniTF folder it was exported from")
    if not path.is_dir():
        raise CommandError(f"{path} is not a folder; give a model folder written by minitf train, quickstart or "
                           "convert")
    export = export_info(path)
    if export is not None:
        fitting = {kind: name for name, kind in ENGINE_KINDS.items()}.get(export.get("kind"))
        if command is not None and fitting is not None and fitting != command:
            raise CommandError(f"{path} is {_a(str(export.get('engine')))} {export.get('kind')} export of "
                               f"{_a(str(export.get('family')))} model, which `minitf {command}` does not run; use "
                               f"`minitf {fitting}` with it")
        return path
    if not (path / "config.json").is_file():
        raise CommandError(f"{path} has no config.json; it is not a saved model folder")
    config = read_config(path)
    family = folder_family(config, path)
    if command is not None and family is not None and FAMILY_COMMANDS[family] != command:
        needed = {name: family for family, name in FAMILY_COMMANDS.items()}[command]
        raise CommandError(f"{path} holds {_a(family)} model ({_described(config)}); `minitf {command}` needs "
                           f"{_a(needed)} model: use `minitf "
                           f"{FAMILY_COMMANDS[family]}` with this folder")
    return path


def _quiet_transformers() -> None:
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()


@reports_errors("quickstart")
def quickstart_command(args: argparse.Namespace) -> int:
    from .quickstart import QuickstartSteps, run

    run(args.out, steps=QuickstartSteps().scaled(args.steps_scale), overwrite=args.overwrite,
        progress=not args.no_progress, seed=args.seed)
    return 0


@reports_errors("train")
def train_command(args: argparse.Namespace) -> int:
    from . import training
    from .training_data import load_pairs, open_texts

    if args.no_progress:  # also the bars of saving and loading weights
        from transformers.utils import logging

        logging.disable_progress_bar()
    out = OutputFolder(args.out, args.overwrite, [*existing_paths(args.data), args.checkpoint_dir])
    data = Path(args.data)
    settings = training.TrainSettings(
        epochs=args.epochs, max_steps=args.max_steps or -1, batch_size=args.batch_size,
        learning_rate=args.learning_rate, warmup=args.warmup, weight_decay=args.weight_decay, seed=args.seed,
        logging_steps=args.logging_steps, eval_steps=args.eval_steps, save_steps=args.save_steps,
        checkpoint_dir=args.checkpoint_dir, resume=args.resume, mixed_precision=args.mixed_precision,
        report_to=args.report_to, progress=not args.no_progress,
    )
    columns = [column.strip() for column in args.columns.split(",")]
    common = dict(preset=args.preset, settings=settings, eval_fraction=args.eval_fraction,
                  dataset_name=data.name or str(args.data))
    if args.family == "gpt":
        texts = open_texts(args.data, columns[0], args.split)
        result = training.train_gpt(texts, out, tokenizer=args.tokenizer, vocab_size=args.vocab_size,
                                    block_size=args.block_size, **common)
    elif args.family == "encoder":
        pairs = load_pairs(args.data, columns, args.split)
        result = training.train_encoder(pairs, out, vocab_size=args.vocab_size, **common)
    else:
        pairs = load_pairs(args.data, columns, args.split)
        result = training.train_seq2seq(pairs, out, **common)
    if result.folder is not None:
        figures = ", ".join(f"{key} {value:.4g}" for key, value in result.eval_results.items())
        print(f"Saved {args.family} model ({result.model.num_parameters():,} parameters) to {result.folder}"
              + (f"; held out: {figures}" if figures else ""))
    return 0


@reports_errors("generate")
def generate_command(args: argparse.Namespace) -> int:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, TextStreamer

    from .engines import load_engine

    _quiet_transformers()
    folder = _model_folder(args.model, "generate")
    engine = load_engine(folder, "generator")  # a CTranslate2 export (minitf export ctranslate2) runs in its engine
    if engine is None:
        model = AutoModelForCausalLM.from_pretrained(folder).eval()
        tokenizer = AutoTokenizer.from_pretrained(folder)
        config = model.config
        positions = getattr(config, "position_embedding_type", None) or NATIVE_POSITIONS.get(config.model_type)
        limit = config.max_position_embeddings if positions == "learned" \
            and getattr(config, "context_overflow", "error") == "error" else None
        trained = config.max_position_embeddings if positions == "rope" else None
    else:
        tokenizer, limit = engine.tokenizer, engine.position_limit
        trained = engine.max_positions if limit is None else None
    torch.manual_seed(args.seed)
    requests, notes = [], []  # every prompt is checked before any is continued or noted
    for prompt in args.prompts:
        if not prompt:  # as the server's /v1/completions: there is nothing to continue
            raise CommandError(f"prompt [{len(requests)}] is empty; give the text to continue")
        ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt").input_ids
        if ids.shape[1] == 0:
            raise CommandError(f"none of the characters of the prompt {prompt!r} are in the model's vocabulary")
        kept = tokenizer.decode(ids[0], skip_special_tokens=True)
        unknown = sorted({char for char in prompt if char not in kept})
        if unknown:
            notes.append(f"{''.join(unknown)!r} not in the model's vocabulary; read as "
                         f"{tokenizer.unk_token or 'nothing'}")
        new_tokens = args.max_new_tokens
        if limit is not None:
            room = limit - ids.shape[1]
            if room <= 0:
                raise CommandError(f"the prompt is {ids.shape[1]} tokens; this model reads at most {limit}")
            if room < new_tokens:
                notes.append(f"{new_tokens} new tokens would pass the model's {limit} positions; generating {room}")
                new_tokens = room
        if trained is not None and ids.shape[1] + new_tokens > trained:
            notes.append(f"the prompt ({ids.shape[1]} tokens) and {new_tokens} new tokens pass the {trained} "
                         "positions this model was trained on; its rotary positions go on past them, but expect "
                         "weaker text there")
        requests.append((ids, new_tokens))
    for note in notes:
        print(f"minitf generate: note: {note}", file=sys.stderr)
    for ids, new_tokens in requests:
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


@reports_errors("embed")
def embed_command(args: argparse.Namespace) -> int:
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import cos_sim

    from .engines import load_engine

    _quiet_transformers()
    folder = _model_folder(args.model, "embed")
    empty = [index for index, text in enumerate(args.texts) if not text]
    if empty:  # as the server's embeddings route: an empty text would embed only the special tokens
        raise CommandError(f"text [{empty[0]}] is empty; every text to embed needs at least one character")
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


@reports_errors("translate")
def translate_command(args: argparse.Namespace) -> int:
    from transformers import pipeline

    from .pipeline_minitf_translation import TASK

    from .engines import load_engine

    _quiet_transformers()
    folder = _model_folder(args.model, "translate")
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


def _safetensors_parameters(folder: Path) -> int | None:
    """Parameters stored in the folder's safetensors files, read from their headers by safetensors (no tensor is
    loaded; a malformed header is an error naming the file); None where the folder has none."""
    from safetensors import SafetensorError, safe_open

    paths = sorted(folder.glob("*.safetensors"))
    total = 0
    for path in paths:
        try:
            with safe_open(path, "pt") as weights:
                total += sum(math.prod(weights.get_slice(name).get_shape()) for name in weights.keys())
        except SafetensorError as error:
            raise CommandError(f"{path} is not a readable safetensors file ({error}); save or convert the model "
                               "again") from None
    return total if paths else None


@reports_errors("info")
def info_command(args: argparse.Namespace) -> int:
    """`minitf info DIR`: what a model folder or engine export holds. Everything is read before anything is
    printed, so a malformed file gives its one-line error and no half report."""
    from huggingface_hub.utils import logging as hub_logging

    from .engines import export_info
    from .file_safety import load_model_card

    folder = _model_folder(args.model)
    config = read_config(folder) if (folder / "config.json").is_file() else {}
    export = export_info(folder)
    parameters = _safetensors_parameters(folder)
    card = folder / "README.md"
    hub_logging.get_logger("huggingface_hub.repocard").setLevel("ERROR")  # "no metadata block": the card's own say
    metadata = load_model_card(card).data.to_dict() if card.is_file() else None
    sizes = ("vocab_size", "src_vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
             "intermediate_size", "max_position_embeddings", "position_embedding_type")
    print(f"folder: {folder}")
    if export is not None:
        details = ", ".join(f"{key} {export[key]}" for key in ("quantization", "source") if export.get(key))
        print(f"export: {export.get('engine')} {export.get('kind')}" + (f" ({details})" if details else ""))
    model_type = config.get("model_type") or (export or {}).get("family", "unknown")
    print(f"family: {model_type} ({', '.join(_architectures(config) or ['?'])})")
    print(f"parameters: {parameters:,}" if parameters is not None else "parameters: unknown (no .safetensors file)")
    for key in sizes:
        value = config.get(key, (export or {}).get(key))
        if value is not None:
            print(f"{key}: {value}")
    print("files:")
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        print(f"  {path.relative_to(folder).as_posix()} ({path.stat().st_size:,} bytes)")
    if metadata is not None:
        print("card metadata:")
        for key, value in metadata.items():
            print(f"  {key}: {json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value}")
    return 0


@reports_errors("serve")
def serve_command(args: argparse.Namespace) -> int:
    """`minitf serve`: the models behind transformers' OpenAI-compatible server (hf_minitf.serving)."""
    import os

    try:
        from .serving import API_KEY_VARIABLE, serve
    except ImportError as error:  # transformers' serving code or its packages are missing: the message says which
        raise CommandError(str(error)) from error

    _quiet_transformers()
    serve(args.models, host=args.host, port=args.port, log_level=args.log_level, dtype=args.dtype,
          device=args.device, continuous_batching=args.continuous_batching, cb_num_blocks=args.cb_num_blocks,
          cb_max_batch_tokens=args.cb_max_batch_tokens, trust_remote_code=args.trust_remote_code,
          api_key=args.api_key or os.environ.get(API_KEY_VARIABLE) or None)
    return 0


@reports_errors(lambda args: f"convert {args.source}")
def convert_command(args: argparse.Namespace) -> int:
    """`minitf convert SOURCE ...`: the runner of that source's module in hf_minitf.conversion."""
    from transformers.utils import logging

    from .conversion import SOURCES

    logging.disable_progress_bar()  # stderr holds the summary's notes or one error line, not save/load bars
    source = SOURCES[args.source]
    return getattr(importlib.import_module(f"{__package__}.conversion.{source.module}"), source.runner)(args)


@reports_errors(lambda args: f"export {args.format}", out="OUT")
def export_command(args: argparse.Namespace) -> int:
    """`minitf export FORMAT SRC OUT ...`: the format's runner in hf_minitf.export."""
    from transformers.utils import logging

    from .export import EXPORTERS

    logging.set_verbosity_error()  # loading bars and notes of the source model: nothing the user acts on
    logging.disable_progress_bar()
    print(EXPORTERS[args.format](args))
    return 0


@reports_errors("push")
def push_command(args: argparse.Namespace) -> int:
    """`minitf push DIR REPO_ID [--native [--gguf TYPES]]`: upload the folder with its card, or its native export
    with GGUF files beside it (hf_minitf.publishing)."""
    from .export_gguf import GGUF_DTYPES
    from .publishing import push_folder, push_native

    gguf = tuple(dtype.strip() for dtype in args.gguf.split(",") if dtype.strip()) if args.gguf else ()
    if gguf and not args.native:
        raise CommandError("--gguf adds GGUF files to a native export: pass --native with it.")
    unknown = [dtype for dtype in gguf if dtype not in GGUF_DTYPES]
    if unknown:
        raise CommandError(f"--gguf {args.gguf}: unknown type(s) {', '.join(unknown)}; choose from "
                           f"{', '.join(GGUF_DTYPES)}.")
    if args.native:
        url = push_native(args.folder, args.repo_id, gguf_dtypes=gguf, private=args.private, revision=args.revision,
                          commit_message=args.commit_message, token=args.token)
    else:
        url = push_folder(args.folder, args.repo_id, private=args.private, revision=args.revision,
                          license=args.license, commit_message=args.commit_message, token=args.token)
    print(f"Pushed {args.folder} to {args.repo_id}: {url}")
    return 0


__all__ = ["CommandError", "REPORTED_ERRORS", "error_line", "reports_errors"]
