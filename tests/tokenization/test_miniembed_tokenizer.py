"""MiniEmbed's word-level tokenizer as a fast tokenizer: fixture rows, Python-regex agreement, save/load, trainers."""

import json
import re
import unicodedata
from pathlib import Path

import pytest
from isolation import run_without_hf_minitf
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from hf_minitf import miniembed_tokenizer, train_encoder_bpe_tokenizer, train_wordlevel_tokenizer

FIXTURE = Path(__file__).parents[1] / "data" / "miniembed_tokenizer"
# The original's splitting rule, as MiniEmbed's SimpleTokenizer states it: the reference the fast tokenizer must match.
PYTHON_WORDS = re.compile(r"\b\w+\b|[^\w\s]")


def python_words(text: str) -> list[str]:
    return PYTHON_WORDS.findall(text.lower().strip())


def fast_words(tokenizer: PreTrainedTokenizerFast, text: str) -> list[str]:
    backend = tokenizer.backend_tokenizer
    return [word for word, _ in backend.pre_tokenizer.pre_tokenize_str(backend.normalizer.normalize_str(text))]


@pytest.fixture(scope="module")
def tokenizer():
    return miniembed_tokenizer(FIXTURE / "tokenizer.json")


@pytest.fixture(scope="module")
def rows():
    return json.loads((FIXTURE / "expected_encodings.json").read_text(encoding="utf-8"))


def encode_like_original(tokenizer, text, max_length):
    return tokenizer(text, padding="max_length", truncation=True, max_length=max_length)


def test_reproduces_every_fixture_row(tokenizer, rows):
    assert {row["max_length"] for row in rows} == {16, 128}
    assert any(sum(row["attention_mask"]) == row["max_length"] for row in rows), "fixture should truncate"
    for row in rows:
        encoded = encode_like_original(tokenizer, row["text"], row["max_length"])
        assert encoded["input_ids"] == row["input_ids"], row["text"]
        assert encoded["attention_mask"] == row["attention_mask"], row["text"]
    batch = tokenizer(
        [row["text"] for row in rows if row["max_length"] == 16], padding="max_length", truncation=True, max_length=16
    )
    assert batch["input_ids"] == [row["input_ids"] for row in rows if row["max_length"] == 16]


def test_saved_tokenizer_loads_without_hf_minitf(tmp_path, tokenizer, rows):
    tokenizer.save_pretrained(tmp_path)
    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    assert reloaded("Men's Nike")["input_ids"] == tokenizer("Men's Nike")["input_ids"]
    texts = [row["text"] for row in rows]
    lengths = [row["max_length"] for row in rows]
    result = run_without_hf_minitf(
        f"""
        import json
        from transformers import AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained({str(tmp_path)!r})
        rows = [tokenizer(text, padding="max_length", truncation=True, max_length=length)
                for text, length in zip({texts!r}, {lengths!r})]
        print(json.dumps({{"class": type(tokenizer).__name__, "ids": [r["input_ids"] for r in rows],
                          "mask": [r["attention_mask"] for r in rows], "max": tokenizer.model_max_length}}))
        """,
        cwd=str(tmp_path),
    )
    assert result["ids"] == [row["input_ids"] for row in rows]
    assert result["mask"] == [row["attention_mask"] for row in rows]
    assert result["max"] == 128


def test_word_split_agrees_with_python_for_every_character(tokenizer):
    characters = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000 and unicodedata.category(chr(c)) != "Cn"]
    text = " ".join(f"a{ch}b" for ch in characters)
    assert fast_words(tokenizer, text) == python_words(text)
    # Oniguruma's own \w and \s would disagree here: combining marks, connector punctuation, U+001C..U+001F.
    for case in ("e\u0301t\u00e9", "a\u203fb", "x\x1cy", "ＡＢ＿ｃ", "²³ ½ Ⅻ ٣"):
        assert fast_words(tokenizer, case) == python_words(case), case


