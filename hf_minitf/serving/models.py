"""The models `minitf serve` answers for: each folder (or Hub repo id) under the name it was given, loaded once at
start-up with the public Auto classes (or SentenceTransformer, or the engine of an export folder), and the lookup of
the model a request names (`ServedModels`)."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hf_minitf.catalog.engines import AUTO, CACHED_ENGINES, TORCH
from hf_minitf.catalog.exports import context_limit
from hf_minitf.catalog.families import FAMILIES, MODEL_TYPES
from hf_minitf.serving.checks import chars_per_token
from hf_minitf.serving.engine_cache import EngineUnavailable, choose_engine
from hf_minitf.serving.errors import RequestError
from hf_minitf.serving.family import model_family, served_config

# The routes each family answers, for the error of a request sent to another one.
ROUTES = {family.name: family.route for family in FAMILIES.values()}


@dataclass
class ServedModel:
    """One model the server answers for, under the name it was given: its family, tokenizer and what runs it
    (`model`: a transformers model, a SentenceTransformer, or the runner of an export folder, `engine` naming which)."""

    name: str
    family: str
    model: Any
    tokenizer: Any
    engine: str = "transformers"
    config: Any = None
    runner: Any = None
    """An engine export's runner beside the transformers model (`serving.engine_cache`): it answers the requests it
    gives the model's outputs for (greedy, nothing of their own), the model the others."""
    why: str = ""
    """Which engine runs the model and why, for the start-up line."""

    @property
    def context_limit(self) -> int | None:
        """Most tokens (prompt and generated) a generative model reads, or None where it has no such limit: a GPT's
        as `minitf generate` counts it (`catalog.exports.context_limit`), a translator's its position table."""
        if self.engine != "transformers":
            if self.family == "gpt":
                return self.model.position_limit
            return getattr(self.model, "max_positions", None) or getattr(self.model, "default_length", None)
        if self.family == "gpt":
            return context_limit(self.config)
        return getattr(self.config, "max_position_embeddings", None)

    @property
    def vocab_size(self) -> int:
        """The ids a logit bias may name."""
        if self.config is not None and getattr(self.config, "vocab_size", None):
            return self.config.vocab_size
        return len(self.tokenizer)

    @functools.cached_property
    def chars_per_token(self) -> int:
        """Most characters one token of the tokenizer stands for (`serving.checks.chars_per_token`)."""
        return chars_per_token(self.tokenizer)


def _device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_model(
    source: str, dtype: str = "auto", device: str = "auto", trust_remote_code: bool = False, engine: str = AUTO
) -> ServedModel:
    """Load one folder or Hub repo id to serve: a MiniTF or native folder in transformers (an encoder as a
    SentenceTransformer), with the runner of a verified engine export of a MiniTF folder beside it as `engine`
    chooses (`serving.engine_cache.choose_engine`); an ONNX or CTranslate2 export folder in its engine."""
    from hf_minitf.engines import export_info, load_engine

    export = export_info(source) if Path(source).is_dir() else None
    if export is not None:
        exported = MODEL_TYPES[export["family"]]
        runner = load_engine(source, exported.engine_kind)  # type: ignore[call-overload]
        own = next((name for name, cached in CACHED_ENGINES.items() if cached.runtime == export["engine"]), None)
        if engine not in (AUTO, TORCH, own):  # torch: no export is made of the MiniTF folders served beside it
            raise EngineUnavailable(
                f"{source} is {export['engine']} export and runs in it; --engine {engine} needs the MiniTF folder it "
                f"was exported from (or leave --engine out)"
            )
        why = f"{export['engine']} (an export folder)"
        return ServedModel(source, exported.name, runner, runner.tokenizer, engine=export["engine"], why=why)
    choice = choose_engine(source, engine, device=device, dtype=dtype)
    served = _load_in_torch(source, dtype, device, trust_remote_code)
    served.runner, served.why = choice.runner, choice.reason
    return served


def _load_in_torch(source: str, dtype: str, device: str, trust_remote_code: bool) -> ServedModel:
    """A MiniTF or native folder (or Hub repo id) in transformers; an encoder as a SentenceTransformer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    config = served_config(source, trust_remote_code)
    family = model_family(config)
    torch_dtype = None if dtype == "auto" else getattr(torch, dtype)
    if family == "encoder":
        from sentence_transformers import SentenceTransformer  # heavy: imported when an encoder is served

        encoder = SentenceTransformer(
            source,
            device=_device(device),
            trust_remote_code=trust_remote_code,
            model_kwargs={"dtype": torch_dtype} if torch_dtype else None,
        )
        return ServedModel(source, family, encoder, encoder.tokenizer, config=config)
    auto = AutoModelForCausalLM if family == "gpt" else AutoModelForSeq2SeqLM
    loaded = auto.from_pretrained(source, dtype=torch_dtype or "auto", trust_remote_code=trust_remote_code)
    model: Any = loaded.to(_device(device)).eval()  # type: ignore[arg-type]  # transformers' partial types
    tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    return ServedModel(source, family, model, tokenizer, config=config)


def _same_place(name: str, served: str) -> bool:
    return os.path.exists(name) and os.path.exists(served) and Path(name).resolve() == Path(served).resolve()


class ServedModels:
    """The served models by name: a request naming another model answers 404 (never a download), a request sent
    to a route its model's family does not answer 400 naming the route that does."""

    def __init__(self, models: Sequence[ServedModel]) -> None:
        self.models = {model.name: model for model in models}

    def find(self, name: Any) -> ServedModel:
        """The served model a request names (the only one, when it names none and one is served)."""
        if name is None:
            if len(self.models) == 1:
                return next(iter(self.models.values()))
            raise RequestError(400, f"Name the model: one of {self.names()}.", param="model")
        if not isinstance(name, str):
            raise RequestError(400, f"model must be a string, one of {self.names()}.", param="model")
        if name in self.models:
            return self.models[name]
        for served in self.models.values():
            if _same_place(name, served.name):
                return served
        raise RequestError(
            404,
            f"The model {name!r} is not served here; this server serves {self.names()}.",
            param="model",
            code="model_not_found",
        )

    def find_for(self, body: dict, families: Sequence[str], route: str) -> ServedModel:
        """The served model a request names, checked to be of one of `families`."""
        served = self.find(body.get("model"))
        if served.family not in families:
            raise RequestError(
                400,
                f"{served.name!r} is a {served.family} model, which {route} does not serve; send its requests to "
                f"{ROUTES[served.family]}.",
                param="model",
            )
        return served

    def names(self) -> str:
        return ", ".join(repr(name) for name in self.models)

    def listing(self) -> dict:
        """`GET /v1/models`: OpenAI's list of model objects."""
        return {
            "object": "list",
            "data": [
                {"id": name, "object": "model", "created": 0, "owned_by": model_owner(name)} for name in self.models
            ],
        }


def model_owner(name: str) -> str:
    """A model's owner as OpenAI-compatible servers name it: "local" for a folder, else the Hub organization."""
    if os.path.exists(name):
        return "local"
    return name.split("/")[0] if "/" in name else ""


__all__ = ["ROUTES", "ServedModel", "ServedModels", "load_model", "model_owner"]
