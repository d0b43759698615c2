"""Export a MiniTF model to ONNX, for ONNX Runtime and transformers.js.

The graphs are written by `torch.onnx.export(dynamo=True)`; a GPT's and an encoder's as `onnx/model.onnx`, where
transformers.js, optimum and sentence-transformers look for them:

- GPT: one decoder graph with a KV cache (`onnx_decoder`), in a folder with the native architecture's config.json
  (gpt2 or gpt_neox, as `export native` writes it), the tokenizer and a generation config that stops at a learned
  position table; `minitf generate FOLDER` runs it.
- encoder: inputs `input_ids` and `attention_mask` (dynamic batch and sequence axes), output `last_hidden_state`,
  in a copy of the SentenceTransformer folder; `minitf embed FOLDER` runs it (tokenizer -> session -> masked mean
  -> normalize).
- seq2seq: an encoder graph and two decoder graphs with a KV cache, in optimum's seq2seq layout (`onnx_seq2seq`),
  beside the paired tokenizer and the generation config; `minitf translate FOLDER` runs them, with greedy or beam
  search as `generate()` searches.

`quantize` adds the variants transformers.js picks by its `dtype` option (`QUANTIZED_FILES`; a translator's graphs
each get theirs, named by `onnx_variant_file`): `q8` ONNX Runtime's
dynamic 8-bit quantization of the matrix products (for the encoder also under sentence-transformers' name for
these settings, `onnx/model_quint8_avx2.onnx`), `fp16` the graph in float16 (inputs and outputs too), `q4` ONNX
Runtime's 4-bit block quantization of the matrix weights (MatMulNBits, blocks of 32).

sentence-transformers' ONNX backend runs through optimum, whose ONNX package (optimum-onnx 0.1.0, with optimum
2.3.0) requires transformers < 4.58: it cannot be installed beside transformers 5. The folder's README therefore
also holds the plain ONNX Runtime code that gives the same outputs without optimum.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from hf_minitf.catalog.engines import ENGINE_CACHE_FOLDER
from hf_minitf.catalog.exports import ONNX_TRANSLATOR_GRAPHS, onnx_variant_file
from hf_minitf.catalog.limits import ONNX_QUANTIZATIONS
from hf_minitf.catalog.verification import SOURCE_HASHES_FIELD
from hf_minitf.export.formats.onnx import FORMAT
from hf_minitf.export.onnx_graph import export_graph
from hf_minitf.export.source import (
    EXPORT_FILE,
    accepts_src,
    check_sentence_transformer_folder,
    open_source_of,
)
from hf_minitf.safety.output_folders import atomic_output_dir, output_folder, weights_bytes

if TYPE_CHECKING:
    from hf_minitf.modeling.modeling_minitf_encoder import MiniTFEncoderModel

MODEL_FILE = "onnx/model.onnx"
# The file of each variant, named as transformers.js looks for its `dtype` option (q8, fp16, q4).
QUANTIZED_FILES = {name: onnx_variant_file(MODEL_FILE, name) for name in ONNX_QUANTIZATIONS}
# sentence-transformers' name for the q8 settings (`export_dynamic_quantized_onnx_model(..., "avx2")`).
SENTENCE_TRANSFORMERS_Q8_FILE = "onnx/model_quint8_avx2.onnx"
# What the card says of each file, by transformers.js's dtype.
FILE_NOTES = {
    "fp32": "float32: the MiniTF model's outputs",
    "q8": "8-bit weights (uint8 per output channel), activations quantized per call; about 4x smaller",
    "fp16": "float16 weights and computation (inputs and outputs too); half the size",
    "q4": "4-bit weights in blocks of 32, float32 activations; the smallest, and the furthest from float32",
}
ONNX_USAGE_SECTION = "onnx_usage"
"""The marked section of an encoder export's card holding its ONNX Runtime and transformers.js code."""
TRANSFORMERS_JS_TEMPLATE = "onnx_transformers_js.md"  # its transformers.js section, also added to an encoder's card


