"""`minitf` end to end on tiny models: train, generate, embed, translate, info, push/convert wiring, and the
errors (one line, exit status 2) for wrong arguments and unusable input."""

import argparse
import importlib
import inspect
import json
import os
import subprocess
import sys

import pytest
from helpers import assert_one_line_error, png_size, run_cli, run_cli_in_a_fresh_process
from transformers import AutoModel, AutoModelForCausalLM

from hf_minitf.catalog.converters import CONVERTERS as SOURCES
from hf_minitf.cli import main
from hf_minitf.commands.convert import add_convert_arguments
from hf_minitf.commands.push import add_arguments as add_push_arguments
from hf_minitf.training.tasks import english_italian_pairs, paraphrase_pairs

CONVERT_SOURCES = SOURCES

RHYME = "Twinkle, twinkle, little star,\nHow I wonder what you are!\n" * 30


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One gpt, encoder and seq2seq folder made by `minitf train` (a few steps each; the encoder by its old family
    name `embedding`, still accepted)."""
    root = tmp_path_factory.mktemp("cli")
    (root / "rhyme.txt").write_text(RHYME)
    (root / "pairs.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in paraphrase_pairs(120, 10).train))
    (root / "en_it.jsonl").write_text(
        "".join(json.dumps({"en": a, "it": b}) + "\n" for a, b in english_italian_pairs(120, 10).train)
    )
    common = [
        "--max-steps",
        "12",
        "--batch-size",
        "8",
        "--learning-rate",
        "3e-3",
        "--logging-steps",
        "2",
        "--no-progress",
    ]
    commands = {
        "gpt": ["train", "gpt", "--data", root / "rhyme.txt", "--out", root / "gpt", "--block-size", "32"],
        "encoder": ["train", "embedding", "--data", root / "pairs.tsv", "--out", root / "encoder"],
        "seq2seq": [
            "train",
            "seq2seq",
            "--data",
            root / "en_it.jsonl",
            "--columns",
            "en,it",
            "--out",
            root / "seq2seq",
        ],
    }
    for family, argv in commands.items():
        assert main([str(arg) for arg in argv + common]) == 0, family
    return root


def test_train_writes_complete_folders_with_figures_and_loss_curve(trained):
    for name in ("gpt", "encoder", "seq2seq"):
        folder = trained / name
        assert (folder / "model.safetensors").is_file() and (folder / "config.json").is_file()
        assert png_size(folder / "loss_curve.png") == (600, 350)
        card = (folder / "README.md").read_text()
        assert "model-index" in card and "eval_loss" in card and "loss_curve.png" in card
        assert not list(trained.glob(f".{name}*")), "a temporary folder was left beside the output"
    assert (trained / "encoder" / "modules.json").is_file()
    assert (trained / "seq2seq" / "source_tokenizer.json").is_file()
    assert (trained / "rhyme.txt").read_text() == RHYME
    for name in ("gpt", "seq2seq"):  # the Trainer turns the cache off for training; the saved config has it back
        assert json.loads((trained / name / "config.json").read_text())["use_cache"] is True, name


def test_generate_streams_a_continuation_and_names_unknown_characters(trained, capsys):
    status, out, err = run_cli(["generate", trained / "gpt", "Twinkle", "--max-new-tokens", "12"], capsys)
    assert status == 0 and out.startswith("Twinkle") and len(out.strip()) > len("Twinkle"), out
    assert err == ""
    status, out, err = run_cli(["generate", trained / "gpt", "Zebra", "--max-new-tokens", "5"], capsys)
    assert status == 0 and out.strip(), out
    assert "'Zb'" in err and "<unk>" in err


def test_generate_sampling_is_seeded(trained, capsys):
    argv = ["generate", trained / "gpt", "How", "--sample", "--top-k", "5", "--seed", "3", "--max-new-tokens", "20"]
    first = run_cli(argv, capsys)
    assert first[0] == 0 and run_cli(argv, capsys) == first


def test_embed_prints_unit_vectors_and_a_similarity_table(trained, capsys):
    texts = ["the cat eats an apple", "a kitten devours a fruit", "the sailor paints a boat"]
    status, out, _ = run_cli(["embed", trained / "encoder", *texts], capsys)
    vectors = [json.loads(line) for line in out.splitlines()]
    assert status == 0 and len(vectors) == 3 and len(vectors[0]) == 128
    for vector in vectors:
        assert abs(sum(value * value for value in vector) - 1) < 1e-3
    status, out, _ = run_cli(["embed", trained / "encoder", *texts, "--similarity"], capsys)
    rows = [line.split()[1:] for line in out.splitlines()[1:4]]
    assert status == 0 and [row[index] for index, row in enumerate(rows)] == ["1.000"] * 3
    assert rows[0][1] == rows[1][0]
    assert "[2] the sailor paints a boat" in out


def test_translate_prints_one_line_per_text(trained, capsys):
    status, out, _ = run_cli(
        [
            "translate",
            trained / "seq2seq",
            "the red cat sees a dog",
            "a small girl loves the old house",
            "--num-beams",
            "2",
            "--max-new-tokens",
            "12",
        ],
        capsys,
    )
    assert status == 0 and len(out.splitlines()) == 2


def test_info_describes_the_folder(trained, capsys):
    status, out, _ = run_cli(["info", trained / "gpt"], capsys)
    model = AutoModelForCausalLM.from_pretrained(trained / "gpt")
    assert status == 0
    assert "family: minitf_gpt (MiniTFGPTForCausalLM)" in out
    assert f"parameters: {model.num_parameters():,}" in out
    assert "hidden_size: 128" in out and "loss_curve.png" in out and "model-index" in out
    status, out, _ = run_cli(["info", trained / "encoder"], capsys)
    assert f"parameters: {AutoModel.from_pretrained(trained / 'encoder').num_parameters():,}" in out


def test_info_reads_the_folder_without_importing_torch(trained):
    """`minitf info` reads only JSON, a card and safetensors headers: no torch, transformers or sentence-transformers
    (seconds of imports) for any family's folder."""
    results, heavy = run_cli_in_a_fresh_process([["info", str(trained / name)] for name in ("gpt", "encoder")])
    assert [status for status, _, _ in results] == [0, 0]
    assert "family: minitf_encoder" in results[1][1]
    assert heavy == []


