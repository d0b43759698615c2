"""What `minitf verify` measures and where it writes it: how many prompts and tokens, what "exact" allows, where an
export names the MiniTF folder it came from, the card section of its "Runs in" table, and the runtimes it runs.
Light to import, so `minitf verify --help` needs no torch.
"""

from __future__ import annotations

import textwrap
from typing import NamedTuple

from hf_minitf.catalog.packaging import EXTRAS

VERIFY_PROMPTS, VERIFY_NEW_TOKENS = 8, 32
"""`minitf verify`'s defaults: prompts (a GPT's; texts for an encoder or a translator) and greedy tokens after each."""
EXPORT_VERIFY_PROMPTS, EXPORT_VERIFY_NEW_TOKENS = 4, 16
"""What every `minitf export` measures (`--no-verify` skips it): few, so that exporting stays quick."""
PROMPT_LENGTHS = (3, 4, 5, 6, 7)
"""The lengths of the prompts, in turn: token ids drawn (seeded) from the vocabulary, special tokens left out."""
PROMPT_SEED = 0

EXACT_EMBEDDING_DIFFERENCE = 1e-5
"""How far an exact export's embeddings may be from MiniTF's: the largest difference relative to the largest value
(float32 engines differ in their sums' order: about 1e-7)."""
EXACT_LOGIT_DIFFERENCE = 1e-5
"""The same for an exact export's logits, besides equal greedy tokens (a file whose every logit was scaled keeps the
argmax: only the logits show it)."""

SOURCE_CARD_FIELD = "minitf_source"
"""The metadata field of a native export's card that names the MiniTF folder (an absolute path) or repo id it was
exported from (an engine export names it as `source` in minitf_export.json)."""
GGUF_SOURCE_KEY = "minitf.source"
"""The same, as a key of a GGUF file's metadata."""
SOURCE_HASHES_FIELD = "minitf_source_sha256"
"""Where an export records the sha256 of its source's config.json and weights at export time (`SOURCE_HASHED`): a
native card's metadata field and minitf_export.json's key, each an object of them; `minitf verify` refuses a
recorded source whose files no longer hash the same."""
GGUF_SOURCE_HASH_KEYS = {"config": "minitf.source.config_sha256", "weights": "minitf.source.weights_sha256"}
"""The same, as keys of a GGUF file's metadata."""
SOURCE_HASHED = {"config": "config.json", "weights": "*.safetensors"}
"""What of the source is hashed (the weights: every safetensors file of the folder, in name order)."""

RUNS_IN_SECTION = "runs_in"
"""The marked section (`<!-- minitf:runs_in -->`) of a card that holds the table."""
RUNS_IN_TEMPLATE = "runs_in.md"
"""Its template, in model_cards/."""


class Runtime(NamedTuple):
    """A program that runs exports: the module it imports, the distributions whose versions the table names."""

    module: str
    distributions: tuple[str, ...]
    install: str
    """What installs it, said where it is missing."""


RUNTIMES: dict[str, Runtime] = {
    "transformers": Runtime("transformers", ("transformers", "torch"), "pip install transformers"),
    "sentence-transformers": Runtime(
        "sentence_transformers", ("sentence-transformers", "transformers", "torch"), "pip install sentence-transformers"
    ),
    "onnxruntime": Runtime("onnxruntime", ("onnxruntime",), EXTRAS["engines"].install),
    "ctranslate2": Runtime("ctranslate2", ("ctranslate2",), EXTRAS["engines"].install),
    "llama.cpp": Runtime("llama_cpp", ("llama-cpp-python",), EXTRAS["llama"].install),
}


def not_measured(runtime: str, why: str | None = None) -> str:
    """What a file's row says where `runtime` could not run it (`why`; default: its distribution is not installed):
    plainly not measured, and what installs it."""
    found = RUNTIMES[runtime]
    why = why or f"{found.distributions[0]} is not installed"
    return f"not measured in {runtime} ({why}: {found.install})"


NOTHING_MEASURED = "nothing measured"
"""What `minitf verify` says (exit status 1) where no file of the export ran: no figure stands behind it."""

GGUF_CLOSER_TYPES = {"f32": None, "f16": "f32", "q8_0": "f16 or f32"}
"""The GGUF types to use where a type's greedy text drifts from the float32 model's (`gguf_advice`); any other
(q6_k and below): q8_0 or f16."""
GGUF_CLOSER_DEFAULT = "q8_0 or f16"


