"""What a card says, read as someone browsing the Hub: an example prompt the model's own tokenizer spells (and
snippets that run on it), one usage section for an encoder (not sentence-transformers' template beside MiniTF's),
the training data, languages, intended use and limitations, a license nobody gave called `other` with a warning,
and a loss curve titled after the model it shows."""

import json
import logging
import re

import pytest
from factories import PAIRS, save_with_tokenizer, tiny_model
from helpers import assert_one_line_error, run_cli
from huggingface_hub import ModelCard
from test_hub import card_prompt, python_blocks, run_snippet
from transformers import AutoTokenizer

import hf_minitf.training.common as common
from hf_minitf import char_tokenizer, save_sentence_transformer, train_translation_tokenizers, train_wordlevel_tokenizer
from hf_minitf.cards import render_model_card, write_model_card
from hf_minitf.cards.render import SENTENCE_TRANSFORMERS_PLACEHOLDER
from hf_minitf.catalog.publishing import NO_LICENSE_WARNING
from hf_minitf.training.trainers import TrainSettings, train_encoder, train_gpt, train_seq2seq

STEPS = TrainSettings(max_steps=2, batch_size=4, progress=False)
TINY = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
NO_HELLO_TEXT = "xyz 123\n"
"""A character vocabulary without h, e, l, o, t or a: it spells none of the common words."""
WORD_PAIRS = [("uno due", "one two"), ("due tre", "two three"), ("tre uno", "three one")] * 3
"""A translator's 3-word source vocabulary: "Hello" is an unknown word to it."""
TEMPLATE_TEXT = ("This is a sentence-transformers model", "Citation", "Direct Usage", "## Usage")


def spelled_ids(folder, text: str) -> list[int]:
    """The ids the folder's tokenizer gives `text`, checked to hold no unknown token."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    ids = tokenizer(text, add_special_tokens=False).input_ids
    assert ids and tokenizer.unk_token_id not in ids, (text, ids)
    return ids


def model_and_tokenizer(family: str):
    """A tiny model of `family` and a tokenizer that spells none of "Hello", "hello", "the" or "a"."""
    if family == "gpt":
        tokenizer = char_tokenizer(NO_HELLO_TEXT)
        return tiny_model("gpt", tokenizer=tokenizer, max_position_embeddings=32), tokenizer
    if family == "seq2seq":
        tokenizer = train_translation_tokenizers(WORD_PAIRS, min_frequency=1)
    else:
        tokenizer = train_wordlevel_tokenizer([text for pair in WORD_PAIRS for text in pair], min_frequency=1)
    return tiny_model(family, tokenizer=tokenizer, max_position_embeddings=16), tokenizer


def saved_folder(family: str, folder):
    """`model_and_tokenizer(family)` saved (an encoder as a SentenceTransformer folder)."""
    model, tokenizer = model_and_tokenizer(family)
    if family == "encoder":
        save_sentence_transformer(model, tokenizer, folder)
        return folder
    return save_with_tokenizer(model, tokenizer, folder)


@pytest.mark.parametrize("family", ["gpt", "seq2seq", "encoder"])
def test_the_example_prompt_is_spelled_by_the_models_vocabulary_and_the_snippets_run_on_it(family, tmp_path):
    """No "Hello" for a vocabulary without it: once the tokenizer is beside the model (as `minitf push` writes the
    card again), the example is made of what the vocabulary spells, and each card's snippets run on the folder."""
    folder = saved_folder(family, tmp_path / family)
    write_model_card(folder)  # what `minitf push` does: the card written again with the tokenizer in the folder
    card = ModelCard.load(folder / "README.md")
    examples = [card_prompt(card), *card.data.widget[0].get("sentences", [])]
    assert "Hello" not in examples
    for text in examples:
        spelled_ids(folder, text)
    # an encoder's card names sentence-transformers' placeholder, which its push_to_hub replaces by the repo id
    with_package, without = (
        block.replace(SENTENCE_TRANSFORMERS_PLACEHOLDER, str(folder)) for block in python_blocks(card.text)
    )
    assert json.dumps(examples[0]) in with_package and json.dumps(examples[0]) in without
    printed = run_snippet(with_package, cwd=folder.parent)  # a local card names its folder from the one above
    if family == "gpt":
        assert printed.startswith(examples[0])
    elif family == "encoder":
        assert printed.startswith(f"({len(examples)}, ") and len(examples) == 3
    assert run_snippet(without, cwd=folder.parent)  # the trust_remote_code one: the folder's own code


