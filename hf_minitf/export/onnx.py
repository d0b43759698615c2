"""Export a MiniTF encoder (a SentenceTransformer folder) to ONNX for ONNX Runtime.

The encoder is exported with `torch.onnx.export(dynamo=True)`, inputs `input_ids` and `attention_mask` with
dynamic batch and sequence axes, output `last_hidden_state`, into `onnx/model.onnx` of a copy of the
SentenceTransformer folder: where `SentenceTransformer(folder, backend="onnx")` looks for it. `quantize="int8"`
adds ONNX Runtime's dynamic 8-bit quantization of the matrix products (8-bit weights per channel, activations
quantized per call) as `onnx/model_quint8_avx2.onnx`, the name sentence-transformers gives its own export with
these settings (`model_kwargs={"file_name": "onnx/model_quint8_avx2.onnx"}` selects it).

sentence-transformers' ONNX backend runs through optimum, whose ONNX package (optimum-onnx 0.1.0, with optimum
2.3.0) requires transformers < 4.58: it cannot be installed beside transformers 5. The folder therefore also
carries a README with the plain ONNX Runtime code (tokenizer -> session -> masked mean -> normalize) that gives
the same embeddings without optimum; `minitf embed FOLDER` runs it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import torch

from hf_minitf.catalog.exports import EXPORTS
from hf_minitf.export.source import EXPORT_FILE, open_source_of
from hf_minitf.safety.output_folders import atomic_output_dir

QUANTIZED_FILE = "onnx/model_quint8_avx2.onnx"
MODEL_FILE = "onnx/model.onnx"
QUANTIZE_CHOICES = (None, "int8")


class LastHiddenState(torch.nn.Module):
    """The encoder's forward with only its last hidden state out: the ONNX graph's single output."""

    def __init__(self, encoder: torch.nn.Module) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def check_sentence_transformer_folder(folder: Path) -> None:
    """Refuse a SentenceTransformer folder whose modules are not Transformer -> Pooling(mean) -> Normalize: the
    ONNX graph holds the Transformer only, and the documented pooling is the mean."""
    modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    kinds = [module["type"].rsplit(".", 1)[-1] for module in modules]
    if kinds[:2] != ["Transformer", "Pooling"] or kinds[2:] not in ([], ["Normalize"]):
        raise ValueError(f"modules.json: the export needs Transformer -> Pooling(mean) [-> Normalize], got {kinds}.")
    pooling = json.loads((folder / modules[1]["path"] / "config.json").read_text(encoding="utf-8"))
    # sentence-transformers 6 writes "pooling_mode": "mean"; earlier versions one boolean per mode.
    mode = pooling.get("pooling_mode") or [
        key for key, value in pooling.items() if key.startswith("pooling_mode_") and value is True
    ]
    if mode not in ("mean", ["pooling_mode_mean_tokens"]):
        raise ValueError(
            f"{modules[1]['path']}/config.json: pooling_mode={mode!r}; the export reproduces mean pooling only."
        )
    if kinds[2:] != ["Normalize"]:
        raise ValueError(
            "modules.json: the export expects the Normalize module after Pooling (MiniTF's encoders "
            "give unit vectors); add it or save the model with save_sentence_transformer."
        )


def export_onnx(
    src: str | os.PathLike,
    out: str | os.PathLike,
    quantize: str | None = None,
    overwrite: bool = False,
    revision: str | None = None,
) -> Path:
    """Copy the MiniTF encoder at `src` (a SentenceTransformer folder, a MiniTF encoder folder or a Hub repo id,
    at `revision`)
    to `out` as a SentenceTransformer folder with `onnx/model.onnx` (float32) and, with `quantize="int8"`,
    `onnx/model_quint8_avx2.onnx`, plus `minitf_export.json` and a README section on running it.
    Returns the folder."""
    import onnxruntime  # noqa: F401 (a clear ImportError before any work when the engine is missing)

    if quantize not in QUANTIZE_CHOICES:
        raise ValueError(f"quantize must be None or 'int8', got {quantize!r}.")
    source = open_source_of(
        src,
        EXPORTS["onnx"].families,
        "the ONNX export",
        "GPT and seq2seq models go to CTranslate2: minitf export ctranslate2",
        revision,
    )
    model, tokenizer = source.load_model(torch.float32), source.load_tokenizer()
    inputs = [] if source.repo_id else [source.folder]
    with tempfile.TemporaryDirectory() as staging, atomic_output_dir(out, overwrite=overwrite, inputs=inputs) as work:
        if (source.folder / "modules.json").is_file():
            shutil.copytree(source.folder, work, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".cache", "onnx"))
        else:
            from hf_minitf.sentence_transformers_folder import save_sentence_transformer

            save_sentence_transformer(model, tokenizer, Path(staging) / "st")
            shutil.copytree(Path(staging) / "st", work, dirs_exist_ok=True)
        check_sentence_transformer_folder(work)
        (work / "onnx").mkdir()
        export_encoder_graph(model, work / MODEL_FILE)
        files = [MODEL_FILE]
        if quantize == "int8":
            quantize_int8(work / MODEL_FILE, work / QUANTIZED_FILE)
            files.append(QUANTIZED_FILE)
        (work / EXPORT_FILE).write_text(
            json.dumps(
                {
                    "engine": "onnxruntime",
                    "kind": "embedder",
                    "family": "minitf_encoder",
                    "files": files,
                    "default_file": files[-1],
                    "source": str(src),
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
        card = work / "README.md"
        previous = card.read_text(encoding="utf-8") if card.is_file() else ""
        card.write_text(previous.rstrip() + "\n\n" + onnx_readme_section(files) + "\n", encoding="utf-8")
    return Path(out)


def export_encoder_graph(model: torch.nn.Module, path: Path) -> None:
    """`torch.onnx.export(dynamo=True)` of the encoder: dynamic batch and sequence axes, one weight file."""
    example = torch.tensor([[2, 5, 6, 7, 3], [2, 8, 3, 0, 0]]) % model.config.vocab_size
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence", max=model.config.max_position_embeddings)
    with torch.no_grad(), warnings.catch_warnings():
        # The two names share their constraints across both inputs, which torch reports as a UserWarning.
        warnings.filterwarnings("ignore", message=".*will not be used, since it shares the same shape constraints")
        program = torch.onnx.export(
            LastHiddenState(model).eval(),
            (example, mask),
            dynamo=True,
            input_names=["input_ids", "attention_mask"],
            output_names=["last_hidden_state"],
            verbose=False,
            dynamic_shapes={"input_ids": {0: batch, 1: sequence}, "attention_mask": {0: batch, 1: sequence}},
        )
    program.save(str(path), external_data=False)


def quantize_int8(source: Path, target: Path) -> None:
    """ONNX Runtime's dynamic quantization of the matrix products: uint8 weights per output channel, uint8
    activations scaled per call (sentence-transformers' `avx2` settings). Signed int8 weights (its `avx512_vnni`
    settings) saturate the 16-bit sums of CPUs without VNNI: least cosine 0.98 on the MiniEmbed fixture, against
    0.99996 for these."""
    from onnxruntime.quantization import QuantType, quant_pre_process, quantize_dynamic

    prepared = target.with_name("prepared.onnx")
    quant_pre_process(str(source), str(prepared))  # shape inference and graph folding, as ONNX Runtime advises
    quantize_dynamic(prepared, target, weight_type=QuantType.QUInt8, per_channel=True, op_types_to_quantize=["MatMul"])
    prepared.unlink()


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

print(encode(["The weather is lovely today.", "It's so sunny outside!"]).shape)"""


