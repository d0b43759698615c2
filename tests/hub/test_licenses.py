"""Every card a command writes names a license: trained folders (the default, or `--license`), converted ones (the
original project's license, or `other` with a section asking for one), every export (the source card's license,
or `--license`), pushed ones; and the native and engine export cards carry the trained model's model-index."""

import argparse

import gguf
import pytest
from factories import DATA, TINY_SIZES, convert_miniembed_fixture, make_gpt, make_seq2seq_source
from helpers import assert_one_line_error, run_cli
from huggingface_hub import ModelCard

import hf_minitf.training.quickstart as quickstart
from hf_minitf.cards import update_model_card
from hf_minitf.catalog.converters import CONVERTERS
from hf_minitf.catalog.publishing import DEFAULT_LICENSE, UNSTATED_LICENSE
from hf_minitf.commands import quickstart as quickstart_command
from hf_minitf.export.ctranslate2 import export_ctranslate2
from hf_minitf.export.gguf import export_gguf
from hf_minitf.export.native import export_native
from hf_minitf.export.onnx import export_onnx
from hf_minitf.training.tasks import paraphrase_pairs
from hf_minitf.training.trainers import TrainSettings, train_encoder, train_gpt

HELD_OUT = {"eval_loss": 1.25, "perplexity": 3.49}
ASKS_FOR_A_LICENSE = "states no license"
TINY = {key: TINY_SIZES["gpt"][key] for key in ("hidden_size", "num_hidden_layers", "num_attention_heads")}
STEPS = TrainSettings(max_steps=2, batch_size=4, progress=False)


def card(folder):
    return ModelCard.load(folder / "README.md")


