"""Conversion on hostile or broken input: crafted pickles run nothing, every bad checkpoint gets an error naming
the keys/shapes/file and leaves no output behind; outputs are atomic; weights are streamed tensor by tensor."""

import json
import shutil
import weakref
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from hf_minitf import MiniTFGPTForCausalLM
from hf_minitf.conversion import ConversionError, open_checkpoint
from hf_minitf.conversion.base import save_converted
from hf_minitf.conversion.char_gpt import convert_char_gpt, plan_char_gpt
from hf_minitf.conversion.frawdllm import convert_frawdllm
from hf_minitf.conversion.hkproj import convert_hkproj
from hf_minitf.conversion.miniembed import convert_miniembed
from hf_minitf.safety.output_folders import OutputFolderError

DATA = Path(__file__).parents[1] / "data"
CHAR_GPT = DATA / "char_gpt"
CHARS = json.loads((CHAR_GPT / "vocab.json").read_text())


class CopiesAFile:
    """A pickle payload: unpickling it calls shutil.copyfile(source, marker)."""

    def __init__(self, source: Path, marker: Path) -> None:
        self.args = (str(source), str(marker))

    def __reduce__(self):
        return shutil.copyfile, self.args


def char_gpt_state() -> dict:
    return load_file(CHAR_GPT / "original.safetensors")


def convert_state(tmp_path: Path, state: dict, suffix: str = ".safetensors", **options):
    path = tmp_path / f"model{suffix}"
    if suffix == ".safetensors":
        save_file(state, str(path))
    else:
        torch.save(state, path)
    return convert_char_gpt(path, tmp_path / "out", vocab=CHARS, **{"num_heads": 4, **options})


def assert_no_output(tmp_path: Path) -> None:
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")], "a temporary folder was left behind"


def test_crafted_pickle_is_refused_and_runs_nothing(tmp_path):
    source, marker = tmp_path / "source.txt", tmp_path / "marker.txt"
    source.write_text("payload ran")
    state = load_file(DATA / "frawdllm_rope/original.safetensors")
    torch.save({"model_state_dict": state, "config": CopiesAFile(source, marker), "epoch": 1}, tmp_path / "evil.pt")
    with pytest.raises(ConversionError, match="shutil.copyfile") as error:
        convert_frawdllm(tmp_path / "evil.pt", tmp_path / "out", tokenizer=tmp_path / "unused.json")
    assert "Nothing from the file was executed" in str(error.value) and "evil.pt" in str(error.value)
    assert not marker.exists()
    assert_no_output(tmp_path)
    # The payload is live: an unrestricted load does run it.
    torch.load(tmp_path / "evil.pt", weights_only=False)
    assert marker.read_text() == "payload ran"


def test_crafted_pickle_in_a_bare_state_dict_is_refused(tmp_path):
    source, marker = tmp_path / "source.txt", tmp_path / "marker.txt"
    source.write_text("x")
    state = {**char_gpt_state(), "wte.weight": CopiesAFile(source, marker)}
    with pytest.raises(ConversionError, match="shutil.copyfile"):
        convert_state(tmp_path, state, suffix=".pt")
    assert not marker.exists()
    assert_no_output(tmp_path)


def test_the_allow_listed_config_class_only_receives_fields(tmp_path, as_frawdllm_model_config):
    """A pickle may name src.model.config.ModelConfig, but only to store plain fields in a stand-in."""

    @as_frawdllm_model_config
    class ModelConfig:
        def __init__(self, *args):
            pass

        def __reduce__(self):
            return ModelConfig, ("called with arguments",)

    state = load_file(DATA / "frawdllm_rope/original.safetensors")
    torch.save({"model_state_dict": state, "config": ModelConfig()}, tmp_path / "called.pt")
    with pytest.raises(ConversionError, match="not a checkpoint of this kind"):
        convert_frawdllm(tmp_path / "called.pt", tmp_path / "out", tokenizer=tmp_path / "unused.json")

    class WithTensorField:
        def __reduce__(self):
            return ModelConfig, (), {"n_head": torch.ones(2)}

    torch.save({"model_state_dict": state, "config": WithTensorField()}, tmp_path / "field.pt")
    with pytest.raises(ConversionError, match="field n_head holds a Tensor"):
        convert_frawdllm(tmp_path / "field.pt", tmp_path / "out", tokenizer=tmp_path / "unused.json")
    assert_no_output(tmp_path)


