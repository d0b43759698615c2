"""Every config field of every family reaches the model: a tiny model built with one field changed differs from the
default one as the field says (its parameters, its outputs on the same weights, or what `generate` is told).

Each family's cases must cover exactly the fields its config checks (`safety.model_configs.FIELD_CHECKS`), so a new field without a case
fails `test_every_field_has_a_case`."""

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import torch
from factories import TINY_CLASSES, tiny_model
from torch import nn

from hf_minitf import MiniTFEncoderForSequenceClassification
from hf_minitf.modeling.layers import CACHE_FIELD, HkprojLayerNorm
from hf_minitf.safety.model_configs import FIELD_CHECKS

IDS = torch.tensor([[5, 9, 14, 3, 22, 7], [8, 2, 30, 11, 0, 0]])
MASK = (IDS != 0).long()
TARGET = torch.tensor([[2, 6, 19, 4], [2, 12, 1, 1]])


def outputs(model: nn.Module, family: str, train: bool = False, **inputs) -> torch.Tensor:
    """The main output on fixed inputs; with `train`, in training mode after a fixed seed (dropout is drawn)."""
    model.train(train)
    torch.manual_seed(0)
    if family == "seq2seq":
        result = model(input_ids=IDS, attention_mask=MASK, decoder_input_ids=TARGET, **inputs).logits
    elif family == "gpt":
        result = model(IDS, attention_mask=MASK, **inputs).logits
    else:
        result = model(IDS, attention_mask=MASK, **inputs).last_hidden_state
    model.eval()
    return result


def differ(first: torch.Tensor, second: torch.Tensor) -> bool:
    """Different beyond float32 rounding relative to their magnitude."""
    return first.shape != second.shape or (first - second).abs().max().item() > 1e-4 * max(
        1.0, first.abs().max().item()
    )


def attentions(model: nn.Module) -> list[nn.Module]:
    return [module for name, module in model.named_modules() if name.endswith(("self_attn", "cross_attn"))]


def stacks(model: nn.Module, family: str) -> list[nn.Module]:
    """The layer stacks: the decoder-only or encoder model, or the encoder and the decoder."""
    if family == "seq2seq":
        return [model.model.encoder, model.model.decoder]
    return [model.model if family == "gpt" else model]


@dataclass
class Case:
    """`changed` applied to the family's tiny model (built on `base`) must make `holds(default, changed)` true.

    With `same_weights`, the changed model gets the default model's weights first, so that only the field differs.
    """

    changed: dict
    holds: Callable[[nn.Module, nn.Module], bool]
    base: dict = field(default_factory=dict)
    same_weights: bool = False
    model_class: type | None = None


def outputs_differ(family: str, train: bool = False) -> Callable[[nn.Module, nn.Module], bool]:
    return lambda default, changed: differ(outputs(default, family, train), outputs(changed, family, train))


def weight_std(model: nn.Module) -> float:
    return (
        model.get_output_embeddings().weight.std().item()
        if model.get_output_embeddings() is not None
        else model.layers[0].mlp.fc1.weight.std().item()
    )


def raises_value_error(action: Callable[[], object]) -> bool:
    try:
        action()
    except ValueError:
        return True
    return False


def no_attention_bias(default: nn.Module, changed: nn.Module) -> bool:
    """Biases on every attention projection by default, on none with attention_bias=False; the MLP keeps its own."""

    def biases(model):
        return [
            linear.bias is not None
            for attention in attentions(model)
            for linear in attention.children()
            if isinstance(linear, nn.Linear)
        ]

    return (
        all(biases(default))
        and not any(biases(changed))
        and changed.get_submodule(next(name for name, _ in changed.named_modules() if name.endswith("mlp.fc1"))).bias
        is not None
    )


def counts(getter: Callable[[nn.Module], int], expected: int) -> Callable[[nn.Module, nn.Module], bool]:
    """`getter` gives `expected` on the changed model only."""
    return lambda default, changed: getter(default) != expected and getter(changed) == expected


def first_layer(model: nn.Module, family: str) -> nn.Module:
    return stacks(model, family)[-1].layers[0]


def shared_cases(family: str) -> dict[str, Case]:
    """Fields every family has, with the same meaning."""
    return {
        "hidden_size": Case({"hidden_size": 48}, counts(lambda m: m.get_input_embeddings().embedding_dim, 48)),
        "num_hidden_layers": Case(
            {"num_hidden_layers": 3},
            lambda default, changed: (
                all(len(stack.layers) == 3 for stack in stacks(changed, family))
                and len(stacks(default, family)[0].layers) == 2
            ),
        ),
        "num_attention_heads": Case(
            {"num_attention_heads": 1},
            lambda default, changed: (
                all(attention.num_heads == 1 for attention in attentions(changed))
                and outputs_differ(family)(default, changed)
            ),
            base={"initializer_range": 1.0},
            same_weights=True,
        ),  # large weights: attention far from uniform
        "intermediate_size": Case(
            {"intermediate_size": 24}, counts(lambda m: first_layer(m, family).mlp.fc1.out_features, 24)
        ),
        "hidden_act": Case({"hidden_act": "silu"}, outputs_differ(family), same_weights=True),
        "layer_norm_eps": Case({"layer_norm_eps": 0.5}, outputs_differ(family), same_weights=True),
        "hidden_dropout": Case(
            {"hidden_dropout": 0.5}, outputs_differ(family, train=True), base={"hidden_dropout": 0.0}, same_weights=True
        ),
        "attention_dropout": Case(
            {"attention_dropout": 0.5},
            outputs_differ(family, train=True),
            base={"attention_dropout": 0.0, "hidden_dropout": 0.0},
            same_weights=True,
        ),
        "attention_bias": Case({"attention_bias": False}, no_attention_bias),
        "initializer_range": Case(
            {"initializer_range": 0.001}, lambda default, changed: weight_std(changed) < 0.002 < weight_std(default)
        ),
    }


