"""What every export reads: a MiniTF folder (saved, trained or converted) or the Hub repo id of one.

A repository is downloaded through huggingface_hub with its data files only (JSON, safetensors, chat templates),
never its code, and the model is built from this package's own classes: exporting runs nothing from the source.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .hub_source import download_repo_files, looks_like_repo_id

# model_type -> family name
FAMILIES = {"minitf_gpt": "gpt", "minitf_encoder": "encoder", "minitf_seq2seq": "seq2seq"}
# What is downloaded from a Hub repository: everything a MiniTF folder holds except its code.
SOURCE_FILES = ("*.json", "*.safetensors", "*.jinja", "README.md", "*/*.json")


@dataclass
class MiniTFSource:
    """A MiniTF model folder on disk, with what the exports need to know about it."""

    folder: Path
    name: str  # the path or repo id the user gave, for the model card
    repo_id: str | None
    revision: str | None
    config: dict[str, Any]

    @property
    def family(self) -> str:
        return FAMILIES[self.config["model_type"]]

    def load_model(self):
        """The MiniTF model in eval mode (GPT: the causal LM; encoder: the bare encoder), built from this package's
        classes, so no code of the source runs."""
        from . import MiniTFEncoderModel, MiniTFGPTForCausalLM

        model_class = {"gpt": MiniTFGPTForCausalLM, "encoder": MiniTFEncoderModel}[self.family]
        return model_class.from_pretrained(self.folder, trust_remote_code=False).eval()

    def load_tokenizer(self):
        from transformers import AutoTokenizer

        if not (self.folder / "tokenizer.json").is_file():
            raise ValueError(f"{self.name} has no tokenizer.json; export needs the model's tokenizer beside it "
                             "(save it with tokenizer.save_pretrained into the folder).")
        return AutoTokenizer.from_pretrained(self.folder, trust_remote_code=False)

    def load_generation_config(self):
        """The folder's generation config, or None."""
        from transformers import GenerationConfig

        if not (self.folder / "generation_config.json").is_file():
            return None
        return GenerationConfig.from_pretrained(self.folder)


def open_source(source: str | Path, revision: str | None = None) -> MiniTFSource:
    """The MiniTF folder `source` names (a local folder, or a Hub repo id `owner/name` downloaded without its code).

    Raises a ValueError saying what is wrong: no such folder, no config.json, not a MiniTF model.
    """
    name = str(source)
    repo_id = None
    if looks_like_repo_id(source):
        repo_id = name
        folder = download_repo_files(repo_id, SOURCE_FILES, revision)
    elif revision is not None:
        raise ValueError(f"--revision applies to a Hub repo id, but {name} is a local path.")
    else:
        folder = Path(source)
        if not folder.is_dir():
            raise ValueError(f"{name} is neither a model folder nor a Hub repo id (owner/name); give the folder "
                             "written by minitf train, quickstart, convert or save_pretrained.")
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise ValueError(f"{name} has no config.json; it is not a saved model folder.")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    model_type = config.get("model_type")
    if model_type not in FAMILIES:
        raise ValueError(f"{name} holds a {model_type!r} model, not a MiniTF one (model_type minitf_gpt, "
                         "minitf_encoder or minitf_seq2seq); only MiniTF folders can be exported.")
    return MiniTFSource(folder=folder, name=name, repo_id=repo_id, revision=revision, config=config)


__all__ = ["FAMILIES", "MiniTFSource", "open_source"]
