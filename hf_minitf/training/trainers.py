"""Train MiniTF models with the ecosystem's trainers: transformers' `Trainer` (gpt), sentence-transformers'
`SentenceTransformerTrainer` (encoder, as a sentence-embedding model) and `Seq2SeqTrainer` (seq2seq).

So checkpoints, resuming, evaluation, logging integrations, mixed precision and multi-process runs
(`torchrun`, `accelerate launch`, FSDP or DeepSpeed through `TrainingArguments`) behave as those trainers'
users expect. Each `train_*` function builds a model from a preset (`presets`), trains it and writes one
complete folder (weights, tokenizer, model card with held-out figures, `loss_curve.png`) atomically: the output
folder is checked before training and appears only once everything succeeded. The held-out figures beside the
Trainer's `eval_loss` (a GPT's perplexity and bits per token, an encoder's retrieval figures, a translator's exact
match) are measured by `hf_minitf.evaluation.held_out`, the code `minitf eval` runs. In a multi-process run every
process trains and only the main one writes. `model_id` (default: the folder) is the name the card's usage
snippets load the model by. `training.data` reads the files `minitf train` takes.

A GPT's training text goes through the tokenizer in chunks (`training.data.text_chunks`) into a file of token
ids (uint16, or uint32 for vocabularies over 65,536) that the blocks are memory-mapped views of, so memory stays
bounded by a chunk, not the corpus. A run whose loss becomes NaN or infinite stops with a `TrainingError`.

Refused before the work: an output or checkpoint folder that cannot be written or whose disk is too small for the
weights, a `--resume` whose checkpoint was started with another corpus, tokenizer or config (`runs.RUN_RECORD`, written
into every checkpoint), and corpora nothing can be learned from (a GPT text of pad tokens only, encoder pairs no
batch can hold two of). A full disk is named: the output, `--checkpoint-dir` or the temporary folder.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import pickle
import random
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar, cast

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import (
    DataCollatorForLanguageModeling,
    DataCollatorForSeq2Seq,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    ProgressCallback,
    Seq2SeqTrainer,
    Seq2SeqTrainingArguments,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    set_seed,
)
from transformers.trainer_callback import PrinterCallback
from transformers.trainer_utils import get_last_checkpoint

from hf_minitf.cards import update_model_card
from hf_minitf.catalog import Preset, get_preset
from hf_minitf.catalog.publishing import check_license
from hf_minitf.evaluation.held_out import encoder_held_out, gpt_held_out, seq2seq_held_out
from hf_minitf.modeling.configuration_minitf_encoder import MiniTFEncoderConfig
from hf_minitf.modeling.configuration_minitf_gpt import MiniTFGPTConfig
from hf_minitf.modeling.configuration_minitf_seq2seq import MiniTFSeq2SeqConfig
from hf_minitf.modeling.modeling_minitf_encoder import MiniTFEncoderModel
from hf_minitf.modeling.modeling_minitf_gpt import MiniTFGPTForCausalLM
from hf_minitf.modeling.modeling_minitf_loading import check_safetensors_files
from hf_minitf.modeling.modeling_minitf_seq2seq import MiniTFSeq2SeqForConditionalGeneration
from hf_minitf.modeling.tokenization_minitf_seq2seq import train_translation_tokenizers
from hf_minitf.safety.output_folders import (
    OutputFolder,
    output_folder,
)
from hf_minitf.safety.pickles import refused_pickle_message
from hf_minitf.sentence_transformers_folder import save_sentence_transformer
from hf_minitf.tokenization.chat_templates import (
    ChatTemplateChange,
    apply_chat_template_to_tokenizer,
    chat_template_spec,
    stop_at_end_of_turn,
    template_characters,
)
from hf_minitf.tokenization.gpt import CHAR_SPECIAL_TOKENS, char_tokenizer, train_bpe_tokenizer
from hf_minitf.tokenization.miniembed import train_wordlevel_tokenizer
from hf_minitf.training.data import CHUNK_CHARS, TextFile, TokenBlocks, encode_to_file, text_chunks
from hf_minitf.training.runs import (
    TEMPORARY_ADVICE,
    RecordRun,
    TextsDigest,
    check_checkpoint_dir,
    check_resume,
    checkpoint_folder_name,
    prepare_run,
    writing_into,
)
from hf_minitf.training.settings import TrainingError, TrainingResult, TrainSettings

logger = logging.getLogger(__name__)

LOSS_CURVE = "loss_curve.png"
BPE_SAMPLE_CHARS = 64 * 2**20
"""The byte-level BPE tokenizer is trained on at most this many characters from the start of the training text
(64 Mi; all of the text is tokenized with it): more adds little to a vocabulary and costs minutes per 100 MB."""


class LossOnBarCallback(ProgressCallback):
    """The trainer's own progress bars, showing the latest loss on the bar instead of printing each log."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and self.training_bar is not None and logs and "loss" in logs:
            self.training_bar.set_postfix(loss=f"{logs['loss']:.3f}", refresh=False)


