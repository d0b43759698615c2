"""The formats `minitf export FORMAT` writes, by name (`EXPORTS`: each format's own module declares it), and the facts
their writers, the engines and the verification share: file names, the ONNX layouts, the export metadata's schema,
the pinned transformers.js. Light to import, so `minitf export FORMAT --help` needs no torch.
"""

from __future__ import annotations

from typing import Any, NamedTuple

EXPORT_DESCRIPTION = "Export a MiniTF model folder (saved, trained, converted, or a Hub repo id) to a format that runs without hf_minitf and without trust_remote_code. Only exact exports are made: a model the format cannot express exactly is refused with one line naming the config field. `FORMAT --help` says what each format is."
"""What `minitf export --help` says."""

GGUF_AGREEMENT_TEXT = (
    "The quick brown fox jumps over the lazy dog.\n"
    "Hello world, this is a small language model.\n"
    "342: three hundred forty-two\n"
    "Once upon a time there was a little town by the sea.\n"
    "The weather today is sunny with a light breeze.\n"
    "She opened the door and looked outside.\n"
    "In 1969, people first walked on the moon.\n"
    "Water boils at one hundred degrees.\n"
)
"""What `minitf export gguf` measures agreement on without --agreement-text: each line's first tokens are a prompt,
the whole text the held-out text of the perplexity."""
GGUF_AGREEMENT_PROMPTS, GGUF_AGREEMENT_PROMPT_TOKENS, GGUF_AGREEMENT_NEW_TOKENS = 8, 4, 64
"""Prompts (the first lines of the text), tokens of each prompt, greedy tokens generated after each."""
OLLAMA_GGUF_FILE, OLLAMA_MODELFILE = "model.gguf", "Modelfile"
"""The files of `minitf export ollama`'s folder (beside README.md)."""
OLLAMA_SAMPLING = {"temperature": "0", "top_k": "1", "repeat_penalty": "1"}
"""The Modelfile's sampling: greedy, as every runtime is verified and the cards' examples run (Ollama samples at
temperature 0.8 from the 40 likeliest tokens by default; some versions penalize repeats by 1.1)."""

TRANSFORMERS_JS_VERSION = "4.3.2"
"""The transformers.js the web export's page loads (tests/js/package.json pins the same version for the tests)."""
TRANSFORMERS_JS_URL = (
    f"https://cdn.jsdelivr.net/npm/@huggingface/transformers@{TRANSFORMERS_JS_VERSION}/dist/transformers.min.js"
)
"""Where the page loads it from: jsDelivr's copy of the npm package."""


class NpmFiles(NamedTuple):
    """Files of one npm package that `minitf export web --bundle` copies beside the page, as
    `vendor/{name}/{path}`."""

    name: str
    version: str
    integrity: str
    """npm's Subresource Integrity of the package's tarball (what package-lock.json records), checked on download."""
    license: str
    paths: tuple[str, ...]
    """Paths inside the package."""


WEB_BUNDLE = (
    NpmFiles(
        "@huggingface/transformers",
        TRANSFORMERS_JS_VERSION,
        "sha512-V3+dqf3iWlRYJ9I9GreM3zGQd0lAXnnoPeddmkOQYWAEE4l/+Fi6p7tx/qVUJlKQgLXGim2W76rTOzz+eC0i7g==",
        "Apache-2.0",
        ("dist/transformers.min.js", "LICENSE"),
    ),
    # The onnxruntime-web that transformers.js 4.3.2 pins; its browser build fetches this wasm (and the .mjs that
    # loads it) at run time, from jsDelivr unless `env.backends.onnx.wasm.wasmPaths` says where.
    NpmFiles(
        "onnxruntime-web",
        "1.31.0-dev.20260914-8d85527a0",
        "sha512-Iy7rtadoBgxS/LLvDr3QW38DB1PNXRnr0GJMcL0TAt7c9qjgVQl83UlGCVyeAnK2InpmW8Uc3PL8XIuqtDeF6g==",
        "MIT",
        ("dist/ort-wasm-simd-threaded.asyncify.mjs", "dist/ort-wasm-simd-threaded.asyncify.wasm"),
    ),
)
"""What a bundled page runs instead of the CDN's copies: the pinned transformers.js and the onnxruntime-web files it
loads (tests/js/package-lock.json pins the same versions and tarballs)."""
NPM_REGISTRY = "https://registry.npmjs.org"
"""Where `--bundle` downloads the packages from, unless the environment names a mirror as npm reads it
(`npm_config_registry`)."""
WEB_CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; connect-src 'self'; worker-src 'self'; "
    "img-src 'self'; style-src 'self'; object-src 'none'; base-uri 'self'; form-action 'none'"
)
"""The bundled page's policy: nothing from another origin (the worker compiles the wasm, hence 'wasm-unsafe-eval')."""

