"""How an export's card names the MiniTF model it was made from: `base_model` is the Hub repo the source is published
as (its own repo id, or the one publishing gives), else absent; the text links that repo or says "a MiniTF ... model",
never the path the user gave nor an absolute one. A quantized file's card carries none of the float32 source's
figures (model-index); an export that computes the source's function carries them."""

import pytest
from factories import make_gpt
from huggingface_hub import ModelCard

from hf_minitf.cards import update_model_card
from hf_minitf.export.ctranslate2 import export_ctranslate2
from hf_minitf.export.native import export_native
from hf_minitf.export.ollama import export_ollama
from hf_minitf.export.onnx import export_onnx
from hf_minitf.export.web import export_web

HELD_OUT = {"eval_loss": 1.25, "perplexity": 3.49}
SOURCE_NAME = "lic_gpt"  # as the user named the folder, and passed it (relative)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny GPT folder named `lic_gpt` whose card has held-out figures."""
    folder = make_gpt(tmp_path_factory.mktemp("cards") / SOURCE_NAME)
    update_model_card(folder, eval_results=HELD_OUT, dataset_name="toy text")
    return folder


def card_files(folder):
    return [folder / "README.md", *((folder / "model" / "README.md",) if (folder / "model").is_dir() else ())]


EXPORTS = {
    "native": export_native,
    "onnx": export_onnx,
    "ctranslate2": export_ctranslate2,
    "ollama": lambda source, out, **options: export_ollama(source, out, agreement_text=None, **options).path,
    "web": lambda source, out, **options: export_web(source, out, quantize=None, **options),
}


@pytest.mark.parametrize("export", EXPORTS)
def test_a_local_source_is_named_nowhere_and_gives_no_base_model(trained, tmp_path, monkeypatch, export):
    monkeypatch.chdir(trained.parent)
    out = EXPORTS[export](SOURCE_NAME, tmp_path / "out")
    for path in card_files(out):
        card = ModelCard.load(path)
        assert card.data.get("base_model") is None and card.data.get("models") is None, path
        assert f"`{SOURCE_NAME}`" not in card.text and f"of {SOURCE_NAME}" not in card.text, path
        assert str(trained.parent) not in card.text, path
        assert "a MiniTF gpt model" in card.text, path
        assert all(index["name"] == path.parent.name for index in card.data.to_dict().get("model-index", [])), path


@pytest.mark.parametrize("export", EXPORTS)
def test_a_published_source_is_the_base_model_and_linked(trained, tmp_path, export):
    out = EXPORTS[export](trained, tmp_path / "out", source_repo="org/lic-gpt")
    for path in card_files(out):
        card = ModelCard.load(path)
        assert (card.data.get("base_model") or card.data.get("models")[0]) == "org/lic-gpt", path
        assert "[org/lic-gpt](https://huggingface.co/org/lic-gpt)" in card.text, path
        assert str(trained) not in card.text and SOURCE_NAME not in card.text, path
        assert SOURCE_NAME not in str(card.data.to_dict().get("model-index")), path


def held_out(card) -> dict[str, float]:
    return {result.metric_type: result.metric_value for result in card.data.eval_results or []}


def test_quantized_files_carry_no_figures_of_the_float32_source(trained, tmp_path):
    """The Ollama q8_0 file and int8 CTranslate2 weights were not measured: no model-index; float32 exports were
    (they compute the source's function) and keep it."""
    ollama = ModelCard.load(export_ollama(trained, tmp_path / "ollama", dtype="q8_0").path / "README.md")
    assert ollama.data.eval_results is None and "model-index" not in ollama.content
    assert ollama.data.license == ModelCard.load(trained / "README.md").data.license
    int8 = ModelCard.load(export_ctranslate2(trained, tmp_path / "int8", quantization="int8") / "README.md")
    assert int8.data.eval_results is None
    float32 = ModelCard.load(export_ctranslate2(trained, tmp_path / "float32") / "README.md")
    assert held_out(float32) == pytest.approx(HELD_OUT, rel=1e-6)


@pytest.mark.parametrize("text", ["the cat", 'a "quoted" $HOME, `ls`!', "it's"])
def test_an_example_is_one_word_of_a_cards_shell_command(text):
    """The commands of an export card (`llama-cli -p`, `ollama run`, `minitf generate`) pass the source's example, a
    text of its data, as one shell word, whatever it holds."""
    import shlex

    from hf_minitf.cards.exports import shell_word

    assert shlex.split(f"llama-cli -p {shell_word(text)} -n 50") == ["llama-cli", "-p", text, "-n", "50"]
