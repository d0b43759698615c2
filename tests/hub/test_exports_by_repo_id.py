"""Each export `minitf push --all-runtimes` publishes, loaded back from the loopback Hub by its repo id with every
entry point the docs name for it (docs/publishing.md, docs/export.md, docs/export_engines.md and the export cards),
each in a fresh process, with hf-minitf installed and, where the entry point does not need the package, without it:

- the native repo: `AutoModelForCausalLM.from_pretrained(REPO)` with `AutoTokenizer`, and `pipeline("text-generation",
  model=REPO)`;
- the ONNX repo (`REPO-ONNX`): ONNX Runtime on its `snapshot_download` (the card's greedy loop), and `minitf generate`
  on that download; transformers.js's `pipeline("text-generation", REPO-ONNX, {dtype: "fp32"})` as the card's web
  page calls it, in Node with the Hub's URL as its `remoteHost` (no local files, a fresh cache);
- the CTranslate2 repo (`REPO-ct2`): `ctranslate2.Generator` on its `snapshot_download` (CTranslate2 reads folders
  only), and `minitf generate` on that download;
- the GGUF repo (`REPO-GGUF`): llama-cpp-python's `Llama.from_pretrained(REPO-GGUF, FILE)` (what `llama-cli -hf`
  and `ollama run hf.co/...` do, neither of which is installed here), in tests marked `engines`.

Each prints the greedy tokens after the same prompt, which must be the MiniTF source's. (The families' own repos:
tests/hub/test_hub.py; the web page of its Space runs in a browser: the `browser` tests of tests/export/test_export_web.py.)"""

import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from factories import GPT_PROMPTS, make_gpt
from isolation import run_without_hf_minitf
from transformers import AutoTokenizer, pipeline
from transformers_js import NodeRunner

from hf_minitf import MiniTFGPTForCausalLM
from hf_minitf.cli import main as minitf_main
from hf_minitf.publishing import push_all_runtimes

REPO = "org/exp"
PROMPT = GPT_PROMPTS[0]
NEW_TOKENS = 8
GGUF_FILE = "exp-F32.gguf"  # f32: llama.cpp's tokens are the model's, not a quantization's

# What each entry point runs, in a fresh process: it prints {"tokens": the new greedy ids after PROMPT's, ...}.
PROGRAMS = {
    "native": """
        from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline
        tokenizer = AutoTokenizer.from_pretrained(REPO)
        model = AutoModelForCausalLM.from_pretrained(REPO)
        ids = tokenizer(PROMPT, return_tensors="pt").input_ids
        output = model.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False)
        generator = pipeline("text-generation", model=REPO)
        text = generator(PROMPT, max_new_tokens=NEW_TOKENS, do_sample=False)[0]["generated_text"]
        result = {"tokens": output[0, ids.shape[1]:].tolist(), "pipeline": text, "class": type(model).__name__}
        """,
    "onnx": """
        import numpy as np, onnxruntime
        from huggingface_hub import snapshot_download
        from transformers import PreTrainedTokenizerFast
        folder = snapshot_download(REPO + "-ONNX")
        tokenizer = PreTrainedTokenizerFast.from_pretrained(folder)
        session = onnxruntime.InferenceSession(f"{folder}/onnx/model.onnx", providers=["CPUExecutionProvider"])
        cache_inputs = [graph_input for graph_input in session.get_inputs() if graph_input.name.startswith("past_")]
        names = [output.name for output in session.get_outputs()]
        ids = tokenizer(PROMPT).input_ids
        cache = {i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32) for i in cache_inputs}
        step, tokens = ids, []
        for _ in range(NEW_TOKENS):
            past = len(ids) + len(tokens) - len(step)
            feeds = {"input_ids": np.array([step], np.int64), "attention_mask": np.ones((1, past + len(step)), np.int64),
                     "position_ids": np.arange(past, past + len(step), dtype=np.int64)[None], **cache}
            logits, *present = session.run(names, feeds)
            cache = {name.replace("present", "past_key_values"): value for name, value in zip(names[1:], present)}
            step = [int(logits[0, -1].argmax())]
            tokens += step
        result = {"tokens": tokens}
        """,
    "ctranslate2": """
        import ctranslate2
        from huggingface_hub import snapshot_download
        from transformers import AutoTokenizer
        folder = snapshot_download(REPO + "-ct2")
        generator = ctranslate2.Generator(folder)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        prompt = tokenizer.convert_ids_to_tokens(tokenizer(PROMPT).input_ids)
        output = generator.generate_batch(
            [prompt], max_length=NEW_TOKENS, sampling_topk=1, include_prompt_in_result=False, end_token=[]
        )
        result = {"tokens": output[0].sequences_ids[0]}
        """,
    "gguf": """
        from llama_cpp import Llama
        from transformers import AutoTokenizer
        llm = Llama.from_pretrained(REPO + "-GGUF", GGUF_FILE, n_ctx=64, verbose=False)
        llm.eval(AutoTokenizer.from_pretrained(REPO)(PROMPT).input_ids)  # the model's ids, as llama-cli -p reads text
        tokens = []
        for _ in range(NEW_TOKENS):
            tokens.append(int(llm.sample(temp=0.0, top_k=1)))
            llm.eval(tokens[-1:])
        result = {"tokens": tokens}
        """,
}
# `minitf generate` on the download of an engine export: the package's command, so only where it is installed.
MINITF_GENERATE = """
    import contextlib, io
    from hf_minitf.cli import main
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = main(["generate", folder, "--max-new-tokens", str(NEW_TOKENS), PROMPT])
    result |= {"minitf_generate": [status, printed.getvalue()]}
    """
