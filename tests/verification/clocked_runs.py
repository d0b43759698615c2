"""Runs for `hf_minitf.verification.worker` on a clock of their own (tests/verification/test_speed.py): loading a
file takes 100 s of it, each generated token or each text 0.5 s. Each load and call is logged (a JSON line in
info["log"]) with the CPU cores and torch threads the process had, so the test sees what the worker timed."""

import json
import os
import time

import numpy as np
import torch

from hf_minitf.verification.runs import EmbedderRun, GeneratorRun, TranslatorRun

CLOCK = [0.0]
time.perf_counter = lambda: CLOCK[0]  # the worker imported `time`: its clock is this one from now on
LOAD_SECONDS, SECONDS_EACH = 100.0, 0.5


def log(info: dict, **entry) -> None:
    with open(info["log"], "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


def loaded(info: dict, kind: str) -> None:
    CLOCK[0] += LOAD_SECONDS
    log(info, call="load", kind=kind, cores=len(os.sched_getaffinity(0)), torch_threads=torch.get_num_threads())


def generator(folder: str, file: str, info: dict) -> GeneratorRun:
    loaded(info, "generator")

    def generate(prompts: list[list[int]], new_tokens: int) -> list[list[int]]:
        log(info, call="generate", prompts=prompts, new_tokens=new_tokens, at=CLOCK[0])
        CLOCK[0] += SECONDS_EACH * new_tokens * len(prompts)
        return [[1] * new_tokens for _ in prompts]

    return GeneratorRun(generate, lambda sequence: np.zeros((len(sequence), 4), np.float32))


def embedder(folder: str, file: str, info: dict) -> EmbedderRun:
    loaded(info, "embedder")

    def encode(texts: list[str]) -> np.ndarray:
        log(info, call="encode", texts=texts, at=CLOCK[0])
        CLOCK[0] += SECONDS_EACH * len(texts)
        return np.ones((len(texts), 4), np.float32)

    return EmbedderRun(encode)


def translator(folder: str, file: str, info: dict) -> TranslatorRun:
    loaded(info, "translator")

    def translate(texts: list[str]) -> list[str]:
        log(info, call="translate", texts=texts, at=CLOCK[0])
        CLOCK[0] += SECONDS_EACH * len(texts)
        return texts

    return TranslatorRun(translate)
