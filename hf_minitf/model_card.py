"""Model cards: one markdown template per family in `model_cards/`, filled from a config and a few texts."""

from __future__ import annotations

from importlib import resources
from string import Template

from transformers import PreTrainedConfig

FAMILIES = ("gpt", "encoder", "seq2seq")


def card_template(family: str) -> Template:
    """The card template of a family (`gpt`, `encoder` or `seq2seq`)."""
    if family not in FAMILIES:
        raise ValueError(f"Unknown model family {family!r}; choose one of {FAMILIES}.")
    text = resources.files("hf_minitf.model_cards").joinpath(f"{family}.md").read_text(encoding="utf-8")
    return Template(text)


def render_model_card(family: str, config: PreTrainedConfig, *, title: str, summary: str, origin: str,
                      num_parameters: int, repo_id: str = "path/to/this/folder", prompt: str = "Hello",
                      notes: str = "") -> str:
    """Fill the family's card with the model's sizes (from `config`) and the given texts."""
    if config.model_type == "minitf_seq2seq":
        vocab = f"source {config.src_vocab_size}, target {config.tgt_vocab_size}"
    else:
        vocab = str(config.vocab_size)
    positions = getattr(config, "position_embedding_type", "sinusoidal")
    if positions == "rope":
        layout = "interleaved pairs" if getattr(config, "rope_interleaved", True) else "rotate-half"
        positions = f"rotary (RoPE, {layout}, base {config.rope_theta:g})"
    elif positions == "learned":
        positions = f"learned, {config.max_position_embeddings} positions"
    values = dict(
        title=title, summary=summary, origin=origin, notes=notes, repo_id=repo_id, prompt=prompt,
        num_hidden_layers=config.num_hidden_layers, hidden_size=config.hidden_size,
        num_attention_heads=config.num_attention_heads, vocab_size=vocab, positions=positions,
        num_parameters=f"{num_parameters:,}",
    )
    return card_template(family).substitute(values).rstrip() + "\n"


__all__ = ["card_template", "render_model_card"]
