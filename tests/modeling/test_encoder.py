"""MiniTF encoder: MiniEmbed and Transformer-embedding layer exactness, pooling, bad input, Auto/remote-code
loading, sentence-transformers, classification fine-tuning and pipelines."""

import json
import os

import pytest
import torch
from factories import tiny_config, tiny_model
from isolation import run_without_hf_minitf
from safetensors.torch import load_file
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    Trainer,
    TrainingArguments,
    pipeline,
)

from hf_minitf import (
    MiniTFEncoderConfig,
    MiniTFEncoderForSequenceClassification,
    MiniTFEncoderModel,
    save_sentence_transformer,
    train_wordlevel_tokenizer,
)

TEXTS = [
    "the cat sat on the mat",
    "a dog runs in the park",
    "the cat sleeps",
    "dogs and cats are friends",
    "a bird sings in the tree",
    "the park is green",
    "fish swim in the sea",
    "the sea is blue and deep",
]

# MiniEmbed's parameter names -> MiniTFEncoderModel's (an ad-hoc map; conversion tooling lives in hf_minitf.conversion).
MINIEMBED_RENAMES = [
    ("token_embedding", "embed_tokens"),
    ("final_norm", "norm"),
    (".norm1", ".self_attn_layer_norm"),
    (".norm2", ".mlp_layer_norm"),
    ("attention.W_q", "self_attn.q_proj"),
    ("attention.W_k", "self_attn.k_proj"),
    ("attention.W_v", "self_attn.v_proj"),
    ("attention.W_o", "self_attn.o_proj"),
    ("feed_forward.linear1", "mlp.fc1"),
    ("feed_forward.linear2", "mlp.fc2"),
]


# MiniEmbed's config keys that MiniTFEncoderConfig takes as they are (its aliases d_model, num_heads, ... included).
MINIEMBED_FIELDS = ("vocab_size", "d_model", "num_heads", "num_layers", "d_ff", "max_seq_len", "pad_token_id")


def quiet_cpu_training(arguments_class, tmp_path, **settings):
    """`arguments_class` (transformers' or sentence-transformers' TrainingArguments) for a short CPU run that saves
    nothing, reports nowhere and logs every step."""
    return arguments_class(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        **settings,
    )


def assert_close_to_scale(actual: torch.Tensor, expected: torch.Tensor, tolerance: float = 1e-5) -> None:
    """Equal within `tolerance` of the expected values' magnitude (at least 1): float32 rounding grows with the
    values, so an absolute 1e-5 on outputs in the tens would depend on the CPU."""
    difference = (actual - expected).abs().max().item()
    scale = max(1.0, expected.abs().max().item())
    assert difference <= tolerance * scale, f"max difference {difference:.3g} > {tolerance:g} * {scale:.3g}"


def padded_batch():
    input_ids = torch.tensor([[2, 15, 27, 33, 41, 3], [2, 8, 9, 3, 0, 0], [2, 60, 3, 0, 0, 0]])
    return input_ids, (input_ids != 0).long()


@pytest.fixture(scope="module")
def tokenizer():
    return train_wordlevel_tokenizer(TEXTS * 2, vocab_size=64, min_frequency=1, max_length=24)


def load_miniembed(data_dir, attn_implementation):
    folder = data_dir / "minitf_embedding"
    miniembed = json.loads((folder / "config.json").read_text())
    config = MiniTFEncoderConfig(
        **{name: miniembed[name] for name in MINIEMBED_FIELDS},
        hidden_dropout=miniembed["dropout"],
        attention_dropout=miniembed["dropout"],
    )
    config._attn_implementation = attn_implementation
    original = load_file(folder / "original.safetensors")
    state_dict = {}
    for key, value in original.items():
        if key == "positional_encoding.pe":
            continue
        for old, new in MINIEMBED_RENAMES:
            key = key.replace(old, new)
        state_dict[key] = value
    model = MiniTFEncoderModel(config)
    model.load_state_dict(state_dict, strict=True)
    return model.eval(), original["positional_encoding.pe"], load_file(folder / "io.safetensors")


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_reproduces_miniembed(data_dir, attn_implementation):
    model, original_table, io = load_miniembed(data_dir, attn_implementation)
    assert io["attention_mask"].min() == 0, "the fixture should contain padding"
    with torch.no_grad():
        masked = model(io["input_ids"], attention_mask=io["attention_mask"])
        unmasked = model(io["input_ids"])
    assert_close_to_scale(masked.last_hidden_state, io["last_hidden_state"])
    assert_close_to_scale(masked.pooler_output, io["sentence_embedding"])
    assert_close_to_scale(unmasked.pooler_output, io["sentence_embedding_no_mask"])
    positions = torch.arange(original_table.shape[1])[None]
    torch.testing.assert_close(model.sinusoidal_positions(positions), original_table, atol=1e-6, rtol=0)


