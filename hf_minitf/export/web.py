"""Export a MiniTF GPT or encoder as a static web page that runs it in the browser with transformers.js.

The folder is a static site, the form a Hugging Face static Space takes (its README's front matter says
`sdk: static`): `index.html`, `app.js` (the page), `worker.js` (the model, run off the page's thread so that
streamed tokens show as they come), `style.css`, `site.json` (what the page needs to know: the task, the weight
variants, the context length, the examples, the pinned transformers.js URL) and `model/`, the folder
`minitf export onnx` writes, which transformers.js reads (ONNX files under `model/onnx/`, picked by dtype: fp32 is
`model.onnx`, q8 `model_quantized.onnx`, ...). A GPT gets a prompt box with streamed greedy generation that stops
at the model's position table; an encoder a sentence-similarity box (mean pooling, normalized, cosine), as
SentenceTransformer computes it.

transformers.js is loaded from jsDelivr at the version pinned here (`TRANSFORMERS_JS_VERSION`, the version
tests/js/package.json installs for the tests, which serve that copy instead of the CDN's).
"""

from __future__ import annotations

import html
import json
import os
import string
from importlib import resources
from pathlib import Path

from hf_minitf.catalog.exports import TRANSFORMERS_JS_URL, TRANSFORMERS_JS_VERSION
from hf_minitf.catalog.families import FAMILIES, family_of_model_type
from hf_minitf.export.source import accepts_src, open_source
from hf_minitf.safety.output_folders import atomic_output_dir

MODEL_FOLDER = "model"
"""The subfolder holding the ONNX export the page loads."""
SITE_FILE = "site.json"
TEMPLATE_FILES = ("app.js", "worker.js", "style.css")
"""Copied as they are; index.html and README.md are filled in."""
TASKS = {"gpt": "text-generation", "encoder": "sentence-similarity"}
# transformers.js picks the ONNX file by dtype: onnx/model{suffix}.onnx (its DEFAULT_DTYPE_SUFFIX_MAPPING).
DTYPE_SUFFIXES = {"fp32": "", "q8": "_quantized", "fp16": "_fp16", "q4": "_q4", "int8": "_int8", "uint8": "_uint8"}
SEQ2SEQ_REFUSAL = (
    "the web export takes gpt and encoder models: transformers.js has no counterpart of the seq2seq family's "
    "paired source/target tokenizer, so a page could not tokenize as MiniTF does."
)


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
) -> Path:
    """Write the static site for the MiniTF GPT or encoder at `source` (a folder or a Hub repo id, at `revision`) to
    `out`: the page, and the ONNX export in `out/model` (float32, plus the `quantize` variant: see
    `export_onnx`). `examples` fill the page's boxes: a GPT's first prompt; an encoder's source sentence, then the
    sentences to compare with it; `title` heads the page (default: the source's name), `license` goes into the
    Space card and the model's (default: the source card's license, else `DEFAULT_LICENSE`). Returns the folder."""
    from hf_minitf.export.onnx import export_onnx

    opened = open_source(source, revision)
    if opened.family not in TASKS:
        raise ValueError(f"{opened.name} is a {opened.family} model; {SEQ2SEQ_REFUSAL}")
    inputs = [] if opened.repo_id else [opened.folder]
    with atomic_output_dir(out, overwrite=overwrite, inputs=inputs) as work:
        export_onnx(source, work / MODEL_FOLDER, quantize=quantize, revision=revision, license=license)
        dtypes = available_dtypes(work / MODEL_FOLDER)
        site = {
            "task": TASKS[opened.family],
            "transformers_js": TRANSFORMERS_JS_URL,
            "model": MODEL_FOLDER,
            "dtypes": dtypes,
            "max_positions": position_table(opened.config),
            "examples": list(examples),
        }
        (work / SITE_FILE).write_text(json.dumps(site, indent=2) + "\n", encoding="utf-8")
        template = resources.files(__package__) / "web_template"
        for name in TEMPLATE_FILES:
            (work / name).write_bytes((template / name).read_bytes())
        title = title or f"{Path(opened.name).name} (MiniTF {opened.family})"
        about = ABOUT[opened.family]
        page = string.Template((template / "index.html").read_text(encoding="utf-8"))
        (work / "index.html").write_text(
            page.substitute(
                title=html.escape(title),
                about=html.escape(about),
                transformers_js_version=TRANSFORMERS_JS_VERSION,
                transformers_js_url=TRANSFORMERS_JS_URL,
            ),
            encoding="utf-8",
        )
        (work / "README.md").write_text(space_card(opened, title, about, dtypes, license), encoding="utf-8")
    return Path(out)


ABOUT = {
    "gpt": "A small GPT running in your browser: type the start of a text, it continues it (greedy decoding).",
    "encoder": "A small sentence encoder running in your browser: how close in meaning is each sentence to the first?",
}


def position_table(config: dict) -> int | None:
    """The length of a learned position table, where the page stops generating (transformers.js does not stop by
    itself, and a learned-position model fails past its table); None for rotary positions (they go on past the
    trained length, as MiniTF's generate() does) and encoders (their tokenizer truncates)."""
    learned = family_of_model_type(config.get("model_type")) is FAMILIES["gpt"] and (
        config.get("position_embedding_type", "learned") == "learned"
    )
    return config["max_position_embeddings"] if learned else None


def available_dtypes(model_folder: Path) -> list[str]:
    """The transformers.js dtypes whose ONNX file the export wrote, float32 first."""
    return [
        dtype for dtype, suffix in DTYPE_SUFFIXES.items() if (model_folder / "onnx" / f"model{suffix}.onnx").is_file()
    ]


def space_card(source, title: str, about: str, dtypes: list[str], license: str | None = None) -> str:
    """The site's README.md: a Hugging Face static Space card (front matter), what the page is and how to run it.

    The front matter is serialised from data, so a title with newlines, quotes or markup stays the title (it cannot
    add a key); the heading holds it on one line."""
    from huggingface_hub import SpaceCard, SpaceCardData

    from hf_minitf.cards import export_card_data

    data = SpaceCardData(
        title=title,
        sdk="static",
        app_file="index.html",
        emoji="🧩",
        colorFrom="gray",
        colorTo="blue",
        short_description=f"A MiniTF {source.family} running in the browser"[:60],
        tags=["minitf", "transformers.js", "onnx", TASKS[source.family]],
        models=[source.repo_id] if source.repo_id else None,
        license=export_card_data(source.folder, license)["license"],
    )
    files = ", ".join(f"`{dtype}` (`onnx/model{DTYPE_SUFFIXES[dtype]}.onnx`)" for dtype in dtypes)
    body = SPACE_CARD_BODY.format(
        title=" ".join(title.split()),
        about=about,
        source=source.name,
        version=TRANSFORMERS_JS_VERSION,
        url=TRANSFORMERS_JS_URL,
        files=files,
        model=MODEL_FOLDER,
    )
    return str(SpaceCard(f"---\n{data.to_yaml()}\n---\n\n{body}"))


SPACE_CARD_BODY = """\
# {title}

{about}

A static page: [transformers.js](https://huggingface.co/docs/transformers.js) {version}, loaded from
`{url}`, runs the model in `{model}/` (the ONNX export of
`{source}`) in the browser, with ONNX Runtime Web (WebAssembly). Nothing is sent to a server. Weights: {files};
the page loads the one chosen in its Weights box.

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

__all__ = ["DTYPE_SUFFIXES", "MODEL_FOLDER", "SITE_FILE", "export_web"]
