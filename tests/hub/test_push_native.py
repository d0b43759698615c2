"""`minitf push SRC REPO --native [--gguf ...]` against the loopback Hub: the native folder and GGUF files go up in
one commit, the card names the repo with llama.cpp / Ollama commands, the pushed repo exports again by repo id, and
refusals upload nothing."""

import json

import gguf
import pytest
from factories import EXPORT_TEXT, SAVED_MODEL_FILES, _random_gpt, make_seq2seq_source
from huggingface_hub import ModelCard, hf_hub_download

from hf_minitf import train_bpe_tokenizer
from hf_minitf.catalog.verification import GGUF_SOURCE_HASH_KEYS, GGUF_SOURCE_KEY
from hf_minitf.cli import main as minitf_main
from hf_minitf.export import export_native
from hf_minitf.export.source import source_hashes
from hf_minitf.hub.push import push_folder


@pytest.fixture(scope="module")
def rope_gpt(tmp_path_factory):
    tokenizer = train_bpe_tokenizer([EXPORT_TEXT], vocab_size=300, min_frequency=1)
    return _random_gpt(tmp_path_factory.mktemp("push") / "rope", tokenizer, 7, position_embedding_type="rope")


def test_push_native_uploads_the_native_folder_and_gguf_files(hub, rope_gpt, capsys):
    assert minitf_main(["push", str(rope_gpt), "org/tiny-native", "--native", "--gguf", "f16,q8_0", "--no-verify"]) == 0
    assert "Pushed" in capsys.readouterr().out
    assert set(hub.uploads[-1].paths) == SAVED_MODEL_FILES | {"tiny-native-F16.gguf", "tiny-native-Q8_0.gguf"}
    card = hub.read("org/tiny-native", "README.md").decode()
    for words in (
        "llama-cli -hf org/tiny-native:Q8_0",
        "ollama run hf.co/org/tiny-native:F16",
        'AutoModelForCausalLM.from_pretrained("org/tiny-native")',
        "vllm serve org/tiny-native",
    ):
        assert words in card
    assert b"GPTNeoXForCausalLM" in hub.read("org/tiny-native", "config.json")


def test_a_pushed_minitf_repo_exports_by_repo_id_without_its_code(hub, rope_gpt, tmp_path):
    push_folder(rope_gpt, "org/tiny-minitf")
    assert any(name.endswith(".py") for name in hub.files("org/tiny-minitf"))
    out = export_native("org/tiny-minitf", tmp_path / "native")
    assert not list(out.rglob("*.py"))
    assert "org/tiny-minitf" in (out / "README.md").read_text()  # the card names where it came from


def test_push_native_of_a_translator_uploads_pegasus_and_its_verification(hub, tmp_path, capsys):
    translator = make_seq2seq_source(tmp_path)
    assert minitf_main(["push", str(translator), "org/tiny-translator", "--native"]) == 0
    assert set(hub.uploads[-1].paths) == SAVED_MODEL_FILES
    assert json.loads(hub.read("org/tiny-translator", "config.json"))["model_type"] == "pegasus"
    card = hub.read("org/tiny-translator", "README.md").decode()
    assert "pipeline_tag: translation" in card
    assert 'AutoModelForSeq2SeqLM.from_pretrained("org/tiny-translator")' in card
    assert "translations equal" in card  # the Runs in table of the verification the push ran


def test_push_native_refusals_upload_nothing(hub, rope_gpt, tmp_path, capsys):
    uploads = len(hub.uploads)
    seq2seq = make_seq2seq_source(tmp_path)  # with hkproj's later norms (std + eps), which no LayerNorm computes
    config = json.loads((seq2seq / "config.json").read_text())
    (seq2seq / "config.json").write_text(json.dumps({**config, "norm_type": "scalar_std_plus_eps"}))
    assert minitf_main(["push", str(seq2seq), "org/refused", "--native"]) == 2
    assert "norm_type='scalar_std_plus_eps'" in capsys.readouterr().err
    assert minitf_main(["push", str(rope_gpt), "org/refused", "--gguf", "q8_0"]) == 2
    assert "--native" in capsys.readouterr().err
    assert minitf_main(["push", str(rope_gpt), "org/refused", "--native", "--gguf", "q4"]) == 2
    assert "q4" in capsys.readouterr().err
    assert len(hub.uploads) == uploads and "org/refused" not in hub.repos


