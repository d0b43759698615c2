"""The config of a folder to serve and the family it is served as (no serving code imported: both engines ask)."""

from __future__ import annotations

from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig

from hf_minitf.catalog.families import family_of_config


def model_family(config) -> str:
    """The family a loaded config is served as: its own (`family_of_config`), `gpt` for any other causal LM
    transformers knows, else `encoder` (served as a SentenceTransformer)."""
    family = family_of_config(config.to_dict())
    if family is None and type(config) in AutoModelForCausalLM._model_mapping:
        return "gpt"
    return family or "encoder"


def served_config(source: str, trust_remote_code: bool = False) -> PretrainedConfig:
    """The config of `source`, a folder or Hub repo id, or a ValueError saying it cannot be served and why."""
    try:
        return AutoConfig.from_pretrained(source, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as error:
        raise ValueError(
            f"cannot serve {source}: not a model folder, or a Hub repo id that can be read "
            f"({str(error).strip().splitlines()[0]})"
        ) from error


__all__ = ["model_family", "served_config"]
