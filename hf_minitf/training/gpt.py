"""`train_gpt`: a MiniTF GPT trained with transformers' `Trainer` on a text (a string, texts or a file), its tokenizer
(characters or byte-level BPE) trained first; the text goes through the tokenizer in chunks into a file of token ids
that the blocks are memory-mapped views of."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
from tqdm.auto import tqdm
from transformers import (
    DataCollatorForLanguageModeling,
    PreTrainedTokenizerBase,
    Trainer,
    TrainingArguments,
    set_seed,
)

import hf_minitf.training.common as common
from hf_minitf.cards import TrainingData
from hf_minitf.evaluation.held_out import gpt_held_out
from hf_minitf.modeling.configuration_minitf_gpt import MiniTFGPTConfig
from hf_minitf.modeling.modeling_minitf_gpt import MiniTFGPTForCausalLM
from hf_minitf.safety.output_folders import OutputFolder
from hf_minitf.tokenization.chat_templates import (
    ChatTemplateChange,
    apply_chat_template_to_tokenizer,
    chat_template_spec,
    stop_at_end_of_turn,
    template_characters,
)
from hf_minitf.tokenization.gpt import CHAR_SPECIAL_TOKENS, char_tokenizer, train_bpe_tokenizer
from hf_minitf.training.data import CHUNK_CHARS, TextFile, TokenBlocks, encode_to_file, text_chunks
from hf_minitf.training.runs import (
    TEMPORARY_ADVICE,
    TextsDigest,
    prepare_run,
    writing_into,
)
from hf_minitf.training.settings import TrainingError, TrainingResult, TrainSettings

logger = logging.getLogger(__name__)

BPE_SAMPLE_CHARS = 64 * 2**20
"""The byte-level BPE tokenizer is trained on at most this many characters from the start of the training text
(64 Mi; all of the text is tokenized with it): more adds little to a vocabulary and costs minutes per 100 MB."""


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


@common.bars_as_settings_say
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
    dataset_id: str | None = None,
    languages: Sequence[str] = (),
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
    vocabulary then also holds the characters the template writes. The card names the data (`dataset_name`;
    `dataset_id`, the Hub dataset it came from, as `datasets:`), its size and `languages` (ISO 639 codes), and its
    snippet continues the start of a held-out text the tokenizer spells.
    """
    _, settings, license, chosen, target, fields = common.start_training(
        "gpt", preset, settings, license, out, overwrite, config_overrides
    )
    languages = common.checked_languages(languages, "gpt")
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
    with tempfile.TemporaryDirectory(prefix="minitf-tokens-") as token_dir, common.WorkDir(settings) as work_dir:
        built = _gpt_tokenizer(
            corpus, kind, vocab_size or chosen.vocab_size or 8192, bpe_sample_chars, context, template_alphabet
        )
        chat = apply_chat_template_to_tokenizer(built, template) if template is not None else None
        train_blocks: TokenBlocks | list[dict[str, list[int]]]
        eval_blocks: TokenBlocks | list[dict[str, list[int]]] | None
        if pack:
            with writing_into(Path(token_dir), f"the temporary folder {token_dir}", TEMPORARY_ADVICE):
                ids = encode_to_file(built, corpus.documents("tokenizing", digest), Path(token_dir) / "train.ids")
                tokens = len(ids)
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
                held = common.held_out_indices(len(ids) // block_size, eval_fraction, settings.seed)
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
            tokens = sum(len(block["input_ids"]) for block in blocks)
            corpus.check_content()
            loss_cause = _pad_text_cause(blocks, built, corpus.where())
            if eval_texts is not None:
                train_blocks, eval_blocks = blocks, examples(eval_texts)
            else:
                train_blocks, eval_blocks = common.split_held_out(blocks, eval_fraction, settings.seed)
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
            args=common.training_arguments(settings, work_dir, eval_blocks is not None, TrainingArguments),
            train_dataset=train_blocks,
            eval_dataset=eval_blocks,
            processing_class=built,
            data_collator=DataCollatorForLanguageModeling(built, mlm=False),
        )
        eval_results = common.run_trainer(trainer, settings, eval_blocks is not None, model, record, loss_cause)
        if eval_blocks is not None:
            eval_results |= gpt_held_out(model, cast(Iterable[dict[str, list[int]]], eval_blocks))
        result = TrainingResult(None, model.eval(), built, trainer.state.log_history, eval_results)
        card = (dataset_name, extra_markdown, model_id, license)
        data = TrainingData(
            dataset_name,
            dataset_id,
            _size(tokens, kind),
            languages,
            tuple(
                eval_texts[: common.EXAMPLES] if eval_texts else _block_texts(built, eval_blocks or train_blocks, pack)
            ),
        )
        save, title = common.saving(model, built), common.model_title("GPT", preset, config_overrides, model)
        result.folder = common.write_folder(trainer, target, save, result, title, *card, training=data)
    return result


def _size(tokens: int, kind: str) -> str:
    """How much text the model was trained on (`tokens`, a held-out part included), as its card says it: a
    character tokenizer's tokens are characters (and an end-of-text token per document)."""
    return f"about {tokens:,} characters" if kind == "char" else f"{tokens:,} tokens"


def _block_texts(
    tokenizer: PreTrainedTokenizerBase, blocks: TokenBlocks | Sequence[dict[str, list[int]]], packed: bool
) -> list[str]:
    """The text of the first blocks (`common.EXAMPLES`), for the card's example prompt: a packed block starts anywhere
    in the text, so without its first word (likely cut)."""
    texts = [
        str(tokenizer.decode(blocks[index]["input_ids"], skip_special_tokens=True))
        for index in range(min(common.EXAMPLES, len(blocks)))
    ]
    return [text.split(maxsplit=1)[-1] if packed and len(text.split()) > 1 else text for text in texts]


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


__all__ = ["BPE_SAMPLE_CHARS", "train_gpt"]
