"""The seq2seq family: hkproj's pytorch-transformer reproduced, generate with and without cache, training, pipeline,
tokenizer, errors."""

import json
import random
import re

import pytest
import torch
import torch.nn.functional as F
from datasets import Dataset
from factories import save_with_tokenizer, tiny_model
from isolation import run_without_hf_minitf
from safetensors.torch import load_file
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import (
    AutoModel,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    DataCollatorForSeq2Seq,
    Seq2SeqTrainer,
    Seq2SeqTrainingArguments,
    pipeline,
)

from hf_minitf import (
    TRANSLATION_TASK,
    MiniTFSeq2SeqConfig,
    MiniTFSeq2SeqForConditionalGeneration,
    MiniTFSeq2SeqModel,
    MiniTFSeq2SeqTokenizer,
    train_translation_tokenizers,
)
from hf_minitf.catalog.limits import NORM_TYPES
from hf_minitf.safety.model_inputs import check_model_inputs

SPECIALS = ["[UNK]", "[PAD]", "[SOS]", "[EOS]"]
PAD, SOS, EOS = 1, 2, 3


def padded_sources():
    """Two sources `[SOS] x [EOS]`, the second right-padded."""
    generator = torch.Generator().manual_seed(7)
    ids = torch.randint(4, 37, (2, 9), generator=generator)
    ids[:, 0], ids[0, -1] = SOS, EOS
    ids[1, 5], ids[1, 6:] = EOS, PAD
    return ids, (ids != PAD).long()


# --- hkproj's pytorch-transformer: the converted original reproduces its outputs ---


def hkproj_key(key: str) -> str:
    """hkproj's state-dict name -> ours (the conversion module does this for real checkpoints)."""
    key = re.sub(r"^src_embed\.embedding", "model.encoder.embed_tokens", key)
    key = re.sub(r"^tgt_embed\.embedding", "model.decoder.embed_tokens", key)
    key = re.sub(r"^projection_layer\.project", "lm_head", key)
    key = re.sub(r"^(encoder|decoder)\.", r"model.\1.", key)
    key = key.replace("self_attention_block", "self_attn").replace("cross_attention_block", "cross_attn")
    key = re.sub(r"feed_forward_block\.linear_(\d)", r"mlp.fc\1", key)
    key = re.sub(r"\.w_([qkvo])\.", r".\1_proj.", key)
    norms = ["self_attn_layer_norm", "cross_attn_layer_norm", "mlp_layer_norm"]
    if "model.encoder" in key:
        norms = ["self_attn_layer_norm", "mlp_layer_norm"]
    key = re.sub(r"residual_connections\.(\d)\.norm", lambda m: norms[int(m.group(1))], key)
    return key.replace(".alpha", ".weight")


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("name", ["seq2seq_transformer", "seq2seq_transformer_trained_like"])
def test_reproduces_hkproj(data_dir, name, attn_implementation):
    folder = data_dir / name
    original = json.loads((folder / "config.json").read_text())
    config = MiniTFSeq2SeqConfig(
        src_vocab_size=original["src_vocab_size"],
        vocab_size=original["tgt_vocab_size"],
        hidden_size=original["d_model"],
        num_hidden_layers=original["N"],
        num_attention_heads=original["h"],
        intermediate_size=original["d_ff"],
        max_position_embeddings=max(original["src_seq_len"], original["tgt_seq_len"]),
        norm_type="scalar_std_times_eps",
        layer_norm_eps=1e-6,
        attention_mask_value=-1e9,
        output_log_softmax=True,
    )
    config._attn_implementation = attn_implementation
    model = MiniTFSeq2SeqForConditionalGeneration(config).eval()
    state = {hkproj_key(k): v for k, v in load_file(folder / "original.safetensors").items() if not k.endswith(".pe")}
    model.load_state_dict(state, strict=True)
    io = load_file(folder / "io.safetensors")
    source_mask = io["src_mask"][:, 0, 0, :]
    target_mask = (io["tgt"] != PAD).long()  # with causality, this is hkproj's tgt_mask
    assert torch.equal(io["tgt_mask"][:, 0].bool(), target_mask[:, None, :].bool() & torch.ones(9, 9).tril().bool())

    with torch.no_grad():
        out = model(
            input_ids=io["src"],
            attention_mask=source_mask,
            decoder_input_ids=io["tgt"],
            decoder_attention_mask=target_mask,
            output_hidden_states=True,
        )
    # hkproj's untrained norm divides by std * 1e-6, so activations reach ~1e6: compare relative to their size.
    for ours, theirs in [
        (out.encoder_last_hidden_state, io["encoder_output"]),
        (out.decoder_hidden_states[-1], io["decoder_output"]),
        (out.logits, io["log_probs"]),
    ]:
        assert (ours - theirs).abs().max() <= 1e-5 * max(1.0, theirs.abs().max().item())

    # hkproj's -1e9 mask stops masking once scores pass ~1e9 (the untrained fixture's ~1e12): its decoder then
    # sees later tokens, which a KV cache cannot reproduce. Trained hkproj models (the other fixture) cache exactly.
    cache_options = [False] if name == "seq2seq_transformer" else [False, True]
    for use_cache in cache_options:
        greedy = model.generate(
            input_ids=io["src"][:1],
            attention_mask=source_mask[:1],
            max_length=8,
            do_sample=False,
            num_beams=1,
            use_cache=use_cache,
        )
        assert torch.equal(greedy, io["greedy_src0"])


