"""`minitf serve`: model folders behind transformers' own OpenAI-compatible server (`transformers serve`).

The app is the one `transformers.cli.serving.build_server` builds: its routes, request and response schemas,
streaming, continuous batching, `/v1/models` and `/health`. This module adds only what that server lacks for
these folders, by subclassing its parts (nothing in transformers is patched):

- `ServedModelManager`: transformers' model manager limited to the folders given to `minitf serve`, loading
  classes registered with the Auto classes (transformers' own resolves `getattr(transformers,
  config.architectures[0])`, which no registered class is);
- request checks before generation (the model name, `max_tokens` against the context, an empty prompt, chat
  messages for a tokenizer without a chat template, sampling numbers in OpenAI's ranges, fields the server would
  silently ignore), answered with HTTP 4xx instead of a 500 from inside `generate()`;
- sampling as asked: `temperature` > 0 samples (transformers' server keeps the model's `do_sample=False`);
- `/v1/completions` for translation folders (the prompt is the source text) and `POST /v1/embeddings` for
  embedding folders (`serving_embeddings`);
- errors in OpenAI's shape (`{"error": {"message", "type", "param", "code"}}`) and an optional API key that every
  route requires.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

API_KEY_VARIABLE = "MINITF_API_KEY"
# The routes each family answers, for the error of a request sent to another one.
ROUTES = {"gpt": "POST /v1/completions or /v1/chat/completions", "encoder": "POST /v1/embeddings",
          "seq2seq": "POST /v1/completions (the prompt is the text to translate)"}
# transformers' `generate` default for a request without max_tokens (serving.utils.BaseHandler).
SERVER_DEFAULT_NEW_TOKENS = 1024
# The continuous-batching KV cache on a CPU: transformers sizes it from the free memory of the device, which on a
# CPU is the whole RAM (tens of GB allocated, a minute spent). This many pages of 256 tokens is plenty for small models.
CPU_CB_NUM_BLOCKS = 32


class ServingUnavailable(ImportError):
    """transformers' serving code, or one of its packages (fastapi, uvicorn, openai), is missing."""


def _serving_api():
    """transformers' serving modules; a clear error where this transformers has none or its extras are missing."""
    try:
        from transformers.cli.serving import chat_completion, completion, model_manager, response, server, utils
        from transformers.cli.serving.systemone import SystemOneHandler
        from transformers.cli.serving.transcription import TranscriptionHandler
        import fastapi  # noqa: F401
        import openai  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as error:
        raise ServingUnavailable(
            f"minitf serve runs on transformers' serving code (`transformers serve`), which this installation cannot "
            f"import ({error}); install `pip install 'hf-minitf[serve]'` with transformers {transformers.__version__}"
            " or a newer 5.x."
        ) from error
    needed = {server: ("build_server",), model_manager: ("ModelManager",), utils: ("GenerationState", "Modality"),
              completion: ("CompletionHandler",), chat_completion: ("ChatCompletionHandler",),
              response: ("ResponseHandler",)}
    missing = [f"{module.__name__}.{name}" for module, names in needed.items() for name in names
               if not hasattr(module, name)]
    if missing:
        raise ServingUnavailable(
            f"transformers {transformers.__version__}'s serving code lacks {', '.join(missing)}, which minitf serve "
            "builds on (written against transformers 5.24); use transformers 5.24 or newer."
        )
    return server, model_manager, utils, completion, chat_completion, response, SystemOneHandler, TranscriptionHandler


(_server, _model_manager, _utils, _completion, _chat_completion, _response, SystemOneHandler,
 TranscriptionHandler) = _serving_api()

from fastapi import FastAPI, Request  # noqa: E402  (after the check above, which explains a missing fastapi)
from fastapi.exceptions import RequestValidationError  # noqa: E402
from fastapi.responses import JSONResponse, StreamingResponse  # noqa: E402
from openai.types import Completion, CompletionChoice, CompletionUsage  # noqa: E402
from starlette.exceptions import HTTPException  # noqa: E402

from .engines import export_info  # noqa: E402
from .serving_errors import RequestError, error_body  # noqa: E402


