"""`minitf verify` and the verification every export runs: exact exports agree (each runner once: CTranslate2, ONNX
Runtime, transformers, sentence-transformers), a corrupted one (one weight of its model.bin changed) exits 1 naming
the first differing token, which ctranslate2 and transformers called directly confirm; the "Runs in" table
round-trips through huggingface_hub's ModelCard, a new run replaces its row, an upload carries it, and a published
export is verified by repo id. llama.cpp runs a GGUF when llama-cpp-python is installed (`-m engines`), else the file
is reported as not run."""

import importlib.util
import json
import os
import re
import shutil

import numpy as np
import pytest
import torch
from factories import make_encoder, make_gpt, onnx_gpt_export
from helpers import assert_one_line_error, card_table, run_cli, run_python
from huggingface_hub import ModelCard

from hf_minitf import MiniTFGPTForCausalLM
from hf_minitf.cards import RunRow, write_runs_in
from hf_minitf.export import export_ctranslate2, export_gguf, export_native
from hf_minitf.safety.card_metadata import load_model_card

HAS_LLAMA_CPP = importlib.util.find_spec("llama_cpp") is not None


@pytest.fixture(scope="module")
def gpt(tmp_path_factory):
    return make_gpt(tmp_path_factory.mktemp("verify") / "gpt")


@pytest.fixture(scope="module")
def ct2(gpt, tmp_path_factory):
    """A float32 CTranslate2 export of `gpt`, not verified."""
    return export_ctranslate2(gpt, tmp_path_factory.mktemp("verify") / "ct2")


def test_export_verifies_and_tables_round_trip_and_rows_are_replaced(tmp_path, capsys):
    gpt = make_gpt(tmp_path / "gpt")  # its own: --record-in writes rows into it
    source_card = (gpt / "README.md").read_text()
    out = tmp_path / "gpt_ct2"
    status, printed, err = run_cli(["export", "ctranslate2", gpt, out], capsys)
    assert status == 0, err
    assert printed.startswith("Exported ")  # stdout says what was exported, stderr what was verified
    assert "verified: ctranslate2 model.bin (float32): greedy tokens equal (4/4 prompts x 16)" in err
    card = ModelCard.load(out / "README.md")
    (row,) = card_table(card.text)
    assert row["Runtime"] == "ctranslate2" and row["File"] == "model.bin" and row["Precision"] == "float32"
    assert row["Agreement with MiniTF"].startswith("greedy tokens equal (4/4 prompts x 16); logits within ")
    assert float(row["Agreement with MiniTF"].rsplit(" ", 1)[1]) < 1e-4
    assert row["Speed"].endswith("tokens/s") and re.match(r"ctranslate2 [\d.]+, hf-minitf ", row["Versions"])
    assert row["Size"] == f"{(out / 'model.bin').stat().st_size / 1000:.1f} kB"
    # The card saved and loaded again by huggingface_hub keeps its metadata and its table.
    card.save(tmp_path / "saved.md")
    again = load_model_card(tmp_path / "saved.md")
    assert card_table(again.text) == [row] and again.data.license == card.data.license
    assert "ctranslate2" in again.data.tags
    assert (gpt / "README.md").read_text() == source_card  # the rows belong to the export's card, not the source's

    status, printed, err = run_cli(["verify", out, "--prompts", "2", "--new-tokens", "5"], capsys)
    assert status == 0, err
    (row,) = card_table(ModelCard.load(out / "README.md").text)  # replaced, not added
    assert row["Agreement with MiniTF"].startswith("greedy tokens equal (2/2 prompts x 5)")
    assert (gpt / "README.md").read_text() == source_card and str(gpt / "README.md") not in printed

    # --record-in SOURCE: the source's card gets the rows too, each file named relative to the export
    arguments = ["verify", out, "--prompts", "2", "--new-tokens", "5", "--record-in", gpt]
    status, printed, err = run_cli(arguments, capsys)
    assert status == 0, err
    assert f"Runs in table written to {gpt / 'README.md'}" in printed
    (source_row,) = card_table(ModelCard.load(gpt / "README.md").text)
    assert (source_row["Runtime"], source_row["File"]) == ("ctranslate2", "model.bin")
    assert "(2/2 prompts x 5)" in source_row["Agreement with MiniTF"]
    assert not any(str(tmp_path) in cell or "gpt_ct2" in cell for cell in source_row.values()), source_row


