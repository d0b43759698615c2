"""Publishing over real HTTP (the loopback Hub of tests/hub_server.py): push every family, load it back by repo id
with and without hf_minitf, check exactly what was uploaded, run the card's snippets, `minitf push`, offline."""

import argparse
import contextlib
import hashlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from factories import SAVED_MODEL_FILES, save_with_tokenizer, tiny_model
from huggingface_hub import ModelCard, hf_hub_download
from isolation import run_without_hf_minitf
from transformers import AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer, pipeline

import hf_minitf
from hf_minitf import (
    TRANSLATION_TASK,
    MiniTFEncoderConfig,
    MiniTFEncoderForSequenceClassification,
    char_tokenizer,
    save_sentence_transformer,
    train_translation_tokenizers,
    train_wordlevel_tokenizer,
)
from hf_minitf.cards import render_model_card, update_model_card
from hf_minitf.cli import main as minitf_main
from hf_minitf.commands.push import add_arguments as add_push_arguments
from hf_minitf.commands.push import run as push_command

MODELING_MODULES = {path.name for path in (Path(hf_minitf.__file__).parent / "modeling").glob("*.py")}
GPT_TEXT = "hello world, a tiny model on the hub"
SENTENCES = ["the cat sat on the mat", "a dog ran in the park", "the park is green"]
PAIRS = [("one two", "uno due"), ("two three", "due tre"), ("three one", "tre uno"), ("one", "uno")] * 2


def python_blocks(card_text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", card_text, re.DOTALL)


def card_prompt(card: ModelCard) -> str:
    """The example text a card's snippets run on (its `widget`, which the snippets and the Hub's widget share)."""
    return card.data.widget[0].get("text") or card.data.widget[0]["source_sentence"]


def run_snippet(code: str, cwd: Path | None = None) -> str:
    """Run a card snippet here (hf_minitf is imported), from `cwd` (a local card names its folder from the folder
    above it) or here, and return what it printed."""
    output = io.StringIO()
    with contextlib.chdir(cwd or Path.cwd()), contextlib.redirect_stdout(output):
        exec(compile(code, "<card snippet>", "exec"), {})
    return output.getvalue()


def push_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="minitf push")
    add_push_arguments(parser)
    return parser.parse_args(list(argv))


def assert_published_files(files: set[str], family_files: set[str]) -> None:
    """Weights, configs, the model code and card; no pickle, no training state, nothing else."""
    code = {name for name in files if name.endswith(".py")}
    assert code <= MODELING_MODULES, code - MODELING_MODULES
    assert "layers.py" in code and "__init__.py" not in code
    assert files - code == family_files
    assert not any(name.endswith((".bin", ".pt", ".pth", ".pkl")) or "optimizer" in name for name in files)


@pytest.fixture(scope="module")
def gpt():
    tokenizer = char_tokenizer(GPT_TEXT)
    return tiny_model("gpt", tokenizer=tokenizer, max_position_embeddings=64), tokenizer


@pytest.fixture(scope="module")
def seq2seq():
    tokenizer = train_translation_tokenizers(PAIRS, min_frequency=1)
    return tiny_model("seq2seq", tokenizer=tokenizer, max_position_embeddings=16), tokenizer


@pytest.fixture(scope="module")
def sentence_folder(tmp_path_factory):
    tokenizer = train_wordlevel_tokenizer(SENTENCES, min_frequency=1, max_length=16)
    model = tiny_model("encoder", seed=2, tokenizer=tokenizer, max_position_embeddings=16)
    folder = tmp_path_factory.mktemp("sentence") / "st"
    save_sentence_transformer(model, tokenizer, folder)
    return folder, model, tokenizer


@pytest.fixture(scope="module")
def published(hub, gpt, seq2seq, sentence_folder):
    """Every family pushed the ways a user pushes: push_to_hub, a pipeline's push_to_hub, `minitf push`."""
    model, tokenizer = gpt
    tokenizer.push_to_hub("org/tiny-gpt")  # first: the model's card checks its example with it
    model.push_to_hub("org/tiny-gpt")
    translator_model, translator_tokenizer = seq2seq
    translator_tokenizer.push_to_hub("org/tiny-translator")  # tokenizer first: its blank card must not survive
    translator_model.push_to_hub("org/tiny-translator")
    pipeline(TRANSLATION_TASK, model=translator_model, tokenizer=translator_tokenizer).push_to_hub("org/tiny-pipe")
    assert push_command(push_args(str(sentence_folder[0]), "org/tiny-st", "--license", "apache-2.0")) == 0
    return hub