def _distributed_without_gpu() -> bool:
    """Several processes (torchrun, accelerate launch) and no CUDA or XPU device: the Trainer then runs
    DistributedDataParallel over gloo only with `use_cpu=True` (else every process trains alone)."""
    has_gpu = torch.cuda.is_available() or (hasattr(torch, "xpu") and torch.xpu.is_available())
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 and not has_gpu


Arguments = TypeVar("Arguments", bound=TrainingArguments)


def _training_arguments(
    settings: TrainSettings,
    work_dir: Path,
    has_eval: bool,
    arguments_class: type[Arguments],
    **extra,
) -> Arguments:
    saving = settings.checkpoint_dir is not None
    evaluate_every = settings.eval_steps if has_eval and settings.eval_steps else None
    arguments = dict(
        output_dir=str(work_dir),
        num_train_epochs=settings.epochs,
        max_steps=settings.max_steps,
        per_device_train_batch_size=settings.batch_size,
        per_device_eval_batch_size=settings.batch_size,
        learning_rate=settings.learning_rate,
        warmup_steps=settings.warmup,
        weight_decay=settings.weight_decay,
        lr_scheduler_type="cosine",
        seed=settings.seed,
        data_seed=settings.seed,
        logging_steps=settings.logging_steps,
        logging_first_step=True,
        eval_strategy="steps" if evaluate_every else "no",
        eval_steps=evaluate_every,
        save_strategy="steps" if saving else "no",
        save_steps=settings.save_steps,
        save_total_limit=2 if saving else None,
        fp16=settings.mixed_precision == "fp16",
        bf16=settings.mixed_precision == "bf16",
        report_to=settings.report_to,
        logging_nan_inf_filter=False,  # a NaN/inf loss must reach the logs (_StopOnNonFiniteLoss), not be hidden
        disable_tqdm=not settings.progress,
        dataloader_pin_memory=torch.cuda.is_available(),
        use_cpu=_distributed_without_gpu(),
        ddp_find_unused_parameters=False,
        **extra,
    )
    arguments.update(settings.extra)
    return arguments_class(**arguments)


class _StopOnNonFiniteLoss(TrainerCallback):
    """Stops training with a TrainingError when a logged loss is NaN or infinite (the weights are then lost);
    `cause` is a likelier cause than the learning rate, when the corpus shows one."""

    def __init__(self, cause: str | None = None) -> None:
        self.cause = cause

    def on_log(self, args, state, control, logs=None, **kwargs):
        for key in ("loss", "train_loss", "eval_loss"):
            value = (logs or {}).get(key)
            if isinstance(value, (int, float)) and not math.isfinite(value):
                mixed = args.fp16 or args.bf16
                raise TrainingError(
                    f"the {'held-out' if key == 'eval_loss' else 'training'} loss became {value} at step "
                    f"{state.global_step} (logged every {args.logging_steps} steps), so the model diverged and "
                    "nothing was written; "
                    + (f"{self.cause}; else " if self.cause else "")
                    + f"try a lower --learning-rate than {args.learning_rate:g}"
                    + (" or --mixed-precision no" if mixed else " or some --warmup")
                )


def _bars_as_settings_say(train: Callable[..., TrainingResult]) -> Callable[..., TrainingResult]:
    """A trainer function whose `settings.progress=False` also hides the bars of the libraries it calls (weights
    saved and loaded by transformers, datasets' maps), as `--no-progress` promises."""

    @functools.wraps(train)
    def quiet_when_asked(*args: Any, **kwargs: Any) -> TrainingResult:
        settings = kwargs.get("settings")
        if settings is None or settings.progress:
            return train(*args, **kwargs)
        import datasets
        from transformers.utils import logging as transformers_logging

        shown = transformers_logging.is_progress_bar_enabled(), datasets.is_progress_bar_enabled()
        transformers_logging.disable_progress_bar()
        datasets.disable_progress_bars()
        try:
            return train(*args, **kwargs)
        finally:
            if shown[0]:
                transformers_logging.enable_progress_bar()
            if shown[1]:
                datasets.enable_progress_bars()

    return quiet_when_asked