def _install_openai_errors(app: FastAPI) -> None:
    """Answer every error in OpenAI's shape: ours, transformers' HTTPExceptions (`{"detail": ...}` there), a body
    that is not a JSON object (FastAPI's 422 list of validation errors), and unexpected failures (500)."""

    @app.exception_handler(RequestError)
    async def request_error(_request: Request, error: RequestError) -> JSONResponse:
        return JSONResponse(error_body(error.message, error.status, error.param, error.code), status_code=error.status)

    @app.exception_handler(HTTPException)
    async def http_error(_request: Request, error: HTTPException) -> JSONResponse:
        return JSONResponse(error_body(str(error.detail), error.status_code), status_code=error.status_code,
                            headers=getattr(error, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def invalid_body(_request: Request, error: RequestValidationError) -> JSONResponse:
        kinds = {problem.get("type") for problem in error.errors()}
        message = ("The request body is not valid JSON; send a JSON object (Content-Type: application/json)."
                   if "json_invalid" in kinds else "The request body must be a JSON object of the request's fields.")
        return JSONResponse(error_body(message, 400, code="invalid_json"), status_code=400)

    @app.exception_handler(Exception)
    async def server_error(_request: Request, error: Exception) -> JSONResponse:
        return JSONResponse(error_body(f"{type(error).__name__}: {error}", 500), status_code=500)


def _require_api_key(app: FastAPI, api_key: str) -> None:
    """Every route answers 401 unless the request carries `Authorization: Bearer <api_key>`."""
    expected = api_key.encode()

    @app.middleware("http")
    async def check_api_key(request: Request, call_next):
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), expected):
            message = ("Missing or incorrect API key: send the header `Authorization: Bearer <key>` with the key "
                       "given to minitf serve (--api-key or " + API_KEY_VARIABLE + ").")
            return JSONResponse(error_body(message, 401, code="invalid_api_key"), status_code=401,
                                headers={"WWW-Authenticate": "Bearer"})
        return await call_next(request)


# ------------------------------------------------------------------------------------------------ models
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
        """Most tokens (prompt and generated) a generative model reads, or None where it has no such limit: a MiniTF
        GPT with `context_overflow="crop"` slides its window, one with rotary positions has no position table."""
        config = self.config
        if getattr(config, "context_overflow", None) == "crop" or (
                config.model_type == "minitf_gpt" and config.position_embedding_type != "learned"):
            return None
        return getattr(config, "max_position_embeddings", None)


def model_family(config) -> str:
    """`gpt` for a causal LM (registered, native or remote code), `seq2seq` for an encoder-decoder, else `encoder`
    (served as a SentenceTransformer)."""
    if getattr(config, "is_encoder_decoder", False):
        return "seq2seq"
    if type(config) in AutoModelForCausalLM._model_mapping or "AutoModelForCausalLM" in (
            getattr(config, "auto_map", None) or {}):
        return "gpt"
    return "encoder"


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
        return RequestError(404, f"The model {name!r} is not served here; this server serves {self._names()}.",
                            param="model", code="model_not_found")

    @staticmethod
    def _wrong_route(served: ServedModel, route: str) -> RequestError:
        return RequestError(400, f"{served.name!r} is a {served.family} model, which {route} does not serve; send "
                                 f"its requests to {ROUTES[served.family]}.", param="model")

    def load_model_and_processor(self, model_id_and_revision: str, *args, **kwargs):
        """transformers' loading (cached after the start), for the served GPTs only: every generation route of
        transformers' app loads its model through here."""
        served = self.served.get(model_id_and_revision)
        if served is None:
            raise self._not_served(model_id_and_revision)
        if served.family != "gpt":
            raise self._wrong_route(served, "this route")
        return super().load_model_and_processor(model_id_and_revision, *args, **kwargs)

    def _load_model(self, model_id_and_revision: str, tqdm_class: type | None = None, progress_callback=None,
                    gguf_file: str | None = None):
        """transformers' loader, or AutoModelForCausalLM for an architecture transformers does not export."""
        model_id, revision = _utils.split_revision(model_id_and_revision)
        config = AutoConfig.from_pretrained(model_id, revision=revision, trust_remote_code=self.trust_remote_code)
        if gguf_file is not None or hasattr(transformers, (config.architectures or [""])[0]):
            return super()._load_model(model_id_and_revision, tqdm_class=tqdm_class,
                                       progress_callback=progress_callback, gguf_file=gguf_file)
        options = dict(revision=revision, attn_implementation=self.attn_implementation, dtype=self.dtype,
                       device_map=self.device, trust_remote_code=self.trust_remote_code, tqdm_class=tqdm_class)
        quantization = self.get_quantization_config()
        if quantization is not None:
            options["quantization_config"] = quantization
        return AutoModelForCausalLM.from_pretrained(model_id, **options)

    def list_models(self, cache_dir: str | None = None) -> list[dict]:
        """The served models, all loaded (`status` is transformers' addition to OpenAI's model object)."""
        return [{"id": model.name, "object": "model", "created": 0, "owned_by": _utils.model_owner(model.name),
                 "status": {"value": "loaded"}} for model in self.served.values()]


