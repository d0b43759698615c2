"""Test setup: never touch the network, keep every Hugging Face cache in a temporary folder."""

import os
import tempfile
from pathlib import Path

_HF_HOME = tempfile.mkdtemp(prefix="hf_minitf_tests_")
os.environ.update(
    HF_HOME=_HF_HOME,
    HF_HUB_OFFLINE="1",
    TRANSFORMERS_OFFLINE="1",
    HF_DATASETS_OFFLINE="1",
    HF_HUB_DISABLE_TELEMETRY="1",
    TOKENIZERS_PARALLELISM="false",
    WANDB_DISABLED="true",
)

import pytest  # noqa: E402
import torch  # noqa: E402
from hub_server import hub  # noqa: E402, F401  (the loopback Hub fixture)

DATA = Path(__file__).parent / "data"


@pytest.fixture
def data_dir() -> Path:
    """Reference fixtures made by running the original implementations (see data/README.md)."""
    return DATA


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# --- tiny models: the one factory every model test builds from -------------------------------------------------------
# Each family's sizes are small enough for a test to build dozens of models; tests pass what they need different.

from hf_minitf import (  # noqa: E402
    MiniTFEncoderConfig,
    MiniTFEncoderModel,
    MiniTFGPTConfig,
    MiniTFGPTForCausalLM,
    MiniTFSeq2SeqConfig,
    MiniTFSeq2SeqForConditionalGeneration,
)

TINY_SIZES = {
    "gpt": dict(vocab_size=61, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=96,
                pad_token_id=0, initializer_range=0.3),
    "encoder": dict(vocab_size=100, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                    max_position_embeddings=24),
    "seq2seq": dict(src_vocab_size=37, vocab_size=41, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=64, max_position_embeddings=40, initializer_range=1.0),
}
TINY_CLASSES = {
    "gpt": (MiniTFGPTConfig, MiniTFGPTForCausalLM),
    "encoder": (MiniTFEncoderConfig, MiniTFEncoderModel),
    "seq2seq": (MiniTFSeq2SeqConfig, MiniTFSeq2SeqForConditionalGeneration),
}


def tiny_config(family: str, **overrides):
    """The config of a tiny model of `family` (gpt, encoder or seq2seq), with `overrides` applied."""
    config_class, _ = TINY_CLASSES[family]
    return config_class(**{**TINY_SIZES[family], **overrides})


# The seed each family's model is built after, unless a test gives another.
TINY_SEEDS = {"gpt": 1, "encoder": 0, "seq2seq": 3}


def tiny_model(family: str, seed: int | None = None, model_class: type | None = None, **overrides):
    """A tiny random model of `family` in eval mode, built after `torch.manual_seed(seed)` (by default the family's
    seed in TINY_SEEDS); `model_class` picks
    another head (e.g. MiniTFEncoderForSequenceClassification). The GPT and seq2seq sizes have large weights, so
    that greedy decoding wanders instead of repeating one token."""
    config = tiny_config(family, **overrides)
    torch.manual_seed(TINY_SEEDS[family] if seed is None else seed)
    return (model_class or TINY_CLASSES[family][1])(config).eval()