def test_out_is_refused_when_not_empty_or_holding_the_input(trained, capsys):
    before = {path: path.stat().st_mtime_ns for path in (trained / "gpt").iterdir()}
    status, _, err = run_cli(
        ["train", "gpt", "--data", trained / "rhyme.txt", "--out", trained / "gpt", "--max-steps", "1"], capsys
    )
    assert_one_line_error(status, err, "not empty", "--overwrite")
    assert {path: path.stat().st_mtime_ns for path in (trained / "gpt").iterdir()} == before
    for out in (trained, trained / "rhyme.txt"):
        status, _, err = run_cli(
            ["train", "gpt", "--data", trained / "rhyme.txt", "--out", out, "--overwrite", "--max-steps", "1"], capsys
        )
        assert_one_line_error(status, err, f"--out {out}", "the input", "would delete it")
    status, _, err = run_cli(
        [
            "train",
            "gpt",
            "--data",
            trained / "rhyme.txt",
            "--out",
            trained / "new",
            "--checkpoint-dir",
            trained / "new" / "checkpoints",
            "--max-steps",
            "1",
        ],
        capsys,
    )
    assert_one_line_error(status, err, f"--out {trained / 'new'} holds the input", "checkpoints")
    assert (trained / "rhyme.txt").read_text() == RHYME and not (trained / "new").exists()


def test_overwrite_replaces_the_folder(tmp_path, capsys):
    data = tmp_path / "pairs.tsv"
    data.write_text("".join(f"{a}\t{b}\n" for a, b in paraphrase_pairs(40, 4).train))
    out = tmp_path / "model"
    out.mkdir()
    (out / "config.json").write_text("{}")  # a model folder: --overwrite replaces nothing else
    (out / "old.txt").write_text("old")
    argv = ["train", "encoder", "--data", data, "--out", out, "--max-steps", "1", "--no-progress", "--batch-size", "8"]
    assert run_cli([*argv, "--overwrite"], capsys)[0] == 0
    assert not (out / "old.txt").exists() and (out / "model.safetensors").is_file()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["model", "pairs.tsv"]


