"""Hostile folders and files: nothing outside a folder leaves the machine, no pickle goes up whatever its name,
a re-packed or non-finite checkpoint never converts into garbage, a folder cannot exhaust the machine, and a
refused pickle is named without advice to load it unsafely. See docs/security.md."""

import argparse
import bz2
import gzip
import io
import json
import os
import pickle
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from bad_inputs import CHAR_GPT, DATA, TINY
from helpers import assert_one_line_error
from safetensors.torch import load_file

from hf_minitf import MiniTFGPTConfig, MiniTFGPTForCausalLM
from hf_minitf.commands.push import add_arguments as add_push_arguments
from hf_minitf.commands.push import run as push_command
from hf_minitf.hub.push import PushError, check_push_folder, push_folder
from hf_minitf.safety.pickles import pickle_reason

SECRET = "the contents of a private file outside the folder"


class RunsCode:
    """A pickle payload: unpickling it would call os.system."""

    def __reduce__(self):
        return os.system, ("echo payload",)


def push_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="minitf push")
    add_push_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.fixture(scope="module")
def gpt_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("gpt") / "model"
    MiniTFGPTForCausalLM(MiniTFGPTConfig(**TINY)).save_pretrained(folder)
    return folder


@pytest.fixture
def folder(gpt_folder, tmp_path) -> Path:
    """A fresh copy of a saved tiny GPT folder, beside a private file it must never upload."""
    copy = tmp_path / "model"
    copy.mkdir()
    for path in gpt_folder.iterdir():
        (copy / path.name).write_bytes(path.read_bytes())
    (tmp_path / "private.txt").write_text(SECRET)
    return copy


def uploaded_bytes(hub) -> bytes:
    return b"".join(content for commit in hub.uploads for content in commit.files.values())


# 1. Links out of the folder.
@pytest.mark.parametrize(
    "make_link",
    [
        pytest.param(lambda folder: (folder / "notes.txt").symlink_to(folder.parent / "private.txt"), id="file-link"),
        pytest.param(
            lambda folder: (folder / "extra").symlink_to(folder.parent, target_is_directory=True), id="folder-link"
        ),
        pytest.param(
            lambda folder: ((folder / "sub").mkdir(), (folder / "sub" / "notes.md").symlink_to("../../private.txt")),
            id="nested-relative-link",
        ),
        pytest.param(
            lambda folder: (
                (folder / "model.safetensors").unlink(),
                (folder.parent / "elsewhere.safetensors").write_bytes(b"x"),
                (folder / "model.safetensors").symlink_to(folder.parent / "elsewhere.safetensors"),
            ),
            id="weights-link",
        ),
    ],
)
def test_push_refuses_links_out_of_the_folder_and_sends_nothing(hub, folder, make_link, capsys):
    make_link(folder)
    uploads = len(hub.uploads)
    assert push_command(push_args(str(folder), "org/leak")) == 2
    error = capsys.readouterr().err
    assert "symbolic links" in error and ("outside" in error or "not a file" in error), error
    assert error.count("\n") == 1
    assert len(hub.uploads) == uploads and "org/leak" not in hub.repos
    assert SECRET.encode() not in uploaded_bytes(hub)


def test_a_link_to_a_file_inside_the_folder_is_sent_as_a_copy(hub, folder):
    (folder / "notes.txt").write_text("inside")
    (folder / "notes-again.txt").symlink_to("notes.txt")
    push_folder(folder, "org/inside-link")
    files = hub.uploads[-1].files
    assert files["notes-again.txt"] == b"inside" == files["notes.txt"]


def test_a_hard_link_to_a_file_outside_the_folder_is_refused(hub, folder, capsys):
    """A hard link is the outside file itself under a second name: its content must not go up either."""
    secret = folder.parent / "private-hard.txt"
    secret.write_text(SECRET)
    os.link(secret, folder / "notes.txt")
    uploads = len(hub.uploads)
    assert push_command(push_args(str(folder), "org/hard-leak")) == 2
    error = capsys.readouterr().err
    assert "notes.txt is a hard link: the same file has 1 other name outside the folder" in error, error
    assert error.count("\n") == 1
    assert len(hub.uploads) == uploads and SECRET.encode() not in uploaded_bytes(hub)


