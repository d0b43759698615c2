"""`minitf quickstart` on a shortened run: three complete folders, reloaded the standard way, with held-out
figures far above chance; and the generated tasks it trains on."""

import json

import pytest
from helpers import png_size
from huggingface_hub import ModelCard

from hf_minitf.safety.output_folders import replace_refusal
from hf_minitf.training.quickstart import FOLDERS, QuickstartSteps, run
from hf_minitf.training.tasks import english_italian_pairs, number_to_words, number_words, paraphrase_pairs

SHORT_RUN = QuickstartSteps(gpt=120, encoder=30, seq2seq=60)


def test_short_quickstart_learns_every_task(tmp_path, capsys):
    out = tmp_path / "models"
    figures = run(out, steps=SHORT_RUN, progress=False, license="apache-2.0")
    printed = capsys.readouterr().out

    gpt, encoder, seq2seq = figures["gpt"], figures["encoder"], figures["seq2seq"]
    assert gpt["held_out"] == 100 and gpt["exact_match"] >= 0.5  # chance: 0; 0.9 measured
    assert gpt["eval_loss"] < 0.25 * gpt["uniform_loss"]
    assert encoder["held_out"] == 200 and encoder["top1"] >= 0.5  # chance: 0.005; 0.99 measured
    assert seq2seq["held_out"] == 200 and seq2seq["exact_match"] >= 0.3  # chance: 0; 0.73 measured
    assert all(sample.split(":")[0].isdigit() for sample in gpt["samples"])

    assert "held-out numbers spelled exactly" in printed and "pipeline('minitf-translation')" in printed
    assert "Traceback" not in printed
    for family, name in FOLDERS.items():
        folder = out / name
        card = ModelCard.load(folder / "README.md")
        assert card.data.license == "apache-2.0", family  # `minitf quickstart --license`
        metrics = {metric.metric_type: metric.metric_value for metric in card.data.eval_results}
        assert "eval_loss" in metrics and metrics["eval_loss"] > 0
        assert "![loss_curve](loss_curve.png)" in card.text
        assert png_size(folder / "loss_curve.png")[0] > 0
        assert (folder / "model.safetensors").is_file()
        if family != "encoder":  # the Trainer turned the cache off for training; the saved config has it back
            assert json.loads((folder / "config.json").read_text())["use_cache"] is True, family
    assert sorted(path.name for path in out.iterdir()) == sorted(FOLDERS.values())
    assert replace_refusal(out) is None  # a folder of models: `minitf quickstart --overwrite` (make demo) replaces it

    with pytest.raises(ValueError, match="output folder .*models is not empty; .*overwrite=True"):
        run(out, steps=SHORT_RUN, progress=False)


def test_number_words_spell_numbers_and_keep_held_out_numbers_apart():
    assert [number_to_words(n) for n in (0, 7, 15, 20, 42, 100, 101, 342, 990)] == [
        "zero",
        "seven",
        "fifteen",
        "twenty",
        "forty-two",
        "one hundred",
        "one hundred one",
        "three hundred forty-two",
        "nine hundred ninety",
    ]
    with pytest.raises(ValueError):
        number_to_words(1000)
    split = number_words(held_out=100, seed=0)
    assert len(split.train) == 900 and len(split.held_out) == 100
    assert not set(split.train) & set(split.held_out)
    assert number_words(held_out=100, seed=0) == split and number_words(held_out=100, seed=1) != split


def test_pair_tasks_are_deterministic_and_held_out_items_are_unseen():
    paraphrases = paraphrase_pairs(train=300, held_out=50, seed=0)
    assert paraphrases == paraphrase_pairs(train=300, held_out=50, seed=0)
    assert all(first != second for first, second in paraphrases.train + paraphrases.held_out)
    translations = english_italian_pairs(seed=0)
    assert not {source for source, _ in translations.train} & {source for source, _ in translations.held_out}
    assert all(len(source.split()) == len(target.split()) for source, target in translations.train)
    red_cats = [target for source, target in translations.train if source.startswith("the red cat ")]
    assert red_cats and all(target.startswith("il gatto rosso ") for target in red_cats)
    red_houses = [target for source, target in translations.train if source.endswith(" a red house")]
    assert red_houses and all(target.endswith(" una casa rossa") for target in red_houses)
