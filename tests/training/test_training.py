"""hf_minitf.training.trainers and what it builds on: reading training data, presets, options, a byte-level BPE GPT, and
the configs every trainer writes."""

import contextlib
import io
import json

import pytest
import torch
from datasets import Dataset, DatasetDict
from transformers import AutoModel

from hf_minitf import MiniTFGPTForCausalLM, MiniTFSeq2SeqForConditionalGeneration
from hf_minitf.catalog import FAMILIES, FRAWDLLM_PRESETS, PRESETS, get_preset
from hf_minitf.training.data import TrainingDataError, load_pairs, load_texts
from hf_minitf.training.tasks import english_italian_pairs, paraphrase_pairs
from hf_minitf.training.trainers import TrainingError, TrainSettings, train_encoder, train_gpt, train_seq2seq

TINY = dict(
    hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, max_position_embeddings=32
)


def test_texts_from_a_text_file_and_jsonl_rows(tmp_path):
    (tmp_path / "a.txt").write_text("héllo\nworld\n", encoding="utf-8")
    assert load_texts(tmp_path / "a.txt") == ["héllo\nworld\n"]
    (tmp_path / "a.jsonl").write_text(json.dumps({"text": "one", "n": 1}) + "\n\n" + json.dumps({"text": "two"}) + "\n")
    assert load_texts(tmp_path / "a.jsonl") == ["one", "two"]
    with pytest.raises(TrainingDataError, match="no column 'body'.*text, n"):
        load_texts(tmp_path / "a.jsonl", column="body")
    (tmp_path / "bad.jsonl").write_text('{"text": "one"}\n{"text": \n')
    with pytest.raises(TrainingDataError, match="not valid JSON lines"):
        load_texts(tmp_path / "bad.jsonl")
    (tmp_path / "bytes.txt").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(TrainingDataError, match="not UTF-8"):
        load_texts(tmp_path / "bytes.txt")


def test_pairs_from_tsv_json_and_a_saved_dataset(tmp_path):
    (tmp_path / "p.tsv").write_text("a cat\tun gatto\n\nthe dog\til cane\textra\n")
    assert load_pairs(tmp_path / "p.tsv", ["source", "target"]) == [("a cat", "un gatto"), ("the dog", "il cane")]
    (tmp_path / "p.json").write_text(json.dumps([{"q": "x", "d": "y"}, {"q": "z", "d": 3}]))
    with pytest.raises(TrainingDataError, match="row 1: column 'd' is 3, not a text"):
        load_pairs(tmp_path / "p.json", ["q", "d"])
    rows = {"anchor": ["a", "b"], "positive": ["c", "d"]}
    DatasetDict({"train": Dataset.from_dict(rows), "test": Dataset.from_dict(rows)}).save_to_disk(tmp_path / "ds")
    assert load_pairs(tmp_path / "ds", ["anchor", "positive"], split="test") == [("a", "c"), ("b", "d")]
    with pytest.raises(TrainingDataError, match="splits train, test, not 'validation'"):
        load_pairs(tmp_path / "ds", ["anchor", "positive"], split="validation")
    with pytest.raises(TrainingDataError, match="does not exist"):
        load_pairs(tmp_path / "missing.tsv", ["a", "b"])


# Sizes of each preset as its original codebase has them, a few per row: vocab_size and tokenizer are the preset's
# own, the other names its config fields. FrawdLLM's are declared once; its training presets read them.
PRESET_SIZES = [
    ("gpt", "shakespeare-char", dict(num_hidden_layers=6, num_attention_heads=6, hidden_size=384)),
    ("gpt", "shakespeare-char", dict(max_position_embeddings=256)),
    ("gpt", "frawdllm-100m", dict(vocab_size=32000)),
    ("gpt", "frawdllm-base", dict(vocab_size=8192, tokenizer="bpe", hidden_size=768, num_hidden_layers=12)),
    ("gpt", "frawdllm-base", dict(num_attention_heads=12, max_position_embeddings=1024)),
    ("gpt", "frawdllm-base", dict(position_embedding_type="learned", hidden_dropout=0.1)),
    ("gpt", "frawdllm-small-llama", dict(hidden_size=512, num_hidden_layers=8)),
    ("gpt", "frawdllm-small-llama", dict(position_embedding_type="rope", hidden_dropout=0.0)),
    ("encoder", "miniembed-mini", dict(vocab_size=30000, num_hidden_layers=4, hidden_size=256, intermediate_size=1024)),
    ("seq2seq", "hkproj", dict(hidden_size=512, num_hidden_layers=6, num_attention_heads=8, intermediate_size=2048)),
    ("seq2seq", "hkproj", dict(max_position_embeddings=350)),
]