def test_hard_links_between_files_of_the_folder_are_sent(hub, folder):
    (folder / "notes.txt").write_text("inside")
    os.link(folder / "notes.txt", folder / "notes-again.txt")
    push_folder(folder, "org/inside-hard-link")
    files = hub.uploads[-1].files
    assert files["notes-again.txt"] == b"inside" == files["notes.txt"]


def test_the_files_sent_are_checked_again_just_before_the_upload(hub, folder, monkeypatch):
    """Whatever adds files to the upload after the folder check (a card writer, an export) is checked too."""
    import hf_minitf.cards as model_card

    def adds_a_link(staging, *args, **kwargs):
        (Path(staging) / "extra.txt").symlink_to(folder.parent / "private.txt")

    monkeypatch.setattr(model_card, "prepare_upload", adds_a_link)
    uploads = len(hub.uploads)
    with pytest.raises(PushError, match=r"extra.txt would upload .*private.txt, which is outside the folder"):
        push_folder(folder, "org/late-link")
    assert len(hub.uploads) == uploads


# 2. Pickles by content, whatever the name.
def _zip_with(name: str, content: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(name, content)
    return buffer.getvalue()


def _numpy_bytes(array, **options) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, **options)
    return buffer.getvalue()


def _torch_bytes(value, **options) -> bytes:
    buffer = io.BytesIO()
    torch.save(value, buffer, **options)
    return buffer.getvalue()


PICKLES = {
    **{f"head-protocol{protocol}.joblib": pickle.dumps(RunsCode(), protocol) for protocol in range(6)},
    "notes.txt": pickle.dumps({"plain": [1, 2]}, 0),
    "big-protocol0.dat": pickle.dumps([RunsCode()], 0) + b"x" * (5 * 2**20),
    "big-protocol1.dat": pickle.dumps([RunsCode(), *range(300_000)], 1),
    "head.gz": gzip.compress(pickle.dumps(RunsCode(), 4)),
    "head.bz2": bz2.compress(pickle.dumps(RunsCode(), 4)),
    "head.z": __import__("zlib").compress(pickle.dumps(RunsCode(), 4)),
    "torch-zip.json": _torch_bytes({"w": torch.zeros(2)}),
    "torch-legacy.md": _torch_bytes({"w": torch.zeros(2)}, _use_new_zipfile_serialization=False),
    "archive.zip": _zip_with("inner/readme.txt", pickle.dumps(RunsCode(), 0)),
    "objects.npy": _numpy_bytes(np.array([1, None], dtype=object), allow_pickle=True),
    "objects.npz": _zip_with("a.npy", _numpy_bytes(np.array([1, None], dtype=object), allow_pickle=True)),
}
NOT_PICKLES = {
    "vocab.txt": b"cat\ndog\nin\nthe\nhello.\n" * 50,
    "hello.txt": b"hello.",
    "config.json": b'{"a": [1, 2]}',
    "numbers.npy": _numpy_bytes(np.arange(6.0)),
    "numbers.npz": _zip_with("a.npy", _numpy_bytes(np.arange(6.0))),
    # A safetensors header of 640 bytes starts with 0x80 0x02, as a protocol 2 pickle does.
    "header640.safetensors": struct.pack("<Q", 640)
    + json.dumps({"__metadata__": {"format": "pt"}}).encode().ljust(640)
    + b"",
}


@pytest.mark.parametrize("name", PICKLES)
def test_pickles_are_found_by_content(tmp_path, name):
    (tmp_path / name).write_bytes(PICKLES[name])
    assert pickle_reason(tmp_path / name)


@pytest.mark.parametrize("name", NOT_PICKLES)
def test_other_files_are_not_taken_for_pickles(tmp_path, name):
    (tmp_path / name).write_bytes(NOT_PICKLES[name])
    assert pickle_reason(tmp_path / name) is None


