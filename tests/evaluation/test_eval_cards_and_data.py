"""What `minitf eval` records and refuses: the figures in the card's model-index (read back by huggingface_hub's
ModelCard), its Evaluation section and the Hub's `.eval_results/` files, merged with what is there (the same task,
data and metric replaced, the rest kept), carried by `minitf push`; bad data and a missing extra in one line."""

import dataclasses
import json
import shutil
import sys

import pytest
import yaml
from factories import ENGINE_TEXT, PAIRS, model_folder
from helpers import assert_one_line_error, run_cli
from huggingface_hub import ModelCard, parse_eval_result_entries
from huggingface_hub.repocard_data import model_index_to_eval_results

from hf_minitf.cards import EVAL_RESULTS_FOLDER, export_card, record_evaluation, render_model_card, update_model_card
from hf_minitf.catalog.limits import MAX_EVAL_DATA_BYTES
from hf_minitf.evaluation import EvalDataError, load_pairs, load_texts
from hf_minitf.safety.card_metadata import CardMetadataError


def results_of(folder) -> dict:
    """(task, data, revision, metric) -> value, as huggingface_hub reads the card's model-index back."""
    card = ModelCard.load(folder / "README.md")
    _, results = model_index_to_eval_results(card.data.to_dict()["model-index"])
    return {
        (result.task_type, result.dataset_name, result.dataset_revision, result.metric_type): result.metric_value
        for result in results
    }


def entries_of(path) -> dict:
    return {
        (entry.dataset_id, entry.task_id, entry.dataset_revision): entry.value
        for entry in parse_eval_result_entries(yaml.safe_load(path.read_text()))
    }


def test_figures_merge_into_the_model_index_and_eval_results_files(tmp_path):
    folder = shutil.copytree(model_folder("gpt", "learned"), tmp_path / "gpt")
    update_model_card(folder, eval_results={"eval_loss": 1.25}, dataset_name="toy text")  # a trained model's
    record_evaluation(
        folder, {"perplexity": 5.0, "bits_per_token": 2.0}, task_type="text-generation", dataset_name="a.txt",
        dataset_revision="aaa", settings={"window": 64},
    )  # fmt: skip
    record_evaluation(
        folder, {"perplexity": 4.0}, task_type="text-generation", dataset_name="a.txt", dataset_revision="bbb"
    )
    _, path = record_evaluation(
        folder, {"perplexity": 7.0}, task_type="text-generation", dataset_name="b.txt", dataset_id="org/b"
    )
    assert results_of(folder) == {
        ("text-generation", "toy text", None, "eval_loss"): 1.25,
        ("text-generation", "a.txt", "bbb", "perplexity"): 4.0,  # replaced, with the data's new revision
        ("text-generation", "a.txt", "aaa", "bits_per_token"): 2.0,  # kept
        ("text-generation", "b.txt", None, "perplexity"): 7.0,
    }
    card = ModelCard.load(folder / "README.md")
    assert card.text.count("## Evaluation") == 1 and "| a.txt (`bbb`) | text-generation | perplexity | 4 |" in card.text
    assert "## Results" in card.text  # the training section is kept
    assert entries_of(folder / EVAL_RESULTS_FOLDER / "a.txt.yaml") == {
        ("a.txt", "perplexity", "bbb"): 4.0,
        ("a.txt", "bits_per_token", "aaa"): 2.0,
    }
    assert path == folder / EVAL_RESULTS_FOLDER / "org-b.yaml" and entries_of(path) == {
        ("org/b", "perplexity", None): 7.0
    }
    assert sorted(p.name for p in (folder / EVAL_RESULTS_FOLDER).iterdir()) == ["a.txt.yaml", "org-b.yaml"]

    (folder / EVAL_RESULTS_FOLDER / "a.txt.yaml").write_text("- value: 3\n")  # no dataset
    before = (folder / "README.md").read_text()
    with pytest.raises(CardMetadataError, match=r"a\.txt\.yaml is not a list of evaluation results"):
        record_evaluation(folder, {"perplexity": 1.0}, task_type="text-generation", dataset_name="a.txt")
    assert (folder / "README.md").read_text() == before


