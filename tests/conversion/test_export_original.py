"""`minitf export original`: the way back. Every fixture of the originals, converted then exported back, gives every
tensor of its checkpoint bit for bit (same keys, in the order the original's state_dict has them, buffers included)
and the same side files; a model trained after conversion, exported back and converted again, gives the same logits;
a folder without the conversion's record is matched by its layout; what an original cannot compute is refused."""

import json
import shutil
from pathlib import Path

import pytest
import torch
from bad_inputs import minitf
from factories import (
    DATA,
    miniembed_fixture_vocabulary,
    write_frawdllm_fixture_tokenizer,
    write_hkproj_tokenizers,
)
from helpers import write_frawdllm_tokenizer
from safetensors.torch import load_file
from transformers import AutoTokenizer

from hf_minitf import MiniTFEncoderModel, MiniTFGPTForCausalLM, MiniTFSeq2SeqForConditionalGeneration
from hf_minitf.catalog.converters import ORIGINAL_FORMAT_FIELD
from hf_minitf.conversion import (
    ConversionError,
    convert_char_gpt,
    convert_frawdllm,
    convert_hkproj,
    convert_miniembed,
    export_original,
)
from hf_minitf.conversion.frawdllm import ModelConfigStandIn
from hf_minitf.sentence_transformers_folder import save_sentence_transformer

HKPROJ_NORMS = {"seq2seq_transformer": "scalar_std_times_eps", "seq2seq_transformer_trained_like": "auto"}


def original_state(name: str) -> dict[str, torch.Tensor]:
    """The state_dict the original code saved in the fixture `name`'s checkpoint.pt."""
    with torch.serialization.safe_globals([ModelConfigStandIn]):
        checkpoint = torch.load(DATA / name / "checkpoint.pt", weights_only=True)
    return checkpoint.get("model_state_dict", checkpoint)


def exported_state(path: Path) -> dict[str, torch.Tensor]:
    """The state_dict in an exported checkpoint, read as the original would (weights only: plain tensors and
    containers)."""
    if path.suffix == ".safetensors":
        return load_file(path)
    checkpoint = torch.load(path, weights_only=True)
    return checkpoint.get("model_state_dict", checkpoint)


def assert_same_tensors(original: dict[str, torch.Tensor], exported: dict[str, torch.Tensor], ordered: bool) -> None:
    assert (list(exported) if ordered else sorted(exported)) == (list(original) if ordered else sorted(original))
    for key, tensor in original.items():
        assert exported[key].dtype == tensor.dtype and torch.equal(exported[key], tensor), key


def convert_fixture(name: str, tmp: Path, chat: bool = False) -> tuple[Path, dict[str, Path]]:
    """The fixture `name` converted into `tmp / "converted"`, and the side files it was converted with."""
    out = tmp / "converted"
    if name == "char_gpt":
        files = {"vocab.json": DATA / name / "vocab.json", "config.json": DATA / name / "config.json"}
        convert_char_gpt(
            DATA / name / "checkpoint.pt", out, vocab=files["vocab.json"], original_config=files["config.json"]
        )
    elif name.startswith("frawdllm"):
        tokenizer = (write_frawdllm_tokenizer if chat else write_frawdllm_fixture_tokenizer)(
            tmp / "tokenizer.json", *([True] if chat else [])
        )
        files = {"tokenizer.json": tokenizer, "config.json": DATA / name / "config.json"}
        convert_frawdllm(DATA / name / "checkpoint.pt", out, tokenizer=tokenizer)
    elif name == "minitf_embedding":
        vocabulary = miniembed_fixture_vocabulary()
        (tmp / "tokenizer.json").write_text(json.dumps(vocabulary, indent=2))
        files = {"tokenizer.json": tmp / "tokenizer.json", "config.json": DATA / name / "config.json"}
        convert_miniembed(DATA / name / "checkpoint.pt", out, tokenizer=vocabulary, config=files["config.json"])
    else:
        write_hkproj_tokenizers(tmp)
        files = {
            "tokenizer_en.json": tmp / "tokenizer_en.json",
            "tokenizer_it.json": tmp / "tokenizer_it.json",
            "config.json": DATA / name / "config.json",
        }
        convert_hkproj(
            DATA / name / "checkpoint.pt",
            out,
            source_tokenizer=files["tokenizer_en.json"],
            target_tokenizer=files["tokenizer_it.json"],
            num_heads=4,
            norm_type=HKPROJ_NORMS[name],
        )
    return out, files