class LastHiddenState(torch.nn.Module):
    """The encoder's forward with only its last hidden state out: the ONNX graph's single output."""

    def __init__(self, encoder: MiniTFEncoderModel) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


@accepts_src
def export_onnx(
    source: str | os.PathLike,
    out: str | os.PathLike,
    quantize: str | Sequence[str] | None = (),
    overwrite: bool = False,
    revision: str | None = None,
    license: str | None = None,
    source_repo: str | None = None,
) -> Path:
    """Export the MiniTF model at `source` (a folder or a Hub repo id, at `revision`) to the folder `out`:
    `onnx/model.onnx` (float32; a translator's three graphs, `ONNX_TRANSLATOR_GRAPHS`), the variants named in
    `quantize` (`ONNX_QUANTIZATIONS`; one name or several),
    `minitf_export.json` and a model card on running it, with the source card's license (`license` overrides it)
    and held-out figures, naming the source by `source_repo` (the Hub repo it is published as; default: `source`
    when that is a repo id) as its `base_model`. Returns the folder; nothing is written on an error.

    A GPT folder holds the native config.json, tokenizer and generation config beside the graph; an encoder folder
    is a copy of its SentenceTransformer folder; a translator's holds its paired tokenizer and generation config.
    Refused with a ValueError: what `export native` refuses for a GPT, pooling other than mean for an encoder, a
    translator whose generation the cached graphs and the runner cannot reproduce (`check_translator`).
    """
    import onnx  # noqa: F401 (a clear ImportError before any work when the engines extra is missing)
    import onnxruntime  # noqa: F401
    import onnxscript  # noqa: F401 (torch's ONNX exporter)

    variants = quantization_names(quantize)
    opened = open_source_of(source, FORMAT.families, "the ONNX export", "every MiniTF family", revision)
    model, tokenizer = opened.load_model(torch.float32), opened.load_tokenizer()
    inputs = [] if opened.repo_id else [opened.folder]
    target = output_folder(out, overwrite=overwrite, inputs=inputs)
    target.check_space(weights_bytes(model.parameters()), "the float32 graph")
    with tempfile.TemporaryDirectory() as staging, atomic_output_dir(target) as work:
        if opened.family == "gpt":
            from hf_minitf.export.onnx_decoder import write_decoder_folder

            write_decoder_folder(opened, model, tokenizer, work, MODEL_FILE)
        elif opened.family == "seq2seq":
            from hf_minitf.export.onnx_seq2seq import write_translator_folder

            write_translator_folder(model, tokenizer, work)
        else:
            write_encoder_folder(opened, model, tokenizer, work, Path(staging))
        graphs = list(ONNX_TRANSLATOR_GRAPHS.values()) if opened.family == "seq2seq" else [MODEL_FILE]
        files = list(graphs)
        for name in variants:
            for graph in graphs:
                QUANTIZERS[name](work / graph, work / onnx_variant_file(graph, name))
                files.append(onnx_variant_file(graph, name))
            if name == "q8" and opened.family == "encoder":
                shutil.copyfile(work / QUANTIZED_FILES[name], work / SENTENCE_TRANSFORMERS_Q8_FILE)
                files.append(SENTENCE_TRANSFORMERS_Q8_FILE)
        info = {"engine": "onnxruntime", "family": opened.config["model_type"], "files": files}
        info |= {"source": opened.recorded, SOURCE_HASHES_FIELD: opened.hashes()}
        if opened.family == "gpt":
            info |= {
                "kind": "generator",
                "default_file": MODEL_FILE,  # MiniTF's greedy tokens; the variants can change some
                "position_embedding_type": model.config.position_embedding_type,
                "max_position_embeddings": model.config.max_position_embeddings,
            }
        elif opened.family == "seq2seq":
            info |= {"kind": "translator", "max_position_embeddings": model.config.max_position_embeddings}
        else:
            info |= {"kind": "embedder", "default_file": QUANTIZED_FILES["q8"] if "q8" in variants else MODEL_FILE}
        (work / EXPORT_FILE).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        write_onnx_card(work, Path(out), opened, model.config, files, license, source_repo)
    return Path(out)