def test_embedding_layer_is_the_transformer_embedding_layer(data_dir):
    folder = data_dir / "transformer_embedding"
    layer = json.loads((folder / "config.json").read_text())
    original, io = load_file(folder / "original.safetensors"), load_file(folder / "io.safetensors")
    config = tiny_config(
        "encoder",
        vocab_size=layer["vocab_size"],
        hidden_size=layer["d_model"],
        max_position_embeddings=layer["max_len"],
        pad_token_id=layer["pad_idx"],
    )
    model = MiniTFEncoderModel(config).eval()
    assert model.embed_tokens.padding_idx == layer["pad_idx"]
    model.embed_tokens.weight.data.copy_(original["token_embedding.weight"])
    with torch.no_grad():
        embeddings = model(io["input_ids"], output_hidden_states=True).hidden_states[0]
    assert_close_to_scale(embeddings, io["output"])


def test_parameter_names_and_position_types():
    sinusoidal = tiny_model("encoder", num_hidden_layers=1)
    expected = {"embed_tokens.weight", "norm.weight", "norm.bias"} | {
        f"layers.0.{name}.{kind}"
        for name in (
            "self_attn.q_proj",
            "self_attn.k_proj",
            "self_attn.v_proj",
            "self_attn.o_proj",
            "self_attn_layer_norm",
            "mlp_layer_norm",
            "mlp.fc1",
            "mlp.fc2",
        )
        for kind in ("weight", "bias")
    }
    assert set(sinusoidal.state_dict()) == expected
    learned = tiny_model("encoder", num_hidden_layers=1, position_embedding_type="learned")
    assert set(learned.state_dict()) == expected | {"embed_positions.weight"}
    assert learned.embed_positions.weight.shape == (24, 16)
    input_ids, attention_mask = padded_batch()
    with torch.no_grad():
        assert torch.isfinite(learned(input_ids, attention_mask=attention_mask).last_hidden_state).all()
    unscaled = tiny_model("encoder", scale_embeddings=False)
    unscaled.load_state_dict(sinusoidal.state_dict(), strict=False)
    assert unscaled.embed_scale == 1.0 and sinusoidal.embed_scale == 4.0
    with pytest.raises(ValueError, match="position_embedding_type"):
        tiny_config("encoder", position_embedding_type="rope")