def test_record_in_refuses_a_folder_that_is_not_the_model_measured_and_writes_nothing(gpt, ct2, tmp_path, capsys):
    """--record-in names the source folder whose card gets the rows: another model (other weights), a folder
    without a card or no folder at all is refused in one line before anything is measured; no card changes."""
    other = make_gpt(tmp_path / "other", seed=3)
    cards = {folder: (folder / "README.md").read_text() for folder in (gpt, ct2, other)}
    status, _, err = run_cli(["verify", ct2, "--record-in", other], capsys)
    assert_one_line_error(status, err, f"--record-in {other} does not hold the model", "config.json or weights")
    bare = tmp_path / "bare"
    bare.mkdir()
    assert_one_line_error(*run_cli(["verify", ct2, "--record-in", bare], capsys)[::2], "has no README.md")
    absent = tmp_path / "absent"
    assert_one_line_error(*run_cli(["verify", ct2, "--record-in", absent], capsys)[::2], "no such folder")
    assert {folder: (folder / "README.md").read_text() for folder in cards} == cards


def test_an_error_cell_names_no_folder_of_this_machine(gpt, tmp_path):
    """A runtime's error naming the file's full path (a temporary download, a folder here) is recorded with the
    file's name relative to the export."""
    from hf_minitf.verification.runners import Target
    from hf_minitf.verification.verify import Inputs, check_of

    target = Target("onnxruntime", "generator", tmp_path / "exp", "onnx/model.onnx", "fp32", label="onnx/model.onnx")
    error = f"Load model from {tmp_path / 'exp' / 'onnx' / 'model.onnx'} failed: bad graph in {tmp_path / 'exp'}"
    check = check_of(target, {}, {"error": error, "versions": {}}, Inputs("generator"), str)
    assert check.row.agreement == "does not run: Load model from onnx/model.onnx failed: bad graph in onnx/model.onnx"
    assert str(tmp_path) not in check.row.agreement


def ctranslate2_greedy(folder, prompt: list[int], new_tokens: int) -> list[int]:
    """ctranslate2.Generator's greedy new ids (end token included), in a process of its own."""
    return run_python(f"""
        import json, ctranslate2
        vocabulary = json.load(open({str(folder / "vocabulary.json")!r}))
        generator = ctranslate2.Generator({str(folder)!r}, device="cpu")
        result = generator.generate_batch([[vocabulary[i] for i in {prompt!r}]], max_length={new_tokens},
                                          sampling_topk=1, include_prompt_in_result=False, end_token=[3],
                                          return_end_token=True)
        print(json.dumps(result[0].sequences_ids[0]))
    """)


def test_a_corrupted_export_fails_naming_the_first_differing_token(gpt, ct2, tmp_path, capsys):
    corrupted = tmp_path / "corrupted"
    shutil.copytree(ct2, corrupted)
    row = MiniTFGPTForCausalLM.from_pretrained(gpt).lm_head.weight[10].detach().numpy().astype(np.float32)
    data = (corrupted / "model.bin").read_bytes()
    assert data.count(row.tobytes()) >= 1  # token 10's row of the output projection, in float32
    changed = row.copy()
    changed[0] = 1e4  # one weight: token 10 now wins wherever the last hidden state's first feature is positive
    (corrupted / "model.bin").write_bytes(data.replace(row.tobytes(), changed.tobytes()))

    status, printed, err = run_cli(["verify", corrupted, "--prompts", "3", "--new-tokens", "8"], capsys)
    assert status == 1
    (line,) = err.strip().splitlines()
    match = re.search(
        r"prompt (\d+) \[([\d, ]+)\] first differs at new token (\d+): MiniTF (\d+) '.*', ctranslate2 (\d+) '", line
    )
    assert line.startswith("minitf verify: ") and "float32" in line and match, line
    prompt = [int(token) for token in match.group(2).split(", ")]
    position = int(match.group(3)) - 1
    model = MiniTFGPTForCausalLM.from_pretrained(gpt).eval()
    with torch.no_grad():
        expected = model.generate(torch.tensor([prompt]), max_new_tokens=8, do_sample=False)[0, len(prompt) :]
    engine = ctranslate2_greedy(corrupted, prompt, 8)
    assert expected[:position].tolist() == engine[:position] and expected[position] != engine[position]
    assert (int(match.group(4)), int(match.group(5))) == (expected[position], engine[position])
    assert (
        "greedy tokens differ" in card_table(ModelCard.load(corrupted / "README.md").text)[0]["Agreement with MiniTF"]
    )


