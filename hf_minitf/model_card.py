"""Model cards of MiniTF folders, built with huggingface_hub's `ModelCard` / `ModelCardData`.

Every way a model leaves the machine writes one: `save_pretrained` and `push_to_hub` of every MiniTF model (through
`ModelCardMixin`), `save_sentence_transformer`, `minitf convert`, `minitf push` and the training commands
(`update_model_card`). A card is read from the folder itself (config.json, the safetensors headers, modules.json),
so the same code serves a fresh save, a converted folder and a folder about to be pushed. The sections this
module writes sit between `<!-- minitf:NAME -->` markers and are rewritten in place; everything else in an
existing card (a conversion's origin notes, text a user added) is kept.

The modeling files import this module, so it is copied beside saved models as remote code: it imports only the
standard library, huggingface_hub and siblings, and needs no package data.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import re
import shutil
import struct
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from .file_safety import load_model_card

README = "README.md"
MINITF_TAG = "minitf"
PLACEHOLDER_MODEL_ID = "path/to/this/folder"
SENTENCE_TRANSFORMERS_PLACEHOLDER = "sentence_transformers_model_id"
FAMILIES = {"minitf_gpt": "MiniTF GPT", "minitf_encoder": "MiniTF encoder", "minitf_seq2seq": "MiniTF seq2seq"}
# The pipeline tag of each model head, by the end of its class name.
PIPELINE_TAGS = {
    "ForCausalLM": "text-generation",
    "ForSequenceClassification": "text-classification",
    "ForConditionalGeneration": "translation",
    "Model": "feature-extraction",
}
# The model class a converted folder of each family holds.
DEFAULT_ARCHITECTURES = {
    "gpt": "MiniTFGPTForCausalLM", "encoder": "MiniTFEncoderModel", "seq2seq": "MiniTFSeq2SeqForConditionalGeneration",
}
TRANSLATION_PIPELINE_FILE = "pipeline_minitf_translation.py"
_SECTION = "<!-- minitf:{name} -->\n{text}\n<!-- /minitf:{name} -->"
_SENTENCE_TRANSFORMER_CALL = re.compile(r'SentenceTransformer\("([^"]*)"(?:, trust_remote_code=True)?\)')


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _count_safetensors_parameters(folder: Path) -> int | None:
    """Number of stored weights (tied weights are stored once), from the safetensors headers alone."""
    index = folder / "model.safetensors.index.json"
    files = sorted(set(_read_json(index)["weight_map"].values())) if index.is_file() else ["model.safetensors"]
    total = 0
    for name in files:
        path = folder / name
        if not path.is_file():
            return None
        with open(path, "rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(length))
        for key, entry in header.items():
            if key != "__metadata__":
                count = 1
                for size in entry["shape"]:
                    count *= size
                total += count
    return total


class FolderFacts:
    """What a card says about a saved MiniTF folder, read from its files."""

    def __init__(self, folder: str | os.PathLike, num_parameters: int | None = None) -> None:
        self.folder = Path(folder)
        config_path = self.folder / "config.json"
        if not config_path.is_file():
            raise ValueError(f"{self.folder} has no config.json; save the model with save_pretrained first.")
        self.config: dict[str, Any] = _read_json(config_path)
        self.model_type: str = self.config.get("model_type", "")
        architectures = self.config.get("architectures") or []
        self.architecture: str = architectures[0] if architectures else ""
        self.sentence_transformers = (self.folder / "modules.json").is_file()
        self.num_parameters = num_parameters or _count_safetensors_parameters(self.folder)

    @property
    def family(self) -> str:
        return FAMILIES.get(self.model_type, self.model_type)

    @property
    def head(self) -> str:
        """The end of the class name: ForCausalLM, ForSequenceClassification, ForConditionalGeneration or Model."""
        return next((head for head in PIPELINE_TAGS if self.architecture.endswith(head)), "Model")

    @property
    def pipeline_tag(self) -> str:
        return "sentence-similarity" if self.sentence_transformers else PIPELINE_TAGS[self.head]

    @property
    def library_name(self) -> str:
        return "sentence-transformers" if self.sentence_transformers else "transformers"

    @property
    def tags(self) -> list[str]:
        tags = [MINITF_TAG, self.model_type]
        if self.sentence_transformers:
            tags += ["sentence-transformers", "feature-extraction"]
        return tags


def _positions(config: dict[str, Any]) -> str:
    kind = config.get("position_embedding_type", "sinusoidal")
    if kind == "rope":
        layout = "interleaved pairs" if config.get("rope_interleaved", True) else "rotate-half"
        return f"rotary (RoPE, {layout}, base {config.get('rope_theta', 10000.0):g})"
    if kind == "learned":
        return f"learned, {config['max_position_embeddings']} positions"
    return f"sinusoidal, up to {config['max_position_embeddings']} positions"


def architecture_section(facts: FolderFacts) -> str:
    """The table of sizes: parameters, dims, layers, heads, positions, vocabulary."""
    config = facts.config
    if facts.model_type == "minitf_seq2seq":
        vocab = f"source {config['src_vocab_size']:,}, target {config['vocab_size']:,}"
        layers = f"{config['num_hidden_layers']} encoder + {config['num_hidden_layers']} decoder"
    else:
        vocab = f"{config['vocab_size']:,}"
        layers = str(config["num_hidden_layers"])
    rows = [
        ("architecture", f"{facts.family} (`{facts.architecture}`, model_type `{facts.model_type}`)"),
        ("parameters", f"{facts.num_parameters:,}" if facts.num_parameters is not None else "unknown"),
        ("hidden size", str(config["hidden_size"])),
        ("feed-forward size", str(config.get("intermediate_size", 4 * config["hidden_size"]))),
        ("layers", layers),
        ("attention heads", str(config["num_attention_heads"])),
        ("positions", _positions(config)),
        ("vocabulary", vocab),
    ]
    if facts.sentence_transformers:
        rows.append(("sentence embedding",
                     f"masked mean of the last hidden states, L2-normalized ({config['hidden_size']} dimensions)"))
    table = "\n".join(f"| {name} | {value} |" for name, value in rows)
    return f"## Model\n\n| | |\n|---|---|\n{table}"


def _snippets(facts: FolderFacts, model_id: str, prompt: str) -> tuple[str, str]:
    """Python code using the model, with hf_minitf installed and without it (`trust_remote_code=True`)."""
    model, text = json.dumps(model_id), json.dumps(prompt)
    positions = facts.config.get("max_position_embeddings", 64)
    new_tokens = min(20, max(1, positions // 2))  # leaves room for the prompt in the position table
    if facts.sentence_transformers:
        body = (f"embeddings = model.encode([{text}, \"Another sentence.\"])\n"
                "print(embeddings.shape, model.similarity(embeddings, embeddings))")
        return (f"import hf_minitf  # registers the MiniTF classes\nfrom sentence_transformers import "
                f"SentenceTransformer\n\nmodel = SentenceTransformer({model})\n{body}",
                f"from sentence_transformers import SentenceTransformer\n\n"
                f"model = SentenceTransformer({model}, trust_remote_code=True)\n{body}")
    if facts.head == "ForCausalLM":
        code = ("{imports}from transformers import AutoModelForCausalLM, AutoTokenizer\n\n"
                f"tokenizer = AutoTokenizer.from_pretrained({model}{{trust}})\n"
                f"model = AutoModelForCausalLM.from_pretrained({model}{{trust}})\n"
                f"inputs = tokenizer({text}, return_tensors=\"pt\")\n"
                f"output_ids = model.generate(**inputs, max_new_tokens={new_tokens}, do_sample=False)\n"
                "print(tokenizer.decode(output_ids[0], skip_special_tokens=True))")
    elif facts.head == "ForSequenceClassification":
        code = ("{imports}from transformers import pipeline\n\n"
                f"classify = pipeline(\"text-classification\", model={model}{{trust}})\n"
                f"print(classify({text}))")
    elif facts.head == "ForConditionalGeneration":
        new_tokens = min(40, positions - 1)  # the decoder's start token takes one position
        with_package = ("import hf_minitf  # registers the MiniTF classes\n"
                        "from transformers import AutoModelForSeq2SeqLM, AutoTokenizer\n\n"
                        f"tokenizer = AutoTokenizer.from_pretrained({model})\n"
                        f"model = AutoModelForSeq2SeqLM.from_pretrained({model})\n"
                        f"inputs = tokenizer({text}, return_tensors=\"pt\")\n"
                        f"output_ids = model.generate(**inputs, max_new_tokens={new_tokens})\n"
                        "print(tokenizer.batch_decode(output_ids, skip_special_tokens=True))")
        without = ("from transformers import pipeline\n\n"
                   f"translate = pipeline(\"minitf-translation\", model={model}, trust_remote_code=True)\n"
                   f"print(translate({text}, max_new_tokens={new_tokens}))")
        return with_package, without
    else:
        code = ("import torch\n{imports}from transformers import AutoModel, AutoTokenizer\n\n"
                f"tokenizer = AutoTokenizer.from_pretrained({model}{{trust}})\n"
                f"model = AutoModel.from_pretrained({model}{{trust}})\n"
                f"inputs = tokenizer([{text}], return_tensors=\"pt\")\n"
                "with torch.no_grad():\n    outputs = model(**inputs)\n"
                "print(outputs.last_hidden_state.shape)")
    return (code.format(imports="import hf_minitf  # registers the MiniTF classes\n", trust=""),
            code.format(imports="", trust=", trust_remote_code=True"))


def usage_section(facts: FolderFacts, model_id: str, prompt: str = "Hello") -> str:
    """How to use the model: with hf_minitf, and anywhere transformers is installed (the code ships alongside)."""
    with_package, without = _snippets(facts, model_id, prompt)
    return ("## Use\n\nWith `hf_minitf` installed (`pip install hf-minitf`):\n\n"
            f"```python\n{with_package}\n```\n\n"
            "Without it: the model code is in this repository, so `trust_remote_code=True` loads it with "
            "transformers alone:\n\n"
            f"```python\n{without}\n```")


def _set_section(text: str, name: str, content: str) -> str:
    """Replace the marked section `name` of a card body, or append it."""
    pattern = re.compile(rf"<!-- minitf:{name} -->.*?<!-- /minitf:{name} -->\n?", re.DOTALL)
    section = _SECTION.format(name=name, text=content.strip()) + "\n"
    if pattern.search(text):
        return pattern.sub(lambda _: section, text, count=1)
    return text.rstrip() + "\n\n" + section


def _card(data: ModelCardData, text: str) -> ModelCard:
    """A card from validated metadata and a markdown body."""
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{text.lstrip()}")


def _section_text(text: str, name: str) -> str | None:
    match = re.search(rf"<!-- minitf:{name} -->\n(.*?)\n<!-- /minitf:{name} -->", text, re.DOTALL)
    return match.group(1) if match else None


def _model_id_in(card: ModelCard) -> str | None:
    """The model id the card's usage section names, if it has one."""
    usage = _section_text(card.text, "usage") or ""
    match = re.search(r'(?:from_pretrained|SentenceTransformer|model=)\(?("(?:[^"\\]|\\.)*")', usage)
    return json.loads(match.group(1)) if match else None


