"""Time per optimizer step of training, side by side: an original project's own model in a bare PyTorch loop, the
MiniTF model of the same family in the same loop, and `minitf train FAMILY`, each in its own process.

    python benchmarks/training_speed.py [--family gpt|encoder|seq2seq] [--char-gpt-source PATH]
        [--miniembed-source PATH] [--hkproj-source PATH] [--rounds 5] [--steps 6] [--compile] [--bf16]
        [--json FILE] [--smoke]

Families (`--family`, default gpt), each at its original's dims (a catalog preset), fp32:
- gpt: the nanoGPT-style char GPT (`--char-gpt-source`, its model.py) at nanoGPT's shakespeare-char dims (preset
  "shakespeare-char": 6 layers of 384, 6 heads, dropout 0.2; 65 characters), batch 8 x 128 tokens, AdamW at 1e-3.
  Its loop: `logits, loss = model(x, y)`; the MiniTF loop: `model(input_ids=x, labels=x, shift_labels=y).loss` (the
  same targets: transformers' causal-LM loss takes them already shifted). The tokens follow a fixed random chain:
  each token is followed by one of 4 (a loss floor of ln 4 = 1.386).
- encoder: MiniEmbed (`--miniembed-source`, its src/model.py) at its mini dims (preset "miniembed-mini": 4 layers
  of 256, 4 heads, FFN 1024, dropout 0.1; a word vocabulary of about 29,000 of the preset's 30,000), batch 32
  (anchor, positive) pairs of 26 to 32 tokens padded to the batch's longest, AdamW at 1e-3. The loss is sentence-transformers'
  MultipleNegativesRankingLoss (what `minitf train encoder` trains with): cross entropy of 20 x the cosines of
  each anchor with every positive of the batch, its own positive the target. Its loop embeds with `model.encode`;
  the MiniTF loop with `model(...).pooler_output` (mean-pooled and L2-normalized, as `encode`).
- seq2seq: hkproj's pytorch-transformer (`--hkproj-source`, its model.py, `build_transformer`) at its defaults
  (preset "hkproj": 6 + 6 layers of 512, 8 heads, FFN 2048, dropout 0.1, label smoothing 0.1), batch 8 pairs of
  42 to 64 source and 41 to 63 target tokens padded to the batch's longest (hkproj pads to 350: the stricter
  anchor here), a vocabulary of about 7,700 words a side; hkproj's loop: Adam at 1e-4 (eps 1e-9), `encode`,
  `decode` with its padding and causal masks, `project`, cross entropy with ignore_index [PAD] and label smoothing
  0.1; the MiniTF loop: `model(input_ids, attention_mask, labels=labels).loss`.
The pairs are random sentences of a word vocabulary, each paired with its word-for-word translation under a fixed
random permutation of the words (so there is something to learn); every case reads them through the tokenizer
`minitf train` trains on them (so the vocabularies, ids and lengths are the same), the loops' batches tokenized
before timing.

Cases:
- `original loop`: the original's own model (its source file passed by path; left out without it) in a bare loop:
  the loss, `loss.backward()`, `optimizer.step()`, `optimizer.zero_grad()`.
- `minitf loop`: the MiniTF model of the same dims in the same loop.
- `minitf train FAMILY`: the command's own code (`hf_minitf.cli.main`, in the worker's process) on the same data
  with `--preset P --batch-size B --no-progress`, its steps timed by a Trainer callback from one step's end to the
  next (data loading, collation, logging and callbacks included).
- with `--before DIR` (the files of another commit, e.g. `git archive COMMIT hf_minitf | tar -x -C DIR`): that
  code's `minitf loop` and `minitf train FAMILY` beside this one's.
- with `--compile`: `minitf train FAMILY --compile` and `minitf loop` over `torch.compile(model)` beside them;
  with `--bf16`: `minitf train FAMILY --mixed-precision bf16`.

Each round runs `--steps` timed steps of every case in turn (after untimed warm-up steps in each process); the
figure of a case is the median step over all rounds. Ratios are to the original loop (else to the MiniTF loop).
The machine is shared: read the ratios and the spread (the steps' min-max and the rounds' medians' range).

benchmarks/training_loss.py trains the same loops over the same batches from the first step, with one more model
(the original's as it is built, converted by `hf_minitf.conversion`), and compares their loss curves.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import io
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from common import (
    dated_results_path,
    interleaved_parser,
    machine,
    main_or_worker,
    parse_interleaved,
    random_sentences,
    serve,
    time_interleaved,
    write_json,
)

SCRIPT = str(Path(__file__).resolve())
TEXT = (
    "First Citizen: Before we proceed any further, hear me speak. All: Speak, speak. First Citizen: You are all "
    "resolved rather to die than to famish? All: Resolved. resolved. First Citizen: First, you know Caius Marcius is "
    "chief enemy to the people. All: We know't, we know't. Let us kill him, and we'll have corn at our own price.\n"
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ abcdefghijklmnopqrstuvwxyz 0123456789 !$&',-.:;?\n"
)
WARMUP_STEPS = 3
SCORE_SCALE = 20.0  # MultipleNegativesRankingLoss's default scale of the cosines


@dataclass(frozen=True)
class Family:
    """What a family's benchmark trains: the original (its name, the option naming its model file), the preset of
    its dims, the batch (examples; tokens per example for the GPT, words per sentence for pairs), the optimizer
    of the original's loop and its learning rate, and the smoke run's sizes."""

    original: str
    source_option: str
    preset: str
    batch: int
    lengths: tuple[int, int]  # a GPT's block (both equal), else the words of a sentence: low to high - 1
    optimizer: str
    learning_rate: float
    words: int = 0  # the pairs' word vocabulary (a side's)
    pairs: int = 0  # pairs in the data
    smoke_batch: int = 4
    smoke_lengths: tuple[int, int] = (6, 9)


FAMILIES = {
    "gpt": Family(
        "the nanoGPT-style char GPT",
        "--char-gpt-source",
        "shakespeare-char",
        8,
        (128, 128),
        "AdamW",
        1e-3,
        smoke_lengths=(16, 16),
    ),
    "encoder": Family(
        "MiniEmbed", "--miniembed-source", "miniembed-mini", 32, (24, 31), "AdamW", 1e-3, words=30000, pairs=2048
    ),
    "seq2seq": Family(
        "hkproj's pytorch-transformer", "--hkproj-source", "hkproj", 8, (40, 63), "Adam", 1e-4, words=8000, pairs=512
    ),
}


def family_of(spec: dict) -> Family:
    return FAMILIES[spec["family"]]


def batch_size(spec: dict) -> int:
    family = family_of(spec)
    return family.smoke_batch if spec.get("smoke") else family.batch


def lengths(spec: dict) -> tuple[int, int]:
    family = family_of(spec)
    return family.smoke_lengths if spec.get("smoke") else family.lengths


def batch_shape(spec: dict) -> str:
    """The batch in words: a GPT's examples x tokens, else its pairs and the words of their sentences."""
    low, high = lengths(spec)
    if spec["family"] == "gpt":
        return f"batch {batch_size(spec)} x {low} tokens"
    return f"batch {batch_size(spec)} pairs of {low} to {high - 1} words a sentence"


