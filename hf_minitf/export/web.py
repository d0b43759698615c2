"""Export a MiniTF model as a static web page that runs it in the browser with transformers.js.

The folder is a static site, the form a Hugging Face static Space takes (its README's front matter says
`sdk: static`): `index.html`, `app.js` (the page), `worker.js` (the model, run off the page's thread so that
streamed tokens show as they come), `style.css`, `site.json` (what the page needs to know: the task, the weight
variants, the context length, the examples, the pinned transformers.js URL) and `model/`, the folder
`minitf export onnx` writes, which transformers.js reads (ONNX files under `model/onnx/`, picked by dtype: fp32 is
`model.onnx`, q8 `model_quantized.onnx`, ...). A GPT gets a prompt box with streamed greedy generation that stops
at the model's position table; an encoder a sentence-similarity box (mean pooling, normalized, cosine), as
SentenceTransformer computes it; a seq2seq translator a text box with the streamed greedy translation, run by
`translator.js` (transformers.js has no model class for it: its two tokenizers and three graphs are loaded with
transformers.js's own pieces, the decoding loop is the page's).

transformers.js is loaded from jsDelivr at the version pinned here (`TRANSFORMERS_JS_VERSION`, the version
tests/js/package.json installs for the tests, which serve that copy instead of the CDN's), and it fetches
onnxruntime-web's wasm from there too. With `bundle=True` the page needs no other site: those files
(`WEB_BUNDLE`) are copied into `vendor/`, taken from a local node_modules (`bundle_from`) or downloaded once from the
npm registry with their tarballs' pinned integrity checked, and index.html carries a Content-Security-Policy
that forbids other origins, so the page runs offline, air-gapped, or behind a strict policy.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import shutil
import string
import tarfile
import tempfile
import urllib.request
from importlib import resources
from pathlib import Path

from hf_minitf.catalog.exports import (
    NPM_REGISTRY,
    ONNX_DTYPE_SUFFIXES,
    ONNX_TRANSLATOR_GRAPHS,
    TRANSFORMERS_JS_URL,
    TRANSFORMERS_JS_VERSION,
    WEB_BUNDLE,
    WEB_CONTENT_SECURITY_POLICY,
    NpmFiles,
    onnx_variant_file,
)
from hf_minitf.catalog.families import FAMILIES, family_of_model_type
from hf_minitf.export.source import accepts_src, open_source
from hf_minitf.safety.json_files import read_json
from hf_minitf.safety.output_folders import atomic_output_dir

MODEL_FOLDER = "model"
"""The subfolder holding the ONNX export the page loads."""
SITE_FILE = "site.json"
VENDOR_FOLDER = "vendor"
"""Where a bundled page keeps the npm files it runs, as `vendor/{package}/{path in the package}`."""
TEMPLATE_FILES = ("app.js", "worker.js", "style.css")
"""Copied as they are; index.html and README.md are filled in."""
TASKS = {"gpt": "text-generation", "encoder": "sentence-similarity", "seq2seq": "translation"}
TEMPLATE_MODULES = {"seq2seq": ("translator.js",)}
"""A family's page modules beside the template files: the translator's loop, which the Node tests import too."""


@accepts_src
def export_web(
    source: str | os.PathLike,
    out: str | os.PathLike,
    *,
    examples: tuple[str, ...] | list[str] = (),
    title: str | None = None,
    license: str | None = None,
    quantize: str | None = "q8",
    overwrite: bool = False,
    revision: str | None = None,
    bundle: bool = False,
    bundle_from: str | os.PathLike | None = None,
    source_repo: str | None = None,
) -> Path:
    """Write the static site for the MiniTF model at `source` (a folder or a Hub repo id, at `revision`) to `out`:
    the page, and the ONNX export in `out/model` (float32, plus the `quantize` variant: see `export_onnx`, which
    refuses what it cannot export). `examples` fill the page's boxes: a GPT's first prompt or the first text to
    translate; an encoder's source sentence, then the sentences to compare with it; `title` heads the page (default: the source's name), `license` goes into the
    Space card and the model's (default: the source card's license, else `DEFAULT_LICENSE`). `bundle` (implied by
    `bundle_from`, a node_modules folder or the folder holding one) copies transformers.js and onnxruntime-web's
    wasm into `out/vendor` instead of loading them from jsDelivr: see `bundled_files`. The cards name the source by
    `source_repo` (the Hub repo it is published as; default: `source` when that is a repo id) or by no name.
    Returns the folder."""
    from hf_minitf.export.onnx import export_onnx

    opened = open_source(source, revision)
    vendored = bundled_files(bundle_from) if bundle or bundle_from is not None else {}
    inputs = [] if opened.repo_id else [opened.folder]
    with atomic_output_dir(out, overwrite=overwrite, inputs=inputs) as work:
        export_onnx(
            source, work / MODEL_FOLDER, quantize=quantize, revision=revision, license=license, source_repo=source_repo
        )
        for name, file in vendored.items():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(file, work / name)
        if vendored:
            (work / VENDOR_FOLDER / "README.md").write_text(
                VENDOR_README.format(packages=package_list()), encoding="utf-8"
            )
        graphs = model_graphs(opened.family)
        dtypes = available_dtypes(work / MODEL_FOLDER, graphs)
        transformers_js, onnxruntime_wasm = page_runtime(bool(vendored))
        site = {
            "task": TASKS[opened.family],
            "transformers_js": transformers_js,
            "onnxruntime_wasm": onnxruntime_wasm,
            "model": MODEL_FOLDER,
            "dtypes": dtypes,
            "max_positions": position_table(opened.config),
            "examples": list(examples),
        }
        if opened.family == "seq2seq":
            site["translator"] = translator_site(work / MODEL_FOLDER, opened.config, graphs)
        (work / SITE_FILE).write_text(json.dumps(site, indent=2) + "\n", encoding="utf-8")
        template = resources.files(__package__) / "web_template"
        for name in (*TEMPLATE_FILES, *TEMPLATE_MODULES.get(opened.family, ())):
            (work / name).write_bytes((template / name).read_bytes())
        title = title or f"{Path(source_repo or opened.name).name} (MiniTF {opened.family})"
        about = ABOUT[opened.family]
        page = string.Template((template / "index.html").read_text(encoding="utf-8"))
        (work / "index.html").write_text(
            page.substitute(
                title=html.escape(title),
                about=html.escape(about),
                transformers_js_version=TRANSFORMERS_JS_VERSION,
                transformers_js_url=transformers_js,
                security_policy=SECURITY_POLICY_TAG if vendored else "",
            ),
            encoding="utf-8",
        )
        card = space_card(opened, title, about, dtypes, license, bundled=bool(vendored), source_repo=source_repo)
        (work / "README.md").write_text(card, encoding="utf-8")
    return Path(out)


SECURITY_POLICY_TAG = (
    f'\n  <meta http-equiv="Content-Security-Policy" content="{html.escape(WEB_CONTENT_SECURITY_POLICY, quote=False)}">'
)
"""A bundled page's policy, in its head: the browser refuses anything the page asks of another origin."""


