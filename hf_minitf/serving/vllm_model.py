"""What vLLM is given for `minitf serve --engine vllm`: the one GPT among the sources (`split_sources`), the folder
vLLM loads and how (`prepare_model`), and its server's command line (`vllm_command`).

A MiniTF GPT is served from its `minitf export native` form (GPT-2 or GPT-NeoX, written to a temporary folder at
start): vLLM's own kernels, no remote code, the same tokens as `generate()`. A config with no exact native form runs
through vLLM's transformers backend with the folder's own code, with `--trust-remote-code` only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hf_minitf.catalog.families import FAMILIES, family_of_model_type

VLLM_SERVER_MODULE = "vllm.entrypoints.openai.api_server"


@dataclass
class VllmModel:
    """The GPT vLLM serves: its name in requests, the folder vLLM loads and how, and what the front checks with."""

    name: str
    folder: str
    dtype: str
    context_limit: int
    vocab_size: int
    tokenizer: Any = None
    transformers_backend: bool = False
    trust_remote_code: bool = False
    greedy_by_default: bool = True


def _weights_dtype(config: Any) -> str:
    """The saved weights' dtype, which vLLM is told (its "auto" would run float32 weights in half precision)."""
    dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None) or "float32"
    return str(dtype).removeprefix("torch.")


def prepare_model(source: str, work: Path, *, dtype: str = "auto", trust_remote_code: bool = False) -> VllmModel:
    """What vLLM is given for the GPT `source`: a MiniTF GPT's native export (written under `work`), or, where it
    has none, the folder itself through vLLM's transformers backend (only with `trust_remote_code`); any other
    causal LM folder or repo id as it is."""
    from transformers import AutoTokenizer, GenerationConfig

    from hf_minitf.export.source import ExportRefused
    from hf_minitf.serving.family import model_family, served_config

    config = served_config(source, trust_remote_code)
    if model_family(config) != "gpt":
        raise ValueError(
            f"cannot serve {source} on vLLM: only GPT folders run there (this is a {model_family(config)})"
        )
    model = VllmModel(
        name=source,
        folder=source,
        dtype=_weights_dtype(config) if dtype == "auto" else dtype,
        # vLLM reads no position past --max-model-len, rotary or not: its limit is the trained table
        # (catalog.exports.context_limit is the default engine's, where rotary positions go on).
        context_limit=config.max_position_embeddings,
        vocab_size=config.vocab_size,
        trust_remote_code=trust_remote_code,
    )
    if family_of_model_type(config.model_type) is FAMILIES["gpt"]:  # a MiniTF GPT, not a native GPT-2 folder
        from hf_minitf.export.native import export_native

        try:
            model.folder = str(export_native(source, work / "native"))
        except ExportRefused as error:
            if not trust_remote_code:
                raise ValueError(
                    f"cannot serve {source} on vLLM natively ({error}); pass --trust-remote-code to run it through "
                    "vLLM's transformers backend with the folder's own model code"
                ) from error
            model.transformers_backend = True
    model.tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    with contextlib.suppress(OSError, ValueError):
        model.greedy_by_default = not GenerationConfig.from_pretrained(source).do_sample
    return model


def vllm_command(
    model: VllmModel,
    python: str,
    port: int,
    *,
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
    log_level: str = "info",
    extra: Sequence[str] = (),
) -> list[str]:
    """The command line of vLLM's OpenAI-compatible server for `model` on 127.0.0.1:`port`."""
    command = [
        python, "-m", VLLM_SERVER_MODULE,
        "--model", model.folder,
        "--served-model-name", model.name,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--dtype", model.dtype,
        "--max-model-len", str(model.context_limit),
        "--tensor-parallel-size", str(tensor_parallel_size),
        "--pipeline-parallel-size", str(pipeline_parallel_size),
        "--uvicorn-log-level", log_level,
    ]  # fmt: skip
    if model.transformers_backend:
        command += ["--model-impl", "transformers"]
    if model.trust_remote_code:
        command.append("--trust-remote-code")
    return [*command, *extra]


def split_sources(sources: Sequence[str], trust_remote_code: bool = False) -> tuple[str, list[str]]:
    """The one GPT among `sources` (for vLLM) and the others (for the default engine)."""
    from hf_minitf.serving.family import model_family, served_config

    gpts: list[str] = []
    others: list[str] = []
    for source in map(str, sources):
        (gpts if model_family(served_config(source, trust_remote_code)) == "gpt" else others).append(source)
    if len(gpts) != 1:
        given = ", ".join(gpts) if gpts else "none"
        raise ValueError(
            f"--engine vllm serves one GPT per server (given: {given}); run one `minitf serve GPT --engine vllm` "
            "per GPT, each on its own --port"
        )
    return gpts[0], others


__all__ = ["VllmModel", "prepare_model", "split_sources", "vllm_command"]