def model_fields(family: str, smoke: bool) -> dict:
    """The MiniTF config fields of the timed models: the family's preset (or a tiny one); the GPT's 65 characters
    (the pairs' vocabularies are the tokenizers')."""
    from hf_minitf.catalog.presets import PRESETS

    if family != "gpt":
        return dict(PRESETS[family]["tiny" if smoke else FAMILIES[family].preset].config)
    fields = dict(PRESETS["gpt"][FAMILIES["gpt"].preset].config, vocab_size=65)
    if smoke:
        fields.update(hidden_size=64, num_hidden_layers=2, num_attention_heads=2)
    return fields


def command_preset(spec: dict) -> str:
    return "tiny" if spec.get("smoke") else family_of(spec).preset


CHAIN_CHOICES = 4  # the tokens that may follow each token of the GPT's stream


def text_batches(vocab: int, block: int, batch: int, count: int):
    """`count` random (inputs, targets) batches of `batch` windows of `block` tokens of a stream drawn from a fixed
    random chain (each token followed by one of CHAIN_CHOICES), the targets one token on, as nanoGPT's get_batch
    draws them."""
    import torch

    generator = torch.Generator().manual_seed(0)
    successors = torch.randint(0, vocab, (vocab, CHAIN_CHOICES), generator=generator).tolist()
    tokens = [0]
    for choice in torch.randint(0, CHAIN_CHOICES, (100_000 - 1,), generator=generator).tolist():
        tokens.append(successors[tokens[-1]][choice])
    stream = torch.tensor(tokens)
    starts = torch.randint(0, len(stream) - block - 1, (count, batch), generator=generator)
    windows = [torch.stack([stream[start : start + block + 1] for start in row.tolist()]) for row in starts]
    return [(window[:, :-1].contiguous(), window[:, 1:].contiguous()) for window in windows]