def vendored_path(package: NpmFiles, path: str) -> str:
    """Where a bundled page keeps `path` of `package`, relative to the page."""
    return f"{VENDOR_FOLDER}/{package.name}/{path}"


def page_runtime(bundled: bool) -> tuple[str, dict[str, str] | None]:
    """What site.json tells the worker to load: transformers.js (jsDelivr's URL, or its vendored copy) and, for a
    bundled page, onnxruntime-web's wasm files (`env.backends.onnx.wasm.wasmPaths`: its .mjs and .wasm; None lets
    transformers.js fetch them from jsDelivr)."""
    transformers, onnxruntime = WEB_BUNDLE
    if not bundled:
        return TRANSFORMERS_JS_URL, None
    wasm_paths = {Path(path).suffix.lstrip("."): vendored_path(onnxruntime, path) for path in onnxruntime.paths}
    return vendored_path(transformers, transformers.paths[0]), wasm_paths


def bundled_files(bundle_from: str | os.PathLike | None = None) -> dict[str, Path]:
    """The files a bundled page copies (`WEB_BUNDLE`), by their place in the page (`vendor/...`): from the
    node_modules folder `bundle_from` (or the folder holding one), which must hold the pinned versions (`npm install
    @huggingface/transformers@VERSION` installs both), else downloaded once from the npm registry (or the mirror
    `npm_config_registry` names) into the cache (`npm_cache`), each tarball checked against its pinned integrity.
    A package refused (a tarball that is not the pinned one, a download that fails) leaves the cache as it was:
    the packages this call downloaded before it are removed again."""
    files = {}
    downloaded: list[Path] = []
    try:
        for package in WEB_BUNDLE:
            if bundle_from is not None:
                folder = installed_package(Path(bundle_from), package)
            else:
                cached = is_cached(package)
                folder = cached_package(package)
                downloaded += [] if cached else [folder]
            files.update({vendored_path(package, path): folder / path for path in package.paths})
    except BaseException:
        for folder in downloaded:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    return files