CHECKPOINTS = {
    "char_gpt": "model.pt",
    "frawdllm_learned": "best.pt",
    "frawdllm_rope": "best.pt",
    "minitf_embedding": "model.safetensors",
    "seq2seq_transformer": "tmodel_00.pt",
    "seq2seq_transformer_trained_like": "tmodel_00.pt",
}


@pytest.mark.parametrize(
    "name, chat",
    [(name, False) for name in CHECKPOINTS] + [("frawdllm_rope", True), ("frawdllm_learned", True)],
)
def test_every_fixture_comes_back_bit_for_bit_with_its_side_files(tmp_path, name, chat):
    converted, side_files = convert_fixture(name, tmp_path, chat)
    exported = export_original(converted, tmp_path / "original")
    checkpoint = tmp_path / "original" / CHECKPOINTS[name]
    assert sorted(exported.files) == sorted([CHECKPOINTS[name], *side_files])
    # safetensors stores its keys sorted: the order is the original's in the pickled formats only
    assert_same_tensors(original_state(name), exported_state(checkpoint), ordered=checkpoint.suffix == ".pt")
    for file_name, path in side_files.items():
        assert (tmp_path / "original" / file_name).read_bytes() == path.read_bytes(), file_name


def test_the_frawdllm_checkpoint_is_its_training_layout_with_a_plain_config(tmp_path):
    converted, _ = convert_fixture("frawdllm_rope", tmp_path)
    export_original(converted, tmp_path / "original")
    checkpoint = torch.load(tmp_path / "original" / "best.pt", weights_only=True)
    with torch.serialization.safe_globals([ModelConfigStandIn]):
        original = torch.load(DATA / "frawdllm_rope" / "checkpoint.pt", weights_only=True)
    assert list(checkpoint) == list(original)
    assert checkpoint["config"] == json.loads((DATA / "frawdllm_rope" / "config.json").read_text())
    state = checkpoint["model_state_dict"]  # the tied head is the embedding's own tensor, as FrawdLLM saves it
    assert state["lm_head.weight"].data_ptr() == state["embeddings.token_emb.weight"].data_ptr()


@pytest.mark.parametrize(
    "source, name, checkpoint, files",
    [
        ("transformer-embedding", "transformer_embedding", "embedding.pt", ["config.json"]),
        ("frawdllm-embeddings", "frawdllm_embeddings_learned", "embeddings.pt", ["config.json"]),
        ("frawdllm-embeddings", "frawdllm_embeddings_rope", "embeddings.pt", ["config.json"]),
    ],
)
def test_the_embedding_layers_come_back_bit_for_bit(tmp_path, source, name, checkpoint, files):
    minitf("convert", source, DATA / name / "checkpoint.pt", "--out", tmp_path / "layer")
    minitf("export", "original", tmp_path / "layer", tmp_path / "original")
    assert sorted(path.name for path in (tmp_path / "original").iterdir()) == sorted([checkpoint, *files])
    assert_same_tensors(original_state(name), exported_state(tmp_path / "original" / checkpoint), ordered=True)
    written = json.loads((tmp_path / "original" / "config.json").read_text())
    given = json.loads((DATA / name / "config.json").read_text())
    assert written == ({key: given[key] for key in written} if source == "frawdllm-embeddings" else given)


