"""`minitf translate DIR TEXT...`: translate texts with a seq2seq folder (pipeline('minitf-translation'), or the engine
of a CTranslate2 or ONNX export of one)."""

from __future__ import annotations

import argparse

from hf_minitf.commands.common import (
    add_engine,
    add_model_folder,
    beam_width,
    folder_engine,
    model_folder,
    new_tokens,
    quiet_transformers,
    reports_errors,
)
from hf_minitf.safety.model_inputs import check_model_inputs

HELP = "translate texts with a seq2seq folder"
DESCRIPTION = "Translate each text with pipeline('minitf-translation', model=DIR)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_folder(parser, "a seq2seq model folder")
    parser.add_argument("texts", nargs="+", metavar="TEXT", help="text(s) to translate")
    parser.add_argument("--num-beams", type=beam_width, default=1, help="beam search width (default: 1, greedy)")
    parser.add_argument(
        "--max-new-tokens",
        type=new_tokens,
        default=None,
        help="longest translation in tokens (default: up to the model's positions)",
    )
    add_engine(parser)


@reports_errors("translate")
def run(args: argparse.Namespace) -> int:
    quiet_transformers()
    folder = model_folder(args.model, "translate")
    engine = folder_engine(
        folder, "translator", args.engine, "translate"
    )  # a CTranslate2 or ONNX export (minitf export) runs in its engine
    if engine is not None:
        for text in engine.translate(list(args.texts), num_beams=args.num_beams, max_new_tokens=args.max_new_tokens):
            print(text)
        return 0
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, pipeline

    from hf_minitf.modeling.pipeline_minitf_translation import TASK

    # The model loaded first, so that its checks speak (a pipeline would only say it found no class that loads it).
    model = AutoModelForSeq2SeqLM.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    check_model_inputs(model, tokenizer(list(args.texts))["input_ids"])  # before the forward pass, which reads no id
    translate = pipeline(TASK, model=model, tokenizer=tokenizer)  # type: ignore[call-overload]  # the overloads list only built-in tasks
    options = {"num_beams": args.num_beams}
    if args.max_new_tokens is not None:
        options["max_new_tokens"] = args.max_new_tokens
    for output in translate(list(args.texts), **options):
        print(output["translation_text"])
    return 0
