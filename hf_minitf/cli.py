"""The `minitf` command line: the parser built from the commands (`hf_minitf.commands`), and `main`, which checks
what every command needs (UTF-8 arguments, an open stdout, a current folder that exists), runs the command and
turns SIGTERM and a closed pipe into exit statuses.

Importing this module imports no torch: `minitf --help`, `--version`, every command's `--help` and wrong arguments
are answered from the parser alone.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from hf_minitf import __version__
from hf_minitf.commands import add_commands

# Loggers that speak while transformers imports torchao (the quantization extra): optional kernels that did not
# load and torch's deprecation of a registration torchao makes. Nothing a command's user can act on.
IMPORT_TIME_LOGGERS = ("torchao", "torch.utils._pytree")


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors: `minitf train: error: ... (see minitf train --help)`, exit code 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")

    def parse_known_args(self, args=None, namespace=None):
        """Unknown arguments are an error of the (sub-)command given them, which the message names: argparse
        would leave them to the top parser (`minitf: error: unrecognized arguments`)."""
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


def _exit_on_sigterm(signal_number: int, frame) -> None:
    raise SystemExit(128 + signal_number)


@contextlib.contextmanager
def sigterm_exits():
    """While a command runs, SIGTERM (`kill`, `timeout`, `docker stop`, job schedulers) exits as Ctrl-C does:
    through the program's cleanup, so the atomic folder writers remove their half-written folders; status 143."""
    if threading.current_thread() is not threading.main_thread():  # handlers can only be set there
        yield
        return
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# The exit status of a process whose output pipe closed (128 + SIGPIPE), as `yes | head -1` ends `yes`.
BROKEN_PIPE_STATUS = 141
# The exit status of a command interrupted by Ctrl-C (128 + SIGINT), as shells report it.
INTERRUPTED_STATUS = 130


def _argument_names(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, str]:
    """Each argument of the command `args` ran as its help shows it (`PROMPT`, `--out`), by its destination."""
    while True:
        commands = next((action for action in parser._actions if isinstance(action, argparse._SubParsersAction)), None)
        if commands is None:
            break
        parser = commands.choices[getattr(args, commands.dest)]
    return {
        action.dest: action.option_strings[-1]
        if action.option_strings
        else action.metavar
        if isinstance(action.metavar, str)
        else action.dest.upper()
        for action in parser._actions
    }


def _not_utf8(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str | None:
    """What is wrong with the first argument holding bytes that are not UTF-8 (Python keeps them as surrogate
    escapes, which tokenizers refuse with a TypeError and safetensors and tokenizers refuse in paths), or None."""
    for name, value in vars(args).items():
        values = value if isinstance(value, list) else [value]
        for index, text in enumerate(str(item) for item in values if isinstance(item, (str, Path))):
            position = next((at for at, char in enumerate(text) if "\udc80" <= char <= "\udcff"), None)
            if position is not None:
                shown = _argument_names(parser, args).get(name, name)
                which = f" {index + 1}" if isinstance(value, list) and len(value) > 1 else ""
                return (
                    f"{shown}{which} is not UTF-8 (byte {ord(text[position]) - 0xDC00:#04x} at character "
                    f"{position}); give it in UTF-8 (a file or folder name too: safetensors and tokenizers open "
                    "only UTF-8 paths)"
                )
    return None


def _current_folder_problem() -> str | None:
    """What is wrong with the current folder, or None: deleted while a shell was in it, so relative paths lead
    nowhere and importing torch aborts the process (`Intel oneMKL FATAL ERROR: Cannot load libtorch_cpu.so`)."""
    try:
        os.getcwd()
    except FileNotFoundError:
        shell_path = os.environ.get("PWD")  # where a shell was; the process itself cannot know the path any more
        where = f" {shell_path}" if shell_path else ""
        return f"the current folder{where} no longer exists (it was deleted); cd to an existing folder and run again"
    return None


def _command_name(args: argparse.Namespace) -> str:
    return " ".join(
        part
        for part in (
            args.command,
            getattr(args, "source", None)
            if args.command == "convert"
            else getattr(args, "format", None)
            if args.command == "export"
            else None,
        )
        if part
    )


def main(argv: list[str] | None = None) -> int:
    """Run `minitf ARGS` and return its exit status (0: done, 2: wrong arguments or unusable input, 130: Ctrl-C,
    141: its output pipe closed, as `minitf generate ... | head -1` closes it)."""
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    problem = _not_utf8(args, parser)
    if problem is None and sys.stdout is None:  # started with `>&-`: whatever the command prints would be lost
        problem = "standard output is closed; redirect it to a file or /dev/null instead"
    if problem is None:
        problem = _current_folder_problem()
    if problem is not None:
        print(f"minitf {_command_name(args)}: error: {problem}", file=sys.stderr)
        return 2
    try:
        with sigterm_exits():
            _quiet_import_time_loggers()
            status = args.run(args)
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's flush at exit
        return status
    except KeyboardInterrupt:  # Ctrl-C: one line, not the traceback of wherever the command was
        print(
            f"minitf {_command_name(args)}: interrupted; no output was put in place (outputs are written whole or not "
            "at all; a previous one is as it was)",
            file=sys.stderr,
        )
        return INTERRUPTED_STATUS
    except BrokenPipeError:  # as pip and black: the reader left, so the rest of the output goes nowhere, quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return BROKEN_PIPE_STATUS


def build_parser() -> ArgumentParser:
    """The full `minitf` parser (argparse only: building it imports nothing heavy)."""
    parser = ArgumentParser(
        prog="minitf",
        description="Small from-scratch transformers as Hugging Face models: train them on built-in tasks or your "
        "own data, use them, convert checkpoints of the original code, publish them.",
    )
    parser.add_argument("--version", action="version", version=f"minitf (hf-minitf) {__version__}")
    add_commands(parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=ArgumentParser))
    return parser


def _quiet_import_time_loggers() -> None:
    """Silence the import-time chatter of optional dependencies that a command's run imports."""
    for name in IMPORT_TIME_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)


if __name__ == "__main__":
    sys.exit(main())
