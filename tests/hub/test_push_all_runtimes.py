"""`minitf push SRC REPO --all-runtimes` against the loopback Hub: each runtime's export, verified, in its own place
(the native folder in REPO, GGUF files with the Ollama Modelfile in REPO-GGUF, ONNX in REPO-ONNX, CTranslate2 in
REPO-ct2, the web page in the static Space REPO), each card with its "Runs in" rows, and each repo loaded back from
the Hub: the native model by from_pretrained, the GGUF file read, the ONNX and CTranslate2 folders run by the
package's engines. A GGUF type only llama.cpp's quantizer writes is left out, with a line, without llama-cpp-python
(hidden here; with it, tests/export/test_engines_llama_cpp_quants.py); refusals upload nothing."""

import contextlib
import importlib.util
import io
import json

import gguf
import pytest
import torch
from factories import GPT_PROMPTS, make_gpt, quickstart_fields, random_model_folder
from helpers import assert_one_line_error, card_table, llama_cpp_hidden, run_cli
from huggingface_hub import ModelCard, hf_hub_download, snapshot_download
from transformers import AutoModelForCausalLM, AutoTokenizer

from hf_minitf import MiniTFGPTForCausalLM, char_tokenizer
from hf_minitf.catalog.packaging import EXTRAS
from hf_minitf.catalog.verification import GGUF_SOURCE_KEY
from hf_minitf.cli import main as minitf_main
from hf_minitf.training.tasks import number_words


@pytest.fixture(scope="module")
def gpt(tmp_path_factory):
    return make_gpt(tmp_path_factory.mktemp("all_runtimes") / "tiny", "rope")


@pytest.fixture(scope="module")
def pushed(hub, gpt):
    """`minitf push GPT org/tiny --all-runtimes` (the default GGUF types, llama-cpp-python hidden): its stderr."""
    errors = io.StringIO()
    with llama_cpp_hidden(), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(errors):
        status = minitf_main(["push", str(gpt), "org/tiny", "--all-runtimes"])
    assert status == 0, errors.getvalue()
    return errors.getvalue()


def test_every_runtime_goes_to_its_own_repo_with_its_runs_in_rows(hub, pushed):
    assert set(hub.files("org/tiny")) >= {"config.json", "model.safetensors", "README.md"}
    assert set(hub.files("org/tiny-GGUF")) == {"tiny-Q8_0.gguf", "Modelfile", "README.md"}
    assert "onnx/model.onnx" in hub.files("org/tiny-ONNX")
    assert "model.bin" in hub.files("org/tiny-ct2")
    assert {"index.html", "model/onnx/model.onnx"} <= hub.files("org/tiny", repo_type="space")
    assert hub.spaces["org/tiny"].sdk == "static"
    runtimes = {
        "org/tiny": ("model", "transformers"),
        "org/tiny-ONNX": ("model", "onnxruntime"),
        "org/tiny-ct2": ("model", "ctranslate2"),
    }
    for repo_id, (repo_type, runtime) in runtimes.items():
        rows = card_table(hub.read(repo_id, "README.md", repo_type=repo_type).decode())
        assert any(row["Runtime"] == runtime and "greedy tokens" in row["Agreement with MiniTF"] for row in rows)
    space_rows = card_table(hub.read("org/tiny", "README.md", repo_type="space").decode())
    assert any(row["Runtime"] == "onnxruntime" for row in space_rows)


def test_no_pushed_record_names_the_local_source_folder(hub, pushed, gpt, capsys):
    """Exports record their source's absolute path and hashes (card metadata, minitf_export.json, GGUF metadata) for
    `minitf verify` on this machine; what is published records no folder of this machine (the verification ran
    before the upload): the GGUF files of a source pushed nowhere record no source, and `minitf verify` of one says
    to give it with --source."""
    local = str(gpt.resolve())
    for repo_id in ("org/tiny", "org/tiny-ONNX", "org/tiny-ct2"):
        metadata = ModelCard(hub.read(repo_id, "README.md").decode()).data.to_dict()
        assert local not in json.dumps(metadata) and "minitf_source_sha256" not in metadata, repo_id
        if "minitf_export.json" in hub.files(repo_id):
            info = json.loads(hub.read(repo_id, "minitf_export.json"))
            assert local not in json.dumps(info) and "minitf_source_sha256" not in info, repo_id
    path = hf_hub_download("org/tiny-GGUF", "tiny-Q8_0.gguf")
    fields = gguf.GGUFReader(path).fields
    assert not [key for key in fields if key.startswith(GGUF_SOURCE_KEY)], list(fields)
    assert not any(local in str(field.contents()) for field in fields.values())
    status, _, err = run_cli(["verify", path], capsys)
    assert_one_line_error(status, err, "tiny-Q8_0.gguf", "--source")


def test_each_card_names_the_native_repo_as_its_source_and_nothing_local(hub, pushed, gpt):
    """The native repo is what the other runtimes' cards were exported from (base_model, a link); the native card
    names no source repo (the MiniTF folder was not pushed); no card names the local folder or a temporary one."""
    cards = {
        (repo_id, repo_type): ModelCard(hub.read(repo_id, "README.md", repo_type=repo_type).decode())
        for repo_id, repo_type in (
            ("org/tiny", "model"),
            ("org/tiny-GGUF", "model"),
            ("org/tiny-ONNX", "model"),
            ("org/tiny-ct2", "model"),
            ("org/tiny", "space"),
        )
    }
    for (repo_id, repo_type), card in cards.items():
        assert str(gpt.parent) not in str(card) and "/tmp" not in card.text, (repo_id, repo_type)
        if (repo_id, repo_type) == ("org/tiny", "model"):
            assert card.data.get("base_model") is None and "a MiniTF gpt model" in card.text
        else:
            assert (card.data.get("base_model") or card.data.get("models")[0]) == "org/tiny", (repo_id, repo_type)
            assert "(https://huggingface.co/org/tiny)" in card.text, (repo_id, repo_type)
    assert cards["org/tiny-ONNX", "model"].text.lstrip().startswith("# tiny-ONNX: a MiniTF gpt model as ONNX")