@pytest.mark.parametrize("name", ["head.joblib", "notes.txt", "tokenizer_extra.json", "weights.npy", "sub/data.zip"])
def test_push_refuses_a_pickle_whatever_its_name(hub, folder, name, capsys):
    (folder / name).parent.mkdir(exist_ok=True)
    content = {"weights.npy": PICKLES["objects.npy"], "sub/data.zip": PICKLES["torch-zip.json"]}.get(
        name, pickle.dumps(RunsCode(), 4)
    )
    (folder / name).write_bytes(content)
    uploads = len(hub.uploads)
    assert push_command(push_args(str(folder), "org/pickled")) == 2
    error = capsys.readouterr().err
    assert f"pickle files ({name})" in error and f"{name}: it " in error and error.count("\n") == 1
    assert len(hub.uploads) == uploads


def test_a_pickle_added_after_the_folder_check_is_refused(hub, folder, monkeypatch):
    import hf_minitf.cards as model_card

    monkeypatch.setattr(
        model_card,
        "prepare_upload",
        lambda staging, *a, **k: (Path(staging) / "extra.bin").write_bytes(pickle.dumps(RunsCode(), 2)),
    )
    with pytest.raises(PushError, match=r"extra.bin is a pickle: it starts with the pickle protocol 2 opcode"):
        push_folder(folder, "org/late-pickle")


def test_a_clean_folder_still_lists_its_files(folder):
    assert set(check_push_folder(folder)) >= {"config.json", "model.safetensors"}


# 5. Refused pickles: named, said to hold code, never the advice to load them unsafely.
def run_cli(argv, capsys) -> tuple[int, str]:
    from hf_minitf.cli import main

    status = main([str(arg) for arg in argv])
    return status, capsys.readouterr().err


def assert_refused(status: int, err: str, file: str) -> None:
    assert status == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"refused to load {file}" in err and "holds a pickled reference to `posix.system`" in err, err
    assert "weights_only" not in err and "False" not in err


def test_a_weights_file_with_code_is_refused_naming_it(tmp_path, gpt_folder, capsys):
    folder = tmp_path / "model"
    folder.mkdir()
    for path in gpt_folder.iterdir():
        if path.name != "model.safetensors":
            (folder / path.name).write_bytes(path.read_bytes())
    state = {**load_file(gpt_folder / "model.safetensors"), "payload": RunsCode()}
    torch.save(state, folder / "pytorch_model.bin")
    status, err = run_cli(["generate", folder, "hi", "--max-new-tokens", "1"], capsys)
    assert_refused(status, err, str(folder / "pytorch_model.bin"))


def test_resume_from_a_tampered_optimizer_state_is_refused_naming_it(tmp_path, capsys):
    data = tmp_path / "text.txt"
    data.write_text("a tiny text to train a tiny model on. " * 40)
    checkpoints = tmp_path / "checkpoints"
    argv = [
        "train",
        "gpt",
        "--data",
        data,
        "--preset",
        "tiny",
        "--block-size",
        "16",
        "--checkpoint-dir",
        checkpoints,
        "--save-steps",
        "1",
        "--batch-size",
        "4",
        "--no-progress",
    ]
    assert run_cli([*argv, "--out", tmp_path / "first", "--max-steps", "1"], capsys)[0] == 0
    optimizer = checkpoints / "checkpoint-1" / "optimizer.pt"
    state = torch.load(optimizer, weights_only=True)
    state["payload"] = RunsCode()
    torch.save(state, optimizer)
    status, err = run_cli([*argv, "--out", tmp_path / "resumed", "--max-steps", "2", "--resume"], capsys)
    assert_refused(status, err, str(optimizer))
    assert not (tmp_path / "resumed").exists()


