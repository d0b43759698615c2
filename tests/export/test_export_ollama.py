"""`export_ollama`: the Modelfile's TEMPLATE, rendered by a Go-template renderer written here for the subset Ollama's
chat templates use, equals `apply_chat_template(..., add_generation_prompt=True)` for conversations with and without
a system message, one turn or several, for the package's chatml and simple templates and FrawdLLM's; the Modelfile's
structure (FROM, PARAMETER stop and num_ctx); the GGUF beside it; the card; no TEMPLATE without a chat template."""

import json
import re

import gguf
import pytest
from factories import make_chat_gpt_sources, make_gpt
from transformers import AutoTokenizer

from hf_minitf.cli import main as minitf_main
from hf_minitf.export import export_ollama

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny torch products: one thread is faster on a loaded machine
CONVERSATIONS = [
    [{"role": "user", "content": "hello there"}],
    [{"role": "system", "content": "be brief"}, {"role": "user", "content": "the quick fox"}],
    [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "world"},
        {"role": "user", "content": "a lazy dog"},
    ],
    [
        {"role": "system", "content": "a tiny model"},
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "two"},
        {"role": "user", "content": "three"},
        {"role": "assistant", "content": "four"},
        {"role": "user", "content": "five"},
    ],
]


# --- a Go text/template renderer for what Ollama chat templates use -------------------------------------------------
# {{ range .Messages }} ... {{ end }}, {{ if eq .Role "x" }} ... {{ else if eq .Role "y" }} ... {{ else }} ...
# {{ end }}, {{ .Content }}, {{ .Role }}, {{ $.System }}, and the trim markers {{- and -}}.
ACTION = re.compile(r"\{\{(-?)\s*(.*?)\s*(-?)\}\}", re.DOTALL)


def _tokens(template: str) -> list[tuple[str, str]]:
    tokens, position, trim_next = [], 0, False
    for match in ACTION.finditer(template):
        text = template[position : match.start()]
        if trim_next:
            text = text.lstrip()
        if match.group(1):
            text = text.rstrip()
        tokens += [("text", text), ("action", match.group(2))]
        trim_next, position = bool(match.group(3)), match.end()
    text = template[position:]
    tokens.append(("text", text.lstrip() if trim_next else text))
    return tokens


def _parse(tokens: list[tuple[str, str]], index: int = 0) -> tuple[list, int, str | None]:
    """Nodes up to an unmatched {{ end }} / {{ else ... }} (returned as the terminator)."""
    nodes = []
    while index < len(tokens):
        kind, value = tokens[index]
        index += 1
        if kind == "text":
            nodes.append(("text", value))
        elif value == "end" or value.startswith("else"):
            return nodes, index, value
        elif value.startswith("range "):
            body, index, terminator = _parse(tokens, index)
            assert terminator == "end", terminator
            nodes.append(("range", value.split(" ", 1)[1], body))
        elif value.startswith("if "):
            branches, condition = [], value[3:]
            while True:
                body, index, terminator = _parse(tokens, index)
                branches.append((condition, body))
                if terminator == "end":
                    break
                condition = terminator[8:] if terminator.startswith("else if ") else "true"
            nodes.append(("if", branches))
        else:
            nodes.append(("value", value))
    return nodes, index, None


def _value(expression: str, dot: dict, root: dict):
    if expression == "true":
        return True
    if expression.startswith('"'):
        return expression[1:-1]
    if expression.startswith("eq "):
        left, right = re.match(r'eq (\S+) (".*?"|\S+)$', expression).groups()
        return _value(left, dot, root) == _value(right, dot, root)
    scope, name = (root, expression[2:]) if expression.startswith("$.") else (dot, expression[1:])
    return scope.get(name, "")


def _run(nodes: list, dot: dict, root: dict) -> str:
    out = []
    for node in nodes:
        if node[0] == "text":
            out.append(node[1])
        elif node[0] == "value":
            out.append(str(_value(node[1], dot, root)))
        elif node[0] == "range":
            out += [_run(node[2], item, root) for item in _value(node[1], dot, root)]
        else:
            body = next((body for condition, body in node[1] if _value(condition, dot, root)), [])
            out.append(_run(body, dot, root))
    return "".join(out)


def go_render(template: str, messages: list[dict]) -> str:
    """What Ollama writes for a chat: the template run with .Messages (system messages among them)."""
    nodes, _, terminator = _parse(_tokens(template))
    assert terminator is None
    root = {"Messages": [{"Role": m["role"], "Content": m["content"]} for m in messages], "System": ""}
    return _run(nodes, root, root)


