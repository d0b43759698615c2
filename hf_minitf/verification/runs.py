"""Each runtime as `minitf verify` runs it: a loader `(folder, file, info) -> run`, where a run of a generator gives
greedy new tokens and the logits of a whole sequence, an embedder's gives embeddings, a translator's translations.
The same interface for the MiniTF model in PyTorch (`torch_generator`, ...), so both sides are measured alike.

Light to import: each loader imports its runtime, in the process `hf_minitf.verification.worker` starts for it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np


class GeneratorRun(NamedTuple):
    generate: Callable[[list[list[int]], int], list[list[int]]]
    """Greedy new token ids after each prompt, at most that many, the end token included where one ends them."""
    logits: Callable[[list[int]], np.ndarray]
    """The logits after each position of a sequence, (length, vocabulary), in float32."""


class EmbedderRun(NamedTuple):
    encode: Callable[[list[str]], np.ndarray]
    """The normalized sentence embeddings of texts, (texts, hidden)."""


class TranslatorRun(NamedTuple):
    translate: Callable[[list[str]], list[str]]
    """Greedy translations of texts, with the model's default length."""


Run = GeneratorRun | EmbedderRun | TranslatorRun


# ------------------------------------------------------------------------------------------------- PyTorch models
def torch_generator(model, end_ids: list[int]) -> GeneratorRun:
    """A causal LM of transformers (MiniTF's, or a native export's GPT-2 / GPT-NeoX) decoding greedily with its KV
    cache until `end_ids` or the number of new tokens."""
    import torch
    from transformers import GenerationConfig

    @torch.no_grad()
    def generate(prompts: list[list[int]], new_tokens: int) -> list[list[int]]:
        config = GenerationConfig(
            do_sample=False,
            num_beams=1,
            max_new_tokens=new_tokens,
            eos_token_id=end_ids or None,
            pad_token_id=model.config.pad_token_id or 0,
        )
        results = []
        for prompt in prompts:
            ids = torch.tensor([prompt])
            output = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config)
            results.append(output[0, len(prompt) :].tolist())
        return results

    @torch.no_grad()
    def logits(sequence: list[int]) -> np.ndarray:
        return model(torch.tensor([sequence])).logits[0].float().numpy()

    return GeneratorRun(generate, logits)


def torch_embedder(model, tokenizer, max_length: int) -> EmbedderRun:
    """A MiniTF encoder: its pooled output (masked mean, L2-normalized) of the texts padded together."""
    import torch

    @torch.no_grad()
    def encode(texts: list[str]) -> np.ndarray:
        batch = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        return model(**batch).pooler_output.float().numpy()

    return EmbedderRun(encode)


def torch_translator(model, tokenizer) -> TranslatorRun:
    """A MiniTF translation model in `pipeline("minitf-translation")`, as `minitf translate` runs it."""
    from transformers import pipeline

    from hf_minitf.modeling.pipeline_minitf_translation import TASK

    translate = pipeline(TASK, model=model, tokenizer=tokenizer)  # type: ignore[call-overload]  # the overloads list only built-in tasks
    return TranslatorRun(lambda texts: [output["translation_text"] for output in translate(texts)])


def _end_ids(folder: Path) -> list[int]:
    from hf_minitf.engines.folders import end_ids

    return end_ids(folder)


def native_generator(folder: str, file: str, info: dict) -> GeneratorRun:
    """A native export's GPT-2 / GPT-NeoX in transformers (no remote code, safetensors only)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=False, use_safetensors=True).eval()
    return torch_generator(model, _end_ids(Path(folder)))


def native_embedder(folder: str, file: str, info: dict) -> EmbedderRun:
    """A native export's SentenceTransformer folder (XLM-R XL, mean pooling, normalize) in sentence-transformers."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(folder, device="cpu", trust_remote_code=False)
    return EmbedderRun(lambda texts: np.asarray(model.encode(texts, convert_to_numpy=True), dtype=np.float32))


