"""Bad input, one row each: saved folders: a hand-edited or damaged config.json or model.safetensors."""

import pytest
from bad_inputs import (
    CHAR_GPT,
    assert_ids_unique,
    bad,
    check_bad_input,
    checkpoint_folder,
    edit_config,
    keeping,
    saved_gpt,
    truncate_weights,
    write,
)
from safetensors import SafetensorError
from transformers import AutoConfig, AutoModelForCausalLM

from hf_minitf.conversion.char_gpt import convert_char_gpt
from hf_minitf.safety.output_folders import OutputFolderError

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
        SafetensorError,
        r"deserializing header: incomplete metadata",
    ),
    bad(
        "folder-weights-header-cut",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, truncate_weights(6))),
        SafetensorError,
        r"deserializing header",
    ),
    bad(
        "folder-config-disagrees-with-weights",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, edit_config(hidden_size=32))),
        RuntimeError,
        r"ignore_mismatched_sizes",
    ),
    bad(
        "folder-config-billion-layers",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, edit_config(num_hidden_layers=10**9))),
        ValueError,
        r"num_hidden_layers=1000000000 is more than",
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


@pytest.mark.parametrize("action, error, message", BAD_INPUTS)
def test_bad_input_is_refused_naming_the_problem(tmp_path, action, error, message):
    check_bad_input(tmp_path, action, error, message)


def test_ids_are_unique():
    assert_ids_unique(BAD_INPUTS)