def _run_trainer(
    trainer: Trainer,
    settings: TrainSettings,
    has_eval: bool,
    model: PreTrainedModel,
    record: dict[str, Any] | None,
    loss_cause: str | None = None,
) -> dict[str, float]:
    """Check the checkpoint to resume from (against the run's `record`), train, then evaluate on the held-out set;
    returns the evaluation figures. `loss_cause` is what a NaN loss most likely comes from, when the corpus shows it.

    The Trainer sets `model.config.use_cache` to its own `use_cache` argument (False) for training; the config
    gets back its class's value (what the architecture supports), so the saved `config.json` and a bare forward
    keep the cache, and a config without the field (the encoder's) is left without it."""
    if settings.progress and settings.logs_on_bar:
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(LossOnBarCallback())
    elif not settings.progress:
        trainer.remove_callback(PrinterCallback)
    trainer.add_callback(_StopOnNonFiniteLoss(loss_cause))
    if record is not None:
        trainer.add_callback(RecordRun(record))
    resume = None
    if settings.resume:
        checkpoints = settings.checkpoint_dir
        resume = (
            get_last_checkpoint(str(checkpoints)) if checkpoints is not None and Path(checkpoints).is_dir() else None
        )
        if resume is None:
            raise TrainingError(f"--resume: {settings.checkpoint_dir} holds no checkpoint-* folder to resume from")
        try:  # the checkpoint's weights, checked from their headers before the trainer reads them
            check_safetensors_files(Path(resume))
        except ValueError as error:
            raise TrainingError(f"--resume: {error}; resume from an earlier checkpoint-* or start again") from None
        check_resume(Path(resume), record)
    if settings.max_steps == -1 and settings.warmup >= 1:  # warmup in steps: known against max_steps already
        batches = len(trainer.get_train_dataloader())
        total = math.ceil(batches * settings.epochs / trainer.args.gradient_accumulation_steps)
        if settings.warmup > total:
            raise TrainingError(
                f"warmup={settings.warmup:g} steps is more than this run's {total} steps "
                f"({settings.epochs:g} epochs of {batches} batches): the learning rate would never "
                "reach its peak; give fewer warmup steps, a fraction below 1, or more epochs"
            )
    work_dir = Path(str(trainer.args.output_dir))
    try:
        with writing_into(work_dir, *checkpoint_folder_name(settings, work_dir)):
            trainer.train(resume_from_checkpoint=resume)
    except pickle.UnpicklingError as error:  # torch's weights-only unpickler refused a file of the checkpoint
        raise TrainingError(f"--resume: {refused_pickle_message(error, [resume])}") from None
    results = trainer.evaluate() if has_eval else {}
    config_class = type(model.config)
    if hasattr(config_class, "use_cache"):
        model.config.use_cache = config_class.use_cache
    else:
        vars(model.config).pop("use_cache", None)
    return {
        key: float(value)
        for key, value in results.items()
        if key.startswith("eval_") and isinstance(value, (int, float)) and not key.endswith(("runtime", "per_second"))
    }


class _WorkDir:
    """The trainer's output folder: `settings.checkpoint_dir` when given (kept, to resume), else a temporary one."""

    def __init__(self, settings: TrainSettings) -> None:
        self._temporary = None if settings.checkpoint_dir else tempfile.TemporaryDirectory(prefix="minitf-train-")
        self.path = Path(settings.checkpoint_dir or cast(tempfile.TemporaryDirectory, self._temporary).name)

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *exc_info) -> None:
        if self._temporary is not None:
            self._temporary.cleanup()


def plot_loss_curve(log_history: Sequence[dict], path: str | Path, title: str) -> Path | None:
    """Draw training (and evaluation) loss against step into a PNG; None when matplotlib is not installed."""
    try:
        from matplotlib.figure import Figure  # the object API: no pyplot, no global backend change
    except ImportError:
        return None
    train = [(entry["step"], entry["loss"]) for entry in log_history if "loss" in entry]
    evaluation = [(entry["step"], entry["eval_loss"]) for entry in log_history if "eval_loss" in entry]
    figure = Figure(figsize=(6, 3.5), dpi=100)
    axes = figure.subplots()
    if train:
        axes.plot(*zip(*train), label="training loss")
    if evaluation:
        axes.plot(*zip(*evaluation), "o-", label="held-out loss")
    axes.set_xlabel("step")
    axes.set_ylabel("loss")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, format="png")
    return Path(path)


def _describe_losses(log_history: Sequence[dict]) -> str:
    losses = [entry["loss"] for entry in log_history if "loss" in entry]
    steps = max((entry.get("step", 0) for entry in log_history), default=0)
    if not losses:
        return ""
    return f"Trained for {steps} steps; training loss {losses[0]:.3f} at the start, {losses[-1]:.3f} at the end."


def _write_folder(
    trainer: Trainer,
    target: OutputFolder | None,
    save,
    result: TrainingResult,
    title: str,
    dataset_name: str | None,
    extra_markdown: str | None,
    model_id: str | None,
    license: str | None = None,
) -> Path | None:
    """On the main process, write the folder atomically: `save(folder)`, the loss curve, then the card with the
    held-out figures (its snippets load `model_id`, default: the output folder; its license: `license`, default
    `DEFAULT_LICENSE`). Every process waits for it, so none ends, taking its end of the process group down, while
    the main process still writes (gloo then aborts the process left waiting)."""
    if target is None or not trainer.is_world_process_zero():
        trainer.accelerator.wait_for_everyone()
        return None
    with target.write() as work:
        save(work)
        image = plot_loss_curve(result.log_history, work / LOSS_CURVE, title)
        notes = "\n\n".join(text for text in (_describe_losses(result.log_history), extra_markdown) if text)
        update_model_card(
            work,
            eval_results=result.eval_results or None,
            dataset_name=dataset_name,
            image=LOSS_CURVE if image else None,
            extra_markdown=notes or None,
            model_id=model_id or str(target),
            license=license,
        )
    trainer.accelerator.wait_for_everyone()
    return target.path