def test_onnx_gpt_agrees():
    from hf_minitf.verification import verify_export

    verification = verify_export(onnx_gpt_export("learned"), prompts=2, new_tokens=8, write_cards=False)
    (check,) = verification.checks
    assert (check.row.runtime, check.row.file, check.row.precision) == ("onnxruntime", "onnx/model.onnx", "fp32")
    assert check.agrees and check.figures["prompts_equal"] == 2 and check.figures["logits_relative"] < 1e-4


def test_native_encoder_agrees_in_sentence_transformers(tmp_path, capsys):
    encoder = make_encoder(tmp_path / "encoder")
    export_native(encoder, tmp_path / "native")
    status, printed, err = run_cli(["verify", tmp_path / "native", "--prompts", "3", "--json"], capsys)
    assert status == 0, err
    (run,) = json.loads(printed)["runs"]
    assert run["runtime"] == "sentence-transformers" and run["claims_exact"] and run["agrees"]
    assert run["least_cosine"] > 1 - 1e-6 and run["embeddings_relative"] < 1e-5 and run["texts"] == 3


def test_push_native_carries_the_table_and_verify_checks_the_published_repo(hub, gpt, tmp_path, capsys):
    status, printed, err = run_cli(["push", gpt, "org/verified-native", "--native"], capsys)
    assert status == 0, err
    (row,) = card_table(hub.read("org/verified-native", "README.md").decode())
    assert (row["Runtime"], row["File"], row["Precision"]) == ("transformers", "model.safetensors", "float32")
    assert row["Agreement with MiniTF"].startswith("greedy tokens equal (4/4 prompts x 16)")
    assert "| Runtime |" not in (gpt / "README.md").read_text()  # the source's card is left as it is

    # the published card names no folder of this machine (verify ran before the upload): the source is given
    assert "minitf_source" not in ModelCard.load("org/verified-native").data.to_dict()
    arguments = ["verify", "org/verified-native", "--prompts", "2", "--new-tokens", "4"]
    status, printed, err = run_cli(arguments, capsys)
    assert status == 2 and "--source FOLDER" in err
    status, printed, err = run_cli([*arguments, "--source", gpt], capsys)
    assert status == 0, err
    assert printed.startswith("transformers model.safetensors (float32): greedy tokens equal (2/2 prompts x 4)")
    assert "Runs in table written" not in printed  # the downloaded copy in the cache is left as it is
    assert "| Runtime |" not in (gpt / "README.md").read_text()

    # --record-in: the source's card gets the published file's row, named by its repo id, no path of the cache
    status, printed, err = run_cli([*arguments, "--source", gpt, "--record-in", gpt], capsys)
    assert status == 0, err
    (source_row,) = card_table(ModelCard.load(gpt / "README.md").text)
    assert (source_row["Runtime"], source_row["File"]) == ("transformers", "org/verified-native: model.safetensors")
    assert not any(os.environ["HF_HOME"] in cell or str(gpt) in cell for cell in source_row.values()), source_row
    assert source_row["Speed"].endswith("tokens/s")


def test_push_of_an_export_folder_uploads_its_table(hub, gpt, tmp_path, capsys):
    out = export_native(gpt, tmp_path / "native")
    row = RunRow("transformers", "model.safetensors", "float32", "1 kB", "greedy tokens equal", "9 tokens/s", "d", "v")
    assert write_runs_in(out / "README.md", [row])  # the table as `minitf verify` writes it (checked above)
    assert run_cli(["push", out, "org/native-folder"], capsys)[0] == 0
    (uploaded,) = card_table(hub.read("org/native-folder", "README.md").decode())
    assert uploaded == {
        "Runtime": "transformers",
        "File": "model.safetensors",
        "Precision": "float32",
        "Size": "1 kB",
        "Agreement with MiniTF": "greedy tokens equal",
        "Speed": "9 tokens/s",
        "Date": "d",
        "Versions": "v",
    }