@pytest.mark.parametrize(
    "argv, words",
    [
        (["train", "gpt", "--data", "x.txt", "--out", "y", "--max-steps", "-5"], ["--max-steps", ">= 1", "-5"]),
        (["train", "gpt", "--data", "x.txt", "--out", "y", "--learning-rate", "0"], ["--learning-rate", "> 0"]),
        (["train", "gpt", "--data", "x.txt", "--out", "y", "--eval-fraction", "1.5"], ["--eval-fraction"]),
        (["train", "gpt", "--data", "x.txt", "--out", "y", "--preset", "huge"], ["--preset", "huge"]),
        (["train", "gpt", "--data", "x.txt"], ["--out"]),
        (["train", "bert"], ["bert", "gpt", "encoder", "seq2seq"]),
        (["quickstart", "--steps-scale", "0"], ["--steps-scale"]),
        (["generate", "somewhere"], ["PROMPT"]),
        (["generate", "somewhere", "hi", "--max-new-tokens", "lots"], ["--max-new-tokens", "integer"]),
        (["translate", "somewhere", "hi", "--num-beams", "0"], ["--num-beams"]),
        (["fly"], ["fly"]),
    ],
)
def test_wrong_arguments_give_one_line_and_status_2(argv, words, capsys):
    status, _, err = run_cli(argv, capsys)
    assert_one_line_error(status, err, *words)


def test_unusable_input_gives_one_line_and_status_2(tmp_path, trained, capsys):
    missing = tmp_path / "missing"
    for command in (
        ["generate", missing, "hi"],
        ["embed", missing, "hi"],
        ["translate", missing, "hi"],
        ["info", missing],
    ):
        status, _, err = run_cli(command, capsys)
        assert_one_line_error(status, err, "is not a folder")
    status, _, err = run_cli(["train", "gpt", "--data", missing / "x.txt", "--out", tmp_path / "out"], capsys)
    assert_one_line_error(status, err, "does not exist")
    status, _, err = run_cli(["train", "seq2seq", "--data", trained / "en_it.jsonl", "--out", tmp_path / "out"], capsys)
    assert_one_line_error(status, err, "no column 'source'", "en, it", "--columns")
    status, _, err = run_cli(["train", "encoder", "--data", trained / "rhyme.txt", "--out", tmp_path / "out"], capsys)
    assert_one_line_error(status, err, "line 1 has no tab")
    status, _, err = run_cli(["push", tmp_path, "someone/model"], capsys)
    assert_one_line_error(status, err, "config.json")
    assert not (tmp_path / "out").exists()


def option_names(parser: argparse.ArgumentParser) -> list[str]:
    """What a parser's help must name: every option string and every positional's metavar or name."""
    return [
        name
        for action in parser._actions
        if action.dest != "help"
        for name in (action.option_strings or [action.metavar or action.dest])
    ]


def convert_parser(source: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"minitf convert {source}")
    add_convert_arguments(parser, source)
    return parser


# One wrong argument for each parser of `minitf convert` and `minitf push`, and a word its error line must hold.
WRONG_CONVERT_AND_PUSH_ARGUMENTS = [
    (["convert"], "SOURCE"),
    (["convert", "keras"], "keras"),
    (["convert", "char-gpt", "model.pt", "--out", "o"], "--vocab"),
    (["convert", "char-gpt", "model.pt", "--vocab", "v.json", "--training-text", "t.txt", "--out", "o"], "not allowed"),
    (["convert", "frawdllm", "model.pt", "--out", "o", "--num-heads", "0"], "--num-heads"),
    (["convert", "frawdllm", "model.pt", "--out", "o", "--context-length", str(10**30)], "<= 1,000,000,000"),
    (["convert", "char-gpt", "model.pt", "--vocab", "v.json", "--out", "o", "--num-heads", str(2**63)], "--num-heads"),
    (["convert", "miniembed", "model.safetensors", "--out", "o"], "--tokenizer"),
    (
        [
            "convert",
            "hkproj",
            "t.pt",
            "--source-tokenizer",
            "a",
            "--target-tokenizer",
            "b",
            "--out",
            "o",
            "--norm-type",
            "layer",
        ],
        "--norm-type",
    ),
    (["convert", "transformer-embedding", "embedding.pt"], "--out"),
    (["convert", "frawdllm-embeddings", "embeddings.pt", "--out", "o", "--dtype", "float64"], "--dtype"),
    (["push", "folder"], "REPO_ID"),
    (["push", "folder", "me/model", "--public"], "--public"),
]


