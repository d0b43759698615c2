"""`export_gguf` at llama.cpp's quantizations with the gguf package alone (llama-cpp-python hidden: with it, llama.cpp's
quantizer writes the K-quants, tests/export/test_engines_llama_cpp_quants.py), on a GPT shaped like the quickstart's
(hidden 256, ffn 1024: rows of 256, so the K-quants are needed and refused) and FrawdLLM's conversion fixture (hidden 32: every K-quant falls
back): the tensor types read back with gguf.GGUFReader against llama.cpp's rules written out per case, the printed
fallbacks, the dequantized weights within each type's rounding step, and the agreement report against a greedy loop
and a perplexity computed here from the file's tensors."""

import math
import re

import gguf
import numpy as np
import pytest
import torch
from factories import SAVED_GPT_SIZES, convert_gpt_fixture, random_model_folder
from helpers import llama_cpp_hidden
from transformers import AutoTokenizer

from hf_minitf import MiniTFGPTForCausalLM, char_tokenizer, train_wordlevel_tokenizer
from hf_minitf.catalog.packaging import EXTRAS
from hf_minitf.cli import main as minitf_main
from hf_minitf.export import ExportRefused, export_gguf
from hf_minitf.export.gguf import export_gguf_report
from hf_minitf.training.tasks import number_words

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny torch products: one thread is faster on a loaded machine
LEGACY = ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0")
K_MIXES = ("q4_k_m", "q5_k_m", "q6_k")
# The quickstart-like GPT's rows of 256 keep the K-quants, which are refused (see below).
CASES = [("quickstart", dtype) for dtype in LEGACY] + [("frawdllm", dtype) for dtype in LEGACY + K_MIXES]
HELD_OUT = "\n".join(number_words().held_out[:40])
# Each type's largest rounding error in a block, as a fraction of the block's largest |value| (half a step of its
# integer grid, a whole step where the grid is asymmetric: Q4_0 and Q5_0 clip the side without the largest
# value at 7 / 15), plus the f16 scale's own rounding.
STEPS = {"Q4_0": 1 / 8, "Q5_0": 1 / 16, "Q8_0": 0.51 / 127, "Q4_1": 0.51 * 2 / 15, "Q5_1": 0.51 * 2 / 31}


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("quant_sources")
    quickstart = random_model_folder(
        "gpt",
        root / "quickstart_like",
        char_tokenizer("\n".join(number_words().train)),
        7,
        **{**SAVED_GPT_SIZES, "hidden_size": 256, "intermediate_size": 1024, "max_position_embeddings": 64},
    )
    return {"quickstart": quickstart, "frawdllm": convert_gpt_fixture(root, "frawdllm_rope")}


def f32_tensors(sources: dict, root) -> dict[str, dict[str, np.ndarray]]:
    """Each source's tensors as its f32 file holds them (its layout; test_export_gguf checks them exact)."""
    return {
        name: {
            tensor.name: np.array(tensor.data).reshape(tuple(reversed(tensor.shape.tolist())))
            for tensor in gguf.GGUFReader(str(export_gguf(folder, root / f"{name}.gguf", dtype="f32"))).tensors
        }
        for name, folder in sources.items()
    }


@pytest.fixture(scope="module")
def originals(sources, tmp_path_factory):
    return f32_tensors(sources, tmp_path_factory.mktemp("f32"))


def expected_types(name: str, dtype: str) -> dict[str, str]:
    """llama.cpp's types for these two models, written out: matrices in the base type, the output head (the tied
    embedding of the learned-position model) Q6_K -> Q8_0 (the gguf package writes no Q6_K; FrawdLLM's 32 columns
    no block of 256 either), position tables f16; FrawdLLM's K-quants fall back (Q4_K -> Q5_0, Q5_K -> Q5_1,
    Q6_K -> Q8_0), Q6_K in layer 1 of 2 for qkv and ffn_down in the _M mixes."""
    base = dtype.upper()
    if dtype in K_MIXES:
        base = {"q4_k_m": "Q5_0", "q5_k_m": "Q5_1", "q6_k": "Q8_0"}[dtype]
    types = {"token_embd.weight": "Q8_0" if name == "quickstart" else base}
    if name == "quickstart":
        types["position_embd.weight"] = "F16"
    for layer in range(2):
        more_bits = dtype in ("q4_k_m", "q5_k_m") and layer == 1
        types |= {
            f"blk.{layer}.attn_qkv.weight": "Q8_0" if more_bits else base,
            f"blk.{layer}.attn_output.weight": base,
            f"blk.{layer}.ffn_up.weight": base,
            f"blk.{layer}.ffn_down.weight": "Q8_0" if more_bits else base,
        }
    if name == "frawdllm":
        types["output.weight"] = "Q8_0"
    return types