def test_gpt_uploads_exactly_its_files_and_loads_back_by_repo_id(published, gpt):
    model, tokenizer = gpt
    tokenizer_push, model_push = [set(c.paths) for c in published.uploads if c.repo_id == "org/tiny-gpt" and c.paths]
    files = published.files("org/tiny-gpt")
    assert_published_files(files, SAVED_MODEL_FILES)
    assert {"modeling_minitf_gpt.py", "configuration_minitf_gpt.py"} <= model_push
    assert tokenizer_push == {"README.md", "tokenizer.json", "tokenizer_config.json"}

    loaded = AutoModelForCausalLM.from_pretrained("org/tiny-gpt").eval()
    loaded_tokenizer = AutoTokenizer.from_pretrained("org/tiny-gpt")
    ids = tokenizer("hello", return_tensors="pt").input_ids
    assert loaded_tokenizer("hello", return_tensors="pt").input_ids.tolist() == ids.tolist()
    expected = model.generate(ids, max_new_tokens=12, do_sample=False)
    assert torch.equal(loaded.generate(ids, max_new_tokens=12, do_sample=False), expected)
    generated = pipeline("text-generation", model="org/tiny-gpt")("hello", max_new_tokens=12, do_sample=False)
    assert generated[0]["generated_text"] == tokenizer.decode(expected[0], skip_special_tokens=True)


def test_published_tokenizer_configs_carry_no_loading_state(published, sentence_folder):
    """transformers records how a tokenizer was loaded (`is_local`, `local_files_only`) when it saves one it read from
    a folder, as sentence-transformers' save does: neither the saved folder nor any pushed repo keeps it."""
    folder = sentence_folder[0]
    configs = {"local": json.loads((folder / "tokenizer_config.json").read_text())}
    for repo_id in ("org/tiny-gpt", "org/tiny-translator", "org/tiny-st"):
        configs[repo_id] = json.loads(Path(hf_hub_download(repo_id, "tokenizer_config.json")).read_text())
    for where, config in configs.items():
        assert not {"is_local", "local_files_only"} & set(config), where


def test_gpt_card_metadata_table_and_snippets(published, gpt):
    model, tokenizer = gpt
    card = ModelCard.load("org/tiny-gpt")
    assert card.data.library_name == "transformers"
    assert card.data.pipeline_tag == "text-generation"
    assert card.data.tags == ["minitf", "minitf_gpt"]
    assert "[More Information Needed]" not in card.text
    assert f"| parameters | {model.num_parameters():,} |" in card.text
    assert "| layers | 2 |" in card.text and "| attention heads | 4 |" in card.text
    assert f"| vocabulary | {len(tokenizer)} |" in card.text and "learned, 64 positions" in card.text
    with_package, without = python_blocks(card.text)
    assert '"org/tiny-gpt"' in with_package and "trust_remote_code" not in with_package
    assert without.count("trust_remote_code=True") == 2 and "hf_minitf" not in without
    prompt = card_prompt(card)
    assert f"tokenizer({json.dumps(prompt)}," in with_package and prompt in without
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    assert tokenizer.unk_token_id not in ids[0].tolist()  # the vocabulary spells it (no capital H)
    expected = tokenizer.decode(model.generate(ids, max_new_tokens=20, do_sample=False)[0], skip_special_tokens=True)
    assert run_snippet(with_package) == expected + "\n"