# --- generate ---


def hkproj_like(model):
    """hkproj's norm and -1e9 masking, with norm gains near eps as its training leaves them (activations ~1)."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("norm.weight"):
                parameter.mul_(1e-6)
    return model


MODEL_VARIANTS = {
    "layer_norm": lambda: tiny_model("seq2seq"),
    "per_feature_std_plus_eps": lambda: tiny_model(
        "seq2seq", seed=0, norm_type="per_feature_std_plus_eps", attention_bias=False
    ),
    "hkproj_trained": lambda: hkproj_like(
        tiny_model("seq2seq", norm_type="scalar_std_times_eps", attention_mask_value=-1e9, output_log_softmax=True)
    ),
}


@pytest.mark.parametrize(
    "decoding",
    [
        dict(num_beams=1),
        dict(num_beams=3),
        dict(num_beams=3, num_return_sequences=2),
    ],
)
@pytest.mark.parametrize("variant", list(MODEL_VARIANTS))
def test_generate_with_cache_equals_without(decoding, variant):
    model = MODEL_VARIANTS[variant]()
    ids, mask = padded_sources()
    kwargs = dict(max_new_tokens=25, min_new_tokens=25, do_sample=False, **decoding)
    cached = model.generate(input_ids=ids, attention_mask=mask, **kwargs)
    uncached = model.generate(input_ids=ids, attention_mask=mask, use_cache=False, **kwargs)
    assert cached.shape == (2 * decoding.get("num_return_sequences", 1), 26)
    assert torch.equal(cached, uncached)
    assert (cached[:, 0] == SOS).all()
    assert max(len(set(row[1:].tolist())) for row in cached) > 3, "the test model should not collapse to one token"


@pytest.mark.parametrize("variant", list(MODEL_VARIANTS))
def test_incremental_decoding_logits_equal_full_pass(variant):
    model = MODEL_VARIANTS[variant]()
    ids, mask = padded_sources()
    target = torch.randint(4, 41, (2, 12), generator=torch.Generator().manual_seed(5))
    target[:, 0] = SOS
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=mask, decoder_input_ids=target, use_cache=False).logits
        encoder_outputs = model.get_encoder()(input_ids=ids, attention_mask=mask)
        cache, steps = None, []
        for position in range(target.shape[1]):
            out = model(
                encoder_outputs=encoder_outputs,
                attention_mask=mask,
                cache=cache,
                decoder_input_ids=target[:, position : position + 1],
                use_cache=True,
            )
            cache = out.cache if hasattr(out, "cache") else out.past_key_values
            steps.append(out.logits)
    # Float32 rounding differs between the two paths in proportion to the logits' scale (tens here), not to each
    # logit's own size: compare relative to the largest logit of each row, which holds on any x86-64 CPU.
    scale = full.abs().amax(dim=-1, keepdim=True)
    difference = (torch.cat(steps, dim=1) - full).abs() / scale
    assert difference.max() < 1e-4, f"incremental logits differ by {difference.max():.2e} of their row's scale"


def test_sampling_with_cache_equals_without():
    model = tiny_model("seq2seq")
    ids, mask = padded_sources()
    kwargs = dict(max_new_tokens=20, do_sample=True, top_k=10, temperature=0.8)
    torch.manual_seed(3)
    cached = model.generate(input_ids=ids, attention_mask=mask, **kwargs)
    torch.manual_seed(3)
    uncached = model.generate(input_ids=ids, attention_mask=mask, use_cache=False, **kwargs)
    assert torch.equal(cached, uncached)


@pytest.mark.parametrize("use_cache", [True, False])
def test_padded_batch_translates_each_source_as_alone(use_cache):
    model = tiny_model("seq2seq")
    ids, mask = padded_sources()
    kwargs = dict(max_new_tokens=15, min_new_tokens=15, do_sample=False, use_cache=use_cache)
    together = model.generate(input_ids=ids, attention_mask=mask, **kwargs)
    alone = model.generate(input_ids=ids[1:, :6], **kwargs)
    assert torch.equal(together[1], alone[0])


def test_cross_attention_keys_values_computed_once():
    model = tiny_model("seq2seq")
    ids, mask = padded_sources()
    calls = []
    model.model.decoder.layers[0].cross_attn.k_proj.register_forward_hook(lambda *_: calls.append(1))
    model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=10, min_new_tokens=10, do_sample=False)
    assert len(calls) == 1
    calls.clear()
    model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=10, min_new_tokens=10, use_cache=False)
    assert len(calls) == 10


def test_output_log_softmax_changes_scores_not_decisions():
    plain = tiny_model("seq2seq")
    log_probs = tiny_model("seq2seq", output_log_softmax=True)
    ids, mask = padded_sources()
    target = torch.tensor([[SOS, 5, 6, 7], [SOS, 8, 9, PAD]])
    with torch.no_grad():
        scores = plain(input_ids=ids, attention_mask=mask, decoder_input_ids=target).logits
        logp = log_probs(input_ids=ids, attention_mask=mask, decoder_input_ids=target).logits
    torch.testing.assert_close(logp, scores.log_softmax(-1))
    kwargs = dict(input_ids=ids, attention_mask=mask, max_new_tokens=10, num_beams=2)
    assert torch.equal(plain.generate(**kwargs), log_probs.generate(**kwargs))


# --- loss ---


def test_loss_ignores_padding_and_smooths_labels():
    model = tiny_model("seq2seq", label_smoothing=0.1)
    ids, mask = padded_sources()
    labels = torch.tensor([[5, 6, 7, EOS], [8, 9, EOS, PAD]])
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    ignored = model(input_ids=ids, attention_mask=mask, labels=labels.masked_fill(labels == PAD, -100))
    assert out.loss == ignored.loss
    decoder_input = torch.tensor([[SOS, 5, 6, 7], [SOS, 8, 9, EOS]])
    logits = model(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_input).logits
    keep = labels != PAD
    expected = F.cross_entropy(logits[keep], labels[keep], label_smoothing=0.1)
    torch.testing.assert_close(out.loss, expected)
    assert torch.equal(
        model.prepare_decoder_input_ids_from_labels(labels.masked_fill(labels == PAD, -100)),
        torch.tensor([[SOS, 5, 6, 7], [SOS, 8, 9, EOS]]),
    )


# --- the toy translation task: Seq2SeqTrainer, then the pipeline ---

EN = "one two three four five six seven eight nine ten".split()
IT = "uno due tre quattro cinque sei sette otto nove dieci".split()


def number_pairs():
    """Sentences of 1-5 English number words and their word-by-word Italian translation."""
    rng = random.Random(0)
    pairs = set()
    while len(pairs) < 700:
        words = [rng.randrange(len(EN)) for _ in range(rng.randint(1, 5))]
        pairs.add((" ".join(EN[i] for i in words), " ".join(IT[i] for i in words)))
    pairs = sorted(pairs)
    rng.shuffle(pairs)
    held_out = [pair for pair in pairs if len(pair[0].split()) >= 3][:8]
    return [pair for pair in pairs if pair not in held_out][:600], held_out


def test_learns_toy_translation_with_trainer_and_pipeline(tmp_path, one_thread):
    train, held_out = number_pairs()
    tokenizer = train_translation_tokenizers(train, min_frequency=1)
    # the config's default init, not the tiny sizes' wide one: a model that trains
    fields = dict(max_position_embeddings=16, initializer_range=0.02, hidden_dropout=0.0, attention_dropout=0.0)
    model = tiny_model("seq2seq", seed=0, tokenizer=tokenizer, **fields)
    data = Dataset.from_dict({"src": [p[0] for p in train], "tgt": [p[1] for p in train]}).map(
        lambda batch: tokenizer(batch["src"], text_target=batch["tgt"]), batched=True, remove_columns=["src", "tgt"]
    )
    args = Seq2SeqTrainingArguments(
        str(tmp_path / "run"),
        per_device_train_batch_size=32,
        learning_rate=5e-3,
        max_steps=200,
        warmup_steps=20,
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        logging_steps=50,
        seed=0,
        disable_tqdm=True,
    )
    trainer = Seq2SeqTrainer(
        model=model,
        args=args,
        train_dataset=data,
        processing_class=tokenizer,
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model),
    )
    trainer.train()
    losses = [log["loss"] for log in trainer.state.log_history if "loss" in log]
    assert losses[-1] < 0.1 < losses[0]

    folder = save_with_tokenizer(model, tokenizer, tmp_path / "model")
    translator = pipeline(TRANSLATION_TASK, model=str(folder))
    results = translator([source for source, _ in held_out], batch_size=4, max_new_tokens=8)
    assert [r["translation_text"] for r in results] == [target for _, target in held_out]
    assert translator(held_out[0][0]) == [{"translation_text": held_out[0][1]}]
    # generate() keyword arguments pass through: two beams returned, and a one-token budget.
    two = translator(held_out[0][0], num_beams=2, num_return_sequences=2)
    assert len(two) == 1 and len(two[0]) == 2 and two[0][0]["translation_text"] == held_out[0][1]
    assert translator(held_out[0][0], max_new_tokens=1)[0]["translation_text"] == held_out[0][1].split()[0]
    with pytest.raises(ValueError, match="empty"):
        translator("   ")
    with pytest.raises(ValueError, match="max_position_embeddings"):
        translator(" ".join(["one"] * 20))


# --- save / load ---


@pytest.mark.parametrize("norm_type", NORM_TYPES)
def test_save_load_keeps_weights_bit_identical(tmp_path, norm_type):
    model = tiny_model("seq2seq", norm_type=norm_type, attention_bias=norm_type == "layer_norm", lm_head_bias=False)
    with torch.no_grad():  # non-default norm parameters, so that loading them is tested
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.add_(torch.rand_like(parameter))
    model.save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix in {".safetensors", ".bin", ".pt"}) == [
        "model.safetensors"
    ]
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is MiniTFSeq2SeqForConditionalGeneration and loaded.config.norm_type == norm_type
    ids, mask = padded_sources()
    target = torch.tensor([[SOS, 5, 6], [SOS, 7, 8]])
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=mask, decoder_input_ids=target).logits
        actual = loaded(input_ids=ids, attention_mask=mask, decoder_input_ids=target).logits
    assert all(torch.equal(tensor, loaded.state_dict()[name]) for name, tensor in model.state_dict().items())
    # The same weights; the rounding of a few-row product depends on its memory alignment.
    assert (actual - expected).abs().max() <= 1e-5 * expected.abs().max()
    kwargs = dict(input_ids=ids, attention_mask=mask, max_new_tokens=12, num_beams=2)
    assert torch.equal(loaded.generate(**kwargs), model.generate(**kwargs))
    base = AutoModel.from_pretrained(tmp_path).eval()
    assert type(base) is MiniTFSeq2SeqModel
    with torch.no_grad():
        hidden = base(input_ids=ids, attention_mask=mask, decoder_input_ids=target).last_hidden_state
        expected = model.model(input_ids=ids, attention_mask=mask, decoder_input_ids=target).last_hidden_state
    assert (hidden - expected).abs().max() <= 1e-5 * expected.abs().max()


def test_remote_code_load_in_fresh_process(tmp_path):
    tokenizer = train_translation_tokenizers(number_pairs()[0], min_frequency=1)
    model = tiny_model("seq2seq", tokenizer=tokenizer)
    save_with_tokenizer(model, tokenizer, tmp_path)
    texts = ["one two three", "ten"]
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    generated = model.generate(**batch, max_new_tokens=8, num_beams=2)
    with torch.no_grad():
        logits = model(**batch, decoder_input_ids=generated).logits
    result = run_without_hf_minitf(
        f"""
        import json, torch
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
        model = AutoModelForSeq2SeqLM.from_pretrained({str(tmp_path)!r}, trust_remote_code=True).eval()
        tokenizer = AutoTokenizer.from_pretrained({str(tmp_path)!r}, trust_remote_code=True)
        batch = tokenizer({texts!r}, return_tensors="pt", padding=True)
        generated = model.generate(**batch, max_new_tokens=8, num_beams=2)
        with torch.no_grad():
            logits = model(**batch, decoder_input_ids=generated).logits
        print(json.dumps({{"classes": [type(model).__name__, type(tokenizer).__name__],
                          "input_ids": batch["input_ids"].tolist(), "generated": generated.tolist(),
                          "texts": tokenizer.batch_decode(generated, skip_special_tokens=True),
                          "logits": logits.tolist()}}))
    """,
        cwd=str(tmp_path),
    )
    assert result["classes"] == ["MiniTFSeq2SeqForConditionalGeneration", "MiniTFSeq2SeqTokenizer"]
    assert result["input_ids"] == batch["input_ids"].tolist()
    assert result["generated"] == generated.tolist()
    assert result["texts"] == tokenizer.batch_decode(generated, skip_special_tokens=True)
    assert (torch.tensor(result["logits"]) - logits).abs().max() <= 1e-5 * logits.abs().max()


# --- tokenizer ---


def original_style_tokenizer(texts, path):
    """A tokenizer as hkproj's train.py builds and saves it: WordLevel + Whitespace, specials 0..3, min count 2."""
    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(texts, trainer=trainers.WordLevelTrainer(special_tokens=SPECIALS, min_frequency=2))
    tokenizer.save(str(path))
    return tokenizer