# ------------------------------------------------------------------------------------------------ requests
def _positive_int(body: dict, field: str) -> int | None:
    value = body.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RequestError(400, f"{field} must be a positive integer, got {value!r}.", param=field)
    return value


def check_new_tokens(body: dict, fields: Sequence[str], prompt_length: int, limit: int | None, name: str,
                     prompt_field: str) -> int | None:
    """Check the request's token budget (the first of `fields` it sets) against the model's context; without one,
    set `max_tokens` to the room left where transformers' default would pass the context. Returns the budget."""
    field = next((field for field in fields if body.get(field) is not None), None)
    requested = _positive_int(body, field) if field else None
    if limit is None:
        return requested
    room = limit - prompt_length
    if room < 1:
        raise RequestError(400, f"The prompt is {prompt_length} tokens; {name!r} reads at most {limit} tokens, which "
                                "leaves no room to generate. Shorten the prompt.", param=prompt_field,
                           code="context_length_exceeded")
    if requested is not None and requested > room:
        raise RequestError(400, f"{field}={requested} new tokens after the prompt's {prompt_length} pass the context of "
                                f"{name!r} ({limit} tokens); ask for at most {room}.", param=field,
                           code="context_length_exceeded")
    if requested is None:
        body["max_tokens"] = min(room, SERVER_DEFAULT_NEW_TOKENS)
        return body["max_tokens"]
    return requested


# OpenAI's ranges for the numbers a request may set; the bounds are included, except top_p's 0.
SAMPLING_RANGES = {"temperature": (0.0, 2.0), "top_p": (0.0, 1.0), "frequency_penalty": (-2.0, 2.0)}
# Fields of OpenAI's schemas that transformers' server accepts and then ignores, by the value that asks for
# nothing: any other value would be answered as if it had not been sent.
IGNORED_FIELDS = {"n": 1, "best_of": 1, "logprobs": None, "top_logprobs": None, "echo": False, "presence_penalty": 0}
STOP_STRINGS = 4  # OpenAI's limit
# Below this temperature sampling is greedy decoding to float precision, and dividing the logits by it overflows
# float32 (1e-45 turns them into inf and generate() fails): such requests decode greedily.
GREEDY_BELOW_TEMPERATURE = 1e-4


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_sampling(body: dict) -> None:
    """Refuse sampling fields that are out of OpenAI's ranges, not finite, of the wrong type, or that the server
    would silently ignore, and transformers' free-form `generation_config` (any generate() argument, beam counts
    included). Each error names the field, its value and what is allowed."""
    if body.get("generation_config") is not None:
        raise RequestError(400, "generation_config is not accepted: set temperature, top_p, frequency_penalty, "
                                "max_tokens, stop and seed instead.", param="generation_config")
    for field, (low, high) in SAMPLING_RANGES.items():
        value = body.get(field)
        if value is None:
            continue
        if not _is_number(value) or not ((value > low if field == "top_p" else value >= low) and value <= high):
            interval = f"({low:g}, {high:g}]" if field == "top_p" else f"[{low:g}, {high:g}]"
            raise RequestError(400, f"{field} must be a number in {interval}, got {value!r}.", param=field)
    seed = body.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**64):
        raise RequestError(400, f"seed must be an integer in [0, 2**64), got {seed!r}.", param="seed")
    for field, default in IGNORED_FIELDS.items():
        value = body.get(field)
        if value is not None and value != default and not (default is None and value is False):
            raise RequestError(400, f"{field}={value!r} is not supported by this server (it answers as if "
                                    f"{field}={default!r}); leave it out.", param=field)
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else stop
    if stop is not None and (not isinstance(stops, list) or not 1 <= len(stops) <= STOP_STRINGS
                             or not all(isinstance(text, str) and text for text in stops)):
        raise RequestError(400, f"stop must be a non-empty text or a list of 1 to {STOP_STRINGS} of them, got "
                                f"{stop!r}.", param="stop")


