"""`train_seq2seq`: a MiniTF translator trained with transformers' `Seq2SeqTrainer` on (source, target) pairs, its
paired source and target tokenizers trained first."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import (
    DataCollatorForSeq2Seq,
    Seq2SeqTrainer,
    Seq2SeqTrainingArguments,
    set_seed,
)

import hf_minitf.training.common as common
from hf_minitf.evaluation.held_out import seq2seq_held_out
from hf_minitf.modeling.configuration_minitf_seq2seq import MiniTFSeq2SeqConfig
from hf_minitf.modeling.modeling_minitf_seq2seq import MiniTFSeq2SeqForConditionalGeneration
from hf_minitf.modeling.tokenization_minitf_seq2seq import train_translation_tokenizers
from hf_minitf.safety.output_folders import OutputFolder
from hf_minitf.training.runs import prepare_run
from hf_minitf.training.settings import TrainingResult, TrainSettings


@common.bars_as_settings_say
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
    dataset_id: str | None = None,
    languages: Sequence[str] = (),
) -> TrainingResult:
    """Train a seq2seq (translation) model on (source, target) pairs with `Seq2SeqTrainer` and write it to `out`.

    Source and target word-level vocabularies are trained on the training pairs (words seen once count);
    pairs longer than the preset's positions are truncated. The card names the data (`dataset_name`;
    `dataset_id`, the Hub dataset it came from, as `datasets:`) and the two `languages` (ISO 639 codes of the
    source, then the target), and its snippet translates a source sentence of the data the tokenizer spells.
    """
    prepared = common.start_training("seq2seq", preset, settings, license, out, overwrite, config_overrides)
    _, settings, license, _, target, fields = prepared
    languages = common.checked_languages(languages, "seq2seq")
    pairs, eval_pairs, corpus = common.held_out_pairs(prepared, pairs, eval_pairs, eval_fraction)
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
    with common.WorkDir(settings) as work_dir:
        trainer = Seq2SeqTrainer(
            model=model,
            args=common.training_arguments(settings, work_dir, bool(eval_rows), Seq2SeqTrainingArguments),
            train_dataset=encode(pairs),
            eval_dataset=eval_rows or None,  # type: ignore[arg-type]  # a list of examples is a map-style dataset
            processing_class=tokenizer,
            data_collator=DataCollatorForSeq2Seq(tokenizer, model=model),
        )
        eval_results = common.run_trainer(trainer, settings, bool(eval_rows), model, record)
        eval_results |= seq2seq_held_out(model, tokenizer, eval_pairs or [])
        result = TrainingResult(None, model.eval(), tokenizer, trainer.state.log_history, eval_results)
        card = (dataset_name, extra_markdown, model_id, license)
        data = common.pair_training_data(dataset_name, dataset_id, languages, pairs, eval_pairs or [], both_sides=False)
        save, title = common.saving(model, tokenizer), common.model_title("seq2seq", preset, config_overrides, model)
        result.folder = common.write_folder(trainer, target, save, result, title, *card, training=data)
    return result


__all__ = ["train_seq2seq"]
