"""The models `minitf serve` answers for: each folder under the name it was given, and transformers' model manager
limited to them (a request naming another model answers 404 instead of a download; generative models load with
the Auto classes where `transformers` has no attribute of their architecture's name)."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import transformers
from transformers import AutoConfig, AutoModelForCausalLM

from hf_minitf.catalog.exports import context_limit
from hf_minitf.catalog.families import FAMILIES
from hf_minitf.serving.api import model_manager as _model_manager
from hf_minitf.serving.api import utils as _utils
from hf_minitf.serving.checks import chars_per_token
from hf_minitf.serving.errors import RequestError
from hf_minitf.serving.family import model_family
from hf_minitf.serving.templates import guard_chat_template

# The routes each family answers, for the error of a request sent to another one.
ROUTES = {family.name: family.route for family in FAMILIES.values()}


@dataclass
class ServedModel:
    """One model folder (or Hub repo id) the server answers for, under the name it was given."""

    name: str
    key: str
    family: str
    config: Any
    model: Any = None
    tokenizer: Any = None

    @property
    def context_limit(self) -> int | None:
        """Most tokens (prompt and generated) a generative model reads, or None where it has no such limit: a GPT's
        as `minitf generate` counts it (`catalog.exports.context_limit`), a translator's its position table."""
        if self.family == "gpt":
            return context_limit(self.config)
        return getattr(self.config, "max_position_embeddings", None)

    @functools.cached_property
    def chars_per_token(self) -> int:
        """Most characters one token of the tokenizer stands for (`serving.checks.chars_per_token`)."""
        return chars_per_token(self.tokenizer)


def _is_local(name: str) -> bool:
    return os.path.exists(name)


class ServedModelManager(_model_manager.ModelManager):
    """transformers' model manager for the given models only: a request naming another model answers 404 (instead of
    a download), a request sent to a route its family does not answer 400; generative models load with the Auto
    classes where `transformers` has no attribute of their architecture's name."""

    def __init__(self, served: Sequence[ServedModel], **options) -> None:
        super().__init__(model_timeout=-1, **options)
        self.served = {model.key: model for model in served}
        for model in served:
            if model.family == "gpt":
                model.model, model.tokenizer = self.load_model_and_processor(model.key)

    def find(self, name: str | None) -> ServedModel:
        """The served model a request names (any served model when the request names none and one is served)."""
        if name is None:
            if len(self.served) == 1:
                return next(iter(self.served.values()))
            raise RequestError(400, f"Name the model: one of {self._names()}.", param="model")
        if not isinstance(name, str):
            raise RequestError(400, f"model must be a string, one of {self._names()}.", param="model")
        key = self.process_model_name(name)
        if key in self.served:
            return self.served[key]
        if _is_local(name):
            for served in self.served.values():
                if _is_local(served.key) and Path(served.key).resolve() == Path(name).resolve():
                    return served
        raise self._not_served(name)

    def find_for(self, body: dict, families: Sequence[str], route: str) -> ServedModel:
        """The served model a request names, checked to be of one of `families`; the request's `model` is set to
        its name."""
        served = self.find(body.get("model"))
        if served.family not in families:
            raise self._wrong_route(served, route)
        body["model"] = served.name
        return served

    def _names(self) -> str:
        return ", ".join(repr(model.name) for model in self.served.values())

    def _not_served(self, name: str) -> RequestError:
        return RequestError(
            404,
            f"The model {name!r} is not served here; this server serves {self._names()}.",
            param="model",
            code="model_not_found",
        )

    @staticmethod
    def _wrong_route(served: ServedModel, route: str) -> RequestError:
        return RequestError(
            400,
            f"{served.name!r} is a {served.family} model, which {route} does not serve; send "
            f"its requests to {ROUTES[served.family]}.",
            param="model",
        )

    def load_model_and_processor(self, model_id_and_revision: str, *args, **kwargs):
        """transformers' loading (cached after the start), for the served GPTs only: every generation route of
        transformers' app loads its model through here."""
        served = self.served.get(model_id_and_revision)
        if served is None:
            raise self._not_served(model_id_and_revision)
        if served.family != "gpt":
            raise self._wrong_route(served, "this route")
        model, processor = super().load_model_and_processor(model_id_and_revision, *args, **kwargs)
        guard_chat_template(processor)  # transformers' handlers render chat templates on the event loop
        return model, processor

    def _load_model(
        self,
        model_id_and_revision: str,
        tqdm_class: type | None = None,
        progress_callback=None,
        gguf_file: str | None = None,
    ):
        """transformers' loader, or AutoModelForCausalLM for an architecture transformers does not export."""
        model_id, revision = _utils.split_revision(model_id_and_revision)
        config = AutoConfig.from_pretrained(model_id, revision=revision, trust_remote_code=self.trust_remote_code)
        if gguf_file is not None or hasattr(transformers, (config.architectures or [""])[0]):
            return super()._load_model(
                model_id_and_revision, tqdm_class=tqdm_class, progress_callback=progress_callback, gguf_file=gguf_file
            )
        options = dict(
            revision=revision,
            attn_implementation=self.attn_implementation,
            dtype=self.dtype,
            device_map=self.device,
            trust_remote_code=self.trust_remote_code,
            tqdm_class=tqdm_class,
        )
        quantization = self.get_quantization_config()
        if quantization is not None:
            options["quantization_config"] = quantization
        return AutoModelForCausalLM.from_pretrained(model_id, **options)

    def list_models(self, cache_dir: str | None = None) -> list[dict]:
        """The served models, all loaded (`status` is transformers' addition to OpenAI's model object)."""
        return [
            {
                "id": model.name,
                "object": "model",
                "created": 0,
                "owned_by": _utils.model_owner(model.name),
                "status": {"value": "loaded"},
            }
            for model in self.served.values()
        ]


__all__ = ["ROUTES", "ServedModel", "ServedModelManager", "model_family"]
