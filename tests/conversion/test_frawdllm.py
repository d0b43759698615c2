"""FrawdLLM as its users have it: the -llama presets (flags its code never reads), the Hugging Face folders
FrawdLLM publishes with its scripts/convert_to_hf.py (from a path and from a Hub repo id, without running their
code), its chat format, and the smaller conversion gaps (option names in errors, embedding-layer sources)."""

import json
import shutil
import types
from pathlib import Path

import pytest
import torch
from helpers import write_frawdllm_tokenizer
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from transformers import AutoTokenizer, pipeline

from hf_minitf import MiniTFEncoderConfig, MiniTFEncoderModel, MiniTFGPTConfig, MiniTFGPTForCausalLM
from hf_minitf.catalog import FRAWDLLM_PRESETS
from hf_minitf.cli import main as minitf_main
from hf_minitf.conversion import ConversionError
from hf_minitf.conversion.frawdllm import convert_frawdllm, preset_heads

DATA = Path(__file__).parents[1] / "data"
TOLERANCE = 1e-5
BOS, EOS, USER, ASSISTANT = 2, 3, 4, 5
# The files FrawdLLM's scripts/convert_to_hf.py copies beside the weights so that `trust_remote_code` can load them.
FRAWDLLM_CODE = (
    "config.py",
    "gpt.py",
    "embeddings.py",
    "block.py",
    "attention.py",
    "mlp.py",
    "rope.py",
    "hf_wrapper.py",
    "__init__.py",
)
INSTRUCTIONS = [
    ("Tell me a story.", "Once upon a time, there was a cat."),
    ("what is the sun?", "It is a star!"),
    (" leading space, trailing space ", "Sure."),
    ("", "Nothing was asked."),
    ("Say <|eos|> please", ""),
]


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.float() - b.float()).abs().max().item()


def frawdllm_format_chat(raw: Tokenizer, instruction: str, response: str | None) -> list[int]:
    """FrawdLLM's chat format, from its definition (src/training/sft_dataset.py): <|bos|><|user|>, the instruction
    encoded alone without the post-processor's specials, <|assistant|>, then the response the same way and <|eos|>;
    with response=None, the prompt its scripts/chat.py generates from."""

    def encode(text):
        return raw.encode(text, add_special_tokens=False).ids

    ids = [
        raw.token_to_id("<|bos|>"),
        raw.token_to_id("<|user|>"),
        *encode(instruction),
        raw.token_to_id("<|assistant|>"),
    ]
    return ids if response is None else [*ids, *encode(response), raw.token_to_id("<|eos|>")]


def write_published_folder(folder: Path, fixture: Path, tokenizer: Path, marker: Path) -> Path:
    """A folder laid out like FrawdLLM's scripts/convert_to_hf.py writes one: its FrawdLLMConfig's config.json with
    auto_map, the wrapper's state_dict (keys prefixed `model.`, the tied `model.lm_head.weight` removed, causal-mask
    buffers kept) as model.safetensors, tokenizer.json + tokenizer_config.json, and its model code, which here
    records it ran in `marker` and raises."""
    folder.mkdir(parents=True)
    fields = json.loads((fixture / "config.json").read_text())  # FrawdLLM's ModelConfig fields
    config = {
        "auto_map": {
            "AutoConfig": "hf_wrapper.FrawdLLMConfig",
            "AutoModelForCausalLM": "hf_wrapper.FrawdLLMForCausalLM",
        },
        "model_type": "frawdllm",
        "transformers_version": "4.57.1",
        **fields,
        "num_hidden_layers": fields["n_layer"],
        "hidden_size": fields["n_embd"],
        "num_attention_heads": fields["n_head"],
    }
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    state = load_file(fixture / "original.safetensors")
    assert any(key.endswith(".attn.mask") for key in state)
    save_file(
        {f"model.{key}": value for key, value in state.items() if key != "lm_head.weight"},
        str(folder / "model.safetensors"),
    )
    shutil.copy(tokenizer, folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<|bos|>",
                "eos_token": "<|eos|>",
                "pad_token": "<|pad|>",
                "unk_token": "<|unk|>",
                "model_max_length": fields["context_length"],
            },
            indent=2,
        )
    )
    for name in FRAWDLLM_CODE:
        (folder / name).write_text(
            f"open({str(marker)!r}, 'a').write({name!r})\nraise RuntimeError('FrawdLLM code ran')\n"
        )
    return folder


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("frawdllm")
    chat_tokenizer = write_frawdllm_tokenizer(root / "chat_tokenizer.json", chat=True)
    marker = root / "code_ran.txt"
    return types.SimpleNamespace(
        root=root,
        marker=marker,
        chat_tokenizer=chat_tokenizer,
        base_tokenizer=write_frawdllm_tokenizer(root / "base_tokenizer.json", chat=False),
        published={
            name: write_published_folder(root / f"published_{name}", DATA / f"frawdllm_{name}", chat_tokenizer, marker)
            for name in ("rope", "learned")
        },
    )


