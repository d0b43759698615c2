"""ONNX exports of the GPT family (`minitf export onnx`): one decoder graph with a KV cache under the names
transformers.js and optimum read, beside the native config.json; ONNX Runtime's greedy tokens equal MiniTF's
`generate()` for learned and rotary positions (both rotary layouts) and every GPT conversion fixture, with and
without the cache; the quantized variants exist under transformers.js's names and agree within the bounds below;
refusals write nothing. ONNX Runtime runs in subprocesses (its idle threads would slow torch here)."""

import json
import re

import numpy as np
import onnx
import pytest
from factories import GPT_FIXTURES, gpt_source, minitf_greedy, onnx_gpt_export, prompt_ids, workspace
from helpers import copy_with_config, run_minitf, run_python
from transformers_js import NodeRunner

from hf_minitf.export.onnx import MODEL_FILE, QUANTIZED_FILES, export_onnx
from hf_minitf.export.onnx_decoder import INPUT_NAMES, past_names, present_names

# learned and rotary (interleaved) positions come with the fixtures; rope_halves is transformers' rotate-half layout
SOURCES = [*GPT_FIXTURES, "rope_halves"]
VARIANTS = ("q8", "fp16", "q4")
VARIANT_SOURCE = "frawdllm_rope"  # the variants are measured on a model with room for 100 greedy tokens
NEW_TOKENS = 100

ORT_RUN = """
import json, numpy as np
from pathlib import Path
from hf_minitf.engines import OnnxGenerator

folder, prompt, new_tokens = Path({folder!r}), {prompt!r}, {new_tokens!r}
info = json.loads((folder / "minitf_export.json").read_text())
result = {{}}
for file_name in {files!r}:
    engine = OnnxGenerator(folder, info, file_name)
    engine.end_ids = set()  # as the reference: no stop at an end token
    cached = engine.generate([prompt], new_tokens)[0]
    uncached, ids = [], list(prompt)  # the whole sequence each step, an empty cache
    for _ in range(new_tokens):
        logits, _ = engine.step(ids, engine.empty_cache(), 0)
        ids.append(int(logits.argmax()))
    first, _ = engine.step(list(prompt), engine.empty_cache(), 0)
    result[file_name] = {{"cached": cached, "uncached": ids[len(prompt):], "first_logits": first.tolist()}}
print(json.dumps(result))
"""


def greedy_case(name: str) -> tuple[list[int], int]:
    """The prompt and the number of new tokens (up to NEW_TOKENS, within a learned position table)."""
    source = gpt_source(name)
    config = json.loads((source / "config.json").read_text())
    prompt = prompt_ids(source)
    room = config["max_position_embeddings"] - len(prompt)
    return prompt, min(NEW_TOKENS, room) if config["position_embedding_type"] == "learned" else NEW_TOKENS


def ort_greedy(folder, prompt: list[int], new_tokens: int, files: list[str]) -> dict:
    return run_python(ORT_RUN.format(folder=str(folder), prompt=prompt, new_tokens=new_tokens, files=files))


@pytest.mark.parametrize("name", SOURCES)
def test_greedy_tokens_equal_generate_with_and_without_the_cache(name):
    prompt, new_tokens = greedy_case(name)
    expected = minitf_greedy(gpt_source(name), prompt, new_tokens)
    result = ort_greedy(onnx_gpt_export(name), prompt, new_tokens, [MODEL_FILE])[MODEL_FILE]
    assert result["cached"] == result["uncached"] == expected
    assert len(expected) == new_tokens


