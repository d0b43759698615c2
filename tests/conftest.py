"""Test setup: never touch the network, keep every Hugging Face cache in a temporary folder."""

import json
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
from tokenizers import Tokenizer, decoders, models, pre_tokenizers  # noqa: E402
from transformers_js import node_modules  # noqa: E402, F401  (transformers.js installed in tests/js)

DATA = Path(__file__).parent / "data"


@pytest.fixture
def data_dir() -> Path:
    """Reference fixtures made by running the original implementations (see data/README.md)."""
    return DATA


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# Tokenizer files of the original codebases, shared by the conversion and fault-injection tests.
@pytest.fixture(scope="module")
def tokenizer_files(tmp_path_factory):
    """Tokenizer files of the kinds the original codebases write, sized to the fixtures' vocabularies."""
    root = tmp_path_factory.mktemp("tokenizers")
    # FrawdLLM: a `tokenizers` byte-level BPE, <|pad|>=0 <|unk|>=1 <|bos|>=2 <|eos|>=3, here 96 tokens.
    symbols = sorted(pre_tokenizers.ByteLevel.alphabet())[:92]
    bpe_vocab = {token: index for index, token in enumerate(["<|pad|>", "<|unk|>", "<|bos|>", "<|eos|>", *symbols])}
    bpe = Tokenizer(models.BPE(vocab=bpe_vocab, merges=[], unk_token="<|unk|>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.save(str(root / "frawdllm_tokenizer.json"))
    # hkproj: WordLevel + Whitespace per language, [UNK]=0 [PAD]=1 [SOS]=2 [EOS]=3.
    for name, size, prefix in (("tokenizer_en.json", 40, "s"), ("tokenizer_it.json", 45, "t")):
        vocab = {
            token: index
            for index, token in enumerate(
                ["[UNK]", "[PAD]", "[SOS]", "[EOS]", *(f"{prefix}{i}" for i in range(4, size))]
            )
        }
        word_level = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
        word_level.pre_tokenizer = pre_tokenizers.Whitespace()
        word_level.save(str(root / name))
    return root


@pytest.fixture(scope="module")
def miniembed_tokenizer_file(tmp_path_factory, data_dir_module):
    """MiniEmbed's released tokenizer.json cut to the fixture model's 97 ids."""
    words = json.loads((data_dir_module / "miniembed_tokenizer" / "tokenizer.json").read_text())["word_to_id"]
    path = tmp_path_factory.mktemp("miniembed") / "tokenizer.json"
    path.write_text(json.dumps({"vocab_size": 97, "word_to_id": {w: i for w, i in words.items() if i < 97}}))
    return path


@pytest.fixture(scope="module")
def data_dir_module():
    return DATA
