"""`minitf export ctranslate2 / onnx` and the engines behind `minitf generate / translate / embed`: an export folder
given as DIR prints what the MiniTF folder it came from prints. The exports and the refusals run in this process
(no engine starts there); every command that runs a model runs in its own process."""

import json

import numpy as np
import pytest
from factories import GPT_PROMPTS, PAIRS, ctranslate2_export, model_folder, workspace
from helpers import run_minitf

from hf_minitf.cli import main as minitf_main


def stdout_of(*args: str) -> str:
    result = run_minitf(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_export_ctranslate2_command_and_generate(capsys):
    source, out = model_folder("gpt", "rope_interleaved"), workspace() / "cli_gpt_ct2"
    assert minitf_main(["export", "ctranslate2", str(source), str(out), "--no-verify"]) == 0
    assert str(out) in capsys.readouterr().out and (out / "model.bin").is_file()
    command = ["--max-new-tokens", "20", *GPT_PROMPTS[:2]]
    expected = stdout_of("generate", str(source), *command)
    assert stdout_of("generate", str(out), *command) == expected
    assert len(expected.splitlines()) == 2


def test_translate_runs_the_ctranslate2_export():
    texts = [source for source, _ in PAIRS[:3]]
    expected = stdout_of("translate", str(model_folder("seq2seq", "layer_norm")), *texts)
    assert stdout_of("translate", str(ctranslate2_export("seq2seq", "layer_norm")), *texts) == expected
    assert len(expected.splitlines()) == 3


def test_export_onnx_command_and_embed():
    source, out = model_folder("encoder", "miniembed"), workspace() / "cli_onnx"
    assert minitf_main(["export", "onnx", str(source), str(out), "--no-verify"]) == 0
    texts = ["the cat sat on the mat", "what time is it", "hello"]
    expected = np.array([json.loads(line) for line in stdout_of("embed", str(source), *texts).splitlines()])
    vectors = np.array([json.loads(line) for line in stdout_of("embed", str(out), *texts).splitlines()])
    assert vectors.shape == expected.shape == (3, 32)
    assert np.abs(vectors - expected).max() <= 2e-6  # printed rounded to 6 decimals


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["translate", "GPT_EXPORT", "some text"],
            "is a ctranslate2 generator export of a minitf_gpt model, which "
            "`minitf translate` does not run; use `minitf generate` with it",
        ),
        (["embed", "GPT_EXPORT", "some text"], "which `minitf embed` does not run; use `minitf generate` with it"),
    ],
)
def test_wrong_folders_are_one_line_errors(capsys, args, message):
    names = {
        "GPT": str(model_folder("gpt", "learned")),
        "OUT": str(workspace() / "refused"),
        "GPT_EXPORT": str(ctranslate2_export("gpt", "learned")),
    }
    assert minitf_main([names.get(arg, arg) for arg in args]) == 2
    error = capsys.readouterr().err
    last_line = error.strip().splitlines()[-1]  # (above it: the progress bars of building the fixtures)
    assert last_line.startswith(f"minitf {args[0]}") and message in last_line
    assert not (workspace() / "refused").exists()
