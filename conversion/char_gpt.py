"""Convert a nanoGPT-style character-level GPT to `MiniTFGPTForCausalLM` + a character tokenizer.

Its help (`hf_minitf.catalog.converters`) says what it reads, what it infers from the weights and what must be given, and how the converted
model continues past its context like the original (`minitf convert char-gpt --help` shows it).

Run: `minitf convert char-gpt CHECKPOINT --vocab vocab.json --num-heads 4 --out DIR`, or `convert_char_gpt`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import GenerationConfig

from hf_minitf.cards import render_model_card
from hf_minitf.conversion.base import (
    ConvertedModel,
    check_given,
    convert_checkpoint,
    count_layers,
    num_parameters,
    plan_weights,
    read_json,
    read_json_file,
    record_original,
    require_architecture,
    require_heads,
    shape_of,
)
from hf_minitf.conversion.checkpoint import Checkpoint, ConversionError
from hf_minitf.conversion.gpt_common import gpt_rules, head_is_tied
from hf_minitf.modeling.configuration_minitf_gpt import MiniTFGPTConfig
from hf_minitf.modeling.modeling_minitf_gpt import MiniTFGPTForCausalLM
from hf_minitf.safety.output_folders import OutputFolder, existing_paths, output_folder
from hf_minitf.tokenization.gpt import char_tokenizer

RULES = gpt_rules("wte", "wpe", qkv="attn.qkv", out="attn.proj", fc1="mlp.net.0", fc2="mlp.net.2")
BUFFERS = [r"blocks\.\d+\.attn\.causal"]


def load_chars(vocab: str | Path | Sequence[str] | None = None, training_text: str | Path | None = None) -> list[str]:
    """The characters in id order: a JSON list (or {char: id} map) file or a list, or the sorted distinct
    characters of the training text (how the original builds its vocabulary)."""
    if (vocab is None) == (training_text is None):
        raise ConversionError(
            "Give the character vocabulary: either --vocab (JSON list of characters in id order) "
            "or --training-text (the text the model was trained on)."
        )
    if training_text is not None:
        try:
            return sorted(set(Path(training_text).read_text(encoding="utf-8")))
        except OSError as error:
            raise ConversionError(f"Cannot read training text {training_text}: {error}") from error
    assert vocab is not None  # exactly one of vocab and training_text is given (checked above)
    entries: Sequence[str] | dict[str, int]  # the characters in id order, or a {character: id} map
    if isinstance(vocab, (str, Path)):
        advice = "give the characters as a JSON list in id order, or a {character: id} object"
        entries = read_json_file(Path(vocab), "the character vocabulary", advice, object)
    else:
        entries = vocab
    if isinstance(entries, dict):
        ids = sorted(entries.values())
        if ids != list(range(len(ids))):
            raise ConversionError("The {character: id} vocabulary must use the ids 0..n-1 exactly once each.")
        entries = sorted(entries, key=entries.__getitem__)
    chars = list(entries)
    if not chars or any(not isinstance(c, str) or len(c) != 1 for c in chars) or len(set(chars)) != len(chars):
        raise ConversionError("The character vocabulary must be a non-empty list of distinct single characters.")
    return chars


def plan_char_gpt(
    checkpoint: Checkpoint,
    chars: Sequence[str],
    num_heads: int | None = None,
    original_config: dict[str, Any] | None = None,
    dtype: str = "auto",
) -> ConvertedModel:
    """Plan the conversion of an open char-GPT checkpoint (see `minitf convert char-gpt --help`)."""
    require_architecture(checkpoint, "char-gpt", "nanoGPT-style character GPT")
    original_config = dict(original_config or {})
    vocab_size, hidden_size = shape_of(checkpoint, "wte.weight")
    block_size = shape_of(checkpoint, "wpe.weight")[0]
    inferred = dict(
        vocab_size=vocab_size,
        n_embd=hidden_size,
        block_size=block_size,
        n_layer=count_layers(checkpoint, r"blocks\.(\d+)\."),
    )
    check_given(original_config, inferred, "original config")
    heads = require_heads(num_heads, hidden_size, "--num-heads", original_config.get("n_head"))
    if len(chars) != vocab_size:
        raise ConversionError(
            f"The vocabulary has {len(chars)} characters but the model has {vocab_size} "
            "token embeddings; give the character list the model was trained with."
        )
    tied = head_is_tied(checkpoint, "wte.weight", "lm_head.weight")
    dropout = float(original_config.get("dropout", 0.0))
    config = MiniTFGPTConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=inferred["n_layer"],
        num_attention_heads=heads,
        intermediate_size=shape_of(checkpoint, "blocks.0.mlp.net.0.weight")[0],
        max_position_embeddings=block_size,
        position_embedding_type="learned",
        context_overflow="crop",
        hidden_dropout=dropout,
        attention_dropout=dropout,
        tie_word_embeddings=tied,
    )
    ignore = BUFFERS + ([r"lm_head\.weight"] if tied else [])
    plans = plan_weights(checkpoint, MiniTFGPTForCausalLM, config, RULES, ignore, dtype)
    record_original(config, "char-gpt")
    generation_config = GenerationConfig(use_cache=False)
    tokenizer = char_tokenizer(list(chars), special_tokens=None)
    prompt = "The" if set("The") <= set(chars) else next((c for c in chars if c.isalnum()), "")
    card = render_model_card(
        "gpt",
        config,
        title="Character-level GPT (converted)",
        prompt=prompt,
        summary="A character-level GPT: one token per character, "
        f"{vocab_size} characters, a {block_size}-character context window.",
        origin=f"Converted with `minitf convert char-gpt` from `{checkpoint.path.name}`, a checkpoint of the "
        "nanoGPT-style character GPT (token + learned position embeddings, pre-LN blocks with fused qkv, "
        "GELU MLP, tied LM head). The converted model gives the original's logits to float32 rounding.",
        notes="## Context window\n\nLike the original's `generate`, the model continues past its context by "
        f'cropping the input to the last {block_size} characters (`context_overflow="crop"`). That '
        "recomputes the window at each step, so the saved generation config has `use_cache=False`. For "
        "faster cached generation within the window, pass `use_cache=True` to `generate` and keep prompt "
        'plus new tokens within it (or load with `context_overflow="error"`).',
        num_parameters=num_parameters(plans),
        original_project="nanoGPT",
        converter="char-gpt",
        source_checkpoint=checkpoint.path,
    )
    inferred.update(n_head=heads, tied_lm_head=tied)
    return ConvertedModel(MiniTFGPTForCausalLM, config, plans, tokenizer, generation_config, card, inferred)


def convert_char_gpt(
    checkpoint: str | Path,
    out: str | Path | OutputFolder,
    *,
    vocab: str | Path | Sequence[str] | None = None,
    training_text: str | Path | None = None,
    num_heads: int | None = None,
    original_config: str | Path | dict[str, Any] | None = None,
    dtype: str = "auto",
    overwrite: bool = False,
    license: str | None = None,
) -> ConvertedModel:
    """Convert a char-GPT checkpoint into the Hugging Face folder `out`; returns what was converted.
    `license` is the card's (default: the one the original project states, else `other`)."""
    target = output_folder(out, overwrite, existing_paths(checkpoint, vocab, training_text, original_config))
    original_fields = read_json(original_config, "original config")
    chars = load_chars(vocab, training_text)
    return convert_checkpoint(
        checkpoint, target, lambda source: plan_char_gpt(source, chars, num_heads, original_fields, dtype), license
    )
