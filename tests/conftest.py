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