INSTALL_ADVICE = (
    f"run `npm install @huggingface/transformers@{TRANSFORMERS_JS_VERSION}` in a folder and pass its node_modules, "
    "or leave --bundle-from out to download the packages from the npm registry"
)


def installed_package(node_modules: Path, package: NpmFiles) -> Path:
    """`package`'s folder in `node_modules` (where Node would resolve it from transformers.js: nested under it, else
    at the top), checked: the pinned version, holding the files the page needs."""
    if (node_modules / "node_modules").is_dir():
        node_modules = node_modules / "node_modules"
    transformers = WEB_BUNDLE[0].name
    candidates = [node_modules / transformers / "node_modules" / package.name, node_modules / package.name]
    folder = next((candidate for candidate in candidates if (candidate / "package.json").is_file()), None)
    if folder is None:
        raise ValueError(f"--bundle-from {node_modules}: no {package.name} package in it; {INSTALL_ADVICE}")
    version = read_json(folder / "package.json", advice=INSTALL_ADVICE).get("version")
    if version != package.version:
        raise ValueError(
            f"--bundle-from {node_modules}: {package.name} is {version}, the page needs {package.version} "
            f"(the version transformers.js {TRANSFORMERS_JS_VERSION} runs); {INSTALL_ADVICE}"
        )
    missing = [path for path in package.paths if not (folder / path).is_file()]
    if missing:
        raise ValueError(f"--bundle-from {node_modules}: {package.name} lacks {', '.join(missing)}; {INSTALL_ADVICE}")
    return folder


def npm_cache() -> Path:
    """Where downloaded packages are kept: `$XDG_CACHE_HOME/minitf/npm` (default `~/.cache/minitf/npm`)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "minitf" / "npm"


def is_cached(package: NpmFiles) -> bool:
    """Whether the cache holds every file of `package` the page needs."""
    folder = npm_cache() / f"{package.name}@{package.version}"
    return all((folder / path).is_file() for path in package.paths)


def cached_package(package: NpmFiles) -> Path:
    """A folder holding `package.paths` as the package lays them out: the cache's, else downloaded into it now from
    the npm registry's tarball, whose digest must be the pinned integrity (nothing is kept otherwise)."""
    folder = npm_cache() / f"{package.name}@{package.version}"
    if is_cached(package):
        return folder
    registry = (os.environ.get("npm_config_registry") or NPM_REGISTRY).rstrip("/")
    url = f"{registry}/{package.name}/-/{package.name.rsplit('/', 1)[-1]}-{package.version}.tgz"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".download-") as scratch:
        tarball = Path(scratch) / "package.tgz"
        algorithm, expected = package.integrity.split("-", 1)
        digest = hashlib.new(algorithm)
        try:
            with urllib.request.urlopen(url, timeout=60) as response, tarball.open("wb") as file:
                while chunk := response.read(1 << 20):
                    digest.update(chunk)
                    file.write(chunk)
        except OSError as error:
            raise ValueError(
                f"could not download {package.name}@{package.version} from {url} ({error}); "
                f"without network access, pass --bundle-from a node_modules folder (npm install "
                f"@huggingface/transformers@{TRANSFORMERS_JS_VERSION} on a machine that has it)"
            ) from None
        if base64.b64encode(digest.digest()).decode() != expected:
            raise ValueError(
                f"{url} is not the pinned {package.name}@{package.version}: its {algorithm} digest differs from "
                f"{package.integrity}; nothing was kept (check the registry or mirror, npm_config_registry)"
            )
        staged = Path(scratch) / "package"
        with tarfile.open(tarball, "r:gz") as archive:
            for path in package.paths:
                member = next((entry for entry in archive if entry.name == f"package/{path}"), None)
                source = archive.extractfile(member) if member is not None and member.isfile() else None
                if source is None:
                    raise ValueError(f"{url} holds no file package/{path}, which the page needs")
                (staged / path).parent.mkdir(parents=True, exist_ok=True)
                with source, (staged / path).open("wb") as target:
                    shutil.copyfileobj(source, target)
        shutil.rmtree(folder, ignore_errors=True)
        staged.rename(folder)
    return folder