def test_k_quants_are_left_out_with_a_line_without_llama_cpp(hub, pushed):
    err = pushed
    assert (
        f"GGUF q4_k_m left out: llama.cpp's quantizer writes its K-quants, and llama-cpp-python is not installed "
        f"({EXTRAS['llama'].install})" in err
    )


def test_each_repo_loads_back(hub, gpt, tmp_path, capsys):
    tokenizer = AutoTokenizer.from_pretrained(gpt)
    ids = torch.tensor([tokenizer(GPT_PROMPTS[0]).input_ids])
    expected = MiniTFGPTForCausalLM.from_pretrained(gpt).generate(ids, max_new_tokens=10, do_sample=False)
    native = AutoModelForCausalLM.from_pretrained("org/tiny")  # no remote code: GPT-NeoX
    assert native.generate(ids, max_new_tokens=10, do_sample=False).tolist() == expected.tolist()

    path = hf_hub_download("org/tiny-GGUF", "tiny-Q8_0.gguf")
    reader = gguf.GGUFReader(path)
    assert reader.fields["general.file_type"].contents() == gguf.LlamaFileType.MOSTLY_Q8_0
    modelfile = hf_hub_download("org/tiny-GGUF", "Modelfile")
    assert open(modelfile, encoding="utf-8").readline() == "FROM ./tiny-Q8_0.gguf\n"
    card = hub.read("org/tiny-GGUF", "README.md").decode()
    assert "ollama run hf.co/org/tiny-GGUF:Q8_0" in card and "greedy tokens equal for" in card
    assert "base_model: org/tiny" in card

    command = ["--max-new-tokens", "12", *GPT_PROMPTS[:2]]
    status, reference, err = run_cli(["generate", gpt, *command], capsys)
    assert status == 0, err
    for repo_id in ("org/tiny-ONNX", "org/tiny-ct2"):
        folder = snapshot_download(repo_id, local_dir=tmp_path / repo_id.split("/")[1])
        status, printed, err = run_cli(["generate", folder, *command], capsys)
        assert status == 0, err
        assert printed == reference, repo_id


def test_refusals_upload_nothing(hub, gpt, tmp_path, capsys):
    uploads = len(hub.uploads)
    status, _, err = run_cli(["push", gpt, "org/refused", "--all-runtimes", "--native"], capsys)
    assert status == 2 and "--all-runtimes" in err
    status, _, err = run_cli(["push", gpt, "org/refused", "--all-runtimes", "--gguf", "q3"], capsys)
    assert status == 2 and "q3" in err
    crop = make_gpt(tmp_path / "crop", context_overflow="crop")  # learned positions cropping: no native form
    status, _, err = run_cli(["push", crop, "org/refused", "--all-runtimes", "--no-verify"], capsys)
    assert status == 2 and "native: " in err and "context_overflow" in err
    assert len(hub.uploads) == uploads and "org/refused" not in hub.repos


@pytest.mark.engines
@pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None,
    reason='llama-cpp-python is not installed (pip install "hf-minitf[llama]")',
)
def test_with_llama_cpp_the_gguf_repo_holds_q4_k_m_run_in_llama_cpp(hub, tmp_path, capsys):
    """The quickstart's GPT (its FFN rows of 512 keep Q4_K): q4_k_m written by llama.cpp's quantizer, the
    Modelfile for it, and llama.cpp's Runs in row for each file on the GGUF repo's card."""
    tokenizer = char_tokenizer("\n".join(number_words().train))
    source = random_model_folder("gpt", tmp_path / "qs", tokenizer, 3, **quickstart_fields("gpt"))
    status, printed, err = run_cli(["push", source, "org/qs", "--all-runtimes", "--gguf", "q4_k_m,q8_0"], capsys)
    assert status == 0, err
    assert "left out" not in err and "Pushed" in printed
    assert set(hub.files("org/qs-GGUF")) == {"qs-Q4_K_M.gguf", "qs-Q8_0.gguf", "Modelfile", "README.md"}
    reader = gguf.GGUFReader(hf_hub_download("org/qs-GGUF", "qs-Q4_K_M.gguf"))
    assert "Q4_K" in {gguf.GGMLQuantizationType(tensor.tensor_type).name for tensor in reader.tensors}
    assert hub.read("org/qs-GGUF", "Modelfile").startswith(b"FROM ./qs-Q4_K_M.gguf\n")
    card = hub.read("org/qs-GGUF", "README.md").decode()
    assert "llama.cpp's quantizer (llama-cpp-python" in card and "ollama run hf.co/org/qs-GGUF:Q4_K_M" in card
    rows = {row["File"]: row for row in card_table(card) if row["Runtime"] == "llama.cpp"}
    assert {rows[name]["Precision"] for name in rows} == {"q4_k_m", "q8_0"}, rows
