"""`minitf export ollama`: a GPT as a folder for `ollama create` (`hf_minitf.export.ollama`); `minitf verify` runs
its GGUF file as `export gguf`'s."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path
from typing import Any

from hf_minitf.catalog.exports import OLLAMA_SAMPLING
from hf_minitf.export.format import ExportFormat
from hf_minitf.export.formats.gguf import add_gguf_arguments, gguf_arguments

SAMPLING = ", ".join(f"{name} {value}" for name, value in OLLAMA_SAMPLING.items())
DESCRIPTION = f"""\
Write a GPT as a folder for Ollama: model.gguf (what `export gguf` writes, default --dtype q8_0), a Modelfile
(FROM ./model.gguf; TEMPLATE, the tokenizer's chat template in Ollama's Go template syntax; PARAMETER stop for
the token that ends an answer; PARAMETER {SAMPLING}: greedy answers, as every
other runtime is verified; PARAMETER num_ctx, the context length) and README.md (the card, with the agreement
`export gguf` measures). Then: `ollama create NAME -f OUT/Modelfile`.

The chat templates translated are those that wrap each message by its role (text before and after the
content) and end with a generation prompt: the package's chatml and simple, FrawdLLM's. Roles the template
refuses (FrawdLLM's system messages) are dropped by Ollama. A tokenizer without a chat template gets no
TEMPLATE (Ollama passes the prompt as it is: text continuation); any other chat template is refused, since a
wrong TEMPLATE would silently change what the model reads, and so is one that changes each message's content
(`| trim`, `| upper`, `| replace`, `.strip()`), which Ollama's {{{{ .Content }}}} passes unchanged. The
template's `{{`, `"` and characters outside printable ASCII are written as Go string actions ({{{{ "{{" }}}}), so
Ollama reads TEMPLATE exactly."""


def report(args: argparse.Namespace, written: Any) -> str:
    return "\n".join(
        [
            f"Exported {args.source} to {args.out} (GGUF {args.dtype} with an Ollama Modelfile)",
            *written.gguf.report_lines(),
            *written.notes,
            f"Create the Ollama model: ollama create {written.name} -f {Path(args.out) / written.modelfile}",
        ]
    )


FORMAT = ExportFormat(
    "ollama",
    ("gpt",),
    "GPT -> a folder for `ollama create`: the GGUF file, a Modelfile with the chat template as TEMPLATE, a card",
    DESCRIPTION,
    writer="hf_minitf.export.ollama:export_ollama",
    report=report,
    layout="native_folder",
    add_arguments=partial(add_gguf_arguments, default_dtype="q8_0"),
    arguments=gguf_arguments,
    card_template="ollama_export.md",
)
