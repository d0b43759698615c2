"""transformers' native machinery on every family: attention backends, static cache, torch.compile, continuous
batching, and half-precision / int8 weight-only models."""

import pytest
import torch
from factories import tiny_model
from transformers import (
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForSeq2SeqLM,
    CompileConfig,
    GenerationConfig,
    TorchAoConfig,
)

from hf_minitf import MiniTFEncoderModel, MiniTFGPTForCausalLM, MiniTFSeq2SeqForConditionalGeneration
from hf_minitf.modeling.layers import DecodingLinear

BACKENDS = ["eager", "sdpa", "flex_attention"]
VOCAB = 40


# Wider than the other tests' models, the sizes the backends were first compared at.
WIDE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)


def gpt(position_embedding_type: str = "rope", **overrides) -> MiniTFGPTForCausalLM:
    return tiny_model(
        "gpt",
        seed=0,
        **WIDE,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        pad_token_id=0,
        position_embedding_type=position_embedding_type,
        initializer_range=0.2,
        **overrides,
    )


def encoder() -> MiniTFEncoderModel:
    return tiny_model("encoder", seed=0, **WIDE, vocab_size=VOCAB, max_position_embeddings=32)


def seq2seq() -> MiniTFSeq2SeqForConditionalGeneration:
    return tiny_model(
        "seq2seq",
        seed=0,
        **WIDE,
        src_vocab_size=VOCAB,
        vocab_size=VOCAB + 5,
        max_position_embeddings=64,
        initializer_range=0.2,
    )


def left_padded_batch(lengths=(9, 5, 7)) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    width = max(lengths)
    ids = torch.zeros(len(lengths), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, length in enumerate(lengths):
        ids[row, width - length :] = torch.randint(4, VOCAB, (length,), generator=generator)
        mask[row, width - length :] = 1
    return ids, mask


def right_padded_batch(lengths=(9, 5, 7)) -> tuple[torch.Tensor, torch.Tensor]:
    """`left_padded_batch` mirrored: padding on the right, as the encoder's and the source tokenizer pad."""
    ids, mask = left_padded_batch(lengths)
    return ids.flip(-1), mask.flip(-1)


def close(actual: torch.Tensor, expected: torch.Tensor, tolerance: float = 1e-5) -> bool:
    """Equal within `tolerance` relative to the magnitude of the expected values (at least 1)."""
    return (actual - expected).abs().max().item() <= tolerance * max(1.0, expected.abs().max().item())


def distinct_tokens(sequences: torch.Tensor, prompt_length: int) -> int:
    return len(set(sequences[:, prompt_length:].flatten().tolist()))


# --- attention backends -------------------------------------------------------------------------------------------


def outputs_per_backend(build, run) -> dict[str, torch.Tensor]:
    model = build()
    results = {}
    with torch.no_grad():
        for backend in BACKENDS:
            model.set_attn_implementation(backend)
            assert model.config._attn_implementation == backend
            results[backend] = run(model)
    return results


@pytest.mark.parametrize("position_embedding_type", ["learned", "rope"])
def test_gpt_backends_agree_with_left_padding(position_embedding_type):
    ids, mask = left_padded_batch()
    results = outputs_per_backend(
        lambda: gpt(position_embedding_type), lambda model: model(ids, attention_mask=mask).logits
    )
    real = mask.bool()  # padding positions attend to nothing: their outputs are undefined in every backend
    for backend in ("sdpa", "flex_attention"):
        assert close(results[backend][real], results["eager"][real]), backend


def test_encoder_backends_agree_with_padding():
    ids, mask = right_padded_batch()
    results = outputs_per_backend(encoder, lambda model: model(ids, attention_mask=mask).last_hidden_state)
    real = mask.bool()
    for backend in ("sdpa", "flex_attention"):
        assert close(results[backend][real], results["eager"][real]), backend


def test_seq2seq_backends_agree_with_padding():
    source, source_mask = right_padded_batch()
    target, target_mask = right_padded_batch((6, 6, 3))
    results = outputs_per_backend(
        seq2seq,
        lambda model: (
            model(
                source, attention_mask=source_mask, decoder_input_ids=target, decoder_attention_mask=target_mask
            ).logits
        ),
    )
    real = target_mask.bool()
    for backend in ("sdpa", "flex_attention"):
        assert close(results[backend][real], results["eager"][real]), backend


def test_fixed_mask_value_runs_eager_whatever_is_asked(tmp_path):
    model = seq2seq()
    model.config.attention_mask_value = -1e9
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path, attn_implementation="sdpa")
    assert loaded.config._attn_implementation == "eager"
    loaded.set_attn_implementation("sdpa")
    assert loaded.config._attn_implementation == "eager"