def test_missing_key_is_named(tmp_path):
    state = char_gpt_state()
    del state["blocks.1.ln2.bias"]
    expected = r"missing keys: blocks\.1\.ln2\.bias \(for model\.layers\.1\.mlp_layer_norm\.bias"
    with pytest.raises(ConversionError, match=expected):
        convert_state(tmp_path, state)
    assert_no_output(tmp_path)


def test_unexpected_key_is_named(tmp_path):
    state = {**char_gpt_state(), "blocks.0.attn.gate.weight": torch.zeros(3, 4)}
    with pytest.raises(ConversionError, match=r"unexpected keys: blocks\.0\.attn\.gate\.weight \[3, 4\]"):
        convert_state(tmp_path, state)
    assert_no_output(tmp_path)


def test_wrong_shape_is_named(tmp_path):
    state = char_gpt_state()
    state["blocks.0.mlp.net.2.weight"] = state["blocks.0.mlp.net.2.weight"].t().contiguous()
    expected = r"blocks\.0\.mlp\.net\.2\.weight: \[128, 32\], but model\.layers\.0\.mlp\.fc2\.weight needs \[32, 128\]"
    with pytest.raises(ConversionError, match=expected):
        convert_state(tmp_path, state)
    assert_no_output(tmp_path)


@pytest.mark.parametrize(
    "fixture,expected",
    [("frawdllm_learned", "frawdllm"), ("minitf_embedding", "miniembed"), ("seq2seq_transformer", "hkproj")],
)
def test_checkpoint_of_another_architecture_names_the_right_converter(tmp_path, fixture, expected):
    with pytest.raises(ConversionError, match=f"use `minitf convert {expected}`"):
        convert_char_gpt(DATA / fixture / "checkpoint.pt", tmp_path / "out", vocab=CHARS, num_heads=4)
    with pytest.raises(ConversionError, match="is not a MiniEmbed.*use `minitf convert char-gpt`"):
        convert_miniembed(CHAR_GPT / "original.safetensors", tmp_path / "out", tokenizer=tmp_path / "t.json")
    assert_no_output(tmp_path)


@pytest.mark.parametrize("source", ["checkpoint.pt", "original.safetensors"])
def test_truncated_file_is_named(tmp_path, source):
    data = (CHAR_GPT / source).read_bytes()
    truncated = tmp_path / source
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ConversionError, match=rf"{source}.*truncated or corrupt"):
        convert_char_gpt(truncated, tmp_path / "out", vocab=CHARS, num_heads=4)
    assert_no_output(tmp_path)


def test_not_a_checkpoint_is_named(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ConversionError, match="notes.txt is neither a safetensors file nor a torch.save checkpoint"):
        convert_char_gpt(tmp_path / "notes.txt", tmp_path / "out", vocab=CHARS, num_heads=4)
    with pytest.raises(ConversionError, match="does not exist"):
        convert_char_gpt(tmp_path / "absent.pt", tmp_path / "out", vocab=CHARS, num_heads=4)


def char_gpt_with(**options):
    """Converting the char-GPT fixture (its characters unless `options` give others) into `tmp / "out"`."""
    return lambda tmp: convert_char_gpt(CHAR_GPT / "checkpoint.pt", tmp / "out", **{"vocab": CHARS, **options})


def without_mask_buffers(tmp: Path) -> Path:
    """The FrawdLLM RoPE fixture saved without its attention-mask buffers (which tell the context length)."""
    state = load_file(DATA / "frawdllm_rope/original.safetensors")
    save_file({k: v for k, v in state.items() if not k.endswith(".attn.mask")}, str(tmp / "nomask.safetensors"))
    return tmp / "nomask.safetensors"


