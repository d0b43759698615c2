"""The README names the two commands the Makefile and CI run (and the support matrix's two); the CLI documents itself. (The README's and docs'
code blocks run in test_docs.py.)"""

from pathlib import Path

import pytest

from hf_minitf.cli import build_parser

README = Path(__file__).parent.parent / "README.md"


def test_readme_documents_the_two_commands_and_ci_runs_the_test_one():
    text = README.read_text()
    assert "make demo" in text and "make test" in text
    demo_recipe = (README.parent / "Makefile").read_text().split("\ndemo:")[1].split("\n\n")[0]
    assert "minitf quickstart" in demo_recipe and "minitf quickstart" in text
    ci = (README.parent / ".ci" / "run").read_text()
    # the pinned suite, then the support matrix: the oldest promised versions and the newest releases
    assert ci.strip().splitlines()[-3:] == ["make test", "make test-oldest", "make test-latest"]
    assert "make test-oldest" in text and "make test-latest" in text


def test_cli_help_lists_every_command(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    text = capsys.readouterr().out
    for command in ("quickstart", "train", "generate", "embed", "translate", "info", "convert", "push"):
        assert f"\n    {command}" in text, command
    with pytest.raises(SystemExit):
        build_parser().parse_args(["quickstart", "--help"])
    assert "--steps-scale" in capsys.readouterr().out
