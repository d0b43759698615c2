"""Greedy generation speed of MiniTF GPT beside transformers' own GPT-2 of the same size, as ratios.

    python benchmarks/generation_speed.py [--hidden 256 --layers 4 --heads 8 --new-tokens 128 --batch 1 8]

Prints tokens per second for each model and setting, and each one's ratio to GPT-2 with its cache.
"""

from __future__ import annotations

import argparse
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from hf_minitf import MiniTFGPTConfig, MiniTFGPTForCausalLM


def tokens_per_second(model, batch: int, prompt: int, new_tokens: int, use_cache: bool, repeats: int) -> float:
    ids = torch.randint(0, model.config.vocab_size, (batch, prompt), generator=torch.Generator().manual_seed(0))
    kwargs = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, use_cache=use_cache,
                  pad_token_id=0, attention_mask=torch.ones_like(ids))
    model.generate(ids, **{**kwargs, "max_new_tokens": 4, "min_new_tokens": 4})
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        model.generate(ids, **kwargs)
        best = min(best, time.perf_counter() - started)
    return batch * new_tokens / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--positions", type=int, default=512)
    parser.add_argument("--prompt", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    dims = dict(vocab_size=args.vocab, n_embd=args.hidden, n_layer=args.layers, n_head=args.heads,
                n_positions=args.positions, bos_token_id=0, eos_token_id=0)
    models = {
        "gpt2 (transformers)": GPT2LMHeadModel(GPT2Config(**dims, attn_implementation="sdpa")).eval(),
        "minitf learned": MiniTFGPTForCausalLM(MiniTFGPTConfig(**dims, attn_implementation="sdpa")).eval(),
        "minitf rope": MiniTFGPTForCausalLM(
            MiniTFGPTConfig(**dims, position_embedding_type="rope", attn_implementation="sdpa")).eval(),
    }
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; {args.hidden} dim, {args.layers} layers, "
          f"prompt {args.prompt}, {args.new_tokens} new tokens")
    for batch in args.batch:
        with torch.inference_mode():
            reference = tokens_per_second(models["gpt2 (transformers)"], batch, args.prompt, args.new_tokens, True,
                                          args.repeats)
            for name, model in models.items():
                for use_cache in (True, False):
                    speed = tokens_per_second(model, batch, args.prompt, args.new_tokens, use_cache, args.repeats)
                    print(f"batch {batch:2d}  {name:20s} cache={use_cache!s:5s} {speed:9.1f} tok/s  "
                          f"x{speed / reference:5.2f} of gpt2 with cache")


if __name__ == "__main__":
    main()