NOT_MEASURED_IN_LLAMA_CPP = (
    'not measured in llama.cpp (llama-cpp-python is not installed: pip install "hf-minitf[llama]")'
)


@pytest.mark.skipif(HAS_LLAMA_CPP, reason="llama-cpp-python is installed: test_gguf_agrees_in_llama_cpp runs it")
def test_a_gguf_without_llama_cpp_is_not_measured_and_verify_fails(gpt, tmp_path, capsys):
    """Nothing measured is no verification: the line says so and how to install llama.cpp, the status is 1; a GGUF
    file alone and an Ollama folder alike."""
    from hf_minitf.export.ollama import export_ollama

    gguf = export_gguf(gpt, tmp_path / "gpt.gguf", dtype="f32")
    status, printed, err = run_cli(["verify", gguf, "--prompts", "1", "--new-tokens", "2"], capsys)
    assert status == 1
    assert printed.strip() == f"llama.cpp gpt.gguf (f32): {NOT_MEASURED_IN_LLAMA_CPP}"
    assert err.strip() == f"minitf verify: {gguf}: nothing measured: gpt.gguf: {NOT_MEASURED_IN_LLAMA_CPP}"
    ollama = export_ollama(gpt, tmp_path / "ollama", dtype="q8_0").path
    card = (ollama / "README.md").read_text()
    status, printed, err = run_cli(["verify", ollama, "--prompts", "1", "--new-tokens", "2"], capsys)
    assert status == 1 and "nothing measured" in err
    assert printed.strip() == f"llama.cpp model.gguf (q8_0): {NOT_MEASURED_IN_LLAMA_CPP}"
    assert (ollama / "README.md").read_text() == card


@pytest.mark.skipif(HAS_LLAMA_CPP, reason="llama-cpp-python is installed: the engines tests run the file in it")
def test_export_gguf_says_what_it_measured_and_what_to_do(gpt, tmp_path, capsys):
    """A q4_0 GGUF export of a random GPT: the agreement it prints is labelled as the dequantized weights run in
    PyTorch, followed by the sentence that says what to do; llama.cpp's check is said plainly not measured (the
    export itself succeeded: status 0)."""
    status, printed, err = run_cli(["export", "gguf", gpt, tmp_path / "q4.gguf", "--dtype", "q4_0"], capsys)
    assert status == 0, err
    (rounding,) = [line for line in printed.splitlines() if "greedy tokens equal for" in line]
    assert rounding.startswith("weights' rounding, measured in PyTorch (the file's weights dequantized into the ")
    assert "not a llama.cpp run" in rounding and "llama.cpp's" not in rounding
    # this random GPT's logits are near ties everywhere: q4_0's rounding changes its first greedy token
    assert "first difference at token 0" in rounding
    assert rounding.endswith("; greedy text differs from the first token: use q8_0 or f16 for this model"), rounding
    assert f"minitf export gguf: not verified: llama.cpp q4.gguf (q4_0): {NOT_MEASURED_IN_LLAMA_CPP}" in err
    assert "verified: llama.cpp" not in err.replace("not verified: llama.cpp", "")


@pytest.mark.engines
@pytest.mark.skipif(not HAS_LLAMA_CPP, reason='llama-cpp-python is not installed (pip install "hf-minitf[llama]")')
def test_gguf_agrees_in_llama_cpp(gpt, tmp_path, capsys):
    gguf = export_gguf(gpt, tmp_path / "gpt.gguf", dtype="f32")
    status, printed, err = run_cli(["verify", gguf, "--prompts", "4", "--new-tokens", "16", "--json"], capsys)
    assert status == 0, err
    (run,) = json.loads(printed)["runs"]
    assert run["runtime"] == "llama.cpp" and run["claims_exact"] and run["agrees"], run