@pytest.fixture(scope="module")
def chat_folder(files):
    """The RoPE fixture converted from its published folder (a chat tokenizer, so it has a chat template)."""
    out = files.root / "chat_converted"
    convert_frawdllm(files.published["rope"], out)
    return out


def assert_reproduces(folder: Path, fixture_name: str) -> None:
    io = load_file(DATA / fixture_name / "io.safetensors")
    model = MiniTFGPTForCausalLM.from_pretrained(folder).eval()
    with torch.no_grad():
        assert max_diff(model(io["input_ids"]).logits, io["logits"]) <= TOLERANCE
        assert max_diff(model(io["long_input_ids"]).logits, io["long_logits"]) <= TOLERANCE
    greedy = io["greedy_from_4"]
    assert torch.equal(model.generate(greedy[:, :4], max_new_tokens=greedy.shape[1] - 4, do_sample=False), greedy)


# ------------------------------------------------------------------------------------ the -llama presets
class ModelConfig:
    """Stands for FrawdLLM's src.model.config.ModelConfig (a dataclass) when the test writes a training checkpoint: it
    pickles as one holding the fields given (a fixture's config.json) and the head_dim its __post_init__ adds."""

    def __init__(self, **fields):
        vars(self).update(fields)
        self.head_dim = self.n_embd // self.n_head


def save_training_checkpoint(path: Path, state: dict, config: ModelConfig) -> Path:
    """torch.save a checkpoint as FrawdLLM's trainer does (its config pickles as src.model.config.ModelConfig once
    `as_frawdllm_model_config` installed the class)."""
    torch.save(
        {
            "epoch": 3,
            "global_step": 120,
            "model_state_dict": state,
            "optimizer_state_dict": {},
            "scheduler_state_dict": {},
            "val_loss": 2.5,
            "config": config,
        },
        path,
    )
    return path


def test_llama_flags_that_frawdllm_ignores_convert_what_the_weights_are(
    files, tmp_path, as_frawdllm_model_config, capsys
):
    """tiny-llama/small-llama set use_rmsnorm and use_swiglu, but FrawdLLM's blocks always build LayerNorm + GELU."""
    fields = json.loads((DATA / "frawdllm_rope/config.json").read_text())
    as_frawdllm_model_config(ModelConfig)
    config = ModelConfig(**{**fields, "use_rmsnorm": True, "use_swiglu": True})
    checkpoint = save_training_checkpoint(
        tmp_path / "best.pt", load_file(DATA / "frawdllm_rope/original.safetensors"), config
    )
    code = minitf_main(
        [
            "convert",
            "frawdllm",
            str(checkpoint),
            "--tokenizer",
            str(files.base_tokenizer),
            "--out",
            str(tmp_path / "out"),
        ]
    )
    printed = capsys.readouterr()
    assert code == 0, printed.err
    # FrawdLLM's code computes the same function whatever the flags say: the fixture's outputs are the original's.
    assert_reproduces(tmp_path / "out", "frawdllm_rope")
    model_config = json.loads((tmp_path / "out/config.json").read_text())
    # the model's fields say nothing of RMSNorm; the record of the original's config keeps its flags for the way back
    recorded = model_config.pop("original_format")
    assert model_config["hidden_act"] == "gelu" and "rms" not in json.dumps(model_config).lower()
    assert recorded["use_rmsnorm"] is True
    card = (tmp_path / "out/README.md").read_text()
    assert "`use_rmsnorm=True` and `use_swiglu=True`" in card and "never reads these flags" in card
    assert "use_rmsnorm=True, use_swiglu=True in the original config had no effect" in printed.out


