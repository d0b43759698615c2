"""Conversion of original checkpoints: every fixture, from checkpoint.pt and from original.safetensors, through
the folder the converter writes and `from_pretrained`, reproduces the original's outputs; round trips, remote
code, the SentenceTransformer folder and the command line."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from factories import convert_miniembed_fixture, make_seq2seq_source
from isolation import REPO_ROOT, run_without_hf_minitf
from safetensors.torch import load_file, save_file
from sentence_transformers import SentenceTransformer
from tokenizers import Tokenizer
from transformers import AutoTokenizer, pipeline

from hf_minitf import (
    MiniTFEncoderConfig,
    MiniTFEncoderModel,
    MiniTFGPTConfig,
    MiniTFGPTForCausalLM,
    MiniTFSeq2SeqForConditionalGeneration,
)
from hf_minitf.cli import main as minitf_main
from hf_minitf.conversion.char_gpt import convert_char_gpt, load_chars
from hf_minitf.conversion.frawdllm import convert_frawdllm, convert_frawdllm_embeddings
from hf_minitf.conversion.hkproj import convert_hkproj
from hf_minitf.conversion.miniembed import convert_miniembed, convert_transformer_embedding

DATA = Path(__file__).parents[1] / "data"
SOURCES = ["checkpoint.pt", "original.safetensors"]
TOLERANCE = 1e-5


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.float() - b.float()).abs().max().item()


def relative_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return max_diff(a, b) / b.abs().max().item()


def scaled_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest difference relative to the expected values' magnitude (at least 1), so that TOLERANCE holds for
    logits in the tens on any x86-64 CPU (float32 rounding grows with the values)."""
    return max_diff(a, b) / max(1.0, b.float().abs().max().item())


def fixture_config(folder) -> dict:
    return json.loads((folder / "config.json").read_text())


# ----------------------------------------------------------------------------------------------- char GPT
@pytest.mark.parametrize("source", SOURCES)
def test_char_gpt_reproduces_the_original(data_dir, tmp_path, source):
    fixture = data_dir / "char_gpt"
    io = load_file(fixture / "io.safetensors")
    converted = convert_char_gpt(
        fixture / source, tmp_path / "out", vocab=fixture / "vocab.json", num_heads=fixture_config(fixture)["n_head"]
    )
    assert converted.inferred["block_size"] == fixture_config(fixture)["block_size"]
    model, info = MiniTFGPTForCausalLM.from_pretrained(tmp_path / "out", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    model.eval()
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    with torch.no_grad():
        logits = model(io["input_ids"]).logits
    assert scaled_diff(logits, io["logits"]) <= TOLERANCE
    loss = F.cross_entropy(logits.flatten(0, 1), io["targets"].flatten())
    assert scaled_diff(loss.reshape(1), io["loss"]) <= TOLERANCE

    # greedy_from_4 runs twice past block_size: the saved generation config (use_cache=False, crop) slides the window.
    greedy = io["greedy_from_4"]
    assert greedy.shape[1] > 2 * model.config.max_position_embeddings
    assert torch.equal(model.generate(greedy[:, :4], max_new_tokens=greedy.shape[1] - 4, do_sample=False), greedy)
    with pytest.raises(ValueError, match="use_cache=False"):
        model.generate(greedy[:, :4], max_new_tokens=greedy.shape[1] - 4, do_sample=False, use_cache=True)

    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "out")
    chars = json.loads((fixture / "vocab.json").read_text())
    (tmp_path / "train.txt").write_text("".join(reversed(chars)) * 3)
    assert load_chars(training_text=tmp_path / "train.txt") == chars  # the original's sorted(set(text))
    text = "First Citizen:\nBefore we proceed, hear me speak."
    assert tokenizer(text).input_ids == [chars.index(c) for c in text]
    assert tokenizer.decode(tokenizer(text).input_ids) == text


# ----------------------------------------------------------------------------------------------- FrawdLLM
FRAWDLLM_INPUTS = [("checkpoint.pt", "nothing"), ("original.safetensors", "config"), ("original.safetensors", "heads")]


