"""`train_encoder`: a MiniTF encoder trained as a sentence-embedding model with sentence-transformers'
`SentenceTransformerTrainer` on (anchor, positive) pairs, with in-batch negatives."""

from __future__ import annotations

import logging
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from transformers import set_seed

import hf_minitf.training.common as common
from hf_minitf.evaluation.held_out import encoder_held_out
from hf_minitf.modeling.configuration_minitf_encoder import MiniTFEncoderConfig
from hf_minitf.modeling.modeling_minitf_encoder import MiniTFEncoderModel
from hf_minitf.safety.output_folders import OutputFolder
from hf_minitf.sentence_transformers_folder import save_sentence_transformer
from hf_minitf.tokenization.miniembed import train_wordlevel_tokenizer
from hf_minitf.training.runs import (
    TEMPORARY_ADVICE,
    prepare_run,
    writing_into,
)
from hf_minitf.training.settings import TrainingError, TrainingResult, TrainSettings

logger = logging.getLogger(__name__)


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


@common.bars_as_settings_say
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
    dataset_id: str | None = None,
    languages: Sequence[str] = (),
) -> TrainingResult:
    """Train an encoder as a sentence-embedding model on (anchor, positive) pairs with in-batch negatives and
    write a SentenceTransformer folder to `out`.

    sentence-transformers' trainer with `MultipleNegativesRankingLoss` (each anchor against every positive in
    its batch), batches without duplicate texts. The word-level tokenizer is trained on the training pairs. The
    card names the data (`dataset_name`; `dataset_id`, the Hub dataset it came from, as `datasets:`) and its
    `languages` (ISO 639 codes), and its snippet embeds sentences of the data the tokenizer spells.
    """
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer import losses  # the module's home since sentence-transformers 5.4
    from sentence_transformers.sentence_transformer.training_args import BatchSamplers

    class _TrainerWithoutItsCard(SentenceTransformerTrainer):
        def add_model_card_callback(self, default_args_dict: dict[str, Any]) -> None:
            """No card data of sentence-transformers': the folder's card is this package's (`write_folder`), and
            collecting it drew examples from the data under a progress bar that --no-progress could not hide."""

    prepared = common.start_training("encoder", preset, settings, license, out, overwrite, config_overrides)
    _, settings, license, chosen, target, fields = prepared
    languages = common.checked_languages(languages, "encoder")
    pairs, eval_pairs, corpus = common.held_out_pairs(prepared, pairs, eval_pairs, eval_fraction)
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

    with common.WorkDir(settings) as work_dir, tempfile.TemporaryDirectory(prefix="minitf-encoder-") as start:
        with writing_into(Path(start), f"the temporary folder {start}", TEMPORARY_ADVICE):
            embedder = SentenceTransformer(save_sentence_transformer(model, tokenizer, start))
        arguments = common.training_arguments(
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
        eval_results = common.run_trainer(trainer, settings, bool(eval_pairs), model, record)
        eval_results |= encoder_held_out(embedder.eval(), eval_pairs or [])
        trained = cast(MiniTFEncoderModel, embedder[0].auto_model).eval()  # the Transformer module holds the encoder
        result = TrainingResult(None, trained, tokenizer, trainer.state.log_history, eval_results)
        result.folder = common.write_folder(
            trainer,
            target,
            lambda folder: save_sentence_transformer(trained, tokenizer, folder),
            result,
            common.model_title("encoder", preset, config_overrides, trained),
            dataset_name,
            extra_markdown,
            model_id,
            license,
            common.pair_training_data(dataset_name, dataset_id, languages, pairs, eval_pairs or [], both_sides=True),
        )
    return result


__all__ = ["train_encoder"]