# --- static cache ---------------------------------------------------------------------------------------------------

DECODINGS = pytest.mark.parametrize(
    "decoding", [dict(do_sample=False), dict(do_sample=False, num_beams=3)], ids=["greedy", "beam3"]
)


@pytest.mark.parametrize("position_embedding_type", ["learned", "rope"])
@DECODINGS
def test_gpt_static_cache_equals_dynamic_cache(position_embedding_type, decoding):
    model = gpt(position_embedding_type)
    ids, mask = left_padded_batch()
    kwargs = dict(attention_mask=mask, max_new_tokens=12, min_new_tokens=12, **decoding)
    dynamic = model.generate(ids, **kwargs)
    static = model.generate(ids, cache_implementation="static", **kwargs)
    assert distinct_tokens(dynamic, ids.shape[1]) >= 4, "the test model collapsed to a few tokens"
    assert torch.equal(static, dynamic)


@DECODINGS
def test_seq2seq_static_cache_equals_dynamic_cache(decoding):
    model = seq2seq()
    source, mask = right_padded_batch()
    kwargs = dict(attention_mask=mask, max_new_tokens=10, min_new_tokens=10, **decoding)
    dynamic = model.generate(source, **kwargs)
    static = model.generate(source, cache_implementation="static", **kwargs)
    assert distinct_tokens(dynamic, 1) >= 4, "the test model collapsed to a few tokens"
    assert torch.equal(static, dynamic)


# --- torch.compile --------------------------------------------------------------------------------------------------


def test_compiled_forward_equals_eager_forward():
    model = gpt()
    ids, mask = left_padded_batch()
    compiled = torch.compile(model)
    with torch.no_grad():
        expected = model(ids, attention_mask=mask).logits
        actual = compiled(ids, attention_mask=mask).logits
    real = mask.bool()
    assert close(actual[real], expected[real])


def compile_everywhere() -> CompileConfig:
    """transformers compiles generate's decoding step on GPUs only unless told to: tell it."""
    config = CompileConfig(fullgraph=False)
    config._compile_all_devices = True
    return config


@pytest.mark.parametrize("family", ["gpt", "seq2seq"])
def test_compiled_greedy_equals_eager_greedy(family):
    model = gpt() if family == "gpt" else seq2seq()
    ids = left_padded_batch((8,))[0]
    kwargs = dict(max_new_tokens=10, min_new_tokens=10, do_sample=False, cache_implementation="static")
    eager = model.generate(ids, **kwargs)
    torch._dynamo.reset()
    calls = []
    original = torch.compile

    def counting_compile(*args, **compile_kwargs):
        calls.append(compile_kwargs)
        return original(*args, **compile_kwargs)

    torch.compile = counting_compile
    try:
        compiled = model.generate(ids, compile_config=compile_everywhere(), **kwargs)
    finally:
        torch.compile = original
    assert calls, "generate did not compile the decoding step"
    assert torch.equal(compiled, eager)


# --- continuous batching ---------------------------------------------------------------------------------------------