@pytest.mark.parametrize("family", ["gpt", "seq2seq", "encoder"])
def test_a_card_written_before_the_tokenizer_promises_no_example_it_cannot_check(family, tmp_path):
    """A model saved (`save_pretrained`, as `push_to_hub` saves it) before its tokenizer is beside it: its card names
    no example text (no `widget`), its snippets run on a placeholder it says to replace, and saving the model again
    once the tokenizer is beside it writes an example the tokenizer spells."""
    model, tokenizer = model_and_tokenizer(family)
    model.save_pretrained(tmp_path / "alone")
    card = ModelCard.load(tmp_path / "alone" / "README.md")
    assert card.data.get("widget") is None
    assert not any(text in card.text for text in ('"hello"', '"Hello"', '"the"', '"a"'))
    assert '"YOUR TEXT"' in python_blocks(card.text)[0]
    assert "placeholder" in card.text and "tokenizer" in card.text
    tokenizer.save_pretrained(tmp_path / "alone")
    model.save_pretrained(tmp_path / "alone")
    again = ModelCard.load(tmp_path / "alone" / "README.md")
    for text in [card_prompt(again), *again.data.widget[0].get("sentences", [])]:
        spelled_ids(tmp_path / "alone", text)
    assert "YOUR TEXT" not in again.text and "placeholder" not in again.text


def test_a_given_prompt_stays_when_the_card_is_written_again(tmp_path):
    """A converted model's prompt (the original project's) is kept in the card's `widget` and used again by the next
    card written for the folder (a save, a push), not replaced by a default."""
    tokenizer = char_tokenizer(NO_HELLO_TEXT)
    model = tiny_model("gpt", tokenizer=tokenizer, max_position_embeddings=32)
    folder = save_with_tokenizer(model, tokenizer, tmp_path / "converted")
    card = render_model_card(
        "gpt", model.config, title="t", summary="s", origin="o", num_parameters=1, prompt="zyx 3", license="mit"
    )
    (folder / "README.md").write_text(card, encoding="utf-8")
    write_model_card(folder, model_id="org/converted")
    again = ModelCard.load(folder / "README.md")
    assert card_prompt(again) == "zyx 3" and 'tokenizer("zyx 3"' in python_blocks(again.text)[0]


def test_the_sentence_transformers_card_is_minitfs_alone(tmp_path):
    """One usage section (with hf_minitf, and trust_remote_code without), on sentences the vocabulary spells; none of
    sentence-transformers' template (its usage, its similarity figures measured on another model, an empty
    citation, "a sentence-transformers model trained." cut short)."""
    folder = saved_folder("encoder", tmp_path / "st")
    card = ModelCard.load(folder / "README.md")
    for text in TEMPLATE_TEXT:
        assert text not in card.text
    assert card.text.count("## Use\n") == 1 and len(python_blocks(card.text)) == 2
    assert not re.search(r"#\s*tensor\(|\d\.\d{4}", card.text)  # no figure printed into the card
    assert card.data.library_name == "sentence-transformers" and card.data.pipeline_tag == "sentence-similarity"


def test_trained_cards_name_their_data_languages_use_and_limitations(tmp_path):
    held_out = [("tre due", "three two")]
    train_seq2seq(
        WORD_PAIRS,
        tmp_path / "translator",
        settings=STEPS,
        eval_pairs=held_out,
        config_overrides=TINY,
        dataset_name="org/toy-pairs",
        dataset_id="org/toy-pairs",
        languages=["IT", "en"],
        license="cc-by-4.0",
    )
    card = ModelCard.load(tmp_path / "translator" / "README.md")
    assert card.data.datasets == ["org/toy-pairs"] and card.data.language == ["it", "en"]
    assert card_prompt(card) == "tre due"  # the first held-out source sentence
    assert "from `it` to `en`" in card.text
    assert "## Intended use" in card.text and "## Limitations" in card.text and "## Training data" in card.text
    assert "A word vocabulary (source 7, target 7 words)" in card.text and "9 pairs (1 more held out)" in card.text
    assert "It reads at most" in card.text and "not for production" in card.text

    train_gpt(
        "zyx 321 xyz\n" * 40, tmp_path / "gpt", settings=STEPS, block_size=16, config_overrides=TINY, license="mit"
    )
    gpt_card = ModelCard.load(tmp_path / "gpt" / "README.md")
    spelled_ids(tmp_path / "gpt", card_prompt(gpt_card))
    assert "datasets" not in gpt_card.data.to_dict() and "language" not in gpt_card.data.to_dict()
    assert "A character vocabulary" in gpt_card.text and "characters" in gpt_card.text.split("## Training data")[1]
    assert "does not state" in gpt_card.text  # its language is not known
    assert python_blocks(gpt_card.text)[0] and run_snippet(python_blocks(gpt_card.text)[0], cwd=tmp_path).startswith(
        card_prompt(gpt_card)
    )