def test_eager_and_sdpa_agree_and_padding_does_not_leak():
    model = tiny_model("encoder")
    input_ids, attention_mask = padded_batch()
    outputs = {}
    for implementation in ("eager", "sdpa"):
        model.config._attn_implementation = implementation
        with torch.no_grad():
            outputs[implementation] = model(input_ids, attention_mask=attention_mask)
    assert_close_to_scale(outputs["eager"].last_hidden_state, outputs["sdpa"].last_hidden_state)
    batch = outputs["sdpa"].pooler_output
    for row in range(input_ids.shape[0]):
        length = int(attention_mask[row].sum())
        with torch.no_grad():
            alone = model(input_ids[row : row + 1, :length]).pooler_output
        torch.testing.assert_close(batch[row : row + 1], alone, atol=1e-6, rtol=0)
    torch.testing.assert_close(batch.norm(dim=-1), torch.ones(3), atol=1e-6, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_all_padding_row_is_finite_and_pools_to_zero(attn_implementation, dtype):
    model = tiny_model("encoder").to(dtype)
    model.config._attn_implementation = attn_implementation
    input_ids, attention_mask = padded_batch()
    attention_mask[1] = 0
    with torch.no_grad():
        output = model(input_ids, attention_mask=attention_mask)
        first_alone = model(input_ids[:1]).pooler_output
    assert torch.isfinite(output.last_hidden_state).all()
    assert output.pooler_output.dtype == dtype
    assert torch.equal(output.pooler_output[1], torch.zeros(16, dtype=dtype))
    tolerance = 1e-6 if dtype == torch.float32 else 2e-3
    torch.testing.assert_close(output.pooler_output[:1], first_alone, atol=tolerance, rtol=0)


def test_bad_input_raises_value_errors():
    model = tiny_model("encoder")
    input_ids, attention_mask = padded_batch()
    with pytest.raises(ValueError, match="token id 100, outside the vocabulary"):
        model(torch.tensor([[2, 100, 3]]))
    with pytest.raises(ValueError, match="token id -1"):
        model(torch.tensor([[2, -1, 3]]))
    with pytest.raises(ValueError, match="25 tokens .* max_position_embeddings=24"):
        model(torch.ones(1, 25, dtype=torch.long))
    with pytest.raises(ValueError, match="attention_mask must have the shape"):
        model(input_ids, attention_mask=attention_mask[:, :-1])
    with pytest.raises(ValueError, match="attention_mask must have the shape"):
        model(input_ids, attention_mask=attention_mask[:2])
    with pytest.raises(ValueError, match="exactly one of input_ids or inputs_embeds"):
        model()
    with pytest.raises(ValueError, match="batch dimension"):
        model(input_ids[0])
    with pytest.raises(ValueError, match="pad_token_id"):
        tiny_config("encoder", pad_token_id=100)
    with torch.no_grad():
        empty = model(torch.zeros(0, 4, dtype=torch.long), attention_mask=torch.zeros(0, 4, dtype=torch.long))
    assert empty.pooler_output.shape == (0, 16)


def test_save_load_with_auto_classes_keeps_weights_bit_identical(tmp_path):
    model = tiny_model("encoder")
    model.save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix in (".safetensors", ".bin", ".pt")) == [
        "model.safetensors"
    ]
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["auto_map"]["AutoModel"] == "modeling_minitf_encoder.MiniTFEncoderModel"
    assert config["auto_map"]["AutoModelForSequenceClassification"].endswith("MiniTFEncoderForSequenceClassification")
    assert isinstance(AutoConfig.from_pretrained(tmp_path), MiniTFEncoderConfig)
    loaded = AutoModel.from_pretrained(tmp_path).eval()
    assert type(loaded) is MiniTFEncoderModel
    input_ids, attention_mask = padded_batch()
    with torch.no_grad():
        before = model(input_ids, attention_mask=attention_mask)
        after = loaded(input_ids, attention_mask=attention_mask)
    assert all(torch.equal(tensor, loaded.state_dict()[name]) for name, tensor in model.state_dict().items())
    for name in ("last_hidden_state", "pooler_output"):
        # The same weights; the rounding of a few-row product depends on its memory alignment.
        assert (after[name] - before[name]).abs().max() <= 1e-5 * before[name].abs().max()
    classifier = AutoModelForSequenceClassification.from_pretrained(tmp_path, num_labels=3)
    assert type(classifier) is MiniTFEncoderForSequenceClassification
    assert torch.equal(classifier.model.embed_tokens.weight, model.embed_tokens.weight)