def test_seq2seq_push_carries_translation_pipeline_and_card(published, seq2seq):
    model, tokenizer = seq2seq
    files = published.files("org/tiny-translator")
    assert_published_files(
        files, SAVED_MODEL_FILES - {"tokenizer.json"} | {"source_tokenizer.json", "target_tokenizer.json"}
    )
    assert {"pipeline_minitf_translation.py", "modeling_minitf_seq2seq.py", "tokenization_minitf_seq2seq.py"} <= files
    config = json.loads(published.read("org/tiny-translator", "config.json"))
    assert (
        config["custom_pipelines"][TRANSLATION_TASK]["impl"] == "pipeline_minitf_translation.MiniTFTranslationPipeline"
    )
    card = ModelCard.load("org/tiny-translator")
    assert (card.data.library_name, card.data.pipeline_tag) == ("transformers", "translation")
    assert card.data.tags == ["minitf", "minitf_seq2seq"]
    assert "| vocabulary | source" in card.text and "2 encoder + 2 decoder" in card.text

    pushed_pipeline = published.files("org/tiny-pipe")
    assert "pipeline_minitf_translation.py" in pushed_pipeline and "source_tokenizer.json" in pushed_pipeline
    assert ModelCard.load("org/tiny-pipe").data.pipeline_tag == "translation"

    loaded = AutoModelForSeq2SeqLM.from_pretrained("org/tiny-translator").eval()
    loaded_tokenizer = AutoTokenizer.from_pretrained("org/tiny-translator")
    batch = tokenizer(["one two three", "two"], return_tensors="pt", padding=True)
    assert (
        loaded_tokenizer(["one two three", "two"], return_tensors="pt", padding=True)["input_ids"].tolist()
        == batch["input_ids"].tolist()
    )
    expected = model.generate(**batch, max_new_tokens=8)
    assert torch.equal(loaded.generate(**batch, max_new_tokens=8), expected)
    with_package = python_blocks(card.text)[0]
    assert "max_new_tokens=15" in with_package  # what the 16 positions allow after the start token
    decoded = tokenizer.batch_decode(
        model.generate(**tokenizer(card_prompt(card), return_tensors="pt"), max_new_tokens=15), skip_special_tokens=True
    )
    assert run_snippet(with_package) == f"{decoded}\n"


def test_translator_pipeline_loads_by_repo_id_without_the_flag_where_hf_minitf_is_installed(published, seq2seq):
    """With hf-minitf installed (not even imported), `pipeline` runs the installed translation pipeline for a pushed
    translator: by task name, and with no task (its config names the one custom pipeline), in a fresh process."""
    model, tokenizer = seq2seq
    texts = ["one two three", "two"]
    expected = [
        tokenizer.decode(model.generate(**tokenizer(text, return_tensors="pt"), max_new_tokens=8)[0], True)
        for text in texts
    ]
    program = f"""
import json
from transformers import pipeline
by_task = pipeline("{TRANSLATION_TASK}", model="org/tiny-translator")
by_config = pipeline(model="org/tiny-translator")
print(json.dumps([[r["translation_text"] for r in p({texts!r}, max_new_tokens=8)] for p in (by_task, by_config)]))
"""
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == [expected, expected]


def test_sentence_transformer_push_loads_by_repo_id(published, sentence_folder):
    from sentence_transformers import SentenceTransformer

    folder, model, tokenizer = sentence_folder
    files = published.files("org/tiny-st")
    sentence_transformers_files = {
        "modules.json",
        "sentence_bert_config.json",
        "config_sentence_transformers.json",
        "1_Pooling/config.json",
    }
    if (folder / "2_Normalize" / "config.json").is_file():  # sentence-transformers 6 writes one; 5.x none
        sentence_transformers_files.add("2_Normalize/config.json")
    assert_published_files(files, SAVED_MODEL_FILES - {"generation_config.json"} | sentence_transformers_files)
    card = ModelCard.load("org/tiny-st")
    assert (card.data.library_name, card.data.pipeline_tag, card.data.license) == (
        "sentence-transformers",
        "sentence-similarity",
        "apache-2.0",
    )
    assert {"minitf", "minitf_encoder", "sentence-transformers"} <= set(card.data.tags)
    assert 'SentenceTransformer("org/tiny-st", trust_remote_code=True)' in card.text
    with_package, without = python_blocks(card.text)  # one usage section, no template of sentence-transformers'
    assert 'model = SentenceTransformer("org/tiny-st")\n' in with_package  # hf_minitf users need no flag
    assert run_snippet(with_package).startswith("(3, 16) tensor([[1.0000,")
    assert ModelCard.load(folder / "README.md").data.license == "other"  # the local folder is unchanged (its default)

    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = model(**batch).pooler_output
    loaded = SentenceTransformer("org/tiny-st", device="cpu")
    embeddings = loaded.encode(SENTENCES, convert_to_tensor=True)
    assert (embeddings - expected).abs().max() <= 1e-6 * expected.abs().max()

    SentenceTransformer(str(folder), device="cpu").push_to_hub("org/tiny-st-again")  # sentence-transformers' push
    again = ModelCard.load("org/tiny-st-again")
    assert "minitf" in again.data.tags and "| parameters |" in again.text
    assert again.text.count('SentenceTransformer("org/tiny-st-again", trust_remote_code=True)') == 1
    assert 'SentenceTransformer("org/tiny-st-again")' in again.text
    assert "sentence_transformers_model_id" not in again.text