@pytest.mark.parametrize("name", ["frawdllm_learned", "frawdllm_rope"])
def test_graph_names_and_dynamic_axes(name):
    """The inputs and outputs transformers.js builds its feeds from: `batch_size` names the batch axis (its first,
    empty cache takes that axis from the batch and the others from the numbers), heads and head_dim are numbers,
    the lengths are named."""
    graph = onnx.load(str(onnx_gpt_export(name) / MODEL_FILE)).graph
    config = json.loads((gpt_source(name) / "config.json").read_text())
    layers, heads = config["num_hidden_layers"], config["num_attention_heads"]
    head_dim = config["hidden_size"] // heads

    def shapes(values) -> dict[str, list]:
        return {value.name: [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim] for value in values}

    inputs, outputs = shapes(graph.input), shapes(graph.output)
    assert list(inputs) == [*INPUT_NAMES, *past_names(layers)]
    assert list(outputs) == ["logits", *present_names(layers)]
    assert inputs["input_ids"] == inputs["position_ids"] == ["batch_size", "sequence_length"]
    assert inputs["attention_mask"] == ["batch_size", "total_sequence_length"]
    for past, present in zip(past_names(layers), present_names(layers)):
        assert inputs[past] == ["batch_size", heads, "past_sequence_length", head_dim]
        assert outputs[present] == ["batch_size", heads, "past_sequence_length + sequence_length", head_dim]
    assert outputs["logits"] == ["batch_size", "sequence_length", config["vocab_size"]]
    assert {value.type.tensor_type.elem_type for value in graph.input[:3]} == {onnx.TensorProto.INT64}


def test_left_padded_batch_gives_each_row_its_logits():
    """A left-padded batch of two with transformers.js's position ids (cumsum of the mask - 1, 1 at padding) gives
    each row's logits alone at its real tokens; a second step from the returned cache too."""
    folder = onnx_gpt_export("frawdllm_rope")
    result = run_python(f"""
        import json, numpy as np
        from pathlib import Path
        from hf_minitf.engines import OnnxGenerator

        folder = Path({str(folder)!r})
        engine = OnnxGenerator(folder, json.loads((folder / "minitf_export.json").read_text()))
        rows = [[5, 6, 7], [8, 9, 10, 11, 12]]
        ids = np.array([[0, 0, *rows[0]], rows[1]], dtype=np.int64)
        mask = np.array([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]], dtype=np.int64)
        positions = np.where(mask == 0, 1, mask.cumsum(-1) - 1)
        cache = {{name: np.concatenate([value] * 2) for name, value in engine.empty_cache().items()}}
        feeds = {{"input_ids": ids, "attention_mask": mask, "position_ids": positions, **cache}}
        logits, *present = engine.session.run(engine.output_names, feeds)
        cache = {{name.replace("present.", "past_key_values."): value
                 for name, value in zip(engine.output_names[1:], present)}}
        next_ids = np.array([[13], [14]], dtype=np.int64)
        feeds = {{"input_ids": next_ids, "attention_mask": np.concatenate([mask, [[1], [1]]], axis=1),
                 "position_ids": positions[:, -1:] + 1, **cache}}
        step = engine.session.run(["logits"], feeds)[0]
        alone = [engine.step(row + [token], engine.empty_cache(), 0)[0] for row, token in zip(rows, (13, 14))]
        full = [engine.session.run(["logits"], {{"input_ids": np.array([row], dtype=np.int64),
                                                 "attention_mask": np.ones((1, len(row)), dtype=np.int64),
                                                 "position_ids": np.arange(len(row))[None],
                                                 **engine.empty_cache()}})[0][0] for row in rows]
        diffs = [float(np.abs(logits[0, 2:] - full[0]).max()), float(np.abs(logits[1] - full[1]).max()),
                 float(np.abs(step[0, -1] - alone[0]).max()), float(np.abs(step[1, -1] - alone[1]).max())]
        print(json.dumps({{"diffs": diffs, "scale": float(np.abs(logits).max())}}))
    """)
    assert max(result["diffs"]) <= 1e-5 * max(1.0, result["scale"])


