"""Bad input, one row each: model inputs and generation: the argument, its shape or value, and what is expected.

A model's forward pass reads no tensor value (a host sync on every decoding step): ids and learned positions outside
their table are refused by the lookup that fails on them; what no lookup refuses (a negative sinusoidal position, a
source that is all padding) is refused by the checks hf_minitf runs before it runs a model (`check_model_inputs`)."""

import torch
from bad_inputs import (
    bad,
    bad_input_tests,
    tiny_encoder,
    tiny_gpt,
    tiny_seq2seq,
)

from hf_minitf.safety.model_inputs import check_model_inputs

BAD_INPUTS = [
    # Model inputs and generation: the argument, its shape or value, and what is expected.
    bad(
        "gpt-float-ids",
        lambda tmp: tiny_gpt()(torch.ones(1, 4)),
        ValueError,
        r"input_ids must hold integer token ids \(torch.long\), got dtype torch.float32",
    ),
    bad(
        "gpt-1d-ids",
        lambda tmp: tiny_gpt()(torch.ones(4, dtype=torch.long)),
        ValueError,
        r"input_ids must have shape \(batch_size, sequence_length\), got \(4,\).*input_ids\[None\]",
    ),
    bad(
        "gpt-id-past-vocab",
        lambda tmp: tiny_gpt()(torch.tensor([[1, 40]])),
        ValueError,
        r"token id 40, outside the vocabulary \(vocab_size=40\)",
    ),
    bad(
        "gpt-negative-position",
        lambda tmp: tiny_gpt()(torch.ones(1, 3, dtype=torch.long), position_ids=torch.tensor([[-1, 0, 1]])),
        ValueError,
        r"position_ids must be >= 0, got -1",
    ),
    bad(
        "gpt-position-past-table",
        lambda tmp: tiny_gpt()(torch.ones(1, 3, dtype=torch.long), position_ids=torch.tensor([[14, 15, 16]])),
        ValueError,
        r"Position 16 is past this model's max_position_embeddings=16",
    ),
    bad(
        "gpt-labels-past-vocab",
        lambda tmp: tiny_gpt()(torch.ones(1, 3, dtype=torch.long), labels=torch.tensor([[1, 2, 45]])),
        ValueError,
        r"labels contains token id 45, outside the vocabulary \(vocab_size=40\)",
    ),
    bad(
        "gpt-embeds-wrong-width",
        lambda tmp: tiny_gpt()(inputs_embeds=torch.zeros(1, 3, 8)),
        ValueError,
        r"inputs_embeds must have shape \(batch_size, sequence_length, hidden_size=16\), got \(1, 3, 8\)",
    ),
    bad(
        "gpt-mask-longer-than-ids",
        lambda tmp: tiny_gpt()(torch.ones(1, 3, dtype=torch.long), attention_mask=torch.ones(1, 5)),
        ValueError,
        r"attention_mask must have the shape .* = \(1, 3\).* got \(1, 5\)",
    ),
    bad(
        "gpt-ids-and-embeds",
        lambda tmp: tiny_gpt()(torch.ones(1, 3, dtype=torch.long), inputs_embeds=torch.zeros(1, 3, 16)),
        ValueError,
        r"exactly one of input_ids or inputs_embeds",
    ),
    bad(
        "gpt-generate-past-positions",
        lambda tmp: tiny_gpt().generate(torch.ones(1, 10, dtype=torch.long), max_new_tokens=20, do_sample=False),
        ValueError,
        r"max_position_embeddings=16 \(learned positions\)",
    ),
    bad(
        "gpt-tuple-cache",
        lambda tmp: tiny_gpt()(torch.ones(1, 3, dtype=torch.long), past_key_values=((1, 2),)),
        ValueError,
        r"KV cache must be a transformers `Cache`.*got tuple",
    ),
    bad(
        "encoder-float-ids",
        lambda tmp: tiny_encoder()(torch.ones(2, 4)),
        ValueError,
        r"input_ids must hold integer token ids",
    ),
    bad(
        "encoder-negative-position",
        lambda tmp: check_model_inputs(
            tiny_encoder(), torch.ones(1, 3, dtype=torch.long), position_ids=torch.tensor([[0, -2, 1]])
        ),
        ValueError,
        r"position_ids must be >= 0, got -2",
    ),
    bad(
        "encoder-embeds-wrong-width",
        lambda tmp: tiny_encoder()(inputs_embeds=torch.zeros(2, 3, 15)),
        ValueError,
        r"hidden_size=16\), got \(2, 3, 15\)",
    ),
    bad(
        "seq2seq-target-id-as-source",
        lambda tmp: tiny_seq2seq()(torch.tensor([[1, 45]]), decoder_input_ids=torch.tensor([[2]])),
        ValueError,
        r"token id 45, outside the source vocabulary \(src_vocab_size=40\). It lies in the target",
    ),
    bad(
        "seq2seq-float-decoder-ids",
        lambda tmp: tiny_seq2seq()(torch.tensor([[1, 5]]), decoder_input_ids=torch.ones(1, 2)),
        ValueError,
        r"decoder_input_ids \(target\) must hold integer token ids",
    ),
    bad(
        "seq2seq-labels-past-vocab",
        lambda tmp: tiny_seq2seq()(torch.tensor([[1, 5]]), labels=torch.tensor([[3, 60]])),
        ValueError,
        r"labels \(target\) contains token id 60, outside the vocabulary \(vocab_size=50\)",
    ),
    bad(
        "seq2seq-float16-original-norm",
        lambda tmp: tiny_seq2seq(norm_type="scalar_std_times_eps").half()(
            torch.tensor([[1, 5]]), decoder_input_ids=torch.tensor([[2]])
        ),
        ValueError,
        r"overflows float16.*dtype=torch.bfloat16 or float32",
    ),
    bad(
        "encoder-learned-negative-position",
        lambda tmp: tiny_encoder(position_embedding_type="learned")(
            torch.ones(1, 3, dtype=torch.long), position_ids=torch.tensor([[0, -2, 1]])
        ),
        ValueError,
        r"position_ids must be >= 0, got -2",
    ),
    bad(
        "seq2seq-id-past-both-vocabularies-checked-first",
        lambda tmp: check_model_inputs(tiny_seq2seq(), torch.tensor([[1, 70]])),
        ValueError,
        r"token id 70, outside the source vocabulary \(src_vocab_size=40\). Check that the tokenizer",
    ),
    bad(
        "seq2seq-all-padding-source",
        lambda tmp: check_model_inputs(tiny_seq2seq(), torch.tensor([[1, 5]]), attention_mask=torch.zeros(1, 2)),
        ValueError,
        r"Source rows \[0\] are all padding",
    ),
]
test_bad_input_is_refused_naming_the_problem, test_ids_are_unique = bad_input_tests(BAD_INPUTS)
