"""The GPT family: generation with and without cache, padding, save/load, attention backends, errors, training."""

import json
import logging
import math

import pytest
import torch
import torch.nn.functional as F
from factories import save_with_tokenizer, tiny_model
from isolation import run_without_hf_minitf
from safetensors import safe_open
from transformers import AutoModel, AutoModelForCausalLM, Trainer, TrainingArguments, pipeline

from hf_minitf import MiniTFGPTConfig, MiniTFGPTForCausalLM, MiniTFGPTModel
from hf_minitf.modeling.layers import RotaryEmbedding
from hf_minitf.tokenization.gpt import char_tokenizer

POSITION_TYPES = ["learned", "rope"]


def prompts(batch=2, length=6, vocab=61):
    generator = torch.Generator().manual_seed(7)
    return torch.randint(1, vocab, (batch, length), generator=generator)


@pytest.mark.parametrize("position_type", POSITION_TYPES)
def test_greedy_with_cache_equals_without(position_type):
    model = tiny_model("gpt", position_embedding_type=position_type)
    ids = prompts()
    kwargs = dict(max_new_tokens=40, min_new_tokens=40, do_sample=False)
    cached = model.generate(ids, **kwargs)
    uncached = model.generate(ids, use_cache=False, **kwargs)
    assert cached.shape == (2, 46)
    assert torch.equal(cached, uncached)
    assert len(set(cached[0, 6:].tolist())) > 3, "the test model should not collapse to one token"


@pytest.mark.parametrize("position_type", POSITION_TYPES)
def test_beam_search_with_cache_equals_without(position_type):
    model = tiny_model("gpt", position_embedding_type=position_type)
    ids = prompts()
    kwargs = dict(max_new_tokens=40, min_new_tokens=40, num_beams=3, do_sample=False)
    cached = model.generate(ids, **kwargs)
    uncached = model.generate(ids, use_cache=False, **kwargs)
    assert cached.shape == (2, 46)
    assert torch.equal(cached, uncached)


@pytest.mark.parametrize("position_type", POSITION_TYPES)
@pytest.mark.parametrize("use_cache", [True, False])
def test_left_padded_batch_generates_each_row_as_alone(position_type, use_cache):
    model = tiny_model("gpt", position_embedding_type=position_type)
    short, long = prompts(1, 3)[0], prompts(1, 8)[0]
    pad = model.config.pad_token_id
    batch = torch.stack([torch.cat([torch.full((5,), pad), short]), long])
    mask = torch.stack([torch.cat([torch.zeros(5), torch.ones(3)]), torch.ones(8)]).long()
    kwargs = dict(max_new_tokens=20, min_new_tokens=20, do_sample=False, use_cache=use_cache, pad_token_id=pad)
    together = model.generate(batch, attention_mask=mask, **kwargs)
    alone_short = model.generate(short[None], **kwargs)
    alone_long = model.generate(long[None], **kwargs)
    assert torch.equal(together[0, 5:], alone_short[0])
    assert torch.equal(together[1], alone_long[0])


@pytest.mark.parametrize("position_type", POSITION_TYPES)
def test_left_padded_forward_matches_unpadded(position_type):
    model = tiny_model("gpt", position_embedding_type=position_type)
    ids = prompts(1, 5)
    padded = torch.cat([torch.zeros(1, 3, dtype=torch.long), ids], dim=1)
    mask = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1]])
    with torch.no_grad():
        torch.testing.assert_close(
            model(padded, attention_mask=mask).logits[:, 3:], model(ids).logits, atol=1e-5, rtol=1e-5
        )


@pytest.mark.parametrize("position_type", POSITION_TYPES)
def test_explicit_position_ids_are_honoured(position_type):
    model = tiny_model("gpt", position_embedding_type=position_type)
    ids = prompts(1, 6)
    with torch.no_grad():
        default = model(ids).logits
        same = model(ids, position_ids=torch.arange(6)[None]).logits
        shifted = model(ids, position_ids=torch.arange(6)[None] + 5).logits
    assert torch.equal(default, same)
    if position_type == "rope":  # rotary attention depends on relative positions only
        torch.testing.assert_close(default, shifted, atol=1e-4, rtol=1e-4)
        assert not torch.equal(default, shifted)
    else:
        assert not torch.allclose(default, shifted, atol=1e-3)