def test_folder_is_the_native_config_tokenizer_and_a_generation_config_stopping_at_the_table(tmp_path):
    """config.json is what `export native` writes (plus transformers.js's default dtype), with the tokenizer files;
    the generation config stops at a learned position table and has no limit for rotary positions."""
    from hf_minitf.export.native import export_native

    for name, model_type in (("frawdllm_learned", "gpt2"), ("frawdllm_rope", "gpt_neox")):
        folder, native = onnx_gpt_export(name), export_native(gpt_source(name), tmp_path / name)
        config = json.loads((folder / "config.json").read_text())
        assert config.pop("transformers.js_config") == {"dtype": "fp32"}
        assert config == json.loads((native / "config.json").read_text()) and config["model_type"] == model_type
        for file in ("tokenizer.json", "tokenizer_config.json"):
            assert (folder / file).read_text() == (native / file).read_text()
        generation = json.loads((folder / "generation_config.json").read_text())
        source = json.loads((gpt_source(name) / "config.json").read_text())
        expected = source["max_position_embeddings"] if model_type == "gpt2" else None
        assert generation.get("max_length") == expected
        info = json.loads((folder / "minitf_export.json").read_text())
        assert (info["engine"], info["kind"], info["default_file"]) == ("onnxruntime", "generator", MODEL_FILE)
        assert not list(folder.glob("*.safetensors")) and not list(folder.glob("*.py"))


# How far each variant may drift from float32 on VARIANT_SOURCE: greedy tokens that may differ out of NEW_TOKENS
# (measured: q8 5, fp16 0, q4 48) and the largest first-step logit difference relative to the largest logit
# (measured: q8 0.009, fp16 0.0005, q4 0.094).
MOST_DIFFERING_TOKENS = {"q8": 15, "fp16": 2, "q4": 70}
MOST_LOGIT_DRIFT = {"q8": 0.03, "fp16": 0.002, "q4": 0.2}


def test_quantized_variants_have_transformers_js_names_and_stay_close():
    folder = onnx_gpt_export(VARIANT_SOURCE, VARIANTS)
    files = {path.relative_to(folder).as_posix() for path in folder.rglob("*.onnx")}
    assert files == {MODEL_FILE, "onnx/model_quantized.onnx", "onnx/model_fp16.onnx", "onnx/model_q4.onnx"}
    assert json.loads((folder / "minitf_export.json").read_text())["files"] == [MODEL_FILE, *QUANTIZED_FILES.values()]
    sizes = {file: (folder / file).stat().st_size for file in files}
    assert sizes["onnx/model_q4.onnx"] < sizes["onnx/model_quantized.onnx"] < sizes["onnx/model_fp16.onnx"]
    assert sizes["onnx/model_fp16.onnx"] < sizes[MODEL_FILE]
    prompt, new_tokens = greedy_case(VARIANT_SOURCE)
    results = ort_greedy(folder, prompt, new_tokens, [MODEL_FILE, *QUANTIZED_FILES.values()])
    reference = results[MODEL_FILE]
    scale = np.abs(reference["first_logits"]).max()
    report = {}
    for variant, file in QUANTIZED_FILES.items():
        tokens, logits = results[file]["cached"], np.array(results[file]["first_logits"])
        differing = sum(a != b for a, b in zip(tokens, reference["cached"]))
        drift = float(np.abs(logits - reference["first_logits"]).max() / scale)
        report[variant] = (differing, drift)
        assert results[file]["uncached"] == tokens  # the cache changes nothing in any variant
        assert 0 < drift  # not the float32 graph under another name
    print(report)
    for variant, (differing, drift) in report.items():
        assert differing <= MOST_DIFFERING_TOKENS[variant] and drift <= MOST_LOGIT_DRIFT[variant], report


TEXT = "hello"


