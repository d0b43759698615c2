"""Bad input, one row each: tokenizers: malformed files name the file; text that cannot be tokenized says why."""

import json
from pathlib import Path

from bad_inputs import (
    MINIEMBED_VOCAB,
    bad,
    bad_input_tests,
    broken_pair_folder,
    pair_tokenizer,
    word_level,
    write,
)
from tokenizers import Tokenizer, models
from transformers import AutoTokenizer

from hf_minitf import (
    MiniTFSeq2SeqTokenizer,
    char_tokenizer,
    load_bpe_tokenizer,
    miniembed_tokenizer,
    train_bpe_tokenizer,
)
from hf_minitf.tokenization.gpt import wrap_tokenizer

# Each loader of one tokenizer file, given a file that is not JSON (these texts) or none, names the file and says which.
UNREADABLE_FILES = [  # (id, loader, what the file holds (None: no file), the message)
    (
        "miniembed-vocab-not-json",
        miniembed_tokenizer,
        "{'word_to_id': {}",
        r"vocab.json is not JSON \(.*\); pass the tokenizer.json MiniEmbed saved",
    ),
    ("miniembed-vocab-missing", miniembed_tokenizer, None, r"MiniEmbed tokenizer file .*vocab.json does not exist"),
    ("bpe-file-not-json", load_bpe_tokenizer, "not json", r"vocab.json is not a `tokenizers` JSON file"),
    ("bpe-file-missing", load_bpe_tokenizer, None, r"Tokenizer file .*vocab.json does not exist"),
]


def loading(loader, text: str | None):
    """A row's action: `loader` on `tmp/vocab.json`, holding `text` (no file when None)."""

    def action(tmp: Path) -> None:
        loader(write(tmp / "vocab.json", text) if text is not None else tmp / "vocab.json")

    return action


BAD_INPUTS = [
    # Tokenizers: malformed files name the file; text that cannot be tokenized says why.
    *(bad(case_id, loading(loader, text), ValueError, message) for case_id, loader, text, message in UNREADABLE_FILES),
    bad(
        "miniembed-vocab-a-list",
        lambda tmp: miniembed_tokenizer(write(tmp / "vocab.json", "[1, 2]")),
        ValueError,
        r"vocab.json must be a JSON object with a 'word_to_id' mapping .*got a JSON list",
    ),
    bad(
        "miniembed-vocab-string-id",
        lambda tmp: miniembed_tokenizer(write(tmp / "v.json", json.dumps({"word_to_id": {"[PAD]": 0, "cat": "x"}}))),
        ValueError,
        r"v.json: word_to_id must map each word to an integer id >= 0; got \[\('cat', 'x'\)\]",
    ),
    bad(
        "miniembed-vocab-duplicate-id",
        lambda tmp: miniembed_tokenizer({"word_to_id": {"[PAD]": 0, "a": 1, "b": 1}}),
        ValueError,
        r"maps two words to the same id",
    ),
    bad(
        "miniembed-vocab-special-ids",
        lambda tmp: miniembed_tokenizer(
            write(tmp / "v.json", json.dumps({"word_to_id": {"[UNK]": 0, "[PAD]": 1, "[CLS]": 2, "[SEP]": 3}}))
        ),
        ValueError,
        r"v.json must map \[PAD\] to 0",
    ),
    bad(
        "miniembed-max-length",
        lambda tmp: miniembed_tokenizer(MINIEMBED_VOCAB, max_length=1),
        ValueError,
        r"max_length must leave room for \[CLS\] and \[SEP\]",
    ),
    bad(
        "seq2seq-source-not-json",
        lambda tmp: MiniTFSeq2SeqTokenizer(write(tmp / "tokenizer_en.json", "{broken"), tmp / "tokenizer_it.json"),
        ValueError,
        r"source tokenizer file .*tokenizer_en.json is not a valid `tokenizers` JSON file",
    ),
    bad(
        "seq2seq-target-missing",
        lambda tmp: MiniTFSeq2SeqTokenizer(
            word_level(tmp, "en.json", ["[UNK]", "[PAD]", "[SOS]", "[EOS]"]), tmp / "it.json"
        ),
        ValueError,
        r"target tokenizer is missing.*it.json",
    ),
    bad(
        "seq2seq-special-ids-differ",
        lambda tmp: MiniTFSeq2SeqTokenizer(
            word_level(tmp, "en.json", ["[UNK]", "[PAD]", "[SOS]", "[EOS]"]),
            word_level(tmp, "it.json", ["[PAD]", "[UNK]", "[SOS]", "[EOS]"]),
        ),
        ValueError,
        r"ids \[0, 1, 2, 3\] in the source vocabulary but \[1, 0, 2, 3\] in the target",
    ),
    bad(
        "seq2seq-folder-vocab-broken",
        lambda tmp: AutoTokenizer.from_pretrained(broken_pair_folder(tmp)),
        ValueError,
        r"target tokenizer file .*target_tokenizer.json is not a valid",
    ),
    bad(
        "seq2seq-lone-surrogate",
        lambda tmp: pair_tokenizer()("a \ud800 cat"),
        ValueError,
        r"lone surrogate '\\ud800' at character 2",
    ),
    bad(
        "seq2seq-lone-surrogate-target",
        lambda tmp: pair_tokenizer()(text_target=["un chat", "\udcff"]),
        ValueError,
        r"lone surrogate '\\udcff' at character 0",
    ),
    bad(
        "bpe-vocab-too-small",
        lambda tmp: train_bpe_tokenizer(["abc"], vocab_size=100),
        ValueError,
        r"vocab_size=100 is too small for byte-level BPE: it needs at least 260",
    ),
    bad("char-empty-text", lambda tmp: char_tokenizer(""), ValueError, r"needs at least one character"),
    bad(
        "char-lone-surrogate",
        lambda tmp: char_tokenizer("ab\ud800"),
        ValueError,
        r"The characters \['\\ud800'\] are lone surrogates",
    ),
    bad(
        "bpe-training-lone-surrogate",
        lambda tmp: train_bpe_tokenizer(["ab\udc80"], vocab_size=300),
        ValueError,
        r"can't encode character '\\udc80' in position 2: surrogates not allowed",
    ),
    bad("char-duplicate-chars", lambda tmp: char_tokenizer(["a", "b", "a"]), ValueError, r"has duplicates"),
    bad(
        "wrap-missing-special",
        lambda tmp: wrap_tokenizer(Tokenizer(models.WordLevel({"a": 0}, unk_token="a")), {"pad_token": "<pad>"}),
        ValueError,
        r"Special tokens \['<pad>'\] are not in the tokenizer's vocabulary",
    ),
]
test_bad_input_is_refused_naming_the_problem, test_ids_are_unique = bad_input_tests(BAD_INPUTS)
