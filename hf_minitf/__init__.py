"""hf_minitf: small from-scratch transformers as first-class Hugging Face models.

Installed, it registers every MiniTF config, model and tokenizer with the transformers Auto classes, and the
`minitf-translation` pipeline task, in every process as transformers loads them, with no `import hf_minitf`
(`hf_minitf.registration`); importing it does the same where it is not installed (a source checkout). It also puts
its checks and cards around the model code as it loads (a config's fields, `from_pretrained`'s weights,
`save_pretrained`'s card and file modes): a saved folder's copied code is the model alone. Saved and
pushed models carry their code and a model card (`update_model_card` adds measured figures; `push_folder` is
`minitf push`).

The package itself imports nothing heavy: each public name is imported on first use, so `hf_minitf.catalog` and
the `minitf` parser need no torch.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any

from hf_minitf.registration import install as _install_registration

__version__ = "0.1.0"
_install_registration()


# Each public name, by the module that defines it.
_PUBLIC = {
    "hf_minitf.modeling.configuration_minitf_gpt": ["MiniTFGPTConfig"],
    "hf_minitf.modeling.modeling_minitf_gpt": ["MiniTFGPTModel", "MiniTFGPTForCausalLM", "MiniTFGPTPreTrainedModel"],
    "hf_minitf.modeling.configuration_minitf_encoder": ["MiniTFEncoderConfig"],
    "hf_minitf.modeling.modeling_minitf_encoder": [
        "MiniTFEncoderModel",
        "MiniTFEncoderForSequenceClassification",
        "MiniTFEncoderPreTrainedModel",
    ],
    "hf_minitf.modeling.configuration_minitf_seq2seq": ["MiniTFSeq2SeqConfig"],
    "hf_minitf.modeling.modeling_minitf_seq2seq": [
        "MiniTFSeq2SeqModel",
        "MiniTFSeq2SeqForConditionalGeneration",
        "MiniTFSeq2SeqPreTrainedModel",
    ],
    "hf_minitf.modeling.tokenization_minitf_seq2seq": ["MiniTFSeq2SeqTokenizer", "train_translation_tokenizers"],
    "hf_minitf.modeling.pipeline_minitf_translation": ["MiniTFTranslationPipeline", "TRANSLATION_TASK"],
    "hf_minitf.tokenization.gpt": ["char_tokenizer", "train_bpe_tokenizer", "load_bpe_tokenizer"],
    "hf_minitf.tokenization.miniembed": [
        "miniembed_tokenizer",
        "train_wordlevel_tokenizer",
        "train_encoder_bpe_tokenizer",
    ],
    "hf_minitf.sentence_transformers_folder": ["save_sentence_transformer"],
    "hf_minitf.cards": ["update_model_card"],
    "hf_minitf.hub.push": ["push_folder", "PushError"],
    "hf_minitf.registration": ["register"],
    "hf_minitf.tokenization.chat_templates": ["set_chat_template"],
    "hf_minitf.training.settings": ["TrainSettings", "TrainingResult"],
    "hf_minitf.training.trainers": ["train_gpt", "train_encoder", "train_seq2seq"],
}
_MODULE_OF = {name: module for module, names in _PUBLIC.items() for name in names}
_ALIASES = {"TRANSLATION_TASK": "TASK"}

if TYPE_CHECKING:  # the same names for type checkers (tests/test_public_api.py holds the two lists equal)
    from hf_minitf.cards import update_model_card
    from hf_minitf.hub.push import PushError, push_folder
    from hf_minitf.modeling.configuration_minitf_encoder import MiniTFEncoderConfig
    from hf_minitf.modeling.configuration_minitf_gpt import MiniTFGPTConfig
    from hf_minitf.modeling.configuration_minitf_seq2seq import MiniTFSeq2SeqConfig
    from hf_minitf.modeling.modeling_minitf_encoder import (
        MiniTFEncoderForSequenceClassification,
        MiniTFEncoderModel,
        MiniTFEncoderPreTrainedModel,
    )
    from hf_minitf.modeling.modeling_minitf_gpt import MiniTFGPTForCausalLM, MiniTFGPTModel, MiniTFGPTPreTrainedModel
    from hf_minitf.modeling.modeling_minitf_seq2seq import (
        MiniTFSeq2SeqForConditionalGeneration,
        MiniTFSeq2SeqModel,
        MiniTFSeq2SeqPreTrainedModel,
    )
    from hf_minitf.modeling.pipeline_minitf_translation import TASK as TRANSLATION_TASK
    from hf_minitf.modeling.pipeline_minitf_translation import MiniTFTranslationPipeline
    from hf_minitf.modeling.tokenization_minitf_seq2seq import MiniTFSeq2SeqTokenizer, train_translation_tokenizers
    from hf_minitf.registration import register
    from hf_minitf.sentence_transformers_folder import save_sentence_transformer
    from hf_minitf.tokenization.chat_templates import set_chat_template
    from hf_minitf.tokenization.gpt import char_tokenizer, load_bpe_tokenizer, train_bpe_tokenizer
    from hf_minitf.tokenization.miniembed import (
        miniembed_tokenizer,
        train_encoder_bpe_tokenizer,
        train_wordlevel_tokenizer,
    )
    from hf_minitf.training.settings import TrainingResult, TrainSettings
    from hf_minitf.training.trainers import train_encoder, train_gpt, train_seq2seq


def __getattr__(name: str) -> Any:
    """A public name, imported on first use."""
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_MODULE_OF[name]), _ALIASES.get(name, name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_MODULE_OF])


__all__ = list(_MODULE_OF)
