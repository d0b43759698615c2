"""The K-quants (q4_k_m, q5_k_m, q6_k) written by llama.cpp's own quantizer (llama-cpp-python's
`llama_model_quantize`, from the f16 file), on the quickstart's GPT (hidden 128, FFN 512: ffn_down keeps the
K-quants, the other matrices fall back), a GPT of FrawdLLM's tiny-llama size (hidden 256, 6 layers, RoPE, 8192
tokens: every matrix keeps them) and an encoder of width 256. Each file holds the types the export reports
(llama.cpp's mix as `tensor_types` plans it), its agreement is measured on the file llama.cpp wrote, it runs in
llama.cpp (`minitf verify`, which the export runs) and `minitf verify --record-in` puts that run's row in the
source's card; `export ollama --dtype
q4_k_m` gives a folder for `ollama create` with its card. Marked `engines`: `pip install "hf-minitf[llama]"`,
`pytest -m engines`."""

import importlib.util
import json

import gguf
import pytest
from factories import ENGINE_TEXT, SENTENCES, TINY_LAYERS, quickstart_fields, random_model_folder
from helpers import card_table, run_cli
from huggingface_hub import ModelCard

from hf_minitf import MiniTFGPTForCausalLM, char_tokenizer, train_wordlevel_tokenizer
from hf_minitf.catalog import FRAWDLLM_PRESETS
from hf_minitf.export.gguf import export_gguf_report
from hf_minitf.export.gguf_file import tensor_types
from hf_minitf.training.tasks import number_words

pytestmark = [
    pytest.mark.engines,
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None,
        reason='llama-cpp-python is not installed (pip install "hf-minitf[llama]")',
    ),
]
K_MIXES = ("q4_k_m", "q5_k_m", "q6_k")
# The K-quant each mix writes where a matrix's rows fit its blocks of 256.
BASE_TYPES = {"q4_k_m": "Q4_K", "q5_k_m": "Q5_K", "q6_k": "Q6_K"}


def frawdllm_size_fields() -> dict:
    """FrawdLLM's tiny-llama preset (its ModelConfig) as MiniTF GPT config fields."""
    size = FRAWDLLM_PRESETS["tiny-llama"]
    return {
        "vocab_size": size.vocab_size,
        "hidden_size": size.hidden_size,
        "num_hidden_layers": size.num_layers,
        "num_attention_heads": size.num_heads,
        "intermediate_size": 4 * size.hidden_size,
        "max_position_embeddings": size.context_length,
        "position_embedding_type": "rope",
    }


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("k_quants")
    tokenizer = char_tokenizer("\n".join(number_words().train))
    return {
        "quickstart": random_model_folder("gpt", root / "quickstart", tokenizer, 3, **quickstart_fields("gpt")),
        # the tokenizer's few characters, the rest of FrawdLLM's 8192 rows spare (UNUSED tokens in the file)
        "frawdllm": random_model_folder("gpt", root / "frawdllm", tokenizer, 4, **frawdllm_size_fields()),
    }


def file_types(path) -> dict[str, str]:
    return {tensor.name: gguf.GGMLQuantizationType(tensor.tensor_type).name for tensor in gguf.GGUFReader(path).tensors}


@pytest.mark.parametrize("dtype", K_MIXES)
@pytest.mark.parametrize("name", ["quickstart", "frawdllm"])
def test_llama_cpps_quantizer_writes_the_k_quants_and_their_agreement_is_measured(sources, tmp_path, name, dtype):
    report = export_gguf_report(sources[name], tmp_path / "model.gguf", dtype=dtype)
    written = file_types(tmp_path / "model.gguf")
    assert written == {tensor_name: tensor.type for tensor_name, tensor in report.types.items()}
    shapes = {
        tensor.name: tuple(reversed([int(size) for size in tensor.shape]))
        for tensor in gguf.GGUFReader(tmp_path / "model.gguf").tensors
    }
    layers = MiniTFGPTForCausalLM.config_class.from_pretrained(sources[name]).num_hidden_layers
    assert written == {
        tensor_name: planned.type for tensor_name, planned in tensor_types(shapes, dtype, layers).items()
    }
    assert BASE_TYPES[dtype] in written.values()  # kept, not fallen back: the gguf package alone refuses this file
    field = gguf.GGUFReader(tmp_path / "model.gguf").fields["general.file_type"].contents()
    assert field == gguf.LlamaFileType[f"MOSTLY_{dtype.upper()}"]
    assert report.quantizer is not None and "llama.cpp" in report.quantizer
    assert report.report_lines()[0].startswith("quantized by llama.cpp's quantizer (llama-cpp-python ")
    agreement = report.agreement  # measured on llama.cpp's file: its rounding shows in the perplexity
    assert agreement is not None and agreement.prompts == 8
    assert agreement.perplexity != agreement.float32_perplexity
    assert abs(agreement.perplexity / agreement.float32_perplexity - 1) < 0.1
    assert not list(tmp_path.glob(".*"))  # the f16 file llama.cpp read is gone


