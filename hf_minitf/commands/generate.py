"""`minitf generate DIR PROMPT...`: continue prompts with a GPT folder, streaming the tokens (or with the engine of a
CTranslate2 export of one)."""

from __future__ import annotations

import argparse

from hf_minitf.catalog.exports import context_limit, positions_of
from hf_minitf.commands.common import (
    CommandError,
    add_engine,
    add_model_folder,
    count,
    folder_engine,
    model_folder,
    new_tokens,
    quiet_transformers,
    random_seed,
    reports_errors,
    say,
    temperature,
)
from hf_minitf.safety.model_inputs import check_token_ids

HELP = "continue prompts with a gpt folder, streaming the tokens"
DESCRIPTION = (
    "Load a GPT folder with AutoModelForCausalLM and continue each prompt, printing tokens as they "
    "are generated (TextStreamer). Greedy unless --sample."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_folder(parser, "a folder written by minitf train/quickstart/convert")
    parser.add_argument("prompts", nargs="+", metavar="PROMPT", help="text(s) to continue")
    parser.add_argument("--max-new-tokens", type=new_tokens, default=64, help="tokens to add (default: 64)")
    parser.add_argument("--sample", action="store_true", help="sample instead of greedy decoding")
    parser.add_argument("--temperature", type=temperature, default=1.0, help="sampling temperature (1.0)")
    parser.add_argument("--top-k", type=count, default=None, help="sample from the k likeliest tokens")
    parser.add_argument("--seed", type=random_seed, default=0, help="random seed for sampling (default: 0)")
    add_engine(parser)


@reports_errors("generate")
def run(args: argparse.Namespace) -> int:
    quiet_transformers()
    folder = model_folder(args.model, "generate")
    # A CTranslate2 or ONNX export runs in its engine, without torch; a MiniTF folder in transformers.
    engine = folder_engine(folder, "generator", args.engine, "generate")
    if engine is None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoModelForCausalLM.from_pretrained(folder).eval()
        tokenizer = AutoTokenizer.from_pretrained(folder)
        config = model.config
        limit = context_limit(config)
        trained = config.max_position_embeddings if positions_of(config) == "rope" else None
    else:
        tokenizer, limit = engine.tokenizer, engine.position_limit
        trained = engine.max_positions if limit is None else None
    requests: list[tuple[list[int], int]] = []  # every prompt is checked before any is continued or noted
    notes: list[str] = []
    for prompt in args.prompts:
        if not prompt:  # as the server's /v1/completions: there is nothing to continue
            raise CommandError(f"prompt [{len(requests)}] is empty; give the text to continue")
        ids = tokenizer(prompt, add_special_tokens=False).input_ids
        if not ids:
            raise CommandError(f"none of the characters of the prompt {prompt!r} are in the model's vocabulary")
        kept = tokenizer.decode(ids, skip_special_tokens=True)
        unknown = sorted({char for char in prompt if char not in kept})
        if unknown:
            notes.append(
                f"{''.join(unknown)!r} not in the model's vocabulary; read as {tokenizer.unk_token or 'nothing'}"
            )
        wanted = args.max_new_tokens
        if limit is not None:
            room = limit - len(ids)
            if room <= 0:
                raise CommandError(f"the prompt is {len(ids)} tokens; this model reads at most {limit}")
            if room < wanted:
                notes.append(f"{wanted} new tokens would pass the model's {limit} positions; generating {room}")
                wanted = room
        if trained is not None and len(ids) + wanted > trained:
            notes.append(
                f"the prompt ({len(ids)} tokens) and {wanted} new tokens pass the {trained} "
                "positions this model was trained on; its rotary positions go on past them, but expect "
                "weaker text there"
            )
        if engine is None:  # before the forward pass, which reads no id (a host sync each step)
            check_token_ids(ids, model.config.vocab_size)
        requests.append((ids, wanted))
    for note in notes:
        say("generate", "note", note)
    if engine is None:
        _generate_in_transformers(model, tokenizer, requests, args)
        return 0
    for ids, added in requests:
        new_ids = engine.generate(
            [ids], added, sample=args.sample, temperature=args.temperature, top_k=args.top_k, seed=args.seed
        )[0]
        print(tokenizer.decode(ids + new_ids, skip_special_tokens=True), flush=True)
    return 0


def _generate_in_transformers(
    model, tokenizer, requests: list[tuple[list[int], int]], args: argparse.Namespace
) -> None:
    """Each prompt continued by `model.generate`, its text streamed as it comes."""
    import torch
    from transformers import TextStreamer

    torch.manual_seed(args.seed)
    options = (
        {"do_sample": True, "temperature": args.temperature, "top_k": args.top_k}
        if args.sample
        else {"do_sample": False}
    )
    for ids, added in requests:
        input_ids = torch.tensor([ids])
        with torch.no_grad():
            model.generate(
                input_ids,
                attention_mask=torch.ones_like(input_ids),
                max_new_tokens=added,
                pad_token_id=tokenizer.pad_token_id,
                streamer=TextStreamer(tokenizer, skip_special_tokens=True),
                **options,
            )
