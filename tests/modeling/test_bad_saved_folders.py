"""Bad input, one row each: saved folders: a hand-edited or damaged config.json or model.safetensors."""

import json
import os
import shutil
from pathlib import Path

from bad_inputs import (
    CHAR_GPT,
    CommandFailed,
    bad,
    bad_input_tests,
    char_gpt_folder,
    checkpoint_folder,
    edit_config,
    keeping,
    minitf,
    saved_gpt,
    saved_model,
    truncate_weights,
    write,
)
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

from hf_minitf.conversion.char_gpt import convert_char_gpt
from hf_minitf.safety.output_folders import OutputFolderError

GIB_256 = 2**38
OVERLAPPING = {
    "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
    "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]},
}
PAST_THE_END = {"a": {"dtype": "F32", "shape": [400], "data_offsets": [0, 1600]}}
SHAPE_NOT_OFFSETS = {"a": {"dtype": "F32", "shape": [5], "data_offsets": [0, 16]}}
CLAIMS_256_GIB = {"model.embed_tokens.weight": {"dtype": "F16", "shape": [2**37], "data_offsets": [0, GIB_256]}}


def weights_header(header: dict, data: int = 24, sparse_to: int | None = None, name: str = "model.safetensors"):
    """An edit replacing the weights file `name` with one of this header and `data` zero bytes, or (`sparse_to`) a
    sparse file of that much data: holes, no disk."""

    def edit(folder: Path) -> None:
        raw = json.dumps(header).encode()
        path = folder / name
        path.write_bytes(len(raw).to_bytes(8, "little") + raw + bytes(data))
        if sparse_to is not None:
            os.truncate(path, 8 + len(raw) + sparse_to)

    return edit


def sharded(edit_shard):
    """An edit splitting the folder's weights as an index and one shard, which `edit_shard` then breaks."""

    def edit(folder: Path) -> None:
        shard = "model-00001-of-00001.safetensors"
        names = AutoModelForCausalLM.from_pretrained(folder).state_dict()
        (folder / "model.safetensors").rename(folder / shard)
        index = {"metadata": {}, "weight_map": {name: shard for name in names if name != "lm_head.weight"}}
        write(folder / "model.safetensors.index.json", json.dumps(index))
        edit_shard(folder)

    return edit


def weights_of(tmp: Path, family: str):
    """An edit putting the weights of a tiny `family` model in place of the folder's own."""

    def edit(folder: Path) -> None:
        shutil.move(saved_model(tmp / "other", family) / "model.safetensors", folder / "model.safetensors")

    return edit


def edited(folder: Path, edit) -> Path:
    edit(folder)
    return folder


def family_folder(tmp: Path, family: str, weights: str) -> Path:
    """A tiny `family` folder holding the weights of a `weights` model."""
    folder = saved_model(tmp, family)
    weights_of(tmp, weights)(folder)
    return folder


