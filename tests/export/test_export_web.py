"""`minitf export web`: a static page (a Hugging Face static Space) running a GPT or an encoder with transformers.js.

Quickstart-size models (random weights at `minitf quickstart`'s dimensions, wide init so that greedy choices are no
near-ties): the page's files and Space card, its model run by transformers.js in Node (the same greedy tokens as
MiniTF's `generate()`, embeddings within 1e-5 of SentenceTransformer's), the seq2seq refusal, `minitf push --space`
to the loopback Hub. Marked `browser` (deselected by default, `pytest -m browser`; needs Debian's chromium): the page
itself in headless Chromium, typed into and read back, with a screenshot in the test's temporary folder.
"""

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from factories import model_folder
from helpers import assert_one_line_error, run_cli
from huggingface_hub import SpaceCard
from sentence_transformers import SentenceTransformer
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers_js import JS_DIR, BrowserPage, NodeRunner, StaticServer

from hf_minitf import (
    MiniTFEncoderConfig,
    MiniTFEncoderModel,
    MiniTFGPTConfig,
    MiniTFGPTForCausalLM,
    char_tokenizer,
    save_sentence_transformer,
    train_wordlevel_tokenizer,
)
from hf_minitf.catalog.exports import TRANSFORMERS_JS_URL, TRANSFORMERS_JS_VERSION
from hf_minitf.cli import main
from hf_minitf.export.web import ABOUT, MODEL_FOLDER, SITE_FILE, TEMPLATE_FILES, export_web, space_card
from hf_minitf.publishing import push_space
from hf_minitf.training.tasks import number_words, paraphrase_pairs

NUMBERS = number_words().train
GPT_PROMPTS = ["417:", "80", "139: one"]
SENTENCES = [pair[0] for pair in paraphrase_pairs(train=40, held_out=0).train]
SOURCE_SENTENCE, *OTHER_SENTENCES = SENTENCES[:5]