@pytest.mark.parametrize("name", ["frawdllm_learned", "frawdllm_rope"])
@pytest.mark.parametrize("source,given", FRAWDLLM_INPUTS)
def test_frawdllm_reproduces_the_original(data_dir, tmp_path, tokenizer_files, name, source, given):
    fixture = data_dir / name
    io = load_file(fixture / "io.safetensors")
    original = fixture_config(fixture)
    options = {
        "nothing": {},
        "config": {"config": fixture / "config.json"},
        "heads": {"num_heads": original["n_head"]},
    }[given]
    converted = convert_frawdllm(
        fixture / source, tmp_path / "out", tokenizer=tokenizer_files / "frawdllm_tokenizer.json", **options
    )
    for key in ("vocab_size", "n_embd", "n_layer", "n_head", "context_length", "use_rope"):
        assert converted.inferred[key] == original[key], key
    model = MiniTFGPTForCausalLM.from_pretrained(tmp_path / "out").eval()
    assert model.config.position_embedding_type == ("rope" if original["use_rope"] else "learned")
    with torch.no_grad():
        logits = model(io["input_ids"]).logits
        long_logits = model(io["long_input_ids"]).logits
    assert max_diff(logits, io["logits"]) <= TOLERANCE
    assert max_diff(long_logits, io["long_logits"]) <= TOLERANCE
    # FrawdLLM's loss: targets already aligned with the inputs, pad id 0 ignored.
    loss = F.cross_entropy(logits.flatten(0, 1), io["targets"].flatten(), ignore_index=original["pad_token_id"])
    assert max_diff(loss.reshape(1), io["loss"]) <= TOLERANCE
    greedy = io["greedy_from_4"]
    assert torch.equal(model.generate(greedy[:, :4], max_new_tokens=greedy.shape[1] - 4, do_sample=False), greedy)

    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "out")
    original_tokenizer = Tokenizer.from_file(str(tokenizer_files / "frawdllm_tokenizer.json"))
    assert tokenizer("hello world").input_ids == original_tokenizer.encode("hello world").ids
    assert (tokenizer.pad_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id) == (0, 2, 3)
    assert (model.generation_config.pad_token_id, model.generation_config.eos_token_id) == (0, 3)


# ----------------------------------------------------------------------------------------------- MiniEmbed
@pytest.mark.parametrize("source", SOURCES)
def test_miniembed_reproduces_forward_and_encode(data_dir, tmp_path, miniembed_tokenizer_file, source):
    fixture = data_dir / "minitf_embedding"
    io = load_file(fixture / "io.safetensors")
    convert_miniembed(
        fixture / source, tmp_path / "out", tokenizer=miniembed_tokenizer_file, config=fixture / "config.json"
    )
    model = MiniTFEncoderModel.from_pretrained(tmp_path / "out").eval()
    with torch.no_grad():
        masked = model(io["input_ids"], attention_mask=io["attention_mask"])
        unmasked = model(io["input_ids"])
    assert max_diff(masked.last_hidden_state, io["last_hidden_state"]) <= TOLERANCE
    assert max_diff(masked.pooler_output, io["sentence_embedding"]) <= TOLERANCE
    assert max_diff(unmasked.pooler_output, io["sentence_embedding_no_mask"]) <= TOLERANCE

    # The same folder is a SentenceTransformer whose embedding is the original's `encode`.
    sentence_model = SentenceTransformer(str(tmp_path / "out"), device="cpu")
    with torch.no_grad():
        features = sentence_model({"input_ids": io["input_ids"], "attention_mask": io["attention_mask"]})
    assert max_diff(features["sentence_embedding"], io["sentence_embedding"]) <= TOLERANCE
    texts = ["How to train an embedding model?", "The cat is on the table.", "what is it"]
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "out")
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = model(**batch).pooler_output
    assert max_diff(torch.as_tensor(sentence_model.encode(texts)), expected) <= TOLERANCE
    words = json.loads(miniembed_tokenizer_file.read_text())["word_to_id"]
    assert batch.input_ids[0, :3].tolist() == [words["[CLS]"], words["how"], words["to"]]