def test_sentence_transformer_folder(tmp_path, tokenizer):
    from sentence_transformers import SentenceTransformer

    model = tiny_model("encoder")
    tokenizer(["a", "b c"], padding="max_length", max_length=8, padding_side="left")  # leaves padding state behind
    folder = save_sentence_transformer(model, tokenizer, tmp_path / "st")
    modules = json.loads((tmp_path / "st" / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[-1] for m in modules] == ["Transformer", "Pooling", "Normalize"]
    saved_tokenizer = json.loads((tmp_path / "st" / "tokenizer.json").read_text())
    assert saved_tokenizer["padding"] is None and saved_tokenizer["truncation"] is None

    st_model = SentenceTransformer(folder, device="cpu")
    texts = TEXTS[:3] + ["", "cat " * 40]
    embeddings = st_model.encode(texts, convert_to_tensor=True, batch_size=2)
    batch = tokenizer(texts, padding=True, truncation=True, max_length=24, return_tensors="pt")
    with torch.no_grad():
        pooled = model(**batch).pooler_output
    assert embeddings.shape == (5, 16)
    assert (embeddings - pooled).abs().max() <= 1e-6
    similarity = st_model.similarity(embeddings, embeddings)
    torch.testing.assert_close(similarity.diagonal(), torch.ones(5), atol=1e-5, rtol=0)
    torch.testing.assert_close(similarity, similarity.T)
    assert st_model.encode([]).shape[0] == 0

    auto = AutoModel.from_pretrained(folder).eval()
    with torch.no_grad():
        assert torch.equal(auto(**batch).pooler_output, pooled)
    extractor = pipeline("feature-extraction", model=folder, device="cpu")
    features = torch.tensor(extractor(TEXTS[0]))
    with torch.no_grad():
        single = model(**tokenizer(TEXTS[0], return_tensors="pt")).last_hidden_state
    torch.testing.assert_close(features, single, atol=1e-6, rtol=0)


def test_sentence_transformer_training_lowers_loss(tmp_path, tokenizer):
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.losses import MultipleNegativesRankingLoss

    folder = save_sentence_transformer(
        tiny_model("encoder", hidden_dropout=0.0, attention_dropout=0.0), tokenizer, tmp_path / "st"
    )
    st_model = SentenceTransformer(folder, device="cpu")
    pairs = Dataset.from_dict({"anchor": TEXTS[0::2], "positive": TEXTS[1::2]})
    args = quiet_cpu_training(
        SentenceTransformerTrainingArguments,
        tmp_path,
        per_device_train_batch_size=4,
        per_device_eval_batch_size=4,
        num_train_epochs=8,
        learning_rate=5e-3,
    )
    trainer = SentenceTransformerTrainer(
        model=st_model, args=args, train_dataset=pairs, eval_dataset=pairs, loss=MultipleNegativesRankingLoss(st_model)
    )
    before = trainer.evaluate()["eval_loss"]
    trainer.train()
    after = trainer.evaluate()["eval_loss"]
    assert after < before - 0.1, (before, after)


def test_classification_trainer_and_pipeline(tmp_path, tokenizer):
    from datasets import Dataset

    config = tiny_config(
        "encoder",
        num_labels=2,
        id2label={0: "animal", 1: "place"},
        label2id={"animal": 0, "place": 1},
        hidden_dropout=0.0,
        attention_dropout=0.0,
    )
    model = MiniTFEncoderForSequenceClassification(config)
    labels = [0, 0, 0, 0, 0, 1, 1, 1]
    encoded = tokenizer(TEXTS, truncation=True)
    dataset = Dataset.from_dict({**encoded, "labels": labels})
    args = quiet_cpu_training(
        TrainingArguments, tmp_path, per_device_train_batch_size=8, num_train_epochs=15, learning_rate=1e-2
    )
    trainer = Trainer(model=model, args=args, train_dataset=dataset, eval_dataset=dataset, processing_class=tokenizer)
    before = trainer.evaluate()["eval_loss"]
    trainer.train()
    after = trainer.evaluate()["eval_loss"]
    assert after < before * 0.8, (before, after)

    trainer.save_model(str(tmp_path / "clf"))
    classify = pipeline("text-classification", model=str(tmp_path / "clf"), device="cpu")
    predictions = classify(TEXTS)
    assert {p["label"] for p in predictions} <= {"animal", "place"}
    assert sum(p["label"] == ["animal", "place"][y] for p, y in zip(predictions, labels)) >= 6


def test_remote_code_in_fresh_process(tmp_path, tokenizer):
    model = tiny_model("encoder")
    classifier = MiniTFEncoderForSequenceClassification(tiny_config("encoder", num_labels=3)).eval()
    save_sentence_transformer(model, tokenizer, tmp_path / "st")
    classifier.save_pretrained(tmp_path / "clf")
    for name in ("modeling_minitf_encoder.py", "configuration_minitf_encoder.py", "layers.py"):
        assert (tmp_path / "st" / name).exists() and (tmp_path / "clf" / name).exists()
    texts = TEXTS[:3]
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = {
            "pooled": model(**batch).pooler_output.tolist(),
            "hidden": model(**batch).last_hidden_state.tolist(),
            "logits": classifier(**batch).logits.tolist(),
        }
    result = run_without_hf_minitf(
        f"""
        import json, torch
        from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer
        from sentence_transformers import SentenceTransformer
        st_folder, clf_folder, texts = {str(tmp_path / "st")!r}, {str(tmp_path / "clf")!r}, {texts!r}
        tokenizer = AutoTokenizer.from_pretrained(st_folder, trust_remote_code=True)
        batch = tokenizer(texts, padding=True, return_tensors="pt")
        model = AutoModel.from_pretrained(st_folder, trust_remote_code=True).eval()
        classifier = AutoModelForSequenceClassification.from_pretrained(clf_folder, trust_remote_code=True).eval()
        st_model = SentenceTransformer(st_folder, trust_remote_code=True, device="cpu")
        with torch.no_grad():
            output = model(**batch)
            logits = classifier(**batch).logits
        print(json.dumps({{
            "model_class": type(model).__module__ + "." + type(model).__name__,
            "pooled": output.pooler_output.tolist(), "hidden": output.last_hidden_state.tolist(),
            "logits": logits.tolist(), "st": st_model.encode(texts).tolist(),
        }}))
        """,
        cwd=str(tmp_path),
    )
    assert result["model_class"].startswith("transformers_modules.")
    for key in ("pooled", "hidden", "logits"):
        assert torch.equal(torch.tensor(result[key]), torch.tensor(expected[key])), key
    assert (torch.tensor(result["st"]) - torch.tensor(expected["pooled"])).abs().max() <= 1e-6
    assert AutoTokenizer.from_pretrained(tmp_path / "st")(texts)["input_ids"] == tokenizer(texts)["input_ids"]
    assert os.path.isdir(tmp_path / "st" / "2_Normalize")