def test_tokenizer_from_original_files_round_trip(tmp_path):
    english = ["The cat sits on the mat.", "The dog sits, the cat runs.", "A cat and a dog."] * 2
    italian = ["Il gatto siede sul tappeto.", "Il cane siede, il gatto corre.", "Un gatto e un cane."] * 2
    source = original_style_tokenizer(english, tmp_path / "tokenizer_en.json")
    target = original_style_tokenizer(italian, tmp_path / "tokenizer_it.json")
    tokenizer = MiniTFSeq2SeqTokenizer(tmp_path / "tokenizer_en.json", tmp_path / "tokenizer_it.json")
    assert [tokenizer.convert_tokens_to_ids(t) for t in SPECIALS] == [0, 1, 2, 3]
    assert (tokenizer.pad_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id) == (PAD, SOS, EOS)

    text, text_target = "The cat sits, a zebra runs.", "Il gatto corre."
    encoded = tokenizer(text, text_target=text_target)
    assert encoded["input_ids"] == [SOS] + source.encode(text).ids + [EOS]
    assert encoded["labels"] == target.encode(text_target).ids + [EOS]
    assert source.token_to_id("zebra") is None and 0 in encoded["input_ids"]  # unknown word -> [UNK]
    assert tokenizer.decode(encoded["labels"], skip_special_tokens=True) == "Il gatto corre ."
    assert tokenizer.decode([SOS] + encoded["labels"]) == "[SOS] Il gatto corre . [EOS]"

    batch = tokenizer(["The cat", "A dog sits on the mat"], text_target=["Il gatto", "Un cane"], padding=True)
    assert batch["input_ids"][0][-1] == PAD and batch["attention_mask"][0][-1] == 0

    tokenizer(["The cat"], padding="max_length", max_length=12)  # padding state must not leak into the files
    tokenizer.save_pretrained(tmp_path / "saved")
    for name in ("source_tokenizer.json", "target_tokenizer.json"):
        assert json.loads((tmp_path / "saved" / name).read_text())["padding"] is None
    loaded = AutoTokenizer.from_pretrained(tmp_path / "saved")
    assert type(loaded) is MiniTFSeq2SeqTokenizer
    assert loaded(text, text_target=text_target) == encoded
    assert loaded(["The cat", "A dog sits on the mat"], text_target=["Il gatto", "Un cane"], padding=True) == batch
    assert loaded.batch_decode(batch["labels"], skip_special_tokens=True) == ["Il gatto", "Un cane"]


