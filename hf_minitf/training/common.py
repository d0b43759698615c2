"""What the three trainers share: the `TrainingArguments` they build, the run around the ecosystem's trainer (progress
bars, a stop on a non-finite loss, checkpoints, resuming), the held-out split, and the folder written at the end
(weights, tokenizer, card with held-out figures, `loss_curve.png`)."""

from __future__ import annotations

import functools
import logging
import math
import os
import pickle
import random
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar, cast

import torch
from transformers import (
    PreTrainedModel,
    ProgressCallback,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)
from transformers.trainer_callback import PrinterCallback
from transformers.trainer_utils import get_last_checkpoint

from hf_minitf.cards import TrainingData, local_model_id, update_model_card
from hf_minitf.catalog import Preset, get_preset
from hf_minitf.catalog.publishing import NO_LICENSE_WARNING, check_language, check_license
from hf_minitf.safety.output_folders import (
    OutputFolder,
    output_folder,
)
from hf_minitf.safety.pickles import refused_pickle_message
from hf_minitf.safety.weights import check_safetensors_files
from hf_minitf.training.console import LogLines, LossOnBar, TimeEstimate
from hf_minitf.training.interrupts import StopOnSignal, stops_on_signals, what_ctrl_c_does
from hf_minitf.training.runs import (
    RecordRun,
    TextsDigest,
    check_checkpoint_dir,
    check_resume,
    checkpoint_folder_name,
    writing_into,
)
from hf_minitf.training.settings import TrainingError, TrainingResult, TrainSettings

logger = logging.getLogger(__name__)

LOSS_CURVE = "loss_curve.png"
EXAMPLES = 6
"""Texts of the data a trainer offers its card for the example prompt (held-out first: `cards.prompts`)."""


def has_gpu() -> bool:
    """Whether a CUDA or XPU device is there for the Trainer to train on."""
    return torch.cuda.is_available() or (hasattr(torch, "xpu") and torch.xpu.is_available())