def sentence_pairs(spec: dict) -> list[tuple[str, str]]:
    """The family's pairs: random sentences of `words` words `w0 w1 ...` (`spec["words"]`, else the family's), each
    with its translation: every word `w{k}` replaced by its counterpart under a fixed random permutation of the
    words (`w{p(k)}`; a translator's target words are `t{p(k)}`)."""
    family = family_of(spec)
    rng = random.Random(0)
    count = 8 * batch_size(spec) if spec.get("smoke") else family.pairs
    words = spec.get("words") or (50 if spec.get("smoke") else family.words)
    counterpart = list(range(words))
    rng.shuffle(counterpart)
    prefix = "t" if spec["family"] == "seq2seq" else "w"
    sentences = random_sentences(rng, count, "w", words, lengths(spec))
    return [
        (sentence, " ".join(f"{prefix}{counterpart[int(word[1:])]}" for word in sentence.split()))
        for sentence in sentences
    ]


def pair_tokenizer(spec: dict, pairs: list[tuple[str, str]], fields: dict):
    """The tokenizer `minitf train` trains on these pairs (an encoder's word level one, a translator's pair)."""
    limit = fields["max_position_embeddings"]
    if spec["family"] == "seq2seq":
        from hf_minitf.modeling.tokenization_minitf_seq2seq import train_translation_tokenizers

        return train_translation_tokenizers(pairs, min_frequency=1, model_max_length=limit)
    from hf_minitf.catalog.presets import PRESETS
    from hf_minitf.tokenization.miniembed import train_wordlevel_tokenizer

    vocab = PRESETS["encoder"][command_preset(spec)].vocab_size
    texts = [text for pair in pairs for text in pair]
    return train_wordlevel_tokenizer(texts, vocab_size=vocab, min_frequency=1, max_length=limit)