@pytest.mark.parametrize("family, name, sizes", PRESET_SIZES)
def test_presets_carry_the_original_sizes(family, name, sizes):
    preset = get_preset(family, name)
    fields = {"vocab_size": preset.vocab_size, "tokenizer": preset.tokenizer, **preset.config}
    assert {field: fields[field] for field in sizes} == sizes


def test_the_catalog_lists_its_names_and_refuses_others():
    with pytest.raises(ValueError, match="unknown gpt preset 'huge'; choose one of tiny, shakespeare-char"):
        get_preset("gpt", "huge")
    with pytest.raises(ValueError, match="unknown model family 'vision'; choose one of gpt, encoder, seq2seq"):
        get_preset("vision", "tiny")
    assert tuple(FAMILIES) == tuple(PRESETS) == ("gpt", "encoder", "seq2seq")
    assert list(FRAWDLLM_PRESETS) == ["tiny", "small", "base", "tiny-llama", "small-llama", "100m"]


@pytest.mark.parametrize(
    "options, word",
    [
        ({"epochs": 0}, "epochs"),
        ({"max_steps": -5}, "max_steps"),
        ({"batch_size": 0}, "batch_size"),
        ({"eval_steps": 0}, "eval_steps"),
        ({"mixed_precision": "fp8"}, "fp8"),
        ({"resume": True}, "--checkpoint-dir"),
    ],
)
def test_settings_refuse_unusable_values(options, word):
    with pytest.raises(TrainingError, match=word):
        TrainSettings(**options)


def test_gpt_with_a_byte_level_bpe_tokenizer_trained_on_the_text():
    text = "the quick brown fox jumps over the lazy dog. " * 40
    result = train_gpt(
        text,
        None,
        tokenizer="bpe",
        vocab_size=300,
        block_size=16,
        eval_fraction=0.1,
        settings=TrainSettings(max_steps=3, batch_size=4, progress=False),
        config_overrides=dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=32),
    )
    tokenizer, model = result.tokenizer, result.model
    assert len(tokenizer) == model.config.vocab_size and 260 <= len(tokenizer) <= 300
    assert tokenizer.decode(tokenizer("the lazy fox ~ ünïcode").input_ids) == "the lazy fox ~ ünïcode"
    assert len(tokenizer("the quick brown fox").input_ids) < len("the quick brown fox")
    assert result.folder is None and "eval_loss" in result.eval_results and len(result.losses) >= 1
    with pytest.raises(TrainingError, match="block size must lie in"):
        train_gpt(text, None, block_size=1000)
    with pytest.raises(TrainingError, match="empty"):
        train_gpt("  \n", None)


@pytest.fixture(scope="module")
def trained_folders(tmp_path_factory):
    """A gpt, encoder and seq2seq folder written by the trainers (two steps each, without progress bars: what they
    wrote on stderr is kept in `stderr.txt` beside them)."""
    root = tmp_path_factory.mktemp("trained")
    settings = TrainSettings(max_steps=2, batch_size=4, progress=False)
    with contextlib.redirect_stderr(io.StringIO()) as stderr:
        text = "the cat sat on the mat\n" * 20
        train_gpt(text, root / "gpt", block_size=16, settings=settings, config_overrides=TINY)
        train_encoder(paraphrase_pairs(40, 4).train, root / "encoder", settings=settings, config_overrides=TINY)
        train_seq2seq(english_italian_pairs(40, 4).train, root / "seq2seq", settings=settings, config_overrides=TINY)
    (root / "stderr.txt").write_text(stderr.getvalue())
    return root


def test_training_without_progress_draws_no_bar(trained_folders):
    """progress=False (`--no-progress`) hides every bar, sentence-transformers' too (its card's widget examples
    were computed under one)."""
    written = (trained_folders / "stderr.txt").read_text()
    assert "%|" not in written and "\r" not in written, written[-2000:]


@pytest.mark.parametrize(
    "family, model_class", [("gpt", MiniTFGPTForCausalLM), ("seq2seq", MiniTFSeq2SeqForConditionalGeneration)]
)
def test_saved_configs_keep_the_cache_the_trainer_turned_off(trained_folders, family, model_class):
    """The Trainer sets config.use_cache=False for training; the written config says use_cache: true again, and a
    bare forward of the reloaded model returns its cache."""
    folder = trained_folders / family
    assert json.loads((folder / "config.json").read_text())["use_cache"] is True
    model = model_class.from_pretrained(folder).eval()
    ids = torch.tensor([[4, 5, 6]])
    with torch.no_grad():
        outputs = model(ids, decoder_input_ids=ids) if family == "seq2seq" else model(ids)
    assert outputs.past_key_values is not None and outputs.past_key_values.get_seq_length() == 3


def test_the_encoder_config_gets_no_cache_field(trained_folders):
    config = json.loads((trained_folders / "encoder" / "config.json").read_text())
    assert "use_cache" not in config
    assert AutoModel.from_pretrained(trained_folders / "encoder").config.model_type == "minitf_encoder"