@pytest.mark.parametrize("position_type", POSITION_TYPES)
def test_eager_and_sdpa_agree(position_type):
    model = tiny_model("gpt", position_embedding_type=position_type)
    ids = prompts(2, 9)
    mask = torch.ones_like(ids)
    mask[1, :4] = 0
    with torch.no_grad():
        model.set_attn_implementation("eager")
        eager = model(ids, attention_mask=mask).logits
        model.set_attn_implementation("sdpa")
        sdpa = model(ids, attention_mask=mask).logits
    assert model.config._attn_implementation == "sdpa"
    real = mask.bool()  # padding positions attend to nothing: their outputs are undefined in every backend
    assert (eager - sdpa)[real].abs().max().item() < 1e-5


def test_sdpa_and_eager_load_by_name(tmp_path):
    tiny_model("gpt").save_pretrained(tmp_path)
    for implementation in ("eager", "sdpa"):
        loaded = AutoModelForCausalLM.from_pretrained(tmp_path, attn_implementation=implementation)
        assert loaded.config._attn_implementation == implementation


def test_interleaved_rope_matches_hand_rotation():
    x = torch.tensor([1.0, 2.0, 3.0, 4.0]).view(1, 1, 1, 4)
    position = 2
    rotary = RotaryEmbedding(head_dim=4, base=10000.0, interleaved=True)
    cos, sin = rotary(torch.tensor([[position]]))
    rotated = rotary.rotate(x, cos, sin).flatten().tolist()
    slow = position * 10000 ** (-2 / 4)  # pair 1 turns 100 times slower than pair 0
    expected = [
        math.cos(position) * 1 - math.sin(position) * 2,
        math.sin(position) * 1 + math.cos(position) * 2,
        math.cos(slow) * 3 - math.sin(slow) * 4,
        math.sin(slow) * 3 + math.cos(slow) * 4,
    ]
    assert rotated == pytest.approx(expected, abs=1e-6)


def test_rotate_half_rope_pairs_first_and_second_half():
    x = torch.tensor([1.0, 2.0, 3.0, 4.0]).view(1, 1, 1, 4)
    rotary = RotaryEmbedding(head_dim=4, interleaved=False)
    cos, sin = rotary(torch.tensor([[1]]))
    rotated = rotary.rotate(x, cos, sin).flatten().tolist()
    slow = 10000 ** (-2 / 4)
    expected = [
        math.cos(1) * 1 - math.sin(1) * 3,
        math.cos(slow) * 2 - math.sin(slow) * 4,
        math.sin(1) * 1 + math.cos(1) * 3,
        math.sin(slow) * 2 + math.cos(slow) * 4,
    ]
    assert rotated == pytest.approx(expected, abs=1e-6)


def test_rope_layouts_differ_and_both_generate_consistently():
    interleaved = tiny_model("gpt", position_embedding_type="rope", rope_interleaved=True)
    half = tiny_model("gpt", position_embedding_type="rope", rope_interleaved=False)
    half.load_state_dict(interleaved.state_dict())
    ids = prompts(1, 6)
    with torch.no_grad():
        assert not torch.allclose(interleaved(ids).logits, half(ids).logits)
    kwargs = dict(max_new_tokens=20, do_sample=False)
    assert torch.equal(half.generate(ids, **kwargs), half.generate(ids, use_cache=False, **kwargs))