def test_eval_json_records_the_data_by_name_and_sha256_and_push_carries_it(tmp_path, capsys, hub):
    folder = shutil.copytree(model_folder("gpt", "learned"), tmp_path / "gpt")
    data = tmp_path / "corpus.jsonl"
    data.write_text("".join(json.dumps({"text": line}) + "\n" for line in ENGINE_TEXT.split(". ") * 3))
    status, out, err = run_cli(["eval", folder, "--data", data, "--json", "--no-progress"], capsys)
    assert status == 0, err
    report = json.loads(out)
    import hashlib

    sha256 = hashlib.sha256(data.read_bytes()).hexdigest()
    assert report["data"] == {"name": "corpus.jsonl", "sha256": sha256, "split": None}
    assert report["documents"] == 6 and report["task"] == "text-generation"
    assert set(report["figures"]) == {"perplexity", "bits_per_token", "bits_per_character"}
    recorded = results_of(folder)
    for name, value in report["figures"].items():
        assert recorded[("text-generation", "corpus.jsonl", sha256, name)] == pytest.approx(value)
    assert report["recorded"] == str(folder / EVAL_RESULTS_FOLDER / "corpus.jsonl.yaml")

    card = (folder / "README.md").read_text()
    status, out, _ = run_cli(["eval", folder, "--data", data, "--no-card", "--no-progress"], capsys)
    assert status == 0 and "perplexity:" in out and (folder / "README.md").read_text() == card

    assert run_cli(["push", folder, "org/evaluated"], capsys)[0] == 0
    assert f"{EVAL_RESULTS_FOLDER}/corpus.jsonl.yaml" in hub.uploads[-1].paths
    pushed = ModelCard(hub.read("org/evaluated", "README.md").decode())
    assert {result.metric_type for result in pushed.data.eval_results} >= set(report["figures"])


BAD_DATA = [
    # (file name, content, family, words of the one-line error)
    ("empty.txt", "", "gpt", ["empty.txt is empty"]),
    ("blank.txt", " \n\n", "gpt", ["only white space"]),
    ("three.tsv", "a\tb\nc\td\te\n", "seq2seq", ["three.tsv line 2 has 3 tab-separated field(s)"]),
    ("notab.tsv", "a\tb\n\nno tab here\n", "encoder", ["notab.tsv line 3 has 1 tab-separated"]),
    ("broken.jsonl", '{"text": "a"}\n{"text": \n', "gpt", ["broken.jsonl is not JSON lines: line 2"]),
    ("column.jsonl", '{"text": "a"}\n{"body": "b"}\n', "gpt", ["column.jsonl line 2 has no 'text'", "--columns"]),
    ("number.jsonl", '{"source": "a", "target": 3}\n', "seq2seq", ["line 1: 'target' is 3, not a non-empty text"]),
    ("list.json", '{"text": "a"}', "gpt", ["list.json holds a JSON dict, not a list"]),
    ("latin1.txt", b"caf\xe9\n", "gpt", ["latin1.txt is not UTF-8 text: line 1, byte 4"]),
]


@pytest.mark.parametrize(("name", "content", "family", "words"), BAD_DATA, ids=[row[0] for row in BAD_DATA])
def test_bad_data_is_one_line_naming_the_file_and_line(tmp_path, capsys, name, content, family, words):
    data = tmp_path / name
    data.write_bytes(content if isinstance(content, bytes) else content.encode())
    kind = {"gpt": "learned", "encoder": "tiny", "seq2seq": "layer_norm"}[family]
    status, _, err = run_cli(["eval", model_folder(family, kind), "--data", data, "--no-progress"], capsys)
    assert_one_line_error(status, err, "minitf eval: error:", *words)