def test_llama_presets_are_known():
    assert {"tiny-llama", "small-llama"} <= set(FRAWDLLM_PRESETS)
    assert preset_heads(8192, 256, 6, 256, True) == 8  # tiny-llama
    assert preset_heads(8192 + 2, 512, 8, 512, True) == 8  # small-llama, chat tokens added by SFT
    assert preset_heads(32000, 768, 12, 1024, True) == 12  # 100m
    assert preset_heads(8192, 256, 6, 512, True) is None


@pytest.mark.parametrize("variant", ["rmsnorm", "swiglu_gate", "swiglu_fused"])
def test_weights_that_really_are_rmsnorm_or_swiglu_are_refused_naming_the_keys(tmp_path, variant):
    state = load_file(DATA / "frawdllm_learned/original.safetensors")
    if variant == "rmsnorm":
        state = {key: value for key, value in state.items() if not key.endswith(("ln1.bias", "ln2.bias", "ln_f.bias"))}
        expected = r"blocks\.0\.ln1\.weight, blocks\.0\.ln2\.weight, blocks\.1\.ln1\.weight.* have no bias: .*RMSNorm"
    elif variant == "swiglu_gate":
        state["blocks.0.mlp.gate.weight"] = torch.zeros(128, 32)
        expected = r"blocks\.0\.mlp\.gate\.weight are SwiGLU weights"
    else:
        state["blocks.1.mlp.fc1.weight"] = torch.zeros(256, 32)
        state["blocks.1.mlp.fc1.bias"] = torch.zeros(256)
        expected = r"blocks\.1\.mlp\.fc1\.weight \[256, 32\] \(wider than fc2's input: a fused gate\) are SwiGLU"
    save_file(state, str(tmp_path / "variant.safetensors"))
    with pytest.raises(ConversionError, match=expected):
        convert_frawdllm(
            tmp_path / "variant.safetensors", tmp_path / "out", tokenizer=tmp_path / "unused.json", num_heads=4
        )
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------ published folders
@pytest.mark.parametrize("name", ["rope", "learned"])
def test_published_folder_converts_from_its_path_without_running_its_code(files, tmp_path, capsys, name):
    code = minitf_main(["convert", "frawdllm", str(files.published[name]), "--out", str(tmp_path / "out")])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert_reproduces(tmp_path / "out", f"frawdllm_{name}")
    assert not files.marker.exists(), "FrawdLLM's .py files ran"
    written = {path.name for path in (tmp_path / "out").iterdir()}
    assert not written & set(FRAWDLLM_CODE) - {"config.py"}, "FrawdLLM's code was copied into the converted folder"
    assert json.loads((tmp_path / "out/config.json").read_text())["model_type"] == "minitf_gpt"
    assert "chat template" in printed.out and f'from_pretrained("{tmp_path / "out"}")' in printed.out


