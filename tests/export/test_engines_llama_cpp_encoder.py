"""llama.cpp itself (llama-cpp-python's `Llama(path, embedding=True)`) runs the encoder GGUF exports: the file's
WordPiece tokenizer gives the MiniTF tokenizer's ids, and the mean-pooled, normalized embeddings of f32 and f16
files keep a cosine of at least 0.9999 to `SentenceTransformer.encode`'s, text by text and in one batch, on the
MiniEmbed fixture, a learned-position encoder and a quickstart-size one. llama.cpp runs in its own process (its idle
threads would slow torch in this one). Marked `engines`: `pip install "hf-minitf[llama]"`, `pytest -m engines`."""

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest
from factories import ENCODER_ACCENTED_TEXT, ENCODER_KINDS, engine_encoder, workspace
from helpers import ENCODER_TEXTS
from sentence_transformers import SentenceTransformer
from transformers import AutoTokenizer

from hf_minitf.export import export_gguf

pytestmark = [
    pytest.mark.engines,
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None,
        reason='llama-cpp-python is not installed (pip install "hf-minitf[llama]")',
    ),
]
TEXTS = [*ENCODER_TEXTS, ENCODER_ACCENTED_TEXT, "Déjà vu (again) - 42 TIMES..."]
# The least cosine to SentenceTransformer's embeddings. Measured over the three encoders: f32 0.9999998 and f16
# 0.9999992 (llama.cpp's GELU is the tanh form read from an f16 table; f16 weights round more), q8_0 0.99958 (the
# learned-position encoder's wide init; the MiniEmbed fixture 0.99996).
LEAST_COSINE = {"f32": 0.9999, "f16": 0.9999, "q8_0": 0.999}

LLAMA_EMBED = """
import json, sys
from llama_cpp import Llama
results = {}
for case in json.loads(sys.argv[1]):
    # The whole context in one batch: non-causal attention needs every token of a text in one ubatch.
    size = case["context"]
    llm = Llama(model_path=case["path"], embedding=True, n_ctx=size, n_batch=size, n_ubatch=size, n_threads=1,
                verbose=False)
    results[case["path"]] = {
        "ids": [llm.tokenize(text.encode()) for text in case["texts"]],
        "each": [llm.embed(text, normalize=True) for text in case["texts"]],
        "batch": llm.embed(case["texts"], normalize=True),
        "pooling": llm.pooling_type(),
    }
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def llama_runs() -> dict[str, dict]:
    """llama.cpp's ids and embeddings of TEXTS for each encoder and dtype, all in one llama.cpp process."""
    cases = []
    for kind in ENCODER_KINDS:
        context = json.loads((engine_encoder(kind) / "config.json").read_text())["max_position_embeddings"]
        for dtype in LEAST_COSINE:
            path = export_gguf(engine_encoder(kind), workspace() / f"encoder_{kind}_{dtype}.gguf", dtype=dtype)
            cases.append({"name": f"{kind}-{dtype}", "path": str(path), "context": context, "texts": TEXTS})
    result = subprocess.run(
        [sys.executable, "-c", LLAMA_EMBED, json.dumps(cases)], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    runs = json.loads(result.stdout.strip().splitlines()[-1])
    return {case["name"]: runs[case["path"]] for case in cases}


@pytest.mark.parametrize("kind", ENCODER_KINDS)
def test_the_files_tokenizer_gives_the_minitf_ids(llama_runs, kind):
    tokenizer = AutoTokenizer.from_pretrained(engine_encoder(kind))
    expected = [tokenizer(text).input_ids for text in TEXTS]
    for dtype in LEAST_COSINE:
        assert llama_runs[f"{kind}-{dtype}"]["ids"] == expected


@pytest.mark.parametrize("dtype", list(LEAST_COSINE))
@pytest.mark.parametrize("kind", ENCODER_KINDS)
def test_embeddings_keep_the_direction_of_sentence_transformers(llama_runs, kind, dtype):
    run = llama_runs[f"{kind}-{dtype}"]
    assert run["pooling"] == 1  # LLAMA_POOLING_TYPE_MEAN, read from the file
    expected = SentenceTransformer(str(engine_encoder(kind))).encode(TEXTS)
    for embeddings in (np.array(run["each"]), np.array(run["batch"])):
        assert embeddings.shape == expected.shape
        cosines = (embeddings * expected).sum(axis=1) / np.linalg.norm(embeddings, axis=1)
        assert cosines.min() >= LEAST_COSINE[dtype], cosines
    if dtype == "f32":  # exact weights: what is left is llama.cpp's own rounding (GELU's tanh form)
        assert np.abs(np.array(run["batch"]) - expected).max() <= 1e-3
