"""The formats `minitf export FORMAT` writes, one registry entry each: the module and function that write it, the
families it takes, and its help. Light to import, so `minitf export FORMAT --help` needs no torch.

Adding an export is one entry here plus its module in `hf_minitf/export/` (see CONTRIBUTING.md); its options are
declared by the `export` command (`hf_minitf/commands/export.py`).
"""

from __future__ import annotations

from typing import Any, NamedTuple


class ExportFormat(NamedTuple):
    """One format of `minitf export FORMAT`."""

    name: str
    """Its name: `minitf export NAME`, its module hf_minitf.export.NAME."""
    families: tuple[str, ...]
    """The model families it takes."""
    summary: str
    description: str
    exact_precisions: tuple[str, ...] = ()
    """The precisions (the export's weight type: --dtype, --quantization, an ONNX file's dtype) at which the format
    claims the MiniTF model's outputs: greedy tokens, translations, embeddings within
    `catalog.verification.EXACT_EMBEDDING_DIFFERENCE`; `minitf verify` exits 1 when such an export is not."""

    @property
    def module(self) -> str:
        """Its module in hf_minitf.export."""
        return self.name

    @property
    def function(self) -> str:
        """The function that writes it (exported by hf_minitf.export)."""
        return f"export_{self.name}"


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
- seq2seq (translator)  -> PegasusForConditionalGeneration (pre-LN, the position table as its weight; the two
  vocabularies as one joint tokenizer.json, target tokens after the source ids; the residual stream scaled
  so that Pegasus's fixed LayerNorm eps 1e-5 computes MiniTF's eps)

