"""How much a model card's YAML metadata may hold once its aliases are expanded (an alias "bomb" of a few lines
stands for billions of values), checked before the YAML is loaded; `load_model_card` reads a card that way."""

from __future__ import annotations

import os

from hf_minitf.safety.files import UnsafeFileError

# A model card's metadata: at most this many YAML values once aliases are expanded, and this many characters.
# Real cards hold hundreds of values; an alias "bomb" of a few lines expands to billions.
CARD_METADATA_VALUES = 100_000


CARD_METADATA_CHARS = 2**20


def _expanded_size(node, sizes: dict, open_nodes: set) -> int:
    """How many values the YAML node stands for once every alias is expanded (each shared node counted once per
    use, computed once); a node that contains itself counts as unbounded."""
    import yaml

    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_nodes:
        return CARD_METADATA_VALUES + 1
    open_nodes.add(key)
    if isinstance(node, yaml.MappingNode):
        children = [child for pair in node.value for child in pair]
    elif isinstance(node, yaml.SequenceNode):
        children = node.value
    else:
        children = []
    total = 1
    for child in children:
        total += _expanded_size(child, sizes, open_nodes)
        if total > CARD_METADATA_VALUES:
            break
    open_nodes.discard(key)
    sizes[key] = total
    return total


def check_card_metadata(text: str, source: str | os.PathLike = "the model card") -> None:
    """Refuse a card whose YAML metadata would expand beyond `CARD_METADATA_VALUES` values through aliases
    (`&anchor` / `*anchor`, the "billion laughs" of YAML) or is longer than `CARD_METADATA_CHARS`: reading it
    would take the machine's memory. The YAML is composed into its node graph, where an alias is one shared node,
    so checking costs no more than the text's length."""
    import yaml
    from huggingface_hub.repocard import REGEX_YAML_BLOCK

    match = REGEX_YAML_BLOCK.search(text)
    if match is None:
        return
    block = match.group(2)
    if len(block) > CARD_METADATA_CHARS:
        raise UnsafeFileError(
            f"{source}: its YAML metadata is {len(block):,} characters long, more than the "
            f"{CARD_METADATA_CHARS:,} a model card needs; shorten it."
        )
    try:
        root = yaml.compose(block, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return  # a syntax error is for the card reader to report
    if root is not None and _expanded_size(root, {}, set()) > CARD_METADATA_VALUES:
        raise UnsafeFileError(
            f"{source}: its YAML metadata expands through aliases (&name / *name) to more than "
            f"{CARD_METADATA_VALUES:,} values, which would take this machine's memory; write the metadata out "
            "without aliases."
        )


class CardMetadataError(ValueError):
    """A model card whose YAML metadata (between its `---` lines) does not parse, or is not UTF-8."""


def load_model_card(path: str | os.PathLike, **options):
    """huggingface_hub's `ModelCard` of the local file `path`, once `check_card_metadata` found it safe to read;
    a CardMetadataError naming the file and the line where its metadata does not parse."""
    import yaml
    from huggingface_hub import ModelCard

    try:
        with open(path, encoding="utf-8", newline="") as file:
            text = file.read()
    except UnicodeDecodeError as error:
        raise CardMetadataError(
            f"{path} is not UTF-8 text ({error}); save the model card as UTF-8 or remove it"
        ) from None
    check_card_metadata(text, path)
    try:
        return ModelCard(text, **options)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = (
            f" (line {mark.line + 2}, column {mark.column + 1}: {error.problem})"
            if mark is not None and getattr(error, "problem", None)
            else ""
        )
        raise CardMetadataError(
            f"{path}: its YAML metadata does not parse{where}; fix the lines between its --- "
            "markers, or remove the card"
        ) from None


__all__ = ["CARD_METADATA_CHARS", "CARD_METADATA_VALUES", "CardMetadataError", "check_card_metadata", "load_model_card"]
