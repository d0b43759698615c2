"""MiniTF beside the models a user would pick instead, as ratios: every comparison in one process, interleaved.

    python benchmarks/speed.py [--repeats 5] [--new-tokens 200] [--json speed.json] [--tiny]

Sections (each a pair or more of cases, run in turn inside every repeat so that machine noise hits all alike):
- decode: greedy generation from a 16-token prompt, nanoGPT shakespeare-char dims (vocab 65, 6 layers, 6 heads,
  384 wide, context 256), batch 1 and a left-padded batch 8: MiniTF GPT and transformers' GPT-2 of identical dims,
  each through generate() with its default (dynamic) cache, a static cache, a static cache + torch.compile, and
  continuous batching (generate_batch); MiniTF's static cache + compile with eager attention (its fastest fp32
  path: inductor fuses the softmax of one query); MiniTF's reduced-weight paths (bf16, int8 weight-only through
  torchao's TorchAoConfig) beside them, with their greedy agreement with fp32 and their perplexity change; and,
  given `--char-gpt-source` (the nanoGPT-style char GPT's model file), that original's own generate.
- limit: decode time per token against the weights read per token at the copy bandwidth measured in this run.
- encode: SentenceTransformer.encode of 256 sentences of 5..120 words, batch 32, MiniEmbed mini dims (30000 vocab,
  4 layers of 256, FFN 1024): MiniTF encoder, a BertModel of identical dims with the same tokenizer, each in fp32
  and in bf16 (`model_kwargs={"dtype": torch.bfloat16}`, with MiniTF's least cosine to its fp32 embeddings), and
  MiniTF padding every batch to 128 tokens as MiniEmbed's own inference does.
- train: one AdamW step on a 16 x 256 batch, nanoGPT char dims: MiniTF GPT and GPT-2 with their defaults (GPT-2
  trains with dropout 0.1, MiniTF without), and GPT-2 without dropout beside them. The models these steps
  train (on an embedded text) are the ones the decode section measures, so agreement and perplexity mean something.
- memory: peak resident memory added by each case, each in a forked child process.

Prints a table of medians, spreads (min-max over repeats) and ratios to the reference of each section; `--json`
writes every figure. Absolute times mean little on a shared machine: read the ratios.
"""

from __future__ import annotations

import argparse
import copy
import importlib.machinery
import importlib.util
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from common import compile_everywhere, cpu_name, write_json
from factories import TINY_SIZES, preset_fields  # tests/factories.py, on sys.path through common
from transformers import BertConfig, BertModel, GenerationConfig, GPT2Config, GPT2LMHeadModel, TorchAoConfig

from hf_minitf import (
    MiniTFEncoderConfig,
    MiniTFEncoderModel,
    MiniTFGPTConfig,
    MiniTFGPTForCausalLM,
    save_sentence_transformer,
    train_wordlevel_tokenizer,
)

TEXT = (
    "First Citizen: Before we proceed any further, hear me speak. All: Speak, speak. First Citizen: You are all "
    "resolved rather to die than to famish? All: Resolved. resolved. First Citizen: First, you know Caius Marcius is "
    "chief enemy to the people. All: We know't, we know't. First Citizen: Let us kill him, and we'll have corn at "
    "our own price. Is't a verdict? All: No more talking on't; let it be done: away, away!\n"
) * 40
WORDS = (
    "time person year way day thing man world life hand part child eye woman place work week case point "
    "government company number group problem fact be have do say get make go know take see come think look "
    "want give use find tell ask seem feel try leave call good new first last long great little own other old "
    "right big high different small large next early young important few public bad same able"
).split()


# The MiniTF GPT's config fields, and the names GPT-2's config and the nanoGPT-style char GPT give them
GPT_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "max_position_embeddings")
GPT2_NAMES = {
    **dict(zip(GPT_FIELDS, ("vocab_size", "n_embd", "n_layer", "n_head", "n_positions"))),
    "initializer_range": "initializer_range",
}
CHAR_GPT_NAMES = dict(zip(GPT_FIELDS, ("vocab_size", "n_embd", "n_layer", "n_head", "block_size")))


def renamed(fields: dict, names: dict) -> dict:
    """The config `fields` under another library's `names` for them (those it has no name for left out)."""
    return {names[key]: value for key, value in fields.items() if key in names}