LLAMA_CPP = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None,
    reason='llama-cpp-python is not installed (pip install "hf-minitf[llama]")',
)
CASES = [
    pytest.param(export, installed, marks=[pytest.mark.engines, LLAMA_CPP] if export == "gguf" else [])
    for export in PROGRAMS
    for installed in (True, False)
]


def program(export: str, installed: bool) -> str:
    """The code of the entry points of `export`, printing their result as one JSON line."""
    constants = f"REPO, PROMPT, NEW_TOKENS, GGUF_FILE = {REPO!r}, {PROMPT!r}, {NEW_TOKENS}, {GGUF_FILE!r}\n"
    if export == "gguf":  # llama-cpp-python where this process finds it (a PYTHONPATH entry the other process lacks)
        spec = importlib.util.find_spec("llama_cpp")
        assert spec is not None and spec.origin is not None
        constants += f"import sys; sys.path.append({os.path.dirname(os.path.dirname(spec.origin))!r})\n"
    extra = textwrap.dedent(MINITF_GENERATE) if installed and export in ("onnx", "ctranslate2") else ""
    return "import json\n" + constants + textwrap.dedent(PROGRAMS[export]) + extra + "print(json.dumps(result))\n"


def run_fresh(code: str, installed: bool, cwd) -> dict:
    """`code` run in a fresh process, with hf-minitf importable (`installed`) or hidden as on a machine without it:
    the JSON its last printed line holds."""
    if not installed:
        return run_without_hf_minitf(code, cwd=str(cwd))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def gpt(tmp_path_factory):
    return make_gpt(tmp_path_factory.mktemp("exports_by_repo_id") / "exp", "rope")


@pytest.fixture(scope="module")
def pushed(hub, gpt):
    """Every runtime's export of `gpt` pushed once (verified elsewhere: tests/hub/test_push_all_runtimes.py)."""
    push_all_runtimes(gpt, REPO, gguf_dtypes=("f32",), note=lambda line: None)
    return hub


@pytest.fixture(scope="module")
def expected(gpt):
    """The MiniTF source's greedy tokens after PROMPT (argmax of its logits, step by step), what its text-generation
    pipeline returns and what `minitf generate` prints for it."""
    tokenizer = AutoTokenizer.from_pretrained(gpt)
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    model = MiniTFGPTForCausalLM.from_pretrained(gpt).eval()
    with torch.no_grad():
        for _ in range(NEW_TOKENS):
            ids = torch.cat([ids, model(ids).logits[:, -1:].argmax(-1)], dim=1)
    tokens = ids[0, -NEW_TOKENS:].tolist()
    assert model.generation_config.eos_token_id not in tokens  # each runtime makes all NEW_TOKENS steps
    text = pipeline("text-generation", model=str(gpt))(PROMPT, max_new_tokens=NEW_TOKENS, do_sample=False)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert minitf_main(["generate", str(gpt), "--max-new-tokens", str(NEW_TOKENS), PROMPT]) == 0
    return {"tokens": tokens, "pipeline": text[0]["generated_text"], "minitf_generate": [0, printed.getvalue()]}


@pytest.mark.parametrize(("export", "installed"), CASES)
def test_each_export_runs_by_repo_id_with_each_named_entry_point(pushed, gpt, expected, export, installed, tmp_path):
    result = run_fresh(program(export, installed), installed, tmp_path)
    assert result["tokens"] == expected["tokens"], export
    if export == "native":
        assert result["class"] == "GPTNeoXForCausalLM" and result["pipeline"] == expected["pipeline"]
    if "minitf_generate" in result:
        assert result["minitf_generate"] == expected["minitf_generate"]


def test_transformers_js_runs_the_onnx_repo_by_repo_id(pushed, expected, node_modules, tmp_path):
    """The ONNX repo by its id, as its card's web page loads it: transformers.js downloads it from the Hub (the
    loopback one's URL for huggingface.co) and its text-generation pipeline, greedy, continues the prompt with the
    source's tokens and text."""
    cache = tmp_path / "transformers_js_cache"
    with NodeRunner("text-generation", REPO + "-ONNX", "fp32", hub=(pushed.url, cache)) as node:
        (answer,) = node.ask({"prompts": [PROMPT], "max_new_tokens": NEW_TOKENS})["result"]
    assert answer == {"ids": expected["tokens"], "text": expected["pipeline"]}
    assert (cache / (REPO + "-ONNX") / "onnx" / "model.onnx").is_file()  # downloaded, not found on disk


def test_the_engine_export_cards_say_how_their_folder_comes_from_the_hub(pushed):
    """ONNX Runtime and CTranslate2 read folders: their cards, whose snippets name one, say how to get it."""
    for repo_id in (REPO + "-ONNX", REPO + "-ct2"):
        assert "`huggingface_hub.snapshot_download(REPO_ID)`" in pushed.read(repo_id, "README.md").decode(), repo_id
