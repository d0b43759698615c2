"""Bad input, one row each: configs: types, ranges and names, from the constructor, a later assignment, a
from_pretrained kwarg or JSON."""

from bad_inputs import (
    bad,
    bad_input_tests,
    edit_config,
    saved_gpt,
)
from transformers import AutoModelForCausalLM

from hf_minitf import MiniTFEncoderConfig, MiniTFGPTConfig, MiniTFSeq2SeqConfig

CONFIGS = {"gpt": MiniTFGPTConfig, "encoder": MiniTFEncoderConfig, "seq2seq": MiniTFSeq2SeqConfig}

# (family, what, fields, message): the family's config built with `fields` is a ValueError matching `message`.
# fmt: off
REFUSED_FIELDS = [
    ("gpt", "zero-heads", dict(num_attention_heads=0), r"num_attention_heads must be a positive integer, got 0"),
    ("encoder", "zero-heads", dict(num_attention_heads=0), r"num_attention_heads must be a positive integer, got 0"),
    ("seq2seq", "zero-heads", dict(num_attention_heads=0), r"num_attention_heads must be a positive integer, got 0"),
    ("gpt", "string-size", dict(hidden_size="256"), r"MiniTFGPTConfig: hidden_size must be a positive integer, got '256' \(str\)"),
    ("encoder", "float-size", dict(hidden_size=64.0), r"hidden_size must be a positive integer, got 64.0 \(float\)"),
    ("seq2seq", "string-vocab", dict(src_vocab_size="100"), r"src_vocab_size must be a positive integer, got '100'"),
    ("gpt", "bool-layers", dict(num_hidden_layers=True), r"num_hidden_layers must be a positive integer, got True \(bool\)"),
    ("gpt", "alias-size", dict(n_embd="64"), r"hidden_size .* got '64'"),
    ("gpt", "unknown-activation", dict(hidden_act="swishy"), r"hidden_act must be an activation name .* got 'swishy'"),
    ("encoder", "unknown-activation", dict(hidden_act="Gelu"), r"hidden_act must be an activation name .*'gelu'.* got 'Gelu'"),
    ("seq2seq", "no-activation", dict(hidden_act=None), r"hidden_act must be an activation name .* got None"),
    ("gpt", "pad-outside-vocab", dict(vocab_size=100, pad_token_id=100), r"pad_token_id=100 is outside the vocabulary \(ids 0..99\)"),
    ("gpt", "eos-list-outside-vocab", dict(vocab_size=100, eos_token_id=[3, 250]), r"eos_token_id=\[3, 250\] is outside the vocabulary"),
    ("gpt", "negative-bos", dict(bos_token_id=-1), r"bos_token_id must be null, an integer >= 0, got -1"),
    ("encoder", "pad-outside-vocab", dict(vocab_size=10, pad_token_id=10), r"pad_token_id=10 is outside the vocabulary"),
    ("seq2seq", "start-outside-vocab", dict(vocab_size=50, decoder_start_token_id=60), r"decoder_start_token_id=60 is outside the source or target vocabulary"),
    ("seq2seq", "eos-outside-source-vocab", dict(src_vocab_size=3), r"eos_token_id=3 is outside the source or target vocabulary \(ids 0..2\)"),
    ("gpt", "dropout-above-1", dict(hidden_dropout=1.5), r"hidden_dropout must be a finite number in \[0.0, 1.0\), got 1.5"),
    ("encoder", "negative-dropout", dict(attention_dropout=-0.1), r"attention_dropout must be a finite number in \[0.0, 1.0\), got -0.1"),
    ("encoder", "classifier-dropout", dict(classifier_dropout=2), r"classifier_dropout must be a finite number in \[0.0, 1.0\) or null, got 2"),
    ("seq2seq", "string-dropout", dict(hidden_dropout="0.1"), r"hidden_dropout must be a finite number in \[0.0, 1.0\), got '0.1' \(str\)"),
    ("seq2seq", "label-smoothing-1", dict(label_smoothing=1.0), r"label_smoothing must be a finite number in \[0, 1\), got 1.0"),
    ("seq2seq", "positive-mask-value", dict(attention_mask_value=1e9), r"attention_mask_value must be a finite number <= 0 or null, got 1000000000.0"),
    ("gpt", "zero-eps", dict(layer_norm_eps=0), r"layer_norm_eps must be a finite number > 0"),
    ("gpt", "nan-rope-theta", dict(rope_theta=float("nan")), r"rope_theta must be a finite number > 0, got nan"),
    ("gpt", "infinite-eps", dict(layer_norm_eps=float("inf")), r"layer_norm_eps must be a finite number > 0, got inf"),
    ("encoder", "infinite-eps", dict(layer_norm_eps=float("inf")), r"layer_norm_eps must be a finite number > 0, got inf"),
    ("seq2seq", "infinite-eps", dict(layer_norm_eps=float("inf")), r"layer_norm_eps must be a finite number > 0, got inf"),
    ("gpt", "infinite-rope-theta", dict(rope_theta=float("inf")), r"rope_theta must be a finite number > 0, got inf"),
    ("encoder", "infinite-initializer-range", dict(initializer_range=float("inf")), r"initializer_range must be a finite number >= 0, got inf"),
    ("seq2seq", "minus-infinite-mask-value", dict(attention_mask_value=float("-inf")), r"attention_mask_value must be a finite number <= 0 or null, got -inf"),
    ("gpt", "dropout-1", dict(attention_dropout=1.0), r"attention_dropout must be a finite number in \[0.0, 1.0\), got 1.0"),
    ("gpt", "unknown-positions", dict(position_embedding_type="alibi"), r"position_embedding_type must be one of \('learned', 'rope'\), got 'alibi'"),
    ("gpt", "unknown-overflow", dict(context_overflow="wrap"), r"context_overflow must be one of \('error', 'crop'\)"),
    ("seq2seq", "unknown-norm", dict(norm_type="rms"), r"norm_type must be one of .*'layer_norm'.* got 'rms'"),
    ("gpt", "string-bool", dict(use_cache="yes"), r"use_cache must be true or false, got 'yes'"),
    ("encoder", "int-bool", dict(scale_embeddings=1), r"scale_embeddings must be true or false, got 1 \(int\)"),
    ("gpt", "heads-do-not-divide", dict(hidden_size=30, num_attention_heads=4), r"hidden_size=30 is not divisible by num_attention_heads=4.*\[1, 2, 3, 5, 6, 10, 15, 30\]"),
    ("gpt", "rope-odd-head-dim", dict(hidden_size=18, num_attention_heads=2, position_embedding_type="rope"), r"Rotary positions need an even head dimension.*= 9"),
    ("seq2seq", "odd-hidden-size", dict(hidden_size=9, num_attention_heads=3), r"sinusoidal positions need an even hidden_size, got 9"),
    ("gpt", "rope-scaling-linear", dict(position_embedding_type="rope", rope_scaling={"rope_type": "linear", "factor": 4.0}), r"rope_parameters \(rope_scaling\) \{'rope_type': 'linear', 'factor': 4.0\} asks for 'linear' rotary scaling, "
        r"which MiniTF's positions do not implement \(the model would ignore it"),
]
# fmt: on

BAD_INPUTS = [
    *(
        bad(
            f"{family}-{what}", lambda tmp, family=family, fields=fields: CONFIGS[family](**fields), ValueError, message
        )
        for family, what, fields, message in REFUSED_FIELDS
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
test_bad_input_is_refused_naming_the_problem, test_ids_are_unique = bad_input_tests(BAD_INPUTS)