BAD_INPUTS = [
    # Saved folders: a hand-edited or damaged config.json or model.safetensors.
    bad(
        "folder-config-string-size",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, edit_config(hidden_size="16"))),
        ValueError,
        r"hidden_size must be a positive integer, got '16'",
    ),
    bad(
        "folder-config-unknown-activation",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, edit_config(hidden_act="gelu2"))),
        ValueError,
        r"hidden_act .* got 'gelu2'",
    ),
    bad(
        "folder-config-pad-outside-vocab",
        lambda tmp: AutoConfig.from_pretrained(saved_gpt(tmp, edit_config(pad_token_id=40))),
        ValueError,
        r"pad_token_id=40 is outside the vocabulary",
    ),
    bad(
        "folder-config-not-json",
        lambda tmp: AutoModelForCausalLM.from_pretrained(
            saved_gpt(tmp, lambda folder: write(folder / "config.json", "{hidden_size: 16"))
        ),
        OSError,
        r"config.json' is not a valid JSON file",
    ),
    bad(
        "folder-weights-missing",
        lambda tmp: AutoModelForCausalLM.from_pretrained(
            saved_gpt(tmp, lambda folder: (folder / "model.safetensors").unlink())
        ),
        OSError,
        r"no file named model.safetensors",
    ),
    bad(
        "folder-weights-truncated",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, truncate_weights(-64))),
        ValueError,
        r"gpt/model.safetensors: tensor `.*` has data_offsets \[\d+, \d+\], past the end of the file's [\d,]+ "
        r"bytes of data .*: the file is cut short .*; save the weights again with save_pretrained",
    ),
    bad(
        "folder-weights-header-cut",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, truncate_weights(6))),
        ValueError,
        r"gpt/model.safetensors: the file is 6 bytes, too short for the 8-byte header length of a safetensors file; "
        r"save the weights again",
    ),
    bad(
        "folder-weights-offsets-overlap",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, weights_header(OVERLAPPING))),
        ValueError,
        r"gpt/model.safetensors: tensor `b` has data_offsets \[8, 24\], which overlap those of tensor `a` \[0, 16\] "
        r"\(impossible offsets\); save the weights again with save_pretrained",
    ),
    bad(
        "folder-weights-offsets-past-end",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, weights_header(PAST_THE_END, data=16))),
        ValueError,
        r"gpt/model.safetensors: tensor `a` has data_offsets \[0, 1600\], past the end of the file's 16 bytes of "
        r"data \(the file is 90 bytes, 74 of them its header\).*save the weights again with save_pretrained",
    ),
    bad(
        "folder-weights-shape-not-offsets",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, weights_header(SHAPE_NOT_OFFSETS, data=16))),
        ValueError,
        r"gpt/model.safetensors: tensor `a` is F32 of shape \[5\]: 5 elements take 20 bytes, but its data_offsets "
        r"\[0, 16\] hold 16 \(impossible offsets\)",
    ),
    bad(
        "folder-weights-gap-between-tensors",
        lambda tmp: AutoModelForCausalLM.from_pretrained(
            saved_gpt(tmp, weights_header({"a": {"dtype": "U8", "shape": [8], "data_offsets": [8, 16]}}, data=16))
        ),
        ValueError,
        r"tensor `a` has data_offsets \[8, 16\], leaving bytes \[0, 8\) at the start of the data unused",
    ),
    bad(
        "folder-weights-header-claims-256-gib",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, weights_header(CLAIMS_256_GIB, data=16))),
        ValueError,
        r"gpt/model.safetensors: tensor `model.embed_tokens.weight` has data_offsets \[0, 274877906944\], past the "
        r"end of the file's 16 bytes of data",
    ),
    bad(
        "folder-weights-sparse-256-gib",
        lambda tmp: AutoModelForCausalLM.from_pretrained(
            saved_gpt(tmp, weights_header(CLAIMS_256_GIB, data=0, sparse_to=GIB_256))
        ),
        ValueError,
        r"gpt/model.safetensors: its header claims 256 GiB of weights \(tensor `model.embed_tokens.weight`: F16 of "
        r"shape \[137438953472\], data_offsets \[0, 274877906944\]\), though only .* of it is on disk \(a sparse "
        r"file\).* more than this machine's .* of memory could hold, so nothing was read; save the weights again",
    ),
    bad(
        "folder-weights-shard-offsets-overlap",
        lambda tmp: AutoModelForCausalLM.from_pretrained(
            saved_gpt(tmp, sharded(weights_header(OVERLAPPING, name="model-00001-of-00001.safetensors")))
        ),
        ValueError,
        r"gpt/model-00001-of-00001.safetensors: tensor `b` has data_offsets \[8, 24\], which overlap",
    ),
    bad(
        "generate-weights-offsets-overlap",
        lambda tmp: minitf("generate", edited(char_gpt_folder(tmp), weights_header(OVERLAPPING)), "a"),
        CommandFailed,
        r"exit 2: minitf generate: error: .*chars/model.safetensors: tensor `b` has data_offsets \[8, 24\], which "
        r"overlap",
    ),
    bad(
        "folder-gpt-config-encoder-weights",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, weights_of(tmp, "encoder"))),
        ValueError,
        r"gpt/model.safetensors holds tensors named like a minitf_encoder model \("
        r"layers.0.self_attn.k_proj.bias, .*\) but config.json is minitf_gpt \(MiniTFGPTForCausalLM, which needs "
        r".*qkv_proj.*\): these are the weights of another model",
    ),
    bad(
        "automodel-encoder-config-gpt-weights",
        lambda tmp: AutoModel.from_pretrained(family_folder(tmp, "encoder", "gpt")),
        ValueError,
        r"encoder/model.safetensors holds tensors named like a minitf_gpt model \(.*qkv_proj.*\) but "
        r"config.json is minitf_encoder \(MiniTFEncoderModel, which needs .*q_proj.*\): these are the weights of "
        r"another model",
    ),
    bad(
        "folder-weights-of-no-minitf-family",
        lambda tmp: AutoModelForCausalLM.from_pretrained(
            saved_gpt(tmp, weights_header({"embeddings.word_embeddings.weight": OVERLAPPING["a"]}, data=16))
        ),
        ValueError,
        r"gpt: the weights lack 17 tensors that its config asks for \(.*\), and hold 1 it does not "
        r"\(embeddings.word_embeddings.weight\); config.json does not describe the weights beside it",
    ),
    bad(
        "folder-gpt-config-seq2seq-weights",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, weights_of(tmp, "seq2seq"))),
        ValueError,
        r"gpt/model.safetensors holds tensors named like a minitf_seq2seq model .* but config.json is minitf_gpt",
    ),
    bad(
        "folder-config-disagrees-with-weights",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, edit_config(hidden_size=32))),
        ValueError,
        r"model.safetensors: tensor `model\.[a-z_.0-9]+` is \[[0-9, ]+\] but config.json makes it \[[0-9, ]+\] "
        r"\(and \d+ more tensors\); config.json does not describe the weights",
    ),
    bad(
        "folder-config-billion-layers",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, edit_config(num_hidden_layers=10**9))),
        ValueError,
        r"num_hidden_layers=1000000000 is more than",
    ),
    bad(
        "folder-config-fewer-layers-than-weights",
        lambda tmp: AutoModelForCausalLM.from_pretrained(
            saved_gpt(tmp, edit_config(num_hidden_layers=1), num_hidden_layers=3)
        ),
        ValueError,
        r"gpt: the weights hold \d+ tensors of layers its config does not have \(model\.layers\.1\..*num_hidden_layers "
        r"is 1\): loading would drop those layers",
    ),
    bad(
        "folder-config-hidden-2-40",
        lambda tmp: AutoConfig.from_pretrained(saved_gpt(tmp, edit_config(hidden_size=2**40, intermediate_size=None))),
        ValueError,
        r"hidden_size=1099511627776 .* more than this machine's",
    ),
    bad(
        "folder-config-layers-not-on-disk",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, edit_config(num_hidden_layers=2))),
        ValueError,
        r"the weights lack 12 tensors .*model.layers.1",
    ),
    bad(
        "convert-api-out-holds-input",
        lambda tmp: keeping(
            checkpoint_folder(tmp) / "checkpoint.pt",
            lambda: convert_char_gpt(
                tmp / "run" / "checkpoint.pt", tmp / "run", vocab=CHAR_GPT / "vocab.json", num_heads=4, overwrite=True
            ),
        ),
        OutputFolderError,
        r"output folder .*run holds the input .*checkpoint.pt: writing there would delete",
    ),
]
test_bad_input_is_refused_naming_the_problem, test_ids_are_unique = bad_input_tests(BAD_INPUTS)
