"""Properties over random small configs of every family (hypothesis): save -> load is bit-identical; greedy
generation with the KV cache equals it without; a padded batch gives what each row gives alone; the forward pass is
finite for valid inputs.

Examples are derandomized (the same on every run and machine) and few, with tiny dimensions, to keep the file
to a few seconds. Logits are compared relative to their row's scale; generated tokens exactly, on examples
where no step is a near tie (a tie can fall either way under any rounding change)."""

import tempfile
from typing import Any

import torch
from factories import tiny_model
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from transformers import AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM

from hf_minitf import MiniTFEncoderModel, MiniTFGPTForCausalLM, MiniTFSeq2SeqForConditionalGeneration

PAD = 0  # every generated config pads with id 0 (the seq2seq family's special ids are 0..3: pad is 1 there)
SEQ2SEQ_PAD, SEQ2SEQ_SOS, SEQ2SEQ_EOS = 1, 2, 3
RELATIVE_TOLERANCE = 1e-4
PROPERTY = settings(
    max_examples=15, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)


@st.composite
def sizes(draw, even_head_dim: bool = False) -> dict:
    heads = draw(st.sampled_from([1, 2, 4]))
    head_dim = draw(st.sampled_from([2, 4, 8] if even_head_dim else [2, 3, 4, 8]))
    return dict(
        num_attention_heads=heads,
        hidden_size=heads * head_dim,
        num_hidden_layers=draw(st.integers(1, 2)),
        intermediate_size=draw(st.sampled_from([8, 16, 32])),
        initializer_range=draw(st.sampled_from([0.2, 1.0])),
    )


# Each family's own fields, drawn with the sizes, seed and attention bias every family draws (`models`).
FAMILY_FIELDS = {
    "gpt": dict(
        vocab_size=st.integers(8, 40),
        position_embedding_type=st.sampled_from(["learned", "rope"]),
        rope_interleaved=st.booleans(),
        pad_token_id=st.just(PAD),
    ),
    "encoder": dict(
        vocab_size=st.integers(8, 40),
        position_embedding_type=st.sampled_from(["sinusoidal", "learned"]),
        scale_embeddings=st.booleans(),
        pad_token_id=st.just(PAD),
    ),
    "seq2seq": dict(
        src_vocab_size=st.integers(8, 40),
        vocab_size=st.integers(8, 40),
        output_log_softmax=st.booleans(),
        norm_type=st.sampled_from(["layer_norm", "scalar_std_plus_eps", "per_feature_std_plus_eps"]),
    ),
}


@st.composite
def models(draw, family: str):
    """A tiny `family` model (32 positions) of drawn sizes, seed, attention bias and family fields."""
    fields = draw(st.fixed_dictionaries(FAMILY_FIELDS[family]))
    # Sinusoidal and rotary positions pair features: the seq2seq family and rope need an even head dimension.
    even_head_dim = family == "seq2seq" or fields.get("position_embedding_type") == "rope"
    return tiny_model(
        family,
        seed=draw(st.integers(0, 2**16)),
        **draw(sizes(even_head_dim)),
        max_position_embeddings=32,
        attention_bias=draw(st.booleans()),
        **fields,
    )


def token_rows(draw, vocab_size: int, rows: int, low: int = 1) -> list[list[int]]:
    """`rows` token sequences of 1..8 ids in [low, vocab_size)."""
    token = st.integers(low, vocab_size - 1)
    return [draw(st.lists(token, min_size=1, max_size=8)) for _ in range(rows)]


def padded(rows: list[list[int]], pad: int, left: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of `rows` padded to the longest, on the left or the right, and its attention mask."""
    width = max(map(len, rows))
    ids, mask = [], []
    for row in rows:
        filler = [pad] * (width - len(row))
        ids.append(filler + row if left else row + filler)
        mask.append([0] * len(filler) + [1] * len(row) if left else [1] * len(row) + [0] * len(filler))
    return torch.tensor(ids), torch.tensor(mask)


def batch_and_rows_alone(model, data, left: bool) -> tuple[list[list[int]], Any, list[Any]]:
    """Three drawn rows, the outputs of their batch (padded on the left or the right) and those of each row alone."""
    rows = token_rows(data.draw, model.config.vocab_size, 3)
    ids, mask = padded(rows, PAD, left=left)
    with torch.no_grad():
        return rows, model(ids, attention_mask=mask), [model(torch.tensor([row])) for row in rows]


def assert_close_to_scale(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Equal up to float32 rounding, measured against the largest magnitude of each row (the last dimension)."""
    scale = expected.abs().amax(dim=-1, keepdim=True).clamp_min(1e-6)
    difference = ((actual - expected).abs() / scale).max().item()
    assert difference < RELATIVE_TOLERANCE, f"differs by {difference:.2e} of the row's scale"


def no_near_ties(scores: tuple[torch.Tensor, ...]) -> bool:
    """Whether every greedy step's best score beats the second by more than rounding could move it."""
    for step in scores:
        top = step.float().topk(2, dim=-1).values
        if ((top[:, 0] - top[:, 1]) <= 1e-3 * top.abs().amax(dim=-1).clamp_min(1.0)).any():
            return False
    return True


def reload(model, auto_class):
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder)
        return auto_class.from_pretrained(folder).eval()