def test_without_hf_minitf_every_family_loads_by_repo_id(published, gpt, seq2seq, sentence_folder, tmp_path):
    """One process that cannot import hf_minitf: remote code, the translation pipeline, SentenceTransformer,
    tokenizers (quietly), and the card snippets written for users without hf_minitf."""
    gpt_model, gpt_tokenizer = gpt
    translator, translator_tokenizer = seq2seq
    _, encoder, encoder_tokenizer = sentence_folder
    snippets = {
        repo: python_blocks(ModelCard.load(repo).text)[-1]
        for repo in ("org/tiny-gpt", "org/tiny-translator", "org/tiny-st")
    }
    result = run_without_hf_minitf(
        f"""
        import contextlib, io, json, logging, torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast, pipeline
        from transformers.utils import logging as hf_logging
        from sentence_transformers import SentenceTransformer
        warnings = io.StringIO()
        hf_logging.get_logger().addHandler(logging.StreamHandler(warnings))
        gpt = AutoModelForCausalLM.from_pretrained("org/tiny-gpt", trust_remote_code=True)
        gpt_tokenizer = AutoTokenizer.from_pretrained("org/tiny-gpt", trust_remote_code=True)
        ids = gpt_tokenizer("hello", return_tensors="pt").input_ids
        plain_ids = PreTrainedTokenizerFast.from_pretrained("org/tiny-gpt")("hello").input_ids  # needs no trust
        translate = pipeline("minitf-translation", model="org/tiny-translator", trust_remote_code=True)
        pipe_repo = pipeline("minitf-translation", model="org/tiny-pipe", trust_remote_code=True)
        st = SentenceTransformer("org/tiny-st", trust_remote_code=True, device="cpu")
        printed = {{}}
        for repo, code in {snippets!r}.items():
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(code, {{}})
            printed[repo] = out.getvalue()
        print(json.dumps({{
            "gpt": [type(gpt).__name__, type(gpt_tokenizer).__name__], "plain_ids": plain_ids,
            "generated": gpt.generate(ids, max_new_tokens=12, do_sample=False).tolist(),
            "translations": [r["translation_text"] for r in translate(["one two three", "two"], max_new_tokens=8)],
            "pipe_repo": pipe_repo("one two three", max_new_tokens=8)[0]["translation_text"],
            "translator_tokenizer": type(translate.tokenizer).__name__,
            "embeddings": st.encode({SENTENCES!r}).tolist(),
            "printed": printed, "warnings": warnings.getvalue(),
        }}))
    """,
        cwd=str(tmp_path),
    )
    ids = gpt_tokenizer("hello", return_tensors="pt").input_ids
    assert result["gpt"] == ["MiniTFGPTForCausalLM", "TokenizersBackend"]
    assert result["plain_ids"] == ids[0].tolist()
    assert result["generated"] == gpt_model.generate(ids, max_new_tokens=12, do_sample=False).tolist()
    local = pipeline(TRANSLATION_TASK, model=translator, tokenizer=translator_tokenizer)
    expected = [r["translation_text"] for r in local(["one two three", "two"], max_new_tokens=8)]
    assert result["translations"] == expected and result["pipe_repo"] == expected[0]
    assert result["translator_tokenizer"] == "MiniTFSeq2SeqTokenizer"
    batch = encoder_tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        pooled = encoder(**batch).pooler_output
    assert (torch.tensor(result["embeddings"]) - pooled).abs().max() <= 1e-6 * pooled.abs().max()
    assert "to instantiate a model of type" not in result["warnings"], result["warnings"]
    hello_ids = gpt_tokenizer(card_prompt(ModelCard.load("org/tiny-gpt")), return_tensors="pt").input_ids
    assert (
        result["printed"]["org/tiny-gpt"]
        == gpt_tokenizer.decode(
            gpt_model.generate(hello_ids, max_new_tokens=20, do_sample=False)[0], skip_special_tokens=True
        )
        + "\n"
    )
    translator_card = ModelCard.load("org/tiny-translator")
    source_ids = translator_tokenizer(card_prompt(translator_card), return_tensors="pt")
    translated = translator.generate(**source_ids, max_new_tokens=15)
    assert (
        result["printed"]["org/tiny-translator"]
        == f"{translator_tokenizer.batch_decode(translated, skip_special_tokens=True)}\n"
    )
    assert result["printed"]["org/tiny-st"].startswith("(3, 16)")