def relative_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / a.abs().max()).item()


def train_a_little(model: torch.nn.Module, loss_of) -> None:
    """A few AdamW steps on random data: the weights move away from the converted ones."""
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    generator = torch.Generator().manual_seed(0)
    for _ in range(3):
        optimizer.zero_grad()
        loss_of(model, generator).backward()
        optimizer.step()
    model.eval()


def random_ids(generator: torch.Generator, vocab_size: int, length: int = 8) -> torch.Tensor:
    return torch.randint(4, vocab_size, (2, length), generator=generator)


def gpt_loss(model, generator):
    ids = random_ids(generator, model.config.vocab_size)
    return model(input_ids=ids, labels=ids).loss


def test_a_char_gpt_trained_after_conversion_comes_back_with_its_logits(tmp_path):
    converted, _ = convert_fixture("char_gpt", tmp_path)
    model = MiniTFGPTForCausalLM.from_pretrained(converted)
    before = model.model.embed_tokens.weight.detach().clone()
    train_a_little(model, gpt_loss)
    assert not torch.equal(before, model.model.embed_tokens.weight)
    model.save_pretrained(tmp_path / "tuned")
    AutoTokenizer.from_pretrained(converted).save_pretrained(tmp_path / "tuned")
    export_original(tmp_path / "tuned", tmp_path / "original")
    back = tmp_path / "original"
    convert_char_gpt(
        back / "model.pt", tmp_path / "again", vocab=back / "vocab.json", original_config=back / "config.json"
    )
    ids = random_ids(torch.Generator().manual_seed(1), model.config.vocab_size, 12)
    again = MiniTFGPTForCausalLM.from_pretrained(tmp_path / "again").eval()
    with torch.no_grad():
        assert relative_difference(model(ids).logits, again(ids).logits) <= 1e-6


def test_a_frawdllm_chat_model_trained_after_conversion_comes_back_with_its_logits(tmp_path):
    converted, _ = convert_fixture("frawdllm_rope", tmp_path, chat=True)
    model = MiniTFGPTForCausalLM.from_pretrained(converted)
    train_a_little(model, gpt_loss)
    model.save_pretrained(tmp_path / "tuned")
    AutoTokenizer.from_pretrained(converted).save_pretrained(tmp_path / "tuned")
    export_original(tmp_path / "tuned", tmp_path / "original")
    back = tmp_path / "original"
    convert_frawdllm(back / "best.pt", tmp_path / "again", tokenizer=back / "tokenizer.json")
    ids = random_ids(torch.Generator().manual_seed(1), model.config.vocab_size, 40)  # past the 16-token context
    again = MiniTFGPTForCausalLM.from_pretrained(tmp_path / "again").eval()
    with torch.no_grad():
        assert relative_difference(model(ids).logits, again(ids).logits) <= 1e-6
    assert AutoTokenizer.from_pretrained(tmp_path / "again").chat_template is not None  # still FrawdLLM's chat model


def test_a_miniembed_model_trained_after_conversion_comes_back_with_its_states(tmp_path):
    converted, _ = convert_fixture("minitf_embedding", tmp_path)
    model = MiniTFEncoderModel.from_pretrained(converted)

    def loss(model, generator):
        return model(input_ids=random_ids(generator, model.config.vocab_size)).last_hidden_state[:, 0].sum()

    train_a_little(model, loss)
    save_sentence_transformer(model, AutoTokenizer.from_pretrained(converted), tmp_path / "tuned")
    export_original(tmp_path / "tuned", tmp_path / "original")
    back = tmp_path / "original"
    convert_miniembed(
        back / "model.safetensors", tmp_path / "again", tokenizer=back / "tokenizer.json", config=back / "config.json"
    )
    ids = random_ids(torch.Generator().manual_seed(1), model.config.vocab_size, 12)
    again = MiniTFEncoderModel.from_pretrained(tmp_path / "again").eval()
    with torch.no_grad():
        assert relative_difference(model(ids).last_hidden_state, again(ids).last_hidden_state) <= 1e-6