def quantization_names(quantize: str | Sequence[str] | None) -> list[str]:
    """The variants asked for, in `ONNX_QUANTIZATIONS` order; a ValueError naming an unknown one."""
    names = [quantize] if isinstance(quantize, str) else list(quantize or ())
    unknown = [name for name in names if name not in ONNX_QUANTIZATIONS]
    if unknown:
        raise ValueError(f"quantize takes {', '.join(ONNX_QUANTIZATIONS)}; got {unknown[0]!r}.")
    return [name for name in ONNX_QUANTIZATIONS if name in names]


def write_encoder_folder(source, model: MiniTFEncoderModel, tokenizer, work: Path, staging: Path) -> None:
    """The encoder's SentenceTransformer folder (copied, or saved from a bare MiniTF encoder) with its graph."""
    if (source.folder / "modules.json").is_file():
        check_sentence_transformer_folder(source.folder)  # errors name the source's files, not the copy's
        # Not the folder's caches: the Hub's, its engine exports (`minitf serve`'s, which this export may be making)
        ignored = shutil.ignore_patterns(".cache", "onnx", ENGINE_CACHE_FOLDER)
        shutil.copytree(source.folder, work, dirs_exist_ok=True, ignore=ignored)
    else:
        from hf_minitf.sentence_transformers_folder import save_sentence_transformer

        save_sentence_transformer(model, tokenizer, staging / "st")
        shutil.copytree(staging / "st", work, dirs_exist_ok=True)
        check_sentence_transformer_folder(work)
    (work / MODEL_FILE).parent.mkdir()
    export_encoder_graph(model, work / MODEL_FILE)


def export_encoder_graph(model: MiniTFEncoderModel, path: Path) -> None:
    """`torch.onnx.export(dynamo=True)` of the encoder: dynamic batch and sequence axes, one weight file."""
    example = torch.tensor([[2, 5, 6, 7, 3], [2, 8, 3, 0, 0]]) % model.config.vocab_size
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence", max=model.config.max_position_embeddings)
    export_graph(
        LastHiddenState(model),
        (example, mask),
        ["input_ids", "attention_mask"],
        ["last_hidden_state"],
        {"input_ids": {0: batch, 1: sequence}, "attention_mask": {0: batch, 1: sequence}},
        path,
    )


def quantize_q8(source: Path, target: Path) -> None:
    """ONNX Runtime's dynamic quantization of the matrix products: uint8 weights per output channel, uint8
    activations scaled per call (sentence-transformers' `avx2` settings). Signed int8 weights (its `avx512_vnni`
    settings, and transformers.js's own q8 script) saturate the 16-bit sums of CPUs without VNNI: least cosine 0.98
    on the MiniEmbed fixture, against 0.99996 for these."""
    from onnxruntime.quantization import QuantType, quant_pre_process, quantize_dynamic

    prepared = target.with_name("prepared.onnx")
    quant_pre_process(str(source), str(prepared))  # shape inference and graph folding, as ONNX Runtime advises
    quantize_dynamic(prepared, target, weight_type=QuantType.QUInt8, per_channel=True, op_types_to_quantize=["MatMul"])
    prepared.unlink()


def convert_fp16(source: Path, target: Path) -> None:
    """The graph in float16, inputs and outputs included (the cache too), by ONNX Runtime's converter, which keeps
    the ops it knows to lose precision in float16 in float32."""
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    onnx.save(convert_float_to_float16(onnx.load(str(source))), str(target))