def test_converted_card_survives_load_and_push(hub, gpt, tmp_path):
    model, tokenizer = gpt
    checkpoint = tmp_path / "ckpt.pt"
    checkpoint.write_bytes(b"not really a checkpoint, only hashed")
    folder = save_with_tokenizer(model, tokenizer, tmp_path / "converted")
    card = render_model_card(
        "gpt",
        model.config,
        title="Tiny FrawdLLM (converted)",
        summary="A test conversion.",
        origin="Converted from `ckpt.pt` for this test.",
        num_parameters=model.num_parameters(),
        original_project="FrawdLLM",
        source_checkpoint=checkpoint,
        license="apache-2.0",
    )
    (folder / "README.md").write_text(card, encoding="utf-8")
    AutoModelForCausalLM.from_pretrained(folder).push_to_hub("org/converted")
    pushed = ModelCard.load("org/converted")
    assert pushed.data.tags == ["minitf", "minitf_gpt", "frawdllm"]
    assert pushed.data.license == "apache-2.0"
    assert pushed.data.source_checkpoint == {
        "file": "ckpt.pt",
        "sha256": hashlib.sha256(checkpoint.read_bytes()).hexdigest(),
    }
    assert "# Tiny FrawdLLM (converted)" in pushed.text and "Converted from `ckpt.pt` for this test." in pushed.text
    assert '"org/converted"' in python_blocks(pushed.text)[0]


def test_saved_classifier_and_encoder_cards(sentence_folder, tmp_path):
    _, encoder, tokenizer = sentence_folder
    config = MiniTFEncoderConfig(
        **{
            **encoder.config.to_dict(),
            "num_labels": 2,
            "id2label": {0: "no", 1: "yes"},
            "label2id": {"no": 0, "yes": 1},
        }
    )
    classifier = MiniTFEncoderForSequenceClassification(config).eval()
    for name, model, tag in (("clf", classifier, "text-classification"), ("enc", encoder, "feature-extraction")):
        card = ModelCard.load(save_with_tokenizer(model, tokenizer, tmp_path / name) / "README.md")
        assert (card.data.pipeline_tag, card.data.library_name) == (tag, "transformers")
        assert f"| parameters | {model.num_parameters():,} |" in card.text
    card = ModelCard.load(tmp_path / "clf" / "README.md")
    expected = pipeline("text-classification", model=classifier, tokenizer=tokenizer)(card_prompt(card))
    printed = run_snippet(python_blocks(card.text)[0], cwd=tmp_path)
    assert printed == f"{expected}\n"