def test_training_without_a_license_says_other_and_warns(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        train_encoder(WORD_PAIRS, tmp_path / "encoder", settings=STEPS, config_overrides=TINY)
    assert NO_LICENSE_WARNING in caplog.text
    card = ModelCard.load(tmp_path / "encoder" / "README.md")
    assert card.data.license == "other" and "No license was given" in card.text
    assert card.text.rstrip().endswith("<!-- /minitf:license -->")  # the last section, after the results
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        train_encoder(WORD_PAIRS, tmp_path / "licensed", settings=STEPS, config_overrides=TINY, license="mit")
    assert NO_LICENSE_WARNING not in caplog.text
    licensed = ModelCard.load(tmp_path / "licensed" / "README.md")
    assert licensed.data.license == "mit" and "## License" not in licensed.text


@pytest.fixture
def pairs_file(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"{source}\t{target}\n" for source, target in PAIRS * 4), encoding="utf-8")
    return path


TRANSLATOR = ["--max-steps", "1", "--batch-size", "4", "--no-progress", "--license", "mit"]


def test_minitf_train_translator_languages(pairs_file, tmp_path, capsys):
    argv = ["train", "seq2seq", "--data", pairs_file, *TRANSLATOR, "--out", tmp_path / "tr"]
    status, _, err = run_cli([*argv, "--source-language", "EN", "--target-language", "it"], capsys)
    assert status == 0, err
    card = ModelCard.load(tmp_path / "tr" / "README.md")
    assert card.data.language == ["en", "it"] and "from `en` to `it`" in card.text
    assert "datasets" not in card.data.to_dict() and str(pairs_file) not in card.text  # local data: no path named
    status, _, err = run_cli([*argv, "--overwrite", "--source-language", "English", "--target-language", "it"], capsys)
    assert_one_line_error(status, err, "--source-language", "'English' is not an ISO 639 language code")
    status, _, err = run_cli([*argv, "--overwrite", "--source-language", "en"], capsys)
    assert_one_line_error(status, err, "--source-language and --target-language go together")


def test_minitf_train_names_the_hub_dataset_it_trained_on(monkeypatch, tmp_path, capsys):
    import datasets

    rows = datasets.Dataset.from_dict({"source": [p[0] for p in PAIRS * 4], "target": [p[1] for p in PAIRS * 4]})
    monkeypatch.setattr(datasets, "load_dataset", lambda name, split: rows if name == "org/toy-pairs" else None)
    argv = ["train", "seq2seq", "--data", "org/toy-pairs", "--columns", "source,target", *TRANSLATOR]
    status, _, err = run_cli([*argv, "--out", tmp_path / "tr"], capsys)
    assert status == 0, err
    card = ModelCard.load(tmp_path / "tr" / "README.md")
    assert card.data.datasets == ["org/toy-pairs"]
    assert "https://huggingface.co/datasets/org/toy-pairs" in card.text


def test_minitf_train_without_license_warns_once(pairs_file, tmp_path, capsys, caplog):
    argv = ["train", "seq2seq", "--data", pairs_file, *TRANSLATOR[:-2], "--out", tmp_path / "tr"]
    with caplog.at_level(logging.WARNING):
        status, _, err = run_cli(argv, capsys)
    assert status == 0, err
    warnings = [record.getMessage() for record in caplog.records if "no license given" in record.getMessage()]
    assert len(warnings) == 1 and "--license ID" in warnings[0]
    assert ModelCard.load(tmp_path / "tr" / "README.md").data.license == "other"


def test_the_loss_curve_title_names_the_model_it_shows(monkeypatch, tmp_path):
    """A preset with changed sizes (the quickstart's GPT) is titled by its sizes, not as the preset it is not."""
    titles = []
    monkeypatch.setattr(common, "plot_loss_curve", lambda history, path, title: titles.append(title))
    text = "abc abd abe\n" * 20
    train_gpt(text, tmp_path / "changed", settings=STEPS, block_size=16, config_overrides=TINY, license="mit")
    train_gpt(text, tmp_path / "preset", settings=STEPS, block_size=16, license="mit")
    changed, preset = titles
    assert "tiny" not in changed and changed.startswith("MiniTF GPT (1 layer of 32, ")
    assert preset.startswith("MiniTF GPT (tiny preset, ") and preset.endswith(" parameters)")
