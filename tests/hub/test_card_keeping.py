"""Model cards that cannot be read are kept as they are."""

from bad_inputs import (
    BAD_YAML_CARD,
    saved_gpt,
    write,
)
from transformers import AutoModelForCausalLM


def test_save_pretrained_keeps_an_unreadable_card_and_saves_the_rest(tmp_path, caplog):
    """A card whose YAML does not parse neither stops save_pretrained half-way (the tokenizer saved after it) nor
    is rewritten: the one in the target folder is kept as it was, the source folder's is not carried over."""
    model = AutoModelForCausalLM.from_pretrained(
        saved_gpt(tmp_path, lambda folder: write(folder / "README.md", BAD_YAML_CARD))
    )
    kept = write(tmp_path / "kept/README.md", BAD_YAML_CARD).parent
    with caplog.at_level("WARNING", logger="hf_minitf.cards.update"):
        model.save_pretrained(kept)
        model.save_pretrained(tmp_path / "fresh")
    assert (kept / "README.md").read_text() == BAD_YAML_CARD and (kept / "model.safetensors").is_file()
    fresh_card = (tmp_path / "fresh/README.md").read_text()
    assert "tags: x" not in fresh_card and "- minitf" in fresh_card
    assert "the card was left as it was" in caplog.text and "not carried over" in caplog.text