def test_update_model_card_adds_results_and_keeps_the_card(gpt, tmp_path):
    model, _ = gpt
    model.save_pretrained(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text(readme.read_text() + "\nNotes a user wrote.\n")
    (tmp_path / "loss.png").write_bytes(b"\x89PNG\r\n")
    for _ in range(2):  # idempotent: one results section, one model-index entry per metric
        update_model_card(
            tmp_path,
            eval_results={"loss": 1.25, "perplexity": 3.49},
            dataset_name="tiny rhymes",
            image="loss.png",
            extra_markdown="Trained for 10 steps.",
        )
    card = ModelCard.load(readme)
    results = {(r.metric_type, r.metric_value, r.dataset_name) for r in card.data.eval_results}
    assert results == {("loss", 1.25, "tiny rhymes"), ("perplexity", 3.49, "tiny rhymes")}
    assert card.text.count("## Results") == 1 and "| perplexity | 3.49 |" in card.text
    assert "![loss](loss.png)" in card.text and "Trained for 10 steps." in card.text
    assert "Notes a user wrote." in card.text and card.text.count("## Model") == 1
    with pytest.raises(ValueError, match="missing.png"):
        update_model_card(tmp_path, image="missing.png")


def test_minitf_push_refuses_bad_folders_and_bad_tokens(hub, gpt, tmp_path, capsys):
    model, tokenizer = gpt
    uploads = len(hub.uploads)
    empty = tmp_path / "empty"
    empty.mkdir()
    pickled = tmp_path / "pickled"
    model.save_pretrained(pickled)
    torch.save({"step": 1}, pickled / "extra_state.pt")  # not a trainer's by-product (those are left out)
    weightless = tmp_path / "weightless"
    model.config.save_pretrained(weightless)
    good = tmp_path / "good"
    model.save_pretrained(good)
    capsys.readouterr()  # saving's progress bars
    for folder, reason in (
        (empty, "no config.json"),
        (pickled, "pickle files (extra_state.pt)"),
        (weightless, "no .safetensors weights"),
        (tmp_path / "absent", "is not a folder"),
    ):
        assert push_command(push_args(str(folder), "org/refused")) == 2
        captured = capsys.readouterr()
        assert reason in captured.err and captured.err.count("\n") == 1 and not captured.out
    assert push_command(push_args(str(good), "org/refused", "--token", "hf_wrong")) == 2
    captured = capsys.readouterr()
    assert "401 unauthorized" in captured.err and "HF_TOKEN" in captured.err and captured.err.count("\n") == 1
    assert not captured.out and len(hub.uploads) == uploads and "org/refused" not in hub.repos

    assert (
        minitf_main(["push", str(good), "org/branched", "--revision", "dev", "--commit-message", "first", "--private"])
        == 0
    )  # the `minitf` command line itself
    assert "Pushed" in capsys.readouterr().out and hub.repos["org/branched"].private
    assert hub.uploads[-1].message == "first" and hub.uploads[-1].revision == "dev"
    assert "model.safetensors" in hub.files("org/branched", "dev") and hub.files("org/branched") == set()


def test_offline_loads_from_cache_and_says_what_to_do_otherwise(published, gpt):
    model, tokenizer = gpt
    AutoModelForCausalLM.from_pretrained("org/tiny-gpt")  # the cache holds it (the earlier tests loaded it too)
    ids = tokenizer("hello", return_tensors="pt").input_ids
    with published.offline():
        cached = AutoModelForCausalLM.from_pretrained("org/tiny-gpt").eval()
        assert torch.equal(
            cached.generate(ids, max_new_tokens=6, do_sample=False),
            model.generate(ids, max_new_tokens=6, do_sample=False),
        )
        with pytest.raises(OSError, match=r"(?s)couldn't find them in the cached files.*offline"):
            AutoModel.from_pretrained("org/never-pushed")


def test_card_templates_are_found_installed_and_in_a_checkout(monkeypatch):
    """The templates are package data (`hf_minitf.model_cards`) when installed, the checkout's `model_cards/` when
    that package is not there; both give the same text."""
    from hf_minitf.cards import render

    installed = render.card_template("gpt.md")
    monkeypatch.setattr(render, "TEMPLATE_PACKAGE", "hf_minitf.no_such_templates")
    checkout = render.card_template("ctranslate2_export.md")
    assert installed == render.card_template("gpt.md")
    root = Path(__file__).resolve().parents[2]
    assert checkout == (root / "model_cards" / "ctranslate2_export.md").read_text(encoding="utf-8")