def test_an_hkproj_model_trained_after_conversion_comes_back_with_its_logits(tmp_path):
    converted, _ = convert_fixture("seq2seq_transformer_trained_like", tmp_path)
    model = MiniTFSeq2SeqForConditionalGeneration.from_pretrained(converted)

    def loss(model, generator):
        source = random_ids(generator, model.config.src_vocab_size)
        return model(input_ids=source, labels=random_ids(generator, model.config.vocab_size)).loss

    train_a_little(model, loss)
    model.save_pretrained(tmp_path / "tuned")
    AutoTokenizer.from_pretrained(converted).save_pretrained(tmp_path / "tuned")
    export_original(tmp_path / "tuned", tmp_path / "original")
    back = tmp_path / "original"
    convert_hkproj(
        back / "tmodel_00.pt",
        tmp_path / "again",
        source_tokenizer=back / "tokenizer_en.json",
        target_tokenizer=back / "tokenizer_it.json",
        config=back / "config.json",
        norm_type="scalar_std_times_eps",  # the gains trained away from ~eps no longer tell the formula
    )
    generator = torch.Generator().manual_seed(1)
    source, target = random_ids(generator, model.config.src_vocab_size), random_ids(generator, model.config.vocab_size)
    again = MiniTFSeq2SeqForConditionalGeneration.from_pretrained(tmp_path / "again").eval()
    with torch.no_grad():
        expected = model(input_ids=source, decoder_input_ids=target).logits
        assert relative_difference(expected, again(input_ids=source, decoder_input_ids=target).logits) <= 1e-6


def without_record(folder: Path) -> Path:
    config = json.loads((folder / "config.json").read_text())
    del config[ORIGINAL_FORMAT_FIELD]
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize(
    "name, chat, expected",
    [
        ("char_gpt", False, "char-gpt"),
        ("frawdllm_learned", True, "frawdllm"),
        ("minitf_embedding", False, "miniembed"),
        ("seq2seq_transformer_trained_like", False, "hkproj"),
    ],
)
def test_a_folder_without_the_record_is_matched_by_its_layout(tmp_path, name, chat, expected):
    converted, _ = convert_fixture(name, tmp_path, chat)
    assert json.loads((converted / "config.json").read_text())[ORIGINAL_FORMAT_FIELD]["format"] == expected
    exported = export_original(without_record(converted), tmp_path / "original")
    assert exported.format == expected
    checkpoint = tmp_path / "original" / CHECKPOINTS[name]
    assert_same_tensors(original_state(name), exported_state(checkpoint), ordered=checkpoint.suffix == ".pt")


def test_a_gpt_trained_with_minitf_is_refused_with_the_reason_it_fits_no_original(tmp_path):
    from bad_inputs import char_gpt_folder

    folder = char_gpt_folder(tmp_path)  # a character tokenizer with specials first: not the char GPT's plain list
    with pytest.raises(ConversionError, match=r"FrawdLLM cannot express bos_token_id=None: ModelConfig holds an id"):
        export_original(folder, tmp_path / "original")
    with pytest.raises(ConversionError, match="tokenizer.json is no character list"):
        export_original(folder, tmp_path / "original", format="char-gpt")
    assert not (tmp_path / "original").exists()


def test_the_command_prints_what_it_wrote_and_refuses_a_second_write(tmp_path, capsys):
    converted, _ = convert_fixture("char_gpt", tmp_path)
    minitf("export", "original", converted, tmp_path / "original")
    printed = capsys.readouterr().out
    assert "as nanoGPT-style character GPT (char-gpt)" in printed and "model.pt, vocab.json, config.json" in printed
    shutil.rmtree(converted)
    with pytest.raises(Exception, match="is not a folder"):
        minitf("export", "original", converted, tmp_path / "original2")
