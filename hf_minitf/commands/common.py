"""What every `minitf` command shares: one-line errors (`reports_errors`), the checks of the model folder a command
is given, and the argparse types of bounded numbers (bounds from `hf_minitf.catalog.limits`).

Light to import (no torch): the parser imports every command module to build `minitf --help`.
"""

from __future__ import annotations

import argparse
import math
import pickle
import sys
from collections.abc import Callable, Mapping
from functools import wraps
from pathlib import Path
from typing import Any, Protocol

from hf_minitf.catalog.engines import CACHED_ENGINES, COMMAND_ENGINES, ENGINE_CACHE_FOLDER, TORCH
from hf_minitf.catalog.families import FAMILIES, family_of_config
from hf_minitf.catalog.limits import (
    GREEDY_BELOW_TEMPERATURE,
    MAX_BEAMS,
    MAX_EPOCHS,
    MAX_NEW_TOKENS,
    MAX_PORT,
    MAX_STEPS,
    MAX_STEPS_SCALE,
    MAX_VOCAB_SIZE,
    SEED_LIMIT,
)
from hf_minitf.catalog.packaging import missing_extra
from hf_minitf.catalog.publishing import LICENSE_HELP, check_license
from hf_minitf.catalog.wording import with_article


def say(command: str, kind: str, line: str) -> None:
    """Print `minitf COMMAND: KIND: LINE` on stderr: an error, note or warning, apart from the command's output."""
    print(f"minitf {command}: {kind}: {line}", file=sys.stderr, flush=True)


def reported_errors() -> tuple[type[BaseException], ...]:
    """The errors a command reports in one line: input it cannot use, a file system that refused, a refused push, a
    pickle torch refused to load (it holds code). Imported when an error is raised, so the parser stays light."""
    from hf_minitf.hub.push import PushError

    return (ValueError, OSError, PushError, pickle.UnpicklingError)


class CommandError(ValueError):
    """Input a command cannot use; the message says what to change."""