def check_logit_bias(body: dict, vocab_size: int) -> None:
    """`logit_bias` must map token ids of the model's vocabulary to finite biases in [-100, 100] (OpenAI's)."""
    bias = body.get("logit_bias")
    if bias is None:
        return
    if not isinstance(bias, dict):
        raise RequestError(400, f"logit_bias must be an object of token id -> bias, got {bias!r}.", param="logit_bias")
    for key, value in bias.items():
        if not (isinstance(key, str) and key.isdigit() and int(key) < vocab_size):
            raise RequestError(400, f"logit_bias key {key!r} is not a token id of the model (0 to {vocab_size - 1}).",
                               param="logit_bias")
        if not _is_number(value) or not -100 <= value <= 100:
            raise RequestError(400, f"logit_bias[{key!r}] must be a number in [-100, 100], got {value!r}.",
                               param="logit_bias")


class _SamplingAsAsked:
    """What a request asks of decoding holds: `temperature` > 0 (or `top_p` < 1) samples, 0 (or a temperature
    below GREEDY_BELOW_TEMPERATURE) decodes greedily.
    transformers' server sets the temperature but keeps the model's `do_sample` (False for MiniTF folders), so a
    request asking for sampling would silently be answered greedily. Without either field the model's
    generation config decides."""

    def _build_generation_config(self, body: dict, model_generation_config, use_cb: bool = False):
        config = super()._build_generation_config(body, model_generation_config, use_cb=use_cb)
        temperature, top_p = body.get("temperature"), body.get("top_p")
        if temperature is not None:
            config.do_sample = temperature >= GREEDY_BELOW_TEMPERATURE
        elif top_p is not None and top_p < 1:
            config.do_sample = True
        return config


def _text_prompt(body: dict) -> str:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = body["prompt"] = prompt[0]
    if not isinstance(prompt, str):
        raise RequestError(400, "prompt must be one text (a string).", param="prompt")
    if not prompt:
        raise RequestError(400, "prompt is empty; give the text to continue (or to translate).", param="prompt")
    return prompt


def _check_chat_template(served: ServedModel, route: str) -> None:
    if getattr(served.tokenizer, "chat_template", None) is None:
        raise RequestError(400, f"{served.name!r} has no chat template (its tokenizer defines no chat format), so "
                                f"{route} cannot turn messages into a prompt. Send the text to continue to POST "
                                "/v1/completions instead.", param="messages", code="no_chat_template")


class ChatCompletions(_SamplingAsAsked, _chat_completion.ChatCompletionHandler):
    """transformers' /v1/chat/completions after the served model's checks: it has a chat template, the messages
    make a prompt, and the token budget fits its context."""

    async def handle_request(self, body: dict, request_id: str):
        self._validate_request(body)
        check_sampling(body)
        served = self.model_manager.find_for(body, ("gpt",), "/v1/chat/completions")
        check_logit_bias(body, served.config.vocab_size)
        _check_chat_template(served, "/v1/chat/completions")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise RequestError(400, "messages must be a non-empty list of {role, content} objects.", param="messages")
        try:
            prompt = served.tokenizer.apply_chat_template(
                self.get_processor_inputs_from_messages(messages, _utils.Modality.LLM), add_generation_prompt=True,
                tokenize=True, return_dict=True, **{**self.chat_template_kwargs, **body.get("chat_template_kwargs", {})})
        except (KeyError, TypeError, ValueError, jinja2.TemplateError) as error:
            raise RequestError(400, f"The messages do not fit {served.name!r}'s chat template: {error}",
                               param="messages") from error
        check_new_tokens(body, ("max_completion_tokens", "max_tokens"), len(prompt["input_ids"]),
                         served.context_limit, served.name, "messages")
        return await super().handle_request(body, request_id)


class Responses(_SamplingAsAsked, _response.ResponseHandler):
    """transformers' /v1/responses for the served GPTs that have a chat template."""

    async def handle_request(self, body: dict, request_id: str):
        self._validate_request(body)
        check_sampling(body)
        served = self.model_manager.find_for(body, ("gpt",), "/v1/responses")
        _check_chat_template(served, "/v1/responses")
        _positive_int(body, "max_output_tokens")
        return await super().handle_request(body, request_id)


