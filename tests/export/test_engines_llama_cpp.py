"""llama.cpp itself (llama-cpp-python) runs the GGUF exports: greedy tokens of every `--dtype` equal MiniTF's for 100
tokens, for character and BPE tokenizers, learned and rotary positions; and a chat through the file's own
`tokenizer.chat_template` gives apply_chat_template's prompt and MiniTF's greedy reply. llama.cpp runs in its own
process (its idle threads would slow torch in this one). Marked `engines`: `pip install "hf-minitf[llama]"`,
`pytest -m engines`.

The f32 file is compared with the MiniTF model itself. The random test models have near-tied top logits, so the
rounding of f16 and the quantizations flips greedy choices: those files are compared with MiniTF running (in fp32)
the file's own weights, read back and dequantized (`dequantized_model`, what the export's agreement runs), and a
remaining difference must be a near tie (see TIE_MARGIN)."""

import importlib.util
import json
import subprocess
import sys

import pytest
import torch
from factories import (
    EXPORT_TEXT,
    SAVED_GPT_SIZES,
    make_chat_gpt_sources,
    make_gpt_sources,
    minitf_greedy,
    prompt_ids,
    random_model_folder,
)
from gguf import GGMLQuantizationType, GGUFReader
from transformers import AutoTokenizer

from hf_minitf import MiniTFGPTForCausalLM, char_tokenizer
from hf_minitf.catalog.limits import GGUF_DTYPES
from hf_minitf.export import export_gguf
from hf_minitf.export.gguf import dequantized_model
from hf_minitf.export.gguf_file import tensor_types