@pytest.mark.parametrize("position_type", POSITION_TYPES)
def test_save_load_keeps_weights_bit_identical_and_ties(tmp_path, position_type):
    model = tiny_model("gpt", position_embedding_type=position_type)
    model.save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "README.md",
        "config.json",
        "configuration_minitf_gpt.py",
        "generation_config.json",
        "layers.py",
        "model.safetensors",
        "modeling_minitf_gpt.py",
    ]
    with safe_open(str(tmp_path / "model.safetensors"), "pt") as weights:
        keys = set(weights.keys())
    assert "model.embed_tokens.weight" in keys and "lm_head.weight" not in keys, "tied weight stored once"

    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert type(loaded) is MiniTFGPTForCausalLM
    assert all(torch.equal(tensor, loaded.state_dict()[name]) for name, tensor in model.state_dict().items())
    assert loaded.lm_head.weight.data_ptr() == loaded.model.embed_tokens.weight.data_ptr()
    ids = prompts(2, 12)
    with torch.no_grad():
        expected = model(ids).logits
        # The same weights; the rounding of a few-row product depends on its memory alignment.
        assert (loaded(ids).logits - expected).abs().max() <= 1e-5 * expected.abs().max()
    if position_type == "rope":
        positions = torch.arange(5)[None]
        cos, _ = loaded.model.rotary_emb(positions)
        head_dim = 32 // 4
        expected = torch.cos(positions[0, :, None].float() * 10000 ** (-torch.arange(0, head_dim, 2) / head_dim))
        torch.testing.assert_close(cos[0], expected)

    base = AutoModel.from_pretrained(tmp_path)
    assert type(base) is MiniTFGPTModel
    with torch.no_grad():
        assert torch.equal(base(ids).last_hidden_state, model.model(ids).last_hidden_state)


def test_config_json_has_auto_map_for_every_class(tmp_path):
    tiny_model("gpt").save_pretrained(tmp_path)
    auto_map = json.loads((tmp_path / "config.json").read_text())["auto_map"]
    assert auto_map == {
        "AutoConfig": "configuration_minitf_gpt.MiniTFGPTConfig",
        "AutoModel": "modeling_minitf_gpt.MiniTFGPTModel",
        "AutoModelForCausalLM": "modeling_minitf_gpt.MiniTFGPTForCausalLM",
    }


@pytest.mark.parametrize("position_type", POSITION_TYPES)
def test_remote_code_load_without_hf_minitf(tmp_path, position_type):
    model = tiny_model("gpt", position_embedding_type=position_type)
    model.save_pretrained(tmp_path)
    ids = prompts(2, 5)
    expected = model.generate(ids, max_new_tokens=12, min_new_tokens=12, do_sample=False)
    result = run_without_hf_minitf(
        f"""
        import json, torch
        from transformers import AutoModel, AutoModelForCausalLM
        model = AutoModelForCausalLM.from_pretrained(".", trust_remote_code=True)
        ids = torch.tensor({ids.tolist()})
        out = model.generate(ids, max_new_tokens=12, min_new_tokens=12, do_sample=False)
        base = AutoModel.from_pretrained(".", trust_remote_code=True)
        print(json.dumps({{"module": type(model).__module__, "base": type(base).__name__,
                          "tokens": out.tolist()}}))
        """,
        cwd=str(tmp_path),
    )
    assert result["module"].startswith("transformers_modules")
    assert result["base"] == "MiniTFGPTModel"
    assert result["tokens"] == expected.tolist()


def test_labels_give_shifted_cross_entropy():
    model = tiny_model("gpt")
    ids = prompts(2, 10)
    labels = ids.clone()
    labels[1, 7:] = -100
    output = model(ids, labels=labels)
    logits = output.logits[:, :-1].reshape(-1, 61)
    expected = F.cross_entropy(logits, labels[:, 1:].reshape(-1), ignore_index=-100)
    torch.testing.assert_close(output.loss, expected)


def test_inputs_embeds_equal_input_ids():
    model = tiny_model("gpt", position_embedding_type="rope")
    ids = prompts(2, 7)
    with torch.no_grad():
        from_ids = model(ids).logits
        from_embeds = model(inputs_embeds=model.get_input_embeddings()(ids)).logits
    assert torch.equal(from_ids, from_embeds)
    with pytest.raises(ValueError, match="exactly one of input_ids or inputs_embeds"):
        model(ids, inputs_embeds=model.get_input_embeddings()(ids))
    from_ids = model.generate(ids, max_new_tokens=10, do_sample=False)
    from_embeds = model.generate(
        inputs_embeds=model.get_input_embeddings()(ids),
        attention_mask=torch.ones_like(ids),
        max_new_tokens=10,
        do_sample=False,
    )
    assert torch.equal(from_ids[:, ids.shape[1] :], from_embeds)