class Completions(_SamplingAsAsked, _completion.CompletionHandler):
    """transformers' /v1/completions after the served model's checks; for a translation model the prompt is the
    source text and the completion its translation."""

    async def handle_request(self, body: dict, request_id: str):
        self._validate_request(body)
        check_sampling(body)
        if body.get("logit_bias"):
            raise RequestError(400, "logit_bias is not supported on /v1/completions (it would be ignored); use "
                                    "/v1/chat/completions or leave it out.", param="logit_bias")
        served = self.model_manager.find_for(body, ("gpt", "seq2seq"), "/v1/completions")
        prompt = _text_prompt(body)
        if served.family == "seq2seq":
            return await self._translate(body, request_id, served, prompt)
        prompt_length = len(served.tokenizer(prompt)["input_ids"])
        check_new_tokens(body, ("max_tokens",), prompt_length, served.context_limit, served.name, "prompt")
        return await super().handle_request(body, request_id)

    async def _translate(self, body: dict, request_id: str, served: ServedModel, prompt: str):
        """Translate the prompt with `generate()` on the model's inference thread (as transformers runs a GPT's)."""
        model, tokenizer = served.model, served.tokenizer
        inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
        length, limit = inputs["input_ids"].shape[1], model.config.max_position_embeddings
        if length > limit:
            raise RequestError(400, f"The text to translate is {length} tokens; {served.name!r} reads at most "
                                    f"{limit}. Split it.", param="prompt", code="context_length_exceeded")
        room = limit - 1  # the decoder's positions, its start token included
        requested = _positive_int(body, "max_tokens")
        if requested is not None and requested > room:
            raise RequestError(400, f"max_tokens={requested} passes {served.name!r}'s {limit} decoder positions; ask "
                                    f"for at most {room} tokens.", param="max_tokens", code="context_length_exceeded")
        config = self._build_generation_config(body, model.generation_config)
        config.max_new_tokens = requested or room
        manager = self.generation_state.get_manager(served.key)
        sequences = await manager.async_submit(model.generate, **inputs, generation_config=config, tokenizer=tokenizer)
        generated = sequences[0, 1:].tolist()  # after the decoder start token
        eos = model.generation_config.eos_token_id
        stopped = eos in generated
        generated = generated[:generated.index(eos) + 1] if stopped else generated
        text = tokenizer.decode(generated, skip_special_tokens=True)
        usage = CompletionUsage(prompt_tokens=length, completion_tokens=len(generated),
                                total_tokens=length + len(generated))
        finish_reason = "stop" if stopped else "length"
        if body.get("stream"):
            async def chunks():
                yield self._build_chunk_sse(request_id, served.name, text=text)
                yield self._build_chunk_sse(request_id, served.name, finish_reason=finish_reason, usage=usage)

            return StreamingResponse(chunks(), media_type="text/event-stream")
        completion = Completion(
            id=request_id, created=int(time.time()), model=served.name, object="text_completion", usage=usage,
            choices=[CompletionChoice(text=text, index=0, logprobs=None, finish_reason=finish_reason)],
        )
        return JSONResponse(completion.model_dump(exclude_none=True))


# ------------------------------------------------------------------------------------------------ the app
def _device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_served_models(sources: Sequence[str], dtype: str = "auto", device: str = "auto",
                       trust_remote_code: bool = False) -> list[ServedModel]:
    """Each source's family and, for the families transformers' manager does not load, the model itself."""
    import torch

    served, keys = [], set()
    for source in sources:
        source = str(source)
        key = _model_manager.ModelManager.process_model_name(source)
        if key in keys:
            raise ValueError(f"{source} is given twice; give each model once.")
        keys.add(key)
        export = export_info(source) if Path(source).is_dir() else None
        if export is not None and export.get("engine") == "ctranslate2":  # an ONNX export is a whole ST folder too
            raise ValueError(f"cannot serve {source}: it is an engine export ({export.get('engine')} "
                             f"{export.get('kind')}), which minitf generate, translate or embed run; serve the MiniTF "
                             f"folder it was exported from ({export.get('source', 'the one given to minitf export')})")
        try:
            config = AutoConfig.from_pretrained(source, trust_remote_code=trust_remote_code)
        except (OSError, ValueError) as error:
            raise ValueError(f"cannot serve {source}: not a model folder, or a Hub repo id that can be read "
                             f"({str(error).strip().splitlines()[0]})") from error
        model = ServedModel(name=source, key=key, family=model_family(config), config=config)
        torch_dtype = None if dtype == "auto" else getattr(torch, dtype)
        if model.family == "encoder":
            from sentence_transformers import SentenceTransformer  # heavy: imported when an encoder is served

            model.model = SentenceTransformer(source, device=_device(device), trust_remote_code=trust_remote_code,
                                              model_kwargs={"dtype": torch_dtype} if torch_dtype else None)
            model.tokenizer = model.model.tokenizer
        elif model.family == "seq2seq":
            model.model = AutoModelForSeq2SeqLM.from_pretrained(
                source, dtype=torch_dtype or "auto", trust_remote_code=trust_remote_code).to(_device(device)).eval()
            model.tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
        served.append(model)
    return served