def small_paged_cache() -> dict:
    """A paged cache sized for the test: by default continuous batching reserves most of the free memory."""
    try:
        from transformers.generation.configuration_utils import ContinuousBatchingConfig
    except ImportError:  # transformers before 5.2x: the sizes are generation-config fields
        return {}
    return dict(continuous_batching_config=ContinuousBatchingConfig(num_blocks=4, max_batch_tokens=64))


def test_generate_batch_gives_each_prompt_what_generate_gives_it():
    model = gpt()
    prompts = [[5, 9, 13, 2, 7], [30, 4], [11, 12, 13, 14, 15, 16, 17, 18]]
    config = GenerationConfig(max_new_tokens=8, do_sample=False, eos_token_id=None, pad_token_id=0)
    results = model.generate_batch(prompts, generation_config=config, warmup=False, **small_paged_cache())
    assert len(results) == len(prompts)
    by_prompt = {tuple(result.prompt_ids): result.generated_tokens for result in results.values()}
    for prompt in prompts:
        alone = model.generate(torch.tensor([prompt]), max_new_tokens=8, min_new_tokens=8, do_sample=False)
        assert by_prompt[tuple(prompt)] == alone[0, len(prompt) :].tolist()


# --- half precision and int8 weight-only ---------------------------------------------------------------------------


def int8_weight_only() -> TorchAoConfig:
    from torchao.quantization import Int8WeightOnlyConfig

    return TorchAoConfig(Int8WeightOnlyConfig())


def greedy_agreement(reference: torch.Tensor, other: torch.Tensor) -> float:
    return (reference == other).float().mean().item()


def reloaded(model, auto_class, folder, weights: str):
    """`model` saved and loaded back with bfloat16 or int8 weight-only weights."""
    model.save_pretrained(folder)
    options = dict(dtype=torch.bfloat16) if weights == "bfloat16" else dict(quantization_config=int8_weight_only())
    return auto_class.from_pretrained(folder, **options)


@pytest.mark.parametrize("weights", ["bfloat16", "int8"])
def test_gpt_loads_and_generates_in_reduced_precision(tmp_path, weights):
    model = gpt()
    reduced = reloaded(model, AutoModelForCausalLM, tmp_path, weights)
    if weights == "int8":
        assert "Int8" in type(reduced.model.layers[0].mlp.fc1.weight).__name__
    else:
        assert reduced.model.layers[0].mlp.fc1.weight.dtype == torch.bfloat16
    ids, mask = left_padded_batch()
    with torch.no_grad():
        expected = model(ids, attention_mask=mask).logits.argmax(-1)[mask.bool()]
        actual = reduced(ids, attention_mask=mask).logits.argmax(-1)[mask.bool()]
    assert greedy_agreement(expected, actual) >= 0.85
    generated = reduced.generate(ids, attention_mask=mask, max_new_tokens=6, do_sample=False)
    assert generated.shape == (3, ids.shape[1] + 6)


@pytest.mark.parametrize("weights", ["bfloat16", "int8"])
def test_encoder_loads_and_encodes_in_reduced_precision(tmp_path, weights):
    model = encoder()
    reduced = reloaded(model, AutoModel, tmp_path, weights)
    ids, mask = right_padded_batch()
    with torch.no_grad():
        expected = model(ids, attention_mask=mask).pooler_output
        actual = reduced(ids, attention_mask=mask).pooler_output.float()
    cosine = torch.nn.functional.cosine_similarity(expected, actual).min().item()
    assert cosine > 0.99


@pytest.mark.parametrize("weights", ["bfloat16", "int8"])
def test_seq2seq_loads_and_translates_in_reduced_precision(tmp_path, weights):
    model = seq2seq()
    reduced = reloaded(model, AutoModelForSeq2SeqLM, tmp_path, weights)
    source, mask = right_padded_batch()
    target = left_padded_batch((7, 7, 7))[0]
    with torch.no_grad():
        expected = model(source, attention_mask=mask, decoder_input_ids=target).logits.argmax(-1)
        actual = reduced(source, attention_mask=mask, decoder_input_ids=target).logits.argmax(-1)
    assert greedy_agreement(expected, actual) >= 0.85
    generated = reduced.generate(source, attention_mask=mask, max_new_tokens=5, do_sample=False)
    assert generated.shape[0] == 3