@pytest.mark.parametrize("position_type", POSITION_TYPES)
def test_gradient_checkpointing_gives_same_gradients(position_type):
    ids = prompts(2, 8)
    gradients = []
    for checkpointing in (False, True):
        model = tiny_model("gpt", position_embedding_type=position_type, hidden_dropout=0.0)
        model.train()
        if checkpointing:
            model.gradient_checkpointing_enable()
        model(ids, labels=ids).loss.backward()
        gradients.append(model.model.layers[0].self_attn.qkv_proj.weight.grad.clone())
    assert model.model.layers[0].gradient_checkpointing
    torch.testing.assert_close(gradients[0], gradients[1])


def test_output_hidden_states_and_attentions():
    model = tiny_model("gpt")
    model.set_attn_implementation("eager")
    output = model(prompts(1, 5), output_hidden_states=True, output_attentions=True)
    assert len(output.hidden_states) == 3 and len(output.attentions) == 2
    assert output.attentions[0].shape == (1, 4, 5, 5)
    assert torch.allclose(output.attentions[0].sum(-1), torch.ones(1, 4, 5))
    assert torch.all(output.attentions[0][0, :, 0, 1:] == 0), "causal: the first token sees only itself"


def test_return_dict_false_gives_tuple():
    output = tiny_model("gpt")(prompts(1, 4), return_dict=False)
    assert isinstance(output, tuple) and output[0].shape == (1, 4, 61)


# ---- bad input -------------------------------------------------------------------------------------------------


def test_past_max_positions_is_a_clear_error_in_forward_and_generate():
    model = tiny_model("gpt", max_position_embeddings=16)
    with pytest.raises(ValueError, match="max_position_embeddings=16"):
        model(prompts(1, 17))
    with pytest.raises(ValueError, match="max_position_embeddings=16"):
        model.generate(prompts(1, 10), max_new_tokens=10, min_new_tokens=10, do_sample=False)
    assert model(prompts(1, 16)).logits.shape == (1, 16, 61)


def test_rope_runs_past_max_positions():
    model = tiny_model("gpt", position_embedding_type="rope", max_position_embeddings=16)
    assert model(prompts(1, 40)).logits.shape == (1, 40, 61)


def test_crop_mode_slides_a_window_like_the_original():
    model = tiny_model("gpt", max_position_embeddings=8, context_overflow="crop")
    ids = prompts(1, 12)
    with torch.no_grad():
        assert torch.equal(model(ids).logits, model(ids[:, -8:]).logits)
        generated = model.generate(ids[:, :4], max_new_tokens=12, do_sample=False, use_cache=False)
        window = generated[:, :4]
        for _ in range(12):
            next_id = model(window[:, -8:]).logits[:, -1].argmax(-1, keepdim=True)
            window = torch.cat([window, next_id], dim=1)
    assert torch.equal(generated, window)
    with pytest.raises(ValueError, match="use_cache=False"):
        model.generate(ids[:, :4], max_new_tokens=12, min_new_tokens=12, do_sample=False)


def test_token_id_outside_vocabulary_is_a_clear_error():
    model = tiny_model("gpt")
    with pytest.raises(ValueError, match=r"token id 61.*vocab_size=61"):
        model(torch.tensor([[1, 2, 61]]))
    with pytest.raises(ValueError, match=r"token id -1"):
        model(torch.tensor([[1, -1]]))


