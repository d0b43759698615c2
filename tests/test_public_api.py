"""The public API holds: every name users import from `hf_minitf` is there (a name that disappears fails here
first), typed for type checkers as it is at run time, and names that moved still work from their old path for a
release, with a DeprecationWarning."""

import ast
import importlib
import warnings
from pathlib import Path

import pytest

import hf_minitf

# The public names, as users import them (README, docs). Removing one is a breaking change: deprecate it first.
PUBLIC_NAMES = {
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
    "register",
    "set_chat_template",
    "TrainSettings",
    "TrainingResult",
    "train_gpt",
    "train_encoder",
    "train_seq2seq",
}


def test_every_public_name_is_exported_and_importable():
    assert set(hf_minitf.__all__) == PUBLIC_NAMES
    for name in PUBLIC_NAMES:
        assert getattr(hf_minitf, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'train_everything'"):
        hf_minitf.train_everything  # noqa: B018


def test_type_checkers_see_the_names_the_package_exports():
    """The TYPE_CHECKING imports of hf_minitf/__init__.py name each public name from the module it is loaded from."""
    tree = ast.parse(Path(hf_minitf.__file__).read_text(encoding="utf-8"))
    (block,) = [node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"]
    typed = {
        (alias.asname or alias.name): (node.module, alias.name)
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert set(typed) == PUBLIC_NAMES
    for name, (module, attribute) in typed.items():
        assert getattr(importlib.import_module(module), attribute) is getattr(hf_minitf, name), name


@pytest.mark.parametrize("name", ["TrainSettings", "TrainingResult", "train_gpt", "train_encoder", "train_seq2seq"])
def test_training_names_from_their_old_path_warn_and_work(name):
    with pytest.warns(DeprecationWarning, match=f"from hf_minitf import {name}"):
        from_old_path = getattr(importlib.import_module("hf_minitf.training"), name)
    assert from_old_path is getattr(hf_minitf, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from hf_minitf import TrainSettings  # noqa: F401 (the new path warns nothing)