The folder loads with AutoModelForCausalLM / SentenceTransformer / AutoModelForSeq2SeqLM without
trust_remote_code, and a GPT serves with `transformers serve` or vLLM. Refused (nothing written): a
learned-position GPT with context_overflow="crop" (set "error" to export it), an encoder without pad_token_id,
a translator whose norms divide by std + eps (hkproj's later norms) or whose generation config does not cache
(hkproj's untrained model)."""

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
GGUF_DESCRIPTION = f"""\
Write a GPT model as one GGUF file for llama.cpp, Ollama and LM Studio: llama.cpp's `gpt2` architecture for
learned positions, `gptneox` for rotary positions, with the tokenizer inside (byte-level BPE as llama.cpp's
`gpt2` tokenizer model; a character tokenizer is rewritten as a byte-level vocabulary with the merges that
build its multi-byte characters), the context length, the special tokens and the chat template if the
tokenizer has one.

An encoder becomes an embedding model for llama.cpp (`llama-server --embeddings`, llama-cpp-python's
`Llama(path, embedding=True)`): llama.cpp's `gpt2` graph, the MiniTF encoder layer exactly, with
`attention.causal = false` and `pooling_type = mean`, the sinusoid as the position table, and MiniEmbed's
word-level tokenizer as llama.cpp's WordPiece (`bert`) tokenizer model, lowercasing, [CLS] ... [SEP]. Cosine to
SentenceTransformer's embeddings: at least 0.999999 in f32 and f16 (llama.cpp's GELU is the tanh form). Its
tokens differ from MiniEmbed's on `_` inside words, combining marks, non-ASCII symbols against a word, CJK runs
and control characters. Keep texts within the context length (llama-cpp-python: n_ctx, n_batch and n_ubatch set
to it; llama.cpp reads no position past the table). Refused: other tokenizers, pooling other than mean. An
encoder's file claims no exactness: its verification (llama-cpp-python installed) prints the least cosine.

--dtype: f32 (exact weights), f16 (half-precision weights), or a llama.cpp quantization, each tensor typed by
llama.cpp's rules (llama-quant.cpp): q8_0, q4_0, q4_1, q5_0, q5_1 (blocks of 32); q4_k_m, q5_k_m (Ollama's
mixes: Q4_K / Q5_K, Q6_K for attn_qkv and ffn_down of some layers) and q6_k (blocks of 256). The output head
(the token embedding when tied) takes Q6_K, Q8_0 where its rows are no multiple of 256; the position table
stays f16, norms and biases f32. A matrix whose rows do not fit its type's blocks falls back as llama.cpp's
quantizer does (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, else f16). The gguf package writes Q4_0, Q4_1,
Q5_0, Q5_1 and Q8_0, not the K-quants: Q6_K falls back to Q8_0 too, and q4_k_m, q5_k_m, q6_k are refused
where a matrix keeps Q4_K, Q5_K or Q6_K (rows of 256 or more: export f16 and run llama.cpp's
`llama-quantize`); on small models every matrix falls back and the file is written. The export lists each
fallback.

The export then reads the file back, dequantizes it, runs those weights in MiniTF (float32) and prints their
agreement with the MiniTF folder: greedy tokens over {GGUF_AGREEMENT_PROMPTS} prompts x {GGUF_AGREEMENT_NEW_TOKENS} new tokens (where they first differ) and
perplexity on held-out text beside float32's (--agreement-text FILE, one prompt per line; default: a short
English text). This measures the weights' rounding, not llama.cpp's kernels. Refused: seq2seq models,
activations other than gelu (llama.cpp's GPT-2 and GPT-NeoX graphs compute GELU only), and what
`export native` refuses."""

OLLAMA_DESCRIPTION = """\
Write a GPT as a folder for Ollama: model.gguf (what `export gguf` writes, default --dtype q8_0), a Modelfile
(FROM ./model.gguf; TEMPLATE, the tokenizer's chat template in Ollama's Go template syntax; PARAMETER stop for
the token that ends an answer; PARAMETER num_ctx, the context length) and README.md (the card, with the
agreement `export gguf` measures). Then: `ollama create NAME -f OUT/Modelfile`.

The chat templates translated are those that wrap each message by its role (text before and after the
content) and end with a generation prompt: the package's chatml and simple, FrawdLLM's. Roles the template
refuses (FrawdLLM's system messages) are dropped by Ollama. A tokenizer without a chat template gets no
TEMPLATE (Ollama passes the prompt as it is: text continuation); any other chat template is refused, since a
wrong TEMPLATE would silently change what the model reads."""

OLLAMA_GGUF_FILE, OLLAMA_MODELFILE = "model.gguf", "Modelfile"
"""The files of `minitf export ollama`'s folder (beside README.md)."""

CTRANSLATE2_DESCRIPTION = """\
Write a GPT as a CTranslate2 Generator folder, a seq2seq model as a CTranslate2 Translator folder, an encoder
as a CTranslate2 Encoder folder (the C++ inference engine: `pip install ctranslate2`), with the tokenizer files
and a README. `minitf generate` / `minitf translate` / `minitf embed` run such a folder in CTranslate2 and print
what the MiniTF folder prints.

- GPT: learned positions as the position table, rotary positions as CTranslate2's rotary attention
  (interleaved pairs or halves, as the model has them)
- seq2seq: pre-norm Transformer, ReLU, separate source and target vocabularies, the interleaved sinusoid
  as an explicit position table, the norms' eps from the config (hkproj's first norm as the exact LayerNorm)
- encoder: pre-norm Transformer encoder, the sinusoid or learned positions as the position table; the token
  states are mean-pooled and normalized as the SentenceTransformer folder does (embeddings within 1e-5)

--quantization: float32 (MiniTF's greedy tokens and embeddings), int8, int8_float32 (8-bit weights; measure
before using: they can change tokens; an encoder's embeddings kept a cosine of 0.99997 to float32's on
MiniEmbed's dims), bfloat16. Refused (nothing written): context_overflow="crop", a generation config with
use_cache=False, hkproj's "std + eps" norms, activations CTranslate2 lacks, an encoder's pooling other than
mean."""

ONNX_DESCRIPTION = """\
Write a GPT, an encoder or a seq2seq translator as ONNX (torch.onnx.export with dynamo) for ONNX Runtime and
transformers.js: float32 graphs giving the MiniTF model's outputs (GPT: its greedy tokens; encoder: embeddings
within 1e-5; translator: its greedy and beam-search translations). `minitf generate` / `minitf embed` /
`minitf translate` run the folder in ONNX Runtime.

- GPT: onnx/model.onnx, one decoder graph with a KV cache, inputs input_ids, attention_mask, position_ids and
  past_key_values.{i}.key/.value, outputs logits and present.{i}.key/.value (batch, length and cache length
  dynamic; optimum's and transformers.js's layout), beside config.json of the native architecture (gpt2 for
  learned positions, gpt_neox for rotary ones), the tokenizer and a generation config that stops at a learned
  position table
- encoder: onnx/model.onnx, inputs input_ids and attention_mask, output last_hidden_state, in a copy of the
  SentenceTransformer folder; the README has the ONNX Runtime code (tokenizer, session, masked mean, normalize)
  that needs no optimum
- seq2seq: optimum's seq2seq files: onnx/encoder_model.onnx (input_ids, attention_mask -> last_hidden_state),
  onnx/decoder_model.onnx (the first step: input_ids, encoder_attention_mask, encoder_hidden_states -> logits and
  present.{i}.decoder.key/.value, present.{i}.encoder.key/.value, the cross-attention keys and values computed
  once) and onnx/decoder_with_past_model.onnx (the next steps: past_key_values.{i}.decoder/.encoder.key/.value
  in, logits and present.{i}.decoder.key/.value out), beside the paired tokenizer and the generation config;
  `minitf translate` searches (greedy, or --num-beams with the generation config's length_penalty and
  early_stopping) in numpy as transformers' generate() does

--quantize q8 fp16 q4 adds the files transformers.js loads for these dtypes: onnx/model_quantized.onnx (dynamic
8-bit matrix products; an encoder's also as onnx/model_quint8_avx2.onnx, sentence-transformers' name, which
`minitf embed` then runs), onnx/model_fp16.onnx (float16), onnx/model_q4.onnx (4-bit weight blocks); a
translator gets each of its three graphs so (onnx/encoder_model_quantized.onnx, ...). They can change greedy
tokens; measure before using them. Refused: what `export native` refuses for a GPT (context_overflow="crop"),
an encoder's pooling other than mean, a translator whose generation config does not cache (hkproj's untrained
model) or sets what the runner does not reproduce (no_repeat_ngram_size, repetition_penalty, sampling, ...)."""

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

WEB_DESCRIPTION = f"""\
Write a model as a static web page that runs it in the browser with transformers.js {TRANSFORMERS_JS_VERSION},
ready to open (serve the folder: python -m http.server) or to publish as a Hugging Face static Space (README.md
says sdk: static; `minitf push SRC REPO --space` exports and uploads):

- GPT: a prompt box with streamed greedy generation, stopped at the model's position table
- encoder: a sentence-similarity box (cosine of the mean-pooled, normalized embeddings)
- seq2seq: a text box with the streamed greedy translation (the source and target tokenizers run by
  transformers.js, the encoder and decoder graphs by its ONNX Runtime Web, the loop in translator.js)

OUT holds index.html, app.js, worker.js, style.css, site.json, README.md and model/, the folder `minitf
export onnx` writes (float32 and the --quantize variant; the page offers each). --example fills the boxes: a
GPT's prompt or a text to translate; an encoder's source sentence, then the sentences to compare. Refused: what
`export onnx` refuses.

The page loads transformers.js and the wasm of ONNX Runtime Web from jsDelivr. --bundle copies them into
OUT/vendor and adds a Content-Security-Policy that forbids other origins: the page then runs offline, air-gapped
or behind a strict policy. The npm packages come from --bundle-from DIR (a node_modules folder, after `npm install
@huggingface/transformers@{TRANSFORMERS_JS_VERSION}`), else from the npm registry (or the mirror
npm_config_registry names), downloaded once with each tarball's pinned integrity checked and kept in
~/.cache/minitf/npm."""

EXPORTS: dict[str, ExportFormat] = {
    "native": ExportFormat(
        "native",
        ("gpt", "encoder", "seq2seq"),
        "GPT -> GPT2LMHeadModel / GPTNeoXForCausalLM, encoder -> XLMRobertaXLModel SentenceTransformer, translator -> PegasusForConditionalGeneration: loads without trust_remote_code",
        NATIVE_DESCRIPTION,
        exact_precisions=("float32",),
    ),
    "gguf": ExportFormat(
        "gguf",
        ("gpt", "encoder"),
        "GPT or encoder -> one GGUF file (llama.cpp gpt2 / gptneox, tokenizer inside) for llama.cpp, Ollama",
        GGUF_DESCRIPTION,
        exact_precisions=("f32",),
    ),
    "ollama": ExportFormat(
        "ollama",
        ("gpt",),
        "GPT -> a folder for `ollama create`: the GGUF file, a Modelfile with the chat template as TEMPLATE, a card",
        OLLAMA_DESCRIPTION,
    ),
    "ctranslate2": ExportFormat(
        "ctranslate2",
        ("gpt", "seq2seq", "encoder"),
        "GPT -> ctranslate2.Generator, seq2seq -> ctranslate2.Translator, encoder -> ctranslate2.Encoder folder",
        CTRANSLATE2_DESCRIPTION,
        exact_precisions=("float32",),
    ),
    "onnx": ExportFormat(
        "onnx",
        ("gpt", "encoder", "seq2seq"),
        "GPT -> ONNX decoder with KV cache, encoder -> ONNX in a SentenceTransformer folder, seq2seq -> ONNX encoder and cached decoder graphs, for ONNX Runtime and transformers.js",
        ONNX_DESCRIPTION,
        exact_precisions=("fp32",),
    ),
    "web": ExportFormat(
        "web",
        ("gpt", "encoder", "seq2seq"),
        "GPT, encoder or translator -> a static web page running it with transformers.js (a Hugging Face static Space)",
        WEB_DESCRIPTION,
        exact_precisions=("fp32",),
    ),
}

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
    "NPM_REGISTRY",
    "TRANSFORMERS_JS_URL",
    "TRANSFORMERS_JS_VERSION",
    "WEB_BUNDLE",
    "WEB_CONTENT_SECURITY_POLICY",
    "ExportFormat",
    "ExportInfoField",
    "NpmFiles",
]
