"""The formats `minitf export FORMAT` writes, one registry entry each: the module and function that write it, the
families it takes, and its help. Light to import, so `minitf export FORMAT --help` needs no torch.

Adding an export is one entry here plus its module in `hf_minitf/export/` (see CONTRIBUTING.md); its options are
declared by the `export` command (`hf_minitf/commands/export.py`).
"""

from __future__ import annotations

from typing import Any, NamedTuple


class ExportFormat(NamedTuple):
    """One format of `minitf export FORMAT`."""

    module: str
    """Its module in hf_minitf.export."""
    function: str
    """The function that writes it (exported by hf_minitf.export)."""
    families: tuple[str, ...]
    """The model families it takes."""
    summary: str
    description: str


EXPORT_DESCRIPTION = "Export a MiniTF model folder (saved, trained, converted, or a Hub repo id) to a format that runs without hf_minitf and without trust_remote_code. Only exact exports are made: a model the format cannot express exactly is refused with one line naming the config field. `FORMAT --help` says what each format is."
"""What `minitf export --help` says."""

NATIVE_DESCRIPTION = """\
Write the model as the transformers architecture that computes the same function, with its tokenizer,
generation config and a model card (no .py files, no auto_map):

- GPT, learned positions -> GPT2LMHeadModel (Conv1D weights are the transposed Linear weights)
- GPT, rotary positions  -> GPTNeoXForCausalLM (sequential residual, full rotary; qkv regrouped per head,
  interleaved rotary pairs permuted to rotate-half order)
- encoder               -> a SentenceTransformer folder (Transformer + mean Pooling + Normalize) around
  XLMRobertaXLModel (word embeddings pre-scaled, positions at XLM-R's padding_idx + 1 offset)

The folder loads with AutoModelForCausalLM / SentenceTransformer without trust_remote_code, in transformers
4.x too, and serves with `transformers serve` or vLLM. Refused (nothing written): the seq2seq family (no
native encoder-decoder is exact), a learned-position GPT with context_overflow="crop" (set "error" to export
it), an encoder without pad_token_id."""

GGUF_DESCRIPTION = """\
Write a GPT model as one GGUF file for llama.cpp, Ollama and LM Studio: llama.cpp's `gpt2` architecture for
learned positions, `gptneox` for rotary positions, with the tokenizer inside (byte-level BPE as llama.cpp's
`gpt2` tokenizer model; a character tokenizer is rewritten as a byte-level vocabulary with the merges that
build its multi-byte characters), the context length, the special tokens and the chat template if the
tokenizer has one.

--dtype: f32 (exact weights), f16 (half-precision weights), q8_0 (8-bit blocks of 32 with a scale, llama.cpp's
Q8_0; norms and biases stay f32). Refused: encoder and seq2seq models, activations other than gelu (llama.cpp's
GPT-2 and GPT-NeoX graphs compute GELU only), and what `export native` refuses."""

CTRANSLATE2_DESCRIPTION = """\
Write a GPT as a CTranslate2 Generator folder, a seq2seq model as a CTranslate2 Translator folder (the C++
inference engine: `pip install ctranslate2`), with the tokenizer files and a README. `minitf generate` /
`minitf translate` run such a folder in CTranslate2 and print what the MiniTF folder prints.

- GPT: learned positions as the position table, rotary positions as CTranslate2's rotary attention
  (interleaved pairs or halves, as the model has them)
- seq2seq: pre-norm Transformer, ReLU, separate source and target vocabularies, the interleaved sinusoid
  as an explicit position table, the norms' eps from the config (hkproj's first norm as the exact LayerNorm)

--quantization: float32 (MiniTF's greedy tokens), int8, int8_float32 (8-bit weights; measure before using:
they can change tokens), bfloat16. Refused (nothing written): encoder models (use `export onnx`),
context_overflow="crop", a generation config with use_cache=False, hkproj's "std + eps" norms,
activations CTranslate2 lacks."""