def onnx_readme_section(files: list[str]) -> str:
    listed = ", ".join(f"`{name}`" for name in files)
    return f"""## ONNX Runtime

This folder holds the encoder as ONNX ({listed}; exported by `minitf export onnx`), inputs `input_ids` and
`attention_mask` (batch x sequence, both axes dynamic), output `last_hidden_state`. The sentence embedding is
its masked mean, L2-normalized, as the SentenceTransformer modules beside it compute it. `model.onnx` gives the
float32 model's embeddings (within 1e-5); the `quint8` file is ONNX Runtime's dynamic 8-bit quantization of the
matrix products (cosine to the float32 embeddings about 0.9999), faster on CPU.

`SentenceTransformer(folder, backend="onnx")` (with `model_kwargs={{"file_name": "{files[-1]}"}}` for the
int8 file) uses these files where optimum's ONNX package is installed; it does not support transformers 5 yet
(optimum-onnx 0.1.0 requires transformers < 4.58). Without optimum, ONNX Runtime alone
(`pip install onnxruntime transformers`):

```python
{ONNX_SNIPPET}
```

With hf_minitf installed, `minitf embed path/to/this/folder "some text"` runs {files[-1]} this way."""


__all__ = ["MODEL_FILE", "ONNX_SNIPPET", "QUANTIZED_FILE", "export_onnx"]