def quantize_q4(source: Path, target: Path) -> None:
    """ONNX Runtime's 4-bit weight-only quantization of the matrix products (MatMulNBits): symmetric blocks of 32
    weights with a float scale each, as transformers.js's q4 files hold them; activations stay float32."""
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    quantizer = MatMulNBitsQuantizer(onnx.load(str(source)), block_size=32, is_symmetric=True)
    quantizer.process()
    quantizer.model.save_model_to_file(str(target), use_external_data_format=False)


# The writer of each variant (ONNX_QUANTIZATIONS), from model.onnx.
QUANTIZERS = {"q8": quantize_q8, "fp16": convert_fp16, "q4": quantize_q4}


ONNX_SNIPPET = """import numpy as np
import onnxruntime
from transformers import PreTrainedTokenizerFast

folder = "path/to/this/folder"
tokenizer = PreTrainedTokenizerFast.from_pretrained(folder)  # tokenizer.json: no model code involved
session = onnxruntime.InferenceSession(f"{folder}/onnx/model.onnx", providers=["CPUExecutionProvider"])

def encode(texts):
    batch = tokenizer(texts, padding=True, truncation=True, return_tensors="np")
    mask = batch["attention_mask"].astype(np.int64)
    (states,) = session.run(["last_hidden_state"], {"input_ids": batch["input_ids"].astype(np.int64),
                                                      "attention_mask": mask})
    pooled = (states * mask[..., None]).sum(1) / np.clip(mask.sum(1, keepdims=True), 1e-9, None)
    return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)

print(encode(TEXTS).shape)"""
"""The encoder card's ONNX Runtime code; TEXTS stands for the card's example texts (a JSON list)."""


def onnx_readme_section(files: list[str], examples: list[str]) -> str:
    """The encoder card's ONNX Runtime subsection of its usage: the files, sentence-transformers' ONNX backend, the
    plain code run on `examples`."""
    from hf_minitf.cards.exports import shell_word

    listed = ", ".join(f"`{name}`" for name in files)
    default = QUANTIZED_FILES["q8"] if QUANTIZED_FILES["q8"] in files else MODEL_FILE
    quantized = (
        f" `{SENTENCE_TRANSFORMERS_Q8_FILE}` (the same file as `{QUANTIZED_FILES['q8']}`) is ONNX Runtime's dynamic "
        "8-bit quantization of the matrix products (cosine to the float32 embeddings about 0.9999), faster on CPU."
        if SENTENCE_TRANSFORMERS_Q8_FILE in files
        else ""
    )
    return f"""### ONNX Runtime

This folder holds the encoder as ONNX ({listed}; exported by `minitf export onnx`), inputs `input_ids` and
`attention_mask` (batch x sequence, both axes dynamic), output `last_hidden_state`. The sentence embedding is
its masked mean, L2-normalized, as the SentenceTransformer modules beside it compute it. `model.onnx` gives the
float32 model's embeddings (within 1e-5).{quantized}

`SentenceTransformer(folder, backend="onnx")` (with `model_kwargs={{"file_name": "{SENTENCE_TRANSFORMERS_Q8_FILE}"}}`
for the 8-bit file) uses these files where optimum's ONNX package is installed; it does not support transformers 5
yet (optimum-onnx 0.1.0 requires transformers < 4.58). Without optimum, ONNX Runtime alone
(`pip install onnxruntime transformers`):

```python
{ONNX_SNIPPET.replace("TEXTS", json.dumps(examples[:2]))}
```

With hf_minitf installed, `minitf embed path/to/this/folder {shell_word(examples[0])}` runs `{default}` this way."""