# --- DecodingLinear: few-row products on CPU as a batched GEMM over output blocks ---


class CallRecorder(torch.overrides.TorchFunctionMode):
    """Records the torch functions called inside it."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


def linear_calls(layer, inputs) -> tuple[torch.Tensor, list[str]]:
    with torch.no_grad(), CallRecorder() as recorder:
        output = layer(inputs)
    return output, recorder.calls


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(1, 1, 48), (3, 1, 48), (2, 4, 48), (64, 48), (1, 48)])
def test_decoding_linear_takes_blocks_for_few_rows_with_the_same_values(bias, shape):
    torch.manual_seed(0)
    layer = DecodingLinear(48, 96, bias=bias)
    inputs = torch.randn(*shape)
    output, calls = linear_calls(layer, inputs)
    expected = torch.nn.functional.linear(inputs, layer.weight, layer.bias)
    assert ("baddbmm" if bias else "bmm") in calls and "linear" not in calls
    assert output.shape == expected.shape == (*shape[:-1], 96)
    assert (output - expected).abs().max() <= 1e-6 * expected.abs().max()


@pytest.mark.parametrize("case", ["many rows", "odd width", "bfloat16", "column-major weight", "int8 weights"])
def test_decoding_linear_falls_back_to_linear(case):
    torch.manual_seed(0)
    layer = DecodingLinear(48, 95 if case == "odd width" else 96)
    inputs = torch.randn(65 if case == "many rows" else 2, 48)
    if case == "bfloat16":
        layer, inputs = layer.to(torch.bfloat16), inputs.to(torch.bfloat16)
    if case == "column-major weight":
        layer.weight.data = layer.weight.data.t().contiguous().t()
    if case == "int8 weights":
        pytest.importorskip("torchao")
        from torchao.quantization import Int8WeightOnlyConfig, quantize_

        quantize_(layer, Int8WeightOnlyConfig())
    output, calls = linear_calls(layer, inputs)
    assert "linear" in calls and "bmm" not in calls and "baddbmm" not in calls
    assert torch.equal(output, torch.nn.functional.linear(inputs, layer.weight, layer.bias))


def test_decoding_linear_trains_like_linear():
    torch.manual_seed(0)
    layer = DecodingLinear(16, 32)
    reference = torch.nn.Linear(16, 32)
    reference.load_state_dict(layer.state_dict())
    assert list(layer.state_dict()) == ["weight", "bias"]
    inputs = torch.randn(1, 2, 16)
    layer(inputs).square().sum().backward()
    reference(inputs).square().sum().backward()
    for mine, theirs in ((layer.weight, reference.weight), (layer.bias, reference.bias)):
        assert (mine.grad - theirs.grad).abs().max() <= 1e-6 * theirs.grad.abs().max()


@pytest.mark.parametrize("family", ["gpt", "seq2seq"])
def test_generation_steps_do_not_recompute_the_forward_signature(family, monkeypatch):
    import inspect

    model = gpt() if family == "gpt" else seq2seq()
    computed = []
    original = inspect._signature_from_function
    monkeypatch.setattr(
        inspect,
        "_signature_from_function",
        lambda *args, **kwargs: computed.append(args[1].__qualname__) or original(*args, **kwargs),
    )
    model.generate(torch.tensor([[5, 6, 7]]), max_new_tokens=30, min_new_tokens=30, do_sample=False)
    ours = [name for name in computed if name.startswith("MiniTF")]
    assert len(ours) < 10, f"transformers asks for forward's signature every step; it must be stored: {ours}"
