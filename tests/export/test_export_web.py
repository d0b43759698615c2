"""`minitf export web`: a static page (a Hugging Face static Space) running a GPT or an encoder with transformers.js.

Quickstart-size models (random weights at `minitf quickstart`'s dimensions, wide init so that greedy choices are no
near-ties): the page's files and Space card, its model run by transformers.js in Node (the same greedy tokens as
MiniTF's `generate()`, embeddings within 1e-5 of SentenceTransformer's), the seq2seq refusal, `minitf push --space`
to the loopback Hub. The bundled page (`--bundle`): the npm files it copies (from tests/js's node_modules, or
downloaded from a loopback registry whose tarballs are checked), its Content-Security-Policy. Marked `browser`
(deselected by default, `pytest -m browser`; needs Debian's chromium): the page itself in headless Chromium, typed
into and read back, with a screenshot in the test's temporary folder; the bundled page with every request off its
own server refused.
"""

import base64
import hashlib
import io
import json
import re
import shutil
import tarfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from factories import make_seq2seq, quickstart_fields, random_model_folder
from helpers import assert_one_line_error, run_cli
from huggingface_hub import SpaceCard
from sentence_transformers import SentenceTransformer
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer, pipeline
from transformers_js import JS_DIR, BrowserPage, NodeRunner, StaticServer

from hf_minitf import char_tokenizer, train_translation_tokenizers, train_wordlevel_tokenizer
from hf_minitf.catalog.exports import TRANSFORMERS_JS_URL, TRANSFORMERS_JS_VERSION, WEB_BUNDLE
from hf_minitf.cli import main
from hf_minitf.export import web
from hf_minitf.export.web import (
    ABOUT,
    MODEL_FOLDER,
    SITE_FILE,
    TEMPLATE_FILES,
    VENDOR_FOLDER,
    bundled_files,
    export_web,
    space_card,
)
from hf_minitf.modeling.pipeline_minitf_translation import TASK as TRANSLATION
from hf_minitf.publishing import push_space
from hf_minitf.training.tasks import english_italian_pairs, number_words, paraphrase_pairs

NUMBERS = number_words().train
GPT_PROMPTS = ["417:", "80", "139: one"]
SENTENCES = [pair[0] for pair in paraphrase_pairs(train=40, held_out=0).train]
SOURCE_SENTENCE, *OTHER_SENTENCES = SENTENCES[:5]
TRANSLATION_PAIRS = english_italian_pairs(train=300, held_out=0).train
# Words whose letters are not ASCII, in the source vocabulary: split as the original tokenizer splits them only with
# Unicode word classes (transformers.js's own Whitespace pre-tokenizer cuts "perché" in two).
ACCENTED_PAIR = ("perché the café is naïve, said Zoë: città²", "perché il caffè è ingenuo")
SOURCE_TEXTS = [TRANSLATION_PAIRS[0][0], TRANSLATION_PAIRS[1][0], ACCENTED_PAIR[0], "the cat sees a dog perché Zoë"]


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, Path]:
    """Random models at `minitf quickstart`'s sizes: the GPT (2 layers x 128, 4 heads, 64 learned positions) with
    its character vocabulary; the encoder (2 layers x 128, 4 heads, FFN 256, 64 positions) with a word vocabulary;
    the translator (2+2 layers x 128, 4 heads, FFN 256, 64 positions) with word vocabularies of English-Italian
    pairs and a sentence of accented words. The GPT and the translator have a wide init."""
    root = tmp_path_factory.mktemp("sources")
    tokenizers = {
        "gpt": char_tokenizer("\n".join(NUMBERS)),
        "encoder": train_wordlevel_tokenizer(SENTENCES, vocab_size=200, min_frequency=1, max_length=64),
        "seq2seq": train_translation_tokenizers([*TRANSLATION_PAIRS, ACCENTED_PAIR], min_frequency=1),
    }
    wide_init = {"gpt": {"initializer_range": 0.2}, "encoder": {}, "seq2seq": {"initializer_range": 0.2}}
    return {
        family: random_model_folder(family, root / family, tokenizer, **quickstart_fields(family, **wide_init[family]))
        for family, tokenizer in tokenizers.items()
    }


@pytest.fixture(scope="module")
def gpt_site(sources, tmp_path_factory) -> Path:
    return export_web(sources["gpt"], tmp_path_factory.mktemp("sites") / "gpt", examples=[GPT_PROMPTS[0]])


@pytest.fixture(scope="module")
def translator_site(sources, tmp_path_factory, node_modules) -> Path:
    """The translator's page, bundled (transformers.js and onnxruntime-web copied from tests/js's node_modules),
    written by the command line."""
    out = tmp_path_factory.mktemp("sites") / "translator"
    arguments = ["export", "web", str(sources["seq2seq"]), str(out), "--bundle-from", str(node_modules)]
    assert main([*arguments, "--example", SOURCE_TEXTS[0]]) == 0
    return out