@pytest.fixture(scope="module")
def files(sources, tmp_path_factory):
    root = tmp_path_factory.mktemp("quants")
    with llama_cpp_hidden():
        return {
            (name, dtype): export_gguf(sources[name], root / f"{name}.{dtype}.gguf", dtype=dtype)
            for name, dtype in CASES
        }


@pytest.mark.parametrize("name,dtype", CASES)
def test_each_tensor_gets_llama_cpps_type_and_rounds_within_its_step(files, originals, name, dtype):
    reader = gguf.GGUFReader(str(files[name, dtype]))
    tensors = {tensor.name: tensor for tensor in reader.tensors}
    want = expected_types(name, dtype)
    for tensor_name, tensor in tensors.items():
        original = originals[name][tensor_name]
        kind = gguf.GGMLQuantizationType(tensor.tensor_type).name
        values = gguf.quants.dequantize(tensor.data, tensor.tensor_type).reshape(original.shape)
        if original.ndim == 1:
            assert kind == "F32" and np.array_equal(values, original), tensor_name
            continue
        assert kind == want[tensor_name], tensor_name
        if kind == "F16":
            assert np.array_equal(values, original.astype(np.float16).astype(np.float32)), tensor_name
            continue
        blocks, rounded = original.reshape(-1, 32), values.reshape(-1, 32)
        largest = np.abs(blocks).max(axis=1, keepdims=True)
        assert np.all(np.abs(rounded - blocks) <= largest * (STEPS[kind] + 2e-3) + 1e-12), tensor_name
    file_type = gguf.LlamaFileType[f"MOSTLY_{dtype.upper()}"]
    assert reader.fields["general.file_type"].contents() == file_type


def test_k_quants_the_gguf_package_cannot_write_are_refused(sources, tmp_path, capsys, without_llama_cpp):
    """Rows of 256 keep Q4_K / Q5_K / Q6_K, which gguf 0.19 cannot quantize: without llama.cpp's quantizer, refused
    in one line naming the extra that brings it, nothing written."""
    install = EXTRAS["llama"].install
    for dtype in K_MIXES:
        with pytest.raises(ExportRefused, match=f"cannot export to GGUF at {dtype}: .*{re.escape(install)}"):
            export_gguf(sources["quickstart"], tmp_path / "model.gguf", dtype=dtype)
    capsys.readouterr()
    assert minitf_main(["export", "gguf", str(sources["quickstart"]), str(tmp_path / "m.gguf"), "--dtype", "q4_k_m"])
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "Q4_K" in error and install in error
    assert not list(tmp_path.iterdir())


def test_command_line_lists_the_fallbacks(sources, tmp_path, capsys):
    out = tmp_path / "frawdllm.gguf"
    assert minitf_main(["export", "gguf", str(sources["frawdllm"]), str(out), "--dtype", "q4_k_m", "--no-verify"]) == 0
    printed = capsys.readouterr().out
    assert "9 tensor(s) fell back" in printed
    assert "blk.0.ffn_down.weight Q4_K -> Q5_0 (128 columns, not a multiple of 256)" in printed
    assert "blk.1.attn_qkv.weight Q6_K -> Q8_0 (32 columns, not a multiple of 256)" in printed
    assert "greedy tokens equal for" in printed and "perplexity" in printed