pytestmark = [
    pytest.mark.engines,
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None,
        reason='llama-cpp-python is not installed (pip install "hf-minitf[llama]")',
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
# llama.cpp also rounds activations (to f16 beside f16 weights, to 8-bit blocks beside quantized ones), which MiniTF
# with the file's weights does not: where its greedy tokens still differ, each of llama.cpp's choices, MiniTF fed
# llama.cpp's tokens, must be MiniTF's top token or within this fraction of the largest |logit| of it (ties seen:
# f16 0.0003, q8_0 0.011, the 4- and 5-bit types 0.04), at no more than MAX_FLIPS of the steps (seen: f16 and q8_0
# 2; q4_0 6 of 70 on the BPE model, whose 4-bit weights leave more near ties).
TIE_MARGIN = {"f16": 0.005, **{dtype: 0.05 for dtype in GGUF_DTYPES if dtype not in ("f32", "f16")}}
DTYPES = GGUF_DTYPES  # the K mixes too: these models' rows of 32 fall back to what the gguf package writes
MAX_FLIPS = {"f16": 5, "q8_0": 5, **{dtype: 10 for dtype in GGUF_DTYPES if dtype not in ("f32", "f16", "q8_0")}}


def dequantized_folder(source, path, folder):
    """The MiniTF folder `source` saved at `folder` with the weights of the GGUF file `path`, dequantized; a head
    the file stores apart from the embedding is saved untied."""
    model = dequantized_model(path, MiniTFGPTForCausalLM.from_pretrained(source, dtype=torch.float32).eval())
    model.config.tie_word_embeddings = model.lm_head.weight is model.model.embed_tokens.weight
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
        for dtype in DTYPES:
            path = str(export_gguf(sources[name], root / f"{name}.{dtype}.gguf", dtype=dtype))
            reference_folder = (
                sources[name]
                if dtype == "f32"
                else dequantized_folder(sources[name], path, root / f"{name}.{dtype}.minitf")
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


@pytest.mark.parametrize("dtype", DTYPES)
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
        assert len(flips) <= MAX_FLIPS[dtype], flips
        assert all(gap <= TIE_MARGIN[dtype] * max(1.0, scale) for gap, scale in gaps), flips
    assert results[path]["text_ids"] == text_ids  # llama.cpp's tokenizer from the file = the model's tokenizer


CHAT_RUN = """
import json, sys
from llama_cpp import Llama
from llama_cpp.llama_chat_format import Jinja2ChatFormatter
case = json.loads(sys.argv[1])
llm = Llama(model_path=case["path"], n_ctx=256, n_threads=1, verbose=False)
text = lambda token: llm.detokenize([token], special=True).decode()
formatter = Jinja2ChatFormatter(
    template=llm.metadata["tokenizer.chat_template"], eos_token=text(llm.token_eos()), bos_token=text(llm.token_bos())
)
results = []
for messages in case["chats"]:
    prompt = formatter(messages=messages).prompt
    ids = llm.tokenize(prompt.encode(), add_bos=False, special=True)
    llm.reset()
    llm.eval(ids)
    reply = []
    while len(reply) < case["new_tokens"]:
        token = int(llm.sample(temp=0.0, top_k=1))
        reply.append(token)
        if token in case["stop_ids"]:
            break
        llm.eval([token])
    results.append({"prompt": prompt, "ids": ids, "reply": reply})
print(json.dumps(results))
"""
CHATS = [
    [{"role": "user", "content": "hello there"}],
    [
        {"role": "user", "content": "the quick"},
        {"role": "assistant", "content": "fox"},
        {"role": "user", "content": "a dog"},
    ],
]
CHAT_NEW_TOKENS = 20


@pytest.mark.parametrize("name", ["chatml", "frawdllm"])
def test_chat_through_the_files_own_template_gives_minitfs_prompt_and_reply(tmp_path, name):
    """llama-cpp-python's Jinja formatter on `tokenizer.chat_template` read from the f32 file: the prompt text
    apply_chat_template writes, its ids, and MiniTF's greedy reply (stopping at the end-of-turn token)."""
    source = make_chat_gpt_sources(tmp_path / "sources")[name]
    tokenizer = AutoTokenizer.from_pretrained(source)
    path = export_gguf(source, tmp_path / "chat.gguf", dtype="f32")
    end_of_turn = tokenizer.convert_tokens_to_ids("<|im_end|>" if name == "chatml" else tokenizer.eos_token)
    case = {"path": str(path), "chats": CHATS, "new_tokens": CHAT_NEW_TOKENS, "stop_ids": [end_of_turn]}
    completed = subprocess.run(
        [sys.executable, "-c", CHAT_RUN, json.dumps(case)], capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    model = MiniTFGPTForCausalLM.from_pretrained(source).eval()
    for messages, result in zip(CHATS, json.loads(completed.stdout.strip().splitlines()[-1])):
        prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        assert result["prompt"] == prompt
        ids = tokenizer(prompt, add_special_tokens=False).input_ids
        assert result["ids"] == ids
        with torch.no_grad():
            output = model.generate(
                torch.tensor([ids]),
                max_new_tokens=CHAT_NEW_TOKENS,
                do_sample=False,
                eos_token_id=end_of_turn,
                pad_token_id=tokenizer.pad_token_id,
            )
        assert result["reply"] == output[0, len(ids) :].tolist()


QUANTIZE_RUN = """
import json, sys
import llama_cpp
case = json.loads(sys.argv[1])
for dtype, out in case["outputs"].items():
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, "LLAMA_FTYPE_MOSTLY_" + dtype.upper())
    params.nthread = 1
    assert llama_cpp.llama_model_quantize(case["path"].encode(), out.encode(), params) == 0, dtype
"""


def test_llama_cpps_own_quantizer_chooses_the_exports_tensor_types(tmp_path):
    """llama.cpp's quantizer (llama_model_quantize) run on the f16 file, for every quantization, gives each tensor
    the type `tensor_types` plans from llama.cpp's rules without the gguf package's limits, on a GPT of the
    quickstart's shape (rows of 256 and 1024: K-quants kept, the _M mixes' Q6_K layers) and FrawdLLM's fixture (rows
    of 32 and 128: every K-quant falls back)."""
    sources = {
        "quickstart": random_model_folder(
            "gpt",
            tmp_path / "quickstart_like",
            char_tokenizer(EXPORT_TEXT),
            7,
            **{**SAVED_GPT_SIZES, "hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 8},
        ),
        "frawdllm": make_gpt_sources(tmp_path / "sources")["frawdllm_rope"],
    }
    quantizations = [dtype for dtype in GGUF_DTYPES if dtype not in ("f32", "f16")]
    for name, folder in sources.items():
        path = export_gguf(folder, tmp_path / f"{name}.f16.gguf", dtype="f16")
        outputs = {dtype: str(tmp_path / f"{name}.{dtype}.gguf") for dtype in quantizations}
        case = {"path": str(path), "outputs": outputs}
        completed = subprocess.run(
            [sys.executable, "-c", QUANTIZE_RUN, json.dumps(case)], capture_output=True, text=True, timeout=600
        )
        assert completed.returncode == 0, completed.stderr[-3000:]
        shapes = {
            tensor.name: tuple(reversed([int(size) for size in tensor.shape]))
            for tensor in GGUFReader(str(path)).tensors
        }
        layers = MiniTFGPTForCausalLM.config_class.from_pretrained(folder).num_hidden_layers
        for dtype, out in outputs.items():
            written = {tensor.name: GGMLQuantizationType(tensor.tensor_type).name for tensor in GGUFReader(out).tensors}
            planned = {
                tensor_name: planned.type for tensor_name, planned in tensor_types(shapes, dtype, layers).items()
            }
            assert written == planned, (name, dtype)