def native_translator(folder: str, file: str, info: dict) -> TranslatorRun:
    """A translator's native export (Pegasus, its joint tokenizer) in transformers: each text translated alone
    with the folder's generation config, as the MiniTF translation pipeline does."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    model = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=False, use_safetensors=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False)

    @torch.no_grad()
    def translate(texts: list[str]) -> list[str]:
        outputs = [model.generate(**tokenizer(text, return_tensors="pt"))[0] for text in texts]
        return [str(tokenizer.decode(output, skip_special_tokens=True)) for output in outputs]

    return TranslatorRun(translate)


# ------------------------------------------------------------------------------------------------- engine exports
def onnx_generator(folder: str, file: str, info: dict) -> GeneratorRun:
    """An ONNX GPT export's graph `file` in ONNX Runtime (hf_minitf.engines' runner, as `minitf generate` runs it);
    the logits of a sequence come from one call with an empty cache."""
    from hf_minitf.engines.onnx import OnnxGenerator

    engine = OnnxGenerator(Path(folder), info, file)

    def logits(sequence: list[int]) -> np.ndarray:
        feeds = {
            "input_ids": np.array([sequence], dtype=np.int64),
            "attention_mask": np.ones((1, len(sequence)), dtype=np.int64),
            "position_ids": np.arange(len(sequence), dtype=np.int64)[None],
            **engine.empty_cache(),
        }
        return engine.session.run(["logits"], feeds)[0][0].astype(np.float32)

    return GeneratorRun(engine.generate, logits)


def onnx_embedder(folder: str, file: str, info: dict) -> EmbedderRun:
    from hf_minitf.engines.onnx import OnnxEmbedder

    return EmbedderRun(OnnxEmbedder(Path(folder), info, file).encode)


def onnx_translator(folder: str, file: str, info: dict) -> TranslatorRun:
    """An ONNX translator export's three graphs of `file`'s dtype (its encoder graph) in ONNX Runtime, greedy."""
    from hf_minitf.catalog.exports import ONNX_DTYPE_SUFFIXES, ONNX_TRANSLATOR_GRAPHS, onnx_variant_file
    from hf_minitf.engines.onnx_translator import OnnxTranslator

    encoder = ONNX_TRANSLATOR_GRAPHS["encoder"]
    dtype = next(dtype for dtype in ONNX_DTYPE_SUFFIXES if onnx_variant_file(encoder, dtype) == file)
    return TranslatorRun(OnnxTranslator(Path(folder), info, dtype).translate)


def ctranslate2_generator(folder: str, file: str, info: dict) -> GeneratorRun:
    """A CTranslate2 GPT export in `ctranslate2.Generator` (hf_minitf.engines' runner); the logits of a sequence
    from its `forward_batch`."""
    from hf_minitf.engines.ctranslate2 import CTranslate2Generator

    engine = CTranslate2Generator(Path(folder), info)

    def logits(sequence: list[int]) -> np.ndarray:
        output = engine.generator.forward_batch([[engine.vocabulary[index] for index in sequence]])
        return np.asarray(output, dtype=np.float32)[0]

    return GeneratorRun(engine.generate, logits)


def ctranslate2_translator(folder: str, file: str, info: dict) -> TranslatorRun:
    from hf_minitf.engines.ctranslate2 import CTranslate2Translator

    return TranslatorRun(CTranslate2Translator(Path(folder), info).translate)


def ctranslate2_embedder(folder: str, file: str, info: dict) -> EmbedderRun:
    from hf_minitf.engines.ctranslate2 import CTranslate2Embedder

    return EmbedderRun(CTranslate2Embedder(Path(folder), info).encode)


def llama_cpp_threads() -> dict[str, int]:
    """llama.cpp's threads, one per CPU core this process may use (the worker keeps to one: `worker.one_core`);
    llama.cpp's own default (half the machine's cores) would put spinning threads on one core."""
    import os

    if not hasattr(os, "sched_getaffinity"):
        return {}
    cores = len(os.sched_getaffinity(0))
    return {"n_threads": cores, "n_threads_batch": cores}


def llama_cpp_generator(folder: str, file: str, info: dict) -> GeneratorRun:
    """A GGUF file in llama.cpp (llama-cpp-python), greedy until its end token. llama-cpp-python is no extra of the
    package (it builds llama.cpp from source): it is imported by the module name `catalog.verification.RUNTIMES`
    gives, where the user installed it, as vLLM is run by its module name in an environment of its own."""
    import importlib

    from hf_minitf.catalog.verification import RUNTIMES

    llm = importlib.import_module(RUNTIMES["llama.cpp"].module).Llama(
        model_path=str(Path(folder) / file),
        n_ctx=info.get("context", 512),
        logits_all=True,
        verbose=False,
        **llama_cpp_threads(),
    )

    def generate(prompts: list[list[int]], new_tokens: int) -> list[list[int]]:
        results = []
        for prompt in prompts:
            llm.reset()
            llm.eval(prompt)
            tokens: list[int] = []
            for _ in range(new_tokens):
                token = int(llm.sample(temp=0.0, top_k=1))
                tokens.append(token)
                if token == llm.token_eos():
                    break
                llm.eval([token])
            results.append(tokens)
        return results

    def logits(sequence: list[int]) -> np.ndarray:
        llm.reset()
        llm.eval(sequence)
        return np.asarray(llm.scores[: len(sequence)], dtype=np.float32)

    return GeneratorRun(generate, logits)


def llama_cpp_embedder(folder: str, file: str, info: dict) -> EmbedderRun:
    """An encoder's GGUF file in llama.cpp as an embedding model (mean pooling read from the file), normalized. The
    whole context is one batch: non-causal attention needs every token of a text in one ubatch."""
    import importlib

    from hf_minitf.catalog.verification import RUNTIMES

    context = info.get("context", 512)
    llm = importlib.import_module(RUNTIMES["llama.cpp"].module).Llama(
        model_path=str(Path(folder) / file),
        embedding=True,
        n_ctx=context,
        n_batch=context,
        n_ubatch=context,
        verbose=False,
        **llama_cpp_threads(),
    )
    return EmbedderRun(lambda texts: np.asarray([llm.embed(text, normalize=True) for text in texts], np.float32))


def load_run(loader: str, folder: str, file: str, info: dict[str, Any]) -> Run:
    """The run a loader named `module:function` returns."""
    import importlib

    module, _, function = loader.partition(":")
    return getattr(importlib.import_module(module), function)(folder, file, info)


__all__ = [
    "EmbedderRun",
    "GeneratorRun",
    "Run",
    "TranslatorRun",
    "ctranslate2_embedder",
    "ctranslate2_generator",
    "ctranslate2_translator",
    "llama_cpp_embedder",
    "llama_cpp_generator",
    "load_run",
    "native_embedder",
    "native_generator",
    "native_translator",
    "onnx_embedder",
    "onnx_generator",
    "onnx_translator",
    "torch_embedder",
    "torch_generator",
    "torch_translator",
]
