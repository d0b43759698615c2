"""The bounds and choices of the package's options, declared once for the parser (`minitf`, which reads them
without importing torch) and for the code that checks the same values from Python.

Each bound is where a larger value stops being a request and becomes a way to hang or crash the process.
"""

from __future__ import annotations

NORM_TYPES = ("layer_norm", "scalar_std_times_eps", "scalar_std_plus_eps", "per_feature_std_plus_eps")
"""The norms a translator's `norm_type` names (see MiniTFSeq2SeqConfig: the standard LayerNorm and hkproj's three)."""

MAX_STEPS = 10**9
"""Most steps a run's step counts, warmup and batch size may be: more runs until killed or overflows a C integer
inside the trainer."""
MAX_EPOCHS = 10**6
"""Most epochs a run may ask for: 1e300 ran until killed, inf failed inside the trainer."""
SEED_LIMIT = 2**32
"""Seeds lie in [0, SEED_LIMIT): transformers' set_seed also seeds numpy, which takes no other."""
MAX_STEPS_SCALE = 1000
"""The largest `QuickstartSteps.scaled` factor: a thousand quickstarts take about ten hours; 1e300 ran until killed
and inf failed inside round()."""
TOKENIZER_MAX_ENTRIES = 4_000_000
"""Most entries an exported tokenizer file's vocab or merges list may claim: real vocabularies stay below 300k, and a
file claiming billions would hold the export (and the memory of every reader) before anything fails."""
MAX_VOCAB_SIZE = 10**6
"""The largest vocabulary a tokenizer is trained to: tokenizers' trainers reserve memory for the size asked (10**9
aborted the process, 10**30 overflowed), and published vocabularies stay well below this."""
GREEDY_BELOW_TEMPERATURE = 1e-4
"""Below this temperature sampling is greedy decoding to float precision, and dividing the logits by it overflows
float32 (1e-45 turns them into inf and generate() fails): such requests decode greedily."""
MAX_NEW_TOKENS = 10**6
"""Most tokens one generation may add: 10**12 holds the machine for hours."""
MAX_BEAMS = 1000
"""Widest beam search: 10**9 beams hold the machine for hours."""
MAX_PORT = 65535
MAX_EVAL_DATA_BYTES = 256 * 2**20
"""The largest file `minitf eval --data` reads (256 MiB): evaluation holds the data in memory, and a file this large
already takes hours on a CPU; give a sample of a larger one."""
MAX_DATASET_ID_CHARS = 200
"""Longest dataset id `minitf eval` records (its `.eval_results/` file is named after it; the Hub's ids are shorter)."""


def dataset_id_problem(dataset_id: str) -> str | None:
    """Why `dataset_id` cannot name an evaluation's results (None when it can): a leading dot would make its
    `.eval_results/` file hidden, which uploads leave out, and a name past MAX_DATASET_ID_CHARS no file system takes."""
    if not dataset_id.strip():
        return "is empty: give the Hub dataset the data is, e.g. user/my-data"
    if dataset_id.startswith("."):
        return f"{dataset_id[:40]!r} starts with a dot (its results file would be hidden and never uploaded)"
    if len(dataset_id) > MAX_DATASET_ID_CHARS:
        return (
            f"is {len(dataset_id):,} characters; at most {MAX_DATASET_ID_CHARS} (a Hub dataset id, e.g. user/my-data)"
        )
    return None


MAX_REQUEST_BYTES = 8 * 2**20
"""`minitf serve --max-request-bytes`'s default: the largest request body (8 MiB) the server reads; a larger one is
answered 413 before it is read. OpenAI's largest embeddings request for the models served here (2048 texts of 512
tokens, about 4 MB of JSON) fits; one 50 MB prompt made the server tokenize all of it (+6 GB) before the context
check."""
CHARS_PER_TOKEN_FLOOR = 32
"""A text longer than a model's context times max(its vocabulary's longest token, this many characters) is refused
before it is tokenized: no text that long fits. The floor covers tokenizers whose unknown-word token stands for any
number of characters (word-level, WordPiece)."""
MAX_UNKNOWN_TOKEN_SHARE = 0.5
"""`minitf eval` records a GPT's figures only when at most this share of the data's tokens is the tokenizer's unknown
token (`--force` records them anyway): past it the figures measure how the model predicts `<unk>`, not the text (a
file of NUL characters on a char GPT: every token `<unk>`, "perplexity 617"). A smaller share is reported and
recorded."""
CHAT_TEMPLATE_SECONDS = 2.0
"""Longest a chat template may take to render one request's messages (a normal template takes milliseconds): a
template with nested `range(99999)` loops held the server for over a minute."""
CHAT_TEMPLATE_MAX_CHARS = 16 * 2**20
"""Most characters a chat template may write for one request (twice the default body limit, in characters)."""
MAX_BATCH = 32
"""`minitf serve --continuous-batching`'s default batch: most concurrent greedy requests to a GPT generated together
(a batch steps as slowly as its longest row, and holds every row's cache)."""
SHUTDOWN_GRACE_SECONDS = 30
"""`minitf serve --shutdown-grace`'s default: after SIGTERM (or Ctrl-C) the server stops accepting connections and
lets the requests in flight finish for this long, then cancels them and exits."""

DTYPE_NAMES = ("float32", "float16", "bfloat16")
"""The dtypes weights are converted to, loaded in or served in (besides `auto`, the saved weights')."""
GGUF_DTYPES = ("f32", "f16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k_m", "q5_k_m", "q6_k")
"""The weight types `minitf export gguf` writes (a quantization names llama.cpp's file type: its mix of tensor types)."""
CTRANSLATE2_QUANTIZATIONS = ("float32", "int8", "int8_float32", "bfloat16")
"""The weight types `minitf export ctranslate2` stores."""
HKPROJ_NORM_TYPES = ("auto", *(norm for norm in NORM_TYPES if norm != "layer_norm"))
"""`minitf convert hkproj --norm-type`: the LayerNormalization formulas of hkproj's versions, or auto to infer the
formula from the gains where they can tell."""
ONNX_QUANTIZATIONS = ("q8", "fp16", "q4")
"""The extra ONNX files `minitf export onnx --quantize` writes, by transformers.js's name of their dtype."""

__all__ = [
    "CHARS_PER_TOKEN_FLOOR",
    "CHAT_TEMPLATE_MAX_CHARS",
    "CHAT_TEMPLATE_SECONDS",
    "CTRANSLATE2_QUANTIZATIONS",
    "DTYPE_NAMES",
    "GGUF_DTYPES",
    "GREEDY_BELOW_TEMPERATURE",
    "HKPROJ_NORM_TYPES",
    "MAX_BEAMS",
    "MAX_DATASET_ID_CHARS",
    "MAX_EPOCHS",
    "MAX_EVAL_DATA_BYTES",
    "MAX_NEW_TOKENS",
    "MAX_PORT",
    "MAX_BATCH",
    "MAX_REQUEST_BYTES",
    "MAX_UNKNOWN_TOKEN_SHARE",
    "MAX_STEPS",
    "MAX_STEPS_SCALE",
    "MAX_VOCAB_SIZE",
    "NORM_TYPES",
    "ONNX_QUANTIZATIONS",
    "SEED_LIMIT",
    "SHUTDOWN_GRACE_SECONDS",
    "TOKENIZER_MAX_ENTRIES",
    "dataset_id_problem",
]