def gguf_advice(dtype: str, prompts: int, equal_prompts: int, first_difference: int | None) -> str:
    """The sentence after a GGUF type's agreement figure that says what to do: `equal_prompts` of `prompts` gave
    the float32 model's greedy text; `first_difference`, the earliest new token (0: the first) where one differs."""
    if equal_prompts == prompts or first_difference is None:
        return "greedy text matches the float32 model on these prompts"
    closer = GGUF_CLOSER_TYPES.get(dtype, GGUF_CLOSER_DEFAULT)
    if closer is None:
        action, where = "no closer type exists: see the difference named", ""
    else:
        action, where = f"use {closer}", " for this model"
    if first_difference == 0:
        return f"greedy text differs from the first token: {action}{where}"
    return (
        f"greedy text follows the float32 model for {first_difference} token(s), then drifts on {prompts - equal_prompts}"
        f" of {prompts} prompts: {action}" + (" where the exact text matters" if closer else "")
    )


NO_VERIFY_HELP = (
    f"skip measuring the export against SRC (minitf verify with {EXPORT_VERIFY_PROMPTS} prompts x "
    f"{EXPORT_VERIFY_NEW_TOKENS} tokens) and writing its Runs in table into the export's card"
)
RECORD_IN_HELP = (
    "also write the rows into the card of SOURCE, the local MiniTF folder the export was made from (checked: its "
    "config.json and weights must be the model measured against); each file is named after the export's repo id "
    "(EXPORT given as one) or relative to the export, never by a local path. Without it only the export's own "
    "card gets them"
)
SPEED_MEASURE = (
    "one CPU core for every runtime, the file loaded and run once first (neither counted), then the same prompts "
    "and new tokens (or texts) timed: generated tokens (or sentences) per second"
)
"""How the Speed column is measured, the same for every runtime (`worker.measure`): said in the card and --help."""
VERIFY_HELP = "re-measure an export against the MiniTF folder it came from; write its Runs in table"
VERIFY_DESCRIPTION = f"""\
Run an export (a folder or GGUF file written by `minitf export`, or the Hub repo id of a published one) in
its runtime, and the MiniTF model it was exported from (named in the export: minitf_export.json's source, the
native card's minitf_source, the GGUF key minitf.source; or --source) in PyTorch, on the same inputs:

- GPT: greedy tokens after N prompts (equal, or where they first differ, with both tokens), the largest logit
  difference over the MiniTF sequences relative to the largest logit, tokens per second
- encoder: embeddings of N texts (largest difference relative to the largest value, least cosine), sentences/s
- seq2seq: N translations (equal or not), sentences per second

Each runtime (ONNX Runtime, CTranslate2, llama.cpp, transformers) runs in a process of its own. A local
export's own card (README.md) gets a "Runs in" table: runtime, file, precision, size, agreement, speed, date,
versions; the row of the same runtime and file is replaced. The source folder's card is written only with
--record-in SOURCE (files named after the export's repo id or relative to the export).
{textwrap.fill(f"Speed: {SPEED_MEASURE}.", 111)}
A GGUF file's agreement is measured in llama.cpp itself (llama-cpp-python), each quantization's followed by
what to do about it. The status is 1, with one line naming the first difference, when a file whose format
claims exactness (float32, f32, fp32) is not exact; 1, with a line saying "{NOTHING_MEASURED}", when no file
ran (its runtime not installed: each says "not measured in RUNTIME" and what installs it); 0 otherwise.
`minitf export` runs this ({EXPORT_VERIFY_PROMPTS} prompts x {EXPORT_VERIFY_NEW_TOKENS} tokens) unless --no-verify."""

__all__ = [
    "EXACT_EMBEDDING_DIFFERENCE",
    "EXPORT_VERIFY_NEW_TOKENS",
    "EXPORT_VERIFY_PROMPTS",
    "GGUF_SOURCE_HASH_KEYS",
    "GGUF_SOURCE_KEY",
    "GGUF_CLOSER_DEFAULT",
    "GGUF_CLOSER_TYPES",
    "NOTHING_MEASURED",
    "NO_VERIFY_HELP",
    "RECORD_IN_HELP",
    "SPEED_MEASURE",
    "PROMPT_LENGTHS",
    "PROMPT_SEED",
    "RUNS_IN_SECTION",
    "RUNS_IN_TEMPLATE",
    "RUNTIMES",
    "Runtime",
    "SOURCE_CARD_FIELD",
    "SOURCE_HASHED",
    "SOURCE_HASHES_FIELD",
    "VERIFY_DESCRIPTION",
    "VERIFY_HELP",
    "VERIFY_NEW_TOKENS",
    "VERIFY_PROMPTS",
    "gguf_advice",
    "not_measured",
]