def test_resume_from_a_checkpoint_whose_weights_were_cut_is_one_line(tmp_path, capsys):
    """A run killed while the trainer wrote a checkpoint: `--resume` named the file from its header (it was a
    safetensors traceback from inside the trainer), and nothing was trained or written."""
    data = tmp_path / "text.txt"
    data.write_text("a tiny text to train a tiny model on. " * 40)
    checkpoints = tmp_path / "checkpoints"
    argv = ["train", "gpt", "--data", data, "--preset", "tiny", "--block-size", "16", "--checkpoint-dir", checkpoints]
    argv += ["--save-steps", "1", "--batch-size", "4", "--no-progress"]
    assert run_cli([*argv, "--out", tmp_path / "first", "--max-steps", "1"], capsys)[0] == 0
    weights = checkpoints / "checkpoint-1" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    status, err = run_cli([*argv, "--out", tmp_path / "resumed", "--max-steps", "2", "--resume"], capsys)
    assert_one_line_error(status, err, "--resume", str(weights), "earlier checkpoint")
    assert not (tmp_path / "resumed").exists()


@pytest.mark.parametrize(
    "payload, reason",
    [
        (lambda: _torch_bytes({"wte.weight": RunsCode()}), r"pickled reference to `posix.system`"),
        (lambda: b"\x80\x02\x82\x01.", r"pickled content other than tensors \(Unsupported operand 130\)"),
    ],
    ids=["global", "unsupported-opcode"],
)
def test_conversion_refusals_never_advise_the_unsafe_load(tmp_path, payload, reason):
    from hf_minitf.conversion import ConversionError
    from hf_minitf.conversion.char_gpt import convert_char_gpt

    (tmp_path / "model.pt").write_bytes(payload())
    with pytest.raises(ConversionError, match=reason) as error:
        convert_char_gpt(tmp_path / "model.pt", tmp_path / "out", vocab=list("abc"), num_heads=4)
    assert "weights_only" not in str(error.value) and "Nothing from the file was executed" in str(error.value)


# 3. Checkpoints: a re-packed zip is read correctly; non-finite or integer weights never convert silently.
def repack(source: Path, target: Path, compression: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(target, "w", compression) as repacked:
        for info in original.infolist():
            repacked.writestr(info.filename, original.read(info.filename))
    return target


def converted_weights(tmp_path: Path, checkpoint: Path, out: str) -> dict:
    from hf_minitf.conversion.char_gpt import convert_char_gpt

    convert_char_gpt(checkpoint, tmp_path / out, vocab=CHAR_GPT / "vocab.json", num_heads=4)
    return load_file(tmp_path / out / "model.safetensors")


def test_a_checkpoint_repacked_with_compression_converts_to_the_same_weights(tmp_path):
    deflated = repack(CHAR_GPT / "checkpoint.pt", tmp_path / "deflated.pt")
    with zipfile.ZipFile(deflated) as archive:
        assert any(
            info.compress_type == zipfile.ZIP_DEFLATED and info.compress_size < info.file_size
            for info in archive.infolist()
        )
    reference = converted_weights(tmp_path, CHAR_GPT / "checkpoint.pt", "reference")
    repacked = converted_weights(tmp_path, deflated, "repacked")
    assert reference.keys() == repacked.keys()
    for name, tensor in reference.items():
        assert torch.equal(tensor, repacked[name]), name


def test_an_encrypted_checkpoint_entry_is_refused_by_name(tmp_path):
    from hf_minitf.conversion import ConversionError, open_checkpoint

    data = bytearray(repack(CHAR_GPT / "checkpoint.pt", tmp_path / "stored.pt", zipfile.ZIP_STORED).read_bytes())
    header = data.index(b"PK\x01\x02")  # the first central directory entry: set its "encrypted" flag bit
    data[header + 8] |= 0x1
    (tmp_path / "encrypted.pt").write_bytes(bytes(data))
    with pytest.raises(ConversionError, match=r"zip entry checkpoint/data.pkl is encrypted"):
        open_checkpoint(tmp_path / "encrypted.pt")


FROM_QKV = r"qkv_proj.weight \(from blocks.0.attn.qkv.weight\)"


@pytest.mark.parametrize(
    "spoil, message",
    [
        (
            lambda tensor: tensor.index_fill_(0, torch.tensor([0]), float("nan")),
            FROM_QKV + r" holds 32 NaN or infinite",
        ),
        (
            lambda tensor: tensor.index_fill_(0, torch.tensor([1]), float("inf")),
            FROM_QKV + r" holds 32 NaN or infinite",
        ),
        (
            lambda tensor: (tensor * 100).to(torch.int8),
            FROM_QKV + r" is stored as integer int8, but the model needs floating-point weights",
        ),
        (
            lambda tensor: torch.quantize_per_tensor(tensor, 0.01, 0, torch.qint8),
            FROM_QKV + r" is stored as quantized qint8",
        ),
    ],
    ids=["nan", "inf", "int8", "qint8"],
)
@pytest.mark.parametrize("dtype", ["auto", "float16"])
def test_non_finite_or_integer_weights_are_refused_naming_the_tensor(tmp_path, spoil, message, dtype):
    from hf_minitf.conversion import ConversionError
    from hf_minitf.conversion.char_gpt import convert_char_gpt

    state = load_file(CHAR_GPT / "original.safetensors")
    state["blocks.0.attn.qkv.weight"] = spoil(state["blocks.0.attn.qkv.weight"].clone())
    torch.save(state, tmp_path / "spoiled.pt")
    with pytest.raises(ConversionError, match=message):
        convert_char_gpt(
            tmp_path / "spoiled.pt", tmp_path / "out", vocab=CHAR_GPT / "vocab.json", num_heads=4, dtype=dtype
        )
    assert not (tmp_path / "out").exists()


def test_an_embedding_layer_with_nan_is_refused(tmp_path):
    from hf_minitf.cli import main as minitf_main

    state = torch.load(DATA / "transformer_embedding" / "checkpoint.pt", weights_only=True)
    weights = state.get("model_state_dict", state)
    name = next(key for key in weights if key.endswith("token_embedding.weight"))
    weights[name][3, 2] = float("nan")
    torch.save(state, tmp_path / "nan.pt")
    errors = io.StringIO()
    with __import__("contextlib").redirect_stderr(errors):
        assert (
            minitf_main(["convert", "transformer-embedding", str(tmp_path / "nan.pt"), "--out", str(tmp_path / "out")])
            == 2
        )
    assert "holds 1 NaN or infinite values" in errors.getvalue() and not (tmp_path / "out").exists()


# 4. A downloaded folder cannot exhaust the machine: card YAML.
def alias_bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 9) + "]" for level in range(1, levels)]
    return "---\n" + "\n".join(lines) + "\ntags: [minitf]\n---\n\n# A card\n"