def test_train_translation_tokenizers_one_call():
    pairs = [("the cat", "il gatto"), ("the dog", "il cane"), ("a cat", "un gatto")]
    from_pairs = train_translation_tokenizers(pairs, min_frequency=2)
    from_lists = train_translation_tokenizers(
        source_texts=[p[0] for p in pairs], target_texts=[p[1] for p in pairs], min_frequency=2
    )
    assert from_pairs.get_vocab() == from_lists.get_vocab()
    assert set(from_pairs.get_vocab()) == set(SPECIALS) | {"the", "cat"}
    assert from_pairs(text_target="il gatto cane")["input_ids"] == [
        from_pairs._target_tokenizer.token_to_id(word) for word in ("il", "gatto")
    ] + [0, EOS]
    with pytest.raises(ValueError, match="same, non-zero number"):
        train_translation_tokenizers(source_texts=["a", "b"], target_texts=["c"])
    with pytest.raises(ValueError, match="not both"):
        train_translation_tokenizers(pairs, source_texts=["a"], target_texts=["b"])


def test_tokenizer_refuses_mismatched_special_ids(tmp_path):
    source = original_style_tokenizer(["a b"] * 2, tmp_path / "src.json")
    swapped = Tokenizer(models.WordLevel({"[PAD]": 0, "[UNK]": 1, "[SOS]": 2, "[EOS]": 3, "x": 4}, unk_token="[UNK]"))
    with pytest.raises(ValueError, match="same ids"):
        MiniTFSeq2SeqTokenizer(source, swapped)
    with pytest.raises(ValueError, match="target tokenizer is missing"):
        MiniTFSeq2SeqTokenizer(source, tmp_path / "nowhere.json")