EXPORTS = {name: name for name in ("native", "gguf", "ollama", "ctranslate2", "onnx", "web")}
"""Each format of `minitf export` by its name, in the order `minitf export --help` lists them, and the module of
`hf_minitf.export.formats` that declares it (its `FORMAT`, an `hf_minitf.export.format.ExportFormat`: help, options,
writer, verification, card), imported when asked for."""

EXPORT_FILE = "minitf_export.json"
"""What the engine exports (CTranslate2, ONNX) write beside their files, to say what the folder is: read by
`minitf generate/translate/embed` (hf_minitf.engines), `minitf info` and `minitf serve`."""

# The ONNX decoder's cache: inputs `past_key_values.{layer}.key/.value`, the outputs that feed them next call
# `present.{layer}.key/.value` (the names of optimum and transformers.js; hf_minitf.export.onnx_decoder writes them,
# hf_minitf.engines.onnx reads them).
PAST_PREFIX, PRESENT_PREFIX = "past_key_values.", "present."

# The ONNX translator's graphs, by optimum's seq2seq file names (hf_minitf.export.onnx_seq2seq writes them,
# hf_minitf.engines.onnx_translator runs them): the encoder, the first decoder step (which computes the
# cross-attention keys and values) and the next decoder steps (which read them from the cache).
ONNX_TRANSLATOR_GRAPHS = {
    "encoder": "onnx/encoder_model.onnx",
    "decoder": "onnx/decoder_model.onnx",
    "decoder_with_past": "onnx/decoder_with_past_model.onnx",
}
# What transformers.js appends to a graph's file name for each of its dtypes (`--quantize` writes q8, fp16, q4).
ONNX_DTYPE_SUFFIXES = {"fp32": "", "q8": "_quantized", "fp16": "_fp16", "q4": "_q4"}


def onnx_variant_file(graph: str, dtype: str) -> str:
    """The file of `graph` (e.g. onnx/model.onnx) in transformers.js's `dtype` (fp32, q8, fp16, q4)."""
    return graph.removesuffix(".onnx") + ONNX_DTYPE_SUFFIXES[dtype] + ".onnx"


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

NATIVE_ARCHITECTURES = {
    "learned": "GPT2LMHeadModel",
    "rope": "GPTNeoXForCausalLM",
    "encoder": "XLMRobertaXLModel",
    "seq2seq": "PegasusForConditionalGeneration",
}
"""The transformers architecture `minitf export native` writes for a GPT (by its positions), an encoder and a
translator (`hf_minitf.export.native`, `hf_minitf.export.native_seq2seq`)."""
NATIVE_MODEL_TYPES = {"learned": "gpt2", "rope": "gpt_neox", "encoder": "xlm-roberta-xl", "seq2seq": "pegasus"}
"""The model_type of each of `NATIVE_ARCHITECTURES`."""
# The positions of the native GPTs (a GPT-2 past its table fails inside torch's embedding lookup).
NATIVE_POSITIONS = {NATIVE_MODEL_TYPES[positions]: positions for positions in ("learned", "rope")}
NATIVE_TRANSLATOR_MODEL_TYPE = NATIVE_MODEL_TYPES["seq2seq"]


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
    "ONNX_DTYPE_SUFFIXES",
    "ONNX_TRANSLATOR_GRAPHS",
    "onnx_variant_file",
    "NATIVE_ARCHITECTURES",
    "NATIVE_MODEL_TYPES",
    "NATIVE_POSITIONS",
    "NATIVE_TRANSLATOR_MODEL_TYPE",
    "context_limit",
    "positions_of",
    "EXPORTS",
    "EXPORT_DESCRIPTION",
    "EXPORT_FILE",
    "EXPORT_INFO_FIELDS",
    "GGUF_AGREEMENT_NEW_TOKENS",
    "GGUF_AGREEMENT_PROMPTS",
    "GGUF_AGREEMENT_PROMPT_TOKENS",
    "GGUF_AGREEMENT_TEXT",
    "OLLAMA_GGUF_FILE",
    "OLLAMA_MODELFILE",
    "OLLAMA_SAMPLING",
    "NPM_REGISTRY",
    "TRANSFORMERS_JS_URL",
    "TRANSFORMERS_JS_VERSION",
    "WEB_BUNDLE",
    "WEB_CONTENT_SECURITY_POLICY",
    "ExportInfoField",
    "NpmFiles",
]