def quickstart_size_gpt(folder: Path) -> Path:
    """A GPT at the quickstart's size (2 layers x 128, 4 heads, 64 learned positions, its character vocabulary)."""
    tokenizer = char_tokenizer("\n".join(NUMBERS))
    config = MiniTFGPTConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=64,
        position_embedding_type="learned",
        initializer_range=0.2,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    MiniTFGPTForCausalLM(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def quickstart_size_encoder(folder: Path) -> Path:
    """An encoder at the quickstart's size (2 layers x 128, 4 heads, FFN 256, 64 positions), a word vocabulary."""
    tokenizer = train_wordlevel_tokenizer(SENTENCES, vocab_size=200, min_frequency=1, max_length=64)
    config = MiniTFEncoderConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=256,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    save_sentence_transformer(MiniTFEncoderModel(config).eval(), tokenizer, folder)
    return folder


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sources")
    return {"gpt": quickstart_size_gpt(root / "gpt"), "encoder": quickstart_size_encoder(root / "encoder")}


@pytest.fixture(scope="module")
def gpt_site(sources, tmp_path_factory) -> Path:
    return export_web(sources["gpt"], tmp_path_factory.mktemp("sites") / "gpt", examples=[GPT_PROMPTS[0]])


@pytest.fixture(scope="module")
def encoder_site(sources, tmp_path_factory) -> Path:
    """Written by the command line, as a user would."""
    out = tmp_path_factory.mktemp("sites") / "encoder"
    examples = [argument for sentence in SENTENCES[:3] for argument in ("--example", sentence)]
    assert main(["export", "web", str(sources["encoder"]), str(out), "--title", "Similar <sentences>", *examples]) == 0
    return out


@pytest.mark.parametrize(
    "title", ["Two lines\nsdk: docker", 'A "quoted" title: yes', "<script>alert(1)</script> & ---", "x" * 100]
)
def test_space_card_keeps_any_title_as_the_title(tmp_path, title):
    """The front matter is serialised from data: the title round-trips and adds no key; the heading is one line."""
    source = SimpleNamespace(family="gpt", repo_id=None, name="my-gpt", folder=tmp_path)
    card = SpaceCard(space_card(source, title, ABOUT["gpt"], ["fp32"]))
    assert card.data.title == title and card.data.sdk == "static"
    assert set(card.data.to_dict()) == set(
        SpaceCard(space_card(source, "plain", ABOUT["gpt"], ["fp32"])).data.to_dict()
    )
    assert f"# {' '.join(title.split())}\n" in card.text


def minitf_greedy_texts(folder: Path, prompts: list[str], max_new_tokens: int) -> list[list[int]]:
    """MiniTF's `generate()`, greedy, as the model card shows it: the new token ids of each prompt."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    results = []
    for prompt in prompts:
        inputs = tokenizer(prompt, return_tensors="pt")
        with torch.no_grad():
            output = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)
        results.append(output[0, inputs.input_ids.shape[1] :].tolist())
    return results


def test_gpt_page_is_a_static_space_loading_pinned_transformers_js(gpt_site):
    assert {path.name for path in gpt_site.iterdir()} == {
        "README.md",
        "index.html",
        SITE_FILE,
        MODEL_FOLDER,
        *TEMPLATE_FILES,
    }
    card = SpaceCard.load(gpt_site / "README.md")
    assert card.data.sdk == "static" and card.data.app_file == "index.html" and "transformers.js" in card.data.tags
    assert "upload_folder" in card.text and TRANSFORMERS_JS_URL in card.text
    site = json.loads((gpt_site / SITE_FILE).read_text())
    assert site == {
        "task": "text-generation",
        "transformers_js": TRANSFORMERS_JS_URL,
        "model": MODEL_FOLDER,
        "dtypes": ["fp32", "q8"],
        "max_positions": 64,
        "examples": ["417:"],
    }
    page = (gpt_site / "index.html").read_text()
    assert f"transformers.js</a>\n      {TRANSFORMERS_JS_VERSION}" in page and "$" not in page
    assert (gpt_site / MODEL_FOLDER / "onnx" / "model.onnx").is_file()
    assert json.loads((gpt_site / MODEL_FOLDER / "config.json").read_text())["model_type"] == "gpt2"


def test_tests_install_the_transformers_js_the_page_loads():
    """The page's pinned version is the one tests/js installs (package.json and its lockfile)."""
    assert f"@huggingface/transformers@{TRANSFORMERS_JS_VERSION}/" in TRANSFORMERS_JS_URL
    assert json.loads((JS_DIR / "package.json").read_text())["dependencies"]["@huggingface/transformers"] == (
        TRANSFORMERS_JS_VERSION
    )
    locked = json.loads((JS_DIR / "package-lock.json").read_text())["packages"]
    assert locked["node_modules/@huggingface/transformers"]["version"] == TRANSFORMERS_JS_VERSION


def test_gpt_page_model_generates_in_node_as_minitf(gpt_site, sources, node_modules):
    expected = minitf_greedy_texts(sources["gpt"], GPT_PROMPTS, 30)
    with NodeRunner("generate", gpt_site / MODEL_FOLDER, "fp32") as node:
        answer = node.ask({"prompts": GPT_PROMPTS, "max_new_tokens": 30})
    assert answer["result"] == expected
    assert min(len(set(tokens)) for tokens in expected) > 3  # the test model wanders: a real comparison


def test_encoder_page_model_embeds_in_node_as_sentence_transformer(encoder_site, sources, node_modules):
    reference = SentenceTransformer(str(sources["encoder"])).encode(SENTENCES)
    with NodeRunner("embed", encoder_site / MODEL_FOLDER, "fp32") as node:
        embeddings = np.array(node.ask({"sentences": SENTENCES})["result"])
    assert np.abs(embeddings - reference).max() <= 1e-5
    site = json.loads((encoder_site / SITE_FILE).read_text())
    assert site["task"] == "sentence-similarity" and site["examples"] == SENTENCES[:3]
    assert "<h1>Similar &lt;sentences&gt;</h1>" in (encoder_site / "index.html").read_text()
    for dtype in site["dtypes"][1:]:  # the 8-bit file keeps the direction
        with NodeRunner("embed", encoder_site / MODEL_FOLDER, dtype) as node:
            quantized = np.array(node.ask({"sentences": SENTENCES})["result"])
        cosines = (quantized * reference).sum(1) / np.linalg.norm(quantized, axis=1) / np.linalg.norm(reference, axis=1)
        assert cosines.min() >= 0.9999, dtype


def test_seq2seq_is_refused_and_nothing_is_written(tmp_path, capsys):
    out = tmp_path / "site"
    status, _, err = run_cli(["export", "web", model_folder("seq2seq", "layer_norm"), out], capsys)
    assert_one_line_error(status, err, "minitf export web: error:", "seq2seq", "transformers.js")
    assert not out.exists()


def test_push_space_uploads_the_page_to_a_static_space(hub, encoder_site, capsys):
    assert main(["push", str(encoder_site), "tester/similar", "--space"]) == 0
    assert "Pushed" in capsys.readouterr().out
    files = hub.files("tester/similar", repo_type="space")
    assert {"README.md", "index.html", "app.js", "worker.js", SITE_FILE, f"{MODEL_FOLDER}/onnx/model.onnx"} <= files
    assert hub.spaces["tester/similar"].sdk == "static" and "tester/similar" not in hub.repos
    assert hub.read("tester/similar", SITE_FILE, repo_type="space") == (encoder_site / SITE_FILE).read_bytes()
    with pytest.raises(Exception, match="examples and card are written"):
        push_space(encoder_site, "tester/other", examples=("a sentence",))


# --- the page in a browser --------------------------------------------------------------------------------------------


@pytest.mark.browser
def test_gpt_page_streams_the_text_of_minitf_generate_in_chromium(gpt_site, sources, node_modules, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(sources["gpt"])
    long_prompt = "".join(NUMBERS)[:60]  # 4 positions left: the page stops at the table's end
    expected = minitf_greedy_texts(sources["gpt"], GPT_PROMPTS, 20)
    expected += minitf_greedy_texts(sources["gpt"], [long_prompt], 64 - len(tokenizer(long_prompt).input_ids))
    screenshot = tmp_path / "gpt_page.png"
    with StaticServer(gpt_site) as server, BrowserPage(server.url) as page:
        answers = [page.ask({"prompt": prompt, "max_new_tokens": 20}) for prompt in GPT_PROMPTS]
        answers.append(page.ask({"prompt": long_prompt, "max_new_tokens": 20, "screenshot": str(screenshot)}))
        quantized = page.ask({"dtype": "q8", "prompt": GPT_PROMPTS[0], "max_new_tokens": 20})
    for answer, tokens in zip(answers, expected):
        assert answer["text"] == tokenizer.decode(tokens, skip_special_tokens=True), answer["status"]
    assert "stopped at the model's 64 positions" in answers[-1]["status"]
    assert "tokens/s" in quantized["status"] and quantized["text"]
    assert screenshot.stat().st_size > 10_000


@pytest.mark.browser
def test_encoder_page_shows_sentence_transformers_similarities_in_chromium(
    encoder_site, sources, node_modules, tmp_path
):
    model = SentenceTransformer(str(sources["encoder"]))
    embeddings = model.encode([SOURCE_SENTENCE, *OTHER_SENTENCES])
    expected = model.similarity(embeddings[:1], embeddings[1:])[0].tolist()
    screenshot = tmp_path / "encoder_page.png"
    with StaticServer(encoder_site) as server, BrowserPage(server.url) as page:
        answer = page.ask({"source": SOURCE_SENTENCE, "sentences": OTHER_SENTENCES, "screenshot": str(screenshot)})
    assert np.abs(np.array(answer["scores"]) - expected).max() <= 1e-5, answer["status"]
    assert answer["shown"] == [f"{score:.4f}" for score in answer["scores"]]
    assert screenshot.stat().st_size > 10_000