# ----------------------------------------------------------------------------------------------- hkproj
@pytest.mark.parametrize("name", ["seq2seq_transformer", "seq2seq_transformer_trained_like"])
@pytest.mark.parametrize("source", SOURCES)
def test_hkproj_reproduces_the_original(data_dir, tmp_path, tokenizer_files, name, source):
    fixture = data_dir / name
    io = load_file(fixture / "io.safetensors")
    # An untrained early-hkproj model has gains of 1, which both norm formulas admit: the user says which.
    options = {"norm_type": "scalar_std_times_eps"} if name == "seq2seq_transformer" else {}
    converted = convert_hkproj(
        fixture / source,
        tmp_path / "out",
        source_tokenizer=tokenizer_files / "tokenizer_en.json",
        target_tokenizer=tokenizer_files / "tokenizer_it.json",
        num_heads=fixture_config(fixture)["h"],
        **options,
    )
    assert converted.inferred["norm_type"] == "scalar_std_times_eps"
    model = MiniTFSeq2SeqForConditionalGeneration.from_pretrained(tmp_path / "out").eval()
    # Gains of 1 with the early hkproj norm make its -1e9 masking leak, so only prefix recomputation reproduces it.
    assert model.generation_config.use_cache is (name == "seq2seq_transformer_trained_like")
    pad = 1
    with torch.no_grad():
        outputs = model(
            input_ids=io["src"],
            attention_mask=io["src_mask"][:, 0, 0],
            decoder_input_ids=io["tgt"],
            decoder_attention_mask=(io["tgt"] != pad).long(),
            output_hidden_states=True,
        )
    # The untrained model's activations are ~1e6 (the early hkproj norm divides by std * eps): compare relative to
    # the scale.
    assert relative_diff(outputs.encoder_last_hidden_state, io["encoder_output"]) <= TOLERANCE
    assert relative_diff(outputs.decoder_hidden_states[-1], io["decoder_output"]) <= TOLERANCE
    assert relative_diff(outputs.logits, io["log_probs"]) <= TOLERANCE

    greedy = io["greedy_src0"]
    generated = model.generate(io["src"][:1], attention_mask=io["src_mask"][:1, 0, 0], max_length=8, do_sample=False)
    assert torch.equal(generated, greedy)

    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "out")
    source_tokenizer = Tokenizer.from_file(str(tokenizer_files / "tokenizer_en.json"))
    assert tokenizer("s5 s7 s9").input_ids == [2, *source_tokenizer.encode("s5 s7 s9").ids, 3]
    # hkproj's files hold [UNK] [PAD] [SOS] [EOS] as plain vocabulary entries: decoding must still drop them.
    target_tokenizer = Tokenizer.from_file(str(tokenizer_files / "tokenizer_it.json"))

    def words(ids):
        return " ".join(word for word in map(target_tokenizer.id_to_token, ids) if not word.startswith("["))

    assert tokenizer.decode(greedy[0], skip_special_tokens=True) == words(greedy[0].tolist())
    assert tokenizer.decode([2, 5, 6, 3, 1, 1], skip_special_tokens=True) == "t5 t6"
    assert tokenizer.decode([2, 5, 3], skip_special_tokens=False) == "[SOS] t5 [EOS]"
    translate = pipeline("minitf-translation", model=str(tmp_path / "out"))
    text = translate("s5 s7 s9", max_length=8, do_sample=False)[0]["translation_text"]
    generated = model.generate(**tokenizer("s5 s7 s9", return_tensors="pt"), max_length=8, do_sample=False)
    assert text == words(generated[0].tolist())


