"""tests/go_template.py, the Python reading of Go's text/template the Ollama tests use everywhere, held against Go
itself (tests/go/templatecheck.go) where `go` is installed: the same templates parse or are refused, and those
that parse write the same chat. And the port of Ollama's Modelfile parser on Modelfiles of known readings."""

import pytest
from go_template import GoTemplateError, build_go_checker, go_results, parse, parse_modelfile, render_root

MESSAGES = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": ' a {{ .Content }} "quoted" }} '},
    {"role": "assistant", "content": "line\nbreak"},
]
OLLAMA_SHAPE = (
    '{{- range .Messages }}{{ if eq .Role "system" }}S:{{ .Content }}\n{{ else if eq .Role "user" }}<u>'
    '{{ .Content }}</u>\n{{ else if eq .Role "assistant" }}A: {{ .Content }}\n{{ end }}{{ end }}A: '
)
# Templates Go parses (and this reading renders, on a root holding .Role and .Content besides .Messages).
GOOD = [
    OLLAMA_SHAPE,
    "plain text } with } braces { alone",
    "{{ .Content }}}",
    '{{ "{" }}{{ "}" }}{{ "\\"" }}{{ "\\n\\t\\r\\\\" }}{{ "\\u00e9\\U0001F600\\x41\\101" }}',
    '{{ `raw with " and \\n and {{ inside` }}',
    "{{/* a comment with {{ and }} */}}after",
    "before  {{- /* trimmed comment */ -}}  after",
    "a \n {{- .Content -}} \n b",
    '{{ if eq .Role "x" }}x{{ else if eq .Role "y" }}y{{ else }}z{{ end }}',
    "{{ range .Messages }}{{ $.System }}{{ .Role }}{{ end }}",
    '{{ if (eq .Role "user") }}u{{ end }}',
    "{{- range .Messages }}{{ end -}}",
    "{{ .Content | print }}",
    "{{ 'x' }}",
    "{{ range $i, $m := .Messages }}{{ $m.Content }}{{ end }}",
]
# Templates Go's text/template refuses, each for a rule of the lexer or parser.
BAD = [
    "{{{ .Content }}}",  # `{` inside an action
    "x {{ .Content",  # unclosed action
    '{{ "abc }}',  # unterminated string
    '{{ "line\nbreak" }}',  # a line break in a string
    "{{ `abc }}",  # unterminated raw string
    "{{/* never closed }}",  # unclosed comment
    "{{/* a */ }}",  # comment ends before the delimiter
    "{{ /* a */ }}",  # a comment must start the action
    "{{ if .Content }}x",  # missing end
    "x{{ end }}",  # an end too many
    "{{ else }}",
    "{{ if .A }}{{ else }}{{ else }}{{ end }}",
    "{{ foo .Content }}",  # undefined function
    "{{ $x }}",  # undefined variable
    '{{ "\\q" }}',  # unknown escape
    '{{ "\\ud800" }}',  # a surrogate half
    '{{ "\\400" }}',  # an octal byte past 255
    '{{ "\\x4" }}',  # a short hex escape
    '{{ "\\U00110000" }}',  # past U+10FFFF
    '{{ "\\\'" }}',  # \' is no escape in a "string"
    "{{}}",  # empty command
    "{{ (.Content }}",
    "{{ .Content) }}",
    "{{ .Content : }}",
    "{{ 'ab }}",
    "{{ if }}x{{ end }}",
    "{{ .Content \x01 }}",
]


@pytest.mark.parametrize("template", GOOD)
def test_the_reading_parses_what_go_parses(template):
    parse(template)


@pytest.mark.parametrize("template", BAD)
def test_the_reading_refuses_what_go_refuses(template):
    with pytest.raises(GoTemplateError):
        parse(template)


@pytest.fixture(scope="module")
def go_checker(tmp_path_factory):
    binary = build_go_checker(tmp_path_factory.mktemp("go"))
    if binary is None:
        pytest.skip("go is not installed: the reading is held against Go where it is (apt-get install golang-go)")
    return binary


def test_the_reading_agrees_with_go_on_every_template(go_checker):
    """Go parses GOOD and refuses BAD, and writes the same chat as the reading, for the renderable ones."""
    renderable = GOOD[:-3]  # all but `print`, a character constant and variables, which the reading does not run
    results = go_results(go_checker, [{"template": t, "messages": MESSAGES} for t in GOOD + BAD])
    assert [("error" in result) for result in results] == [False] * len(GOOD) + [True] * len(BAD), results
    for template, result in zip(renderable, results):
        assert render_root(template, MESSAGES) == result["output"], template


MODELFILE = (
    "# a comment\n"
    "FROM ./model.gguf\n"
    'TEMPLATE """a "b"\n  c\n"\n"""\n'
    'SYSTEM "one line" \n'
    'PARAMETER stop "<|im_end|>"\n'
    "PARAMETER num_ctx 80\n"
    'TEMPLATE """x""""\n'
    'LICENSE """closes """ only at a line end"""\n'
    "PARAMETER temperature 0"
)


def test_the_modelfile_reading_follows_ollamas_parser():
    """Values run to the first line end where their quotes close (none inside, no escapes), keep the characters Go
    calls printable and drop the others; PARAMETER takes its name."""
    assert parse_modelfile(MODELFILE) == [
        ("model", "./model.gguf"),
        ("template", 'a "b"\n  c\n"\n'),
        ("system", "one line"),
        ("stop", "<|im_end|>"),
        ("num_ctx", "80"),
        ("template", 'x"'),
        ("license", 'closes """ only at a line end'),
        ("temperature", "0"),
    ]
    assert parse_modelfile('FROM x\nTEMPLATE """a\x1bb\u200bc\u00e9"""\n') == [
        ("model", "x"),
        ("template", "abc\u00e9"),
    ]
    with pytest.raises(ValueError, match="invalid command"):  # a value closed early: what follows is no command
        parse_modelfile('FROM x\nTEMPLATE """a"""\n"""\n')
    with pytest.raises(ValueError, match="invalid command"):
        parse_modelfile("FROM x\nTEMPLAT y\n")
    with pytest.raises(ValueError, match="unexpected EOF"):
        parse_modelfile('FROM x\nTEMPLATE """never closed\n')