@pytest.fixture(scope="module")
def encoder_site(sources, tmp_path_factory) -> Path:
    """Written by the command line, as a user would."""
    out = tmp_path_factory.mktemp("sites") / "encoder"
    examples = [argument for sentence in SENTENCES[:3] for argument in ("--example", sentence)]
    arguments = [str(sources["encoder"]), str(out), "--title", "Similar <sentences>", "--no-verify", *examples]
    assert main(["export", "web", *arguments]) == 0
    return out


@pytest.mark.parametrize(
    "title", ["Two lines\nsdk: docker", 'A "quoted" title: yes', "<script>alert(1)</script> & ---", "x" * 100]
)
def test_space_card_keeps_any_title_as_the_title(tmp_path, title):
    """The front matter is serialised from data: the title round-trips and adds no key; the heading is one line."""
    source = SimpleNamespace(family="gpt", repo_id=None, revision=None, name="my-gpt", folder=tmp_path)
    card = SpaceCard(space_card(source, title, ABOUT["gpt"], ["fp32"]))
    assert card.data.title == title and card.data.sdk == "static"
    assert set(card.data.to_dict()) == set(
        SpaceCard(space_card(source, "plain", ABOUT["gpt"], ["fp32"])).data.to_dict()
    )
    heading = " ".join(title.split()).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert f"# {heading}\n" in card.text and "<script>" not in card.text  # one line of text, no markup


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
        "onnxruntime_wasm": None,
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


def npm_package_folder(node_modules: Path, name: str) -> Path:
    """Where Node resolves `name` from transformers.js: nested under it if npm put it there, else at the top."""
    nested = node_modules / "@huggingface/transformers/node_modules" / name
    return nested if nested.is_dir() else node_modules / name


def test_bundle_pins_the_tarballs_tests_js_installs_and_the_wasm_transformers_js_runs(node_modules):
    """The bundled versions and tarball digests are npm's (package-lock.json); the onnxruntime-web is the one
    transformers.js depends on and whose version its browser build carries, so the wasm matches its JavaScript."""
    locked = json.loads((JS_DIR / "package-lock.json").read_text())["packages"]
    for package in WEB_BUNDLE:
        entry = locked[f"node_modules/{package.name}"]
        assert (entry["version"], entry["integrity"], entry["license"]) == (
            package.version,
            package.integrity,
            package.license,
        )
    transformers, onnxruntime = WEB_BUNDLE
    assert locked["node_modules/@huggingface/transformers"]["dependencies"]["onnxruntime-web"] == onnxruntime.version
    browser_build = (npm_package_folder(node_modules, transformers.name) / transformers.paths[0]).read_text()
    assert f'"{onnxruntime.version}"' in browser_build


