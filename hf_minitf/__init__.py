"""hf_minitf: small from-scratch transformers as first-class Hugging Face models.

Importing this package registers every MiniTF config, model and tokenizer with the transformers Auto classes,
and the `minitf-translation` pipeline task. Saved and pushed models carry their code and a model card
(`update_model_card` adds measured figures; `push_folder` is `minitf push`).
"""

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForSeq2SeqLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
)
from transformers.pipelines import PIPELINE_REGISTRY

from .configuration_minitf_encoder import MiniTFEncoderConfig
from .configuration_minitf_gpt import MiniTFGPTConfig
from .configuration_minitf_seq2seq import MiniTFSeq2SeqConfig
from .modeling_minitf_encoder import (
    MiniTFEncoderForSequenceClassification,
    MiniTFEncoderModel,
    MiniTFEncoderPreTrainedModel,
)
from .modeling_minitf_gpt import MiniTFGPTForCausalLM, MiniTFGPTModel, MiniTFGPTPreTrainedModel
from .model_card import update_model_card
from .modeling_minitf_seq2seq import (
    MiniTFSeq2SeqForConditionalGeneration,
    MiniTFSeq2SeqModel,
    MiniTFSeq2SeqPreTrainedModel,
)
from .pipeline_minitf_translation import TASK as TRANSLATION_TASK
from .pipeline_minitf_translation import MiniTFTranslationPipeline
from .publishing import PushError, push_folder
from .sentence_transformers_export import save_sentence_transformer
from .tokenization_minitf import char_tokenizer, load_bpe_tokenizer, train_bpe_tokenizer
from .tokenization_minitf_miniembed import miniembed_tokenizer, train_encoder_bpe_tokenizer, train_wordlevel_tokenizer
from .tokenization_minitf_seq2seq import MiniTFSeq2SeqTokenizer, train_translation_tokenizers

__version__ = "0.1.0"

# Each config with the model classes it loads, by Auto class.
_AUTO_CLASSES = {
    MiniTFGPTConfig: {AutoModel: MiniTFGPTModel, AutoModelForCausalLM: MiniTFGPTForCausalLM},
    MiniTFEncoderConfig: {
        AutoModel: MiniTFEncoderModel,
        AutoModelForSequenceClassification: MiniTFEncoderForSequenceClassification,
    },
    MiniTFSeq2SeqConfig: {AutoModel: MiniTFSeq2SeqModel, AutoModelForSeq2SeqLM: MiniTFSeq2SeqForConditionalGeneration},
}

for _config_class, _models in _AUTO_CLASSES.items():
    AutoConfig.register(_config_class.model_type, _config_class, exist_ok=True)
    # Saving also copies the code and writes `auto_map`, so users without hf_minitf can load the folder.
    _config_class.register_for_auto_class()
    for _auto_class, _model_class in _models.items():
        _auto_class.register(_config_class, _model_class, exist_ok=True)
        _model_class.register_for_auto_class(_auto_class.__name__)

AutoTokenizer.register(MiniTFSeq2SeqConfig, fast_tokenizer_class=MiniTFSeq2SeqTokenizer, exist_ok=True)
MiniTFSeq2SeqTokenizer.register_for_auto_class("AutoTokenizer")
# transformers 5 refuses the task names "translation*" and "text2text-generation": this one is ours.
PIPELINE_REGISTRY.register_pipeline(
    TRANSLATION_TASK, pipeline_class=MiniTFTranslationPipeline, pt_model=AutoModelForSeq2SeqLM, type="text"
)

__all__ = [
    "MiniTFGPTConfig",
    "MiniTFGPTModel",
    "MiniTFGPTForCausalLM",
    "MiniTFGPTPreTrainedModel",
    "MiniTFEncoderConfig",
    "MiniTFEncoderModel",
    "MiniTFEncoderForSequenceClassification",
    "MiniTFEncoderPreTrainedModel",
    "MiniTFSeq2SeqConfig",
    "MiniTFSeq2SeqModel",
    "MiniTFSeq2SeqForConditionalGeneration",
    "MiniTFSeq2SeqPreTrainedModel",
    "MiniTFSeq2SeqTokenizer",
    "MiniTFTranslationPipeline",
    "TRANSLATION_TASK",
    "char_tokenizer",
    "train_bpe_tokenizer",
    "load_bpe_tokenizer",
    "miniembed_tokenizer",
    "train_wordlevel_tokenizer",
    "train_encoder_bpe_tokenizer",
    "train_translation_tokenizers",
    "save_sentence_transformer",
    "update_model_card",
    "push_folder",
    "PushError",
]
