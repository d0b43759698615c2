"""`export_ollama`: the Modelfile read as Ollama's parser reads it, its TEMPLATE parsed and run as Go's text/template
does (tests/go_template.py, held against Go itself in test_go_template.py; and Go itself here where installed),
equals `apply_chat_template(..., add_generation_prompt=True)` for conversations with and without a system message,
one turn or several, for the package's chatml and simple templates and FrawdLLM's, and for templates whose texts
hold what could break a Modelfile or a Go template (quotes, braces, line ends, control characters); a template that
changes each message's content is refused; the Modelfile's structure (FROM, PARAMETER stop, greedy sampling,
num_ctx); the GGUF beside it; the card; no TEMPLATE without a chat template."""

import json
import re
import shutil

import gguf
import pytest
from factories import make_chat_gpt_sources, make_gpt
from go_template import build_go_checker, go_results, parse_modelfile
from go_template import render as go_render
from transformers import AutoTokenizer

from hf_minitf.cli import main as minitf_main
from hf_minitf.export import export_ollama
from hf_minitf.export.ollama import chat_wrapping, modelfile_text, stop_strings
from hf_minitf.export.source import ExportRefused

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
    """The Modelfile's text and its TEMPLATE, as Ollama's parser reads them."""
    text = (folder / "Modelfile").read_text(encoding="utf-8")
    return text, dict(parse_modelfile(text)).get("template")


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
        "PARAMETER temperature 0",
        "PARAMETER top_k 1",
        "PARAMETER repeat_penalty 1",
        f"PARAMETER num_ctx {context}",
    ]
    read = parse_modelfile(text)  # as Ollama reads it: the same values, TEMPLATE whole
    assert [name for name, _ in read] == [
        "model",
        *(["template"] if template else []),
        *["stop"] * len(stops),
        "temperature",
        "top_k",
        "repeat_penalty",
        "num_ctx",
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
    greedy = "Ollama answers greedily (`PARAMETER temperature 0`, `PARAMETER top_k 1`, `PARAMETER repeat_penalty 1`)"
    assert greedy in " ".join(card.split())


# --- texts that could break the Modelfile's quotes or the Go template ------------------------------------------------
# Each a chat template wrapping every message by its role, so each translates exactly, but its texts hold what used
# to break the Modelfile (a quote closing TEMPLATE's, characters Ollama's parser drops) or the Go template (a `{`
# beside an action: `{{{ .Content }}}`).


def _wrapping_template(user: tuple[str, str], assistant: tuple[str, str], prompt: str) -> str:
    """A Jinja chat template writing user and assistant messages as before + content + after, then `prompt`."""
    quoted = {
        name: json.dumps(text, ensure_ascii=False)
        for name, text in (
            ("ub", user[0]),
            ("ua", user[1]),
            ("ab", assistant[0]),
            ("aa", assistant[1]),
            ("prompt", prompt),
        )
    }
    return (
        "{%- for message in messages -%}{%- if message['role'] == 'user' -%}"
        f"{{{{ {quoted['ub']} + message['content'] + {quoted['ua']} }}}}"
        "{%- elif message['role'] == 'assistant' -%}"
        f"{{{{ {quoted['ab']} + message['content'] + {quoted['aa']} }}}}"
        "{%- else -%}{{ raise_exception('user and assistant only') }}{%- endif -%}{%- endfor -%}"
        f"{{%- if add_generation_prompt -%}}{{{{ {quoted['prompt']} }}}}{{%- endif -%}}"
    )


HOSTILE_TEMPLATES = {
    # the issue's: a generation prompt ending in `"` (written `...<|assistant|>""""`)
    "prompt-ending-in-a-quote": _wrapping_template(("<|user|>", "\n"), ("<|assistant|>", "\n"), '<|assistant|>"'),
    # the issue's: `{` right before the content and `}` after it (written `{{{ .Content }}}`)
    "braces-beside-the-content": _wrapping_template(("U{", "}\n"), ("A{", "}\n"), "A{"),
    "double-braces-and-a-comment-opening": _wrapping_template(("{{", "}}"), ("{{/*", "*/}}"), "{{- "),
    "triple-quotes-ending-a-line": _wrapping_template(('"""\n', '"""\n'), ('"', '\n"""'), '"""'),
    "line-ends-tabs-and-control-characters": _wrapping_template(
        ("\r\n\tU\x1b[1m", "\x00\r"), ("\u200bA\u2028", "\x7f\n"), "\ufeffA:\t"
    ),
    "non-ascii-and-backslashes": _wrapping_template(("\u00e9\\n\\", '\u4e2d\\"'), ("\U0001f600", "\\"), "\u00df\\"),
}


@pytest.fixture(scope="module")
def chatml_tokenizer(chat_sources):
    return AutoTokenizer.from_pretrained(chat_sources["chatml"])


@pytest.fixture(scope="module")
def go_checker(tmp_path_factory):
    """Go's text/template itself (tests/go/templatecheck.go) where `go` is installed, else None."""
    return build_go_checker(tmp_path_factory.mktemp("go"))


HOSTILE_CONVERSATIONS = [c for c in CONVERSATIONS if c[0]["role"] != "system"] + [
    [{"role": "user", "content": 'a "quoted" {{ .Content }} {brace} content\nwith a line'}]
]


@pytest.mark.parametrize("name", HOSTILE_TEMPLATES)
def test_a_template_whose_texts_could_break_the_modelfile_is_written_whole(chatml_tokenizer, go_checker, name):
    """Ollama's parser reads the Modelfile's TEMPLATE back whole, Go's text/template parses it, and it writes what
    the Jinja template writes, for every conversation."""
    tokenizer = chatml_tokenizer
    tokenizer.chat_template = HOSTILE_TEMPLATES[name]
    wrapping = chat_wrapping(tokenizer)
    text = modelfile_text("model.gguf", wrapping, stop_strings(tokenizer, wrapping), 80)
    read = parse_modelfile(text)  # TEMPLATE, then every line after it read as the line it is
    assert [command for command, _ in read][:3] == ["model", "template", "stop"] and read[-1] == ("num_ctx", "80")
    template = dict(read)["template"]
    expected = [
        tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        for messages in HOSTILE_CONVERSATIONS
    ]
    assert [go_render(template, messages) for messages in HOSTILE_CONVERSATIONS] == expected
    if go_checker is not None:
        results = go_results(go_checker, [{"template": template, "messages": m} for m in HOSTILE_CONVERSATIONS])
        assert [result.get("output") for result in results] == expected, results


def test_the_issues_cases_exit_0_with_a_modelfile_ollama_reads(chat_sources, tmp_path, capsys):
    """Through the command: a template with `{` beside the content and a prompt ending in `"`."""
    source = tmp_path / "source"
    shutil.copytree(chat_sources["chatml"], source)
    template = _wrapping_template(("U{", "}\n"), ("A{", "}\n"), 'A{"')
    (source / "chat_template.jinja").write_text(template, encoding="utf-8")
    assert minitf_main(["export", "ollama", str(source), str(tmp_path / "out"), "--no-verify"]) == 0
    _, template = _modelfile(tmp_path / "out")
    messages = [{"role": "user", "content": "hi"}]
    assert go_render(template, messages) == 'U{hi}\nA{"'


# --- a template that changes each message ----------------------------------------------------------------------------
CHANGING_TEMPLATES = {
    "upper": ("{{ '<u>' + message['content'] | upper + '\\n' }}", "| upper"),
    "replace": ("{{ '<u>' + message['content'] | replace('a', 'b') + '\\n' }}", "| replace"),
    "trim": ("{{ '<u>' + message['content'] | trim + '\\n' }}", "| trim"),
    "title-of-the-joined-text": ("{{ ('<u>' + message['content'] + '\\n') | title }}", "| title"),
    "strip-method": ("{{ '<u>' + message['content'].strip() + '\\n' }}", ".strip"),
    "escape": ("{{ '<u>' + message['content'] | e + '\\n' }}", "| e"),
    # through a variable: the syntax shows no change, the rendered samples do
    "through-a-variable": ("{%- set text = message['content'] -%}{{ '<u>' + text | lower + '\\n' }}", None),
}


@pytest.mark.parametrize("name", CHANGING_TEMPLATES)
def test_a_template_that_changes_each_message_is_refused(chatml_tokenizer, name):
    """Ollama's {{ .Content }} passes a message unchanged: a template that changes it has no exact TEMPLATE."""
    body, named = CHANGING_TEMPLATES[name]
    chatml_tokenizer.chat_template = (
        "{%- for message in messages -%}" + body + "{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{ '<a>' }}{%- endif -%}"
    )
    why = "it changes each message's content" + (f" \\({re.escape(named)}\\)" if named else "")
    with pytest.raises(ExportRefused, match=f"Ollama TEMPLATE: {why}, where Ollama's .* passes it unchanged"):
        chat_wrapping(chatml_tokenizer)


KEPT_TEMPLATES = {
    "through-a-variable": "{%- set text = message['content'] -%}{{ '<u>' + text + '\\n' }}",
    "a-condition-on-the-content": "{%- if message['content'] | length > 0 and not message.content.startswith('/') -%}"
    "{{ '<u>' + message['content'] + '\\n' }}{%- else -%}{{ '<u>' + message['content'] + '\\n' }}{%- endif -%}",
    "chosen-by-a-condition": "{{ '<u>' + (message['content'] if message['content'] | trim else message['content']) }}"
    "{{ '\\n' }}",
}


@pytest.mark.parametrize("name", KEPT_TEMPLATES)
def test_a_template_that_writes_each_message_unchanged_is_kept(chatml_tokenizer, name):
    """Contents stored, joined, chosen or tested (a filter in a condition writes nothing) but written unchanged:
    the template translates, and writes what the Jinja template writes."""
    chatml_tokenizer.chat_template = (
        "{%- for message in messages -%}" + KEPT_TEMPLATES[name] + "{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{ '<a>' }}{%- endif -%}"
    )
    wrapping = chat_wrapping(chatml_tokenizer)
    messages = [{"role": "user", "content": " Mixed Case "}]
    assert go_render(wrapping.go_template(), messages) == "<u> Mixed Case \n<a>"


@pytest.mark.parametrize("eos", ['""end', "end\n", "a\tb", "\x00"])
def test_a_stop_string_the_modelfile_cannot_hold_is_refused(chat_sources, eos):
    """Ollama's Modelfile has no escapes: a stop string with a line end, a control character or a leading `""` (which
    opens `\"\"\"` quotes) would be read as another value, so it is refused in one line naming it."""
    tokenizer = AutoTokenizer.from_pretrained(chat_sources["chatml"], eos_token=eos)
    with pytest.raises(ExportRefused, match=f"cannot write the stop string {re.escape(repr(eos))} in a Modelfile"):
        stop_strings(tokenizer, None)


def test_a_stop_string_with_quotes_inside_is_read_back_whole(chat_sources):
    tokenizer = AutoTokenizer.from_pretrained(chat_sources["chatml"], eos_token='<"end" of text>')
    text = modelfile_text("model.gguf", None, stop_strings(tokenizer, None), 80)
    assert ("stop", '<"end" of text>') in parse_modelfile(text)


def test_a_template_text_with_a_lone_surrogate_is_refused(chatml_tokenizer):
    """A Jinja "\\ud800" escape gives half a character, which no Modelfile can hold."""
    chatml_tokenizer.chat_template = _wrapping_template(("<u>", "\n"), ("<a>", "\n"), "<a>").replace("<a>", "\\ud800")
    with pytest.raises(ExportRefused, match="its text holds a lone surrogate"):
        chat_wrapping(chatml_tokenizer)
