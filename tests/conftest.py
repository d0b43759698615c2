"""Test setup: never touch the network, keep every Hugging Face cache in a temporary folder."""

import json
import os
import tempfile
from pathlib import Path

_HF_HOME = tempfile.mkdtemp(prefix="hf_minitf_tests_")
OFFLINE = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY")
os.environ.update(dict.fromkeys(OFFLINE, "1"), HF_HOME=_HF_HOME, TOKENIZERS_PARALLELISM="false", WANDB_DISABLED="true")

import pytest  # noqa: E402
import torch  # noqa: E402
from helpers import llama_cpp_hidden  # noqa: E402
from hub_server import hub  # noqa: E402, F401  (the loopback Hub fixture)
from transformers_js import node_modules  # noqa: E402, F401  (transformers.js installed in tests/js)

DATA = Path(__file__).parent / "data"


@pytest.fixture
def data_dir() -> Path:
    """Reference fixtures made by running the original implementations (see data/README.md)."""
    return DATA


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _share_the_cores_between_workers() -> None:
    """Under pytest-xdist, each worker's torch (and every process it starts) gets its share of the cores: two
    workers each spinning two threads on two cores ran the suite's tiny models about twice as slowly."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        threads = max(1, len(os.sched_getaffinity(0)) // workers)
        torch.set_num_threads(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)


_share_the_cores_between_workers()


@pytest.fixture
def one_thread():
    """Torch on one thread for the test: tiny models' products (and their training) are several times faster there
    than on two busy cores. A module asks for it with `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def without_llama_cpp():
    """llama-cpp-python unimportable for the test (`helpers.llama_cpp_hidden`)."""
    with llama_cpp_hidden():
        yield


# Tokenizer files of the original codebases, shared by the conversion and fault-injection tests.
@pytest.fixture(scope="module")
def tokenizer_files(tmp_path_factory):
    """Tokenizer files of the kinds the original codebases write, sized to the fixtures' vocabularies: FrawdLLM's
    byte-level BPE (frawdllm_tokenizer.json) and hkproj's WordLevel per language (tokenizer_en.json,
    tokenizer_it.json)."""
    from factories import write_frawdllm_fixture_tokenizer, write_hkproj_tokenizers

    root = tmp_path_factory.mktemp("tokenizers")
    write_frawdllm_fixture_tokenizer(root / "frawdllm_tokenizer.json")
    return write_hkproj_tokenizers(root)


@pytest.fixture(scope="module")
def miniembed_tokenizer_file(tmp_path_factory):
    """MiniEmbed's released tokenizer.json cut to the fixture model's 97 ids."""
    from factories import miniembed_fixture_vocabulary

    path = tmp_path_factory.mktemp("miniembed") / "tokenizer.json"
    path.write_text(json.dumps(miniembed_fixture_vocabulary()))
    return path


@pytest.fixture(scope="module")
def data_dir_module():
    return DATA