def test_bundled_page_holds_the_npm_files_and_forbids_other_origins(translator_site, node_modules):
    site = json.loads((translator_site / SITE_FILE).read_text())
    for package in WEB_BUNDLE:
        for path in package.paths:
            vendored = translator_site / VENDOR_FOLDER / package.name / path
            assert vendored.read_bytes() == (npm_package_folder(node_modules, package.name) / path).read_bytes()
    transformers, onnxruntime = WEB_BUNDLE
    assert site["transformers_js"] == f"{VENDOR_FOLDER}/{transformers.name}/dist/transformers.min.js"
    assert site["onnxruntime_wasm"] == {
        suffix: f"{VENDOR_FOLDER}/{onnxruntime.name}/dist/ort-wasm-simd-threaded.asyncify.{suffix}"
        for suffix in ("mjs", "wasm")
    }
    page = (translator_site / "index.html").read_text()
    (policy,) = re.findall(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', page)
    directives = dict(directive.strip().split(" ", 1) for directive in policy.split(";"))
    assert directives["default-src"] == "'self'"
    for name, sources in directives.items():  # every source list: this origin or none, wasm compiled by the page
        assert set(sources.split()) <= {"'self'", "'none'", "'wasm-unsafe-eval'"}, name
    for name in ("index.html", "app.js", "worker.js", SITE_FILE):  # no address of another site to load from
        text = (translator_site / name).read_text()
        assert "cdn." not in text and not re.search(r"(src|import|fetch)\W+https?:", text), name
    readme = (translator_site / VENDOR_FOLDER / "README.md").read_text()
    assert all(package.integrity in readme for package in WEB_BUNDLE)
    assert "Content-Security-Policy" in SpaceCard.load(translator_site / "README.md").text


def npm_tarball(package_folder: Path, paths: tuple[str, ...], tampered: bool = False) -> bytes:
    """An npm tarball (files under `package/`) holding `paths` of an installed package."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as archive:
        for path in paths:
            data = (package_folder / path).read_bytes() + (b"\n// changed" if tampered else b"")
            info = tarfile.TarInfo(f"package/{path}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture
def loopback_registry(tmp_path, monkeypatch, node_modules):
    """An npm registry on a loopback port serving tarballs of tests/js's packages, with WEB_BUNDLE pinning their
    digests, the npm cache in a temporary folder. Yields a function writing the registry's tarballs."""
    registry = tmp_path / "registry"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def publish(tampered: bool | str = False) -> None:
        """Serve every package's tarball, tampered with (all, or the one package named)."""
        pinned = []
        for package in WEB_BUNDLE:
            original = npm_tarball(npm_package_folder(node_modules, package.name), package.paths)
            digest = base64.b64encode(hashlib.sha512(original).digest()).decode()
            pinned.append(package._replace(integrity=f"sha512-{digest}"))
            served = (
                npm_tarball(npm_package_folder(node_modules, package.name), package.paths, True)
                if tampered in (True, package.name)
                else original
            )
            tarball = registry / package.name / "-" / f"{package.name.rsplit('/', 1)[-1]}-{package.version}.tgz"
            tarball.parent.mkdir(parents=True, exist_ok=True)
            tarball.write_bytes(served)
        monkeypatch.setattr(web, "WEB_BUNDLE", tuple(pinned))

    registry.mkdir()
    with StaticServer(registry) as server:
        monkeypatch.setenv("npm_config_registry", server.url)
        yield publish


def test_bundle_downloads_each_package_once_and_checks_its_tarball(loopback_registry, tmp_path, node_modules):
    loopback_registry()
    files = bundled_files()
    for package in WEB_BUNDLE:
        for path in package.paths:
            expected = (npm_package_folder(node_modules, package.name) / path).read_bytes()
            assert files[f"{VENDOR_FOLDER}/{package.name}/{path}"].read_bytes() == expected
    for tarball in (tmp_path / "registry").rglob("*.tgz"):
        tarball.unlink()  # the second export reads the cache
    assert bundled_files() == files


def test_bundle_refuses_a_tarball_that_is_not_the_pinned_one(loopback_registry, tmp_path):
    loopback_registry(tampered=True)
    with pytest.raises(ValueError, match="is not the pinned .* digest differs"):
        bundled_files()
    assert not [path for path in (tmp_path / "cache").rglob("*") if path.is_file()]


def test_a_bundle_refused_for_its_second_package_keeps_nothing_it_fetched(loopback_registry, tmp_path):
    """The first package's tarball is the pinned one and the second's is not: the refusal leaves the cache as it
    was before (no file of the first package either)."""
    assert len(WEB_BUNDLE) == 2
    loopback_registry(tampered=WEB_BUNDLE[1].name)
    with pytest.raises(ValueError, match=f"is not the pinned {re.escape(WEB_BUNDLE[1].name)}.* nothing was kept"):
        bundled_files()
    assert not [path for path in (tmp_path / "cache").rglob("*") if path.is_file()]


def test_a_refused_bundle_keeps_what_the_cache_held_before(loopback_registry, tmp_path):
    """A package cached by an earlier bundle stays when a later bundle is refused."""
    loopback_registry()
    bundled_files()
    first = web.npm_cache() / f"{WEB_BUNDLE[0].name}@{WEB_BUNDLE[0].version}"
    held = sorted(path.relative_to(first) for path in first.rglob("*") if path.is_file())
    shutil.rmtree(web.npm_cache() / f"{WEB_BUNDLE[1].name}@{WEB_BUNDLE[1].version}")
    loopback_registry(tampered=WEB_BUNDLE[1].name)
    with pytest.raises(ValueError, match="is not the pinned"):
        bundled_files()
    assert sorted(path.relative_to(first) for path in first.rglob("*") if path.is_file()) == held and held


def test_bundle_without_network_says_to_bundle_from_node_modules(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with StaticServer(tmp_path) as server:
        closed = server.url
    monkeypatch.setenv("npm_config_registry", closed)
    with pytest.raises(ValueError, match="could not download .* pass --bundle-from a node_modules folder"):
        bundled_files()


@pytest.mark.parametrize(
    "installed, words",
    [
        ({}, ["no @huggingface/transformers package", "npm install @huggingface/transformers@"]),
        ({"@huggingface/transformers": "4.0.0"}, ["@huggingface/transformers is 4.0.0", TRANSFORMERS_JS_VERSION]),
        ({"@huggingface/transformers": TRANSFORMERS_JS_VERSION}, ["lacks dist/transformers.min.js"]),
    ],
)
def test_bundle_from_a_node_modules_without_the_pinned_packages_is_refused(tmp_path, capsys, sources, installed, words):
    node_modules = tmp_path / "node_modules"
    for name, version in installed.items():
        (node_modules / name).mkdir(parents=True)
        (node_modules / name / "package.json").write_text(json.dumps({"name": name, "version": version}))
    out = tmp_path / "site"
    status, _, err = run_cli(["export", "web", sources["gpt"], out, "--bundle-from", tmp_path], capsys)
    assert_one_line_error(status, err, "minitf export web: error:", *words)
    assert not out.exists()


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


def minitf_translations(folder: Path, texts: list[str], max_new_tokens: int | None = None) -> list[dict]:
    """MiniTF's greedy translations of `texts`: the source ids, the target ids (`generate()`, start token first) and
    the text `minitf translate` prints (the translation pipeline, its default length without `max_new_tokens`)."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    translate = pipeline(TRANSLATION, model=model, tokenizer=tokenizer)
    options = {} if max_new_tokens is None else {"max_new_tokens": max_new_tokens}
    # generate()'s own length when none is given: the generation config's, else (as the pipeline) the positions'
    length = {"max_length": model.generation_config.max_length or model.config.max_position_embeddings}
    results = []
    for text in texts:
        with torch.no_grad():
            inputs = tokenizer(text, return_tensors="pt")
            ids = model.generate(**inputs, num_beams=1, do_sample=False, **(options or length))
        (output,) = translate([text], num_beams=1, **options)
        results.append(
            {"sourceIds": tokenizer(text).input_ids, "ids": ids[0].tolist(), "text": output["translation_text"]}
        )
    return results


def test_translator_page_translates_in_node_as_minitf(translator_site, sources):
    """The page's own translator.js, in Node: the same source ids (accented words too), target ids and text as
    MiniTF, at the model's default length and at a few new tokens."""
    expected = minitf_translations(sources["seq2seq"], SOURCE_TEXTS)
    expected_short = minitf_translations(sources["seq2seq"], SOURCE_TEXTS, max_new_tokens=5)
    with NodeRunner("translate", translator_site) as node:
        answers = node.ask({"texts": SOURCE_TEXTS, "max_new_tokens": None})["result"]
        short = node.ask({"texts": SOURCE_TEXTS, "max_new_tokens": 5})["result"]
    for answer, reference in zip(answers + short, expected + expected_short):
        assert {key: answer[key] for key in reference} == reference
    assert len(set(expected[2]["sourceIds"])) > 5 and 0 not in expected[2]["sourceIds"][:4]  # accented words known
    assert len({token for reference in expected for token in reference["ids"]}) > 8  # a real comparison: many ids
    site = json.loads((translator_site / SITE_FILE).read_text())
    assert site["task"] == "translation" and site["examples"] == SOURCE_TEXTS[:1]
    assert site["dtypes"] == ["fp32", "q8"] and site["translator"]["max_positions"] == 64
    with NodeRunner("translate", translator_site, "q8") as node:  # the 8-bit graphs run (their text may differ)
        assert node.ask({"texts": SOURCE_TEXTS[:1], "max_new_tokens": 5})["result"][0]["text"]


def test_a_translator_the_onnx_export_refuses_is_refused_and_nothing_is_written(tmp_path, capsys):
    """A translator whose generation config recomputes the whole prefix (hkproj's untrained model) has no cached
    graphs that reproduce it: the page is refused as `export onnx` refuses it."""
    folder = make_seq2seq(tmp_path / "uncached")
    generation = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({**generation, "use_cache": False}))
    out = tmp_path / "site"
    status, _, err = run_cli(["export", "web", folder, out], capsys)
    assert_one_line_error(status, err, "minitf export web: error:", "use_cache=False")
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
    assert quantized["offsite"] and all(url.startswith("https://cdn.jsdelivr.net/npm/") for url in quantized["offsite"])


@pytest.mark.browser
def test_bundled_translator_page_streams_minitf_translations_with_every_other_origin_refused_in_chromium(
    translator_site, sources, node_modules, tmp_path
):
    """Requests off the page's server are refused and host names resolve nowhere; the server sends the page's own
    policy as a header, which holds the model's worker to it too."""
    expected = minitf_translations(sources["seq2seq"], SOURCE_TEXTS, max_new_tokens=12)
    screenshot = tmp_path / "translator_page.png"
    with StaticServer(translator_site) as server, BrowserPage(server.url, offline=True) as page:
        answers = [page.ask({"text": text, "max_new_tokens": 12}) for text in SOURCE_TEXTS[:-1]]
        answers.append(page.ask({"text": SOURCE_TEXTS[-1], "max_new_tokens": 12, "screenshot": str(screenshot)}))
    for answer, reference in zip(answers, expected):
        assert answer["text"] == reference["text"], answer["status"]
        assert f"{len(reference['ids']) - 1} tokens in" in answer["status"]
    assert answers[-1]["offsite"] == [] and answers[-1]["violations"] == []
    assert screenshot.stat().st_size > 10_000