@dataclass
class Sizes:
    """The models' config fields, the catalog presets' (the nanoGPT shakespeare-char GPT, 65 characters; the
    MiniEmbed mini encoder), and the run's sizes; `tiny` shrinks them so a test can run the whole benchmark."""

    gpt: dict = field(default_factory=lambda: preset_fields("gpt", "shakespeare-char", vocab_size=65))
    prompt: int = 16
    new_tokens: int = 200
    train_batch: int = 16
    train_steps: int = 12
    encoder: dict = field(default_factory=lambda: preset_fields("encoder", "miniembed-mini"))
    sentences: int = 256
    encode_batch: int = 32

    @classmethod
    def tiny(cls) -> Sizes:
        """The tests' tiny GPT and encoder sizes (context 64, 300 words of at most 32 tokens), few steps."""
        return cls(
            gpt=dict(TINY_SIZES["gpt"], vocab_size=65, max_position_embeddings=64),
            new_tokens=8,
            train_batch=2,
            train_steps=2,
            encoder=dict(TINY_SIZES["encoder"], vocab_size=300, max_position_embeddings=32),
            sentences=16,
            encode_batch=8,
        )

    @property
    def vocab(self) -> int:
        return self.gpt["vocab_size"]

    @property
    def context(self) -> int:
        return self.gpt["max_position_embeddings"]

    @property
    def encoder_max_length(self) -> int:
        return self.encoder["max_position_embeddings"]


@dataclass
class Case:
    """One timed thing: `run()` does the work once; `prepare()` warms it (compilation, caches) untimed."""

    name: str
    run: Callable[[], object]
    prepare: Callable[[], object] | None = None
    seconds: list[float] = field(default_factory=list)
    result: dict = field(default_factory=dict)  # what the last run produced (generated tokens), for agreement


def interleave(cases: list[Case], repeats: int) -> None:
    """Warm every case, then time each once per repeat, in turn."""
    for case in cases:
        (case.prepare or case.run)()
    for _ in range(repeats):
        for case in cases:
            started = time.perf_counter()
            case.run()
            case.seconds.append(time.perf_counter() - started)


def summary(cases: list[Case], reference: str) -> list[dict]:
    """Median, spread and speed relative to `reference` (>1 means faster than it) of each case."""
    base = statistics.median(next(case for case in cases if case.name == reference).seconds)
    rows = []
    for case in cases:
        median = statistics.median(case.seconds)
        rows.append(
            dict(
                case=case.name,
                median_s=median,
                min_s=min(case.seconds),
                max_s=max(case.seconds),
                speedup_vs_reference=base / median,
                reference=reference,
            )
        )
    return rows


def row_fields(*keys: str, digits: int = 3) -> Callable[[dict], str]:
    """For `print_table`: a row's `key=value` for those of `keys` it has."""
    return lambda row: " ".join(f"{key}={row[key]:.{digits}f}" for key in keys if key in row)


def print_table(title: str, rows: list[dict], extra: Callable[[dict], str] = lambda row: "") -> None:
    print(f"\n## {title} (reference: {rows[0]['reference']})")
    print(f"{'case':52s} {'median':>9s} {'spread':>19s} {'x ref':>7s}")
    for row in rows:
        spread = f"{row['min_s']:.3f}-{row['max_s']:.3f} s"
        print(
            f"{row['case']:52s} {row['median_s']:8.3f}s {spread:>19s} {row['speedup_vs_reference']:6.2f}x {extra(row)}"
        )


# --- models ---------------------------------------------------------------------------------------------------------


def char_data(sizes: Sizes) -> tuple[torch.Tensor, dict[str, int]]:
    characters = sorted(set(TEXT))[: sizes.vocab]
    index = {character: position for position, character in enumerate(characters)}
    return torch.tensor([index.get(character, 0) for character in TEXT]), index


def gpt_models(sizes: Sizes) -> dict[str, torch.nn.Module]:
    torch.manual_seed(0)
    ours = MiniTFGPTForCausalLM(MiniTFGPTConfig(**{**sizes.gpt, "pad_token_id": 0, "eos_token_id": None}))
    return {"minitf": ours, "gpt2": gpt2_model(sizes)}


def gpt2_model(sizes: Sizes, dropout: float = 0.1) -> GPT2LMHeadModel:
    """transformers' GPT-2 of the MiniTF GPT's dims; `dropout` 0.1 is GPT2Config's default, MiniTF's is 0."""
    dropouts = {name: dropout for name in ("resid_pdrop", "embd_pdrop", "attn_pdrop")}
    special = dict(pad_token_id=0, bos_token_id=None, eos_token_id=None)
    return GPT2LMHeadModel(
        GPT2Config(**renamed(sizes.gpt, GPT2_NAMES), activation_function="gelu", **special, **dropouts)
    )