def test_a_card_whose_yaml_expands_exponentially_is_refused_by_info(folder, capsys):
    import resource

    (folder / "README.md").write_text(alias_bomb())  # 9**9 (387 million) strings once expanded
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    status, err = run_cli(["info", folder], capsys)
    assert status == 2 and "expands through aliases" in err and "README.md" in err and err.count("\n") == 1, err
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB: no blow-up


def test_a_card_that_contains_itself_is_refused(folder, capsys):
    (folder / "README.md").write_text("---\nloop: &loop [*loop, *loop]\n---\n\ntext\n")
    status, err = run_cli(["info", folder], capsys)
    assert status == 2 and "expands through aliases" in err


def test_saving_over_a_folder_with_a_bomb_card_is_refused_before_writing(folder):
    from hf_minitf.safety.files import UnsafeFileError

    (folder / "README.md").write_text(alias_bomb())
    model = MiniTFGPTForCausalLM.from_pretrained(folder)
    with pytest.raises(UnsafeFileError, match="expands through aliases"):
        model.save_pretrained(folder.parent / "saved")


def test_push_refuses_a_bomb_card(hub, folder, capsys):
    (folder / "README.md").write_text(alias_bomb())
    uploads = len(hub.uploads)
    assert push_command(push_args(str(folder), "org/bomb")) == 2
    assert "expands through aliases" in capsys.readouterr().err and len(hub.uploads) == uploads


def test_ordinary_aliases_and_cards_still_load(folder, capsys):
    (folder / "README.md").write_text("---\nlicense: &l mit\nother: *l\ntags: [minitf]\n---\n\n# Card\n")
    status, err = run_cli(["info", folder], capsys)
    assert status == 0, err


