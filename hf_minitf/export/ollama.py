"""Export a MiniTF GPT as a folder for Ollama: the GGUF file of `export_gguf`, a Modelfile and a card.

The Modelfile's TEMPLATE is the tokenizer's chat template in Ollama's Go template syntax. Templates that wrap each
message by its role (a text before and after the content, the same for every message of that role) and end with a
generation prompt translate exactly: the package's chatml and simple, FrawdLLM's. The wrapping is read by rendering
the Jinja template itself (`apply_chat_template`) on conversations whose contents are markers, and checked on every
message of them, so a template that writes anything else (a text only at the start, a default system message) is
refused rather than translated wrongly; so is one that changes each message's content (`| trim`, `| upper`), which
Ollama's `{{ .Content }}` passes unchanged (`content_transformations`, and the rendering of sample contents). The
template's texts are written so that neither Ollama's Modelfile parser (no escapes: a quoted value ends at the first
line end where it is closed) nor Go's text/template (an action opens at any `{{`) reads them otherwise (`go_text`).
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, nodes
from jinja2.exceptions import TemplateError, TemplateSyntaxError

from hf_minitf.cards import export_card, export_card_data, model_examples, source_naming
from hf_minitf.cards.facts import PIPELINE_TAGS
from hf_minitf.catalog.exports import GGUF_AGREEMENT_TEXT, OLLAMA_GGUF_FILE, OLLAMA_MODELFILE, OLLAMA_SAMPLING
from hf_minitf.export.formats.ollama import FORMAT
from hf_minitf.export.gguf import GGUFExport, check_gguf_dtype, write_gguf_report
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
# The contents the reading is checked on besides: spaces at both ends, every printable ASCII character, both cases, a
# line break, non-ASCII letters. A template that changes a message (`| trim`, `| upper`, `| replace`) writes these
# otherwise than its wrapping says, where Ollama's `{{ .Content }}` would pass them unchanged.
SAMPLE_CONTENTS = [f"  {marker} {''.join(map(chr, range(0x21, 0x7F)))}\n\u00e9\u00df \u00c9 \t" for marker in MARKERS]
# Where a template may use a message's content without changing it: joined to other text or chosen (the value still
# holds it), written, stored, or in a condition (what a condition computes from it is not written).
JOINING = (nodes.Add, nodes.Concat, nodes.CondExpr)
CONDITIONS = (nodes.Compare, nodes.Operand, nodes.Test, nodes.Not, nodes.And, nodes.Or)
UNCHANGED_CONTENT_USES = (*JOINING, *CONDITIONS, nodes.Output, nodes.Assign, nodes.If)


def _is_content(node: nodes.Node) -> bool:
    """`message.content` or `message['content']` (of any message)."""
    if isinstance(node, nodes.Getattr):
        return node.attr == "content"
    return isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const) and node.arg.value == "content"


def _use_name(node: nodes.Node) -> str:
    if isinstance(node, nodes.Filter):
        return f"| {node.name}"
    if isinstance(node, nodes.Getattr):
        return f".{node.attr}"
    if isinstance(node, nodes.Call):
        return ""  # the method it calls is named by its Getattr
    return "[...]" if isinstance(node, nodes.Getitem) else type(node).__name__.lower()


def content_transformations(template: str) -> list[str]:
    """What the Jinja chat template applies to a message's content besides writing it (`| trim`, `.upper`, `[...]`,
    in template order); empty when it writes contents unchanged or when Jinja alone cannot parse it (a template
    using transformers' own tags: the rendered check of `chat_wrapping` still applies)."""
    try:
        tree = Environment(extensions=["jinja2.ext.loopcontrols"]).parse(template)
    except TemplateSyntaxError:
        return []
    found: list[str] = []

    def derived(node: nodes.Node, condition: bool = False) -> bool:
        """Whether `node`'s value is a message's content, changed or not; a change outside a condition is recorded
        in `found`."""
        changed = False
        for name, value in node.iter_fields():
            tested = name == "test" and isinstance(node, (nodes.If, nodes.CondExpr))
            inside = condition or tested or isinstance(node, CONDITIONS)
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, nodes.Node):
                    changed |= derived(child, inside)
        if changed and not isinstance(node, UNCHANGED_CONTENT_USES):
            if not condition:
                found.append(_use_name(node))
            return True
        return _is_content(node) or (changed and isinstance(node, JOINING))

    derived(tree)
    return [name for name in dict.fromkeys(found) if name]


