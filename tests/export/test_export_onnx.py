"""ONNX exports of the encoder (the converted MiniEmbed fixture): float32 embeddings within 1e-5 of the
SentenceTransformer's and of the original MiniEmbed's, int8 at cosine >= 0.9999, any batch and length, the README's
optimum-free ONNX Runtime code gives the same vectors; refusals write nothing. ONNX Runtime runs in subprocesses."""

import json
import re

import numpy as np
import pytest
from factories import DATA, model_folder, onnx_export
from helpers import run_python
from safetensors.torch import load_file
from sentence_transformers import SentenceTransformer
from transformers_js import NodeRunner

from hf_minitf.export.onnx import MODEL_FILE, QUANTIZED_FILES, SENTENCE_TRANSFORMERS_Q8_FILE, export_onnx

TEXTS = [
    "the cat sat on the mat",
    "hello",
    "a much longer sentence about the weather, which is lovely today!",
    "what is the time",
    "unknownword zzz qqq",
    "the the the the the the the the the the the the the the the",
]


def onnx_states(folder, file_name: str, input_ids, attention_mask) -> np.ndarray:
    """`last_hidden_state` of the ONNX file for given ids (subprocess)."""
    return np.array(
        run_python(f"""
        import json, numpy as np, onnxruntime
        session = onnxruntime.InferenceSession({str(folder / file_name)!r}, providers=["CPUExecutionProvider"])
        (states,) = session.run(["last_hidden_state"], {{"input_ids": np.array({input_ids!r}, dtype=np.int64),
                                                       "attention_mask": np.array({attention_mask!r}, dtype=np.int64)}})
        print(json.dumps(states.tolist()))
    """)
    )


def readme_embeddings(folder, file_name: str, texts: list[str]) -> np.ndarray:
    """The README's ONNX Runtime code, run as written on `texts` (subprocess without optimum)."""
    section = (folder / "README.md").read_text().split("## ONNX Runtime")[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    code = code.replace("path/to/this/folder", str(folder)).replace("onnx/model.onnx", file_name)
    code = re.sub(r"print\(encode\(.*\)\.shape\)", f"import json\nprint(json.dumps(encode({texts!r}).tolist()))", code)
    return np.array(run_python(code))


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    return SentenceTransformer(str(model_folder("encoder", "miniembed"))).encode(TEXTS)


VARIANTS = ("q8", "fp16", "q4")


def test_float32_embeddings_equal_sentence_transformers(reference):
    folder = onnx_export(VARIANTS)
    embeddings = readme_embeddings(folder, MODEL_FILE, TEXTS)
    assert np.abs(embeddings - reference).max() <= 1e-5
    files = {MODEL_FILE, *QUANTIZED_FILES.values(), SENTENCE_TRANSFORMERS_Q8_FILE}
    assert {path.relative_to(folder).as_posix() for path in folder.rglob("*.onnx")} == files
    # transformers.js's q8 file and sentence-transformers' name for the same settings hold the same graph
    assert (folder / QUANTIZED_FILES["q8"]).read_bytes() == (folder / SENTENCE_TRANSFORMERS_Q8_FILE).read_bytes()
    assert {"modules.json", "config.json", "tokenizer.json", "1_Pooling", "2_Normalize"} <= {
        path.name for path in folder.iterdir()
    }
    assert "optimum" in (folder / "README.md").read_text()


# The least cosine of each variant's embeddings to the float32 model's (measured on this fixture: q8 0.99996,
# fp16 0.9999999, q4 0.995).
LEAST_COSINE = {"q8": 0.9999, "fp16": 0.99999, "q4": 0.99}


@pytest.mark.parametrize("variant", VARIANTS)
def test_quantized_embeddings_keep_the_direction(reference, variant):
    embeddings = readme_embeddings(onnx_export(VARIANTS), QUANTIZED_FILES[variant], TEXTS)
    cosines = (embeddings * reference).sum(axis=1) / np.linalg.norm(embeddings, axis=1)
    assert cosines.min() >= LEAST_COSINE[variant]
    assert np.abs(embeddings - reference).max() > 1e-7  # not the float32 graph under another name


def test_states_match_the_original_miniembed_at_any_batch_and_length():
    """The fixture's ids (right-padded batch of 3, and each row alone without padding) through model.onnx give the
    original MiniEmbed's hidden states (at real tokens) and sentence embeddings."""
    io = load_file(DATA / "minitf_embedding" / "io.safetensors")
    ids, mask = io["input_ids"].tolist(), io["attention_mask"].tolist()
    folder = onnx_export(VARIANTS)
    states = onnx_states(folder, MODEL_FILE, ids, mask)
    real = np.array(mask, dtype=bool)
    expected = io["last_hidden_state"].numpy()
    assert np.abs(states[real] - expected[real]).max() <= 1e-5 * max(1.0, np.abs(expected).max())
    pooled = (states * real[..., None]).sum(1) / real.sum(1, keepdims=True)
    pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
    assert np.abs(pooled - io["sentence_embedding"].numpy()).max() <= 1e-5
    length = int(real[1].sum())
    alone = onnx_states(folder, MODEL_FILE, [ids[1][:length]], [[1] * length])
    assert np.abs(alone[0] - states[1][:length]).max() <= 1e-5


def test_refusals_write_nothing(tmp_path):
    source = tmp_path / "cls_pooling"
    import shutil

    shutil.copytree(model_folder("encoder", "miniembed"), source)
    pooling = json.loads((source / "1_Pooling" / "config.json").read_text())
    pooling["pooling_mode"] = "cls"
    (source / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    with pytest.raises(ValueError, match="pooling_mode='cls'"):
        export_onnx(source, tmp_path / "out")
    with pytest.raises(ValueError, match="quantize takes q8, fp16, q4; got 'int8'"):
        export_onnx(source, tmp_path / "out", quantize="int8")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["cls_pooling"]


def test_transformers_js_in_node_embeds_the_miniembed_fixture_as_sentence_transformers(node_modules):
    """The converted MiniEmbed fixture's export in transformers.js (mean pooling, normalized): within 1e-5 of
    `SentenceTransformer.encode` in float32, cosine >= 0.9999 for the 8-bit file; MiniEmbed's tokenizer included."""
    sentences = ["the cat sat on the mat.", "A dog, in the park!", "the the the", "unknownword"]
    reference = SentenceTransformer(str(model_folder("encoder", "miniembed"))).encode(
        sentences, normalize_embeddings=True
    )
    with NodeRunner("embed", onnx_export(), "fp32") as node:
        embeddings = np.array(node.ask({"sentences": sentences})["result"])
    assert np.abs(embeddings - reference).max() <= 1e-5
    with NodeRunner("embed", onnx_export(), "q8") as node:
        quantized = np.array(node.ask({"sentences": sentences})["result"])
    assert (quantized * reference).sum(axis=1).min() >= 0.9999
