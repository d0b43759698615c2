"""The ONNX Runtime translator: a seq2seq export's three graphs (`ONNX_TRANSLATOR_GRAPHS`) run with greedy or beam
search written out in numpy, step for step as transformers' `generate()` searches, so that `minitf translate` on
the export prints the MiniTF folder's translations.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hf_minitf.catalog.exports import (
    ONNX_DTYPE_SUFFIXES,
    ONNX_TRANSLATOR_GRAPHS,
    PAST_PREFIX,
    PRESENT_PREFIX,
    onnx_variant_file,
)
from hf_minitf.engines.folders import (
    AGAIN,
    ExportFolderError,
    check_vocabulary,
    checked_field,
    end_ids,
    folder_json,
    load_tokenizer,
)
from hf_minitf.engines.onnx import onnx_session

# The scores transformers' beam search gives finished and impossible candidates (float32, as its own).
FAR_BELOW = np.float32(-1e9)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """log_softmax over the last axis, in float32 as `generate()` computes it."""
    shifted = logits.astype(np.float32) - logits.max(axis=-1, keepdims=True).astype(np.float32)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def best_first(scores: np.ndarray, count: int) -> np.ndarray:
    """The indices of the `count` highest scores, highest first (ties: the lower index first)."""
    return np.argsort(-scores, kind="stable")[:count]


class OnnxTranslator:
    """A seq2seq export run by ONNX Runtime: texts in, translations out. `dtype` picks the graphs' variant
    (fp32, or q8, fp16, q4 where the export wrote them)."""

    def __init__(self, folder: Path, info: dict, dtype: str = "fp32") -> None:
        if dtype not in ONNX_DTYPE_SUFFIXES:
            raise ValueError(f"dtype takes {', '.join(ONNX_DTYPE_SUFFIXES)}; got {dtype!r}.")
        self.tokenizer = load_tokenizer(folder)
        files = {role: onnx_variant_file(graph, dtype) for role, graph in ONNX_TRANSLATOR_GRAPHS.items()}
        sources = {"input_ids", "attention_mask"}
        self.encoder, source_rows = onnx_session(
            folder, info, files["encoder"], "translator", sources, {"last_hidden_state"}
        )
        check_vocabulary(folder, self.tokenizer.source_vocab_size, source_rows, files["encoder"])
        decoder_inputs = {"input_ids", "encoder_attention_mask"}
        self.decoder, target_rows = onnx_session(
            folder, info, files["decoder"], "translator", decoder_inputs | {"encoder_hidden_states"}, {"logits"}
        )
        check_vocabulary(folder, self.tokenizer.target_vocab_size, target_rows, files["decoder"])
        self.decoder_with_past, _ = onnx_session(
            folder, info, files["decoder_with_past"], "translator", decoder_inputs, {"logits"}
        )
        self.decoder_outputs = [output.name for output in self.decoder.get_outputs()]
        self.next_outputs = [output.name for output in self.decoder_with_past.get_outputs()]
        self.cache_inputs = [
            item.name for item in self.decoder_with_past.get_inputs() if item.name.startswith(PAST_PREFIX)
        ]
        generation = folder_json(folder, "generation_config.json")
        file = "generation_config.json"
        self.end_ids = end_ids(folder)
        start = checked_field(folder, generation, file, "decoder_start_token_id", "ids")
        if not self.end_ids or len(start) != 1:
            raise ExportFolderError(
                f"{folder / file} must hold eos_token_id and one decoder_start_token_id, where decoding starts and "
                f"stops; {AGAIN}"
            )
        self.start_id = start[0]
        self.max_positions = info["max_position_embeddings"]
        self.default_length = checked_field(folder, generation, file, "max_length") or self.max_positions
        # Unset (absent or null) means generate()'s defaults.
        self.length_penalty = 1.0 if generation.get("length_penalty") is None else generation["length_penalty"]
        self.early_stopping = generation.get("early_stopping") or False
        if not isinstance(self.length_penalty, (int, float)) or isinstance(self.length_penalty, bool):
            raise ExportFolderError(
                f"{folder / file}: length_penalty is {self.length_penalty!r}, not a number; {AGAIN}"
            )
        if self.early_stopping not in (True, False, "never"):
            raise ExportFolderError(
                f'{folder / file}: early_stopping is {self.early_stopping!r}, not true, false or "never"; {AGAIN}'
            )

    def translate(self, texts: list[str], num_beams: int = 1, max_new_tokens: int | None = None) -> list[str]:
        """Translate `texts` as `minitf-translation` does: until [EOS], `max_new_tokens` or the generation config's
        max_length (the decoder's `max_position_embeddings` positions by default), start token included."""
        for text in texts:
            if not text.strip():
                raise ValueError("Cannot translate an empty text; give at least one word.")
        max_length = 1 + max_new_tokens if max_new_tokens is not None else self.default_length
        return [
            self.tokenizer.decode(
                self.translate_ids(self.tokenizer(text).input_ids, num_beams, max_length), skip_special_tokens=True
            )
            for text in texts
        ]

    def new_ids(self, source: list[int], max_new_tokens: int, num_beams: int = 1) -> list[int]:
        """The target ids greedy search (or beam search over `num_beams`) gives after the start token, at most
        `max_new_tokens` (end token included)."""
        return self.translate_ids(source, num_beams, max_new_tokens + 1)[1:]

    def translate_ids(self, source: list[int], num_beams: int = 1, max_length: int | None = None) -> list[int]:
        """The target ids (start token first, end token last when reached) of the source ids `source`, by greedy
        search or beam search over `num_beams` beams, up to `max_length` ids in all."""
        if len(source) > self.max_positions:
            raise ValueError(
                f"The source holds {len(source)} tokens, past this model's max_position_embeddings="
                f"{self.max_positions}. Shorten it."
            )
        max_length = max_length or self.default_length
        ids = np.array([source], dtype=np.int64)
        mask = np.ones_like(ids)
        (states,) = self.encoder.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask})
        if num_beams == 1:
            return self._greedy(states, mask, max_length)
        return self._beam_search(states, mask, num_beams, max_length)

    def _first_step(self, states: np.ndarray, mask: np.ndarray, rows: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The start token's logits and the cache (both sides), repeated for `rows` rows."""
        feeds = {"input_ids": np.array([[self.start_id]], dtype=np.int64), "encoder_attention_mask": mask}
        outputs = dict(
            zip(
                self.decoder_outputs, self.decoder.run(self.decoder_outputs, {**feeds, "encoder_hidden_states": states})
            )
        )
        logits = outputs.pop("logits")[:, -1].astype(np.float32)
        cache = {name.replace(PRESENT_PREFIX, PAST_PREFIX, 1): value for name, value in outputs.items()}
        return np.repeat(logits, rows, axis=0), {name: np.repeat(value, rows, axis=0) for name, value in cache.items()}

    def _next_step(self, tokens: np.ndarray, mask: np.ndarray, cache: dict[str, np.ndarray], length: int) -> np.ndarray:
        """The logits after each row's last token (`tokens`, one per row, at position `length` - 1); `cache` is
        extended in place with the new self-attention keys and values."""
        if length > self.max_positions:
            raise ValueError(
                f"The target holds {length} tokens, past this model's max_position_embeddings={self.max_positions}. "
                f"Generate fewer tokens: max_length (start token included) at most {self.max_positions}."
            )
        feeds = {
            "input_ids": tokens[:, None].astype(np.int64),
            "encoder_attention_mask": np.repeat(mask, len(tokens), axis=0),
        }
        outputs = dict(zip(self.next_outputs, self.decoder_with_past.run(self.next_outputs, {**feeds, **cache})))
        for name, value in outputs.items():
            if name != "logits":
                cache[name.replace(PRESENT_PREFIX, PAST_PREFIX, 1)] = value
        return outputs["logits"][:, -1].astype(np.float32)

    def _greedy(self, states: np.ndarray, mask: np.ndarray, max_length: int) -> list[int]:
        logits, cache = self._first_step(states, mask, 1)
        ids = [self.start_id]
        while True:
            ids.append(int(logits[0].argmax()))
            if ids[-1] in self.end_ids or len(ids) >= max_length:
                return ids
            logits = self._next_step(np.array(ids[-1:]), mask, cache, len(ids))

    def _beam_search(self, states: np.ndarray, mask: np.ndarray, num_beams: int, max_length: int) -> list[int]:
        """transformers' beam search (`GenerationMixin._beam_search`) for one source: at each step the best
        `keep` continuations of all beams; those ending in [EOS] or at `max_length` enter the finished hypotheses
        (scored sum of log-probabilities / length ** length_penalty) if among the best `num_beams`, the best
        `num_beams` others run on; it stops as `early_stopping` says, or when no running beam can beat the worst
        finished one."""
        keep = max(2, 1 + len(self.end_ids)) * num_beams
        length_penalty, early_stopping = self.length_penalty, self.early_stopping
        logits, cache = self._first_step(states, mask, num_beams)
        running = [[self.start_id] for _ in range(num_beams)]
        running_scores = np.full(num_beams, FAR_BELOW, dtype=np.float32)
        running_scores[0] = 0.0  # the beams start equal: only the first one's continuations count
        finished: list[list[int]] = [[] for _ in range(num_beams)]
        finished_scores = np.full(num_beams, FAR_BELOW, dtype=np.float32)
        is_finished = np.zeros(num_beams, dtype=bool)
        improvable = True
        length = 1
        while True:
            vocabulary = logits.shape[-1]
            scores = (log_softmax(logits) + running_scores[:, None]).reshape(-1)
            top = best_first(scores, keep)
            top_scores = scores[top]
            beams, tokens = np.divmod(top, vocabulary)
            candidates = [running[beam] + [int(token)] for beam, token in zip(beams, tokens)]
            ends = np.isin(tokens, self.end_ids) | (length + 1 >= max_length)
            # The running beams of the next step: the best continuations that did not end.
            running_order = best_first(top_scores + ends * FAR_BELOW, num_beams)
            # The finished hypotheses: the best of those kept and those of the first num_beams that just ended.
            ended = ends & (np.arange(keep) < num_beams)
            ended_scores = top_scores / np.float32(length**length_penalty)
            closed = bool(is_finished.all() and early_stopping is True) or not improvable
            ended_scores = ended_scores + FAR_BELOW * closed + FAR_BELOW * ~ended
            merged_scores = np.concatenate([finished_scores, ended_scores.astype(np.float32)])
            merged = finished + candidates
            merged_finished = np.concatenate([is_finished, ended])
            order = best_first(merged_scores, num_beams)
            finished = [merged[index] for index in order]
            finished_scores, is_finished = merged_scores[order], merged_finished[order]

            running = [candidates[index] for index in running_order]
            running_scores = (top_scores + ends * FAR_BELOW)[running_order].astype(np.float32)
            length += 1
            if early_stopping == "never" and length_penalty > 0:
                best_length = max_length - 1
            else:
                best_length = length - 1
            best_running = running_scores[0] / np.float32(best_length**length_penalty)
            worst_finished = np.where(is_finished, finished_scores.min(), FAR_BELOW)
            improvable = improvable and bool((best_running > worst_finished).any())
            if not improvable or (is_finished.all() and early_stopping is True) or ends.all():
                return finished[0]
            for name in self.cache_inputs:  # each running beam's own cache, from the beam it continues
                if ".decoder." in name:
                    cache[name] = cache[name][beams[running_order]]
            logits = self._next_step(np.array([beam[-1] for beam in running]), mask, cache, length)
