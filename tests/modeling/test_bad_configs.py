"""Bad input, one row each: configs: types, ranges and names, from the constructor, a later assignment, a from_pretrained kwarg or JSON."""

import pytest
from bad_inputs import (
    assert_ids_unique,
    bad,
    check_bad_input,
    edit_config,
    saved_gpt,
)
from transformers import AutoModelForCausalLM

from hf_minitf import MiniTFEncoderConfig, MiniTFGPTConfig, MiniTFSeq2SeqConfig

BAD_INPUTS = [
    # Configs: types, ranges and names, from the constructor, a later assignment, a from_pretrained kwarg or JSON.
    bad(
        "gpt-zero-heads",
        lambda tmp: MiniTFGPTConfig(num_attention_heads=0),
        ValueError,
        r"num_attention_heads must be a positive integer, got 0",
    ),
    bad(
        "encoder-zero-heads",
        lambda tmp: MiniTFEncoderConfig(num_attention_heads=0),
        ValueError,
        r"num_attention_heads must be a positive integer, got 0",
    ),
    bad(
        "seq2seq-zero-heads",
        lambda tmp: MiniTFSeq2SeqConfig(num_attention_heads=0),
        ValueError,
        r"num_attention_heads must be a positive integer, got 0",
    ),
    bad(
        "gpt-string-size",
        lambda tmp: MiniTFGPTConfig(hidden_size="256"),
        ValueError,
        r"MiniTFGPTConfig: hidden_size must be a positive integer, got '256' \(str\)",
    ),
    bad(
        "encoder-float-size",
        lambda tmp: MiniTFEncoderConfig(hidden_size=64.0),
        ValueError,
        r"hidden_size must be a positive integer, got 64.0 \(float\)",
    ),
    bad(
        "seq2seq-string-vocab",
        lambda tmp: MiniTFSeq2SeqConfig(src_vocab_size="100"),
        ValueError,
        r"src_vocab_size must be a positive integer, got '100'",
    ),
    bad(
        "gpt-bool-layers",
        lambda tmp: MiniTFGPTConfig(num_hidden_layers=True),
        ValueError,
        r"num_hidden_layers must be a positive integer, got True \(bool\)",
    ),
    bad("gpt-alias-size", lambda tmp: MiniTFGPTConfig(n_embd="64"), ValueError, r"hidden_size .* got '64'"),
    bad(
        "gpt-unknown-activation",
        lambda tmp: MiniTFGPTConfig(hidden_act="swishy"),
        ValueError,
        r"hidden_act must be an activation name .* got 'swishy'",
    ),
    bad(
        "encoder-unknown-activation",
        lambda tmp: MiniTFEncoderConfig(hidden_act="Gelu"),
        ValueError,
        r"hidden_act must be an activation name .*'gelu'.* got 'Gelu'",
    ),
    bad(
        "seq2seq-no-activation",
        lambda tmp: MiniTFSeq2SeqConfig(hidden_act=None),
        ValueError,
        r"hidden_act must be an activation name .* got None",
    ),
    bad(
        "gpt-pad-outside-vocab",
        lambda tmp: MiniTFGPTConfig(vocab_size=100, pad_token_id=100),
        ValueError,
        r"pad_token_id=100 is outside the vocabulary \(ids 0..99\)",
    ),
    bad(
        "gpt-eos-list-outside-vocab",
        lambda tmp: MiniTFGPTConfig(vocab_size=100, eos_token_id=[3, 250]),
        ValueError,
        r"eos_token_id=\[3, 250\] is outside the vocabulary",
    ),
    bad(
        "gpt-negative-bos",
        lambda tmp: MiniTFGPTConfig(bos_token_id=-1),
        ValueError,
        r"bos_token_id must be null, an integer >= 0, got -1",
    ),
    bad(
        "encoder-pad-outside-vocab",
        lambda tmp: MiniTFEncoderConfig(vocab_size=10, pad_token_id=10),
        ValueError,
        r"pad_token_id=10 is outside the vocabulary",
    ),
    bad(
        "seq2seq-start-outside-vocab",
        lambda tmp: MiniTFSeq2SeqConfig(vocab_size=50, decoder_start_token_id=60),
        ValueError,
        r"decoder_start_token_id=60 is outside the source or target vocabulary",
    ),
    bad(
        "seq2seq-eos-outside-source-vocab",
        lambda tmp: MiniTFSeq2SeqConfig(src_vocab_size=3),
        ValueError,
        r"eos_token_id=3 is outside the source or target vocabulary \(ids 0..2\)",
    ),
    bad(
        "gpt-dropout-above-1",
        lambda tmp: MiniTFGPTConfig(hidden_dropout=1.5),
        ValueError,
        r"hidden_dropout must be a finite number in \[0.0, 1.0\), got 1.5",
    ),
    bad(
        "encoder-negative-dropout",
        lambda tmp: MiniTFEncoderConfig(attention_dropout=-0.1),
        ValueError,
        r"attention_dropout must be a finite number in \[0.0, 1.0\), got -0.1",
    ),
    bad(
        "encoder-classifier-dropout",
        lambda tmp: MiniTFEncoderConfig(classifier_dropout=2),
        ValueError,
        r"classifier_dropout must be a finite number in \[0.0, 1.0\) or null, got 2",
    ),
    bad(
        "seq2seq-string-dropout",
        lambda tmp: MiniTFSeq2SeqConfig(hidden_dropout="0.1"),
        ValueError,
        r"hidden_dropout must be a finite number in \[0.0, 1.0\), got '0.1' \(str\)",
    ),
    bad(
        "seq2seq-label-smoothing-1",
        lambda tmp: MiniTFSeq2SeqConfig(label_smoothing=1.0),
        ValueError,
        r"label_smoothing must be a finite number in \[0, 1\), got 1.0",
    ),
    bad(
        "seq2seq-positive-mask-value",
        lambda tmp: MiniTFSeq2SeqConfig(attention_mask_value=1e9),
        ValueError,
        r"attention_mask_value must be a finite number <= 0 or null, got 1000000000.0",
    ),
    bad(
        "gpt-zero-eps",
        lambda tmp: MiniTFGPTConfig(layer_norm_eps=0),
        ValueError,
        r"layer_norm_eps must be a finite number > 0",
    ),
    bad(
        "gpt-nan-rope-theta",
        lambda tmp: MiniTFGPTConfig(rope_theta=float("nan")),
        ValueError,
        r"rope_theta must be a finite number > 0, got nan",
    ),
    bad(
        "gpt-infinite-eps",
        lambda tmp: MiniTFGPTConfig(layer_norm_eps=float("inf")),
        ValueError,
        r"layer_norm_eps must be a finite number > 0, got inf",
    ),
    bad(
        "encoder-infinite-eps",
        lambda tmp: MiniTFEncoderConfig(layer_norm_eps=float("inf")),
        ValueError,
        r"layer_norm_eps must be a finite number > 0, got inf",
    ),
    bad(
        "seq2seq-infinite-eps",
        lambda tmp: MiniTFSeq2SeqConfig(layer_norm_eps=float("inf")),
        ValueError,
        r"layer_norm_eps must be a finite number > 0, got inf",
    ),
    bad(
        "gpt-infinite-rope-theta",
        lambda tmp: MiniTFGPTConfig(rope_theta=float("inf")),
        ValueError,
        r"rope_theta must be a finite number > 0, got inf",
    ),
    bad(
        "encoder-infinite-initializer-range",
        lambda tmp: MiniTFEncoderConfig(initializer_range=float("inf")),
        ValueError,
        r"initializer_range must be a finite number >= 0, got inf",
    ),
    bad(
        "seq2seq-minus-infinite-mask-value",
        lambda tmp: MiniTFSeq2SeqConfig(attention_mask_value=float("-inf")),
        ValueError,
        r"attention_mask_value must be a finite number <= 0 or null, got -inf",
    ),
    bad(
        "gpt-dropout-1",
        lambda tmp: MiniTFGPTConfig(attention_dropout=1.0),
        ValueError,
        r"attention_dropout must be a finite number in \[0.0, 1.0\), got 1.0",
    ),
    bad(
        "gpt-rope-scaling-linear",
        lambda tmp: MiniTFGPTConfig(
            position_embedding_type="rope", rope_scaling={"rope_type": "linear", "factor": 4.0}
        ),
        ValueError,
        r"rope_parameters \(rope_scaling\) \{'rope_type': 'linear', 'factor': 4.0\} asks for 'linear' rotary scaling, "
        r"which MiniTF's positions do not implement \(the model would ignore it",
    ),
    bad(
        "folder-config-rope-parameters-yarn",
        lambda tmp: AutoModelForCausalLM.from_pretrained(
            saved_gpt(tmp, edit_config(rope_parameters={"rope_type": "yarn", "factor": 2.0}))
        ),
        ValueError,
        r"rope_parameters \(rope_scaling\) .* asks for 'yarn' rotary scaling.*remove rope_parameters and "
        r"rope_scaling from config.json",
    ),
    bad(
        "folder-config-infinite-eps",
        lambda tmp: AutoModelForCausalLM.from_pretrained(saved_gpt(tmp, edit_config(layer_norm_eps=float("inf")))),
        ValueError,
        r"layer_norm_eps must be a finite number > 0, got inf",
    ),
    bad(
        "folder-config-infinite-eps-remote-code",
        lambda tmp: AutoModelForCausalLM.from_pretrained(
            saved_gpt(tmp, edit_config(layer_norm_eps=float("inf"))), trust_remote_code=True
        ),
        ValueError,
        r"layer_norm_eps must be a finite number > 0, got inf",
    ),
]


@pytest.mark.parametrize("action, error, message", BAD_INPUTS)
def test_bad_input_is_refused_naming_the_problem(tmp_path, action, error, message):
    check_bad_input(tmp_path, action, error, message)


def test_ids_are_unique():
    assert_ids_unique(BAD_INPUTS)
