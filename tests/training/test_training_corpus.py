"""A GPT corpus read and tokenized in chunks (hf_minitf.training.data.safe_chunks, TextFile; encode_to_file's id
file and TokenBlocks) gives the ids of one tokenizer call, trains as the same text in memory does, and splits its
held-out blocks correctly; a run whose loss becomes NaN stops with a TrainingError and writes nothing."""

import json
import random

import numpy as np
import pytest

from hf_minitf.tokenization.gpt import char_tokenizer, train_bpe_tokenizer
from hf_minitf.training.common import held_out_indices
from hf_minitf.training.data import (
    TextFile,
    TokenBlocks,
    TrainingDataError,
    encode_to_file,
    open_texts,
    safe_chunks,
    text_chunks,
)
from hf_minitf.training.tasks import english_italian_pairs, paraphrase_pairs
from hf_minitf.training.trainers import (
    TrainingError,
    TrainSettings,
    train_encoder,
    train_gpt,
    train_seq2seq,
)

TINY = dict(
    hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, max_position_embeddings=32
)
STEPS = TrainSettings(max_steps=2, batch_size=4, progress=False)
PIECES = [
    "word",
    "héllo",
    "  ",
    "\n",
    "\n\n",
    " ",
    "\t",
    "don't",
    "42",
    "!!",
    "x",
    " \n ",
    "日本語",
    "a-b",
    "\r\n",
    "'s",
    "   x",
]


def varied_text(count: int = 3000, seed: int = 0) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(PIECES) for _ in range(count))


@pytest.mark.parametrize("kind", ["char", "bpe"])
def test_streamed_ids_equal_the_ids_of_one_call(kind, tmp_path):
    text = varied_text()
    tokenizer = char_tokenizer(text) if kind == "char" else train_bpe_tokenizer([text], vocab_size=400)
    whole = tokenizer(text, add_special_tokens=False).input_ids + [tokenizer.eos_token_id]
    chunks = list(text_chunks(text, 64))
    assert "".join(chunks) == text and len(chunks) > 20 and max(map(len, chunks)) <= 64
    ids = encode_to_file(tokenizer, [iter(chunks)], tmp_path / "ids", chunks_per_batch=3)
    assert ids.dtype == np.uint16 and ids.tolist() == whole


def test_a_text_file_streams_as_python_reads_it(tmp_path):
    text = varied_text(2000, seed=1)
    (tmp_path / "a.txt").write_bytes(text.encode("utf-8"))
    read = (tmp_path / "a.txt").read_text(encoding="utf-8")  # newlines translated, as before
    documents = [list(document) for document in TextFile(tmp_path / "a.txt").documents(chunk_chars=50)]
    assert len(documents) == 1 and "".join(documents[0]) == read and len(documents[0]) > 10
    rows = [{"text": "one"}, {"text": text[:300]}, {"text": ""}]
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(row) for row in rows) + "\n\n")
    assert ["".join(document) for document in TextFile(tmp_path / "a.jsonl").documents(50)] == [
        row["text"] for row in rows
    ]
    assert isinstance(open_texts(tmp_path / "a.jsonl"), TextFile)
    (tmp_path / "b.jsonl").write_text('{"text": "one"}\n{"body": "two"}\n')
    with pytest.raises(TrainingDataError, match="line 2 has no column 'text'; its columns are body"):
        [list(document) for document in TextFile(tmp_path / "b.jsonl").documents()]
    (tmp_path / "bytes.txt").write_bytes(b"fine " * 40 + b"\xff")
    with pytest.raises(TrainingDataError, match="not UTF-8"):
        [list(document) for document in TextFile(tmp_path / "bytes.txt").documents(16)]


def test_a_chunk_without_white_space_is_cut_at_its_limit():
    assert list(safe_chunks(["abcdefghij"], 4)) == ["abcd", "efgh", "ij"]
    assert list(safe_chunks(["ab cd", " ef gh"], 4)) == ["ab", " cd", " ef", " gh"]  # before a space if there is one


@pytest.mark.parametrize("kind", ["char", "bpe"])
def test_a_corpus_of_many_chunks_trains_as_the_text_in_memory(kind, tmp_path):
    text = "".join(random.Random(2).choice(["the cat ", "a dog ", "sat\n", "on the mat. "]) for _ in range(400))
    (tmp_path / "corpus.txt").write_text(text)
    options = dict(tokenizer=kind, vocab_size=300, block_size=16, config_overrides=TINY, settings=STEPS)
    from_file = train_gpt(TextFile(tmp_path / "corpus.txt"), tmp_path / "out", chunk_chars=32, **options)
    in_memory = train_gpt(text, None, **options)
    assert (tmp_path / "out" / "model.safetensors").is_file()
    assert from_file.tokenizer.get_vocab() == in_memory.tokenizer.get_vocab()
    assert from_file.eval_results["eval_loss"] == pytest.approx(in_memory.eval_results["eval_loss"], rel=1e-5)


