"""No forward pass reads a tensor's value: each read (`.item()`, `bool()`, `int()` of a tensor) is a host sync, which on
an accelerator stalls every decoding step until the device catches up. Counted on CPU in the profiler
(`aten::_local_scalar_dense`, what every such read runs), over decoding steps of the GPT, encoder forward passes and
the translator's decoder steps.

Without a padding mask the count is zero. With one, transformers' mask helpers read it once per call (whether the
mask can be dropped for SDPA), as they do for its own GPT-2 and BERT: the count is theirs, never more.
"""

import pytest
import torch
from factories import tiny_model
from torch.profiler import ProfilerActivity, profile
from transformers import BertConfig, BertModel, DynamicCache, EncoderDecoderCache, GPT2Config, GPT2LMHeadModel

STEPS = 6
PROMPT = 5


def host_syncs(run) -> int:
    """How many tensor values `run()` reads on the host."""
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as profiler:
        run()
    return sum(event.name == "aten::_local_scalar_dense" for event in profiler.events())


def decoding_steps(model, with_mask: bool) -> int:
    """Host syncs of `STEPS` greedy decoding steps with a KV cache, after a prompt (outside the count)."""
    ids = torch.arange(1, PROMPT + 1)[None]
    with torch.no_grad():
        first = model(ids, attention_mask=torch.ones_like(ids), use_cache=True)
    cache_name = "cache" if "cache" in first else "past_key_values"  # transformers 5.24 renamed it
    cache, token = first[cache_name], first.logits[:, -1:].argmax(-1)

    def steps() -> None:
        nonlocal token
        for step in range(STEPS):
            mask = torch.ones(1, PROMPT + step + 1, dtype=torch.long) if with_mask else None
            token = model(token, attention_mask=mask, use_cache=True, **{cache_name: cache}).logits.argmax(-1)

    return host_syncs(steps)


@pytest.mark.parametrize("with_mask", [False, True])
def test_gpt_decoding_steps_read_no_tensor_value(with_mask):
    gpt = tiny_model("gpt").eval()
    reference = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=61)).eval()
    syncs = decoding_steps(gpt, with_mask)
    assert syncs == (decoding_steps(reference, with_mask) if with_mask else 0)
    assert syncs <= (STEPS if with_mask else 0)


@pytest.mark.parametrize("with_mask", [False, True])
def test_encoder_forward_reads_no_tensor_value(with_mask):
    encoder = tiny_model("encoder").eval()
    ids = torch.randint(1, 99, (2, 6))
    mask = torch.ones_like(ids) if with_mask else None
    syncs = host_syncs(lambda: encoder(ids, attention_mask=mask))
    reference = BertModel(BertConfig(num_hidden_layers=2, hidden_size=16, num_attention_heads=2)).eval()
    assert syncs == (host_syncs(lambda: reference(ids, attention_mask=mask)) if with_mask else 0)


def test_translator_decoder_steps_read_no_tensor_value():
    translator = tiny_model("seq2seq").eval()
    with torch.no_grad():
        encoded = translator.get_encoder()(torch.tensor([[2, 5, 6, 3]]))
    cache = EncoderDecoderCache(DynamicCache(), DynamicCache())

    def steps() -> None:
        token = torch.tensor([[translator.config.decoder_start_token_id]])
        for _ in range(STEPS):
            output = translator(encoder_outputs=encoded, decoder_input_ids=token, past_key_values=cache, use_cache=True)
            token = output.logits.argmax(-1)

    assert host_syncs(steps) == 0
