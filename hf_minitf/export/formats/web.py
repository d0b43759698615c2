"""`minitf export web`: a static web page running the model with transformers.js (`hf_minitf.export.web`); its
model/ folder is an ONNX export, which `minitf verify` runs as `export onnx`'s."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hf_minitf.catalog.exports import TRANSFORMERS_JS_VERSION
from hf_minitf.catalog.limits import ONNX_QUANTIZATIONS
from hf_minitf.export.format import ExportFormat, export_options

DESCRIPTION = f"""\
Write a model as a static web page that runs it in the browser with transformers.js {TRANSFORMERS_JS_VERSION},
ready to open (serve the folder: python -m http.server) or to publish as a Hugging Face static Space (README.md
says sdk: static; `minitf push SRC REPO --space` exports and uploads):

- GPT: a prompt box with streamed greedy generation, stopped at the model's position table
- encoder: a sentence-similarity box (cosine of the mean-pooled, normalized embeddings)
- seq2seq: a text box with the streamed greedy translation (the source and target tokenizers run by
  transformers.js, the encoder and decoder graphs by its ONNX Runtime Web, the loop in translator.js)

OUT holds index.html, app.js, worker.js, style.css, site.json, README.md and model/, the folder `minitf
export onnx` writes (float32 and the --quantize variant; the page offers each). --example fills the boxes: a
GPT's prompt or a text to translate; an encoder's source sentence, then the sentences to compare. Refused: what
`export onnx` refuses.

The page loads transformers.js and the wasm of ONNX Runtime Web from jsDelivr. --bundle copies them into
OUT/vendor and adds a Content-Security-Policy that forbids other origins: the page then runs offline, air-gapped
or behind a strict policy. The npm packages come from --bundle-from DIR (a node_modules folder, after `npm install
@huggingface/transformers@{TRANSFORMERS_JS_VERSION}`), else from the npm registry (or the mirror
npm_config_registry names), downloaded once with each tarball's pinned integrity checked and kept in
~/.cache/minitf/npm."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quantize",
        default="q8",
        choices=ONNX_QUANTIZATIONS,
        help="the ONNX variant written beside float32, which the page offers too (default: q8)",
    )
    parser.add_argument(
        "--example",
        action="append",
        default=[],
        metavar="TEXT",
        help="text put in the page's boxes (repeat it): a GPT's prompt or a text to translate; an encoder's source "
        "sentence, then the sentences to compare with it",
    )
    parser.add_argument("--title", default=None, help="the page's title (default: the model folder's name)")
    parser.add_argument(
        "--bundle",
        action="store_true",
        help="copy transformers.js and onnxruntime-web's wasm into OUT/vendor, with a Content-Security-Policy "
        "forbidding other origins: the page runs offline (default: loaded from jsDelivr); the npm packages are "
        "downloaded once, integrity-checked, unless --bundle-from names them",
    )
    parser.add_argument(
        "--bundle-from",
        type=Path,
        default=None,
        metavar="DIR",
        help="a node_modules folder (or the folder holding one) with the pinned @huggingface/transformers and its "
        "onnxruntime-web, to bundle from without network access; implies --bundle",
    )


def arguments(args: argparse.Namespace) -> dict[str, Any]:
    return {"examples": args.example, **export_options("title", "quantize", "bundle", "bundle_from")(args)}


def report(args: argparse.Namespace, out: Path) -> str:
    return f"Exported {args.source} to {out} (a static web page with transformers.js; serve it: python -m http.server --directory {out})"


FORMAT = ExportFormat(
    "web",
    ("gpt", "encoder", "seq2seq"),
    "GPT, encoder or translator -> a static web page running it with transformers.js (a Hugging Face static Space)",
    DESCRIPTION,
    writer="hf_minitf.export.web:export_web",
    report=report,
    layout="web_page",
    add_arguments=add_arguments,
    arguments=arguments,
    exact_precisions=("fp32",),
)