@pytest.mark.engines
@pytest.mark.skipif(not HAS_LLAMA_CPP, reason='llama-cpp-python is not installed (pip install "hf-minitf[llama]")')
def test_a_quantized_gguf_is_measured_in_llama_cpp_with_what_to_do(gpt, tmp_path, capsys):
    """With llama-cpp-python the export's check and `minitf verify` run the file in llama.cpp: the row's figure is
    llama.cpp's, followed by the sentence saying what to do (this random GPT's near ties: q4_0 differs from the
    first token), and the status is 0 (a quantized file claims no exactness)."""
    out = tmp_path / "q4.gguf"
    status, printed, err = run_cli(["export", "gguf", gpt, out, "--dtype", "q4_0"], capsys)
    assert status == 0, err
    assert "not measured" not in err and "not verified" not in err
    (verified,) = [line for line in err.splitlines() if "verified: llama.cpp q4.gguf (q4_0): " in line]
    assert "greedy text differs from the first token: use q8_0 or f16 for this model" in verified
    status, printed, err = run_cli(["verify", out, "--prompts", "4", "--new-tokens", "8", "--json"], capsys)
    assert status == 0, err
    (run,) = json.loads(printed)["runs"]
    assert run["runtime"] == "llama.cpp" and not run["claims_exact"] and run["prompts_equal"] == 0, run
    assert run["earliest_difference"] == 0 and run["versions"].startswith("llama-cpp-python "), run
    assert run["advice"] == "greedy text differs from the first token: use q8_0 or f16 for this model"
    assert run["agreement"].endswith(f"; {run['advice']}") and run["speed"] > 0


def test_an_encoder_gguf_is_an_embedder_that_claims_no_exactness(tmp_path):
    from hf_minitf.verification.runners import find_export

    gguf = export_gguf(make_encoder(tmp_path / "encoder"), tmp_path / "encoder.gguf", dtype="f32")
    (target,) = find_export(gguf).targets
    assert (target.engine, target.kind, target.precision) == ("llama.cpp", "embedder", "f32")
    assert target.runner is not None and not target.claims_exact  # llama.cpp's GELU is the tanh form


@pytest.mark.engines
@pytest.mark.skipif(not HAS_LLAMA_CPP, reason='llama-cpp-python is not installed (pip install "hf-minitf[llama]")')
def test_encoder_gguf_keeps_the_embeddings_direction_in_llama_cpp(tmp_path, capsys):
    encoder = make_encoder(tmp_path / "encoder")
    status, printed, err = run_cli(["export", "gguf", encoder, tmp_path / "encoder.gguf", "--dtype", "f32"], capsys)
    assert status == 0, err
    assert "verified: llama.cpp encoder.gguf (f32): embeddings within" in err
    assert "| Runtime |" not in (encoder / "README.md").read_text()  # a GGUF file has no card; the source keeps its
    arguments = ["verify", tmp_path / "encoder.gguf", "--prompts", "5", "--json", "--record-in", encoder]
    status, printed, err = run_cli(arguments, capsys)
    assert status == 0, err
    (row,) = card_table(ModelCard.load(encoder / "README.md").text)
    assert (row["Runtime"], row["File"], row["Precision"]) == ("llama.cpp", "encoder.gguf", "f32")
    (run,) = json.loads(printed)["runs"]
    assert run["runtime"] == "llama.cpp" and not run["claims_exact"], run
    assert run["texts"] == 5 and 0.9999 <= run["least_cosine"] <= 1.0, run


def test_bad_inputs_are_one_line_errors(gpt, ct2, tmp_path, capsys):
    assert_one_line_error(*run_cli(["verify", gpt], capsys)[::2], "--source")  # a MiniTF folder is a source
    assert_one_line_error(*run_cli(["verify", tmp_path / "absent"], capsys)[::2], "does not exist")
    encoder = make_encoder(tmp_path / "encoder")
    status, _, err = run_cli(["verify", ct2, "--source", encoder], capsys)
    assert_one_line_error(status, err, "encoder model", "--source")
    status, _, err = run_cli(["verify", ct2, "--prompts", "0"], capsys)
    assert status == 2 and "--prompts" in err


def test_a_damaged_gguf_is_named_in_one_line(gpt, tmp_path, capsys):
    """Garbage after the GGUF magic, or a file without a file type: the file is named and what to do said, not the
    gguf package's "Sorry, file appears to be version ..." or "None is not a valid LlamaFileType"."""
    import gguf

    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"GGUF" + bytes(range(251, 256)) * 40)
    no_type = tmp_path / "no-type.gguf"
    writer = gguf.GGUFWriter(str(no_type), "gpt2")
    writer.add_context_length(16)
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    for path, words in ((garbage, "version"), (no_type, "general.file_type is None")):
        status, _, err = run_cli(["verify", path], capsys)
        assert_one_line_error(status, err, f"{path} is not a GGUF file the package can read", words, "export gguf")