# 4. A downloaded folder cannot exhaust the machine: config sizes.
def folder_with_config(folder: Path, **changes) -> Path:
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"num_hidden_layers": 10**9}, r"num_hidden_layers=1000000000 is more than the 10,000 layers"),
        (
            {"hidden_size": 2**40, "intermediate_size": None},
            r"hidden_size=1099511627776 \(with .*\) makes a model of at "
            r"least .* more than this machine's",
        ),
        ({"vocab_size": 10**12}, r"vocab_size=1000000000000 \(with .*\) makes a model"),
        ({"intermediate_size": 2**45}, r"intermediate_size=35184372088832 .* makes a model"),
        ({"max_position_embeddings": 10**13}, r"max_position_embeddings=10000000000000 .* makes a model"),
    ],
    ids=["layers", "hidden", "vocab", "intermediate", "positions"],
)
def test_a_config_too_large_for_the_machine_fails_fast_naming_the_field(folder, changes, field, capsys):
    import time

    from transformers import AutoModelForCausalLM

    folder_with_config(folder, **changes)
    start = time.perf_counter()
    with pytest.raises(ValueError, match=field):
        AutoModelForCausalLM.from_pretrained(folder)
    status, err = run_cli(["generate", folder, "hi"], capsys)
    assert status == 2 and err.count("\n") == 1 and "minitf generate: error: MiniTFGPTConfig: " in err, err
    assert time.perf_counter() - start < 30


@pytest.mark.parametrize(
    "config_class, sizes",
    [
        ("MiniTFEncoderConfig", {"hidden_size": 2**30, "num_attention_heads": 1}),
        ("MiniTFSeq2SeqConfig", {"src_vocab_size": 10**12}),
        ("MiniTFGPTConfig", {"hidden_size": 2**40 + 1, "num_attention_heads": 2, "intermediate_size": 4}),
    ],
    ids=["encoder", "seq2seq", "gpt-no-divisor-scan"],
)
def test_every_family_bounds_its_sizes(config_class, sizes):
    import hf_minitf

    with pytest.raises(ValueError, match="more than this machine's"):
        getattr(hf_minitf, config_class)(**sizes)


def test_the_bound_names_the_field_against_a_given_memory():
    from hf_minitf.safety.model_configs import check_model_fits

    config = MiniTFGPTConfig(**TINY)
    check_model_fits(config, memory=2**20)  # a tiny model fits in a MiB
    config.num_hidden_layers = 5_000
    with pytest.raises(ValueError, match=r"num_hidden_layers=5000 \(with .*\) makes a model of at least"):
        check_model_fits(config, memory=2**20)


def test_a_config_that_asks_for_weights_the_folder_lacks_is_an_error(folder):
    from transformers import AutoModelForCausalLM

    folder_with_config(folder, num_hidden_layers=3)  # the weights hold one layer
    with pytest.raises(
        ValueError,
        match=r"the weights lack 24 tensors that its config asks for "
        r"\(model.layers.1.*num_hidden_layers",
    ):
        AutoModelForCausalLM.from_pretrained(folder)


def test_a_config_that_unties_a_head_the_folder_lacks_is_an_error(folder):
    """`tie_word_embeddings: false` asks for an `lm_head` the folder of a tied GPT does not hold: transformers
    initialised it at random (a load report only) and the model wrote garbage."""
    from transformers import AutoModelForCausalLM

    folder_with_config(folder, tie_word_embeddings=False)
    with pytest.raises(ValueError, match=r"the weights lack 1 tensors that its config asks for \(lm_head.weight\)"):
        AutoModelForCausalLM.from_pretrained(folder)


def test_a_new_head_on_a_saved_base_model_still_loads(tmp_path):
    from transformers import AutoModelForSequenceClassification

    from hf_minitf import MiniTFEncoderConfig, MiniTFEncoderModel

    MiniTFEncoderModel(MiniTFEncoderConfig(**TINY)).save_pretrained(tmp_path / "encoder")
    model, info = AutoModelForSequenceClassification.from_pretrained(
        tmp_path / "encoder", num_labels=2, output_loading_info=True
    )
    assert info["missing_keys"] and all(not key.startswith("model.") for key in info["missing_keys"])