@pytest.fixture
def bars_shown():
    """transformers' progress bars and notes on, as in a fresh process (another test's command may have hidden them)."""
    from transformers.utils import logging

    shown, verbosity = logging.is_progress_bar_enabled(), logging.get_verbosity()
    logging.enable_progress_bar()
    logging.set_verbosity_warning()
    yield
    logging.set_verbosity(verbosity)
    if not shown:
        logging.disable_progress_bar()


def test_push_native_shows_no_loading_bars_unless_verbose(hub, rope_gpt, bars_shown, capfd):
    """The export and its verification load the model four times: no "Loading weights" bar for any, and the bars
    are on again after the push; `--verbose` shows them."""
    from transformers.utils import logging

    assert minitf_main(["push", str(rope_gpt), "org/quiet-native", "--native"]) == 0
    out, err = capfd.readouterr()
    assert "Pushed" in out and "Loading weights" not in out + err, err
    assert logging.is_progress_bar_enabled()
    assert minitf_main(["push", str(rope_gpt), "org/quiet-native", "--native", "--no-verify", "--verbose"]) == 0
    assert "Loading weights" in capfd.readouterr().err


def test_push_native_names_the_pushed_source_and_no_local_folder(hub, rope_gpt, capsys):
    """`--source-repo` (the repo the MiniTF folder itself was pushed to) is the card's base_model, linked in its
    text; without it the card has no base_model; neither names the local folder."""
    argv = ["push", str(rope_gpt), "org/lic-gpt-native", "--native", "--no-verify"]
    assert minitf_main([*argv, "--source-repo", "org/lic-gpt"]) == 0
    named = ModelCard(hub.read("org/lic-gpt-native", "README.md").decode())
    assert named.data.base_model == "org/lic-gpt" and "(https://huggingface.co/org/lic-gpt)" in named.text
    assert "org/lic-gpt" in named.text.split("minitf export gguf ")[1].splitlines()[0]  # the command names the repo
    assert minitf_main(argv) == 0
    unnamed = ModelCard(hub.read("org/lic-gpt-native", "README.md").decode())
    assert unnamed.data.get("base_model") is None and "a MiniTF gpt model" in unnamed.text
    for card in (named, unnamed):
        assert str(rope_gpt) not in str(card) and f"`{rope_gpt.name}`" not in str(card)
    status = minitf_main(["push", str(rope_gpt), "org/refused", "--source-repo", "org/lic-gpt"])
    assert status == 2 and "--native" in capsys.readouterr().err
    assert minitf_main([*argv, "--source-repo", "not a repo"]) == 2
    assert "not a Hub repo id" in capsys.readouterr().err


def gguf_source(path) -> dict[str, str]:
    """The source a GGUF file records (`minitf.source` and its hashes), by key."""
    fields = gguf.GGUFReader(path).fields
    keys = (GGUF_SOURCE_KEY, *GGUF_SOURCE_HASH_KEYS.values())
    return {key: fields[key].contents() for key in keys if key in fields}


def test_pushed_gguf_files_record_the_pushed_source_and_a_local_export_its_folder(hub, rope_gpt, tmp_path, capsys):
    """A local export's GGUF files record the source's absolute path (what `minitf verify` measures them against);
    pushed ones record the repo the source was pushed as (`--source-repo`) with its hashes, or no source at all."""
    hashes = {GGUF_SOURCE_HASH_KEYS[part]: digest for part, digest in source_hashes(rope_gpt).items()}
    local = export_native(rope_gpt, tmp_path / "native", gguf_dtypes=("f16",))
    assert gguf_source(local / "native-F16.gguf") == {GGUF_SOURCE_KEY: str(rope_gpt.resolve()), **hashes}
    argv = ["push", str(rope_gpt), "org/gguf-native", "--native", "--gguf", "f16", "--no-verify"]
    assert minitf_main([*argv, "--source-repo", "org/gguf-minitf"]) == 0
    pushed = hf_hub_download("org/gguf-native", "gguf-native-F16.gguf")
    assert gguf_source(pushed) == {GGUF_SOURCE_KEY: "org/gguf-minitf", **hashes}
    assert minitf_main(argv) == 0
    assert gguf_source(hf_hub_download("org/gguf-native", "gguf-native-F16.gguf")) == {}
