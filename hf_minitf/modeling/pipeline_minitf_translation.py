"""`pipeline("minitf-translation")`: text in, translation out, for MiniTF seq2seq models (or any seq2seq LM).

transformers 5 removed its `translation_*` and `text2text-generation` pipelines and refuses those names, so the
task is registered under a name of its own (see hf_minitf/registration.py). A pushed MiniTF seq2seq model carries this
file and a `custom_pipelines` entry in its config, so `pipeline("minitf-translation", model=repo_id,
trust_remote_code=True)` also works where hf_minitf is not installed.
"""

from __future__ import annotations

from typing import Any, cast

from transformers import Pipeline, PreTrainedTokenizerBase

TASK = "minitf-translation"


class MiniTFTranslationPipeline(Pipeline):
    """Translate text with a seq2seq LM: `pipe("some text")` -> `[{"translation_text": ...}]`.

    A list of texts gives one dict per text (a list of dicts per text with `num_return_sequences` > 1); pass
    `batch_size=` to translate them in padded batches. Other keyword arguments, at construction or per call,
    go to `model.generate` (`max_new_tokens`, `num_beams`, `do_sample`, `stop_strings`, ...); without a length
    limit from them or the model's generation config, translations stop at [EOS] or `max_position_embeddings`
    tokens.
    `truncation=True` cuts sources longer than the tokenizer's `model_max_length`; otherwise too long a
    source raises a ValueError.
    """

    _load_processor = False  # type: ignore[assignment]  # Pipeline declares it `= None`
    _load_image_processor = False  # type: ignore[assignment]  # Pipeline declares it `= None`
    _load_feature_extractor = False  # type: ignore[assignment]  # Pipeline declares it `= None`
    _load_tokenizer = True  # type: ignore[assignment]  # Pipeline declares it `= None`

    def _sanitize_parameters(
        self,
        truncation: bool | None = None,
        skip_special_tokens: bool | None = None,
        clean_up_tokenization_spaces: bool | None = None,
        **generate_kwargs,
    ):
        preprocess_params = {} if truncation is None else {"truncation": truncation}
        postprocess_params = {}
        if skip_special_tokens is not None:
            postprocess_params["skip_special_tokens"] = skip_special_tokens
        if clean_up_tokenization_spaces is not None:
            postprocess_params["clean_up_tokenization_spaces"] = clean_up_tokenization_spaces
        return preprocess_params, generate_kwargs, postprocess_params

    def __call__(self, inputs: str | list[str], **kwargs) -> list[dict[str, str]] | list[Any]:  # type: ignore[override]  # Pipeline's hooks take named parameters
        """Translate one text or a list of texts."""
        texts = [inputs] if isinstance(inputs, str) else inputs
        if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            raise ValueError("minitf-translation takes a text or a list of texts.")
        results = super().__call__(texts, **kwargs)
        if all(len(result) == 1 for result in results):
            results = [result[0] for result in results]
        return results

    def preprocess(self, text: str, truncation: bool = False) -> dict:  # type: ignore[override]  # Pipeline's hooks take named parameters
        if not text.strip():
            raise ValueError("Cannot translate an empty text; give at least one word.")
        return self._text_tokenizer()(text, truncation=truncation, return_tensors="pt")

    def _forward(self, model_inputs: dict, **generate_kwargs) -> dict:  # type: ignore[override]  # Pipeline's hooks take named parameters
        config = self.model.generation_config
        limit = getattr(self.model.config, "max_position_embeddings", None)
        unset = not generate_kwargs.keys() & {"max_length", "max_new_tokens", "generation_config"}
        if unset and config.max_length is None and config.max_new_tokens is None and limit:
            # Translate until [EOS] or the decoder is full, rather than generate()'s 20-token default.
            generate_kwargs["max_length"] = limit
        if generate_kwargs.get("stop_strings") is not None:
            generate_kwargs.setdefault("tokenizer", self._text_tokenizer())  # stop strings are read from the text
        sequences = self.model.generate(**model_inputs, **generate_kwargs)  # type: ignore[operator]  # a seq2seq LM generates
        batch_size = model_inputs["input_ids"].shape[0]
        return {"output_ids": sequences.reshape(batch_size, -1, sequences.shape[-1])}

    def postprocess(  # type: ignore[override]  # Pipeline's hooks take named parameters
        self, model_outputs: dict, skip_special_tokens: bool = True, clean_up_tokenization_spaces: bool | None = None
    ) -> list[dict[str, str]]:
        return [
            {
                "translation_text": cast(
                    str,  # one sequence's ids decode to one text
                    self._text_tokenizer().decode(
                        output_ids,
                        skip_special_tokens=skip_special_tokens,
                        clean_up_tokenization_spaces=clean_up_tokenization_spaces,
                    ),
                )
            }
            for output_ids in model_outputs["output_ids"][0]
        ]

    def _text_tokenizer(self) -> PreTrainedTokenizerBase:
        """The tokenizer (`pipeline()` loads the model's; a pipeline built by hand must be given one)."""
        if self.tokenizer is None:
            raise ValueError("minitf-translation needs a tokenizer: pass tokenizer=, or build it with pipeline().")
        return self.tokenizer


__all__ = ["TASK", "MiniTFTranslationPipeline"]
