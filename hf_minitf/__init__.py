"""hf_minitf: small from-scratch transformers as first-class Hugging Face models.

Importing this package registers every MiniTF config, model and tokenizer with the transformers Auto classes.
"""

from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

from .configuration_minitf_gpt import MiniTFGPTConfig
from .modeling_minitf_gpt import MiniTFGPTForCausalLM, MiniTFGPTModel, MiniTFGPTPreTrainedModel

__version__ = "0.1.0"

AutoConfig.register(MiniTFGPTConfig.model_type, MiniTFGPTConfig, exist_ok=True)
AutoModel.register(MiniTFGPTConfig, MiniTFGPTModel, exist_ok=True)
AutoModelForCausalLM.register(MiniTFGPTConfig, MiniTFGPTForCausalLM, exist_ok=True)

# Saving a model also copies its code and writes `auto_map`, so users without hf_minitf can load it.
MiniTFGPTConfig.register_for_auto_class()
MiniTFGPTModel.register_for_auto_class("AutoModel")
MiniTFGPTForCausalLM.register_for_auto_class("AutoModelForCausalLM")

# --- encoder family (MiniTFEncoder*) registration goes here ---

# --- seq2seq family (MiniTFSeq2Seq*) registration goes here ---

__all__ = [
    "MiniTFGPTConfig",
    "MiniTFGPTModel",
    "MiniTFGPTForCausalLM",
    "MiniTFGPTPreTrainedModel",
]