def test_an_exact_export_whose_logits_were_scaled_fails_although_its_tokens_agree(gpt, tmp_path, capsys):
    """A native export whose final LayerNorm was scaled x3 after export: every logit x3, the same argmax. A float32
    file claims exactness, so its logits must agree too (within 1e-5 relative to their magnitude)."""
    from safetensors.torch import load_file, save_file

    native = export_native(gpt, tmp_path / "native")
    weights = load_file(native / "model.safetensors")
    (final_norm,) = [name for name in weights if name.endswith("ln_f.weight")]
    for name in (final_norm, final_norm.replace(".weight", ".bias")):
        weights[name] = weights[name] * 3
    save_file(weights, native / "model.safetensors", metadata={"format": "pt"})
    status, _, err = run_cli(["verify", native, "--prompts", "2", "--new-tokens", "4"], capsys)
    (line,) = err.strip().splitlines()
    assert status == 1 and "greedy tokens equal, but the logits of prompt" in line, line
    assert re.search(r"differ by 2\.0e\+00 relative at position \d+ \(more than 1e-05", line), line


def test_an_export_made_with_a_relative_source_is_measured_against_it_from_anywhere(tmp_path, monkeypatch, capsys):
    """`minitf export native model exp` records the absolute path of `model`: `minitf verify` run from another
    directory holding another `./model` measures the export against the right one and writes no row into the
    other's card."""
    (tmp_path / "here").mkdir()
    (tmp_path / "elsewhere").mkdir()
    make_gpt(tmp_path / "here" / "model")
    other = make_gpt(tmp_path / "elsewhere" / "model", seed=7)
    other_card = (other / "README.md").read_text()
    monkeypatch.chdir(tmp_path / "here")
    status, _, err = run_cli(["export", "native", "model", "exp", "--no-verify"], capsys)
    assert status == 0, err
    card = load_model_card(tmp_path / "here" / "exp" / "README.md")
    assert card.data.minitf_source == str((tmp_path / "here" / "model").resolve())
    assert set(card.data.minitf_source_sha256) == {"config", "weights"}
    monkeypatch.chdir(tmp_path / "elsewhere")
    arguments = ["verify", tmp_path / "here" / "exp", "--prompts", "2", "--new-tokens", "4"]
    status, printed, err = run_cli([*arguments, "--record-in", tmp_path / "here" / "model"], capsys)
    assert status == 0, err
    assert "greedy tokens equal (2/2 prompts x 4)" in printed
    assert (other / "README.md").read_text() == other_card
    assert "| Runtime |" in (tmp_path / "here" / "model" / "README.md").read_text()


@pytest.mark.parametrize("export", ["native", "ctranslate2", "gguf"])
def test_a_recorded_source_replaced_by_another_model_or_gone_is_refused_naming_it(export, tmp_path, capsys):
    """The export recorded its source's config and weights hashes: a folder now holding another model (another
    config), the same model retrained (other weights) or no folder at all is refused in one line naming the path
    and what to do; --source still measures against whatever folder is given."""
    source = make_gpt(tmp_path / "model")
    out = tmp_path / ("exp.gguf" if export == "gguf" else "exp")
    status, _, err = run_cli(["export", export, source, out, "--no-verify"], capsys)
    assert status == 0, err
    shutil.rmtree(source)
    make_gpt(source, seed=5)  # the same config, other weights
    status, _, err = run_cli(["verify", out], capsys)
    assert_one_line_error(status, err, f"{source.resolve()} changed since", "weights", "export it again")
    shutil.rmtree(source)
    make_gpt(source, max_position_embeddings=32)  # another config
    status, _, err = run_cli(["verify", out], capsys)
    assert_one_line_error(status, err, f"{source.resolve()} is another model", "config.json", "--source")
    shutil.rmtree(source)
    status, _, err = run_cli(["verify", out], capsys)
    assert_one_line_error(status, err, f"{source.resolve()}, which is not here", "--source", "export it again")


