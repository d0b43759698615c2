"""The commands check what a model's forward pass does not read (a host sync on every step) before they run it: a
tokenizer that gives ids past the model's vocabulary is refused naming the id and the vocabulary size."""

from bad_inputs import char_gpt_folder
from helpers import run_cli
from tokenizers import Tokenizer

from hf_minitf import MiniTFGPTForCausalLM


def the_model_ran(*args, **kwargs):
    raise AssertionError("the model ran on ids past its vocabulary")


def test_generate_refuses_an_id_past_the_vocabulary_before_the_model_runs(tmp_path, capsys, monkeypatch):
    """On CPU the model's own lookup would refuse the id too; on an accelerator it is a device-side assert: the
    command must refuse it before any forward pass (here one would fail the test)."""
    folder = char_gpt_folder(tmp_path)
    size = Tokenizer.from_file(str(folder / "tokenizer.json")).get_vocab_size()
    folder = char_gpt_folder(tmp_path / "short", vocab_size=size - 1)  # the tokenizer's last character: past it
    monkeypatch.setattr(MiniTFGPTForCausalLM, "forward", the_model_ran)
    status, out, err = run_cli(["generate", folder, "abc ", "--max-new-tokens", "2"], capsys)
    assert status == 2 and not out
    assert f"token id {size - 1}, outside the vocabulary (vocab_size={size - 1})" in err, err