def package_list() -> str:
    """vendor/README.md's list of the bundled packages."""
    return "\n".join(
        f"- `{package.name}` {package.version} ({package.license}; npm tarball {package.integrity}): "
        + ", ".join(f"`{path}`" for path in package.paths)
        for package in WEB_BUNDLE
    )


VENDOR_README = """\
# What the page runs, from npm

Copied by `minitf export web --bundle` from these npm packages, at the versions transformers.js pins, so that the
page loads nothing from another site (its Content-Security-Policy forbids it):

{packages}

Each file keeps its package's path: `vendor/PACKAGE/PATH`. The licenses are the packages' own.
"""


ABOUT = {
    "gpt": "A small GPT running in your browser: type the start of a text, it continues it (greedy decoding).",
    "encoder": "A small sentence encoder running in your browser: how close in meaning is each sentence to the first?",
    "seq2seq": "A small translation model running in your browser: type a sentence, it translates it (greedy decoding).",
}


def model_graphs(family: str) -> list[str]:
    """The ONNX files of the export a family's page loads, by role: a translator's three graphs, else one model."""
    from hf_minitf.export.onnx import MODEL_FILE

    return list(ONNX_TRANSLATOR_GRAPHS.values()) if family == "seq2seq" else [MODEL_FILE]


def translator_site(model_folder: Path, config: dict, graphs: list[str]) -> dict:
    """What the translator's page needs beside the files: its tokenizers' files (source encodes, target decodes),
    its graphs by role (transformers.js's model_file_name: the name under onnx/ without dtype suffix and .onnx), and
    the generation config's start id, end ids and length (its max_length, else the position table's), read from
    the export as `minitf translate` reads them."""
    from hf_minitf.modeling.tokenization_minitf_seq2seq import VOCAB_FILES_NAMES

    generation = read_json(model_folder / "generation_config.json")
    end_ids = generation.get("eos_token_id")
    return {
        "source_tokenizer": VOCAB_FILES_NAMES["source_tokenizer_file"],
        "target_tokenizer": VOCAB_FILES_NAMES["target_tokenizer_file"],
        "graphs": {role: Path(file).stem for role, file in zip(ONNX_TRANSLATOR_GRAPHS, graphs)},
        "start_id": generation["decoder_start_token_id"],
        "end_ids": end_ids if isinstance(end_ids, list) else [end_ids],
        "max_length": generation.get("max_length") or config["max_position_embeddings"],
        "max_positions": config["max_position_embeddings"],
    }


def position_table(config: dict) -> int | None:
    """The length of a learned position table, where the page stops generating (transformers.js does not stop by
    itself, and a learned-position model fails past its table); None for rotary positions (they go on past the
    trained length, as MiniTF's generate() does) and encoders (their tokenizer truncates)."""
    learned = family_of_model_type(config.get("model_type")) is FAMILIES["gpt"] and (
        config.get("position_embedding_type", "learned") == "learned"
    )
    return config["max_position_embeddings"] if learned else None