def test_hkproj_last_version_is_recognised(data_dir, tmp_path, tokenizer_files):
    """hkproj's last model.py: per-feature norm gains, no q/k/v/o biases, `projection_layer.proj`, no log_softmax."""
    state = load_file(data_dir / "seq2seq_transformer_trained_like/original.safetensors")
    later = {}
    for key, value in state.items():
        if key.endswith((".w_q.bias", ".w_k.bias", ".w_v.bias", ".w_o.bias")):
            continue
        if key.endswith(("norm.alpha", "norm.bias")):
            value = value.expand(32).clone() + 0.01 * torch.randn(32)
        later[key.replace("projection_layer.project.", "projection_layer.proj.")] = value
    save_file(later, str(tmp_path / "later.safetensors"))
    converted = convert_hkproj(
        tmp_path / "later.safetensors",
        tmp_path / "out",
        num_heads=4,
        source_tokenizer=tokenizer_files / "tokenizer_en.json",
        target_tokenizer=tokenizer_files / "tokenizer_it.json",
    )
    config = MiniTFSeq2SeqForConditionalGeneration.from_pretrained(tmp_path / "out").config
    assert (config.norm_type, config.attention_bias, config.output_log_softmax) == (
        "per_feature_std_plus_eps",
        False,
        False,
    )
    model = MiniTFSeq2SeqForConditionalGeneration.from_pretrained(tmp_path / "out")
    assert torch.equal(model.lm_head.weight, later["projection_layer.proj.weight"])
    assert torch.equal(
        model.model.decoder.layers[1].cross_attn_layer_norm.weight,
        later["decoder.layers.1.residual_connections.1.norm.alpha"],
    )
    assert converted.inferred["generate_use_cache"]


# ----------------------------------------------------------------------------------------------- embedding layers
@pytest.mark.parametrize("source", SOURCES)
def test_transformer_embedding_layer_loads_into_an_encoder(data_dir, source):
    fixture = data_dir / "transformer_embedding"
    io = load_file(fixture / "io.safetensors")
    weights, fields = convert_transformer_embedding(fixture / source)
    config = MiniTFEncoderConfig(
        **fields,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=2 * fields["hidden_size"],
        pad_token_id=fixture_config(fixture)["pad_idx"],
    )
    model = MiniTFEncoderModel(config).eval()
    result = model.load_state_dict(weights, strict=False)
    assert not result.unexpected_keys and "embed_tokens.weight" not in result.missing_keys
    with torch.no_grad():
        embedded = model(io["input_ids"], output_hidden_states=True).hidden_states[0]
    assert scaled_diff(embedded, io["output"]) <= TOLERANCE


@pytest.mark.parametrize("name", ["frawdllm_embeddings_learned", "frawdllm_embeddings_rope"])
@pytest.mark.parametrize("source", SOURCES)
def test_frawdllm_embeddings_layer_loads_into_a_gpt(data_dir, name, source):
    fixture = data_dir / name
    io = load_file(fixture / "io.safetensors")
    weights, fields = convert_frawdllm_embeddings(fixture / source)
    assert fields["position_embedding_type"] == ("rope" if fixture_config(fixture)["use_rope"] else "learned")
    model = MiniTFGPTForCausalLM(MiniTFGPTConfig(**fields, num_hidden_layers=1, num_attention_heads=2)).eval()
    result = model.load_state_dict(weights, strict=False)
    assert not result.unexpected_keys and not set(weights) & set(result.missing_keys)
    with torch.no_grad():
        embedded = model(io["input_ids"], output_hidden_states=True).hidden_states[0]
    assert scaled_diff(embedded, io["output"]) <= TOLERANCE


# ----------------------------------------------------------------------------------------------- round trip
@pytest.fixture(scope="module")
def converted_folders(tmp_path_factory, data_dir_module):
    """One converted folder per family (from the checkpoint.pt files)."""
    root, data = tmp_path_factory.mktemp("converted"), data_dir_module
    convert_char_gpt(data / "char_gpt/checkpoint.pt", root / "gpt", vocab=data / "char_gpt/vocab.json", num_heads=4)
    convert_miniembed_fixture(root / "encoder")
    make_seq2seq_source(root)  # root / "seq2seq"
    return root


