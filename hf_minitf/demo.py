"""The main job, end to end: build a small GPT, teach it a rhyme, save it, load it back the Hugging Face way."""

from __future__ import annotations

import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline
from transformers.utils import logging as transformers_logging

from .configuration_minitf_gpt import MiniTFGPTConfig
from .modeling_minitf_gpt import MiniTFGPTForCausalLM
from .tokenization_minitf import char_tokenizer

RHYME = (
    "Twinkle, twinkle, little star,\n"
    "How I wonder what you are!\n"
    "Up above the world so high,\n"
    "Like a diamond in the sky.\n"
)


def train_tiny_gpt(text: str, steps: int, seed: int = 0) -> tuple[MiniTFGPTForCausalLM, object]:
    """A character GPT fitted to `text` with a plain AdamW loop (a few seconds on a CPU)."""
    torch.manual_seed(seed)
    tokenizer = char_tokenizer(text, model_max_length=128)
    config = MiniTFGPTConfig(
        vocab_size=len(tokenizer), hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=128, position_embedding_type="rope",
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )
    model = MiniTFGPTForCausalLM(config)
    ids = torch.tensor([tokenizer(text).input_ids + [tokenizer.eos_token_id]])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        loss = model(ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    return model, tokenizer


def run(out: Path, steps: int = 300, prompt: str = "Twinkle") -> str:
    """Train, save to `out`, reload with AutoModelForCausalLM and pipeline, and return the generated text."""
    transformers_logging.disable_progress_bar()
    started = time.perf_counter()
    model, tokenizer = train_tiny_gpt(RHYME, steps)
    print(f"trained a {model.num_parameters():,}-parameter MiniTF GPT for {steps} steps "
          f"in {time.perf_counter() - started:.1f}s")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    print(f"saved to {out}: {', '.join(sorted(p.name for p in out.iterdir()))}")

    reloaded = AutoModelForCausalLM.from_pretrained(out)
    reloaded_tokenizer = AutoTokenizer.from_pretrained(out)
    ids = reloaded_tokenizer(prompt, return_tensors="pt").input_ids
    direct = reloaded_tokenizer.decode(reloaded.generate(ids, max_new_tokens=120, do_sample=False)[0],
                                       skip_special_tokens=True)
    generator = pipeline("text-generation", model=str(out))
    generated = generator(prompt, max_new_tokens=120, do_sample=False)[0]["generated_text"]
    if generated != direct:
        raise RuntimeError(f"pipeline and generate disagree:\n{generated!r}\n{direct!r}")
    print(f"AutoModelForCausalLM + pipeline('text-generation'), greedy from {prompt!r}:\n")
    print(generated)
    return generated
