"""What `minitf verify` measures and where it writes it: how many prompts and tokens, what "exact" allows, where an
export names the MiniTF folder it came from, the card section of its "Runs in" table, and the runtimes it runs.
Light to import, so `minitf verify --help` needs no torch.
"""

from __future__ import annotations

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

NO_VERIFY_HELP = (
    f"skip measuring the export against SRC (minitf verify with {EXPORT_VERIFY_PROMPTS} prompts x "
    f"{EXPORT_VERIFY_NEW_TOKENS} tokens) and writing its Runs in table into the cards"
)
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
export's card (README.md) and the local source folder's card get a "Runs in" table: runtime, file, precision,
size, agreement, speed on this machine, date, versions; the row of the same runtime and file is replaced. The
status is 1, with one line naming the first difference, when a file whose format claims exactness (float32,
f32, fp32) is not exact; 0 otherwise. A runtime that is not installed is reported as not run (exit 0).
`minitf export` runs this ({EXPORT_VERIFY_PROMPTS} prompts x {EXPORT_VERIFY_NEW_TOKENS} tokens) unless --no-verify."""

__all__ = [
    "EXACT_EMBEDDING_DIFFERENCE",
    "EXPORT_VERIFY_NEW_TOKENS",
    "EXPORT_VERIFY_PROMPTS",
    "GGUF_SOURCE_HASH_KEYS",
    "GGUF_SOURCE_KEY",
    "NO_VERIFY_HELP",
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
]
