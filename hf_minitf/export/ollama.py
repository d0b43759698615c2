"""Export a MiniTF GPT as a folder for Ollama: the GGUF file of `export_gguf`, a Modelfile and a card.

The Modelfile's TEMPLATE is the tokenizer's chat template in Ollama's Go template syntax. Templates that wrap each
message by its role (a text before and after the content, the same for every message of that role) and end with a
generation prompt translate exactly: the package's chatml and simple, FrawdLLM's. The wrapping is read by rendering
the Jinja template itself (`apply_chat_template`) on conversations whose contents are markers, and checked on every
message of them, so a template that writes anything else (a text only at the start, a default system message) is
refused rather than translated wrongly.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2.exceptions import TemplateError

from hf_minitf.cards import export_card, export_card_data
from hf_minitf.catalog.exports import GGUF_AGREEMENT_TEXT, OLLAMA_GGUF_FILE, OLLAMA_MODELFILE
from hf_minitf.export.formats.ollama import FORMAT
from hf_minitf.export.gguf import GGUFExport, write_gguf_report
from hf_minitf.export.source import ExportRefused, open_source
from hf_minitf.safety.output_folders import atomic_output_dir, output_folder

# The conversations a template is read on, the first it renders: with a system message, or without (FrawdLLM's).
PROBE_ROLES = (("system", "user", "assistant", "user", "assistant"), ("user", "assistant", "user", "assistant"))
# The conversations the reading is checked on (those the template renders): with and without a system message, one
# exchange or several, ending with the user or the assistant.
CHECKED_CONVERSATIONS = (
    ("user",),
    ("user", "assistant"),
    ("user", "assistant", "user"),
    ("system", "user"),
    ("system", "user", "assistant", "user"),
    *PROBE_ROLES,
)
# Stand-ins for the messages' contents: private-use characters, which no template writes itself.
MARKERS = [chr(0xE000 + index) for index in range(len(PROBE_ROLES[0]))]


@dataclass(frozen=True)
class ChatWrapping:
    """A chat template read as: each message is `before[role] + content + after[role]`, then `generation_prompt`."""

    roles: dict[str, tuple[str, str]]
    generation_prompt: str

    def render(self, roles: tuple[str, ...], generation_prompt: bool) -> str:
        """The text of a conversation with the `MARKERS` as contents, as this reading says the template writes it."""
        text = "".join(self.roles[role][0] + marker + self.roles[role][1] for role, marker in zip(roles, MARKERS))
        return text + (self.generation_prompt if generation_prompt else "")

    def go_template(self) -> str:
        """The same in Ollama's Go template syntax (over `.Messages`)."""
        branches = "".join(
            f'{{{{ {"if" if index == 0 else "else if"} eq .Role "{role}" }}}}{before}{{{{ .Content }}}}{after}'
            for index, (role, (before, after)) in enumerate(self.roles.items())
        )
        return f"{{{{- range .Messages }}}}{branches}{{{{ end }}}}{{{{ end }}}}{self.generation_prompt}"


def _render(tokenizer, roles: tuple[str, ...], generation_prompt: bool) -> str | None:
    messages = [{"role": role, "content": marker} for role, marker in zip(roles, MARKERS)]
    try:
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)
    except (TemplateError, ValueError):
        return None


def chat_wrapping(tokenizer) -> ChatWrapping:
    """How the tokenizer's chat template wraps messages (`ChatWrapping`); ExportRefused when it does not wrap each
    message by its role alone."""
    refused = (
        "cannot translate the tokenizer's chat template to an Ollama TEMPLATE: {why}; Ollama's Go templates are "
        "written here only for templates that wrap each message by its role (chatml, simple, FrawdLLM's). Write the "
        "Modelfile's TEMPLATE by hand, or export the GGUF alone (`minitf export gguf`)."
    )
    roles = next((roles for roles in PROBE_ROLES if _render(tokenizer, roles, False) is not None), None)
    if roles is None:
        raise ExportRefused(refused.format(why="it renders no user/assistant conversation"))
    wrapping: dict[str, tuple[str, str]] = {}
    rendered = ""
    for count in range(1, len(roles) + 1):
        text = _render(tokenizer, roles[:count], False)
        if text is None or not text.startswith(rendered):
            raise ExportRefused(refused.format(why="a message changes what the template wrote before it"))
        before, marker, after = text[len(rendered) :].partition(MARKERS[count - 1])
        role = roles[count - 1]
        if not marker or wrapping.setdefault(role, (before, after)) != (before, after):
            raise ExportRefused(refused.format(why=f"its {role} messages are not all wrapped the same way"))
        rendered = text
    first_user = roles.index("user") + 1
    without, with_prompt = _render(tokenizer, roles[:first_user], False), _render(tokenizer, roles[:first_user], True)
    if without is None or with_prompt is None or not with_prompt.startswith(without):
        raise ExportRefused(refused.format(why="its generation prompt changes the conversation before it"))
    result = ChatWrapping(wrapping, with_prompt[len(without) :])
    for conversation in CHECKED_CONVERSATIONS:  # a text written once (a header), or anywhere else, shows here
        for generation_prompt in (False, True):
            text = _render(tokenizer, conversation, generation_prompt)
            if text is not None and text != result.render(conversation, generation_prompt):
                raise ExportRefused(
                    refused.format(why=f"it writes {' + '.join(conversation)} otherwise than message by message")
                )
    literal = "".join([*(before + after for before, after in wrapping.values()), result.generation_prompt])
    if "{{" in literal or '"""' in result.go_template():
        raise ExportRefused(refused.format(why="its text holds '{{' or '\"\"\"', which a Modelfile TEMPLATE cannot"))
    return result