def populate_hub_cache(cache: Path, repo_id: str, folder: Path) -> None:
    """The layout huggingface_hub keeps downloaded repositories in: models--owner--name/{refs/main, snapshots/sha}."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    commit = "0123456789abcdef0123456789abcdef01234567"
    shutil.copytree(folder, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs/main").write_text(commit)


def test_published_repo_id_converts_from_the_hub_cache_offline(files, tmp_path, monkeypatch):
    """HF_HUB_OFFLINE=1 (set for every test) with the repository in the cache: the repo id converts, no code runs."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert constants.is_offline_mode()
    expected = r"not a local path, nor in the local Hugging Face cache.*HF_HUB_OFFLINE=1 forbids.*hf download"
    with pytest.raises(ConversionError, match=expected):
        convert_frawdllm("tsingla1998/frawdllm-tiny", tmp_path / "out")
    populate_hub_cache(tmp_path / "hub", "tsingla1998/frawdllm-tiny", files.published["rope"])
    converted = convert_frawdllm("tsingla1998/frawdllm-tiny", tmp_path / "out")
    assert_reproduces(tmp_path / "out", "frawdllm_rope")
    assert not files.marker.exists(), "FrawdLLM's .py files ran"
    assert "tsingla1998/frawdllm-tiny" in converted.card
    with pytest.raises(ConversionError, match=r"frawdllm-tiny \(revision v2\) is not a local path, nor in the local"):
        convert_frawdllm("tsingla1998/frawdllm-tiny", tmp_path / "again", revision="v2")


def test_published_folder_errors_say_what_to_do(files, tmp_path):
    folder = tmp_path / "folder"
    shutil.copytree(files.published["learned"], folder)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(ConversionError, match="no tokenizer.json; pass --tokenizer"):
        convert_frawdllm(folder, tmp_path / "out")
    convert_frawdllm(folder, tmp_path / "out", tokenizer=files.chat_tokenizer)  # the option fills the gap
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "n_head": 8, "num_attention_heads": 8}))
    with pytest.raises(ConversionError, match=r"--num-heads 4 contradicts the checkpoint's n_head=8"):
        convert_frawdllm(folder, tmp_path / "other", tokenizer=files.chat_tokenizer, num_heads=4)
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "gpt2"}))
    with pytest.raises(ConversionError, match="model_type='gpt2', not \"frawdllm\""):
        convert_frawdllm(folder, tmp_path / "other", tokenizer=files.chat_tokenizer)
    with pytest.raises(ConversionError, match="Pass --tokenizer"):
        convert_frawdllm(DATA / "frawdllm_rope/checkpoint.pt", tmp_path / "other")
    with pytest.raises(ConversionError, match="hf_model does not exist.*Hub repo id"):
        convert_frawdllm(tmp_path / "hf_model", tmp_path / "other")
    assert not (tmp_path / "other").exists()


# ------------------------------------------------------------------------------------ chat
def test_chat_template_gives_frawdllm_format_token_for_token(files, chat_folder):
    tokenizer = AutoTokenizer.from_pretrained(chat_folder)
    raw = Tokenizer.from_file(str(files.chat_tokenizer))
    for instruction, response in INSTRUCTIONS:
        exchange = [{"role": "user", "content": instruction}, {"role": "assistant", "content": response}]
        assert tokenizer.apply_chat_template(exchange)["input_ids"] == frawdllm_format_chat(raw, instruction, response)
        prompt = tokenizer.apply_chat_template(exchange[:1], add_generation_prompt=True)["input_ids"]
        assert prompt == frawdllm_format_chat(raw, instruction, None)
        # what FrawdLLM's scripts/chat.py feeds its model: the formatted string, encoded without post-processing
        assert prompt == raw.encode(f"<|bos|><|user|>{instruction}<|assistant|>", add_special_tokens=False).ids
    assert frawdllm_format_chat(raw, "hi", "yo")[:2] == [BOS, USER] and ASSISTANT in frawdllm_format_chat(raw, "", "")