def test_card_shows_transformers_js_and_runs_its_onnxruntime_code():
    folder = onnx_gpt_export("char_gpt")
    card = (folder / "README.md").read_text()
    for words in (
        'pipeline("text-generation"',
        "ONNXRUNTIME_NODE_INSTALL=skip npm install @huggingface/transformers",
        '<script type="module">',
        "https://cdn.jsdelivr.net/npm/@huggingface/transformers@",
        "no counterpart",
        "model_type: gpt2",
        "library_name: transformers.js",
    ):
        assert words in card
    code = re.search(r"## ONNX Runtime \(Python\).*?```python\n(.*?)```", card, re.S).group(1)
    new_tokens = 8  # "hello" and 8 more characters fit in the char GPT's 16 positions
    code = code.replace("path/to/this/folder", str(folder)).replace("max_new_tokens=20", f"max_new_tokens={new_tokens}")
    text = run_python(re.sub(r"print\(generate\(.*\)\)", f"import json\nprint(json.dumps(generate({TEXT!r})))", code))
    expected = run_minitf("generate", str(gpt_source("char_gpt")), TEXT, "--max-new-tokens", str(new_tokens))
    assert text == expected.stdout.rstrip("\n")


def test_generate_runs_the_export_and_refuses_what_the_model_folder_refuses():
    """`minitf generate` prints the MiniTF folder's text from the ONNX folder, and refuses a prompt past the
    position table with the same error."""
    source, folder = gpt_source("frawdllm_learned"), onnx_gpt_export("frawdllm_learned")
    for arguments in (["hello", "the quick", "--max-new-tokens", "8"], ["x" * 40]):
        expected, got = run_minitf("generate", str(source), *arguments), run_minitf("generate", str(folder), *arguments)
        assert (got.returncode, got.stdout, got.stderr) == (expected.returncode, expected.stdout, expected.stderr)
    assert expected.returncode == 2 and "this model reads at most 16" in expected.stderr


def test_refusals_write_nothing(tmp_path):
    crop = copy_with_config(gpt_source("char_gpt"), tmp_path / "crop", context_overflow="crop")
    with pytest.raises(ValueError, match="context_overflow='crop'"):
        export_onnx(crop, tmp_path / "out")
    with pytest.raises(ValueError, match="quantize takes q8, fp16, q4; got 'q2'"):
        export_onnx(gpt_source("frawdllm_rope"), tmp_path / "out", quantize=["q8", "q2"])
    assert sorted(path.name for path in tmp_path.iterdir()) == ["crop"]
    assert not list(workspace().glob(".*writing*"))


NODE_PROMPTS = ["hello", "To be,", "xyz!?"]


@pytest.mark.parametrize("name", GPT_FIXTURES)
def test_transformers_js_in_node_gives_generate_tokens_for_every_fixture(name, node_modules):
    """transformers.js reads the export as it is (native config, tokenizer, decoder graph) and decodes greedily as
    `generate()` does, to the end token, within the fixtures' 16 positions."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = gpt_source(name)
    tokenizer, model = AutoTokenizer.from_pretrained(source), AutoModelForCausalLM.from_pretrained(source).eval()
    context = json.loads((source / "config.json").read_text())["max_position_embeddings"]
    new_tokens = context - max(len(tokenizer(prompt).input_ids) for prompt in NODE_PROMPTS)
    expected = []
    for prompt in NODE_PROMPTS:
        ids = tokenizer(prompt, return_tensors="pt").input_ids
        with torch.no_grad():
            output = model.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens, do_sample=False
            )
        expected.append(output[0, ids.shape[1] :].tolist())
    with NodeRunner("generate", onnx_gpt_export(name), "fp32") as node:
        answer = node.ask({"prompts": NODE_PROMPTS, "max_new_tokens": new_tokens})
    assert answer["result"] == expected
    assert len({token for tokens in expected for token in tokens}) > 2  # a real comparison, not one repeated token


def test_the_command_prints_its_own_lines_and_nothing_of_torchs_exporter(tmp_path):
    """torch's exporter logs four "torchvision is not installed. Skipping torchvision::nms"-like lines and a
    deprecation from its own pytree code at each export in a fresh process: `minitf export onnx` shows neither."""
    result = run_minitf("export", "onnx", str(gpt_source("char_gpt")), str(tmp_path / "out"), "--no-verify")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Exported ")
    for noise in ("torchvision", "Warning", "W1", "W0"):
        assert noise not in result.stderr, result.stderr