def test_the_held_out_blocks_are_a_random_fraction_apart_from_the_training_blocks():
    ids = np.arange(16 * 500, dtype=np.uint16)
    held = held_out_indices(500, 0.1, seed=3)
    assert len(held) == 50 and held == sorted(set(held)) and held != list(range(50))
    train, evaluation = TokenBlocks(ids, 16, excluded=held), TokenBlocks(ids, 16, chosen=held)
    train_starts = [train[index]["input_ids"][0] // 16 for index in range(len(train))]
    eval_starts = [evaluation[index]["input_ids"][0] // 16 for index in range(len(evaluation))]
    assert eval_starts == held and sorted(train_starts + eval_starts) == list(range(500))
    assert train[0]["input_ids"] == list(range(train_starts[0] * 16, train_starts[0] * 16 + 16))
    with pytest.raises(IndexError):
        train[len(train)]
    assert len(held_out_indices(10**7, 0.05, seed=0)) == 1000  # at most 1000, drawn without listing 10**7


def test_a_white_space_file_is_refused(tmp_path):
    (tmp_path / "blank.txt").write_text(" \n\t \n" * 100)
    with pytest.raises(TrainingError, match="blank.txt is empty .or only white space"):
        train_gpt(
            TextFile(tmp_path / "blank.txt"),
            tmp_path / "out",
            tokenizer="bpe",
            vocab_size=300,
            config_overrides=TINY,
            settings=STEPS,
            chunk_chars=16,
        )
    assert not (tmp_path / "out").exists()


DIVERGING = TrainSettings(max_steps=4, batch_size=4, progress=False, learning_rate=1e30, logging_steps=1)


@pytest.mark.parametrize("family", ["gpt", "encoder", "seq2seq"])
def test_a_loss_that_becomes_nan_stops_training_and_writes_nothing(family, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(
        TrainingError,
        match=r"loss became (nan|inf) at step \d+ .*nothing was written; try a lower "
        r"--learning-rate than 1e\+30",
    ):
        if family == "gpt":
            train_gpt("the cat sat on the mat\n" * 20, out, block_size=16, config_overrides=TINY, settings=DIVERGING)
        elif family == "encoder":
            train_encoder(paraphrase_pairs(40, 4).train, out, config_overrides=TINY, settings=DIVERGING)
        else:
            train_seq2seq(english_italian_pairs(40, 4).train, out, config_overrides=TINY, settings=DIVERGING)
    assert not out.exists() and list(tmp_path.iterdir()) == []


def no_training(*args, **kwargs):
    raise AssertionError("training started on a corpus it cannot learn from")


# (family, its training data, what the refusal says; None: it trains, with the warning given)
UNLEARNABLE = {
    "a GPT text of the pad token only": (
        "gpt",
        "<pad>" * 400,
        ["only the pad token <pad> written as text (400 times)"],
    ),
    "the same with BPE": ("bpe", "<|pad|>" * 200, ["only the pad token <|pad|> written as text"]),
    "40 copies of one encoder pair": (
        "encoder",
        [("a red cat", "the red cat")] * 40,
        ["the encoder training pairs are 38 copies of one pair", "at least 2 pairs with no text in common"],
    ),
    "encoder pairs that all share a text": (
        "encoder",
        [("a red cat", f"the red cat {i}") for i in range(40)],
        ["38 pairs (38 distinct) that all share a text with each other", "the loss would stay 0"],
    ),
    "a GPT text holding some pad tokens": ("gpt", "the cat sat on the mat <pad>\n" * 30, "holds the pad token <pad>"),
    "two encoder pairs, repeated": (
        "encoder",
        [("a red cat", "the red cat"), ("a blue dog", "the blue dog")] * 20,
        "36 of the 38 encoder training pairs repeat another pair",
    ),
}


@pytest.mark.parametrize("case", UNLEARNABLE)
def test_a_corpus_nothing_can_be_learned_from_is_refused_before_training(case, tmp_path, monkeypatch, caplog):
    """A GPT text of pad tokens only used to end in a NaN loss blamed on the learning rate; 40 copies of one encoder
    pair trained at a constant loss of 0.000 (a batch never holds a text twice, so each held one pair)."""
    family, data, expected = UNLEARNABLE[case]
    refused = isinstance(expected, list)
    if refused:
        monkeypatch.setattr("transformers.Trainer.train", no_training)
    out = tmp_path / "out"
    options = dict(config_overrides=TINY, settings=STEPS)

    def train():
        if family == "encoder":
            return train_encoder(data, out, **options)
        return train_gpt(data, out, block_size=16, tokenizer="bpe" if family == "bpe" else "char", **options)

    with caplog.at_level("WARNING", logger="hf_minitf.training"):
        if refused:
            with pytest.raises(TrainingError) as error:
                train()
            assert all(word in str(error.value) for word in expected), str(error.value)
            assert not out.exists()
        else:
            assert train().folder == out
            assert expected in caplog.text