def test_chat_conversation_is_its_exchanges_in_frawdllm_format(files, chat_folder):
    tokenizer = AutoTokenizer.from_pretrained(chat_folder)
    raw = Tokenizer.from_file(str(files.chat_tokenizer))
    (q1, a1), (q2, a2), (q3, _) = INSTRUCTIONS[:3]
    messages = [
        {"role": "user", "content": q1},
        {"role": "assistant", "content": a1},
        {"role": "user", "content": q2},
        {"role": "assistant", "content": a2},
        {"role": "user", "content": q3},
    ]
    expected = [
        *frawdllm_format_chat(raw, q1, a1),
        *frawdllm_format_chat(raw, q2, a2),
        *frawdllm_format_chat(raw, q3, None),
    ]
    assert tokenizer.apply_chat_template(messages, add_generation_prompt=True)["input_ids"] == expected
    for bad in ([{"role": "system", "content": "Be nice."}, *messages], [messages[1], messages[0]]):
        with pytest.raises(Exception, match="FrawdLLM's chat format"):
            tokenizer.apply_chat_template(bad)


def test_chat_pipeline_takes_messages_and_generation_stops_at_eos(chat_folder):
    chat = pipeline("text-generation", model=str(chat_folder))
    messages = [{"role": "user", "content": "Tell me a story."}]
    replies = chat(messages, max_new_tokens=6, do_sample=False)
    conversation = replies[0]["generated_text"]
    assert conversation[:1] == messages and conversation[1]["role"] == "assistant"
    prompt = chat.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
    generated = chat.model.generate(**prompt, max_new_tokens=6, do_sample=False)[0, prompt["input_ids"].shape[1] :]
    assert conversation[1]["content"] == chat.tokenizer.decode(generated, skip_special_tokens=True)
    # Make <|eos|> the likeliest next token: generation must end right there, and the reply drops it.
    forced = chat.model.generate(**prompt, max_new_tokens=6, do_sample=False, sequence_bias={(EOS,): 1e4})
    assert forced[0, prompt["input_ids"].shape[1] :].tolist() == [EOS]
    assert chat(messages, max_new_tokens=6, do_sample=False, sequence_bias={(EOS,): 1e4})[0]["generated_text"][1] == {
        "role": "assistant",
        "content": "",
    }


def test_plain_prompts_start_with_bos_and_do_not_end_with_eos(files, chat_folder):
    """FrawdLLM's tokenizer file appends <|eos|> to every text; a prompt is <|bos|> text, as its chat.py feeds it."""
    raw = Tokenizer.from_file(str(files.chat_tokenizer))
    tokenizer = AutoTokenizer.from_pretrained(chat_folder)
    text = "Once upon a time"
    assert raw.encode(text).ids[-1] == EOS
    assert tokenizer(text).input_ids == raw.encode(f"<|bos|>{text}", add_special_tokens=False).ids
    assert tokenizer.decode(tokenizer(text).input_ids, skip_special_tokens=True) == text


def test_chat_tokens_missing_from_the_tokenizer_file_are_added_like_frawdllm_sft(files, tmp_path):
    """FrawdLLM's SFT adds <|user|>/<|assistant|> in memory after the 8192 saved tokens (its chat.py: vocab > 8192)."""
    converted = convert_frawdllm(DATA / "frawdllm_rope/checkpoint.pt", tmp_path / "out", tokenizer=files.base_tokenizer)
    assert converted.inferred["chat_template"]
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "out")
    assert tokenizer.convert_tokens_to_ids(["<|user|>", "<|assistant|>"]) == [94, 95]
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True)["input_ids"]
    assert ids[:2] == [BOS, 94] and ids[-1] == 95