def load_source(source: str, name: str):
    """An original's model file, imported by path (its code stays where it is)."""
    loader = importlib.machinery.SourceFileLoader(name, source)
    spec = importlib.util.spec_from_loader(name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def converted(original, plan, *arguments, **options):
    """The MiniTF model `minitf convert` makes of the original's model as it is now: its state_dict saved, then planned
    by the converter's `plan` (with the rest of what the converter needs) and built in memory, in training mode."""
    import torch

    from hf_minitf.conversion import open_checkpoint
    from hf_minitf.conversion.base import materialize

    with tempfile.TemporaryDirectory(prefix="training-start-") as folder:
        path = Path(folder) / "original.pt"
        torch.save(original.state_dict(), path)
        return materialize(plan(open_checkpoint(path), *arguments, **options)).train()


def converted_gpt(original, fields: dict):
    from hf_minitf.conversion.char_gpt import plan_char_gpt

    characters = [chr(32 + index) for index in range(fields["vocab_size"])]  # the ids are what the batches hold
    dropout = dict(dropout=fields["hidden_dropout"])
    return converted(original, plan_char_gpt, characters, fields["num_attention_heads"], dropout)


def gpt_case(spec: dict, fields: dict):
    """The char GPT's own `GPT` (or the MiniTF GPT, or the original converted) of the fields' dims, its loss of a
    batch, and its batches."""
    from hf_minitf import MiniTFGPTConfig, MiniTFGPTForCausalLM

    if spec["case"] == "minitf":
        model = MiniTFGPTForCausalLM(MiniTFGPTConfig(**fields))
    else:
        model = load_source(spec["source"], "char_gpt_original").GPT(
            vocab_size=fields["vocab_size"],
            block_size=fields["max_position_embeddings"],
            n_embd=fields["hidden_size"],
            n_head=fields["num_attention_heads"],
            n_layer=fields["num_hidden_layers"],
            dropout=fields["hidden_dropout"],
        )
    if spec["case"] == "converted":
        model = converted_gpt(model, fields)
    if spec["case"] == "original":

        def loss_of(batch):
            return model(*batch)[1]
    else:
        loss_of = gpt_loss(compiled(model, spec))
    return model, loss_of, text_batches(fields["vocab_size"], lengths(spec)[0], batch_size(spec), 64)


def gpt_loss(forward):
    """The MiniTF GPT's loss of an (inputs, targets) batch: the original's targets, as `shift_labels`."""

    def loss_of(batch):
        return forward(input_ids=batch[0], labels=batch[0], shift_labels=batch[1]).loss

    return loss_of


def compiled(model, spec: dict):
    import torch

    return torch.compile(model) if spec.get("compile") else model


def encoder_case(spec: dict, fields: dict):
    """MiniEmbed's own `MiniTransformerEmbedding` (or the MiniTF encoder, or the original converted) of the fields'
    dims, the in-batch negatives loss of a batch of pairs, and the batches (each side tokenized and padded to its
    longest)."""
    import torch
    import torch.nn.functional as F

    from hf_minitf import MiniTFEncoderConfig, MiniTFEncoderModel

    pairs = sentence_pairs(spec)
    tokenizer = pair_tokenizer(spec, pairs, fields)
    vocab, pad = len(tokenizer), tokenizer.pad_token_id
    if spec["case"] != "minitf":
        model = load_source(spec["source"], "miniembed_original").MiniTransformerEmbedding(
            vocab_size=vocab,
            d_model=fields["hidden_size"],
            num_heads=fields["num_attention_heads"],
            num_layers=fields["num_hidden_layers"],
            d_ff=fields["intermediate_size"],
            max_seq_len=fields["max_position_embeddings"],
            dropout=fields.get("hidden_dropout", 0.1),
            pad_token_id=pad,
        )
    if spec["case"] == "original":
        embed = model.encode
    else:
        if spec["case"] == "converted":
            model = converted_encoder(model, fields, tokenizer)
        else:
            model = MiniTFEncoderModel(MiniTFEncoderConfig(**fields, vocab_size=vocab, pad_token_id=pad))
        forward = compiled(model, spec)

        def embed(input_ids, attention_mask):
            return forward(input_ids=input_ids, attention_mask=attention_mask).pooler_output

    def loss_of(batch):
        anchors, positives = (embed(side["input_ids"], side["attention_mask"]) for side in batch)
        scores = SCORE_SCALE * anchors @ positives.T  # both L2-normalized: the cosines
        return F.cross_entropy(scores, torch.arange(len(scores)))

    size = batch_size(spec)
    batches = [
        tuple(tokenizer(list(side), padding=True, return_tensors="pt") for side in zip(*pairs[start : start + size]))
        for start in range(0, len(pairs) - size + 1, size)
    ]
    return model, loss_of, batches


def converted_encoder(original, fields: dict, tokenizer):
    from hf_minitf.conversion.miniembed import plan_miniembed

    vocabulary = dict(vocab_size=len(tokenizer), word_to_id=tokenizer.get_vocab())  # MiniEmbed's tokenizer.json
    config = dict(
        num_heads=fields["num_attention_heads"],
        max_seq_len=fields["max_position_embeddings"],
        dropout=fields.get("hidden_dropout", 0.1),
        pad_token_id=tokenizer.pad_token_id,
    )
    return converted(original, plan_miniembed, vocabulary, config)


EARLY_NORM = "scalar_std_times_eps"  # the norm of hkproj's early version (the model file's, unless told otherwise)
FIXED_NORM = "scalar_std_plus_eps"  # hkproj's fix of it


def hkproj_module(spec: dict):
    """hkproj's model file; with `spec["hkproj_norm"]` FIXED_NORM, its LayerNormalization divides by std + eps,
    as hkproj fixed it, instead of the early version's std * eps (whose activations reach ~1e6, its losses ~1e6)."""
    module = load_source(spec["source"], "hkproj_original")
    if spec.get("hkproj_norm", EARLY_NORM) == FIXED_NORM:

        def fixed_forward(self, x):
            centered = x - x.mean(dim=-1, keepdim=True)
            return self.alpha * centered / (x.std(dim=-1, keepdim=True) + self.eps) + self.bias

        module.LayerNormalization.forward = fixed_forward
    return module


def converted_translator(original, fields: dict, tokenizer, norm: str):
    """The original converted, with the label smoothing of hkproj's train.py (a training setting its weights do not
    hold)."""
    from hf_minitf.conversion.hkproj import plan_hkproj
    from hf_minitf.modeling.tokenization_minitf_seq2seq import VOCAB_FILES_NAMES

    with tempfile.TemporaryDirectory(prefix="training-tokenizers-") as folder:
        tokenizer.save_pretrained(folder)  # hkproj's two tokenizer files among them
        source, target = (Path(folder) / name for name in VOCAB_FILES_NAMES.values())
        dropout = dict(dropout=fields.get("hidden_dropout", 0.1))
        heads, limit = fields["num_attention_heads"], fields["max_position_embeddings"]
        model = converted(original, plan_hkproj, source, target, heads, norm, config=dropout, max_length=limit)
    model.config.label_smoothing = fields.get("label_smoothing", 0.0)
    return model


def seq2seq_case(spec: dict, fields: dict):
    """hkproj's `build_transformer` (or the MiniTF translator, or the original converted) of the fields' dims, its loss
    of a batch as hkproj's train.py computes it, and the batches (hkproj's encoder input, decoder input, masks and
    labels)."""
    import torch
    import torch.nn.functional as F

    from hf_minitf import MiniTFSeq2SeqConfig, MiniTFSeq2SeqForConditionalGeneration

    pairs = sentence_pairs(spec)
    tokenizer = pair_tokenizer(spec, pairs, fields)
    source_vocab, target_vocab = tokenizer.source_vocab_size, tokenizer.target_vocab_size
    pad, start, end = tokenizer.pad_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id
    smoothing = fields.get("label_smoothing", 0.0)
    limit = fields["max_position_embeddings"]
    if spec["case"] != "minitf":
        model = hkproj_module(spec).build_transformer(
            source_vocab,
            target_vocab,
            limit,
            limit,
            d_model=fields["hidden_size"],
            N=fields["num_hidden_layers"],
            h=fields["num_attention_heads"],
            dropout=fields.get("hidden_dropout", 0.1),
            d_ff=fields["intermediate_size"],
        )
    if spec["case"] == "original":

        def loss_of(batch):
            encoder_output = model.encode(batch["encoder_input"], batch["encoder_mask"])
            decoder_output = model.decode(
                encoder_output, batch["encoder_mask"], batch["decoder_input"], batch["decoder_mask"]
            )
            logits = model.project(decoder_output)
            return F.cross_entropy(
                logits.view(-1, target_vocab), batch["labels"].view(-1), ignore_index=pad, label_smoothing=smoothing
            )
    else:
        if spec["case"] == "converted":
            model = converted_translator(model, fields, tokenizer, spec.get("hkproj_norm", EARLY_NORM))
        else:
            config = MiniTFSeq2SeqConfig(
                **fields,
                src_vocab_size=source_vocab,
                vocab_size=target_vocab,
                pad_token_id=pad,
                bos_token_id=start,
                eos_token_id=end,
                decoder_start_token_id=start,
            )
            model = MiniTFSeq2SeqForConditionalGeneration(config)
        forward = compiled(model, spec)

        def loss_of(batch):  # the model makes `[SOS] y` of the labels and ignores their padding
            return forward(
                input_ids=batch["encoder_input"], attention_mask=batch["attention_mask"], labels=batch["labels"]
            ).loss

    def hkproj_batch(rows: list[tuple[str, str]]) -> dict:
        encoded = tokenizer(
            [row[0] for row in rows], text_target=[row[1] for row in rows], padding=True, return_tensors="pt"
        )
        labels = encoded["labels"]  # y [EOS] [PAD]...
        decoder_input = torch.cat(  # [SOS] y [PAD]...
            [torch.full_like(labels[:, :1], start), labels.masked_fill(labels == end, pad)[:, :-1]], dim=1
        )
        causal = torch.tril(torch.ones(1, labels.shape[1], labels.shape[1], dtype=torch.int))
        return dict(
            encoder_input=encoded["input_ids"],
            attention_mask=encoded["attention_mask"],
            encoder_mask=(encoded["input_ids"] != pad)[:, None, None].int(),
            decoder_input=decoder_input,
            decoder_mask=(decoder_input != pad)[:, None, None].int() & causal,
            labels=labels,
        )

    size = batch_size(spec)
    batches = [hkproj_batch(pairs[first : first + size]) for first in range(0, len(pairs) - size + 1, size)]
    return model, loss_of, batches


CASES = {"gpt": gpt_case, "encoder": encoder_case, "seq2seq": seq2seq_case}


def loop_steps(spec: dict):
    """The case's model (built after `torch.manual_seed(spec.get("seed", 0))`) in a bare loop: its batches, and a
    function taking one optimizer step on a batch that returns the step's seconds and its loss (a tensor)."""
    import torch

    torch.manual_seed(spec.get("seed", 0))
    family = family_of(spec)
    model, loss_of, data = CASES[spec["family"]](spec, spec["fields"])
    model.train()
    options = dict(eps=1e-9) if family.optimizer == "Adam" else {}
    optimizer = getattr(torch.optim, family.optimizer)(model.parameters(), lr=family.learning_rate, **options)

    def step(batch):
        started = time.perf_counter()
        loss = loss_of(batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return time.perf_counter() - started, loss.detach()

    return data, step


def bare_loop(spec: dict):
    """One run of `spec["steps"]` optimizer steps of a model in a bare loop; returns each step's seconds."""
    data, step = loop_steps(spec)
    position = 0

    def run() -> dict[str, list[float]]:
        nonlocal position
        seconds = []
        for _ in range(spec["steps"]):
            seconds.append(step(data[position % len(data)])[0])
            position += 1
        return {"seconds": seconds}

    for _ in range(WARMUP_STEPS):  # untimed: allocator, compilation
        run()
    return run


class StepClock:
    """A TrainerCallback (built lazily: transformers is imported in the worker) noting when each step ends."""

    def __new__(cls):
        from transformers import TrainerCallback

        class Clock(TrainerCallback):
            def __init__(self) -> None:
                self.ends: list[float] = []

            def on_step_end(self, args, state, control, **kwargs):
                self.ends.append(time.perf_counter())

        return Clock()


def command_data(spec: dict, folder: Path) -> Path:
    """The command's data: the GPT's text (repeated past what the steps read), else the pairs as a .tsv file."""
    if spec["family"] == "gpt":
        corpus = folder / "text.txt"
        tokens = 40 * batch_size(spec) * lengths(spec)[0] * (WARMUP_STEPS + spec["steps"])
        corpus.write_text(TEXT * (1 + tokens // len(TEXT)))
    else:
        corpus = folder / "pairs.tsv"
        corpus.write_text("".join(f"{first}\t{second}\n" for first, second in sentence_pairs(spec)))
    return corpus


def command_run(spec: dict):
    """One run: `minitf train FAMILY` for WARMUP_STEPS + `steps` steps; returns the timed steps' seconds (the
    Trainer's own loop from one step's end to the next)."""
    import hf_minitf.training.common as training_common
    from hf_minitf.cli import main as cli_main

    folder = Path(tempfile.mkdtemp(prefix="training-speed-"))
    corpus = command_data(spec, folder)
    run_trainer = training_common.run_trainer
    clock: list = []

    def timed_run_trainer(trainer, *args, **kwargs):
        clock.append(StepClock())
        trainer.add_callback(clock[-1])
        return run_trainer(trainer, *args, **kwargs)

    training_common.run_trainer = timed_run_trainer
    block = ["--block-size", str(lengths(spec)[0])] if spec["family"] == "gpt" else []
    arguments = [
        "train",
        spec["family"],
        "--data",
        str(corpus),
        "--out",
        str(folder / "model"),
        "--overwrite",
        "--preset",
        command_preset(spec),
        "--batch-size",
        str(batch_size(spec)),
        *block,
        "--max-steps",
        str(WARMUP_STEPS + spec["steps"] + 1),
        "--learning-rate",
        str(family_of(spec).learning_rate),
        "--eval-fraction",
        "0",
        "--no-progress",
        *spec.get("options", []),
    ]

    def run() -> dict[str, list[float]]:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as errors:
            status = cli_main(arguments)
        if status != 0:
            raise RuntimeError(f"minitf train {spec['family']} failed: {errors.getvalue()[-2000:]}")
        ends = clock[-1].ends[WARMUP_STEPS:]
        return {"seconds": [later - earlier for earlier, later in zip(ends, ends[1:])]}

    return run


def worker(spec: dict) -> None:
    if spec.get("code"):  # another checkout of the package, imported instead of this one
        sys.path.insert(0, spec["code"])
    if spec.get("threads"):
        import torch

        torch.set_num_threads(spec["threads"])
    run = command_run(spec) if spec["case"] == "command" else bare_loop(spec)
    if spec.get("code"):
        import hf_minitf

        assert hf_minitf.__file__.startswith(spec["code"]), hf_minitf.__file__
    serve(run, spec["pause"])


def specs(args) -> dict[str, dict]:
    family = FAMILIES[args.family]
    command = f"minitf train {args.family}"
    common = dict(
        family=args.family,
        fields=model_fields(args.family, args.smoke),
        smoke=args.smoke,
        steps=args.steps,
        pause=args.pause,
        threads=args.threads,
    )
    cases: dict[str, dict] = {}
    source = getattr(args, source_dest(family))
    if source:
        cases["original loop"] = dict(common, case="original", source=str(source))
    cases["minitf loop"] = dict(common, case="minitf")
    cases[command] = dict(common, case="command")
    if args.before:
        before = dict(common, code=str(args.before.resolve()))
        cases["minitf loop, before"] = dict(before, case="minitf")
        cases[f"{command}, before"] = dict(before, case="command")
    if args.compile:
        cases["minitf loop, torch.compile"] = dict(common, case="minitf", compile=True)
        cases[f"{command} --compile"] = dict(common, case="command", options=["--compile"])
    if args.bf16:
        cases[f"{command} --mixed-precision bf16"] = dict(common, case="command", options=["--mixed-precision", "bf16"])
    return cases


def source_dest(family: Family) -> str:
    return family.source_option.removeprefix("--").replace("-", "_")


def main(argv: list[str] | None = None) -> list[dict]:
    parser = interleaved_parser(__doc__.split("\n\n")[0], unit="case")
    parser.add_argument("--family", choices=FAMILIES, default="gpt", help="the family to train (default: gpt)")
    for name, family in FAMILIES.items():
        parser.add_argument(
            family.source_option, type=Path, help=f"{family.original}'s model file (the anchor of --family {name})"
        )
    parser.add_argument("--steps", type=int, default=None, help="timed optimizer steps per case and round (6)")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile'd training")
    parser.add_argument("--cases", nargs="+", help="time only these cases (by name; default: every one asked for)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads per process (default: torch's)")
    parser.add_argument(
        "--before", type=Path, help="another checkout of the package (an earlier commit's files): its cases beside"
    )
    parser.add_argument("--bf16", action="store_true", help="also time bf16 autocast training")
    args = parse_interleaved(parser, argv)
    args.steps = args.steps or (2 if args.smoke else 6)
    cases = {name: spec for name, spec in specs(args).items() if not args.cases or name in args.cases}
    timings = time_interleaved(SCRIPT, cases, args.rounds)
    reference = "original loop" if "original loop" in timings else "minitf loop"
    steps = {
        name: [step for result in timing.results for step in result["seconds"]] for name, timing in timings.items()
    }
    rounds = {
        name: [statistics.median(result["seconds"]) for result in timing.results] for name, timing in timings.items()
    }
    base = statistics.median(steps[reference])
    rows = [
        dict(
            case=name,
            family=args.family,
            ms_per_step=1000 * statistics.median(steps[name]),
            step_range_ms=[1000 * min(steps[name]), 1000 * max(steps[name])],
            round_medians_ms=[1000 * value for value in rounds[name]],
            ratio_to_reference=statistics.median(steps[name]) / base,
            reference=reference,
        )
        for name in timings
    ]
    shape = batch_shape(dict(family=args.family, smoke=args.smoke))
    print(f"{machine()}; {args.family}, {shape}, {args.rounds} rounds of {args.steps} steps")
    for row in rows:
        rounds_range = f"{min(row['round_medians_ms']):.0f}-{max(row['round_medians_ms']):.0f}"
        print(
            f"{row['case']:42s} {row['ms_per_step']:8.1f} ms/step  round medians {rounds_range} ms  "
            f"{row['ratio_to_reference']:.3f}x {reference}"
        )
    if args.json or not args.smoke:
        stem = "training-speed" if args.family == "gpt" else f"training-speed-{args.family}"
        write_json(args.json or dated_results_path(stem), dict(machine=machine(), rows=rows))
    return rows


if __name__ == "__main__":
    main_or_worker(lambda: main(sys.argv[1:]), worker)
