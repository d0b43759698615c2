"""Character and byte-level BPE tokenizers of the GPT family."""

import pytest
from isolation import run_without_hf_minitf
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from hf_minitf.tokenization.gpt import char_tokenizer, load_bpe_tokenizer, train_bpe_tokenizer

TRICKY_TEXT = "  Hello,\n\twörld!  ça va? 😀 日本\n\n  end  "


def test_char_tokenizer_from_text_round_trips_exactly():
    tokenizer = char_tokenizer(TRICKY_TEXT)
    ids = tokenizer(TRICKY_TEXT).input_ids
    assert len(ids) == len(TRICKY_TEXT), "one id per character"
    assert tokenizer.decode(ids) == TRICKY_TEXT


def test_char_tokenizer_special_tokens_come_first():
    tokenizer = char_tokenizer("ba")
    assert [tokenizer.pad_token_id, tokenizer.unk_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id] == [
        0,
        1,
        2,
        3,
    ]
    assert tokenizer("ab").input_ids == [4, 5], "characters sorted after the specials"
    assert tokenizer("az").input_ids == [4, tokenizer.unk_token_id]
    assert tokenizer.decode([2, 4, 5, 3], skip_special_tokens=True) == "ab"


def test_char_tokenizer_from_list_keeps_order_and_ids():
    chars = ["\n", " ", "z", "a", "é"]
    tokenizer = char_tokenizer(chars, special_tokens=None)
    assert tokenizer("\n za é").input_ids == [0, 1, 2, 3, 1, 4]
    assert len(tokenizer) == 5
    assert tokenizer.decode([3, 2, 0]) == "az\n"


def test_char_tokenizer_batches_with_padding():
    tokenizer = char_tokenizer("abc")
    batch = tokenizer(["abc", "a"], padding=True)
    assert batch.input_ids[1] == [4, 0, 0] and batch.attention_mask[1] == [1, 0, 0]


@pytest.mark.parametrize(
    ("chars", "message"), [([], "at least one character"), (["ab"], "one character"), (["a", "a"], "duplicates")]
)
def test_char_tokenizer_rejects_bad_vocabularies(chars, message):
    with pytest.raises(ValueError, match=message):
        char_tokenizer(chars)


CORPUS = ["the quick brown fox jumps over the lazy dog"] * 20 + ["Ünïcödé text with emoji 🚀 and\nnewlines"] * 5


def test_bpe_tokenizer_trains_round_trips_and_has_frawdllm_specials():
    tokenizer = train_bpe_tokenizer(CORPUS, vocab_size=300)
    assert isinstance(tokenizer, PreTrainedTokenizerFast)
    assert [tokenizer.convert_ids_to_tokens(i) for i in range(4)] == ["<|pad|>", "<|unk|>", "<|bos|>", "<|eos|>"]
    assert tokenizer.pad_token_id == 0 and tokenizer.eos_token_id == 3
    text = "the lazy fox 🚀 never seen: Ω≈ç\n  spaces"
    ids = tokenizer(text).input_ids
    assert tokenizer.unk_token_id not in ids, "byte level: nothing is unknown"
    assert tokenizer.decode(ids) == text
    assert len(tokenizer("the quick brown fox").input_ids) < len("the quick brown fox"), "merges were learned"


def test_bpe_tokenizer_vocab_too_small_is_refused():
    with pytest.raises(ValueError, match="too small for byte-level BPE"):
        train_bpe_tokenizer(CORPUS, vocab_size=100)


def test_load_bpe_tokenizer_wraps_a_tokenizers_file(tmp_path):
    raw = Tokenizer(models.BPE(unk_token="<|unk|>"))
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.train_from_iterator(
        CORPUS,
        trainers.BpeTrainer(
            vocab_size=280,
            special_tokens=["<|pad|>", "<|unk|>", "<|bos|>", "<|eos|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    path = tmp_path / "tokenizer.json"
    raw.save(str(path))
    tokenizer = load_bpe_tokenizer(path)
    assert tokenizer("the dog").input_ids == raw.encode("the dog").ids
    assert tokenizer.bos_token_id == 2
    with pytest.raises(ValueError, match="does not exist"):
        load_bpe_tokenizer(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a `tokenizers` JSON file"):
        load_bpe_tokenizer(tmp_path / "bad.json")


def test_both_tokenizers_load_with_auto_tokenizer_without_hf_minitf(tmp_path):
    char_dir, bpe_dir = tmp_path / "char", tmp_path / "bpe"
    char_tokenizer(TRICKY_TEXT).save_pretrained(char_dir)
    train_bpe_tokenizer(CORPUS, vocab_size=300).save_pretrained(bpe_dir)
    assert (
        AutoTokenizer.from_pretrained(char_dir).decode(AutoTokenizer.from_pretrained(char_dir)(TRICKY_TEXT).input_ids)
        == TRICKY_TEXT
    )
    result = run_without_hf_minitf(
        f"""
        import json
        from transformers import AutoTokenizer
        char = AutoTokenizer.from_pretrained({str(char_dir)!r})
        bpe = AutoTokenizer.from_pretrained({str(bpe_dir)!r})
        text = {TRICKY_TEXT!r}
        print(json.dumps({{"char": char.decode(char(text).input_ids), "bpe": bpe.decode(bpe(text).input_ids),
                          "char_ids": char(text).input_ids, "pad": [char.pad_token_id, bpe.pad_token_id]}}))
        """,
        cwd=str(tmp_path),
    )
    assert result["char"] == TRICKY_TEXT and result["bpe"] == TRICKY_TEXT
    assert result["char_ids"] == char_tokenizer(TRICKY_TEXT)(TRICKY_TEXT).input_ids
    assert result["pad"] == [0, 0]