def held_out(model_card) -> dict[str, float]:
    return {result.metric_type: result.metric_value for result in model_card.data.eval_results or []}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny GPT whose card has held-out figures and a license other than the default."""
    folder = make_gpt(tmp_path_factory.mktemp("licensed") / "gpt")
    update_model_card(folder, eval_results=HELD_OUT, dataset_name="toy text", license="apache-2.0")
    return folder


def test_trained_cards_get_the_default_license_or_the_given_one(tmp_path):
    train_gpt("the cat sat on the mat\n" * 20, tmp_path / "gpt", block_size=16, settings=STEPS, config_overrides=TINY)
    gpt_card = card(tmp_path / "gpt")
    assert gpt_card.data.license == DEFAULT_LICENSE and "eval_loss" in held_out(gpt_card)
    train_encoder(paraphrase_pairs(40, 4).train, tmp_path / "encoder", settings=STEPS, license="Apache-2.0")
    assert card(tmp_path / "encoder").data.license == "apache-2.0"  # as the Hub spells it
    with pytest.raises(ValueError, match=r"license 'an MIT one' is not a Hub license id.*apache-2.0"):
        train_gpt("abc " * 20, tmp_path / "refused", settings=STEPS, license="an MIT one")
    assert not (tmp_path / "refused").exists()  # refused before training


def test_minitf_train_license(tmp_path, capsys):
    (tmp_path / "text.txt").write_text("the cat sat on the mat\n" * 20)
    argv = ["train", "gpt", "--data", tmp_path / "text.txt", "--max-steps", "1", "--batch-size", "4", "--no-progress"]
    status, _, err = run_cli([*argv, "--out", tmp_path / "gpt", "--license", "cc-by-4.0"], capsys)
    assert status == 0, err
    assert card(tmp_path / "gpt").data.license == "cc-by-4.0"
    status, _, err = run_cli([*argv, "--out", tmp_path / "bad", "--license", "my license"], capsys)
    assert_one_line_error(status, err, "--license", "not a Hub license id")


def test_minitf_quickstart_passes_its_license(monkeypatch):
    """The command line gives run() the license (run() giving it to each card: tests/training/test_quickstart.py)."""
    seen = {}
    monkeypatch.setattr(quickstart, "run", lambda out, **options: seen.update(options))
    parser = argparse.ArgumentParser()
    quickstart_command.add_arguments(parser)
    assert quickstart_command.run(parser.parse_args(["--license", "MIT"])) == 0
    assert seen["license"] == "mit"
    assert quickstart_command.run(parser.parse_args([])) == 0 and seen["license"] is None  # the default card's


def test_converted_cards_name_the_original_license_or_ask_for_one(tmp_path, capsys):
    miniembed = card(convert_miniembed_fixture(tmp_path / "miniembed"))
    assert CONVERTERS["miniembed"].license == "mit" == miniembed.data.license
    assert ASKS_FOR_A_LICENSE not in miniembed.text
    hkproj = card(make_seq2seq_source(tmp_path / "hkproj"))
    assert hkproj.data.license == UNSTATED_LICENSE
    assert f"{CONVERTERS['hkproj'].project} {ASKS_FOR_A_LICENSE}" in hkproj.text and "--license" in hkproj.text

    char_gpt = ["convert", "char-gpt", DATA / "char_gpt/checkpoint.pt", "--vocab", DATA / "char_gpt/vocab.json"]
    status, _, err = run_cli([*char_gpt, "--num-heads", "4", "--out", tmp_path / "unstated"], capsys)
    assert status == 0, err
    assert card(tmp_path / "unstated").data.license == UNSTATED_LICENSE
    status, _, err = run_cli([*char_gpt, "--num-heads", "4", "--out", tmp_path / "mit", "--license", "mit"], capsys)
    assert status == 0, err
    licensed = card(tmp_path / "mit")
    assert licensed.data.license == "mit" and ASKS_FOR_A_LICENSE not in licensed.text


def test_push_license_replaces_the_unstated_one(hub, tmp_path, capsys):
    folder = make_seq2seq_source(tmp_path / "hkproj")
    assert run_cli(["push", folder, "org/hkproj-mit", "--license", "mit"], capsys)[0] == 0
    pushed = ModelCard.load("org/hkproj-mit")
    assert pushed.data.license == "mit" and ASKS_FOR_A_LICENSE not in pushed.text and "## Origin" in pushed.text
    assert card(folder).data.license == UNSTATED_LICENSE  # the local folder is left as it was
    assert run_cli(["push", folder, "org/hkproj-as-is"], capsys)[0] == 0
    assert ModelCard.load("org/hkproj-as-is").data.license == UNSTATED_LICENSE  # never a license nobody gave


@pytest.mark.parametrize("export", ["native", "ctranslate2", "onnx"])
def test_export_cards_carry_the_license_and_model_index(trained, tmp_path, export):
    writer = {"native": export_native, "ctranslate2": export_ctranslate2, "onnx": export_onnx}[export]
    exported = card(writer(trained, tmp_path / "carried"))
    assert exported.data.license == "apache-2.0"
    assert held_out(exported) == pytest.approx(HELD_OUT, rel=1e-6)
    assert exported.data.eval_results[0].dataset_name == "toy text"


def test_gguf_files_carry_the_license(trained, tmp_path):
    def general_license(path) -> str:
        field = gguf.GGUFReader(str(path)).fields["general.license"]
        return bytes(field.parts[field.data[0]]).decode()

    assert general_license(export_gguf(trained, tmp_path / "carried.gguf")) == "apache-2.0"
    assert general_license(export_gguf(trained, tmp_path / "given.gguf", license="mit")) == "mit"
    native = export_native(trained, tmp_path / "native", gguf_dtypes=("f16",), license="cc-by-4.0")
    assert general_license(next(native.glob("*.gguf"))) == card(native).data.license == "cc-by-4.0"
    assert held_out(card(native)) == pytest.approx(HELD_OUT, rel=1e-6)  # the card the GGUF files are published with


def test_every_export_format_takes_license_on_the_command_line(trained, tmp_path, capsys):
    for export in ("native", "ctranslate2", "web"):  # web: its ONNX export too
        status, _, err = run_cli(
            ["export", export, trained, tmp_path / export, "--license", "bsd-3-clause", "--no-verify"], capsys
        )
        assert status == 0, err
        assert card(tmp_path / export).data.license == "bsd-3-clause", export
    assert card(tmp_path / "web" / "model").data.license == "bsd-3-clause"  # the ONNX model the page runs
    status, _, err = run_cli(["export", "gguf", trained, tmp_path / "x.gguf", "--license", "GPL 3"], capsys)
    assert_one_line_error(status, err, "--license", "not a Hub license id")


def test_encoder_exports_keep_the_converted_license(tmp_path):
    folder = convert_miniembed_fixture(tmp_path / "miniembed")
    onnx_card = card(export_onnx(folder, tmp_path / "onnx"))
    assert onnx_card.data.license == "mit" and "sentence-transformers" in onnx_card.data.tags
    assert card(export_native(folder, tmp_path / "native")).data.license == "mit"


@pytest.mark.parametrize(
    "argv, default",
    [
        (["train", "gpt"], "(default: other, with a warning: the license of your data is not known here"),
        (["quickstart"], "(default: mit, hf_minitf's license, which its generated tasks are under)"),
        (["convert", "miniembed"], "(default: mit, the license MiniEmbed states)"),
        (["convert", "hkproj"], f"(default: {UNSTATED_LICENSE}: hkproj pytorch-transformer states no license"),
        (["export", "gguf"], f"(default: the source card's license, else {DEFAULT_LICENSE})"),
        (["push"], f"(default: the source card's license, else {DEFAULT_LICENSE})"),
    ],
)
def test_every_license_option_says_its_default(argv, default, capsys):
    status, out, _ = run_cli([*argv, "--help"], capsys)
    assert status == 0 and "--license ID" in out
    assert "".join(default.split()) in "".join(out.split())  # argparse wraps lines, at hyphens too