def build_app(sources: Sequence[str], *, dtype: str = "auto", device: str = "auto", continuous_batching: bool = False,
              cb_num_blocks: int | None = None, cb_max_batch_tokens: int | None = None, api_key: str | None = None,
              trust_remote_code: bool = False) -> FastAPI:
    """The server of `minitf serve`: transformers' app (as `transformers serve` builds it) for `sources`, with
    /v1/embeddings, OpenAI-shaped errors and, with `api_key`, a key every route requires."""
    from transformers import ContinuousBatchingConfig

    from .serving_embeddings import add_embeddings_route

    if not sources:
        raise ValueError("give at least one model folder or Hub repo id to serve")
    served = load_served_models(sources, dtype=dtype, device=device, trust_remote_code=trust_remote_code)
    manager = ServedModelManager(served, device=device, dtype=dtype, trust_remote_code=trust_remote_code,
                                 continuous_batching=continuous_batching)
    if cb_num_blocks is None and _device(device) == "cpu":
        cb_num_blocks = CPU_CB_NUM_BLOCKS
    cb_options = {key: value for key, value in {"num_blocks": cb_num_blocks, "max_batch_tokens": cb_max_batch_tokens}
                  .items() if value is not None}
    state = _utils.GenerationState(continuous_batching=continuous_batching,
                                   cb_config=ContinuousBatchingConfig(**cb_options) if cb_options else None)
    app = _server.build_server(
        manager, ChatCompletions(manager, state), completion_handler=Completions(manager, state),
        response_handler=Responses(manager, state), transcription_handler=TranscriptionHandler(manager, state),
        systemone_handler=SystemOneHandler(manager, state), generation_state=state,
    )
    add_embeddings_route(app, manager)
    _install_openai_errors(app)
    if api_key:
        _require_api_key(app, api_key)
    return app


def serve(sources: Sequence[str], host: str = "127.0.0.1", port: int = 8000, log_level: str = "info",
          **options) -> None:
    """Serve `sources` over HTTP until interrupted (options: those of `build_app`)."""
    import uvicorn

    app = build_app(sources, **options)
    uvicorn.run(app, host=host, port=port, log_level=log_level)


@dataclass
class ServerProcess:
    """A `minitf serve` subprocess started by `server_process`: its base URL and process."""

    url: str
    process: Any


@contextlib.contextmanager
def server_process(models: Sequence[str], *options: str, api_key: str | None = None, cwd: str | None = None,
                   log: str | os.PathLike | None = None, timeout: float = 300) -> Iterator[ServerProcess]:
    """Run `minitf serve MODELS OPTIONS` on a free loopback port until the block ends (tests, benchmarks, notebooks).

    Waits until /health answers; raises RuntimeError with the end of the server's output (kept in the file `log`,
    else in a temporary file) if it exits or does not answer within `timeout` seconds.
    """
    import subprocess
    import sys
    import tempfile
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "minitf_cli", "serve", *map(str, models), "--port", str(port), *options]
    env = {**os.environ, API_KEY_VARIABLE: api_key or ""}
    with contextlib.ExitStack() as stack:
        if log is None:
            log = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "server.log"
        output = stack.enter_context(open(log, "w"))
        process = subprocess.Popen(command, cwd=cwd, stdout=output, stderr=subprocess.STDOUT, env=env)
        stack.callback(_stop, process)
        url = f"http://127.0.0.1:{port}"
        health = urllib.request.Request(f"{url}/health", headers={"Authorization": f"Bearer {api_key or ''}"})
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(health, timeout=5):
                    break
            except OSError:  # not listening yet
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                output.flush()
                state = "exited" if process.poll() is not None else f"did not answer in {timeout:.0f} s"
                raise RuntimeError(f"minitf serve {state}:\n{Path(log).read_text()[-3000:]}")
            time.sleep(0.2)
        yield ServerProcess(url, process)


def _stop(process) -> None:
    import subprocess

    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


__all__ = ["API_KEY_VARIABLE", "RequestError", "ServedModel", "ServedModelManager", "ServingUnavailable",
           "build_app", "check_new_tokens", "load_served_models", "model_family", "serve",
           "server_process"]
