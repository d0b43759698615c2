"""The model families, one registry entry each: what every module asks about a family instead of keeping its own
table (the model classes, the command and serving route that use its folders, its card, its exports).

Light to import: class names are dotted strings, imported by `Family.load` when a module needs the class.
Adding a family is one entry here plus its config and model files in `hf_minitf/modeling/`, its presets and its
card template (see CONTRIBUTING.md).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODELING = "hf_minitf.modeling"


@dataclass(frozen=True)
class Family:
    """One MiniTF model family."""

    name: str
    """The family's name in commands and APIs: `minitf train NAME`."""
    model_type: str
    """The `model_type` of its config.json."""
    summary: str
    """What `minitf train NAME` trains."""
    config_class: str
    """The config class, as `module.Class` under hf_minitf.modeling."""
    auto_classes: Mapping[str, str]
    """transformers Auto class name -> model class (`module.Class` under hf_minitf.modeling); the first entry is
    the class a folder of the family holds."""
    command: str
    """The `minitf` command that uses its folders."""
    engine_kind: str
    """What an engine export of the family is to that command (a generator, an embedder, a translator)."""
    route: str
    """What `minitf serve` answers for a folder of the family."""
    card_template: str
    """Its model card template in model_cards/ (package data hf_minitf.model_cards)."""
    pipeline_tag: str
    """The Hub's pipeline tag of its folders."""
    training_data: str
    """What `minitf train NAME --data` reads."""
    default_columns: str
    """The columns `minitf train NAME` reads from jsonl/datasets data."""
    aliases: tuple[str, ...] = ()
    """Older names `minitf train` still accepts."""
    tokenizer_class: str | None = None
    """A tokenizer class of the package registered with AutoTokenizer (`module.Class`), if the family has one."""

    @property
    def model_class(self) -> str:
        """The class a folder of the family holds (its `architectures`), as a bare class name."""
        return next(iter(self.auto_classes.values())).rpartition(".")[2]

    @staticmethod
    def load(dotted: str) -> type[Any]:
        """The class `module.Class` of hf_minitf.modeling, imported."""
        module, _, name = dotted.rpartition(".")
        return getattr(importlib.import_module(f"{MODELING}.{module}"), name)


FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        Family(
            name="gpt",
            model_type="minitf_gpt",
            summary="a causal language model on a text",
            config_class="configuration_minitf_gpt.MiniTFGPTConfig",
            auto_classes={
                "AutoModelForCausalLM": "modeling_minitf_gpt.MiniTFGPTForCausalLM",
                "AutoModel": "modeling_minitf_gpt.MiniTFGPTModel",
            },
            command="generate",
            engine_kind="generator",
            route="POST /v1/completions or /v1/chat/completions",
            card_template="gpt.md",
            pipeline_tag="text-generation",
            training_data="a .txt file (the whole text), .jsonl/.json rows with a text column, a folder saved by "
            "datasets' save_to_disk, or a Hub dataset name",
            default_columns="text",
        ),
        Family(
            name="encoder",
            model_type="minitf_encoder",
            summary="an encoder as an embedding model (SentenceTransformer) on (anchor, positive) pairs, in-batch "
            "negatives",
            config_class="configuration_minitf_encoder.MiniTFEncoderConfig",
            auto_classes={
                "AutoModel": "modeling_minitf_encoder.MiniTFEncoderModel",
                "AutoModelForSequenceClassification": "modeling_minitf_encoder.MiniTFEncoderForSequenceClassification",
            },
            command="embed",
            engine_kind="embedder",
            route="POST /v1/embeddings",
            card_template="encoder.md",
            pipeline_tag="feature-extraction",
            training_data="a .tsv file (two tab-separated columns), .jsonl/.json rows, a folder saved by datasets' "
            "save_to_disk, or a Hub dataset name",
            default_columns="anchor,positive",
            aliases=("embedding",),
        ),
        Family(
            name="seq2seq",
            model_type="minitf_seq2seq",
            summary="a seq2seq translation model on (source, target) pairs",
            config_class="configuration_minitf_seq2seq.MiniTFSeq2SeqConfig",
            auto_classes={
                "AutoModelForSeq2SeqLM": "modeling_minitf_seq2seq.MiniTFSeq2SeqForConditionalGeneration",
                "AutoModel": "modeling_minitf_seq2seq.MiniTFSeq2SeqModel",
            },
            command="translate",
            engine_kind="translator",
            route="POST /v1/completions (the prompt is the text to translate)",
            card_template="seq2seq.md",
            pipeline_tag="translation",
            training_data="a .tsv file (source<TAB>target), .jsonl/.json rows, a folder saved by datasets' "
            "save_to_disk, or a Hub dataset name",
            default_columns="source,target",
            aliases=("translation",),
            tokenizer_class="tokenization_minitf_seq2seq.MiniTFSeq2SeqTokenizer",
        ),
    )
}
MODEL_TYPES: dict[str, Family] = {family.model_type: family for family in FAMILIES.values()}


def family_named(name: str) -> Family:
    """The family `name` (or an alias of it), or a ValueError listing the families."""
    for family in FAMILIES.values():
        if name == family.name or name in family.aliases:
            return family
    raise ValueError(f"unknown model family {name!r}; choose one of {', '.join(FAMILIES)}")


def family_of_model_type(model_type: object) -> Family | None:
    """The family whose config has `model_type`, or None for a model that is not MiniTF's."""
    return MODEL_TYPES.get(model_type) if isinstance(model_type, str) else None


def family_of_config(config: Mapping[str, Any], folder: Path | None = None) -> str | None:
    """The family of a saved model, by its config (a MiniTF model_type; else the architectures of another
    library's model: a causal LM, an encoder-decoder) or a SentenceTransformer `modules.json` in `folder`; None
    where nothing tells (its loader decides)."""
    family = family_of_model_type(config.get("model_type"))
    if family is not None:
        return family.name
    names = config.get("architectures")
    names = [name for name in names if isinstance(name, str)] if isinstance(names, list) else []
    auto_map = config.get("auto_map")
    auto_map = auto_map if isinstance(auto_map, dict) else {}
    if any(name.endswith(("ForCausalLM", "LMHeadModel")) for name in names) or "AutoModelForCausalLM" in auto_map:
        return "gpt"
    if config.get("is_encoder_decoder") is True or any(name.endswith("ForConditionalGeneration") for name in names):
        return "seq2seq"
    if folder is not None and (folder / "modules.json").is_file():
        return "encoder"
    return None


__all__ = ["FAMILIES", "MODEL_TYPES", "Family", "family_named", "family_of_config", "family_of_model_type"]
