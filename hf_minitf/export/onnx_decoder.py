"""A MiniTF GPT as one ONNX decoder graph with a KV cache, in the layout transformers.js and optimum's
`ORTModelForCausalLM` read, in a folder with the native architecture's config.json (gpt2 or gpt_neox), so that
transformers.js maps it to a class it has.

| | name | shape |
|---|---|---|
| in | `input_ids`, `position_ids` | int64 (batch_size, sequence_length) |
| in | `attention_mask` | int64 (batch_size, total_sequence_length): cached and new tokens |
| in | `past_key_values.{i}.key`, `.value` | float32 (batch_size, heads, past_sequence_length, head_dim) |
| out | `logits` | float32 (batch_size, sequence_length, vocab_size) |
| out | `present.{i}.key`, `.value` | float32 (batch_size, heads, past_sequence_length + sequence_length, head_dim) |

The first call passes a cache of length 0. The graph is the MiniTF model itself, traced by
`torch.onnx.export(dynamo=True)` (transformers' DynamicCache filled from the inputs), so it computes the same
function for both position types and both rotary layouts; transformers.js builds the first, empty cache from the
graph's input shapes, which is why the batch axis is named `batch_size` and heads and head_dim are fixed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer

from hf_minitf.catalog.exports import PAST_PREFIX, PRESENT_PREFIX
from hf_minitf.export.native import save_native_gpt_files
from hf_minitf.export.onnx_graph import export_graph
from hf_minitf.export.source import MiniTFSource, check_native
from hf_minitf.safety.json_files import read_json

if TYPE_CHECKING:
    from hf_minitf.modeling.modeling_minitf_gpt import MiniTFGPTForCausalLM

INPUT_NAMES = ("input_ids", "attention_mask", "position_ids")
CACHE_PARTS = ("key", "value")
# transformers.js reads "transformers.js_config" in config.json: the file it loads when the caller names no dtype
# (else q8 on wasm, a file that is only there with --quantize q8); the float32 one gives MiniTF's tokens.
TRANSFORMERS_JS_CONFIG = {"dtype": "fp32"}


def past_names(num_layers: int) -> list[str]:
    return [f"{PAST_PREFIX}{layer}.{part}" for layer in range(num_layers) for part in CACHE_PARTS]


def present_names(num_layers: int) -> list[str]:
    return [f"{PRESENT_PREFIX}{layer}.{part}" for layer in range(num_layers) for part in CACHE_PARTS]


class DecoderWithCache(torch.nn.Module):
    """One decoding call as the graph makes it: ids, mask, positions and each layer's cached (key, value) in;
    logits and each layer's extended (key, value) out."""

    def __init__(self, model: MiniTFGPTForCausalLM) -> None:
        super().__init__()
        self.model = model

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        past: list[tuple[torch.Tensor, torch.Tensor]],
    ) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
        cache = DynamicCache(config=self.model.config)
        for layer, (key, value) in enumerate(past):
            cache.update(key, value, layer)
        logits = self.model(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, cache=cache, use_cache=True
        ).logits
        present = []
        for cache_layer in cache.layers:
            # A MiniTF GPT config gives one full-attention DynamicLayer per layer, holding tensors once updated.
            assert isinstance(cache_layer, DynamicLayer)
            assert cache_layer.keys is not None and cache_layer.values is not None
            present.append((cache_layer.keys, cache_layer.values))
        return logits, present