def generation_setting(name: str, value) -> Case:
    """A token id `generate` is told through the model's generation config."""
    return Case(
        {name: value},
        lambda default, changed: (
            getattr(changed.generation_config, name) == value != getattr(default.generation_config, name)
        ),
    )


def cache_returned(family: str) -> Case:
    def holds(default, changed):
        return (
            getattr(default(IDS, decoder_input_ids=TARGET) if family == "seq2seq" else default(IDS), CACHE_FIELD)
            is not None
            and getattr(changed(IDS, decoder_input_ids=TARGET) if family == "seq2seq" else changed(IDS), CACHE_FIELD)
            is None
        )

    return Case({"use_cache": False}, holds)


def tied(model: nn.Module) -> bool:
    """Whether the output projection is the (target) token embedding."""
    inputs = model.model.decoder if model.config.is_encoder_decoder else model.model
    return model.lm_head.weight is inputs.embed_tokens.weight


GPT_CASES = {
    **shared_cases("gpt"),
    "vocab_size": Case(
        {"vocab_size": 50},
        lambda default, changed: (
            changed.lm_head.out_features == 50
            and changed.model.embed_tokens.num_embeddings == 50 != default.lm_head.out_features
        ),
    ),
    "max_position_embeddings": Case(
        {"max_position_embeddings": 80}, counts(lambda m: m.model.embed_positions.num_embeddings, 80)
    ),
    "position_embedding_type": Case(
        {"position_embedding_type": "rope"},
        lambda default, changed: (
            hasattr(changed.model, "rotary_emb")
            and not hasattr(changed.model, "embed_positions")
            and hasattr(default.model, "embed_positions")
        ),
    ),
    "context_overflow": Case(
        {"context_overflow": "crop"},
        lambda default, changed: (
            raises_value_error(lambda: default(torch.ones(1, 12, dtype=torch.long)))
            and changed(torch.ones(1, 12, dtype=torch.long)).logits.shape[1] == 8
        ),
        base={"max_position_embeddings": 8},
    ),
    "rope_theta": Case(
        {"rope_theta": 10.0}, outputs_differ("gpt"), base={"position_embedding_type": "rope"}, same_weights=True
    ),
    "rope_interleaved": Case(
        {"rope_interleaved": False}, outputs_differ("gpt"), base={"position_embedding_type": "rope"}, same_weights=True
    ),
    "use_cache": cache_returned("gpt"),
    "tie_word_embeddings": Case(
        {"tie_word_embeddings": False}, lambda default, changed: tied(default) and not tied(changed)
    ),
    "pad_token_id": generation_setting("pad_token_id", 5),
    "bos_token_id": generation_setting("bos_token_id", 2),
    "eos_token_id": generation_setting("eos_token_id", 3),
}

ENCODER_CASES = {
    **shared_cases("encoder"),
    "vocab_size": Case({"vocab_size": 50}, counts(lambda m: m.embed_tokens.num_embeddings, 50)),
    "max_position_embeddings": Case(
        {"max_position_embeddings": 4},
        lambda default, changed: (
            raises_value_error(lambda: changed(IDS)) and not raises_value_error(lambda: default(IDS))
        ),
    ),
    "position_embedding_type": Case(
        {"position_embedding_type": "learned"},
        lambda default, changed: hasattr(changed, "embed_positions") and not hasattr(default, "embed_positions"),
    ),
    "scale_embeddings": Case({"scale_embeddings": False}, outputs_differ("encoder"), same_weights=True),
    "classifier_dropout": Case(
        {"classifier_dropout": 0.9},
        lambda default, changed: default.dropout.p == 0.1 and changed.dropout.p == 0.9,
        base={"num_labels": 3},
        model_class=MiniTFEncoderForSequenceClassification,
    ),
    "pad_token_id": Case(
        {"pad_token_id": 5},
        lambda default, changed: (
            changed.embed_tokens.padding_idx == 5
            and not changed.embed_tokens.weight[5].any()
            and default.embed_tokens.weight[5].any()
        ),
    ),
}

SEQ2SEQ_NORMS = {
    "scalar_std_times_eps": (1, True),
    "scalar_std_plus_eps": (1, False),
    "per_feature_std_plus_eps": (32, False),
}