def error_line(error: BaseException, out: str = "--out") -> str:
    """The first line of an error's message, in the command line's words (`out` for the output, `--overwrite`)."""
    from hf_minitf.safety.output_folders import OutputDiskFull, OutputFolderError

    if isinstance(error, OutputFolderError):
        return error.worded(out, "--overwrite")
    if isinstance(error, OutputDiskFull):
        return error.worded(out)
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def reports_errors(command: str | Callable[[argparse.Namespace], str], out: str = "--out") -> Callable:
    """Turn a command's reported errors, and a missing module of an extra (naming the extra to install), into
    `minitf COMMAND: error: ...` on stderr and exit status 2.
    `command` is the command's name, or a function of the arguments giving it (`convert SOURCE`); `out` is
    how the command's output is given (`--out`, or a positional `OUT`)."""

    def decorate(function: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        @wraps(function)
        def run(args: argparse.Namespace) -> int:
            try:
                return function(args)
            except BrokenPipeError:  # the output's reader left: hf_minitf.cli.main ends quietly, no error line
                raise
            except Exception as error:
                name = command(args) if callable(command) else command
                install = missing_extra(error)
                if install is not None:  # a module of an extra this installation lacks: which extra to install
                    say(name, "error", install)
                    return 2
                if not isinstance(error, reported_errors()):
                    raise
                if isinstance(error, pickle.UnpicklingError):  # torch refused a pickle of a folder the command read
                    from hf_minitf.safety.pickles import refused_pickle_message

                    error = ValueError(
                        refused_pickle_message(
                            error, [value for value in vars(args).values() if isinstance(value, (str, Path))]
                        )
                    )
                say(name, "error", error_line(error, out))
                return 2

        return run

    return decorate


# The command that uses each family's folders, and the engine export each command runs.
FAMILY_COMMANDS = {family.name: family.command for family in FAMILIES.values()}
ENGINE_KINDS = {family.command: family.engine_kind for family in FAMILIES.values()}

GGUF_MAGIC = b"GGUF"


def read_config(folder: Path) -> dict:
    """The folder's config.json as a dict; a CommandError naming the file when it is not a JSON object."""
    from hf_minitf.safety.json_files import read_json

    advice = "it is not a saved model's config: save or convert the model again"
    return read_json(folder / "config.json", dict, "an object of config fields", advice, CommandError)


def architectures(config: dict) -> list[str]:
    names = config.get("architectures")
    return [name for name in names if isinstance(name, str)] if isinstance(names, list) else []


def _described(config: dict) -> str:
    """The model a config describes, as `model_type: Architecture`."""
    return ", ".join([str(config.get("model_type", "no model_type")), *architectures(config)])


def model_folder(path: Path, command: str | None = None) -> Path:
    """`path` when it is a model folder (or an engine export) that `minitf COMMAND` uses; a CommandError naming what
    the folder is and which command fits it otherwise."""
    from hf_minitf.engines import export_info

    if path.is_file():
        with path.open("rb") as handle:
            if handle.read(4) == GGUF_MAGIC:
                raise CommandError(
                    f"{path} is a GGUF file (minitf export gguf), which runs in llama.cpp or Ollama; "
                    "give minitf the MiniTF folder it was exported from"
                )
    if not path.is_dir():
        raise CommandError(
            f"{path} is not a folder; give a model folder written by minitf train, quickstart or convert"
        )
    export = export_info(path)
    if export is not None:
        fitting = {kind: name for name, kind in ENGINE_KINDS.items()}.get(export.get("kind", ""))
        if command is not None and fitting is not None and fitting != command:
            raise CommandError(
                f"{path} is {with_article(str(export.get('engine')))} {export.get('kind')} export of "
                f"{with_article(str(export.get('family')))} model, which `minitf {command}` does not run; use "
                f"`minitf {fitting}` with it"
            )
        return path
    if not (path / "config.json").is_file():
        raise CommandError(f"{path} has no config.json; it is not a saved model folder")
    config = read_config(path)
    family = family_of_config(config, path)
    if command is not None and family is not None and FAMILY_COMMANDS[family] != command:
        needed = {name: family for family, name in FAMILY_COMMANDS.items()}[command]
        raise CommandError(
            f"{path} holds {with_article(family)} model ({_described(config)}); `minitf {command}` needs "
            f"{with_article(needed)} model: use `minitf "
            f"{FAMILY_COMMANDS[family]}` with this folder"
        )
    return path


def quiet_transformers() -> None:
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()


def _figure(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def _number(
    kind: type,
    minimum: float,
    inclusive: bool = True,
    maximum: float | None = None,
    maximum_included: bool = False,
    advice: str = "",
):
    """An argparse type for finite numbers in a range, with an error that names the range (and `advice`)."""
    bound = (f">= {_figure(minimum)}" if inclusive else f"> {_figure(minimum)}") + (
        "" if maximum is None else f" and {'<=' if maximum_included else '<'} {_figure(maximum)}"
    )
    expected = f"a finite number {bound}" if kind is float else bound

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {'an integer' if kind is int else 'a number'}, got {text!r}"
            ) from None
        if (
            (kind is float and not math.isfinite(value))
            or (value < minimum if inclusive else value <= minimum)
            or (maximum is not None and (value > maximum if maximum_included else value >= maximum))
        ):
            raise argparse.ArgumentTypeError(f"must be {expected}, got {text}{advice}")
        return value

    parse.__name__ = kind.__name__
    return parse


def _at_most(kind: type, maximum: float, minimum: float = 1, inclusive: bool = True, advice: str = ""):
    return _number(kind, minimum, inclusive, maximum=maximum, maximum_included=True, advice=advice)


count = _at_most(int, MAX_STEPS)  # steps, batch sizes, heads, lengths: bounded so no value overflows a C integer
random_seed = _number(int, 0, maximum=SEED_LIMIT)
port_number = _at_most(int, MAX_PORT)
vocab_size = _at_most(int, MAX_VOCAB_SIZE)
new_tokens = _at_most(int, MAX_NEW_TOKENS)
beam_width = _at_most(int, MAX_BEAMS)
epochs = _at_most(float, MAX_EPOCHS, minimum=0.0, inclusive=False)
warmup = _at_most(float, MAX_STEPS, minimum=0.0)
steps_scale = _at_most(float, MAX_STEPS_SCALE, minimum=0.0, inclusive=False)
temperature = _number(
    float, GREEDY_BELOW_TEMPERATURE, advice=" (a lower temperature is greedy decoding: leave out --sample)"
)
positive_float = _number(float, 0.0, inclusive=False)
non_negative_float = _number(float, 0.0)
fraction = _number(float, 0.0, maximum=1.0)


def add_out(parser: argparse.ArgumentParser, default: str | None = None, what: str = "the model") -> None:
    parser.add_argument(
        "--out",
        type=Path,
        required=default is None,
        default=None if default is None else Path(default),
        help=f"folder to write {what} to (must be empty unless --overwrite)"
        + (f"; default: ./{default}" if default else ""),
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace a non-empty --out model folder (nothing else)"
    )


def add_model_folder(parser: argparse.ArgumentParser, help: str, optional: bool = False) -> None:
    """The `DIR` positional of a command that uses a model folder (`args.model`, None when `optional` and not
    given); `help` says which folders."""
    parser.add_argument("model", type=Path, metavar="DIR", help=help, nargs="?" if optional else None)


def add_engine(parser: argparse.ArgumentParser) -> None:
    """`--engine` of the commands that run a model folder once (`generate`, `translate`, `embed`)."""
    parser.add_argument(
        "--engine",
        choices=COMMAND_ENGINES,
        default=None,
        help=f"what runs a MiniTF folder (default: {TORCH}, no start-up cost; an export folder runs in its own engine). "
        f"onnx / ctranslate2 export the folder first into DIR/{ENGINE_CACHE_FOLDER}/ENGINE (reused while its "
        "weights are unchanged), checked with minitf verify's comparison; a failed check runs torch and says why. "
        "Needs the engines extra",
    )


def folder_engine(folder: Path, kind: str, asked: str | None, command: str) -> Any:
    """The engine runner that runs `folder` for `command` (`kind`: generator, translator or embedder), None for torch:
    an export folder's own engine (another one asked for is an error); for a MiniTF folder, the verified export of
    the engine `asked` (`hf_minitf.serving.engine_cache`), or torch with a note saying why when its check fails."""
    from hf_minitf.engines import export_info, load_engine

    info = export_info(folder)
    if info is not None:
        own = next((name for name, cached in CACHED_ENGINES.items() if cached.runtime == info["engine"]), None)
        if asked not in (None, own):
            raise CommandError(
                f"{folder} is {with_article(info['engine'])} export and runs in it; --engine {asked} needs the MiniTF "
                "folder it was exported from (or leave --engine out)"
            )
        return load_engine(folder, kind)  # type: ignore[call-overload]
    if asked in (None, TORCH):
        return None
    from hf_minitf.serving.engine_cache import choose_engine

    choice = choose_engine(folder, asked)
    if choice.on_torch:
        say(command, "note", f"--engine {asked}: running in {choice.reason}")
    return choice.runner


def forwarded(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The parsed options `names`, as the keyword arguments of a call whose parameters are named as the options
    are: the list of names written once instead of `host=args.host, port=args.port, ...` at every call."""
    return {name: getattr(args, name) for name in names}


class CatalogEntry(Protocol):
    """What a sub-command is made from: an entry of a catalog (a converter, an export format)."""

    @property
    def summary(self) -> str: ...

    @property
    def description(self) -> str: ...


def add_catalog_commands(
    commands: argparse._SubParsersAction,
    name: str,
    help: str,
    description: str,
    dest: str,
    entries: Mapping[str, CatalogEntry],
    add_arguments: Callable[[argparse.ArgumentParser, str], None],
    run: Callable[[argparse.Namespace], int],
) -> argparse.ArgumentParser:
    """`minitf NAME ENTRY ...`: one sub-command per entry of a catalog (its name is `args.DEST`), whose help is the
    entry's summary and description, whose arguments `add_arguments(parser, entry_name)` adds, and which `run`s."""
    command = commands.add_parser(name, help=help, description=description)
    sub_commands = command.add_subparsers(dest=dest, required=True, metavar=dest.upper())
    for entry_name, entry in entries.items():
        parser = sub_commands.add_parser(
            entry_name,
            help=entry.summary,
            description=entry.description,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        add_arguments(parser, entry_name)
        parser.set_defaults(run=run)
    return command


def license_id(text: str) -> str:
    """The argparse type of `--license`: a Hub license id, lowercased (`catalog.publishing.check_license`)."""
    try:
        return check_license(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix(f"license {text!r} ")) from None


def add_license(parser: argparse.ArgumentParser, default: str) -> None:
    """`--license ID`, whose help says the command's `default` (what the card gets without it)."""
    parser.add_argument(
        "--license", type=license_id, default=None, metavar="ID", help=f"{LICENSE_HELP} (default: {default})"
    )


__all__ = [
    "CommandError",
    "FAMILY_COMMANDS",
    "add_catalog_commands",
    "add_license",
    "add_model_folder",
    "add_out",
    "error_line",
    "forwarded",
    "model_folder",
    "quiet_transformers",
    "read_config",
    "reported_errors",
    "reports_errors",
    "say",
]