def _model_from_file(path, folder) -> MiniTFGPTForCausalLM:
    """The learned-position model with the file's tensors, mapped by hand (gpt2 layout: no row permutation; the
    tied head reads token_embd, as llama.cpp's gpt2 graph does)."""
    model = MiniTFGPTForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    names = {
        "token_embd.weight": "model.embed_tokens.weight",
        "position_embd.weight": "model.embed_positions.weight",
        "output_norm.weight": "model.norm.weight",
        "output_norm.bias": "model.norm.bias",
    }
    for layer in range(model.config.num_hidden_layers):
        for theirs, ours in [
            ("attn_norm", "self_attn_layer_norm"),
            ("attn_qkv", "self_attn.qkv_proj"),
            ("attn_output", "self_attn.o_proj"),
            ("ffn_norm", "mlp_layer_norm"),
            ("ffn_up", "mlp.fc1"),
            ("ffn_down", "mlp.fc2"),
        ]:
            for part in ("weight", "bias"):
                names[f"blk.{layer}.{theirs}.{part}"] = f"model.layers.{layer}.{ours}.{part}"
    state = model.state_dict()
    with torch.no_grad():
        for tensor in gguf.GGUFReader(str(path)).tensors:
            target = state[names[tensor.name]]
            values = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
            target.copy_(torch.from_numpy(np.array(values, dtype=np.float32).reshape(target.shape)))
    return model


