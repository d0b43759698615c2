"""An export reads its source once: an Ollama export (a GGUF file, its agreement, a Modelfile and a card) and a
Space push (an ONNX export inside a web page) each load the source's model and its tokenizer one time, however many
writers and measurements use them. Counted by wrapping transformers' `from_pretrained` of every model and tokenizer
class (the Auto classes call them) and the checked one the package puts on MiniTF's models, and noting the loads
whose folder is the source."""

from pathlib import Path

import pytest
import transformers
from factories import make_gpt

from hf_minitf.export import export_ollama
from hf_minitf.modeling.layers import MiniTFPreTrainedModel
from hf_minitf.publishing import HubTarget, push_space

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def source_loads(monkeypatch):
    """A function giving, for a folder, how many times its model and its tokenizer were loaded since the fixture
    began."""
    loads: list[tuple[str, Path]] = []

    def counting(kind: str, base: type) -> None:
        original = base.from_pretrained.__func__

        def from_pretrained(cls, path, *args, **kwargs):
            loads.append((kind, Path(str(path)).resolve()))
            return original(cls, path, *args, **kwargs)

        monkeypatch.setattr(base, "from_pretrained", classmethod(from_pretrained))

    counting("model", transformers.PreTrainedModel)
    counting("model", MiniTFPreTrainedModel)  # the package's checked loading, which calls transformers' own directly
    counting("tokenizer", transformers.PreTrainedTokenizerBase)

    def count(folder: Path) -> dict[str, int]:
        folder = folder.resolve()
        return {
            kind: sum(1 for what, path in loads if what == kind and path == folder) for kind in ("model", "tokenizer")
        }

    return count


def test_the_counter_sees_every_load(tmp_path, source_loads):
    """The check's own check: two loads of a model and one of a tokenizer through the Auto classes are counted."""
    folder = make_gpt(tmp_path / "gpt")
    for _ in range(2):
        transformers.AutoModelForCausalLM.from_pretrained(folder)
    transformers.AutoTokenizer.from_pretrained(folder)
    assert source_loads(folder) == {"model": 2, "tokenizer": 1}


def test_an_ollama_export_loads_the_model_and_the_tokenizer_once(tmp_path, source_loads):
    folder = make_gpt(tmp_path / "gpt")
    written = export_ollama(folder, tmp_path / "ollama")
    assert written.gguf.agreement is not None  # the agreement was measured, on the same loaded model
    assert source_loads(folder) == {"model": 1, "tokenizer": 1}


def test_a_space_push_loads_the_model_and_the_tokenizer_once(tmp_path, source_loads, monkeypatch):
    folder = make_gpt(tmp_path / "gpt")
    committed = []
    monkeypatch.setattr(HubTarget, "commit", lambda self, staging, *args, **kwargs: committed.append(staging) or "url")
    assert push_space(folder, "tester/page") == "url"
    assert committed
    assert source_loads(folder) == {"model": 1, "tokenizer": 1}