@pytest.mark.parametrize(
    "text",
    [
        "ΟΔΟΣ",
        "ΟΔΟΣ.",
        "ΣΑ",
        "Σ",
        "ΑΣΑ",
        "Α'Σ",
        "ΑΣ'Α",
        "ΑΣʰ",
        "ʰΣ",
        "ΟΔΟΣ ΣΟΦΟΣ",
        "İstanbul",
        "ǅemal",
        "STRASSE ß",
        "ﬁne",
    ],
)
def test_lowercasing_agrees_with_python(tokenizer, text):
    assert fast_words(tokenizer, text) == python_words(text)


def test_special_tokens_in_text_and_empty_input(tokenizer):
    vocab = tokenizer.get_vocab()
    text = "[CLS] hello [SEP]"
    expected = [2] + [vocab.get(word, 1) for word in python_words(text)] + [3]
    assert tokenizer(text)["input_ids"] == expected
    assert 2 not in expected[1:-1]
    assert tokenizer("")["input_ids"] == [2, 3]
    assert tokenizer([""])["input_ids"] == [[2, 3]]
    assert tokenizer("", padding="max_length", max_length=4)["attention_mask"] == [1, 1, 0, 0]
    assert tokenizer.decode(tokenizer("Hello, world!")["input_ids"], skip_special_tokens=True) == "hello , world !"
    assert tokenizer.pad_token_id == 0 and tokenizer.unk_token_id == 1
    assert tokenizer.cls_token_id == 2 and tokenizer.sep_token_id == 3
    assert tokenizer.model_input_names == ["input_ids", "attention_mask"]


def test_bad_vocabulary_is_refused():
    with pytest.raises(ValueError, match="word_to_id"):
        miniembed_tokenizer({"vocab_size": 4})
    with pytest.raises(ValueError, match=r"\[CLS\] to 2"):
        miniembed_tokenizer({"word_to_id": {"[PAD]": 0, "[UNK]": 1, "[SEP]": 2, "[CLS]": 3}})
    with pytest.raises(ValueError, match="same id"):
        miniembed_tokenizer({"word_to_id": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "x": 3}})
    with pytest.raises(ValueError, match="at least 2"):
        miniembed_tokenizer({"word_to_id": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}}, max_length=1)


CORPUS = ["The cat sat on the mat.", "The dog sat on the log!", "A cat and a dog.", "Cats, dogs and birds?"] * 3


def test_train_wordlevel_tokenizer(tmp_path):
    tokenizer = train_wordlevel_tokenizer(CORPUS, vocab_size=12, min_frequency=3, max_length=8)
    vocab = tokenizer.get_vocab()
    assert [vocab[t] for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]")] == [0, 1, 2, 3]
    assert len(vocab) == 12 and "the" in vocab and "The" not in vocab
    counts = {}
    for text in CORPUS:
        for word in python_words(text):
            counts[word] = counts.get(word, 0) + 1
    most_frequent = sorted(counts, key=counts.get, reverse=True)[:3]
    assert all(word in vocab for word in most_frequent)
    ids = tokenizer("The zebra sat", padding="max_length", max_length=8)["input_ids"]
    assert ids == [2, vocab["the"], 1, vocab["sat"], 3, 0, 0, 0]
    tokenizer.save_pretrained(tmp_path)
    assert AutoTokenizer.from_pretrained(tmp_path)("The zebra sat")["input_ids"] == ids[:5]


def test_train_encoder_bpe_tokenizer():
    tokenizer = train_encoder_bpe_tokenizer(CORPUS, vocab_size=60, min_frequency=2)
    vocab = tokenizer.get_vocab()
    assert [vocab[t] for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]")] == [0, 1, 2, 3]
    encoded = tokenizer("Cat dogs matsat")["input_ids"]
    assert encoded[0] == 2 and encoded[-1] == 3 and 1 not in encoded
    assert len(encoded) > 2 + 3  # an unseen word is split into pieces, not [UNK]
    assert tokenizer.decode(encoded, skip_special_tokens=True) == "cat dogs matsat"