def distributed_without_gpu() -> bool:
    """Several processes (torchrun, accelerate launch) and no CUDA or XPU device: the Trainer then runs
    DistributedDataParallel over gloo only with `use_cpu=True` (else every process trains alone)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 and not has_gpu()


def cpu_has_bf16() -> bool:
    """Whether this CPU computes in bfloat16 in hardware (x86 AVX-512 BF16 or AMX, ARM's BF16 extension), so that
    bf16 autocast speeds training up instead of emulating it."""
    for check in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):  # torch's own probes of the x86 CPU
        if getattr(torch.cpu, check, lambda: False)():
            return True
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return any(line.startswith("Features") and " bf16" in line for line in cpuinfo)  # ARM
    except OSError:
        return False


def bf16_on_cpu(settings: TrainSettings) -> bool:
    """Whether the run trains in bf16 autocast on the CPU (the Trainer then needs `use_cpu`); a TrainingError where
    bf16 is asked for and neither a GPU nor the CPU has it."""
    if settings.mixed_precision != "bf16" or has_gpu():
        return False
    if not cpu_has_bf16():
        raise TrainingError(
            "mixed precision bf16 needs a GPU or a CPU with bf16 instructions (AVX-512 BF16, AMX or ARM BF16), and "
            "this machine has neither; train in float32 (--mixed-precision no)"
        )
    return True


Arguments = TypeVar("Arguments", bound=TrainingArguments)


def training_arguments(
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
        torch_compile=settings.compile,
        report_to=settings.report_to,
        logging_nan_inf_filter=False,  # a NaN/inf loss must reach the logs (StopOnNonFiniteLoss), not be hidden
        disable_tqdm=not settings.progress,
        dataloader_pin_memory=torch.cuda.is_available(),
        use_cpu=distributed_without_gpu() or bf16_on_cpu(settings),
        ddp_find_unused_parameters=False,
        **extra,
    )
    arguments.update(settings.extra)
    return arguments_class(**arguments)


class StopOnNonFiniteLoss(TrainerCallback):
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


def bars_as_settings_say(train: Callable[..., TrainingResult]) -> Callable[..., TrainingResult]:
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


def run_trainer(
    trainer: Trainer,
    settings: TrainSettings,
    has_eval: bool,
    model: PreTrainedModel,
    record: dict[str, Any] | None,
    loss_cause: str | None = None,
) -> dict[str, float]:
    """Check the checkpoint to resume from (against the run's `record`), train, then evaluate on the held-out set;
    returns the evaluation figures. `loss_cause` is what a NaN loss most likely comes from, when the corpus shows it.
    Its logs are lines on stderr (`console`), with the expected time of a long run after its first steps; SIGINT and
    SIGTERM stop it at the end of a step, saving a checkpoint when it keeps them, with a `TrainingInterrupted`.

    The Trainer sets `model.config.use_cache` to its own `use_cache` argument (False) for training; the config
    gets back its class's value (what the architecture supports), so the saved `config.json` and a bare forward
    keep the cache, and a config without the field (the encoder's) is left without it."""
    trainer.remove_callback(ProgressCallback)  # they write each log to stdout as a dict of strings
    trainer.remove_callback(PrinterCallback)
    if settings.progress:
        trainer.add_callback(LossOnBar())
    if not settings.logs_on_bar:
        trainer.add_callback(LogLines())
    keeps_checkpoints = settings.checkpoint_dir is not None
    stop = StopOnSignal(keeps_checkpoints)
    trainer.add_callback(stop)
    trainer.add_callback(TimeEstimate(what_ctrl_c_does(keeps_checkpoints) if stops_on_signals() else ""))
    trainer.add_callback(StopOnNonFiniteLoss(loss_cause))
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
        with writing_into(work_dir, *checkpoint_folder_name(settings, work_dir)), stop.installed():
            trainer.train(resume_from_checkpoint=resume)
    except pickle.UnpicklingError as error:  # torch's weights-only unpickler refused a file of the checkpoint
        raise TrainingError(f"--resume: {refused_pickle_message(error, [resume])}") from None
    interrupted = stop.interruption(work_dir, trainer.state.global_step, trainer.state.max_steps)
    if interrupted is not None:
        raise interrupted
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


class WorkDir:
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


def model_title(label: str, preset: str, config_overrides: dict[str, Any] | None, model: PreTrainedModel) -> str:
    """What the loss curve's title calls the model: its preset when it is that preset's, else its own sizes (a
    preset with changed sizes is not that preset), with its parameter count."""
    parameters = f"{model.num_parameters():,} parameters"
    if not config_overrides:
        return f"MiniTF {label} ({preset} preset, {parameters})"
    config = model.config
    layers = config.num_hidden_layers
    return f"MiniTF {label} ({layers} layer{'s' if layers != 1 else ''} of {config.hidden_size}, {parameters})"


def describe_losses(log_history: Sequence[dict]) -> str:
    losses = [entry["loss"] for entry in log_history if "loss" in entry]
    steps = max((entry.get("step", 0) for entry in log_history), default=0)
    if not losses:
        return ""
    return f"Trained for {steps} steps; training loss {losses[0]:.3f} at the start, {losses[-1]:.3f} at the end."


def saving(*parts: Any) -> Callable[[Path], None]:
    """What `write_folder` saves for a model and its tokenizer: each part's `save_pretrained` into the folder."""

    def save(folder: Path) -> None:
        for part in parts:
            part.save_pretrained(folder)

    return save


def write_folder(
    trainer: Trainer,
    target: OutputFolder | None,
    save: Callable[[Path], Any],
    result: TrainingResult,
    title: str,
    dataset_name: str | None,
    extra_markdown: str | None,
    model_id: str | None,
    license: str | None = None,
    training: TrainingData | None = None,
) -> Path | None:
    """On the main process, write the folder atomically: `save(folder)`, the loss curve, then the card with the
    held-out figures and what `training` says of the data (its snippets load `model_id`, default: the output
    folder; its license: `license`, default `DEFAULT_LICENSE`). Every process waits for it, so none ends, taking its end of the process group down, while
    the main process still writes (gloo then aborts the process left waiting)."""
    if target is None or not trainer.is_world_process_zero():
        trainer.accelerator.wait_for_everyone()
        return None
    with target.write() as work:
        save(work)
        image = plot_loss_curve(result.log_history, work / LOSS_CURVE, title)
        notes = "\n\n".join(text for text in (describe_losses(result.log_history), extra_markdown) if text)
        update_model_card(
            work,
            eval_results=result.eval_results or None,
            dataset_name=dataset_name,
            image=LOSS_CURVE if image else None,
            extra_markdown=notes or None,
            model_id=model_id or local_model_id(target),
            license=license,
            training=training,
        )
    trainer.accelerator.wait_for_everyone()
    return target.path


def end_distributed_training() -> None:
    """Take down the process group a multi-process run (torchrun, accelerate launch) set up, as a script's last
    step: left to interpreter exit, gloo's threads can abort a process (`terminate called without an active
    exception`)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def config_fields(preset: Preset, overrides: dict[str, Any] | None) -> dict[str, Any]:
    fields = dict(preset.config)
    fields.update(overrides or {})
    return fields


def held_out_indices(total: int, fraction: float, seed: int, limit: int = 1000) -> list[int]:
    """The sorted indices of a random `fraction` (at most `limit`) of `total` items held out for evaluation;
    none for tiny data. Drawn without listing all `total` indices."""
    if not 0 <= fraction < 1:
        raise TrainingError(f"the held-out fraction must lie in [0, 1), got {fraction}")
    return sorted(random.Random(seed).sample(range(total), min(limit, int(total * fraction))))


class TrainingStart(NamedTuple):
    """What every trainer checks and settles before its data: the settings, the license (refused before training,
    not after), the preset, the output folder (checked before any work) and the config fields."""

    family: str
    settings: TrainSettings
    license: str | None
    preset: Preset
    target: OutputFolder | None
    fields: dict[str, Any]


def start_training(
    family: str,
    preset: str,
    settings: TrainSettings | None,
    license: str | None,
    out: str | Path | OutputFolder | None,
    overwrite: bool,
    config_overrides: dict[str, Any] | None,
) -> TrainingStart:
    """The checks every trainer makes first (see `TrainingStart`); without a license, the warning that the card's
    will be `other` (`NO_LICENSE_WARNING`), before the work."""
    settings = settings or TrainSettings()
    license = check_license(license) if license is not None else None
    if license is None:
        logger.warning(NO_LICENSE_WARNING)
    chosen = get_preset(family, preset)
    target = output_folder(out, overwrite) if out is not None else None
    check_checkpoint_dir(settings)
    return TrainingStart(family, settings, license, chosen, target, config_fields(chosen, config_overrides))


def checked_languages(languages: Sequence[str], family: str) -> tuple[str, ...]:
    """The ISO 639 codes of the training data (`catalog.publishing.check_language`): a translator's two (source,
    then target) or none, another model's any number."""
    checked = tuple(check_language(code) for code in languages)
    if family == "seq2seq" and len(checked) not in (0, 2):
        raise TrainingError(
            f"a translator's languages are two ISO 639 codes, its source then its target, got {list(languages)}"
        )
    return checked


def pair_training_data(
    name: str | None,
    hub_id: str | None,
    languages: tuple[str, ...],
    pairs: Sequence[tuple[str, str]],
    held_out: Sequence[tuple[str, str]],
    both_sides: bool,
) -> TrainingData:
    """What the card of a model trained on text pairs says of them: how many, and the texts of the first pairs
    (held-out first) for its example, both texts of each (`both_sides`) or their sources."""
    rows = [*held_out[:EXAMPLES], *pairs[:EXAMPLES]]
    examples = [text for pair in rows for text in (pair if both_sides else pair[:1])]
    size = f"{len(pairs):,} pairs" + (f" ({len(held_out):,} more held out)" if held_out else "")
    return TrainingData(name, hub_id, size, languages, tuple(examples))


def split_held_out(items: list, fraction: float, seed: int) -> tuple[list, list]:
    """`items` without and with the `held_out_indices`."""
    held = set(held_out_indices(len(items), fraction, seed))
    return [item for index, item in enumerate(items) if index not in held], [items[index] for index in sorted(held)]


def held_out_pairs(
    prepared: TrainingStart,
    pairs: Sequence[Sequence[str]],
    eval_pairs: Sequence[tuple[str, str]] | None,
    fraction: float,
) -> tuple[list[tuple[str, str]], Sequence[tuple[str, str]], str]:
    """The training pairs (checked), the held-out pairs (`eval_pairs`, else a `fraction` of them) and the digest of
    every text (what a checkpoint folder is resumed against; empty without one)."""
    checked = check_pairs(pairs, prepared.family)
    texts = (text for pair in checked for text in pair)
    corpus = TextsDigest().add(texts).hexdigest() if prepared.settings.checkpoint_dir else ""
    if eval_pairs is None:
        checked, eval_pairs = split_held_out(checked, fraction, prepared.settings.seed)
    return checked, eval_pairs, corpus


def check_pairs(pairs: Sequence[Sequence[str]], what: str) -> list[tuple[str, str]]:
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


__all__ = [
    "saving",
    "LOSS_CURVE",
    "StopOnNonFiniteLoss",
    "TrainingStart",
    "WorkDir",
    "bars_as_settings_say",
    "check_pairs",
    "checked_languages",
    "pair_training_data",
    "config_fields",
    "end_distributed_training",
    "held_out_indices",
    "held_out_pairs",
    "model_title",
    "plot_loss_curve",
    "run_trainer",
    "split_held_out",
    "start_training",
    "training_arguments",
    "write_folder",
]