@PROPERTY
@given(model=st.one_of(models("gpt"), models("encoder"), models("seq2seq")), data=st.data())
def test_save_load_keeps_weights_bit_identical(model, data):
    auto_class = {
        MiniTFGPTForCausalLM: AutoModelForCausalLM,
        MiniTFEncoderModel: AutoModel,
        MiniTFSeq2SeqForConditionalGeneration: AutoModelForSeq2SeqLM,
    }[type(model)]
    loaded = reload(model, auto_class)
    assert type(loaded) is type(model)
    expected, actual = model.state_dict(), loaded.state_dict()
    assert expected.keys() == actual.keys()
    assert all(torch.equal(expected[name], actual[name]) for name in expected)
    config = model.config
    vocab = getattr(config, "src_vocab_size", config.vocab_size)
    ids, mask = padded(token_rows(data.draw, vocab, 2, low=4), config.pad_token_id, left=False)
    inputs = dict(input_ids=ids, attention_mask=mask)
    if config.is_encoder_decoder:
        inputs["decoder_input_ids"] = torch.tensor([[SEQ2SEQ_SOS, 4 % config.vocab_size]] * 2)
    with torch.no_grad():
        first, second = model(**inputs), loaded(**inputs)
    name = "logits" if hasattr(first, "logits") else "last_hidden_state"
    # The same weights; the rounding of a few-row product depends on its memory alignment.
    assert (second[name] - first[name]).abs().max() <= 1e-5 * first[name].abs().max()


@PROPERTY
@given(model=st.one_of(models("gpt"), models("seq2seq")), data=st.data())
def test_greedy_with_cache_equals_without(model, data):
    config = model.config
    vocab = getattr(config, "src_vocab_size", config.vocab_size)
    pad = config.pad_token_id
    ids, mask = padded(token_rows(data.draw, vocab, 2, low=4), pad, left=not config.is_encoder_decoder)
    kwargs = dict(
        attention_mask=mask,
        max_new_tokens=6,
        min_new_tokens=6,
        do_sample=False,
        pad_token_id=pad,
        output_scores=True,
        return_dict_in_generate=True,
    )
    uncached = model.generate(ids, use_cache=False, **kwargs)
    assume(no_near_ties(uncached.scores))
    cached = model.generate(ids, use_cache=True, **kwargs)
    assert torch.equal(cached.sequences, uncached.sequences)


@PROPERTY
@given(model=models("gpt"), data=st.data())
def test_gpt_left_padded_batch_equals_each_row_alone(model, data):
    rows, together, alone = batch_and_rows_alone(model, data, left=True)
    for index, row in enumerate(rows):
        assert_close_to_scale(together.logits[index, -len(row) :], alone[index].logits[0])


@PROPERTY
@given(model=models("encoder"), data=st.data())
def test_encoder_right_padded_batch_equals_each_row_alone(model, data):
    rows, together, alone = batch_and_rows_alone(model, data, left=False)
    for index, row in enumerate(rows):
        assert_close_to_scale(together.last_hidden_state[index, : len(row)], alone[index].last_hidden_state[0])
        assert_close_to_scale(together.pooler_output[index], alone[index].pooler_output[0])


@PROPERTY
@given(model=models("seq2seq"), data=st.data())
def test_seq2seq_padded_sources_equal_each_source_alone(model, data):
    config = model.config
    rows = token_rows(data.draw, config.src_vocab_size, 3, low=4)
    ids, mask = padded(rows, SEQ2SEQ_PAD, left=False)
    target = torch.tensor([[SEQ2SEQ_SOS] + row for row in token_rows(data.draw, config.vocab_size, 1, low=4)] * 3)
    with torch.no_grad():
        together = model(input_ids=ids, attention_mask=mask, decoder_input_ids=target).logits
        for index, row in enumerate(rows):
            alone = model(input_ids=torch.tensor([row]), decoder_input_ids=target[:1]).logits[0]
            assert_close_to_scale(together[index], alone)


@PROPERTY
@given(model=st.one_of(models("gpt"), models("encoder"), models("seq2seq")), data=st.data())
def test_forward_is_finite_for_valid_inputs(model, data):
    config = model.config
    vocab = getattr(config, "src_vocab_size", config.vocab_size)
    rows = token_rows(data.draw, vocab, 2, low=0)
    ids, mask = padded(rows, config.pad_token_id, left=not config.is_encoder_decoder)
    inputs = dict(input_ids=ids, attention_mask=mask)
    if config.is_encoder_decoder:
        inputs["decoder_input_ids"] = torch.tensor(token_rows(data.draw, config.vocab_size, 1, low=0) * 2)
    with torch.no_grad():
        outputs = model(**inputs, output_hidden_states=True)
    tensors = [value for value in outputs.values() if isinstance(value, torch.Tensor)]
    assert tensors and all(torch.isfinite(tensor).all() for tensor in tensors)