def test_renderer_follows_go_whitespace_trimming():
    """The renderer itself, on a template of Ollama's documentation shape."""
    template = '{{- range .Messages }}\n{{- if eq .Role "user" }}[{{ .Content }}]{{ else }}({{ .Content }}){{ end }}\n{{ end -}}\n  END'
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    assert go_render(template, messages) == "[a]\n(b)\nEND"


# --- the exports -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chat_sources(tmp_path_factory):
    """chatml, simple and FrawdLLM's chat format (`make_chat_gpt_sources`), and a GPT without a chat template."""
    root = tmp_path_factory.mktemp("ollama_sources")
    return {**make_chat_gpt_sources(root / "chat"), "plain": make_gpt(root / "plain")}


@pytest.fixture(scope="module")
def exports(chat_sources, tmp_path_factory):
    root = tmp_path_factory.mktemp("ollama")
    return {
        name: export_ollama(folder, root / name, dtype="q8_0", agreement_text=None)
        for name, folder in chat_sources.items()
    }


def _modelfile(folder) -> tuple[str, str | None]:
    text = (folder / "Modelfile").read_text(encoding="utf-8")
    template = re.search(r'^TEMPLATE """(.*?)"""$', text, re.MULTILINE | re.DOTALL)
    return text, template.group(1) if template else None


@pytest.mark.parametrize("name", ["chatml", "simple", "frawdllm"])
def test_template_renders_what_apply_chat_template_writes(chat_sources, exports, name):
    tokenizer = AutoTokenizer.from_pretrained(chat_sources[name])
    _, template = _modelfile(exports[name].path)
    conversations = CONVERSATIONS if name != "frawdllm" else [c for c in CONVERSATIONS if c[0]["role"] != "system"]
    for messages in conversations:
        expected = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        assert go_render(template, messages) == expected


# Ollama stops at the token ending an answer (ChatML's <|im_end|>; the others end it with EOS), then at EOS.
END_OF_TURN = {"chatml": ["<|im_end|>"], "simple": [], "frawdllm": [], "plain": []}


@pytest.mark.parametrize("name", ["chatml", "simple", "frawdllm", "plain"])
def test_modelfile_structure_and_the_gguf_beside_it(chat_sources, exports, name):
    text, template = _modelfile(exports[name].path)
    lines = [line for line in text.splitlines() if line.startswith(("FROM", "PARAMETER"))]
    tokenizer = AutoTokenizer.from_pretrained(chat_sources[name])
    context = json.loads((chat_sources[name] / "config.json").read_text())["max_position_embeddings"]
    stops = [*END_OF_TURN[name], tokenizer.eos_token]
    assert lines == [
        "FROM ./model.gguf",
        *(f'PARAMETER stop "{stop}"' for stop in stops),
        f"PARAMETER num_ctx {context}",
    ]
    assert text.startswith("FROM ./model.gguf\n") and (template is None) == (name == "plain")
    reader = gguf.GGUFReader(str(exports[name].path / "model.gguf"))
    assert reader.fields["general.file_type"].contents() == gguf.LlamaFileType.MOSTLY_Q8_0
    chat_template = tokenizer.chat_template
    if chat_template is None:
        assert "tokenizer.chat_template" not in reader.fields
    else:
        assert reader.fields["tokenizer.chat_template"].contents() == chat_template
    assert sorted(path.name for path in exports[name].path.iterdir()) == ["Modelfile", "README.md", "model.gguf"]


def test_command_line_prints_ollama_create_and_the_card_holds_the_agreement(chat_sources, tmp_path, capsys):
    out = tmp_path / "ollama"
    arguments = ["export", "ollama", str(chat_sources["chatml"]), str(out), "--dtype", "q4_0", "--no-verify"]
    assert minitf_main(arguments) == 0
    printed = capsys.readouterr().out
    assert f"ollama create chatml -f {out / 'Modelfile'}" in printed
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "library_name: gguf" in card and "ollama create chatml -f Modelfile" in card
    agreement = re.search(r"greedy tokens equal for (\d+) of 8 prompts", printed)
    assert agreement and f"| prompts whose tokens are all equal | {agreement.group(1)} of 8 |" in card
    assert "| perplexity on " in card and "roles: system, user, assistant" in card