def test_attention_mask_of_wrong_shape_is_a_clear_error():
    with pytest.raises(ValueError, match=r"attention_mask must have the shape .* = \(2, 5\)"):
        tiny_model("gpt")(prompts(2, 5), attention_mask=torch.ones(2, 4))
    with pytest.raises(ValueError, match=r"attention_mask must have the shape .* got \(2, 6\)"):
        tiny_model("gpt")(prompts(2, 5), attention_mask=torch.ones(2, 6))  # longer than the ids, without a cache


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (dict(hidden_size=30, num_attention_heads=4), "not divisible by num_attention_heads=4"),
        (dict(hidden_size=36, num_attention_heads=12, position_embedding_type="rope"), "even head dimension"),
        (dict(position_embedding_type="alibi"), "position_embedding_type must be one of .*got 'alibi'"),
        (dict(context_overflow="wrap"), "context_overflow must be one of .*got 'wrap'"),
        (dict(num_hidden_layers=0), "num_hidden_layers must be a positive integer, got 0"),
    ],
)
def test_invalid_config_fails_at_creation(overrides, message):
    with pytest.raises(ValueError, match=message):
        MiniTFGPTConfig(**overrides)


def test_config_aliases_and_defaults():
    config = MiniTFGPTConfig(n_embd=48, n_layer=3, n_head=6, n_positions=20)
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads) == (48, 3, 6)
    assert config.max_position_embeddings == 20 and config.intermediate_size == 4 * 48
    assert config.tie_word_embeddings


# ---- pipeline and training ---------------------------------------------------------------------------------------


def test_text_generation_pipeline_on_saved_folder(tmp_path):
    tokenizer = char_tokenizer("abcdefgh \n")
    model = tiny_model("gpt", seed=0, tokenizer=tokenizer)
    save_with_tokenizer(model, tokenizer, tmp_path)

    records = []
    handler = logging.Handler()
    handler.emit = records.append
    transformers_logger = logging.getLogger("transformers")
    transformers_logger.addHandler(handler)
    try:
        generator = pipeline("text-generation", model=str(tmp_path))
        result = generator(["abc", "h"], max_new_tokens=6, do_sample=False)
    finally:
        transformers_logger.removeHandler(handler)
    assert not [r for r in records if "not supported" in r.getMessage()], [r.getMessage() for r in records]
    ids = tokenizer("abc", return_tensors="pt").input_ids
    expected = tokenizer.decode(model.generate(ids, max_new_tokens=6, do_sample=False)[0], skip_special_tokens=True)
    assert result[0][0]["generated_text"] == expected
    assert result[1][0]["generated_text"].startswith("h")


def test_trainer_overfits_a_short_text_then_generates_it(tmp_path):
    text = "to be or not to be\n"
    tokenizer = char_tokenizer(text)
    # the config's default init, not the tiny sizes' wide one: a model that trains
    model = tiny_model("gpt", seed=0, vocab_size=len(tokenizer), max_position_embeddings=32, initializer_range=0.02)
    ids = tokenizer(text).input_ids
    dataset = [{"input_ids": ids, "labels": ids}] * 16
    args = TrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=8,
        num_train_epochs=60,
        learning_rate=1e-2,
        logging_steps=10,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=args, train_dataset=dataset)
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert losses[-1] < 0.1 * losses[0]

    model.eval()
    prompt = torch.tensor([ids[:3]])
    generated = model.generate(prompt, max_new_tokens=len(ids) - 3, do_sample=False)
    assert tokenizer.decode(generated[0]) == text


def test_training_dropout_sits_where_the_char_gpt_puts_it():
    """Dropout in training: on attention probabilities and each residual branch, not inside the MLP (nanoGPT's MLP
    is fc -> GELU -> proj -> dropout); the encoder's and translator's MLPs (MiniEmbed's, hkproj's) keep theirs."""
    torch.manual_seed(0)
    gpt = tiny_model("gpt", hidden_dropout=0.5, attention_dropout=0.5).train()
    mlp = gpt.model.layers[0].mlp
    hidden = torch.randn(2, 5, gpt.config.hidden_size)
    assert torch.equal(mlp(hidden), mlp.fc2(mlp.act(mlp.fc1(hidden))))
    encoder_mlp = tiny_model("encoder", hidden_dropout=0.5).train().layers[0].mlp
    hidden = torch.randn(2, 5, encoder_mlp.fc1.in_features)
    assert not torch.equal(encoder_mlp(hidden), encoder_mlp.fc2(encoder_mlp.act(encoder_mlp.fc1(hidden))))