def end_distributed_training() -> None:
    """Take down the process group a multi-process run (torchrun, accelerate launch) set up, as a script's last
    step: left to interpreter exit, gloo's threads can abort a process (`terminate called without an active
    exception`)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def _config_fields(preset: Preset, overrides: dict[str, Any] | None) -> dict[str, Any]:
    fields = dict(preset.config)
    fields.update(overrides or {})
    return fields


def _held_out_indices(total: int, fraction: float, seed: int, limit: int = 1000) -> list[int]:
    """The sorted indices of a random `fraction` (at most `limit`) of `total` items held out for evaluation;
    none for tiny data. Drawn without listing all `total` indices."""
    if not 0 <= fraction < 1:
        raise TrainingError(f"the held-out fraction must lie in [0, 1), got {fraction}")
    return sorted(random.Random(seed).sample(range(total), min(limit, int(total * fraction))))


class _Start(NamedTuple):
    """What every trainer checks and settles before its data: the settings, the license (refused before training,
    not after), the preset, the output folder (checked before any work) and the config fields."""

    family: str
    settings: TrainSettings
    license: str | None
    preset: Preset
    target: OutputFolder | None
    fields: dict[str, Any]


def _start(
    family: str,
    preset: str,
    settings: TrainSettings | None,
    license: str | None,
    out: str | Path | OutputFolder | None,
    overwrite: bool,
    config_overrides: dict[str, Any] | None,
) -> _Start:
    """The checks every trainer makes first (see `_Start`)."""
    settings = settings or TrainSettings()
    license = check_license(license) if license is not None else None
    chosen = get_preset(family, preset)
    target = output_folder(out, overwrite) if out is not None else None
    check_checkpoint_dir(settings)
    return _Start(family, settings, license, chosen, target, _config_fields(chosen, config_overrides))


def _split_held_out(items: list, fraction: float, seed: int) -> tuple[list, list]:
    """`items` without and with the `_held_out_indices`."""
    held = set(_held_out_indices(len(items), fraction, seed))
    return [item for index, item in enumerate(items) if index not in held], [items[index] for index in sorted(held)]


class _GPTCorpus:
    """GPT training text as documents of chunks, read again for each pass: a `TextFile` (with a progress
    bar in bytes) or texts in memory."""

    def __init__(self, texts: str | Sequence[str] | TextFile, chunk_chars: int, progress: bool) -> None:
        self.file: TextFile | None
        self.texts: list[str] | None
        if isinstance(texts, TextFile):
            self.file, self.texts = texts, None
        else:
            self.file, self.texts = None, [texts] if isinstance(texts, str) else list(texts)
        self.chunk_chars, self.progress = chunk_chars, progress
        self.has_content = self.texts is not None and any(text.strip() for text in self.texts)

    def check_content(self) -> None:
        """Refuse a corpus that, as far as read, is empty or white space only."""
        if not self.has_content:
            raise TrainingError(f"{self.where()} is empty (or only white space); give a text file with some content")

    def _noting_content(self, chunks: Iterable[str]) -> Iterator[str]:
        for chunk in chunks:
            self.has_content = self.has_content or not (chunk.isspace() or not chunk)
            yield chunk

    def documents(self, description: str, digest: TextsDigest | None = None) -> Iterator[Iterator[str]]:
        """Each document as chunks (`digest`, when given, hashes them as they pass)."""
        passing = digest.text if digest is not None else iter
        if self.texts is not None:
            yield from (passing(text_chunks(text, self.chunk_chars)) for text in self.texts)
            return
        file = cast(TextFile, self.file)  # without texts in memory, the corpus is a file
        with tqdm(
            total=file.size, unit="B", unit_scale=True, desc=description, disable=not self.progress, leave=False
        ) as bar:

            def report(position: int) -> None:
                bar.update(position - bar.n)

            yield from (
                passing(self._noting_content(document)) for document in file.documents(self.chunk_chars, report)
            )

    def chunks(self, description: str) -> Iterator[str]:
        for document in self.documents(description):
            yield from document

    def whole_texts(self, digest: TextsDigest | None = None) -> list[str]:
        if self.texts is not None:
            if digest is not None:
                digest.add(self.texts)
            return self.texts
        return ["".join(document) for document in self.documents("reading", digest)]

    def where(self) -> str:
        """The corpus as messages name it."""
        return str(self.file.path) if self.file else "the GPT training text"


@_bars_as_settings_say
def train_gpt(
    texts: str | Sequence[str] | TextFile,
    out: str | Path | OutputFolder | None,
    *,
    preset: str = "tiny",
    settings: TrainSettings | None = None,
    tokenizer: str | None = None,
    vocab_size: int | None = None,
    block_size: int | None = None,
    pack: bool = True,
    eval_texts: Sequence[str] | None = None,
    eval_fraction: float = 0.05,
    config_overrides: dict[str, Any] | None = None,
    overwrite: bool = False,
    dataset_name: str | None = None,
    extra_markdown: str | None = None,
    model_id: str | None = None,
    license: str | None = None,
    chunk_chars: int = CHUNK_CHARS,
    bpe_sample_chars: int = BPE_SAMPLE_CHARS,
    chat_template: str | Path | None = None,
) -> TrainingResult:
    """Train a GPT on `texts` (one text, documents joined with the EOS token, or a `training.data.TextFile`
    read lazily) and write it to `out`.

    The tokenizer (`"char"` or byte-level `"bpe"`, default: the preset's) is trained on the training texts
    (BPE: on their first `bpe_sample_chars` characters); they are packed (joined, each ended by EOS) and cut
    into blocks of `block_size` tokens (default: the context length), tokenized `chunk_chars` characters at a
    time into a memory-mapped file of ids. With `pack=False` each text is one example (cut at `block_size`,
    batches padded), so that every example starts at position 0, as for line-per-example data (the texts are
    then held in memory). Held out: `eval_texts`, or an `eval_fraction` of the blocks. `out=None` trains
    without writing (the result holds the model). `chat_template` (a name of `catalog.chat_templates` or a Jinja
    file) gives the tokenizer a chat template (`tokenization.chat_templates.set_chat_template`); a character
    vocabulary then also holds the characters the template writes.
    """
    _, settings, license, chosen, target, fields = _start(
        "gpt", preset, settings, license, out, overwrite, config_overrides
    )
    corpus = _GPTCorpus(texts, chunk_chars, settings.progress)
    digest = TextsDigest() if settings.checkpoint_dir is not None else None
    if corpus.texts is not None:
        corpus.check_content()
    kind = tokenizer or chosen.tokenizer
    context = fields["max_position_embeddings"]
    block_size = block_size or context
    if not 2 <= block_size <= context:
        raise TrainingError(f"block size must lie in [2, {context}] (the preset's context), got {block_size}")
    if kind not in ("char", "bpe"):
        raise TrainingError(f"tokenizer must be char or bpe, got {kind!r}")
    template = chat_template_spec(chat_template) if chat_template is not None else None
    template_alphabet = template_characters(template, CHAR_SPECIAL_TOKENS) if template and kind == "char" else ()
    with tempfile.TemporaryDirectory(prefix="minitf-tokens-") as token_dir, _WorkDir(settings) as work_dir:
        built = _gpt_tokenizer(
            corpus, kind, vocab_size or chosen.vocab_size or 8192, bpe_sample_chars, context, template_alphabet
        )
        chat = apply_chat_template_to_tokenizer(built, template) if template is not None else None
        train_blocks: TokenBlocks | list[dict[str, list[int]]]
        eval_blocks: TokenBlocks | list[dict[str, list[int]]] | None
        if pack:
            with writing_into(Path(token_dir), f"the temporary folder {token_dir}", TEMPORARY_ADVICE):
                ids = encode_to_file(built, corpus.documents("tokenizing", digest), Path(token_dir) / "train.ids")
                corpus.check_content()
                loss_cause = _pad_text_cause(ids, built, corpus.where())
                eval_ids = (
                    encode_to_file(
                        built, (text_chunks(text, chunk_chars) for text in eval_texts), Path(token_dir) / "eval.ids"
                    )
                    if eval_texts is not None
                    else None
                )
            if eval_ids is not None:
                train_blocks, eval_blocks = TokenBlocks(ids, block_size), TokenBlocks(eval_ids, block_size)
            else:
                held = _held_out_indices(len(ids) // block_size, eval_fraction, settings.seed)
                train_blocks, eval_blocks = (
                    TokenBlocks(ids, block_size, excluded=held),
                    TokenBlocks(ids, block_size, chosen=held),
                )
        else:

            def examples(parts: Sequence[str]) -> list[dict[str, list[int]]]:
                return [
                    {
                        "input_ids": (
                            built(text, add_special_tokens=False, verbose=False).input_ids + [built.eos_token_id]
                        )[:block_size]
                    }
                    for text in parts
                ]

            blocks = examples(corpus.whole_texts(digest))
            corpus.check_content()
            loss_cause = _pad_text_cause(blocks, built, corpus.where())
            if eval_texts is not None:
                train_blocks, eval_blocks = blocks, examples(eval_texts)
            else:
                train_blocks, eval_blocks = _split_held_out(blocks, eval_fraction, settings.seed)
        if not len(train_blocks):
            raise TrainingError(
                f"the training text gives fewer than {block_size} tokens; give more text or a smaller --block-size"
            )
        eval_blocks = eval_blocks if len(eval_blocks) else None
        set_seed(settings.seed)
        config = MiniTFGPTConfig(
            vocab_size=len(built),
            pad_token_id=built.pad_token_id,
            bos_token_id=built.bos_token_id,
            eos_token_id=built.eos_token_id,
            **fields,
        )
        model = MiniTFGPTForCausalLM(config)
        if chat is not None:
            stop_at_end_of_turn(model.generation_config, chat)
            extra_markdown = "\n\n".join(filter(None, (extra_markdown, _chat_note(chat))))
        record = prepare_run(model, built, target, settings, digest.hexdigest() if digest else "", dataset_name)
        trainer = Trainer(
            model=model,
            args=_training_arguments(settings, work_dir, eval_blocks is not None, TrainingArguments),
            train_dataset=train_blocks,
            eval_dataset=eval_blocks,
            processing_class=built,
            data_collator=DataCollatorForLanguageModeling(built, mlm=False),
        )
        eval_results = _run_trainer(trainer, settings, eval_blocks is not None, model, record, loss_cause)
        if eval_blocks is not None:
            eval_results |= gpt_held_out(model, cast(Iterable[dict[str, list[int]]], eval_blocks))
        result = TrainingResult(None, model.eval(), built, trainer.state.log_history, eval_results)

        def save(folder: Path) -> None:
            model.save_pretrained(folder)
            built.save_pretrained(folder)

        result.folder = _write_folder(
            trainer, target, save, result, f"MiniTF GPT ({preset})", dataset_name, extra_markdown, model_id, license
        )
    return result


def _token_counts(ids: np.ndarray | Sequence[dict[str, list[int]]], pad: int, eos: int) -> tuple[int, int]:
    """How many of the ids (an id array, read 16 Mi at a time, or examples) are the pad token, and how many are
    neither it nor EOS."""
    step = 1 << 24
    parts = (
        (ids[start : start + step] for start in range(0, len(ids), step))
        if isinstance(ids, np.ndarray)
        else (np.asarray(example["input_ids"]) for example in ids)
    )
    pads = others = 0
    for part in parts:
        pads += int(np.count_nonzero(part == pad))
        others += int(np.count_nonzero((part != pad) & (part != eos)))
    return pads, others


def _pad_text_cause(
    ids: np.ndarray | Sequence[dict[str, list[int]]], tokenizer: PreTrainedTokenizerBase, where: str
) -> str | None:
    """Refuse a GPT corpus of nothing but the pad token written as text: the tokenizer reads it as padding, which the
    loss leaves out, so there is nothing to learn (and the loss is NaN). A corpus holding some is warned about, and
    what a NaN loss would then come from is returned."""
    pads, others = _token_counts(ids, tokenizer.pad_token_id, tokenizer.eos_token_id)
    if not pads:
        return None
    written = (
        f"the pad token {tokenizer.pad_token} written as text ({pads:,} times), which the tokenizer reads as padding "
        "and the loss leaves out"
    )
    if not others:
        raise TrainingError(
            f"{where} is only {written}: there is nothing to learn from (the loss would be NaN); give text that is "
            "more than the pad token"
        )
    note = f"{where} holds {written}"
    logger.warning("%s; remove it from the text unless that is meant", note)
    return f"{note}: a batch of nothing else has no loss, so remove it from the text"


def _chat_note(chat: ChatTemplateChange) -> str:
    """The card's line on the chat template a GPT was trained with."""
    added = (
        f"; {', '.join(f'`{token}`' for token in chat.added_tokens)} added as special tokens"
        if chat.added_tokens
        else ""
    )
    return (
        f"Chat template: {chat.name}{added}. An assistant turn ends with `{chat.end_of_turn}` (id "
        f"{chat.end_of_turn_id}), where generation stops; `tokenizer.apply_chat_template(messages, "
        "add_generation_prompt=True)` writes a prompt."
    )


def _gpt_tokenizer(
    corpus: _GPTCorpus,
    kind: str,
    vocab_size: int,
    bpe_sample_chars: int,
    context: int,
    extra_characters: Iterable[str] = (),
) -> PreTrainedTokenizerBase:
    """A character tokenizer of every character of the corpus (one pass) and `extra_characters`, or a byte-level
    BPE trained on its first `bpe_sample_chars` characters."""
    if kind == "char":
        alphabet: set[str] = set(extra_characters)
        for chunk in corpus.chunks("reading the characters"):
            alphabet.update(chunk)
        corpus.check_content()
        return char_tokenizer(sorted(alphabet), model_max_length=context)

    def sample() -> Iterator[str]:
        left = bpe_sample_chars
        for chunk in corpus.chunks("training the BPE tokenizer"):
            yield chunk[:left]
            left -= len(chunk)
            if left <= 0:
                return

    return train_bpe_tokenizer(sample(), vocab_size=vocab_size, model_max_length=context)


def _held_out_pairs(
    prepared: _Start, pairs: Sequence[Sequence[str]], eval_pairs: Sequence[tuple[str, str]] | None, fraction: float
) -> tuple[list[tuple[str, str]], Sequence[tuple[str, str]], str]:
    """The training pairs (checked), the held-out pairs (`eval_pairs`, else a `fraction` of them) and the digest of
    every text (what a checkpoint folder is resumed against; empty without one)."""
    checked = _check_pairs(pairs, prepared.family)
    texts = (text for pair in checked for text in pair)
    corpus = TextsDigest().add(texts).hexdigest() if prepared.settings.checkpoint_dir else ""
    if eval_pairs is None:
        checked, eval_pairs = _split_held_out(checked, fraction, prepared.settings.seed)
    return checked, eval_pairs, corpus


def _check_pairs(pairs: Sequence[Sequence[str]], what: str) -> list[tuple[str, str]]:
    pairs = [tuple(pair) for pair in pairs]
    bad = next(
        (
            index
            for index, pair in enumerate(pairs)
            if len(pair) != 2 or not all(isinstance(text, str) and text.strip() for text in pair)
        ),
        None,
    )
    if bad is not None:
        raise TrainingError(f"{what} pair {bad} is not two non-empty texts: {pairs[bad]!r}")
    if len(pairs) < 2:
        raise TrainingError(f"{what} training needs at least 2 pairs, got {len(pairs)}")
    return cast(list[tuple[str, str]], pairs)  # each checked to be two texts


def _check_in_batch_pairs(pairs: Sequence[tuple[str, str]]) -> None:
    """Refuse encoder training pairs no batch can hold two of, and warn when repeats make most of them.

    The loss scores each anchor against the positives of the other pairs in its batch, and the batch sampler never
    puts a text in a batch twice; with no two pairs free of a shared text every batch holds one pair, whose loss
    is 0 whatever the weights (40 copies of one pair trained at a constant loss of 0.000). A pair has a partner
    when fewer than all distinct pairs hold one of its texts."""
    distinct = set(pairs)
    holding = Counter(text for pair in distinct for text in set(pair))
    both = Counter(frozenset(pair) for pair in distinct)

    def touching(pair: tuple[str, str]) -> int:
        texts = frozenset(pair)
        return sum(holding[text] for text in texts) - (both[texts] if len(texts) == 2 else 0)

    if all(touching(pair) == len(distinct) for pair in distinct):
        what = (
            f"{len(pairs)} copies of one pair"
            if len(distinct) == 1
            else f"{len(pairs)} pairs ({len(distinct)} distinct) that all share a text with each other"
        )
        raise TrainingError(
            f"the encoder training pairs are {what}: the loss scores each anchor against the other pairs' positives "
            "in its batch, and a batch never holds a text twice, so every batch would hold one pair and the loss "
            "would stay 0; give at least 2 pairs with no text in common (many more for a useful model)"
        )
    if 2 * len(distinct) < len(pairs):
        logger.warning(
            "%d of the %d encoder training pairs repeat another pair: a batch never holds a text twice, so the "
            "repeats end up in small batches, with few in-batch negatives",
            len(pairs) - len(distinct),
            len(pairs),
        )


@_bars_as_settings_say
def train_encoder(
    pairs: Sequence[tuple[str, str]],
    out: str | Path | OutputFolder | None,
    *,
    preset: str = "tiny",
    settings: TrainSettings | None = None,
    vocab_size: int | None = None,
    eval_pairs: Sequence[tuple[str, str]] | None = None,
    eval_fraction: float = 0.05,
    config_overrides: dict[str, Any] | None = None,
    overwrite: bool = False,
    dataset_name: str | None = None,
    extra_markdown: str | None = None,
    model_id: str | None = None,
    license: str | None = None,
) -> TrainingResult:
    """Train an encoder as a sentence-embedding model on (anchor, positive) pairs with in-batch negatives and
    write a SentenceTransformer folder to `out`.

    sentence-transformers' trainer with `MultipleNegativesRankingLoss` (each anchor against every positive in
    its batch), batches without duplicate texts. The word-level tokenizer is trained on the training pairs.
    """
    from datasets import Dataset
    from sentence_transformers import (  # type: ignore[attr-defined]  # `losses`: sentence-transformers 6 keeps it as an alias
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
        losses,
    )
    from sentence_transformers.training_args import BatchSamplers

    class _TrainerWithoutItsCard(SentenceTransformerTrainer):
        def add_model_card_callback(self, default_args_dict: dict[str, Any]) -> None:
            """No card data of sentence-transformers': the folder's card is this package's (`_write_folder`), and
            collecting it drew examples from the data under a progress bar that --no-progress could not hide."""

    prepared = _start("encoder", preset, settings, license, out, overwrite, config_overrides)
    _, settings, license, chosen, target, fields = prepared
    pairs, eval_pairs, corpus = _held_out_pairs(prepared, pairs, eval_pairs, eval_fraction)
    _check_in_batch_pairs(pairs)
    texts = [text for pair in pairs for text in pair]
    tokenizer = train_wordlevel_tokenizer(
        texts,
        vocab_size=cast(int, vocab_size or chosen.vocab_size),
        min_frequency=1,
        max_length=fields["max_position_embeddings"],
    )
    set_seed(settings.seed)
    model = MiniTFEncoderModel(
        MiniTFEncoderConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, **fields)
    )
    record = prepare_run(model, tokenizer, target, settings, corpus, dataset_name)

    def as_dataset(rows: Sequence[tuple[str, str]]) -> Dataset:
        return Dataset.from_dict({"anchor": [row[0] for row in rows], "positive": [row[1] for row in rows]})

    with _WorkDir(settings) as work_dir, tempfile.TemporaryDirectory(prefix="minitf-encoder-") as start:
        with writing_into(Path(start), f"the temporary folder {start}", TEMPORARY_ADVICE):
            embedder = SentenceTransformer(save_sentence_transformer(model, tokenizer, start))
        arguments = _training_arguments(
            settings,
            work_dir,
            bool(eval_pairs),
            SentenceTransformerTrainingArguments,
            batch_sampler=BatchSamplers.NO_DUPLICATES,
        )
        trainer = _TrainerWithoutItsCard(
            model=embedder,
            args=arguments,
            train_dataset=as_dataset(pairs),
            eval_dataset=as_dataset(eval_pairs) if eval_pairs else None,
            loss=losses.MultipleNegativesRankingLoss(embedder),
        )
        eval_results = _run_trainer(trainer, settings, bool(eval_pairs), model, record)
        eval_results |= encoder_held_out(embedder.eval(), eval_pairs or [])
        trained = cast(MiniTFEncoderModel, embedder[0].auto_model).eval()  # the Transformer module holds the encoder
        result = TrainingResult(None, trained, tokenizer, trainer.state.log_history, eval_results)
        result.folder = _write_folder(
            trainer,
            target,
            lambda folder: save_sentence_transformer(trained, tokenizer, folder),
            result,
            f"MiniTF encoder ({preset})",
            dataset_name,
            extra_markdown,
            model_id,
            license,
        )
    return result


