"""The loss-curve benchmark: its "converted start" is the original's own function (checked on the fixtures made by
running the originals, whose state_dicts stand in for a freshly built original), and its runs end to end in a tiny
configuration with stand-ins for the originals' model files (which are not in this repository)."""

import json

import pytest
import torch
from factories import miniembed_fixture_vocabulary
from helpers import load_benchmark
from safetensors.torch import load_file
from test_training_speed import STAND_INS

from hf_minitf.modeling.tokenization_minitf_seq2seq import MiniTFSeq2SeqTokenizer

TOLERANCE = 1e-5


class Original:
    """What the benchmark reads of an original model to convert it: its state_dict (here a fixture's)."""

    def __init__(self, path) -> None:
        self.state = torch.load(path, map_location="cpu", weights_only=True)

    def state_dict(self) -> dict:
        return self.state


def relative_difference(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    return ((ours - theirs).abs().max() / theirs.abs().max()).item()


@pytest.fixture(scope="module")
def training_speed():
    return load_benchmark("training_speed")


def test_the_converted_start_of_the_char_gpt_gives_its_loss(training_speed, data_dir):
    original = json.loads((data_dir / "char_gpt/config.json").read_text())
    io = load_file(data_dir / "char_gpt/io.safetensors")
    fields = dict(
        vocab_size=original["vocab_size"],
        num_attention_heads=original["n_head"],
        hidden_dropout=original["dropout"],
    )
    model = training_speed.converted_gpt(Original(data_dir / "char_gpt/checkpoint.pt"), fields).eval()
    assert model.config.hidden_dropout == original["dropout"] and model.config.hidden_size == original["n_embd"]
    with torch.no_grad():
        loss = training_speed.gpt_loss(model)((io["input_ids"], io["targets"]))  # the targets of every position
    assert relative_difference(loss.reshape(1), io["loss"]) <= TOLERANCE
    # the original's targets: the model's own shift (labels only) would score one position fewer
    with torch.no_grad():
        shifted = model(input_ids=io["input_ids"], labels=io["input_ids"]).loss
    assert relative_difference(shifted.reshape(1), io["loss"]) > 1e-3


def test_the_converted_start_of_miniembed_gives_its_embeddings(training_speed, data_dir):
    original = json.loads((data_dir / "minitf_embedding/config.json").read_text())
    io = load_file(data_dir / "minitf_embedding/io.safetensors")
    vocabulary = miniembed_fixture_vocabulary()["word_to_id"]

    class Tokenizer:  # what the benchmark reads of the pairs' tokenizer
        pad_token_id = original["pad_token_id"]

        def __len__(self) -> int:
            return original["vocab_size"]

        def get_vocab(self) -> dict:
            return vocabulary

    fields = dict(
        num_attention_heads=original["num_heads"],
        max_position_embeddings=original["max_seq_len"],
        hidden_dropout=original["dropout"],
    )
    model = training_speed.converted_encoder(Original(data_dir / "minitf_embedding/checkpoint.pt"), fields, Tokenizer())
    assert model.training
    with torch.no_grad():
        embeddings = model.eval()(input_ids=io["input_ids"], attention_mask=io["attention_mask"]).pooler_output
    assert relative_difference(embeddings, io["sentence_embedding"]) <= TOLERANCE


@pytest.mark.parametrize("name", ["seq2seq_transformer", "seq2seq_transformer_trained_like"])
def test_the_converted_start_of_hkproj_gives_its_log_probabilities(training_speed, data_dir, tokenizer_files, name):
    original = json.loads((data_dir / name / "config.json").read_text())
    io = load_file(data_dir / name / "io.safetensors")
    tokenizer = MiniTFSeq2SeqTokenizer(
        source_tokenizer_file=str(tokenizer_files / "tokenizer_en.json"),
        target_tokenizer_file=str(tokenizer_files / "tokenizer_it.json"),
    )
    fields = dict(
        num_attention_heads=original["h"],
        max_position_embeddings=original["src_seq_len"],
        hidden_dropout=original["dropout"],
        label_smoothing=0.1,
    )
    checkpoint = Original(data_dir / name / "checkpoint.pt")
    model = training_speed.converted_translator(checkpoint, fields, tokenizer, training_speed.EARLY_NORM).eval()
    assert model.config.label_smoothing == 0.1 and model.config.norm_type == training_speed.EARLY_NORM
    with torch.no_grad():
        logits = model(
            input_ids=io["src"],
            attention_mask=io["src_mask"][:, 0, 0],
            decoder_input_ids=io["tgt"],
            decoder_attention_mask=(io["tgt"] != tokenizer.pad_token_id).long(),
        ).logits
    assert relative_difference(logits, io["log_probs"]) <= TOLERANCE


def test_hkproj_fixed_norm_divides_by_std_plus_eps(training_speed, tmp_path):
    (tmp_path / "model.py").write_text(
        "import torch\nfrom torch import nn\n\n\nclass LayerNormalization(nn.Module):\n"
        "    def __init__(self, eps=1e-6):\n        super().__init__()\n        self.eps = eps\n"
        "        self.alpha, self.bias = nn.Parameter(torch.ones(1)), nn.Parameter(torch.zeros(1))\n\n"
        "    def forward(self, x):\n"
        "        return self.alpha * (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) * self.eps) + self.bias\n"
    )
    x = torch.randn(3, 8)
    centered, std = x - x.mean(-1, keepdim=True), x.std(-1, keepdim=True)
    early = dict(source=str(tmp_path / "model.py"))
    assert torch.allclose(training_speed.hkproj_module(early).LayerNormalization()(x), centered / (std * 1e-6))
    fixed = training_speed.hkproj_module(dict(early, hkproj_norm=training_speed.FIXED_NORM))
    assert torch.allclose(fixed.LayerNormalization()(x), centered / (std + 1e-6))


def test_smoke_gives_a_curve_per_seed(tmp_path):
    option, code = STAND_INS["gpt"]
    source = tmp_path / "model.py"
    source.write_text("import torch\nimport torch.nn.functional as F\nfrom torch import nn\n" + code)
    output = tmp_path / "training-loss.json"
    arguments = ["--family", "gpt", "--smoke", option, str(source), "--seeds", "2", "--json", str(output)]
    result = load_benchmark("training_loss").main([*arguments, "--cases", "original"])
    assert json.loads(output.read_text()) == json.loads(json.dumps(result))
    seeds = result["curves"]["original"]
    assert list(result["curves"]) == ["original"] and len(seeds) == 2
    assert all(len(losses) == 3 and all(0 < loss < 100 for loss in losses) for losses in seeds)
    assert seeds[0] != seeds[1], "the seeds start the model differently"


def test_the_largest_relative_difference_is_of_the_same_seed_and_step():
    largest = load_benchmark("training_loss").largest_relative_difference
    original, converted = [[2.0, 1.0], [4.0, 3.0]], [[2.0, 1.1], [3.0, 4.0]]
    assert largest(original, converted) == (pytest.approx(1 / 3), 2)  # seed 1, step 2: |3 - 4| / 3


def test_the_original_cases_need_the_original_model_file(capsys):
    with pytest.raises(SystemExit):
        load_benchmark("training_loss").main(["--family", "gpt", "--smoke", "--cases", "original"])
    assert "--char-gpt-source" in capsys.readouterr().err