def available_dtypes(model_folder: Path, graphs: list[str]) -> list[str]:
    """The transformers.js dtypes whose ONNX files (each of `graphs` in that dtype) the export wrote, float32 first."""
    return [
        dtype
        for dtype in ONNX_DTYPE_SUFFIXES
        if all((model_folder / onnx_variant_file(graph, dtype)).is_file() for graph in graphs)
    ]


def space_card(
    source,
    title: str,
    about: str,
    dtypes: list[str],
    license: str | None = None,
    bundled: bool = False,
    source_repo: str | None = None,
) -> str:
    """The site's README.md: a Hugging Face static Space card (front matter), what the page is and how to run it;
    its `models` and its text name the source's Hub repo (`source_repo`, else the source's own repo id), or none.

    The front matter is serialised from data, so a title with newlines, quotes or markup stays the title (it cannot
    add a key); the heading holds it on one line."""
    from huggingface_hub import SpaceCard, SpaceCardData

    from hf_minitf.cards import export_card_data, inline_text, source_naming, source_words

    named = source_naming(source.family, source.repo_id, source.revision, source_repo)
    carried = export_card_data(source.folder, license)

    data = SpaceCardData(
        title=title,
        sdk="static",
        app_file="index.html",
        emoji="🧩",
        colorFrom="gray",
        colorTo="blue",
        short_description=f"A MiniTF {source.family} running in the browser"[:60],
        tags=["minitf", "transformers.js", "onnx", TASKS[source.family]],
        models=[named["source_repo"]] if named["source_repo"] else None,
        license=carried["license"],
        license_name=carried.get("license_name"),
    )
    graphs = model_graphs(source.family)
    files = ", ".join(
        f"`{dtype}` ({', '.join(f'`{onnx_variant_file(graph, dtype)}`' for graph in graphs)})" for dtype in dtypes
    )
    body = SPACE_CARD_BODY.format(
        title=inline_text(title),
        about=about,
        source=source_words(**named),
        version=TRANSFORMERS_JS_VERSION,
        url=page_runtime(bundled)[0],
        files=files,
        model=MODEL_FOLDER,
        runtime=BUNDLED_RUNTIME if bundled else CDN_RUNTIME,
    )
    return str(SpaceCard(f"---\n{data.to_yaml()}\n---\n\n{body}"))


SPACE_CARD_BODY = """\
# {title}

{about}

A static page: [transformers.js](https://huggingface.co/docs/transformers.js) {version}, loaded from
`{url}`, runs the model in `{model}/` (the ONNX export of
{source}) in the browser, with ONNX Runtime Web (WebAssembly). Nothing is sent to a server. Weights: {files};
the page loads the one chosen in its Weights box. {runtime}

Written by `minitf export web` (hf_minitf). To open it locally, serve the folder (browsers do not run module
scripts from `file://`):

```bash
python -m http.server --directory . 8000   # then open http://127.0.0.1:8000
```

To publish it as a Hugging Face static Space: `minitf push MODEL your-name/space-name --space`, or with
huggingface_hub:

```python
from huggingface_hub import HfApi

api = HfApi()
api.create_repo("your-name/space-name", repo_type="space", space_sdk="static", exist_ok=True)
api.upload_folder(repo_id="your-name/space-name", repo_type="space", folder_path=".")
```
"""
CDN_RUNTIME = (
    "transformers.js and the wasm of ONNX Runtime Web come from jsDelivr: the page needs that site "
    "(`minitf export web --bundle` writes one that needs none)."
)
BUNDLED_RUNTIME = (
    "transformers.js and the wasm of ONNX Runtime Web are in `vendor/` (see `vendor/README.md`): the page "
    "loads nothing from another site, and its Content-Security-Policy forbids it, so it runs offline. A server "
    "that sends headers can send the same policy as a `Content-Security-Policy` header, which covers the model's "
    "worker too (a page's meta tag does not)."
)

__all__ = ["MODEL_FOLDER", "SITE_FILE", "VENDOR_FOLDER", "bundled_files", "export_web"]