def norm_is(norm_type: str) -> Callable[[nn.Module, nn.Module], bool]:
    size, times = SEQ2SEQ_NORMS[norm_type]

    def holds(default, changed):
        norms = [module for module in changed.modules() if isinstance(module, (nn.LayerNorm, HkprojLayerNorm))]
        return (
            isinstance(default.model.decoder.norm, nn.LayerNorm)
            and all(
                isinstance(norm, HkprojLayerNorm) and norm.weight.numel() == size and norm.eps_multiplies_std == times
                for norm in norms
            )
            and len(norms) == 2 * 2 + 2 * 3 + 2
        )

    return holds


SEQ2SEQ_CASES = {
    **shared_cases("seq2seq"),
    "src_vocab_size": Case(
        {"src_vocab_size": 30},
        lambda default, changed: (
            changed.model.encoder.embed_tokens.num_embeddings == 30
            and changed.lm_head.out_features == default.lm_head.out_features
        ),
    ),
    "vocab_size": Case(
        {"vocab_size": 45},
        lambda default, changed: (
            changed.lm_head.out_features == 45
            and changed.model.decoder.embed_tokens.num_embeddings == 45
            and changed.model.encoder.embed_tokens.num_embeddings == 37
        ),
    ),
    "max_position_embeddings": Case(
        {"max_position_embeddings": 4},
        lambda default, changed: (
            raises_value_error(lambda: outputs(changed, "seq2seq"))
            and not raises_value_error(lambda: outputs(default, "seq2seq"))
        ),
    ),
    "norm_type": Case({"norm_type": "per_feature_std_plus_eps"}, norm_is("per_feature_std_plus_eps")),
    "attention_mask_value": Case(
        {"attention_mask_value": -1e9},
        lambda default, changed: (
            all(attention.fixed_mask_value == -1e9 for attention in attentions(changed))
            and changed.config._attn_implementation == "eager" != default.config._attn_implementation
        ),
    ),
    "scale_embedding": Case({"scale_embedding": False}, outputs_differ("seq2seq"), same_weights=True),
    "lm_head_bias": Case(
        {"lm_head_bias": False},
        lambda default, changed: changed.lm_head.bias is None and default.lm_head.bias is not None,
    ),
    "output_log_softmax": Case(
        {"output_log_softmax": True},
        lambda default, changed: (
            torch.allclose(outputs(changed, "seq2seq").exp().sum(-1), torch.ones(2, 4), atol=1e-4)
            and not torch.allclose(outputs(default, "seq2seq").exp().sum(-1), torch.ones(2, 4), atol=1e-4)
        ),
        same_weights=True,
    ),
    "label_smoothing": Case(
        {"label_smoothing": 0.3},
        lambda default, changed: differ(default(IDS, labels=TARGET).loss, changed(IDS, labels=TARGET).loss),
        same_weights=True,
    ),
    "use_cache": cache_returned("seq2seq"),
    "is_encoder_decoder": Case(
        {},
        lambda default, changed: (
            raises_value_error(lambda: TINY_CLASSES["seq2seq"][0](is_encoder_decoder=False))
            and default.config.is_encoder_decoder
        ),
    ),
    "tie_word_embeddings": Case(
        {"tie_word_embeddings": True}, lambda default, changed: tied(changed) and not tied(default)
    ),
    "pad_token_id": generation_setting("pad_token_id", 0),
    "bos_token_id": generation_setting("bos_token_id", 5),
    "eos_token_id": generation_setting("eos_token_id", 6),
    "decoder_start_token_id": Case(
        {"decoder_start_token_id": 7},
        lambda default, changed: (
            changed.generation_config.decoder_start_token_id == 7
            and changed.prepare_decoder_input_ids_from_labels(TARGET)[:, 0].tolist()
            == [7, 7]
            != default.prepare_decoder_input_ids_from_labels(TARGET)[:, 0].tolist()
        ),
    ),
}

CASES = {"gpt": GPT_CASES, "encoder": ENCODER_CASES, "seq2seq": SEQ2SEQ_CASES}


@pytest.mark.parametrize("family", CASES)
def test_every_field_has_a_case(family):
    assert set(CASES[family]) == set(FIELD_CHECKS[TINY_CLASSES[family][0].model_type])


@pytest.mark.parametrize(("family", "name"), [(family, name) for family in CASES for name in CASES[family]])
def test_field_reaches_the_model(family, name):
    case = CASES[family][name]
    default = tiny_model(family, seed=0, model_class=case.model_class, **case.base)
    changed = tiny_model(family, seed=0, model_class=case.model_class, **{**case.base, **case.changed})
    if case.same_weights:
        changed.load_state_dict(default.state_dict())
    with torch.no_grad():
        assert case.holds(default, changed), f"{family}: changing {name} to {case.changed} made no such difference"


def test_every_seq2seq_norm_type_builds_its_norm():
    for norm_type in SEQ2SEQ_NORMS:
        default = tiny_model("seq2seq", seed=0)
        assert norm_is(norm_type)(default, tiny_model("seq2seq", seed=0, norm_type=norm_type)), norm_type
