"""BLEU on segments shorter than 4 tokens: plain BLEU is 0 without 4-grams, whatever the translations are (0 beside
chrF 100 and exact match 1); `minitf eval` then records sacrebleu's effective-order BLEU, and the card says so in
the figure's row. Segments with 4-grams keep plain corpus BLEU and no note."""

import json

import pytest
import sacrebleu
import yaml
from huggingface_hub import ModelCard

from hf_minitf.cards import record_evaluation
from hf_minitf.evaluation.translation import translation_figures

SHORT = [("le chat blanc", "the white cat"), ("la vache rouge", "the red cow"), ("un chien", "a dog")]
LONG = [("le chat blanc voit la vache", "the white cat sees the cow"), ("un chien", "a dog")]


def exact(pairs):
    """A translator that gives each reference: exact match 1."""
    table = dict(pairs)
    return lambda texts: [table[text] for text in texts]


def test_three_word_exact_matches_get_bleu_100_and_a_note():
    assert sacrebleu.corpus_bleu([t for _, t in SHORT], [[t for _, t in SHORT]]).score == 0  # the figure
    figures, translations, notes = translation_figures(SHORT, exact(SHORT))
    assert translations == [target for _, target in SHORT]
    assert figures == pytest.approx({"bleu": 100.0, "chrf": 100.0, "exact_match": 1.0})
    assert set(notes) == {"bleu"} and "effective order" in notes["bleu"] and "1- to 3-grams" in notes["bleu"]


def test_segments_with_4_grams_keep_plain_bleu_and_no_note():
    half_wrong = {"le chat blanc voit la vache": "the white cat sees a cow", "un chien": "a dog"}
    figures, translations, notes = translation_figures(LONG, lambda texts: [half_wrong[text] for text in texts])
    references = [target for _, target in LONG]
    assert figures["bleu"] == pytest.approx(sacrebleu.corpus_bleu(translations, [references]).score, rel=1e-12)
    assert 0 < figures["bleu"] < 100 and notes == {}


def test_the_card_says_it_beside_the_bleu_figure(tmp_path):
    figures, _, notes = translation_figures(SHORT, exact(SHORT))
    card, results_file = record_evaluation(
        tmp_path, figures, task_type="translation", dataset_name="pairs.tsv", settings={"pairs": 3}, figure_notes=notes
    )
    rows = {line.split("|")[3].strip(): line for line in card.text.splitlines() if line.startswith("| pairs.tsv")}
    assert "effective order" in rows["bleu"] and "| 100 |" in rows["bleu"]
    assert "effective order" not in rows["chrf"] + rows["exact_match"]
    index = {result.metric_type: result for result in ModelCard.load(tmp_path / "README.md").data.eval_results}
    assert index["bleu"].metric_value == pytest.approx(100.0) and "effective order" in index["bleu"].metric_args["note"]
    assert "note" not in (index["chrf"].metric_args or {})
    entries = {entry["dataset"]["task_id"]: entry for entry in yaml.safe_load(results_file.read_text())}
    assert "effective order" in entries["bleu"]["notes"] and "effective order" not in json.dumps(entries["chrf"])
