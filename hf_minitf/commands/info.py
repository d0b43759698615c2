"""`minitf info [DIR]`: the versions of transformers and its companions (and whether transformers is one the package
is tested on), and a model folder or engine export described without loading its weights."""

from __future__ import annotations

import argparse
import json
import sys

from hf_minitf.catalog.packaging import VERSIONS_SHOWN, installed_version, version_warning
from hf_minitf.commands.common import add_model_folder, architectures, model_folder, read_config, reports_errors

HELP = "versions of transformers & co; a model folder: family, parameters, sizes, files, card metadata"
DESCRIPTION = (
    "Name the installed transformers, sentence-transformers, huggingface_hub and torch (with a warning when "
    "transformers is outside the tested range), and describe a saved model folder without loading its weights."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_folder(parser, "a model folder (without one: the versions alone)", optional=True)


def print_versions() -> None:
    """The versions line, and on standard error the warning when transformers is outside the tested range."""
    print("versions: " + ", ".join(f"{name} {installed_version(name) or 'not installed'}" for name in VERSIONS_SHOWN))
    warning = version_warning()
    if warning is not None:
        print(f"minitf info: warning: {warning}", file=sys.stderr)


@reports_errors("info")
def run(args: argparse.Namespace) -> int:
    """`minitf info [DIR]`: the versions, then what a model folder or engine export holds. Everything is read
    before anything is printed, so a malformed file gives its one-line error and no half report."""
    if args.model is None:
        print_versions()
        return 0
    from huggingface_hub.utils import logging as hub_logging

    from hf_minitf.cards import stored_parameters
    from hf_minitf.engines import export_info
    from hf_minitf.safety.card_metadata import load_model_card
    from hf_minitf.safety.files import links_leaving

    folder = model_folder(args.model)
    config = read_config(folder) if (folder / "config.json").is_file() else {}
    export = export_info(folder)
    paths = sorted(folder.glob("*.safetensors"))
    parameters = stored_parameters(paths) if paths else None
    card = folder / "README.md"
    hub_logging.get_logger("huggingface_hub.repocard").setLevel("ERROR")  # "no metadata block": the card's own say
    metadata = load_model_card(card).data.to_dict() if card.is_file() else None
    sizes = (
        "vocab_size",
        "src_vocab_size",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "max_position_embeddings",
        "position_embedding_type",
    )
    print_versions()
    print(f"folder: {folder}")
    if export is not None:
        details = ", ".join(f"{key} {export[key]}" for key in ("quantization", "source") if export.get(key))
        print(f"export: {export.get('engine')} {export.get('kind')}" + (f" ({details})" if details else ""))
    model_type = config.get("model_type") or (export or {}).get("family", "unknown")
    print(f"family: {model_type} ({', '.join(architectures(config) or ['?'])})")
    print(f"parameters: {parameters:,}" if parameters is not None else "parameters: unknown (no .safetensors file)")
    for key in sizes:
        value = config.get(key, (export or {}).get(key))
        if value is not None:
            print(f"{key}: {value}")
    leaving = links_leaving(folder)  # shown, not followed: a tampered folder may point at any file of the machine
    print("files:")
    for path in sorted(p for p in folder.rglob("*") if p.is_file() or p.is_symlink()):
        name = path.relative_to(folder).as_posix()
        if name in leaving:
            print(f"  {name} (a link to {leaving[name]}, outside the folder)")
        elif path.is_file():
            print(f"  {name} ({path.stat().st_size:,} bytes)")
    if metadata is not None:
        print("card metadata:")
        for key, value in metadata.items():
            print(f"  {key}: {json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value}")
    return 0