ONNX_DESCRIPTION = """\
Write a GPT or an encoder as ONNX (torch.onnx.export with dynamo) for ONNX Runtime and transformers.js:
onnx/model.onnx in float32, the same outputs as the MiniTF model (GPT: its greedy tokens; encoder: embeddings
within 1e-5). `minitf generate` / `minitf embed` run the folder in ONNX Runtime.

- GPT: one decoder graph with a KV cache, inputs input_ids, attention_mask, position_ids and
  past_key_values.{i}.key/.value, outputs logits and present.{i}.key/.value (batch, length and cache length
  dynamic; optimum's and transformers.js's layout), beside config.json of the native architecture (gpt2 for
  learned positions, gpt_neox for rotary ones), the tokenizer and a generation config that stops at a learned
  position table
- encoder: inputs input_ids and attention_mask, output last_hidden_state, in a copy of the SentenceTransformer
  folder; the README has the ONNX Runtime code (tokenizer, session, masked mean, normalize) that needs no optimum

--quantize q8 fp16 q4 adds the files transformers.js loads for these dtypes: onnx/model_quantized.onnx (dynamic
8-bit matrix products; an encoder's also as onnx/model_quint8_avx2.onnx, sentence-transformers' name, which
`minitf embed` then runs), onnx/model_fp16.onnx (float16), onnx/model_q4.onnx (4-bit weight blocks). They can
change greedy tokens; measure before using them. Refused: seq2seq models (their paired tokenizer has no
transformers.js counterpart; use `export ctranslate2`), what `export native` refuses for a GPT
(context_overflow="crop"), an encoder's pooling other than mean."""

TRANSFORMERS_JS_VERSION = "4.3.2"
"""The transformers.js the web export's page loads (tests/js/package.json pins the same version for the tests)."""
TRANSFORMERS_JS_URL = (
    f"https://cdn.jsdelivr.net/npm/@huggingface/transformers@{TRANSFORMERS_JS_VERSION}/dist/transformers.min.js"
)
"""Where the page loads it from: jsDelivr's copy of the npm package."""

TRANSFORMERS_JS_VERSION = "4.3.2"
"""The transformers.js the web export's page loads (tests/js/package.json pins the same version for the tests)."""
TRANSFORMERS_JS_URL = (
    f"https://cdn.jsdelivr.net/npm/@huggingface/transformers@{TRANSFORMERS_JS_VERSION}/dist/transformers.min.js"
)
"""Where the page loads it from: jsDelivr's copy of the npm package."""

WEB_DESCRIPTION = f"""\
Write a GPT or an encoder as a static web page that runs it in the browser with transformers.js
{TRANSFORMERS_JS_VERSION} (from jsDelivr), ready to open (serve the folder: python -m http.server) or to publish
as a Hugging Face static Space (README.md says sdk: static; `minitf push SRC REPO --space` exports and uploads):

- GPT: a prompt box with streamed greedy generation, stopped at the model's position table
- encoder: a sentence-similarity box (cosine of the mean-pooled, normalized embeddings)

OUT holds index.html, app.js, worker.js, style.css, site.json, README.md and model/, the folder `minitf
export onnx` writes (float32 and the --quantize variant; the page offers each). --example fills the boxes: a
GPT's prompt; an encoder's source sentence, then the sentences to compare. Refused: seq2seq models
(transformers.js has no counterpart of their paired tokenizer), and what `export onnx` refuses."""

EXPORTS: dict[str, ExportFormat] = {
    "native": ExportFormat(
        "native",
        "export_native",
        ("gpt", "encoder"),
        "GPT -> GPT2LMHeadModel / GPTNeoXForCausalLM, encoder -> XLMRobertaXLModel SentenceTransformer: loads without trust_remote_code",
        NATIVE_DESCRIPTION,
    ),
    "gguf": ExportFormat(
        "gguf",
        "export_gguf",
        ("gpt",),
        "GPT -> one GGUF file (llama.cpp gpt2 / gptneox, tokenizer inside) for llama.cpp, Ollama",
        GGUF_DESCRIPTION,
    ),
    "ctranslate2": ExportFormat(
        "ctranslate2",
        "export_ctranslate2",
        ("gpt", "seq2seq"),
        "GPT -> ctranslate2.Generator, seq2seq -> ctranslate2.Translator folder",
        CTRANSLATE2_DESCRIPTION,
    ),
    "onnx": ExportFormat(
        "onnx",
        "export_onnx",
        ("gpt", "encoder"),
        "GPT -> ONNX decoder with KV cache, encoder -> ONNX in a SentenceTransformer folder, for ONNX Runtime and transformers.js",
        ONNX_DESCRIPTION,
    ),
    "web": ExportFormat(
        "web",
        "export_web",
        ("gpt", "encoder"),
        "GPT or encoder -> a static web page running it with transformers.js (a Hugging Face static Space)",
        WEB_DESCRIPTION,
    ),
}