def test_a_compressed_pytorch_model_bin_is_refused_by_from_pretrained(folder, tmp_path):
    from transformers import AutoModelForCausalLM

    state = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    torch.save(state, tmp_path / "stored.bin")
    repack(tmp_path / "stored.bin", folder / "pytorch_model.bin")
    with pytest.raises(ValueError, match=r"pytorch_model.bin: its zip entry .* is compressed or encrypted"):
        AutoModelForCausalLM.from_pretrained(folder)
    # Stored as torch.save writes it, the same file loads with the right weights.
    (folder / "pytorch_model.bin").write_bytes((tmp_path / "stored.bin").read_bytes())
    loaded = AutoModelForCausalLM.from_pretrained(folder).state_dict()
    assert all(torch.equal(loaded[name], tensor) for name, tensor in state.items())


# 6. SIGTERM mid-write behaves like Ctrl-C: the half-written folder is removed.
# The child takes Ctrl-C as a terminal's foreground process does (a shell's background job starts with SIGINT ignored).
SLOW_CONVERT = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
import hf_minitf.conversion.base as base
from hf_minitf.cli import main

real = base.write_safetensors
def slow(path, plans, metadata=None):
    real(path, plans, metadata)
    print("writing", flush=True)
    time.sleep(60)
base.write_safetensors = slow
sys.exit(main(sys.argv[1:]))
"""


def signalled_while_writing(tmp_path: Path, signal_number: int) -> tuple[int, str]:
    """`minitf convert` to tmp_path/out, sent `signal_number` once its work folder is being written: the exit status
    and what it said on stderr."""
    import subprocess
    import sys

    argv = ["convert", "char-gpt", CHAR_GPT / "checkpoint.pt", "--vocab", CHAR_GPT / "vocab.json", "--num-heads", "4"]
    process = subprocess.Popen(
        [sys.executable, "-c", SLOW_CONVERT, *map(str, argv), "--out", str(tmp_path / "out")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],
    )
    try:
        assert process.stdout.readline().strip() == "writing"
        assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".out.writing-")]
        process.send_signal(signal_number)
        _, err = process.communicate(timeout=120)
    finally:
        process.kill()
        process.wait()
    return process.returncode, err


def test_sigterm_while_writing_leaves_no_half_written_folder(tmp_path):
    """`minitf` and `python -m hf_minitf.conversion` install the same handler (hf_minitf.cli.sigterm_exits)."""
    import signal

    status, _ = signalled_while_writing(tmp_path, signal.SIGTERM)
    assert status == 128 + signal.SIGTERM
    assert sorted(path.name for path in tmp_path.iterdir()) == [], "a half-written folder was left behind"


def test_ctrl_c_while_writing_is_one_line_and_leaves_nothing(tmp_path):
    """Ctrl-C (SIGINT) mid-write: exit 130, one line saying no output was put in place (it was a 38-line
    KeyboardInterrupt traceback), and no half-written folder."""
    import signal

    status, err = signalled_while_writing(tmp_path, signal.SIGINT)
    assert status == 130 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "minitf convert char-gpt: interrupted; no output was put in place (outputs are written whole or not at all; "
        "a previous one is as it was)"
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == [], "a half-written folder was left behind"


def test_info_refuses_a_safetensors_header_length_past_the_end(folder, capsys):
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes((2**60).to_bytes(8, "little") + data[8:])
    status, err = run_cli(["info", folder], capsys)
    assert status == 2 and err.count("\n") == 1
    assert (
        "model.safetensors is not a readable safetensors file (Error while deserializing header: header too large)"
        in err
    )


def test_from_pretrained_of_a_weights_file_with_code_names_it(tmp_path, gpt_folder):
    from transformers import AutoModelForCausalLM

    folder = tmp_path / "model"
    folder.mkdir()
    for path in gpt_folder.iterdir():
        if path.name != "model.safetensors":
            (folder / path.name).write_bytes(path.read_bytes())
    torch.save({**load_file(gpt_folder / "model.safetensors"), "payload": RunsCode()}, folder / "pytorch_model.bin")
    with pytest.raises(
        pickle.UnpicklingError,
        match=r"refused to load .*pytorch_model.bin: it holds a pickled "
        r"reference to `posix.system`",
    ) as error:
        AutoModelForCausalLM.from_pretrained(folder)
    assert isinstance(error.value, ValueError) and "weights_only" not in str(error.value)


# 1b. Files the package writes into a model folder: a link there (out of the folder) is replaced, never followed.
def _write_card(folder: Path) -> None:
    from hf_minitf.cards import write_model_card

    write_model_card(folder)


def _record_evaluation(folder: Path) -> None:
    from hf_minitf.cards import record_evaluation

    record_evaluation(folder, {"perplexity": 3.0}, task_type="text-generation", dataset_name="a.txt")


def _write_runs_in(folder: Path) -> None:
    from hf_minitf.cards import RunRow, write_runs_in

    write_runs_in(folder / "README.md", [RunRow("onnxruntime", "model.onnx", "fp32", "1 kB", "equal", "", "", "")])


def _add_translation_pipeline(folder: Path) -> None:
    from hf_minitf.cards.update import add_translation_pipeline

    add_translation_pipeline(folder)


def _record_run(folder: Path) -> None:
    from types import SimpleNamespace

    from hf_minitf.training.runs import RecordRun

    state = SimpleNamespace(global_step=1, is_world_process_zero=True)
    RecordRun({"seed": 1}).on_save(SimpleNamespace(output_dir=str(folder.parent)), state, None)


WRITTEN_PATHS = [  # (the path planted as a link, the writer, what becomes of the link)
    pytest.param("README.md", _write_card, "replaced", id="card"),
    pytest.param(f".README.md.writing-{os.getpid()}", _write_card, "removed", id="card-temporary-name"),
    pytest.param(".eval_results/a.txt.yaml", _record_evaluation, "replaced", id="eval-results-file"),
    pytest.param(".eval_results", _record_evaluation, "replaced", id="eval-results-folder"),
    pytest.param("README.md", _write_runs_in, "kept", id="runs-in"),  # no card to add rows to: nothing written
    pytest.param("pipeline_minitf_translation.py", _add_translation_pipeline, "replaced", id="translation-pipeline"),
    pytest.param("config.json", _add_translation_pipeline, "refused", id="translation-config"),  # read first
    pytest.param("minitf_run.json", _record_run, "replaced", id="run-record"),
]


@pytest.mark.parametrize(("name", "write", "outcome"), WRITTEN_PATHS)
def test_a_written_path_linked_out_of_the_folder_is_replaced_never_followed(gpt_folder, tmp_path, name, write, outcome):
    """Each file the package writes into a model folder (cards and their temporary name, `.eval_results/`, Runs in
    rows, a translator's pipeline and config, a checkpoint's run record), planted as a link out of the folder:
    the target outside is neither written nor read into the folder (a file the writer must read first, linked
    out, is refused in one line naming it)."""
    from hf_minitf.safety.files import UnsafeFileError

    folder = tmp_path / ("checkpoint-1" if name == "minitf_run.json" else "model")
    folder.mkdir()
    for path in gpt_folder.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.txt.yaml").write_text(SECRET)
    secret = outside / "private.txt"
    secret.write_text(json.dumps({"secret": SECRET, **json.loads((folder / "config.json").read_text())}))
    link = folder / name
    link.parent.mkdir(exist_ok=True)
    link.unlink(missing_ok=True)
    link.symlink_to(outside if name == ".eval_results" else secret)
    if outcome == "refused":
        with pytest.raises(UnsafeFileError, match=f"{name}.* links to .*outside the folder"):
            write(folder)
    else:
        write(folder)
    assert json.loads(secret.read_text())["secret"] == SECRET and (outside / "a.txt.yaml").read_text() == SECRET
    assert sorted(path.name for path in outside.iterdir()) == ["a.txt.yaml", "private.txt"]
    assert link.is_symlink() == (outcome in ("kept", "refused"))
    assert link.exists() == (outcome != "removed")
    written = b"".join(path.read_bytes() for path in folder.rglob("*") if path.is_file() and not path.is_symlink())
    assert SECRET.encode() not in written