# ------------------------------------------------------------------------------------ smaller gaps
def test_contradicting_head_count_names_the_option_typed(files, tmp_path, capsys):
    code = minitf_main(
        [
            "convert",
            "frawdllm",
            str(DATA / "frawdllm_rope/checkpoint.pt"),
            "--tokenizer",
            str(files.base_tokenizer),
            "--num-heads",
            "8",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "--num-heads 8 contradicts the checkpoint's n_head=4" in err and "--n-head" not in err


def test_miniembed_on_an_embedding_layer_points_to_its_source(tmp_path, capsys):
    code = minitf_main(
        [
            "convert",
            "miniembed",
            str(DATA / "transformer_embedding/checkpoint.pt"),
            "--tokenizer",
            str(tmp_path / "t.json"),
            "--out",
            str(tmp_path / "out"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "it lacks layers.0.attention.W_q.weight." in err and "lacks token_embedding.weight" not in err
    assert "`minitf convert transformer-embedding`" in err and "convert_transformer_embedding" in err


def test_embedding_layer_sources_write_weights_that_reproduce_the_original(tmp_path, capsys):
    fixture = DATA / "transformer_embedding"
    assert (
        minitf_main(["convert", "transformer-embedding", str(fixture / "checkpoint.pt"), "--out", str(tmp_path / "te")])
        == 0
    )
    fields = json.loads((tmp_path / "te/embedding_config.json").read_text())
    encoder = MiniTFEncoderModel(
        MiniTFEncoderConfig(**fields, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8, pad_token_id=0)
    ).eval()
    result = encoder.load_state_dict(load_file(tmp_path / "te/embeddings.safetensors"), strict=False)
    assert not result.unexpected_keys
    io = load_file(fixture / "io.safetensors")
    with torch.no_grad():
        assert max_diff(encoder(io["input_ids"], output_hidden_states=True).hidden_states[0], io["output"]) <= TOLERANCE

    fixture = DATA / "frawdllm_embeddings_learned"
    assert (
        minitf_main(
            ["convert", "frawdllm-embeddings", str(fixture / "original.safetensors"), "--out", str(tmp_path / "fe")]
        )
        == 0
    )
    fields = json.loads((tmp_path / "fe/embedding_config.json").read_text())
    gpt = MiniTFGPTForCausalLM(MiniTFGPTConfig(**fields, num_hidden_layers=1, num_attention_heads=2)).eval()
    result = gpt.load_state_dict(load_file(tmp_path / "fe/embeddings.safetensors"), strict=False)
    assert not result.unexpected_keys
    io = load_file(fixture / "io.safetensors")
    with torch.no_grad():
        assert max_diff(gpt(io["input_ids"], output_hidden_states=True).hidden_states[0], io["output"]) <= TOLERANCE
    printed = capsys.readouterr().out
    assert "embeddings.safetensors" in printed and "MiniTFGPTConfig" in printed


def test_published_repo_id_downloads_only_data_files_from_the_hub(files, hub, tmp_path, monkeypatch):
    """A repo id on a (loopback) Hub: only config, weights and tokenizer files are downloaded, never the code; the
    download then converts again offline, from the cache."""
    from huggingface_hub import HfApi, constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "cache"))
    repo_id = "tsingla1998/frawdllm-chat"
    api = HfApi(endpoint=hub.url, token=hub.token)
    api.create_repo(repo_id)
    api.upload_folder(repo_id=repo_id, folder_path=str(files.published["learned"]))
    assert set(FRAWDLLM_CODE) <= hub.files(repo_id)

    converted = convert_frawdllm(repo_id, tmp_path / "out")
    assert_reproduces(tmp_path / "out", "frawdllm_learned")
    assert converted.inferred["chat_template"] and repo_id in converted.card
    downloaded = {path.name for path in (tmp_path / "cache").rglob("*") if path.is_file()}
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= downloaded
    assert not downloaded & set(FRAWDLLM_CODE) and not files.marker.exists()

    with hub.offline():
        convert_frawdllm(repo_id, tmp_path / "offline")
    assert_reproduces(tmp_path / "offline", "frawdllm_learned")
    with pytest.raises(ConversionError, match="has no revision 'v9'"):
        convert_frawdllm(repo_id, tmp_path / "other", revision="v9")
    with pytest.raises(ConversionError, match="neither a local path nor a Hub model repository"):
        convert_frawdllm("tsingla1998/no-such-model", tmp_path / "other")
    assert not (tmp_path / "other").exists()