@dataclass(frozen=True)
class ChatWrapping:
    """A chat template read as: each message is `before[role] + content + after[role]`, then `generation_prompt`."""

    roles: dict[str, tuple[str, str]]
    generation_prompt: str

    def render(self, roles: tuple[str, ...], generation_prompt: bool, contents: list[str] = MARKERS) -> str:
        """The text of a conversation with `contents` (the `MARKERS`), as this reading says the template writes it."""
        text = "".join(self.roles[role][0] + content + self.roles[role][1] for role, content in zip(roles, contents))
        return text + (self.generation_prompt if generation_prompt else "")

    def go_template(self) -> str:
        """The same in Ollama's Go template syntax (over `.Messages`), its texts written by `go_text`."""
        branches = "".join(
            f'{{{{ {"if" if index == 0 else "else if"} eq .Role "{role}" }}}}{go_text(before)}{{{{ .Content }}}}'
            + go_text(after)
            for index, (role, (before, after)) in enumerate(self.roles.items())
        )
        return f"{{{{- range .Messages }}}}{branches}{{{{ end }}}}{{{{ end }}}}{go_text(self.generation_prompt)}"


def _kept_literally(char: str) -> bool:
    return char == "\n" or (" " <= char <= "~" and char not in '{"')


def _go_char(char: str) -> str:
    """`char` inside a Go string literal, in printable ASCII."""
    escapes = {"\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"', "\\": "\\\\"}
    if char in escapes or " " <= char <= "~":
        return escapes.get(char, char)
    return f"\\u{ord(char):04x}" if ord(char) < 0x10000 else f"\\U{ord(char):08x}"


def go_text(text: str) -> str:
    """Go template source writing `text` exactly, made of printable ASCII and line breaks: every `{` (which opens
    an action when it stands beside one, `{{{ .Content }}}`), every `"` (which could close the Modelfile's
    `\"\"\"` quotes: no line of TEMPLATE ends with one) and every other character (tabs, carriage returns, which
    Ollama's Modelfile parser reads as line ends, non-ASCII, which it drops where Go does not call it printable)
    is written as a Go string action, `{{ "{" }}`."""
    runs = [(kept, "".join(chars)) for kept, chars in itertools.groupby(text, _kept_literally)]
    return "".join(run if kept else f'{{{{ "{"".join(map(_go_char, run))}" }}}}' for kept, run in runs)


def _render(tokenizer, roles: tuple[str, ...], generation_prompt: bool, contents: list[str] = MARKERS) -> str | None:
    messages = [{"role": role, "content": content} for role, content in zip(roles, contents)]
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
    transformations = content_transformations(tokenizer.chat_template)
    samples = ((c, _render(tokenizer, c, False, SAMPLE_CONTENTS)) for c in CHECKED_CONVERSATIONS)
    changed = any(  # a change the template's syntax hides (a macro, a variable) shows on the samples
        text is not None and text != result.render(conversation, False, SAMPLE_CONTENTS)
        for conversation, text in samples
    )
    if transformations or changed:
        applied = f" ({', '.join(transformations)})" if transformations else ""
        raise ExportRefused(
            refused.format(
                why=f"it changes each message's content{applied}, where Ollama's {{{{ .Content }}}} passes it unchanged"
            )
        )
    literal = "".join([*(before + after for before, after in wrapping.values()), result.generation_prompt])
    if any("\ud800" <= char <= "\udfff" for char in literal):
        raise ExportRefused(refused.format(why="its text holds a lone surrogate, which is no character"))
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
    if tokenizer.eos_token:
        stops.append(str(tokenizer.eos_token))
    for stop in stops:
        if not stop.isprintable() or stop.startswith('""'):
            raise ExportRefused(
                f"cannot write the stop string {stop!r} in a Modelfile: Ollama reads a quoted value up to the line's "
                "end, with no escapes, so line breaks, control characters and a leading '\"\"' cannot be written. "
                "Give the tokenizer another EOS token, or export the GGUF alone (`minitf export gguf`)."
            )
    return list(dict.fromkeys(stops))


def modelfile_text(gguf_file: str, wrapping: ChatWrapping | None, stops: list[str], num_ctx: int) -> str:
    """The Modelfile: FROM the GGUF beside it, TEMPLATE (when there is a chat template), stops, greedy sampling
    (`OLLAMA_SAMPLING`) and context. Ollama's parser reads a quoted value up to the first line end where it is
    closed: TEMPLATE's lines never end with a quote (`go_text`), a stop holds no line end (`stop_strings`)."""
    lines = [f"FROM ./{gguf_file}"]
    if wrapping is not None:
        lines.append(f'TEMPLATE """{wrapping.go_template()}"""')
    lines += [f'PARAMETER stop "{stop}"' for stop in stops]
    lines += [f"PARAMETER {name} {value}" for name, value in OLLAMA_SAMPLING.items()]
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
    named: dict[str, Any],
    written: GGUFExport,
    wrapping: ChatWrapping | None,
    stops: list[str],
    name: str,
    num_ctx: int,
    data: dict[str, Any],
    examples: list[str],
) -> str:
    from hf_minitf.safety.output_folders import size_text

    counts: dict[str, int] = {}
    for tensor in written.types.values():
        counts[tensor.type] = counts.get(tensor.type, 0) + 1
    card = export_card(
        FORMAT.card_template,
        library_name="gguf",
        pipeline_tag=PIPELINE_TAGS["ForCausalLM"],  # Ollama runs GPTs only
        tags=["gguf", "ollama"],
        carried=data,
        **named,
        gguf_file=OLLAMA_GGUF_FILE,
        dtype=written.dtype,
        size=size_text(written.size),
        modelfile=OLLAMA_MODELFILE,
        name=name,
        template=wrapping is not None,
        roles=", ".join(wrapping.roles) if wrapping else "",
        stops=", ".join(f"`{stop}`" for stop in stops),
        num_ctx=num_ctx,
        sampling=", ".join(f"`PARAMETER {name} {value}`" for name, value in OLLAMA_SAMPLING.items()),
        types_line="; ".join(f"{type_name}: {count} tensors" for type_name, count in sorted(counts.items())),
        fallbacks=written.fallbacks,
        quantizer=written.quantizer,
        agreement=written.agreement,
        examples=examples,
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
    source_repo: str | None = None,
    published: bool = False,
) -> OllamaExport:
    """Write the MiniTF GPT `source` as the folder `out` for `ollama create NAME -f out/Modelfile`: `model.gguf`
    (`export_gguf_report` at `dtype`, its agreement measured on `agreement_text` unless None), the `Modelfile` and
    README.md (its `base_model`: `source_repo`, the Hub repo the source is published as, default `source` when that
    is a repo id; no model-index: the source's figures were not measured on this file); `model.gguf` records the
    source as `export_gguf_report` does, `published` or not. Raises ExportRefused for
    what `export_gguf` refuses and for a chat template that has no exact Ollama TEMPLATE (see `chat_wrapping`);
    `out` is written whole or not at all."""
    from hf_minitf.modeling.configuration_minitf_gpt import MiniTFGPTConfig

    check_gguf_dtype(dtype)
    opened = open_source(source, revision, published=published, published_as=source_repo)
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
    name = ollama_name(source_repo or opened.repo_id or str(source))
    with atomic_output_dir(target) as work:
        written = write_gguf_report(opened, work / OLLAMA_GGUF_FILE, dtype, license, agreement_text)
        modelfile = modelfile_text(OLLAMA_GGUF_FILE, wrapping, stops, config.max_position_embeddings)
        (work / OLLAMA_MODELFILE).write_text(modelfile, encoding="utf-8")
        data = export_card_data(opened.folder, license, figures=False)
        named = source_naming(opened.family, opened.repo_id, opened.revision, source_repo)
        examples = model_examples(opened.folder)
        card = _card(named, written, wrapping, stops, name, config.max_position_embeddings, data, examples)
        (work / "README.md").write_text(card, encoding="utf-8")
    written.path = Path(out) / OLLAMA_GGUF_FILE
    notes = (
        [] if wrapping else ["the tokenizer has no chat template: the Modelfile has no TEMPLATE (text continuation)"]
    )
    return OllamaExport(Path(out), written, name, notes=notes)


__all__ = ["ChatWrapping", "OllamaExport", "chat_wrapping", "export_ollama", "modelfile_text", "stop_strings"]