UNREAD = Path("unread.json")  # a tokenizer file the error comes before
ASKED_FOR = {
    "heads": (char_gpt_with(), r"number of attention heads.*\[1, 2, 4, 8, 16, 32\].*--num-heads"),
    "heads-not-dividing": (char_gpt_with(num_heads=3), "3 heads do not divide hidden size 32"),
    "vocabulary-size": (char_gpt_with(vocab=CHARS[:-1], num_heads=4), "64 characters but the model has 65"),
    "config-contradicts": (
        char_gpt_with(original_config={"n_head": 4, "block_size": 32}),
        "block_size=32 but the weights say 16",
    ),
    "norm-type": (
        lambda tmp: convert_hkproj(
            DATA / "seq2seq_transformer/checkpoint.pt",
            tmp / "out",
            num_heads=4,
            source_tokenizer=UNREAD,
            target_tokenizer=UNREAD,
        ),
        "--norm-type",
    ),
    "context-length": (
        lambda tmp: convert_frawdllm(without_mask_buffers(tmp), tmp / "out", tokenizer=UNREAD, num_heads=4),
        "--context-length",
    ),
}


@pytest.mark.parametrize("conversion,expected", list(ASKED_FOR.values()), ids=list(ASKED_FOR))
def test_what_the_weights_cannot_say_is_asked_for(tmp_path, conversion, expected):
    with pytest.raises(ConversionError, match=expected):
        conversion(tmp_path)
    assert_no_output(tmp_path)


def char_gpt_reading(file: str, text: str | None, option: str):
    """Converting the char-GPT fixture with `option` (vocab or original_config) naming `file`, which holds `text`
    (None: no such file)."""

    def conversion(tmp: Path) -> None:
        if text is not None:
            (tmp / file).write_text(text, encoding="utf-8")
        options = {"vocab": CHARS, "num_heads": 4, option: tmp / file}
        convert_char_gpt(CHAR_GPT / "checkpoint.pt", tmp / "out", **options)

    return conversion


# Each JSON file a conversion reads, when it is not what it should be, is named with what to give instead.
UNREADABLE_JSON = {
    "vocab-not-json": (char_gpt_reading("vocab.json", '["a", ', "vocab"), r"vocab.json is not JSON \(.*\); give the"),
    "vocab-missing": (char_gpt_reading("vocab.json", None, "vocab"), r"Cannot read the character vocabulary .*vocab"),
    "config-not-json": (
        char_gpt_reading("config.json", "{'n_head': 4}", "original_config"),
        r"config.json is not JSON \(.*\); give the original config as a JSON object",
    ),
    "config-not-an-object": (
        char_gpt_reading("config.json", "[4]", "original_config"),
        r"config.json holds a JSON array, not a JSON object; give the original config as a JSON object",
    ),
    "config-missing": (char_gpt_reading("config.json", None, "original_config"), r"Cannot read original config"),
}


@pytest.mark.parametrize("conversion,expected", list(UNREADABLE_JSON.values()), ids=list(UNREADABLE_JSON))
def test_a_json_file_that_cannot_be_read_is_named(tmp_path, conversion, expected):
    with pytest.raises(ConversionError, match=expected):
        conversion(tmp_path)
    assert not (tmp_path / "out").exists()


def test_rmsnorm_weights_are_refused_but_the_inert_flag_is_not(tmp_path):
    """FrawdLLM's use_rmsnorm flag changes nothing in its model; only weights without LayerNorm biases are refused."""
    state = load_file(DATA / "frawdllm_learned/original.safetensors")
    save_file({k: v for k, v in state.items() if not k.endswith("ln1.bias")}, str(tmp_path / "rms.safetensors"))
    with pytest.raises(ConversionError, match=r"blocks\.0\.ln1\.weight, blocks\.1\.ln1\.weight have no bias.*RMSNorm"):
        convert_frawdllm(
            tmp_path / "rms.safetensors",
            tmp_path / "out",
            tokenizer=tmp_path / "t.json",
            num_heads=4,
            config={"use_rmsnorm": True},
        )
    assert_no_output(tmp_path)