EXPORT_FILE = "minitf_export.json"
"""What the engine exports (CTranslate2, ONNX) write beside their files, to say what the folder is: read by
`minitf generate/translate/embed` (hf_minitf.engines), `minitf info` and `minitf serve`."""

# The ONNX decoder's cache: inputs `past_key_values.{layer}.key/.value`, the outputs that feed them next call
# `present.{layer}.key/.value` (the names of optimum and transformers.js; hf_minitf.export.onnx_decoder writes them,
# hf_minitf.engines.onnx reads them).
PAST_PREFIX, PRESENT_PREFIX = "past_key_values.", "present."


class ExportInfoField(NamedTuple):
    """One field of `EXPORT_FILE`: its JSON type, the kinds of export that must hold it, the values it may take."""

    json_type: type
    """str, list, or int (a positive integer)."""
    required_for: tuple[str, ...] = ()
    """The kinds (generator, translator, embedder) whose exports must hold it; others may leave it out."""
    choices: tuple[str, ...] = ()
    """The values it may take (any when empty)."""
    path: bool = False
    """It names a file of the folder (each entry, for a list): a relative path that must stay inside it."""


EVERY_KIND = ("generator", "translator", "embedder")
EXPORT_INFO_FIELDS: dict[str, ExportInfoField] = {
    # engine and kind must also be a pair that hf_minitf.engines has a runner for, family a MiniTF model_type of
    # that kind
    "engine": ExportInfoField(str, EVERY_KIND),
    "kind": ExportInfoField(str, EVERY_KIND, EVERY_KIND),
    "family": ExportInfoField(str, EVERY_KIND),
    "max_position_embeddings": ExportInfoField(int, ("generator", "translator")),
    "position_embedding_type": ExportInfoField(str, (), ("learned", "rope", "sinusoidal")),
    "default_file": ExportInfoField(str, (), path=True),
    "files": ExportInfoField(list, (), path=True),
    "quantization": ExportInfoField(str),
    "source": ExportInfoField(str),
}
"""The fields of `EXPORT_FILE` that are read (others are ignored), checked by `hf_minitf.engines.export_info`."""

# The positions of transformers' own architectures that `minitf export native` writes (a GPT-2 past its table
# fails inside torch's embedding lookup).
NATIVE_POSITIONS = {"gpt2": "learned", "gpt_neox": "rope"}


def positions_of(config: Any) -> str | None:
    """How a GPT config (MiniTF's or a native export's) numbers positions: "learned", "rope", or None (no GPT)."""
    return getattr(config, "position_embedding_type", None) or NATIVE_POSITIONS.get(getattr(config, "model_type", ""))


def context_limit(config: Any) -> int | None:
    """The most tokens (prompt and generated) a GPT config's model reads, or None where it has none: learned
    positions end at their table, unless a MiniTF GPT slides its window (`context_overflow="crop"`); rotary positions
    go on past the trained length. One answer for `minitf generate` and `minitf serve`."""
    if positions_of(config) != "learned" or getattr(config, "context_overflow", "error") == "crop":
        return None
    return getattr(config, "max_position_embeddings", None)


__all__ = [
    "EVERY_KIND",
    "NATIVE_POSITIONS",
    "context_limit",
    "positions_of",
    "EXPORTS",
    "EXPORT_DESCRIPTION",
    "EXPORT_FILE",
    "EXPORT_INFO_FIELDS",
    "TRANSFORMERS_JS_URL",
    "TRANSFORMERS_JS_VERSION",
    "ExportFormat",
    "ExportInfoField",
]