def test_convert_and_push_help_and_argument_errors_need_no_torch():
    """`minitf convert [SOURCE] --help`, `minitf push --help` and their wrong arguments, answered in a fresh process
    that never imports torch, transformers or hf_minitf; each help names every option of its parser."""
    helps = [["convert", "--help"], ["push", "--help"], *(["convert", source, "--help"] for source in CONVERT_SOURCES)]
    argvs = helps + [argv for argv, _ in WRONG_CONVERT_AND_PUSH_ARGUMENTS]
    results, heavy = run_cli_in_a_fresh_process(argvs)
    assert heavy == []
    results = dict(zip(map(tuple, argvs), results))
    for argv in helps:
        status, out, err = results[tuple(argv)]
        assert status == 0 and err == "" and out.startswith(f"usage: minitf {' '.join(argv[:-1])}"), (argv, out, err)
    convert_help = results[("convert", "--help")][1]
    assert all(f"\n    {source}" in convert_help for source in CONVERT_SOURCES), convert_help
    for source in CONVERT_SOURCES:
        help_text = results[("convert", source, "--help")][1]
        assert "Inferred" in help_text or "embedding_config.json" in help_text, help_text
        missing = [name for name in option_names(convert_parser(source)) if name not in help_text]
        assert not missing, (source, missing)
    push_parser = argparse.ArgumentParser()
    add_push_arguments(push_parser)
    assert set(option_names(push_parser)) == {
        "DIR",
        "REPO_ID",
        "--private",
        "--revision",
        "--license",
        "--commit-message",
        "--token",
        "--native",
        "--gguf",
        "--space",
        "--example",
        "--no-verify",
        "--all-runtimes",
        "--source-repo",
        "--verbose",
    }
    assert all(name in results[("push", "--help")][1] for name in option_names(push_parser))
    for argv, word in WRONG_CONVERT_AND_PUSH_ARGUMENTS:
        status, out, err = results[tuple(argv)]
        command = " ".join(argv[:2] if argv[1:2] and argv[1] in CONVERT_SOURCES else argv[:1])
        assert out == "", argv
        assert_one_line_error(status, err, word, f"minitf {command}: error:", f"(see `minitf {command} --help`)")


class RecordingNamespace(argparse.Namespace):
    """Parsed arguments that note which of them were read."""

    def __init__(self, **values):
        super().__init__(**values)
        self.__dict__["read"] = set()

    def __getattribute__(self, name: str):
        if name in object.__getattribute__(self, "__dict__") and name != "read":
            object.__getattribute__(self, "__dict__")["read"].add(name)
        return object.__getattribute__(self, name)


@pytest.mark.parametrize("source", CONVERT_SOURCES)
def test_each_convert_option_reaches_the_converter_and_each_converter_parameter_has_an_option(source, monkeypatch):
    """What the torch-free parser defines is what the converter takes: its runner (in `minitf convert`) reads every
    parsed option and no other, and passes the converter function every one of its parameters, each straight from
    an option."""
    from hf_minitf.commands.convert import RUNNERS

    module = importlib.import_module(f"hf_minitf.conversion.{SOURCES[source].module}")
    function_name = SOURCES[source].function
    converter = getattr(module, function_name)
    calls = []
    embedding_layer = source.endswith("embedding") or source.endswith("embeddings")

    def record(*positional, **keywords):
        calls.append(inspect.signature(converter).bind(*positional, **keywords).arguments)
        return ({}, {}) if embedding_layer else None

    monkeypatch.setattr(module, function_name, record)
    monkeypatch.setattr("hf_minitf.conversion.base.conversion_summary", lambda *args: "")
    monkeypatch.setattr("hf_minitf.conversion.base.save_embedding_layer", lambda *args, **keywords: "")
    dests = {action.dest for action in convert_parser(source)._actions if action.dest != "help"}
    args = RecordingNamespace(**{dest: f"<{dest}>" for dest in dests})
    assert RUNNERS[source](args) == 0
    assert args.read == dests
    [given] = calls
    assert set(given) == set(inspect.signature(converter).parameters), "a converter parameter has no option"
    assert all(value in {f"<{dest}>" for dest in dests} for value in given.values()), given


@pytest.mark.parametrize("alias, family", [("embedding", "encoder"), ("translation", "seq2seq")])
def test_old_family_names_are_aliases(alias, family):
    from hf_minitf.cli import build_parser

    args = build_parser().parse_args(["train", alias, "--data", "d.tsv", "--out", "o"])
    assert args.family == family and args.columns == ("anchor,positive" if family == "encoder" else "source,target")