def test_tokenizer_that_does_not_fit_is_refused(tmp_path):
    from tokenizers import Tokenizer, models

    vocab = {
        token: index
        for index, token in enumerate(["<|pad|>", "<|unk|>", "<|bos|>", "<|eos|>"] + [f"w{i}" for i in range(200)])
    }
    Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|unk|>")).save(str(tmp_path / "big.json"))
    with pytest.raises(ConversionError, match="token id 203, past the model's vocab_size=96"):
        convert_frawdllm(DATA / "frawdllm_learned/checkpoint.pt", tmp_path / "out", tokenizer=tmp_path / "big.json")
    assert_no_output(tmp_path)


def test_output_folder_is_never_clobbered_or_left_half_written(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "config.json").write_text("{}")  # a model folder: overwrite=True replaces nothing else
    (out / "keep.txt").write_text("mine")
    with pytest.raises(OutputFolderError, match="output folder .*out is not empty.*overwrite=True"):
        convert_char_gpt(CHAR_GPT / "checkpoint.pt", out, vocab=CHARS, num_heads=4)
    broken = tmp_path / "broken.safetensors"
    save_file({k: v for k, v in char_gpt_state().items() if k != "ln_f.bias"}, str(broken))
    with pytest.raises(ConversionError, match="ln_f.bias"):
        convert_char_gpt(broken, out, vocab=CHARS, num_heads=4, overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "keep.txt"], (
        "a failed conversion touched the existing folder"
    )
    convert_char_gpt(CHAR_GPT / "checkpoint.pt", out, vocab=CHARS, num_heads=4, overwrite=True)
    assert not (out / "keep.txt").exists() and (out / "model.safetensors").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.safetensors", "out"]


def test_a_failure_while_writing_removes_the_partial_folder(tmp_path):
    with open_checkpoint(CHAR_GPT / "original.safetensors") as source:
        converted = plan_char_gpt(source, CHARS, num_heads=4)
        plan = converted.plans[-1]
        plan.produce = lambda: torch.zeros(1)  # the tensor read from disk turns out to have another shape
        with pytest.raises(ConversionError, match=rf"{plan.name} \(from {plan.origin}\) has shape \[1\]"):
            save_converted(converted, tmp_path / "out")
    assert_no_output(tmp_path)


def test_weights_are_streamed_one_tensor_at_a_time(tmp_path):
    """The writer holds one produced tensor at a time, so peak memory is about the largest tensor."""
    alive, peak = [], 0
    with open_checkpoint(CHAR_GPT / "original.safetensors") as source:
        converted = plan_char_gpt(source, CHARS, num_heads=4)
        for plan in converted.plans:

            def produce(original=plan.produce):
                nonlocal peak
                tensor = original().clone()
                alive.append(weakref.ref(tensor))
                peak = max(peak, sum(ref() is not None for ref in alive))
                return tensor

            plan.produce = produce
        save_converted(converted, tmp_path / "out")
    assert len(alive) == len(converted.plans) and peak == 1
    with safe_open(str(tmp_path / "out/model.safetensors"), "pt") as written:
        assert sorted(written.keys()) == sorted(plan.name for plan in converted.plans)
        assert torch.equal(written.get_tensor("model.embed_tokens.weight"), char_gpt_state()["wte.weight"])
    assert torch.equal(
        MiniTFGPTForCausalLM.from_pretrained(tmp_path / "out").model.norm.bias, char_gpt_state()["ln_f.bias"]
    )


def test_dtype_option_casts_the_saved_weights(tmp_path):
    convert_char_gpt(CHAR_GPT / "checkpoint.pt", tmp_path / "out", vocab=CHARS, num_heads=4, dtype="bfloat16")
    with safe_open(str(tmp_path / "out/model.safetensors"), "pt") as written:
        assert {written.get_slice(k).get_dtype() for k in written.keys()} == {"BF16"}
    assert json.loads((tmp_path / "out/config.json").read_text())["dtype"] == "bfloat16"
    model = MiniTFGPTForCausalLM.from_pretrained(tmp_path / "out", dtype=torch.bfloat16)
    assert torch.equal(model.model.embed_tokens.weight, char_gpt_state()["wte.weight"].to(torch.bfloat16))