def export_decoder_graph(model: MiniTFGPTForCausalLM, path: Path) -> None:
    """`torch.onnx.export(dynamo=True)` of `DecoderWithCache`: batch, new and cached lengths dynamic, one file."""
    config = model.config
    layers, heads = config.num_hidden_layers, config.num_attention_heads
    head_dim = config.hidden_size // heads
    # Traced at sizes above 1 (torch.export fixes axes of size 0 or 1); the graph runs at any size, 0 cached included.
    batch, new, cached = 2, 3, 4
    input_ids = torch.arange(batch * new).reshape(batch, new) % config.vocab_size
    attention_mask = torch.ones(batch, cached + new, dtype=torch.long)
    position_ids = torch.arange(cached, cached + new).expand(batch, new).contiguous()
    past = [tuple(torch.zeros(batch, heads, cached, head_dim) for _ in CACHE_PARTS) for _ in range(layers)]
    batch_size, sequence_length = torch.export.Dim("batch_size"), torch.export.Dim("sequence_length")
    cache_axes = {0: batch_size, 2: torch.export.Dim("past_sequence_length")}
    dynamic_shapes = {
        "input_ids": {0: batch_size, 1: sequence_length},
        "attention_mask": {0: batch_size, 1: torch.export.Dim("total_sequence_length")},
        "position_ids": {0: batch_size, 1: sequence_length},
        "past": [(cache_axes, cache_axes) for _ in range(layers)],
    }
    export_graph(
        DecoderWithCache(model),
        (input_ids, attention_mask, position_ids, past),
        [*INPUT_NAMES, *past_names(layers)],
        ["logits", *present_names(layers)],
        dynamic_shapes,
        path,
    )


def write_decoder_folder(
    source: MiniTFSource, model: MiniTFGPTForCausalLM, tokenizer: Any, work: Path, graph: str
) -> None:
    """The GPT's folder but for the quantized variants and the card: config.json of the native architecture (with
    `TRANSFORMERS_JS_CONFIG`), tokenizer, generation config (stopping at the position table when the positions are
    learned) and the graph at `graph` (a path inside `work`)."""
    config = model.config
    check_native(config)  # the native config.json must describe the same model (no sliding window)
    save_native_gpt_files(source, config, tokenizer, torch.float32, work)
    _update_json(work / "config.json", {"transformers.js_config": TRANSFORMERS_JS_CONFIG})
    if config.position_embedding_type == "learned":
        # transformers and transformers.js stop at max_length when no max_new_tokens is given; past the table
        # ONNX Runtime fails inside its Gather.
        _update_json(work / "generation_config.json", {"max_length": config.max_position_embeddings})
    (work / graph).parent.mkdir(parents=True, exist_ok=True)
    export_decoder_graph(model, work / graph)


ONNXRUNTIME_SNIPPET = """import numpy as np
import onnxruntime
from transformers import PreTrainedTokenizerFast

folder = "path/to/this/folder"
tokenizer = PreTrainedTokenizerFast.from_pretrained(folder)  # tokenizer.json: no model code involved
session = onnxruntime.InferenceSession(f"{folder}/onnx/model.onnx", providers=["CPUExecutionProvider"])
cache_inputs = [graph_input for graph_input in session.get_inputs() if graph_input.name.startswith("past_")]
output_names = [output.name for output in session.get_outputs()]  # logits, then present.{i}.key / .value

def generate(prompt, max_new_tokens=20):
    ids = tokenizer(prompt, add_special_tokens=False).input_ids
    cache = {i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32) for i in cache_inputs}  # past length 0
    step = ids
    for _ in range(max_new_tokens):
        past = len(ids) - len(step)
        feeds = {"input_ids": np.array([step], np.int64), "attention_mask": np.ones((1, len(ids)), np.int64),
                 "position_ids": np.arange(past, len(ids), dtype=np.int64)[None], **cache}
        logits, *present = session.run(output_names, feeds)
        cache = {name.replace("present", "past_key_values"): value for name, value in zip(output_names[1:], present)}
        step = [int(logits[0, -1].argmax())]  # greedy
        ids = ids + step
        if step[0] == tokenizer.eos_token_id:
            break
    return tokenizer.decode(ids, skip_special_tokens=True)

print(generate(PROMPT))"""
"""The card's ONNX Runtime code: greedy decoding with the cache, nothing but onnxruntime and the tokenizer; PROMPT
stands for the card's example prompt (a JSON string)."""


def _update_json(path: Path, fields: dict[str, Any]) -> None:
    data = read_json(path)
    path.write_text(json.dumps({**data, **fields}, indent=2, sort_keys=True) + "\n", encoding="utf-8")


__all__ = [
    "DecoderWithCache",
    "INPUT_NAMES",
    "ONNXRUNTIME_SNIPPET",
    "export_decoder_graph",
    "past_names",
    "present_names",
    "write_decoder_folder",
]