def stop_strings(tokenizer, wrapping: ChatWrapping | None) -> list[str]:
    """Where Ollama stops: the special token that ends an assistant message (the longest one the text after an
    answer starts with), then the EOS token."""
    stops = []
    if wrapping is not None and "assistant" in wrapping.roles:
        after_answer = wrapping.roles["assistant"][1]
        tokens = {*tokenizer.all_special_tokens, *map(str, tokenizer.added_tokens_decoder.values())}
        ending = [token for token in sorted(tokens, key=len, reverse=True) if token and after_answer.startswith(token)]
        stops += ending[:1]
    if tokenizer.eos_token is not None:
        stops.append(str(tokenizer.eos_token))
    return list(dict.fromkeys(stops))


def modelfile_text(gguf_file: str, wrapping: ChatWrapping | None, stops: list[str], num_ctx: int) -> str:
    """The Modelfile: FROM the GGUF beside it, TEMPLATE (when there is a chat template), stops and context."""
    lines = [f"FROM ./{gguf_file}"]
    if wrapping is not None:
        lines.append(f'TEMPLATE """{wrapping.go_template()}"""')
    lines += [f"PARAMETER stop {json.dumps(stop, ensure_ascii=False)}" for stop in stops]
    lines.append(f"PARAMETER num_ctx {num_ctx}")
    return "\n".join(lines) + "\n"


def ollama_name(source: str) -> str:
    """A model name for `ollama create` from the source's folder or repo name (lowercase letters, digits, . _ -)."""
    name = re.sub(r"[^a-z0-9._-]+", "-", Path(str(source).rstrip("/")).name.lower()).strip("-._")
    return name or "minitf"


@dataclass
class OllamaExport:
    """What `export_ollama` wrote: the folder, the GGUF export, the name to give `ollama create`."""

    path: Path
    gguf: GGUFExport
    name: str
    modelfile: str = OLLAMA_MODELFILE
    notes: list[str] = field(default_factory=list)


def _card(
    source: str, written: GGUFExport, wrapping: ChatWrapping | None, stops: list[str], name: str, num_ctx: int, data
) -> str:
    from hf_minitf.safety.output_folders import size_text

    counts: dict[str, int] = {}
    for tensor in written.types.values():
        counts[tensor.type] = counts.get(tensor.type, 0) + 1
    card = export_card(
        FORMAT.card_template,
        library_name="gguf",
        tags=["gguf", "ollama"],
        carried=data,
        source=source,
        gguf_file=OLLAMA_GGUF_FILE,
        dtype=written.dtype,
        size=size_text(written.size),
        modelfile=OLLAMA_MODELFILE,
        name=name,
        template=wrapping is not None,
        roles=", ".join(wrapping.roles) if wrapping else "",
        stops=", ".join(f"`{stop}`" for stop in stops),
        num_ctx=num_ctx,
        types_line="; ".join(f"{type_name}: {count} tensors" for type_name, count in sorted(counts.items())),
        fallbacks=written.fallbacks,
        quantizer=written.quantizer,
        agreement=written.agreement,
    )
    return f"{card}\n"


def export_ollama(
    source: str | os.PathLike,
    out: str | os.PathLike,
    *,
    dtype: str = "q8_0",
    overwrite: bool = False,
    revision: str | None = None,
    license: str | None = None,
    agreement_text: str | None = GGUF_AGREEMENT_TEXT,
) -> OllamaExport:
    """Write the MiniTF GPT `source` as the folder `out` for `ollama create NAME -f out/Modelfile`: `model.gguf`
    (`export_gguf_report` at `dtype`, its agreement measured on `agreement_text` unless None), the `Modelfile` and
    README.md. Raises ExportRefused for what `export_gguf` refuses and for a chat template that has no exact
    Ollama TEMPLATE (see `chat_wrapping`); `out` is written whole or not at all."""
    from hf_minitf.catalog.limits import GGUF_DTYPES
    from hf_minitf.modeling.configuration_minitf_gpt import MiniTFGPTConfig

    if dtype not in GGUF_DTYPES:
        raise ValueError(f"dtype must be one of {GGUF_DTYPES}, got {dtype!r}.")
    opened = open_source(source, revision)
    target = output_folder(out, overwrite=overwrite, inputs=[opened.folder] if opened.repo_id is None else [])
    if opened.family != "gpt":
        raise ExportRefused(
            f"cannot export to Ollama: model_type={opened.config['model_type']!r}: the Ollama export covers the GPT "
            "family (llama.cpp's gpt2 and gptneox)."
        )
    tokenizer = opened.load_tokenizer()
    config: Any = MiniTFGPTConfig.from_pretrained(opened.folder)
    wrapping = chat_wrapping(tokenizer) if tokenizer.chat_template else None
    stops = stop_strings(tokenizer, wrapping)
    name = ollama_name(opened.repo_id or str(source))
    with atomic_output_dir(target) as work:
        written = write_gguf_report(opened, work / OLLAMA_GGUF_FILE, dtype, license, agreement_text)
        modelfile = modelfile_text(OLLAMA_GGUF_FILE, wrapping, stops, config.max_position_embeddings)
        (work / OLLAMA_MODELFILE).write_text(modelfile, encoding="utf-8")
        data = export_card_data(opened.folder, license) | {"base_model": opened.repo_id}
        card = _card(str(source), written, wrapping, stops, name, config.max_position_embeddings, data)
        (work / "README.md").write_text(card, encoding="utf-8")
    written.path = Path(out) / OLLAMA_GGUF_FILE
    notes = (
        [] if wrapping else ["the tokenizer has no chat template: the Modelfile has no TEMPLATE (text continuation)"]
    )
    return OllamaExport(Path(out), written, name, notes=notes)


__all__ = ["ChatWrapping", "OllamaExport", "chat_wrapping", "export_ollama", "modelfile_text", "stop_strings"]