def is_minitf_card(card: ModelCard) -> bool:
    return MINITF_TAG in (card.data.tags or [])


def _is_blank_card(card: ModelCard) -> bool:
    """transformers' placeholder card (what `push_to_hub` uploads when a repo has none)."""
    return "[More Information Needed]" in card.text or not card.text.strip()


def _load_card(path: Path) -> ModelCard | None:
    return load_model_card(path, ignore_metadata_errors=True) if path.is_file() else None


def build_model_card(folder: str | os.PathLike, *, base: ModelCard | None = None, model_id: str | None = None,
                     title: str | None = None, summary: str | None = None, prompt: str = "Hello",
                     license: str | None = None, base_model: str | list[str] | None = None,
                     original_project: str | None = None, source_checkpoint: str | os.PathLike | None = None,
                     extra_tags: list[str] | None = None, num_parameters: int | None = None) -> ModelCard:
    """The card of the saved MiniTF folder `folder`, starting from `base` (an existing card) when given.

    Metadata comes from `ModelCardData` (library, pipeline tag, tags, license, base model, the source checkpoint's
    file name and sha256 for conversions); the architecture table and usage snippets are regenerated, other
    text of `base` is kept. `model_id` is what the snippets load (default: the id `base` names, else the folder).
    """
    facts = FolderFacts(folder, num_parameters)
    if base is not None and not is_minitf_card(base) and _is_blank_card(base):
        extra_tags = [*(base.data.tags or []), *(extra_tags or [])]
        base = None
    if base is None:
        name = title or f"{facts.family} ({facts.architecture})"
        intro = summary or (f"A {facts.family} model saved with hf_minitf: a first-class Hugging Face model that "
                            "loads with the transformers Auto classes.")
        card = _card(ModelCardData(), f"# {name}\n\n{intro}\n")
    else:
        card = ModelCard(str(base))
    data = card.data
    data.library_name = facts.library_name
    data.pipeline_tag = facts.pipeline_tag
    tags = list(data.tags or [])
    for tag in [*facts.tags, *([original_project.lower()] if original_project else []), *(extra_tags or [])]:
        if tag not in tags:
            tags.append(tag)
    data.tags = tags
    if license is not None:
        data.license = license
    if base_model is not None:
        data.base_model = base_model
    if source_checkpoint is not None:
        source = Path(source_checkpoint)
        data.source_checkpoint = {"file": source.name, "sha256": file_sha256(source)}
    # sentence-transformers' own push_to_hub swaps its placeholder for the repo id in a card it reuses.
    default_id = SENTENCE_TRANSFORMERS_PLACEHOLDER if facts.sentence_transformers else str(facts.folder)
    model_id = model_id or (_model_id_in(base) if base is not None else None) or default_id
    text = _set_section(card.text, "architecture", architecture_section(facts))
    if facts.sentence_transformers:  # sentence-transformers' own snippet: this repo, and the model code's flag
        text = _SENTENCE_TRANSFORMER_CALL.sub(
            lambda match: f'SentenceTransformer("{model_id}", trust_remote_code=True)', text
        )
    text = _set_section(text, "usage", usage_section(facts, model_id, prompt))
    return _card(data, text)