@pytest.mark.parametrize("family", ["gpt", "seq2seq"])
def test_converted_configs_keep_the_cache(converted_folders, family):
    """config.json says what the architecture supports (a char GPT's generation config turns the cache off for
    `generate`, its model config does not)."""
    assert json.loads((converted_folders / family / "config.json").read_text())["use_cache"] is True


def _outputs(model, family, data):
    with torch.no_grad():
        if family == "gpt":
            return model(load_file(data / "char_gpt/io.safetensors")["input_ids"]).logits
        if family == "encoder":
            io = load_file(data / "minitf_embedding/io.safetensors")
            return model(io["input_ids"], attention_mask=io["attention_mask"]).last_hidden_state
        io = load_file(data / "seq2seq_transformer_trained_like/io.safetensors")
        return model(input_ids=io["src"], decoder_input_ids=io["tgt"]).logits


@pytest.mark.parametrize(
    "family,model_class",
    [
        ("gpt", MiniTFGPTForCausalLM),
        ("encoder", MiniTFEncoderModel),
        ("seq2seq", MiniTFSeq2SeqForConditionalGeneration),
    ],
)
def test_converted_saved_loaded_gives_identical_outputs(converted_folders, data_dir, tmp_path, family, model_class):
    first = model_class.from_pretrained(converted_folders / family).eval()
    first.save_pretrained(tmp_path / "again")
    second = model_class.from_pretrained(tmp_path / "again").eval()
    assert torch.equal(_outputs(first, family, data_dir), _outputs(second, family, data_dir))
    for name, tensor in first.state_dict().items():
        assert torch.equal(tensor, second.state_dict()[name]), name
    files = {path.name for path in (converted_folders / family).iterdir()}
    assert {"model.safetensors", "config.json", "README.md"} <= files
    assert not {name for name in files if name.endswith((".bin", ".pt", ".pth", ".pkl"))}
    config = json.loads((converted_folders / family / "config.json").read_text())
    assert config["architectures"] == [model_class.__name__] and config["auto_map"]


def test_converted_folders_load_without_hf_minitf(converted_folders, data_dir):
    """What a Hub user without this package gets: trust_remote_code loads the copied model and tokenizer code."""
    result = run_without_hf_minitf(
        f"""
        import json, torch
        from safetensors.torch import load_file, save_file
        from sentence_transformers import SentenceTransformer
        from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer
        root, data = {str(converted_folders)!r}, {str(data_dir)!r}
        gpt = AutoModelForCausalLM.from_pretrained(root + "/gpt", trust_remote_code=True).eval()
        io = load_file(data + "/char_gpt/io.safetensors")
        with torch.no_grad():
            gpt_diff = (gpt(io["input_ids"]).logits - io["logits"]).abs().max().item()
        greedy = io["greedy_from_4"]
        generated = gpt.generate(greedy[:, :4], max_new_tokens=greedy.shape[1] - 4, do_sample=False)
        gpt_greedy = torch.equal(generated, greedy)
        st = SentenceTransformer(root + "/encoder", device="cpu", trust_remote_code=True)
        io = load_file(data + "/minitf_embedding/io.safetensors")
        with torch.no_grad():
            pooled = st({{"input_ids": io["input_ids"], "attention_mask": io["attention_mask"]}})["sentence_embedding"]
        st_diff = (pooled - io["sentence_embedding"]).abs().max().item()
        s2s = AutoModelForSeq2SeqLM.from_pretrained(root + "/seq2seq", trust_remote_code=True).eval()
        tok = AutoTokenizer.from_pretrained(root + "/seq2seq", trust_remote_code=True)
        io = load_file(data + "/seq2seq_transformer_trained_like/io.safetensors")
        out = s2s.generate(io["src"][:1], attention_mask=io["src_mask"][:1, 0, 0], max_length=8, do_sample=False)
        print(json.dumps(dict(gpt_diff=gpt_diff, gpt_greedy=gpt_greedy, st_diff=st_diff,
                              s2s_greedy=torch.equal(out, io["greedy_src0"]), s2s_tokenizer=type(tok).__name__,
                              gpt_class=type(gpt).__module__)))
    """,
        cwd=str(converted_folders),
    )
    assert result["gpt_diff"] <= TOLERANCE and result["gpt_greedy"]
    assert result["st_diff"] <= TOLERANCE
    assert result["s2s_greedy"] and result["s2s_tokenizer"] == "MiniTFSeq2SeqTokenizer"
    assert result["gpt_class"].startswith("transformers_modules")