@_bars_as_settings_say
def train_seq2seq(
    pairs: Sequence[tuple[str, str]],
    out: str | Path | OutputFolder | None,
    *,
    preset: str = "tiny",
    settings: TrainSettings | None = None,
    eval_pairs: Sequence[tuple[str, str]] | None = None,
    eval_fraction: float = 0.05,
    config_overrides: dict[str, Any] | None = None,
    overwrite: bool = False,
    dataset_name: str | None = None,
    extra_markdown: str | None = None,
    model_id: str | None = None,
    license: str | None = None,
) -> TrainingResult:
    """Train a seq2seq (translation) model on (source, target) pairs with `Seq2SeqTrainer` and write it to `out`.

    Source and target word-level vocabularies are trained on the training pairs (words seen once count);
    pairs longer than the preset's positions are truncated.
    """
    prepared = _start("seq2seq", preset, settings, license, out, overwrite, config_overrides)
    _, settings, license, _, target, fields = prepared
    pairs, eval_pairs, corpus = _held_out_pairs(prepared, pairs, eval_pairs, eval_fraction)
    limit = fields["max_position_embeddings"]
    tokenizer = train_translation_tokenizers(pairs, min_frequency=1, model_max_length=limit)
    set_seed(settings.seed)
    config = MiniTFSeq2SeqConfig(
        src_vocab_size=tokenizer.source_vocab_size,
        vocab_size=tokenizer.target_vocab_size,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.bos_token_id,
        **fields,
    )
    model = MiniTFSeq2SeqForConditionalGeneration(config)
    record = prepare_run(model, tokenizer, target, settings, corpus, dataset_name)

    def encode(rows: Sequence[tuple[str, str]]) -> list[dict[str, list[int]]]:
        batch = tokenizer(
            [row[0] for row in rows], text_target=[row[1] for row in rows], truncation=True, max_length=limit
        )
        return [
            {"input_ids": ids, "attention_mask": mask, "labels": labels}
            for ids, mask, labels in zip(batch["input_ids"], batch["attention_mask"], batch["labels"])
        ]

    eval_rows = encode(eval_pairs) if eval_pairs else []
    with _WorkDir(settings) as work_dir:
        trainer = Seq2SeqTrainer(
            model=model,
            args=_training_arguments(settings, work_dir, bool(eval_rows), Seq2SeqTrainingArguments),
            train_dataset=encode(pairs),
            eval_dataset=eval_rows or None,  # type: ignore[arg-type]  # a list of examples is a map-style dataset
            processing_class=tokenizer,
            data_collator=DataCollatorForSeq2Seq(tokenizer, model=model),
        )
        eval_results = _run_trainer(trainer, settings, bool(eval_rows), model, record)
        eval_results |= seq2seq_held_out(model, tokenizer, eval_pairs or [])
        result = TrainingResult(None, model.eval(), tokenizer, trainer.state.log_history, eval_results)

        def save(folder: Path) -> None:
            model.save_pretrained(folder)
            tokenizer.save_pretrained(folder)

        result.folder = _write_folder(
            trainer, target, save, result, f"MiniTF seq2seq ({preset})", dataset_name, extra_markdown, model_id, license
        )
    return result


__all__ = [
    "LOSS_CURVE",
    "TrainSettings",
    "TrainingError",
    "TrainingResult",
    "end_distributed_training",
    "plot_loss_curve",
    "train_encoder",
    "train_gpt",
    "train_seq2seq",
]