def _greedy(model, prompts: list[list[int]], steps: int) -> list[list[int]]:
    """Argmax after each prompt, the whole sequence read again at each step (no cache); prompts of one length."""
    ids = torch.tensor(prompts)
    with torch.no_grad():
        for _ in range(steps):
            ids = torch.cat([ids, model(ids).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return ids[:, len(prompts[0]) :].tolist()


def _perplexity(model, ids: list[int], window: int) -> float:
    nll, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(ids), window):
            piece = ids[start : start + window]
            log_probs = torch.log_softmax(model(torch.tensor([piece])).logits[0], dim=-1)
            nll -= sum(float(log_probs[i, piece[i + 1]]) for i in range(len(piece) - 1))
            count += len(piece) - 1
    return math.exp(nll / count)


def test_agreement_report_equals_an_independent_measurement(sources, tmp_path):
    """q4_0 of the quickstart-like GPT on the quickstart's held-out lines: the tokens equal, the first difference
    and both perplexities, recomputed with a plain greedy loop (no cache) on the file's tensors mapped here."""
    folder = sources["quickstart"]
    report = export_gguf_report(folder, tmp_path / "q.gguf", dtype="q4_0", agreement_text=HELD_OUT)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    prompts = [tokenizer(line, add_special_tokens=False).input_ids[:4] for line in HELD_OUT.splitlines()[:8]]
    reference = MiniTFGPTForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    rounded = _model_from_file(tmp_path / "q.gguf", folder)
    steps = 64 - 4  # learned positions: 64 in all
    firsts = [
        next((i for i in range(steps) if want[i] != got[i]), None)
        for want, got in zip(_greedy(reference, prompts, steps), _greedy(rounded, prompts, steps))
    ]
    agreement = report.agreement
    assert (agreement.prompts, agreement.new_tokens) == (8, steps)
    assert agreement.first_differences == firsts
    ids = tokenizer(HELD_OUT, add_special_tokens=False).input_ids
    assert agreement.text_tokens == len(ids)
    assert agreement.float32_perplexity == pytest.approx(_perplexity(reference, ids, 64), rel=1e-4)
    assert agreement.perplexity == pytest.approx(_perplexity(rounded, ids, 64), rel=1e-4)
    assert agreement.perplexity != agreement.float32_perplexity  # the rounding shows


def test_f32_file_read_back_is_the_model_itself(sources, tmp_path):
    """The rotary FrawdLLM fixture through the file and back (the q/k rows permuted, then restored): every greedy
    token and the perplexity equal the MiniTF folder's."""
    report = export_gguf_report(sources["frawdllm"], tmp_path / "f.gguf", dtype="f32")
    agreement = report.agreement
    assert agreement.first_differences == [None] * agreement.prompts and agreement.prompts == 8
    assert agreement.perplexity == pytest.approx(agreement.float32_perplexity, rel=1e-6)
    assert report.fallbacks == []


# --- every kernel on rows of 32 and of 256: the rotary GPT (gptneox layout) and the encoder -------------------------
# Hidden 256, FFN 512, one layer: every matrix's rows are whole blocks of 32 and of 256, so no tensor falls back and
# each block-32 type's quantizer runs on every matrix of both layouts (the quickstart-like GPT above is the learned-
# position one). The K-quants these rows would take are refused (test_k_quants_the_gguf_package_cannot_write_...).
KERNEL_SIZES = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=1, num_attention_heads=4)
# Each type's block: (values, bytes): a quantized tensor holds exactly rows x columns / values blocks of that size.
BLOCKS = {"Q8_0": (32, 34), "Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22), "Q5_1": (32, 24)}


@pytest.fixture(scope="module")
def kernel_sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("kernel_sources")
    text = "\n".join(number_words().train)
    rotary = random_model_folder(
        "gpt",
        root / "rotary",
        char_tokenizer(text),
        11,
        **KERNEL_SIZES,
        position_embedding_type="rope",
        tie_word_embeddings=False,
        max_position_embeddings=64,
        initializer_range=0.3,
    )
    tokenizer = train_wordlevel_tokenizer([text], vocab_size=60, min_frequency=1, max_length=24)
    encoder = random_model_folder(
        "encoder", root / "encoder", tokenizer, 12, **KERNEL_SIZES, max_position_embeddings=24
    )
    return {"rotary": rotary, "encoder": encoder}


def kernel_types(name: str, dtype: str) -> dict[str, str]:
    """llama.cpp's types, written out: every matrix the base type but the output head, which takes Q6_K and is
    written Q8_0 (the gguf package writes no Q6_K): the rotary GPT's output.weight, the encoder's token embedding
    (a model without output.weight reads its head from token_embd, llama.cpp's `has_output`); the encoder's
    position table f16."""
    base = dtype.upper()
    head = "output.weight" if name == "rotary" else "token_embd.weight"
    matrices = ["token_embd.weight", "output.weight"] if name == "rotary" else ["token_embd.weight"]
    matrices += [f"blk.0.{part}.weight" for part in ("attn_qkv", "attn_output", "ffn_up", "ffn_down")]
    types = {matrix: "Q8_0" if matrix == head else base for matrix in matrices}
    return types | ({"position_embd.weight": "F16"} if name == "encoder" else {})  # the sinusoid's table stays f16


@pytest.fixture(scope="module")
def kernel_originals(kernel_sources, tmp_path_factory):
    return f32_tensors(kernel_sources, tmp_path_factory.mktemp("kernel_f32"))


@pytest.mark.parametrize("dtype", LEGACY)
@pytest.mark.parametrize("name", ["rotary", "encoder"])
def test_every_quantizer_runs_on_whole_blocks_and_rounds_within_its_step(
    kernel_sources, kernel_originals, tmp_path, name, dtype
):
    """Each matrix is stored in its quantized type (not an f16 / f32 fallback: its bytes are that type's blocks),
    the gguf package's dequantization of it lies within the type's rounding step of the model's float weights in
    every block, and the rounding shows (the values differ from the floats)."""
    path = export_gguf(kernel_sources[name], tmp_path / f"{name}.gguf", dtype=dtype)
    tensors = {tensor.name: tensor for tensor in gguf.GGUFReader(str(path)).tensors}
    want = kernel_types(name, dtype)
    assert {n for n, t in tensors.items() if len(t.shape) == 2} == set(want)
    for tensor_name, kind in want.items():
        tensor, original = tensors[tensor_name], kernel_originals[name][tensor_name]
        assert original.shape[-1] % 256 == 0, tensor_name  # the shape exercises the kernels
        assert gguf.GGMLQuantizationType(tensor.tensor_type).name == kind, tensor_name
        if kind == "F16":
            assert np.array_equal(tensor.data, original.astype(np.float16)), tensor_name
            continue
        values, bytes_per_block = BLOCKS[kind]
        assert tensor.data.nbytes == original.size // values * bytes_per_block, tensor_name
        dequantized = gguf.quants.dequantize(tensor.data, tensor.tensor_type).reshape(original.shape)
        blocks, rounded = original.reshape(-1, 32), dequantized.reshape(-1, 32)
        largest = np.abs(blocks).max(axis=1, keepdims=True)
        assert np.all(np.abs(rounded - blocks) <= largest * (STEPS[kind] + 2e-3) + 1e-12), tensor_name
        assert not np.array_equal(dequantized, original), tensor_name