def test_data_past_the_limit_and_missing_data_are_refused_before_reading(tmp_path):
    huge = tmp_path / "huge.txt"
    with huge.open("wb") as handle:  # sparse: nothing is written
        handle.truncate(MAX_EVAL_DATA_BYTES + 1)
    with pytest.raises(EvalDataError, match=f"huge.txt is {MAX_EVAL_DATA_BYTES + 1:,} bytes, more than the"):
        load_texts(huge)
    with pytest.raises(EvalDataError, match="missing.tsv does not exist"):
        load_pairs(tmp_path / "missing.tsv", ["a", "b"])
    (tmp_path / "ok.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in PAIRS))
    assert load_pairs(tmp_path / "ok.tsv", ["a", "b"]).pairs == PAIRS


def test_a_translator_without_sacrebleu_names_the_extra(tmp_path, capsys, monkeypatch):
    data = tmp_path / "pairs.tsv"
    data.write_text("".join(f"{a}\t{b}\n" for a, b in PAIRS))
    monkeypatch.setitem(sys.modules, "sacrebleu", None)  # `import sacrebleu` raises ModuleNotFoundError
    status, _, err = run_cli(["eval", model_folder("seq2seq", "layer_norm"), "--data", data, "--no-progress"], capsys)
    assert_one_line_error(status, err, "sacrebleu", 'pip install "hf-minitf[eval]"')


def test_eval_results_linked_out_of_the_folder_are_replaced_never_followed(tmp_path, capsys):
    """A downloaded folder whose `.eval_results` (or one of its files) is a symbolic link elsewhere: `minitf eval`
    writes inside the folder, leaves the link's target as it was and reads nothing from it."""
    outside = tmp_path / "outside"
    (outside / "evres").mkdir(parents=True)
    planted = outside / "planted.yaml"
    planted.write_text("- task: {type: secret}\n")
    folder = shutil.copytree(model_folder("gpt", "learned"), tmp_path / "gpt")
    (folder / EVAL_RESULTS_FOLDER).symlink_to(outside / "evres", target_is_directory=True)
    data = tmp_path / "small.txt"
    data.write_text(ENGINE_TEXT)
    assert run_cli(["eval", folder, "--data", data, "--no-progress"], capsys)[0] == 0
    assert list((outside / "evres").iterdir()) == []
    results = folder / EVAL_RESULTS_FOLDER
    assert results.is_dir() and not results.is_symlink() and (results / "small.txt.yaml").is_file()

    (results / "other.yaml").symlink_to(planted)
    record_evaluation(folder, {"perplexity": 3.0}, task_type="text-generation", dataset_name="other")
    assert planted.read_text() == "- task: {type: secret}\n"  # not written through, not merged from
    assert not (results / "other.yaml").is_symlink()
    assert set(entries_of(results / "other.yaml")) == {("other", "perplexity", None)}


@pytest.mark.parametrize(
    ("dataset_id", "words"),
    [(".x", "starts with a dot"), ("a" * 5000, "5,000 characters; at most 200"), ("  ", "is empty")],
)
def test_a_dataset_id_that_cannot_name_a_results_file_is_refused_first(tmp_path, capsys, dataset_id, words):
    folder = shutil.copytree(model_folder("gpt", "learned"), tmp_path / "gpt")
    data = tmp_path / "small.txt"
    data.write_text(ENGINE_TEXT)
    status, _, err = run_cli(["eval", folder, "--data", data, "--dataset-id", dataset_id, "--no-progress"], capsys)
    assert_one_line_error(status, err, "--dataset-id", words)
    assert not (folder / EVAL_RESULTS_FOLDER).exists()


def test_a_data_file_named_with_a_leading_dot_records_a_visible_results_file(tmp_path, capsys):
    folder = shutil.copytree(model_folder("gpt", "learned"), tmp_path / "gpt")
    data = tmp_path / ".hidden.txt"
    data.write_text(ENGINE_TEXT)
    assert run_cli(["eval", folder, "--data", data, "--no-progress"], capsys)[0] == 0
    assert [path.name for path in (folder / EVAL_RESULTS_FOLDER).iterdir()] == ["hidden.txt.yaml"]


def test_a_hostile_data_name_stays_one_escaped_table_cell(tmp_path):
    """A data file's name goes into the card's Evaluation table as text: no line break, heading, raw HTML, extra
    column or section marker reaches the card."""
    folder = shutil.copytree(model_folder("gpt", "learned"), tmp_path / "gpt")
    name = "a\n## Injected <img src=x onerror=alert(1)>|b<!-- minitf:runs_in -->.txt"
    record_evaluation(folder, {"perplexity": 5.0}, task_type="text-generation", dataset_name=name)
    card = ModelCard.load(folder / "README.md")
    assert card.data.to_dict()["model-index"][0]["results"][0]["dataset"]["name"] == name  # YAML keeps it as data
    text = card.text
    (row,) = [line for line in text.splitlines() if "Injected" in line]
    assert row.startswith("| a ## Injected &lt;img src=x onerror=alert(1)&gt;\\|b&lt;!-- minitf:runs_in --&gt;.txt |")
    assert row.replace("\\|", "").count("|") == 7  # the table's six columns
    assert "<img" not in text and not any(line.startswith("## Injected") for line in text.splitlines())
    assert text.count("<!-- minitf:runs_in -->") == 0


HOSTILE_TITLE = "T\n<!-- minitf:runs_in -->\n<img src=x onerror=alert(1)>\n<!-- /minitf:runs_in -->"


def test_a_hostile_title_stays_one_line_of_text_in_the_heading():
    """A user's title (a converted card's, an export's) is the heading's text: one line, no raw HTML, no marker
    line of its own that a later Runs in write would take for a section."""
    config = json.loads((model_folder("gpt", "learned") / "config.json").read_text())
    converted = render_model_card(
        "gpt", config, title=HOSTILE_TITLE, summary="s", origin="o", num_parameters=1, license="mit"
    )
    exported = str(
        export_card(
            "gguf_repo.md",
            library_name="gguf",
            tags=[],
            carried={},
            title=HOSTILE_TITLE,
            files=[],
            modelfile=False,
            native_repo=None,
            model_id="org/x",
            name="x",
        )
    )
    for text in (converted, exported):
        (heading,) = [line for line in text.splitlines() if line.startswith("# ")]
        assert heading.startswith("# T &lt;!-- minitf:runs_in --&gt; &lt;img"), heading
        assert "<img" not in text and "<!-- minitf:runs_in -->" not in text


def test_a_card_whose_yaml_does_not_parse_refuses_eval_before_anything_is_written(tmp_path, capsys):
    """README.md with broken YAML front matter: one line, exit non-zero, `.eval_results/` and the card unchanged."""
    folder = shutil.copytree(model_folder("gpt", "learned"), tmp_path / "gpt")
    data = tmp_path / "small.txt"
    data.write_text(ENGINE_TEXT)
    assert run_cli(["eval", folder, "--data", data, "--no-progress"], capsys)[0] == 0
    results = (folder / EVAL_RESULTS_FOLDER / "small.txt.yaml").read_text()
    broken = "---\nlicense: [mit\n---\n\n# A card\n"
    (folder / "README.md").write_text(broken)
    data.write_text(ENGINE_TEXT * 2)  # other figures, which must not reach the results file
    status, _, err = run_cli(["eval", folder, "--data", data, "--no-progress"], capsys)
    assert_one_line_error(status, err, "README.md")
    assert (folder / "README.md").read_text() == broken
    assert (folder / EVAL_RESULTS_FOLDER / "small.txt.yaml").read_text() == results
    assert sorted(path.name for path in (folder / EVAL_RESULTS_FOLDER).iterdir()) == ["small.txt.yaml"]


def test_a_failure_between_the_two_writes_of_eval_leaves_both_old_files(tmp_path, monkeypatch):
    """The card and the results file are one change: a failure once the first is in place puts it back, leaving
    both files as they were and no temporary file."""
    import os

    from hf_minitf.safety import files

    folder = shutil.copytree(model_folder("gpt", "learned"), tmp_path / "gpt")
    record_evaluation(folder, {"perplexity": 5.0}, task_type="text-generation", dataset_name="a.txt")
    card, results = (folder / "README.md").read_text(), (folder / EVAL_RESULTS_FOLDER / "a.txt.yaml").read_text()
    replace, renames = os.replace, []

    def failing_second_rename(source, target):
        renames.append(target)
        if len(renames) == 2:
            raise OSError("injected: killed between the two writes")
        return replace(source, target)

    monkeypatch.setattr(files.os, "replace", failing_second_rename)
    with pytest.raises(OSError, match="injected"):
        record_evaluation(folder, {"perplexity": 4.0}, task_type="text-generation", dataset_name="a.txt")
    assert (folder / "README.md").read_text() == card
    assert (folder / EVAL_RESULTS_FOLDER / "a.txt.yaml").read_text() == results
    assert sorted(path.name for path in folder.iterdir() if path.name.startswith(".README")) == []
    assert sorted(path.name for path in (folder / EVAL_RESULTS_FOLDER).iterdir()) == ["a.txt.yaml"]


def test_data_of_mostly_unknown_tokens_is_named_and_not_recorded_without_force(tmp_path, capsys):
    """A file of NUL characters on the char GPT: every token `<unk>`. eval says how many and what share, records
    nothing (one line, --force named) unless --force; a small share is reported and recorded, counted on the card."""
    folder = shutil.copytree(model_folder("gpt", "learned"), tmp_path / "gpt")
    card = (folder / "README.md").read_text()
    nul = tmp_path / "nul.txt"
    nul.write_text("\0" * 200)
    status, _, err = run_cli(["eval", folder, "--data", nul, "--no-progress"], capsys)
    assert_one_line_error(status, err, "200 of the data's 200 tokens (100.0%) are the tokenizer's unknown token")
    assert "--force" in err and "more than 50%" in err
    assert (folder / "README.md").read_text() == card and not (folder / EVAL_RESULTS_FOLDER).exists()

    status, _, err = run_cli(["eval", folder, "--data", nul, "--no-progress", "--force"], capsys)
    assert status == 0 and "note: 200 of the data's 200 tokens (100.0%)" in err, err
    assert (folder / EVAL_RESULTS_FOLDER / "nul.txt.yaml").is_file()

    some = tmp_path / "some.txt"
    some.write_text((ENGINE_TEXT * 3)[:190] + "\0" * 10)
    status, _, err = run_cli(["eval", folder, "--data", some, "--no-progress"], capsys)
    assert status == 0 and "note: 10 of the data's 200 tokens (5.0%) are the tokenizer's unknown token" in err, err
    assert (folder / EVAL_RESULTS_FOLDER / "some.txt.yaml").is_file()
    assert "unknown_tokens 10" in (folder / "README.md").read_text()

    clean = tmp_path / "clean.txt"
    clean.write_text(ENGINE_TEXT)
    status, _, err = run_cli(["eval", folder, "--data", clean, "--no-progress"], capsys)
    assert status == 0 and "unknown" not in err, err


def test_a_planted_section_marker_cannot_make_card_writes_drop_another_section(tmp_path):
    """A card whose body holds marker texts outside the writer's sections (a user's edit: a whole-line start marker
    before the Evaluation section, a pair inside a code block, one inside a heading): the next Runs in write, then
    the next Evaluation write, keep both sections and every row, and the planted texts stay as they were."""
    from hf_minitf.cards import RunRow, write_runs_in

    folder = shutil.copytree(model_folder("gpt", "learned"), tmp_path / "gpt")
    record_evaluation(folder, {"perplexity": 5.0}, task_type="text-generation", dataset_name="a.txt")
    row = RunRow("onnxruntime", "model.onnx", "fp32", "1 kB", "equal", "1 tokens/s", "2026-01-01", "v")
    assert write_runs_in(folder / "README.md", [row])
    planted = (
        "## Notes <!-- minitf:evaluation -->\n\n<!-- minitf:runs_in -->\n\n"
        "```\n<!-- minitf:evaluation -->\nan example\n<!-- /minitf:evaluation -->\n```\n\n"
    )
    text = (folder / "README.md").read_text()
    marker = "<!-- minitf:evaluation -->\n## Evaluation"
    assert marker in text
    (folder / "README.md").write_text(text.replace(marker, planted + marker, 1))

    assert write_runs_in(folder / "README.md", [dataclasses.replace(row, file="model_q8.onnx", precision="q8")])
    record_evaluation(folder, {"perplexity": 4.0}, task_type="text-generation", dataset_name="b.txt")
    text = (folder / "README.md").read_text()
    assert planted in text  # left as the user wrote it
    assert text.count("## Evaluation") == 1 and text.count("| Runtime |") == 1
    assert (
        "| a.txt | text-generation | perplexity | 5 |" in text
        and "| b.txt | text-generation | perplexity | 4 |" in text
    )
    assert "| model.onnx |" in text and "| model_q8.onnx |" in text
    assert text.count("<!-- /minitf:evaluation -->") == 2 and text.count("<!-- /minitf:runs_in -->") == 1


def test_eval_writes_as_one_change_where_the_file_system_has_no_hard_links(tmp_path, monkeypatch):
    """Where a hard link cannot be made, the previous file is kept aside as a copy: a failure between the two
    writes still puts it back."""
    import os

    from hf_minitf.safety import files

    folder = shutil.copytree(model_folder("gpt", "learned"), tmp_path / "gpt")
    record_evaluation(folder, {"perplexity": 5.0}, task_type="text-generation", dataset_name="a.txt")
    card = (folder / "README.md").read_text()

    def no_hard_links(*args, **kwargs):
        raise OSError(1, "Operation not permitted")

    replace, renames = os.replace, []

    def failing_second_rename(source, target):
        renames.append(target)
        if len(renames) == 2:
            raise OSError("injected")
        return replace(source, target)

    monkeypatch.setattr(files.os, "link", no_hard_links)
    record_evaluation(folder, {"perplexity": 4.5}, task_type="text-generation", dataset_name="a.txt")
    card = (folder / "README.md").read_text()
    assert "| 4.5 |" in card
    monkeypatch.setattr(files.os, "replace", failing_second_rename)
    with pytest.raises(OSError, match="injected"):
        record_evaluation(folder, {"perplexity": 4.0}, task_type="text-generation", dataset_name="a.txt")
    assert (folder / "README.md").read_text() == card
    assert sorted(path.name for path in folder.iterdir() if path.name.startswith(".README")) == []
