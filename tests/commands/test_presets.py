"""`minitf presets`: each family's presets as a table from the one place they are declared, without torch; the
README's copy of it; parameters that are the built models'; and help texts that point only at what an installed
wheel has (`--preset` pointed at a README table that did not exist)."""

import argparse
import re
from pathlib import Path

import pytest
import torch
from factories import TINY_CLASSES
from helpers import run_cli_in_a_fresh_process

from hf_minitf.catalog.families import FAMILIES
from hf_minitf.catalog.packaging import SOURCE_DISTRIBUTION
from hf_minitf.catalog.presets import PRESETS, preset_rows, presets_markdown
from hf_minitf.cli import build_parser

README = Path(__file__).resolve().parents[2] / "README.md"
VOCABULARY = 1009  # a size no other dimension has, so that the embeddings' parameters can be told apart


def test_presets_prints_a_table_per_family_without_torch():
    (everything, one, wrong), heavy = run_cli_in_a_fresh_process(
        [["presets"], ["presets", "translation"], ["presets", "bert"]]
    )
    assert heavy == []
    status, out, err = everything
    assert status == 0 and err == ""
    for family, presets in PRESETS.items():
        assert f"{family} (minitf train {family} --preset NAME):" in out
        for name, preset in presets.items():
            line = next(line for line in out.splitlines() if line.split()[:1] == [name] and preset.description in line)
            layers, hidden, heads, context = line.split()[1:5]
            assert int(hidden) == preset.config["hidden_size"] and int(heads) == preset.config["num_attention_heads"]
            assert int(context) == preset.config["max_position_embeddings"]
            assert layers.split("+")[0] == str(preset.config["num_hidden_layers"])
    assert re.search(r"^frawdllm-100m +12 +768 +12 +1024 +BPE 32000 +84.9 M +FrawdLLM's 100m size", out, re.M), out
    status, out, _ = one  # an alias names its family
    assert status == 0 and out.startswith("seq2seq (minitf train seq2seq") and "gpt" not in out
    status, _, err = wrong
    assert status == 2 and "unknown model family 'bert'; choose one of gpt, encoder, seq2seq" in err


@pytest.mark.parametrize("family", FAMILIES)
def test_the_parameters_shown_are_the_built_models(family):
    """The figure besides the embeddings is the built model's (on the meta device: no memory) within 2%."""
    config_class, model_class = TINY_CLASSES[family]
    vocabularies = {"vocab_size": VOCABULARY, **({"src_vocab_size": VOCABULARY} if family == "seq2seq" else {})}
    for row in preset_rows(family):
        with torch.device("meta"):
            model = model_class(config_class(**PRESETS[family][row.name].config, **vocabularies))
        embeddings = {id(module.weight) for module in model.modules() if isinstance(module, torch.nn.Embedding)}
        body = sum(
            parameter.numel()
            for parameter in model.parameters()
            if id(parameter) not in embeddings and VOCABULARY not in parameter.shape
        )
        shown = float(row.parameters.removesuffix(" M")) * 1e6
        assert abs(shown - body) / body < 0.02, (row.name, shown, body)


def test_the_readme_table_is_the_catalogs():
    text = README.read_text()
    table = text.split("<!-- presets: begin -->\n", 1)[1].split("<!-- presets: end -->", 1)[0]
    assert table == presets_markdown(), "regenerate the README's table: hf_minitf.catalog.presets.presets_markdown()"


def help_pages(parser: argparse.ArgumentParser, name: str = "minitf"):
    """Every (sub-)command's name and `--help` text."""
    yield name, parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command, sub_parser in action.choices.items():
                yield from help_pages(sub_parser, f"{name} {command}")


def test_help_points_only_at_what_an_installed_package_has():
    """No help sends its reader to the README (not installed with the wheel) and every docs/ page a help names
    comes with where docs/ is (the source distribution); `--preset` names `minitf presets`."""
    pages = dict(help_pages(build_parser()))
    for name, text in pages.items():
        flat = " ".join(text.split())
        assert not re.search(r"\b(see|in) the README\b", flat), name
        if re.search(r"(?<![\w/.])docs/", flat):  # this package's docs/, not a web page's
            assert SOURCE_DISTRIBUTION in flat, name
    assert "`minitf presets` lists each one's sizes" in " ".join(pages["minitf train gpt"].split())