def test_help_and_version_answer_without_importing_torch():
    argvs = [["--help"], ["train", "gpt", "--help"], ["--version"], ["generate", "--max-new-tokens"]]
    results, heavy = run_cli_in_a_fresh_process(argvs)
    assert [status for status, _, _ in results] == [0, 0, 0, 2], results
    assert heavy == []
    printed = "".join(out for _, out, _ in results)
    assert "shakespeare-char" in printed and "--checkpoint-dir" in printed


def test_checkpoints_are_kept_and_training_resumes_from_the_last(tmp_path, capsys):
    data = tmp_path / "pairs.tsv"
    data.write_text("".join(f"{a}\t{b}\n" for a, b in english_italian_pairs(40, 4).train))
    checkpoints = tmp_path / "checkpoints"
    argv = [
        "train",
        "seq2seq",
        "--data",
        data,
        "--checkpoint-dir",
        checkpoints,
        "--save-steps",
        "2",
        "--batch-size",
        "8",
        "--no-progress",
    ]
    assert run_cli([*argv, "--out", tmp_path / "first", "--max-steps", "4"], capsys)[0] == 0
    assert sorted(path.name for path in checkpoints.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    written = (checkpoints / "checkpoint-4" / "trainer_state.json").stat().st_mtime_ns
    assert run_cli([*argv, "--out", tmp_path / "resumed", "--max-steps", "6", "--resume"], capsys)[0] == 0
    state = json.loads((checkpoints / "checkpoint-6" / "trainer_state.json").read_text())
    assert state["global_step"] == 6
    # Resumed, not retrained: steps 1-4 were not run again, so checkpoint-4 was not rewritten.
    assert (checkpoints / "checkpoint-4" / "trainer_state.json").stat().st_mtime_ns == written
    assert (tmp_path / "resumed" / "model.safetensors").is_file()
    status, _, err = run_cli([*argv[:4], "--out", tmp_path / "third", "--resume"], capsys)
    assert_one_line_error(status, err, "--resume", "--checkpoint-dir")


def minitf_process(*argv: str | bytes, close_stdout: bool = False, **options) -> subprocess.Popen:
    """`minitf ARGV` in its own process (arguments may be bytes, as a shell passes them), stderr captured."""
    return subprocess.Popen(
        [sys.executable, "-m", "hf_minitf.cli", *argv],
        stderr=subprocess.PIPE,
        preexec_fn=(lambda: os.close(1)) if close_stdout else None,
        **options,
    )


def test_text_arguments_that_are_not_utf8_are_one_line_errors(trained):
    """Bytes a shell passes that are not UTF-8 (`$'\\xff'`) reach Python as surrogate escapes, which the tokenizer
    refused with a TypeError traceback (and safetensors in a folder's name): refused before any work, naming the
    argument."""
    gpt, encoder = bytes(trained / "gpt"), bytes(trained / "encoder")
    for argv, words in (
        (
            (b"generate", gpt, b"ab\xff"),
            "generate: error: PROMPT is not UTF-8 (byte 0xff at character 2); give it in UTF-8",
        ),
        ((b"embed", encoder, b"hi", b"\xfe"), "embed: error: TEXT 2 is not UTF-8 (byte 0xfe"),
        (
            (b"info", b"model-\xff"),
            "info: error: DIR is not UTF-8 (byte 0xff at character 6); give it "
            "in UTF-8 (a file or folder name too: safetensors and tokenizers "
            "open only UTF-8 paths)",
        ),
    ):
        process = minitf_process(*argv, stdout=subprocess.PIPE)
        _, err = process.communicate(timeout=60)
        assert process.returncode == 2 and err.decode().count("\n") == 1 and words in err.decode(), err


def test_a_closed_stdout_is_a_one_line_error(tmp_path):
    process = minitf_process("info", str(tmp_path), close_stdout=True)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 2, err
    assert err.decode() == "minitf info: error: standard output is closed; redirect it to a file or /dev/null instead\n"


def test_a_reader_that_leaves_ends_the_command_quietly(trained):
    """`minitf info DIR | head -c1`: the pipe closes before the output is written; exit 141 (SIGPIPE's), no
    traceback and no error line."""
    process = minitf_process("info", str(trained / "gpt"), stdout=subprocess.PIPE)
    process.stdout.close()
    _, err = process.communicate(timeout=120)
    assert process.returncode == 141 and err.decode() == "", err.decode()
