"""llama.cpp itself (llama-cpp-python) runs the GGUF exports: greedy tokens of f32, f16 and q8_0 equal MiniTF's for
100 tokens, for character and BPE tokenizers, learned and rotary positions. llama.cpp runs in its own process (its
idle threads would slow torch in this one). Marked `engines`: `pip install llama-cpp-python`, `pytest -m engines`.

The f32 file is compared with the MiniTF model itself. The random test models have near-tied top logits, so the
rounding of f16 / q8_0 flips greedy choices: those files are compared with MiniTF running (in fp32) the same rounded
weights, every matrix the file stores rounded as it is stored (norms and biases stay f32), and a remaining difference
must be a near tie (see TIE_MARGIN)."""

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from factories import make_gpt_sources, minitf_greedy, prompt_ids
from gguf import GGMLQuantizationType, quants
from transformers import AutoTokenizer

from hf_minitf import MiniTFGPTForCausalLM
from hf_minitf.export import export_gguf

pytestmark = [
    pytest.mark.engines,
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None,
        reason="llama-cpp-python is not installed (pip install llama-cpp-python)",
    ),
]
NEW_TOKENS = 100
# Rotary models run past their context as MiniTF does; learned-position models fill theirs (80 positions; the char
# GPT fixture 16).
CASES = {
    "char_gpt": 12,
    "bpe_learned": 70,
    "bpe_rope_untied": NEW_TOKENS,
    "char_rope_no_bias": NEW_TOKENS,
    "frawdllm_rope": NEW_TOKENS,
    "char_rope_rotate_half": NEW_TOKENS,
}

LLAMA_RUN = """
import json, sys
from llama_cpp import Llama
results = {}
for case in json.loads(sys.argv[1]):
    llm = Llama(model_path=case["path"], n_ctx=256, n_threads=1, verbose=False)
    llm.eval(case["prompt"])
    tokens = []
    for _ in range(case["new_tokens"]):
        token = llm.sample(temp=0.0, top_k=1)
        tokens.append(int(token))
        llm.eval([token])
    results[case["path"]] = {"tokens": tokens, "text_ids": [llm.tokenize(text.encode(), add_bos=False, special=False)
                                                          for text in case["texts"]]}
print(json.dumps(results))
"""
TEXTS = ["hello world, the quick brown fox", "the lazy dog.\n"]
# llama.cpp also rounds activations (to f16 beside f16 weights, to 8-bit blocks beside q8_0 ones), which MiniTF with
# rounded weights does not: where its greedy tokens still differ, each of llama.cpp's choices, MiniTF fed llama.cpp's
# tokens, must be MiniTF's top token or within this fraction of the largest |logit| of it (ties seen: f16 0.0003,
# q8_0 0.011), at no more than MAX_FLIPS of the steps (seen: 2).
TIE_MARGIN = {"f16": 0.005, "q8_0": 0.05}
MAX_FLIPS = 5


def _rounded(matrix: np.ndarray, dtype: str) -> np.ndarray:
    """A matrix as the GGUF stores it, read back: f16, or q8_0 (blocks of 32 along a row; rows of another length
    are stored f16)."""
    if dtype == "q8_0" and matrix.shape[-1] % 32 == 0:
        return quants.dequantize(quants.quantize(matrix, GGMLQuantizationType.Q8_0), GGMLQuantizationType.Q8_0)
    return matrix.astype(np.float16).astype(np.float32)


def rounded_copy(source, dtype: str, folder):
    """The MiniTF folder `source` saved at `folder` with every matrix rounded as a `dtype` GGUF stores it.

    Rounding works row by row, so the exporter's row permutation (rotary q/k) commutes with it; a tied head is one
    parameter, rounded once like the file's token_embd and output.
    """
    model = MiniTFGPTForCausalLM.from_pretrained(source).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.ndim == 2:
                rounded = _rounded(parameter.detach().numpy().astype(np.float32), dtype)
                parameter.copy_(torch.from_numpy(rounded.reshape(parameter.shape)))
    model.save_pretrained(folder)
    return folder


def forced_gaps(folder, prompt: list[int], tokens: list[int]) -> list[tuple[float, float]]:
    """MiniTF (fp32) fed the prompt and llama.cpp's tokens: at each step, (top logit - logit of llama.cpp's token,
    largest |logit|)."""
    model = MiniTFGPTForCausalLM.from_pretrained(folder).eval()
    with torch.no_grad():
        logits = model(torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1 : -1]
    chosen = logits.gather(1, torch.tensor(tokens)[:, None])[:, 0]
    return list(zip((logits.max(1).values - chosen).tolist(), logits.abs().max(1).values.tolist()))


@pytest.fixture(scope="module")
def llama_results(tmp_path_factory):
    root = tmp_path_factory.mktemp("engines")
    sources = make_gpt_sources(root / "sources")
    cases, expected = [], {}
    for name, new_tokens in CASES.items():
        prompt = prompt_ids(sources[name])
        tokenizer = AutoTokenizer.from_pretrained(sources[name])
        for dtype in ("f32", "f16", "q8_0"):
            path = str(export_gguf(sources[name], root / f"{name}.{dtype}.gguf", dtype=dtype))
            reference_folder = (
                sources[name] if dtype == "f32" else rounded_copy(sources[name], dtype, root / f"{name}.{dtype}.minitf")
            )
            reference = minitf_greedy(reference_folder, prompt, new_tokens)
            cases.append({"path": path, "prompt": prompt, "new_tokens": new_tokens, "texts": TEXTS})
            # llama.cpp drops what the vocabulary lacks, where the tokenizer gives its unknown token (the FrawdLLM
            # fixture's vocabulary holds 92 of the 256 bytes)
            text_ids = [[i for i in tokenizer(text).input_ids if i != tokenizer.unk_token_id] for text in TEXTS]
            expected[name, dtype] = (path, reference, text_ids, reference_folder, prompt)
    results = {}
    for case in cases:  # one llama.cpp process per file
        completed = subprocess.run(
            [sys.executable, "-c", LLAMA_RUN, json.dumps([case])], capture_output=True, text=True, timeout=300
        )
        assert completed.returncode == 0, completed.stderr[-3000:]
        results |= json.loads(completed.stdout.strip().splitlines()[-1])
    return expected, results


@pytest.mark.parametrize("dtype", ["f32", "f16", "q8_0"])
@pytest.mark.parametrize("name", list(CASES))
def test_llama_cpp_greedy_tokens_equal_minitf(llama_results, name, dtype):
    expected, results = llama_results
    path, reference, text_ids, reference_folder, prompt = expected[name, dtype]
    tokens = results[path]["tokens"]
    if dtype == "f32" or tokens == reference:
        assert tokens == reference
    else:  # a near tie flipped by llama.cpp's rounded activations: every other step must be MiniTF's own choice
        gaps = forced_gaps(reference_folder, prompt, tokens)
        flips = {step: round(gap, 5) for step, (gap, scale) in enumerate(gaps) if gap > 0}
        assert len(flips) <= MAX_FLIPS, flips
        assert all(gap <= TIE_MARGIN[dtype] * max(1.0, scale) for gap, scale in gaps), flips
    assert results[path]["text_ids"] == text_ids  # llama.cpp's tokenizer from the file = the model's tokenizer
