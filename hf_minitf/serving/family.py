"""The family a model folder is served as, from its loaded config (no serving code imported: both engines ask)."""

from __future__ import annotations

from transformers import AutoModelForCausalLM

from hf_minitf.catalog.families import family_of_config


def model_family(config) -> str:
    """The family a loaded config is served as: its own (`family_of_config`), `gpt` for any other causal LM
    transformers knows, else `encoder` (served as a SentenceTransformer)."""
    family = family_of_config(config.to_dict())
    if family is None and type(config) in AutoModelForCausalLM._model_mapping:
        return "gpt"
    return family or "encoder"


__all__ = ["model_family"]