def save_card(card: ModelCard, path: str | os.PathLike) -> None:
    """Save `card` to `path` whole or not at all: written beside it under a temporary name, then renamed over it,
    so a failed write (disk full) leaves the previous card as it was and no temporary file behind."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.writing-{os.getpid()}")
    try:
        card.save(temporary)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_model_card(folder: str | os.PathLike, *, source_folder: str | os.PathLike | None = None,
                     **card_options: Any) -> ModelCard:
    """Write (or update in place) `folder/README.md` for a saved MiniTF folder and return the card.

    A MiniTF card already in `folder` is updated, never replaced; else a MiniTF card in `source_folder` (the
    folder the model was loaded from) is carried over; else the card found in `folder` (sentence-transformers'
    card) gets the MiniTF sections; else a new card is made (keeping the tags of transformers' blank card).
    """
    card = _folder_card(folder, source_folder, **card_options)
    save_card(card, Path(folder) / README)
    return card


def _folder_card(folder: str | os.PathLike, source_folder: str | os.PathLike | None, **card_options: Any) -> ModelCard:
    """The card `write_model_card` writes, not yet saved."""
    folder = Path(folder)
    existing = _load_card(folder / README)
    source = _load_card(Path(source_folder) / README) if source_folder and Path(source_folder).is_dir() else None
    if existing is not None and is_minitf_card(existing):
        base = existing
    elif source is not None and is_minitf_card(source):
        base = source
        card_options["extra_tags"] = [*(existing.data.tags or []), *card_options.get("extra_tags", [])] \
            if existing is not None else card_options.get("extra_tags")
    else:
        base = existing
    return build_model_card(folder, base=base, **card_options)


def update_model_card(folder: str | os.PathLike, *, eval_results: dict[str, float] | None = None,
                      dataset_name: str | None = None, image: str | None = None, extra_markdown: str | None = None,
                      license: str | None = None, model_id: str | None = None) -> None:
    """Write or update `folder/README.md` of a saved MiniTF folder, keeping what an existing card says.

    `eval_results` (metric name -> value, measured on `dataset_name`) go into the `model-index` metadata and a
    results table; `image` (a file in the folder, e.g. a loss curve PNG) and `extra_markdown` are shown under it.
    The card is saved once, whole (`save_card`): a failed write leaves the previous README.md as it was.
    """
    if image is not None and not (Path(folder) / image).is_file():
        raise ValueError(f"image {image!r} is not a file in {folder}; save it there first, then name it relative.")
    card = _folder_card(folder, None, license=license, model_id=model_id)
    if eval_results is None and image is None and extra_markdown is None:
        save_card(card, Path(folder) / README)
        return
    data = card.data
    if eval_results:
        dataset = dataset_name or "held-out split"
        data.model_name = data.model_name or Path(model_id or Path(folder).resolve()).name
        task = data.pipeline_tag or "text-generation"
        data.eval_results = [
            EvalResult(task_type=task, dataset_type=re.sub(r"[^a-z0-9_.-]+", "-", dataset.lower()),
                       dataset_name=dataset, metric_type=name, metric_name=name, metric_value=float(value))
            for name, value in eval_results.items()
        ]
    parts = ["## Results"]
    if eval_results:
        rows = "\n".join(f"| {name} | {value:.4g} |" for name, value in eval_results.items())
        parts.append(f"Measured on {dataset_name or 'a held-out split'}:\n\n| metric | value |\n|---|---|\n{rows}")
    if image is not None:
        parts.append(f"![{Path(image).stem}]({Path(image).as_posix()})")
    if extra_markdown:
        parts.append(extra_markdown.strip())
    text = _set_section(card.text, "results", "\n\n".join(parts))
    save_card(_card(data, text), Path(folder) / README)


def add_translation_pipeline(folder: str | os.PathLike) -> bool:
    """Make `minitf-translation` travel with a saved seq2seq folder: the pipeline file beside the model code
    and `custom_pipelines` in config.json, so `pipeline("minitf-translation", model=..., trust_remote_code=True)`
    works where hf_minitf is not installed. Returns False where the pipeline code is not available."""
    try:
        module = importlib.import_module(f"{__package__}.{Path(TRANSLATION_PIPELINE_FILE).stem}")
    except ImportError:
        return False
    folder = Path(folder)
    shutil.copyfile(module.__file__, folder / TRANSLATION_PIPELINE_FILE)
    config = _read_json(folder / "config.json")
    config["custom_pipelines"] = {module.TASK: {
        "impl": f"{Path(TRANSLATION_PIPELINE_FILE).stem}.{module.MiniTFTranslationPipeline.__name__}",
        "pt": ["AutoModelForSeq2SeqLM"], "tf": [], "type": "text",
    }}
    with open(folder / "config.json", "w", encoding="utf-8") as handle:
        json.dump(config, handle, indent=2, sort_keys=True)
        handle.write("\n")
    return True


def prepare_upload(folder: str | os.PathLike, repo_id: str, *, source_folder: str | os.PathLike | None = None,
                   license: str | None = None) -> None:
    """Make a folder about to be uploaded to `repo_id` complete: its card names the repo, a seq2seq model
    carries its translation pipeline. Folders of other models are left as they are."""
    if _read_json(Path(folder) / "config.json").get("model_type") not in FAMILIES:
        return
    write_model_card(folder, source_folder=source_folder, model_id=repo_id, license=license)
    if FolderFacts(folder).head == "ForConditionalGeneration":
        add_translation_pipeline(folder)


class ModelCardMixin:
    """Gives MiniTF models a card: `save_pretrained` writes README.md beside the weights, and `push_to_hub`
    uploads that card (named after the repo) instead of transformers' blank one."""

    def save_pretrained(self, save_directory: str | os.PathLike, *args, **kwargs) -> None:
        super().save_pretrained(save_directory, *args, **kwargs)
        if kwargs.get("is_main_process", True) and os.path.isfile(os.path.join(save_directory, "config.json")):
            write_model_card(save_directory, source_folder=self.name_or_path or None)

    def _upload_modified_files(self, working_dir: str | os.PathLike, repo_id: str, *args, **kwargs):
        prepare_upload(working_dir, repo_id, source_folder=self.name_or_path or None)
        return super()._upload_modified_files(working_dir, repo_id, *args, **kwargs)


def render_model_card(family: str, config: Any, *, title: str, summary: str, origin: str, num_parameters: int,
                      repo_id: str = PLACEHOLDER_MODEL_ID, prompt: str = "Hello", notes: str = "",
                      license: str | None = None, base_model: str | None = None,
                      original_project: str | None = None,
                      source_checkpoint: str | os.PathLike | None = None) -> str:
    """The card text of a converted model (`family`: gpt, encoder or seq2seq), before its folder exists.

    Used by `minitf convert`: the card gets the model's sizes from `config`, the texts given, and the source
    checkpoint's sha256 when `source_checkpoint` is given. An encoder is described as the SentenceTransformer
    folder the conversion writes.
    """
    import tempfile

    if family not in DEFAULT_ARCHITECTURES:
        raise ValueError(f"Unknown model family {family!r}; choose one of {sorted(DEFAULT_ARCHITECTURES)}.")
    config_dict = config.to_dict() if hasattr(config, "to_dict") else dict(config)
    config_dict["architectures"] = config_dict.get("architectures") or [DEFAULT_ARCHITECTURES[family]]
    with tempfile.TemporaryDirectory() as staging:
        staging_path = Path(staging)
        with open(staging_path / "config.json", "w", encoding="utf-8") as handle:
            json.dump(config_dict, handle)
        if family == "encoder":
            (staging_path / "modules.json").write_text("[]", encoding="utf-8")
        card = build_model_card(staging_path, model_id=repo_id, title=title, summary=summary, prompt=prompt,
                                license=license, base_model=base_model, original_project=original_project,
                                source_checkpoint=source_checkpoint, num_parameters=num_parameters)
    origin_text = f"## Origin\n\n{origin}" + (f"\n\n{notes}" if notes else "")
    text = _set_section(card.text, "origin", origin_text)
    return str(_card(card.data, text))


__all__ = [
    "ModelCardMixin", "add_translation_pipeline", "build_model_card", "file_sha256", "prepare_upload",
    "render_model_card", "save_card", "update_model_card", "write_model_card",
]