# --- bad input ---

BAD_INPUTS = {
    "empty source": (dict(input_ids=torch.empty(1, 0, dtype=torch.long)), "source is empty"),
    "source too long": (dict(input_ids=torch.full((1, 41), 5)), "max_position_embeddings=40"),
    "id outside both vocabularies": (dict(input_ids=torch.tensor([[SOS, 50, EOS]])), "outside the source vocab"),
    "negative id": (dict(input_ids=torch.tensor([[SOS, -1, EOS]])), "outside the source vocab"),
    "target id as source": (dict(input_ids=torch.tensor([[SOS, 39, EOS]])), "lies in the target vocabulary"),
    "target id outside vocabulary": (
        dict(input_ids=torch.tensor([[SOS, 5, EOS]]), decoder_input_ids=torch.tensor([[SOS, 41]])),
        "decoder_input_ids",
    ),
    "label outside vocabulary": (
        dict(input_ids=torch.tensor([[SOS, 5, EOS]]), labels=torch.tensor([[5, 99]])),
        "labels",
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_raises_value_error(case):
    model = tiny_model("seq2seq")
    inputs, message = BAD_INPUTS[case]
    with pytest.raises(ValueError, match=message):
        if "decoder_input_ids" in inputs or "labels" in inputs:
            model(**inputs)
        else:
            model.generate(**inputs, max_new_tokens=3)


def test_an_all_padding_source_is_refused_before_the_model_runs():
    """The forward pass reads no mask value (a host sync): hf_minitf's check before it runs a translator does."""
    with pytest.raises(ValueError, match=r"Source rows \[1\] are all padding"):
        check_model_inputs(
            tiny_model("seq2seq"),
            torch.tensor([[SOS, 5, EOS], [PAD, PAD, PAD]]),
            attention_mask=torch.tensor([[1, 1, 1], [0, 0, 0]]),
        )


def test_generating_past_max_positions_and_config_errors():
    model = tiny_model("seq2seq", max_position_embeddings=10)
    with pytest.raises(ValueError, match="Generate fewer tokens"):
        model.generate(input_ids=torch.tensor([[SOS, 5, EOS]]), max_new_tokens=12, min_new_tokens=12)
    with pytest.raises(ValueError, match="decoder_input_ids"):
        MiniTFSeq2SeqModel(model.config)(input_ids=torch.tensor([[SOS, 5, EOS]]))
    with pytest.raises(ValueError, match="norm_type"):
        MiniTFSeq2SeqConfig(norm_type="rms")