def test_an_old_export_without_recorded_hashes_still_verifies_with_a_note(gpt, ct2, tmp_path, capsys):
    """An engine export written before hashes were recorded: measured as before, with a note saying so."""
    old = tmp_path / "old"
    shutil.copytree(ct2, old)
    info = json.loads((old / "minitf_export.json").read_text())
    del info["minitf_source_sha256"]
    (old / "minitf_export.json").write_text(json.dumps(info))
    status, _, err = run_cli(["verify", old, "--prompts", "2", "--new-tokens", "4"], capsys)
    assert status == 0, err
    assert "note:" in err and "records no hashes of its source" in err and "export again" in err


def tampered(native, change) -> None:
    """`native`'s model.safetensors rewritten with `change(weights)` applied."""
    from safetensors.torch import load_file, save_file

    weights = load_file(native / "model.safetensors")
    change(weights)
    save_file(weights, native / "model.safetensors", metadata={"format": "pt"})


def test_an_exact_native_export_with_one_tampered_row_fails_naming_the_tensor_and_row(gpt, tmp_path, capsys):
    """One embedding row of a token no verify prompt uses (the outputs agree) or one row of a weight matrix (they
    may not): the float32 native file is compared with the source's tensors, and the first differing one is named
    with its row. The scaled final LayerNorm is named too, besides its logits."""
    native = export_native(gpt, tmp_path / "native")
    status, _, err = run_cli(["verify", native, "--prompts", "2", "--new-tokens", "4"], capsys)
    assert status == 0, err  # the untouched export: every tensor equal
    unused = tmp_path / "unused"
    shutil.copytree(native, unused)

    def embedding_row(weights):
        weights["transformer.wte.weight"][-1] += 0.5  # the last id: no prompt of 2 x 4 tokens reaches it here

    tampered(unused, embedding_row)
    status, _, err = run_cli(["verify", unused, "--prompts", "2", "--new-tokens", "4"], capsys)
    (line,) = err.strip().splitlines()
    last = load_file_rows(unused, "transformer.wte.weight") - 1
    assert (
        status == 1
        and f"tensor transformer.wte.weight of model.safetensors differs from the source's at row {last}" in line
    ), line
    assert "(1 of" in line

    matrix = tmp_path / "matrix"
    shutil.copytree(native, matrix)

    def matrix_row(weights):
        weights["transformer.h.0.mlp.c_fc.weight"][3] *= 1.001

    tampered(matrix, matrix_row)
    status, _, err = run_cli(["verify", matrix, "--prompts", "2", "--new-tokens", "4"], capsys)
    assert status == 1 and "tensor transformer.h.0.mlp.c_fc.weight of model.safetensors differs" in err, err
    assert "at row 3 (1 of" in err

    scaled = tmp_path / "scaled"
    shutil.copytree(native, scaled)
    tampered(scaled, lambda weights: weights["transformer.ln_f.weight"].mul_(3))
    status, _, err = run_cli(["verify", scaled, "--prompts", "2", "--new-tokens", "4"], capsys)
    assert status == 1 and "tensor transformer.ln_f.weight of model.safetensors differs" in err, err
    assert "at index 0" in err


def load_file_rows(native, name: str) -> int:
    from safetensors.torch import load_file

    return len(load_file(native / "model.safetensors")[name])


@pytest.mark.parametrize(
    ("dtype", "equal", "first", "said"),
    [
        ("q4_0", 8, None, "greedy text matches the float32 model on these prompts"),
        ("q4_0", 0, 0, "greedy text differs from the first token: use q8_0 or f16 for this model"),
        ("q4_k_m", 2, 0, "greedy text differs from the first token: use q8_0 or f16 for this model"),
        ("q8_0", 0, 0, "greedy text differs from the first token: use f16 or f32 for this model"),
        ("f16", 0, 0, "greedy text differs from the first token: use f32 for this model"),
        (
            "q5_0",
            5,
            12,
            "greedy text follows the float32 model for 12 token(s), then drifts on 3 of 8 prompts: use q8_0 or "
            "f16 where the exact text matters",
        ),
    ],
)
def test_each_gguf_figure_is_followed_by_what_to_do(dtype, equal, first, said):
    from hf_minitf.catalog.verification import gguf_advice

    assert gguf_advice(dtype, 8, equal, first) == said
