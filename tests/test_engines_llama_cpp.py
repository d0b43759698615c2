"""llama.cpp itself (llama-cpp-python) runs the GGUF exports: greedy tokens of f32, f16 and q8_0 equal MiniTF's for
100 tokens, for character and BPE tokenizers, learned and rotary positions. llama.cpp runs in its own process (its
idle threads would slow torch in this one). Marked `engines`: `pip install llama-cpp-python`, `pytest -m engines`."""

import importlib.util
import json
import subprocess
import sys

import pytest

from export_models import make_gpt_sources, minitf_greedy, prompt_ids
from hf_minitf.export import export_gguf

pytestmark = [
    pytest.mark.engines,
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None,
                       reason="llama-cpp-python is not installed (pip install llama-cpp-python)"),
]
NEW_TOKENS = 100
# Rotary models run past their context as MiniTF does; learned-position models fill theirs (80 positions; the char
# GPT fixture 16).
CASES = {"char_gpt": 12, "bpe_learned": 70, "bpe_rope_untied": NEW_TOKENS, "char_rope_no_bias": NEW_TOKENS,
         "frawdllm_rope": NEW_TOKENS, "char_rope_rotate_half": NEW_TOKENS}

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


@pytest.fixture(scope="module")
def llama_results(tmp_path_factory):
    root = tmp_path_factory.mktemp("engines")
    sources = make_gpt_sources(root / "sources")
    cases, expected = [], {}
    for name, new_tokens in CASES.items():
        prompt = prompt_ids(sources[name])
        reference = minitf_greedy(sources[name], prompt, new_tokens)
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(sources[name])
        for dtype in ("f32", "f16", "q8_0"):
            path = str(export_gguf(sources[name], root / f"{name}.{dtype}.gguf", dtype=dtype))
            cases.append({"path": path, "prompt": prompt, "new_tokens": new_tokens, "texts": TEXTS})
            # llama.cpp drops what the vocabulary lacks, where the tokenizer gives its unknown token (the FrawdLLM
            # fixture's vocabulary holds 92 of the 256 bytes)
            text_ids = [[i for i in tokenizer(text).input_ids if i != tokenizer.unk_token_id] for text in TEXTS]
            expected[name, dtype] = (path, reference, text_ids)
    results = {}
    for case in cases:  # one llama.cpp process per file
        completed = subprocess.run([sys.executable, "-c", LLAMA_RUN, json.dumps([case])], capture_output=True,
                                   text=True, timeout=300)
        assert completed.returncode == 0, completed.stderr[-3000:]
        results |= json.loads(completed.stdout.strip().splitlines()[-1])
    return expected, results


@pytest.mark.parametrize("dtype", ["f32", "f16", "q8_0"])
@pytest.mark.parametrize("name", list(CASES))
def test_llama_cpp_greedy_tokens_equal_minitf(llama_results, name, dtype):
    expected, results = llama_results
    path, reference, text_ids = expected[name, dtype]
    assert results[path]["tokens"] == reference
    assert results[path]["text_ids"] == text_ids  # llama.cpp's tokenizer from the file = the model's tokenizer
