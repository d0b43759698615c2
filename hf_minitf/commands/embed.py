"""`minitf embed DIR TEXT...`: embed texts with an encoder folder (SentenceTransformer, or the engine of a CTranslate2
or ONNX export of one) and print the vectors or their similarity table."""

from __future__ import annotations

import argparse
import json

from hf_minitf.commands.common import (
    CommandError,
    add_engine,
    add_model_folder,
    folder_engine,
    model_folder,
    quiet_transformers,
    reports_errors,
)

HELP = "embed texts with an encoder folder (vectors or a similarity table)"
DESCRIPTION = (
    "Encode texts with SentenceTransformer(DIR), or with its engine when DIR is a CTranslate2 or ONNX export of an "
    "encoder (minitf export). Prints one JSON vector per line, or with --similarity the table of cosine "
    "similarities between the texts."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_folder(parser, "an encoder folder (a SentenceTransformer)")
    parser.add_argument("texts", nargs="+", metavar="TEXT", help="text(s) to embed")
    parser.add_argument("--similarity", action="store_true", help="print the similarity table instead of vectors")
    add_engine(parser)


@reports_errors("embed")
def run(args: argparse.Namespace) -> int:
    quiet_transformers()
    folder = model_folder(args.model, "embed")
    empty = [index for index, text in enumerate(args.texts) if not text]
    if empty:  # as the server's embeddings route: an empty text would embed only the special tokens
        raise CommandError(f"text [{empty[0]}] is empty; every text to embed needs at least one character")
    engine = folder_engine(
        folder, "embedder", args.engine, "embed"
    )  # a CTranslate2 or ONNX export (minitf export) runs in its engine
    vectors: list[list[float]]
    if engine is None:
        from sentence_transformers import SentenceTransformer

        embedder = SentenceTransformer(str(folder))
        embeddings = embedder.encode(args.texts, convert_to_tensor=True)
        vectors, scores = embeddings.tolist(), embedder.similarity(embeddings, embeddings).tolist()
    else:
        normalized = engine.encode(args.texts)  # unit vectors: their dot products are the cosine similarities
        vectors, scores = normalized.tolist(), (normalized @ normalized.T).tolist()
    if not args.similarity:
        for vector in vectors:
            print(json.dumps([round(value, 6) for value in vector]))
        return 0
    width = max(len(f"[{index}]") for index in range(len(args.texts)))
    print(" " * width + "".join(f"{f'[{index}]':>8}" for index in range(len(args.texts))))
    for index, row in enumerate(scores):
        print(f"{f'[{index}]':>{width}}" + "".join(f"{score:8.3f}" for score in row))
    for index, text in enumerate(args.texts):
        print(f"[{index}] {text}")
    return 0