# ----------------------------------------------------------------------------------------------- command line
def test_convert_help_names_every_source_and_what_it_needs(capsys):
    with pytest.raises(SystemExit) as exit_info:
        minitf_main(["convert", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert all(
        source in text
        for source in ("char-gpt", "frawdllm", "miniembed", "hkproj", "transformer-embedding", "frawdllm-embeddings")
    )
    needs = {
        "char-gpt": ["--vocab", "--num-heads", "Inferred"],
        "frawdllm": ["--tokenizer", "--num-heads", "--revision", "repo id", "tiny-llama", "Inferred"],
        "transformer-embedding": ["embedding_config.json", "--prefix"],
        "frawdllm-embeddings": ["embedding_config.json", "--prefix"],
        "miniembed": ["--tokenizer", "--config", "Inferred"],
        "hkproj": ["--source-tokenizer", "--target-tokenizer", "--num-heads", "--norm-type", "Inferred"],
    }
    for source, words in needs.items():
        with pytest.raises(SystemExit):
            minitf_main(["convert", source, "--help"])
        text = capsys.readouterr().out
        assert all(word in text for word in words), (source, text)


def test_cli_converts_and_reports_errors(data_dir, tmp_path, capsys):
    fixture = data_dir / "char_gpt"
    base = [
        "convert",
        "char-gpt",
        str(fixture / "checkpoint.pt"),
        "--vocab",
        str(fixture / "vocab.json"),
        "--out",
        str(tmp_path / "out"),
    ]
    assert minitf_main(base) == 2
    assert "--num-heads" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    assert minitf_main([*base, "--num-heads", "4"]) == 0
    assert MiniTFGPTForCausalLM.from_pretrained(tmp_path / "out").config.num_attention_heads == 4
    assert minitf_main([*base, "--num-heads", "4"]) == 2
    assert "--overwrite" in capsys.readouterr().err


@pytest.mark.parametrize("program", [["hf_minitf", "convert"], ["hf_minitf.conversion"]])
def test_the_convert_command_runs_as_a_module(program, data_dir, tmp_path, tokenizer_files):
    """`python -m hf_minitf convert SOURCE ...` is `minitf convert SOURCE ...`; so is the old spelling `python -m
    hf_minitf.conversion SOURCE ...`, which warns once that it is deprecated, naming the new command."""
    fixture = data_dir / "frawdllm_rope"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            *program,
            "frawdllm",
            str(fixture / "checkpoint.pt"),
            "--tokenizer",
            str(tokenizer_files / "frawdllm_tokenizer.json"),
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    deprecated = program == ["hf_minitf.conversion"]
    assert result.stderr.count("FutureWarning") == deprecated, result.stderr
    assert ("python -m hf_minitf convert" in result.stderr) == deprecated, result.stderr
    assert f"Converted FrawdLLM {fixture / 'checkpoint.pt'} into {tmp_path / 'out'}" in result.stdout
    model_line = "MiniTFGPTForCausalLM (minitf_gpt), 2 layers, hidden size 32, 4 heads, RoPE, 28,544 parameters"
    assert model_line in result.stdout
    assert f'AutoModelForCausalLM.from_pretrained("{tmp_path / "out"}")' in result.stdout
    assert "{'" not in result.stdout, "a raw dict was printed"
    model = MiniTFGPTForCausalLM.from_pretrained(tmp_path / "out")
    assert model.config.position_embedding_type == "rope" and model.config.rope_interleaved