def transformers_js_section(family: str, out: Path, files: list[str], config, examples: list[str]) -> str:
    """The card's transformers.js section: the file of each dtype, Node and browser code run on `examples` (the
    source's example texts), what it does not do."""
    import jinja2

    from hf_minitf.cards import card_template
    from hf_minitf.catalog.exports import TRANSFORMERS_JS_URL, TRANSFORMERS_JS_VERSION

    dtypes = {MODEL_FILE: "fp32", **{file: dtype for dtype, file in QUANTIZED_FILES.items()}}
    learned = family == "gpt" and config.position_embedding_type == "learned"
    return jinja2.Template(card_template(TRANSFORMERS_JS_TEMPLATE), keep_trailing_newline=True).render(
        family=family,
        variants=[(dtypes[name], name, FILE_NOTES[dtypes[name]]) for name in files if name in dtypes],
        name=out.name,
        examples=examples,
        new_tokens=20,
        max_length=config.max_position_embeddings if learned else None,
        browser_dtype="q8" if QUANTIZED_FILES["q8"] in files else "fp32",  # the smaller file where there is one
        transformers_js_url=TRANSFORMERS_JS_URL,
        transformers_js_version=TRANSFORMERS_JS_VERSION,
    )


def write_onnx_card(
    work: Path, out: Path, source, config, files: list[str], license: str | None = None, source_repo: str | None = None
) -> None:
    """README.md of the folder being written in `work` (to become `out`): a GPT gets its card from
    model_cards/onnx_export.md, a translator from model_cards/onnx_translator_export.md; an encoder's
    SentenceTransformer card, naming this folder, gets the ONNX Runtime and transformers.js code in its usage. All
    carry the source card's license (or `license`) and held-out figures (`export_card_data`) and name the source by
    `source_repo` (else its own repo id) as their `base_model`."""
    from huggingface_hub import ModelCard

    from hf_minitf.cards import (
        export_card,
        export_card_data,
        insert_section_after,
        local_model_id,
        model_examples,
        source_naming,
        write_model_card,
    )

    family = source.family
    carried = export_card_data(source.folder, license, model_name=out.name)
    named = source_naming(family, source.repo_id, source.revision, source_repo)
    examples = model_examples(source.folder)
    if family == "seq2seq":
        from hf_minitf.export.onnx_seq2seq import write_translator_card

        write_translator_card(work, out, config, files, carried, named, examples)
        return
    js = transformers_js_section(family, out, files, config, examples)
    card = work / "README.md"
    if family == "encoder":
        # the copied SentenceTransformer card, its snippets loading this folder (not the source), with the ONNX
        # Runtime and transformers.js code as subsections of its one usage section
        write_model_card(work, model_id=local_model_id(out))
        previous = ModelCard.load(card)
        data = previous.data
        for key, value in carried.items():
            data[key] = value
        data["base_model"] = named["source_repo"]
        usage = f"{onnx_readme_section(files, examples)}\n\n{js.replace('## ', '### ', 1)}"
        text = insert_section_after(previous.text, "usage", ONNX_USAGE_SECTION, usage)
        card.write_text(f"---\n{data.to_yaml()}\n---\n\n{text.strip()}\n", encoding="utf-8")
        return
    from hf_minitf.catalog.exports import NATIVE_ARCHITECTURES, NATIVE_MODEL_TYPES
    from hf_minitf.export.onnx_decoder import ONNXRUNTIME_SNIPPET

    kind = config.position_embedding_type
    export_card(
        FORMAT.card_template,
        library_name="transformers.js",
        pipeline_tag="text-generation",
        tags=["onnx", NATIVE_MODEL_TYPES[kind]],
        carried=carried,
        **named,
        model_title=f"{out.name}: a MiniTF gpt model as ONNX",
        architecture=NATIVE_ARCHITECTURES[kind],
        model_type=NATIVE_MODEL_TYPES[kind],
        config=config,
        head_dim=config.hidden_size // config.num_attention_heads,
        examples=examples,
        transformers_js=js.strip(),
        onnxruntime_snippet=ONNXRUNTIME_SNIPPET.replace("PROMPT", json.dumps(examples[0])),
    ).save(card)


__all__ = [
    "MODEL_FILE",
    "ONNX_SNIPPET",
    "QUANTIZED_FILES",
    "QUANTIZERS",
    "SENTENCE_TRANSFORMERS_Q8_FILE",
    "export_onnx",
    "quantization_names",
]