def training_batch(data: torch.Tensor, sizes: Sizes, step: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(step)
    length = min(sizes.context, 256)
    starts = torch.randint(0, len(data) - length, (sizes.train_batch,), generator=generator)
    return torch.stack([data[start : start + length] for start in starts.tolist()])


def train_section(models: dict, data: torch.Tensor, sizes: Sizes, repeats: int) -> list[dict]:
    """Each library's defaults (GPT-2 trains with dropout 0.1, MiniTF without), and GPT-2 without dropout beside."""
    models = {**models, "gpt2 without dropout": gpt2_model(sizes, dropout=0.0)}
    optimizers = {name: torch.optim.AdamW(model.parameters(), lr=2e-3) for name, model in models.items()}
    steps = {"count": 0}

    def step(name: str) -> Callable[[], float]:
        def run() -> float:
            model, optimizer = models[name], optimizers[name]
            model.train()
            batch = training_batch(data, sizes, steps["count"])
            steps["count"] += 1
            loss = model(batch, labels=batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return loss.item()

        return run

    cases = [Case(f"train step {name}", step(name)) for name in models]
    interleave(cases, max(repeats, sizes.train_steps))
    for model in models.values():
        model.eval()
    return summary(cases, "train step gpt2")


# --- decode ---------------------------------------------------------------------------------------------------------


def prompts(sizes: Sizes, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    data, _ = char_data(sizes)
    ids = torch.stack([data[1000 + 37 * row : 1000 + 37 * row + sizes.prompt] for row in range(batch)])
    mask = torch.ones_like(ids)
    for row in range(1, batch):  # left padding of 0..7 tokens
        mask[row, : row % sizes.prompt] = 0
        ids[row, : row % sizes.prompt] = 0
    return ids, mask


def compiled() -> dict:
    """generate()'s options of the compiled path: a static cache, compiled on CPUs too."""
    return {"cache_implementation": "static", "compile_config": compile_everywhere()}


def decode_paths(no_compile: bool) -> dict[str, dict]:
    """generate()'s options of each decoding path: its default (dynamic) cache, a static cache, and that compiled."""
    paths: dict[str, dict] = {"default (dynamic cache)": {}, "static cache": {"cache_implementation": "static"}}
    if not no_compile:
        paths["static cache + compile"] = compiled()
    return paths


def paged_cache_config(sizes: Sizes, batch: int) -> dict:
    try:
        from transformers.generation.configuration_utils import ContinuousBatchingConfig
    except ImportError:
        return {}
    tokens = batch * (sizes.prompt + sizes.new_tokens)
    return dict(
        continuous_batching_config=ContinuousBatchingConfig(  # pages of 256 tokens by default
            num_blocks=max(4, 2 * math.ceil(tokens / 256)), max_batch_tokens=max(64, batch * sizes.prompt)
        )
    )


def generate_case(name: str, model, ids, mask, sizes: Sizes, **options) -> Case:
    kwargs = dict(
        attention_mask=mask,
        max_new_tokens=sizes.new_tokens,
        min_new_tokens=sizes.new_tokens,
        do_sample=False,
        **options,
    )
    result = {}

    def run():
        with torch.inference_mode():
            result["tokens"] = model.generate(ids, **kwargs)[:, ids.shape[1] :]
        return result["tokens"]

    return Case(name, run, result=result)


def generate_batch_case(name: str, model, ids, mask, sizes: Sizes) -> Case:
    requests = [row[row_mask.bool()].tolist() for row, row_mask in zip(ids, mask)]
    config = GenerationConfig(
        max_new_tokens=sizes.new_tokens,
        min_new_tokens=sizes.new_tokens,
        do_sample=False,
        eos_token_id=None,
        pad_token_id=0,
    )
    result = {}

    def run():
        with torch.inference_mode():
            outputs = model.generate_batch(
                requests, generation_config=config, warmup=False, **paged_cache_config(sizes, len(requests))
            )
        ordered = sorted(outputs.values(), key=lambda output: int(output.request_id.split("_")[-1]))
        result["tokens"] = torch.tensor([output.generated_tokens for output in ordered])
        return result["tokens"]

    return Case(name, run, result=result)


def reduced_weights(model: MiniTFGPTForCausalLM, kind: str, folder: Path) -> MiniTFGPTForCausalLM:
    """The same model loaded back in bf16 or with int8 weight-only weights (transformers' own mechanisms)."""
    model.save_pretrained(folder)
    if kind == "bf16":
        return MiniTFGPTForCausalLM.from_pretrained(folder, dtype=torch.bfloat16).eval()
    from torchao.quantization import Int8WeightOnlyConfig

    return MiniTFGPTForCausalLM.from_pretrained(folder, quantization_config=TorchAoConfig(Int8WeightOnlyConfig()))


def perplexity(model, data: torch.Tensor, sizes: Sizes) -> float:
    length = min(sizes.context, 256)
    windows = torch.stack([data[start : start + length] for start in range(0, 4 * length, length)])
    with torch.inference_mode():
        return math.exp(model(windows, labels=windows).loss.float().item())


def load_char_gpt_original(source: Path, sizes: Sizes):
    """The nanoGPT-style char GPT's own module (random weights: only its speed is measured)."""
    loader = importlib.machinery.SourceFileLoader("char_gpt_original", str(source))
    spec = importlib.util.spec_from_loader("char_gpt_original", loader)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.GPT(**renamed(sizes.gpt, CHAR_GPT_NAMES), dropout=0.0).eval()


def decode_section(
    models: dict, sizes: Sizes, repeats: int, batch: int, args, notes: dict, bandwidth: float
) -> list[dict]:
    """Every decoding path of both models; rows carry greedy agreement with MiniTF fp32 and, for MiniTF's default
    and reduced-weight paths, the time per step over the time to read the weights once at copy bandwidth."""
    ours, gpt2 = models["minitf"], models["gpt2"]
    weight_bytes = {"minitf": weight_bytes_per_token(ours)}
    ids, mask = prompts(sizes, batch)
    cases = []
    for name, model in (("minitf", ours), ("gpt2", gpt2)):
        for path, options in decode_paths(args.no_compile).items():
            cases.append(generate_case(f"{name} {path}", model, ids, mask, sizes, **options))
        cases.append(generate_batch_case(f"{name} continuous batching", model, ids, mask, sizes))
    if not args.no_compile:  # the fastest fp32 path: inductor fuses eager attention's softmax for one query
        eager = copy.deepcopy(ours)
        eager.set_attn_implementation("eager")
        cases.append(
            generate_case("minitf static cache + compile, eager attention", eager, ids, mask, sizes, **compiled())
        )
    with tempfile.TemporaryDirectory() as folder:
        for kind in ("bf16", "int8"):
            reduced = reduced_weights(ours, kind, Path(folder) / kind)
            weight_bytes[f"minitf {kind}"] = weight_bytes_per_token(reduced)
            notes.setdefault("perplexity", {})[kind] = perplexity(reduced, char_data(sizes)[0], sizes)
            cases.append(generate_case(f"minitf {kind} default", reduced, ids, mask, sizes))
            if not args.no_compile:
                name = f"minitf {kind} static cache + compile"
                cases.append(generate_case(name, reduced, ids, mask, sizes, **compiled()))
    if args.char_gpt_source and batch == 1:
        original = load_char_gpt_original(args.char_gpt_source, sizes)

        def original_generate():
            with torch.inference_mode():
                return original.generate(ids, max_new_tokens=sizes.new_tokens)

        cases.append(Case("char GPT original generate()", original_generate))
    interleave(cases, repeats)
    notes.setdefault("perplexity", {})["fp32"] = perplexity(ours, char_data(sizes)[0], sizes)
    reference_tokens = cases[0].result["tokens"]
    rows = summary(cases, "gpt2 default (dynamic cache)")
    for case, row in zip(cases, rows):
        tokens = case.result.get("tokens")
        if tokens is not None and case.name.startswith("minitf"):
            row["greedy_agreement_with_fp32"] = (tokens == reference_tokens).float().mean().item()
        row["seconds_per_token_step"] = row["median_s"] / sizes.new_tokens
        model_name = next((name for name in weight_bytes if row["case"].startswith(name + " ")), None)
        if model_name and "batching" not in row["case"]:
            row["physical_limit_ratio"] = row["seconds_per_token_step"] / (weight_bytes[model_name] / bandwidth)
    return rows


def copy_bandwidth(megabytes: int = 256) -> float:
    """Bytes per second of a plain tensor copy much larger than the caches (best of 5)."""
    source = torch.ones(megabytes * 2**20 // 4)
    target = torch.empty_like(source)
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        target.copy_(source)
        best = min(best, time.perf_counter() - started)
    return source.numel() * 4 / best


def weight_bytes_per_token(model) -> int:
    """Bytes of weights one decoding step reads: every parameter once (the tied lm_head reads the whole token table;
    position-table rows not looked up are counted too, a small overestimate). Quantized weights count their parts."""
    return sum(_tensor_bytes(parameter.data) for parameter in model.parameters())


def _tensor_bytes(tensor: torch.Tensor) -> int:
    if type(tensor) is torch.Tensor or not hasattr(tensor, "__tensor_flatten__"):
        return tensor.numel() * tensor.element_size()
    return sum(_tensor_bytes(getattr(tensor, name)) for name in tensor.__tensor_flatten__()[0])


# --- encode ---------------------------------------------------------------------------------------------------------


def sentences(sizes: Sizes) -> list[str]:
    generator = torch.Generator().manual_seed(0)
    result = []
    for _ in range(sizes.sentences):
        count = int(torch.randint(5, 121, (1,), generator=generator))
        words = torch.randint(0, len(WORDS), (count,), generator=generator).tolist()
        result.append(" ".join(WORDS[word] for word in words) + ".")
    return result


def encode_section(sizes: Sizes, repeats: int, folder: Path) -> list[dict]:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    texts = sentences(sizes)
    tokenizer = train_wordlevel_tokenizer(
        texts, vocab_size=sizes.encoder["vocab_size"], min_frequency=1, max_length=sizes.encoder_max_length
    )
    torch.manual_seed(0)
    save_sentence_transformer(MiniTFEncoderModel(MiniTFEncoderConfig(**sizes.encoder)), tokenizer, folder / "minitf")
    bert = BertModel(BertConfig(**sizes.encoder, hidden_act="gelu"))  # the encoder's field names are BERT's
    bert.save_pretrained(folder / "bert")
    tokenizer.save_pretrained(folder / "bert")

    def bert_embedder(**model_kwargs):
        return SentenceTransformer(
            modules=[
                Transformer(str(folder / "bert"), max_seq_length=sizes.encoder_max_length, model_kwargs=model_kwargs),
                Pooling(sizes.encoder["hidden_size"], "mean"),
            ],
            device="cpu",
        )

    bf16 = {"dtype": torch.bfloat16}
    embedders = {
        "minitf": SentenceTransformer(str(folder / "minitf"), device="cpu"),
        "bert": bert_embedder(),
        "minitf bf16": SentenceTransformer(str(folder / "minitf"), device="cpu", model_kwargs=bf16),
        "bert bf16": bert_embedder(**bf16),
    }
    model = embedders["minitf"][0].auto_model.eval()

    def padded_to_max_length():
        outputs = []
        with torch.inference_mode():
            for start in range(0, len(texts), sizes.encode_batch):
                batch = tokenizer(
                    texts[start : start + sizes.encode_batch],
                    padding="max_length",
                    truncation=True,
                    max_length=sizes.encoder_max_length,
                    return_tensors="pt",
                )
                outputs.append(model(**batch).pooler_output)
        return torch.cat(outputs)

    def encode(name):
        result = {}

        def run():
            result["embeddings"] = embedders[name].encode(texts, batch_size=sizes.encode_batch, convert_to_tensor=True)
            return result["embeddings"]

        return Case(f"SentenceTransformer {name}", run, result=result)

    cases = [encode(name) for name in embedders]
    cases.append(Case(f"minitf padded to {sizes.encoder_max_length} (MiniEmbed's way)", padded_to_max_length))
    interleave(cases, repeats)
    rows = summary(cases, "SentenceTransformer bert")
    embeddings = {case.name: case.result.get("embeddings") for case in cases}
    fp32, reduced = embeddings["SentenceTransformer minitf"], embeddings["SentenceTransformer minitf bf16"].float()
    row = next(row for row in rows if row["case"] == "SentenceTransformer minitf bf16")
    row["min_cosine_with_fp32"] = F.cosine_similarity(fp32, reduced).min().item()
    return rows


# --- memory ---------------------------------------------------------------------------------------------------------

MEMORY_CASES = ("decode batch 8 minitf", "decode batch 8 gpt2", "train step minitf", "train step gpt2")


def run_memory_case(case: str, sizes: Sizes) -> int:
    """Build the models, run `case` once and return the peak resident memory it added (bytes)."""
    models = gpt_models(sizes)
    data, _ = char_data(sizes)
    model = models[case.split()[-1]]
    batch = training_batch(data, sizes, 0)
    ids, mask = prompts(sizes, 8)
    if case.startswith("decode"):
        model.eval()
    before = _reset_peak_resident_bytes()
    if case.startswith("decode"):
        with torch.inference_mode():
            model.generate(ids, attention_mask=mask, max_new_tokens=sizes.new_tokens, do_sample=False)
    else:
        model(batch, labels=batch).loss.backward()
    return _status_bytes("VmHWM") - before


def _status_bytes(field_name: str) -> int:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(field_name + ":"))
    return int(line.split()[1]) * 1024


def _reset_peak_resident_bytes() -> int:
    """Reset the kernel's peak-resident counter (VmHWM) to the current size and return that size."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")
    return _status_bytes("VmRSS")


def peak_memory(case: str, tiny: bool) -> float:
    """MiB of peak resident memory `case` adds, measured in a fresh process of this script (Linux)."""
    command = [sys.executable, __file__, "--memory-case", case] + (["--tiny"] if tiny else [])
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return int(output.strip().splitlines()[-1]) / 2**20


# --- main -----------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs of each case (default 5)")
    parser.add_argument("--new-tokens", type=int, help="tokens to generate (default 200)")
    parser.add_argument("--json", type=Path, help="write every figure to this JSON file")
    parser.add_argument("--tiny", action="store_true", help="tiny dims: checks the benchmark runs, measures nothing")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile paths (slow to warm up)")
    parser.add_argument(
        "--char-gpt-source", type=Path, help="the nanoGPT-style char GPT's model file, to time its own generate() too"
    )
    parser.add_argument(
        "--sections",
        nargs="+",
        default=["train", "decode", "encode", "memory"],
        choices=["train", "decode", "encode", "memory"],
    )
    parser.add_argument("--memory-case", choices=MEMORY_CASES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = Sizes.tiny() if args.tiny else Sizes()
    if args.memory_case:
        print(run_memory_case(args.memory_case, sizes))
        return {"memory_case": args.memory_case}
    if args.new_tokens:
        sizes.new_tokens = args.new_tokens
    report = dict(
        torch=torch.__version__,
        threads=torch.get_num_threads(),
        cpu=cpu_name(),
        sizes=vars(sizes),
        date=time.strftime("%Y-%m-%d"),
    )
    print(f"torch {report['torch']}, {report['threads']} threads, {report['cpu']}")
    models = gpt_models(sizes)
    data, _ = char_data(sizes)
    if "train" in args.sections:
        report["train"] = train_section(models, data, sizes, args.repeats)
        print_table(f"one AdamW training step, batch {sizes.train_batch} x {min(sizes.context, 256)}", report["train"])
    for model in models.values():
        model.eval()
    if "decode" in args.sections:
        notes: dict = {}
        bandwidth = copy_bandwidth(16 if args.tiny else 256)
        report["copy_bandwidth_GBps"] = bandwidth / 1e9
        for batch in (1, 8):
            rows = decode_section(models, sizes, args.repeats, batch, args, notes, bandwidth)
            report[f"decode_batch_{batch}"] = rows
            print_table(
                f"greedy decode, batch {batch}, {sizes.new_tokens} new tokens",
                rows,
                row_fields("greedy_agreement_with_fp32", "physical_limit_ratio"),
            )
        report["perplexity"] = notes["perplexity"]
        print(
            f"\nperplexity on the training text: {json.dumps(notes['perplexity'])}; "
            f"copy bandwidth {report['copy_bandwidth_GBps']:.1f} GB/s"
        )
    if "encode" in args.sections:
        with tempfile.TemporaryDirectory() as folder:
            report["encode"] = encode_section(sizes, args.repeats, Path(folder))
        print_table(
            f"SentenceTransformer.encode, {sizes.sentences} sentences of 5..120 words, batch {sizes.encode_batch}",
            report["encode"],
            row_fields("min_cosine_with_fp32", digits=6),
        )
    if "memory" in args.sections:
        report["peak_memory_MiB"] = {case: peak_memory(case, args.tiny) for case in MEMORY_CASES}
        print(
            "\n## peak memory added (MiB): "
            + ", ".join(f"{name} {value:.0f}" for name, value in report["peak_memory_MiB"].items())
        )
    if args.json:
        write_json(args.json, report)
    return report


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