@pytest.mark.parametrize("name", ["quickstart", "frawdllm"])
def test_export_gguf_q4_k_m_runs_in_llama_cpp_with_its_agreement_on_the_card(sources, tmp_path, capsys, name):
    out = tmp_path / f"{name}-Q4_K_M.gguf"
    status, printed, err = run_cli(["export", "gguf", sources[name], out, "--dtype", "q4_k_m"], capsys)
    assert status == 0, err
    assert "quantized by llama.cpp's quantizer" in printed and "greedy tokens equal for" in printed
    assert f"verified: llama.cpp {out.name} (q4_k_m): greedy tokens" in err  # llama.cpp ran the file
    assert "| Runtime |" not in (sources[name] / "README.md").read_text()  # a GGUF file alone has no card
    status, printed, err = run_cli(["verify", out, "--record-in", sources[name]], capsys)
    assert status == 0, err
    (row,) = [row for row in card_table(ModelCard.load(sources[name] / "README.md").text) if row["File"] == out.name]
    assert (row["Runtime"], row["Precision"]) == ("llama.cpp", "q4_k_m")
    assert "greedy tokens" in row["Agreement with MiniTF"] and "llama-cpp-python" in row["Versions"]
    assert "greedy text " in row["Agreement with MiniTF"]  # what the figure means, in one sentence


def test_export_ollama_q4_k_m_is_ready_for_ollama_create(sources, tmp_path, capsys):
    out = tmp_path / "ollama"
    status, printed, err = run_cli(["export", "ollama", sources["frawdllm"], out, "--dtype", "q4_k_m"], capsys)
    assert status == 0, err
    assert f"ollama create frawdllm -f {out / 'Modelfile'}" in printed
    assert (out / "Modelfile").read_text(encoding="utf-8").startswith("FROM ./model.gguf\n")
    written = file_types(out / "model.gguf")
    assert set(written.values()) >= {"Q4_K", "Q6_K"}  # llama.cpp's mix: Q6_K for the head and some ffn_down
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "`q4_k_m` mix" in card and "Q4_K: " in card and "quantized by llama.cpp's quantizer" in card
    assert "| prompts x new tokens (greedy) | 8 x " in card  # the agreement measured on llama.cpp's file
    (row,) = card_table(card)  # the verification the export ran, in llama.cpp
    assert (row["Runtime"], row["File"], row["Precision"]) == ("llama.cpp", "model.gguf", "q4_k_m")


def test_an_encoders_k_quants_are_written_by_llama_cpp_and_keep_its_embeddings_direction(tmp_path, capsys):
    """An encoder of width 256 (rows that keep Q4_K): llama.cpp's q4_k_m mix, reported as written, and the file's
    embeddings in llama.cpp (`minitf verify`) still point where SentenceTransformer's do."""
    tokenizer = train_wordlevel_tokenizer(SENTENCES + [ENGINE_TEXT], vocab_size=64, min_frequency=1, max_length=32)
    fields = dict(
        TINY_LAYERS, hidden_size=256, num_attention_heads=4, intermediate_size=512, max_position_embeddings=32
    )
    folder = random_model_folder("encoder", tmp_path / "encoder", tokenizer, 0, **fields)
    report = export_gguf_report(folder, tmp_path / "encoder.gguf", dtype="q4_k_m")
    written = file_types(tmp_path / "encoder.gguf")
    assert written == {tensor_name: tensor.type for tensor_name, tensor in report.types.items()}
    assert "Q4_K" in written.values() and report.quantizer is not None
    status, printed, err = run_cli(["verify", tmp_path / "encoder.gguf", "--json"], capsys)
    assert status == 0, err
    (run,) = json.loads(printed)["runs"]
    assert run["runtime"] == "llama.cpp" and run["precision"] == "q4_k_m" and run["least_cosine"] >= 0.99, run
