"""Go's text/template in Python, for the tests of Ollama's Modelfile TEMPLATE where Go is not installed.

`parse` follows text/template/parse (lex.go and parse.go of Go 1.19 and later) for everything the lexer reads:
delimiters and trim markers, comments, strings with their escapes, raw strings, characters, numbers, fields,
variables, parentheses, and the errors of each (unclosed action, unterminated string, unclosed comment, a character
no action takes). Its parser knows the actions a chat template uses (`if` / `else if` / `else`, `range`, `with`,
`end`, pipelines of functions and operands) and refuses what Go refuses there (an `{{ end }}` too many, a missing
`{{ end }}`, an empty command, an operand that is none, an undefined function or variable). `render` runs what it
parsed on the data Ollama gives a chat template (`.Messages` of `.Role` and `.Content`). `parse_modelfile` reads a
Modelfile as Ollama's parser does (github.com/ollama/ollama, parser/parser.go at fb30760: a value in `"` or `\"\"\"`
runs to the first line end where it is closed, with no escapes; characters Go does not call printable are dropped;
checked once against that file's ParseFile built alone: the same commands or refusal for 3,007 Modelfiles, 3,000 of
them random). tests/export/test_go_template.py holds the template reading against Go itself where `go` is installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SPACES = " \t\r\n"
# text/template's built-in functions and those Ollama adds (template/template.go)
FUNCTIONS = {
    *"and call html index slice js len not or print printf println urlquery eq ge gt le lt ne".split(),
    *"json currentDate yesterdayDate toTypeScriptType".split(),
}
KEYWORDS = {"block", "break", "continue", "define", "else", "end", "if", "range", "nil", "template", "with"}


class GoTemplateError(ValueError):
    """What Go's text/template refuses, with its reason."""


@dataclass
class Item:
    kind: str  # text, left, right, space, string, raw, char, number, bool, nil, keyword, identifier, field,
    # variable, dot, pipe, assign, declare, lparen, rparen, other
    value: str


def _is_alphanumeric(char: str) -> bool:
    return char == "_" or char.isalpha() or char.isdigit()


def lex(template: str) -> list[Item]:
    """The items of `template` as lex.go emits them, the trim markers applied to the texts beside them."""
    items: list[Item] = []
    position, trim_next = 0, False
    while True:
        start = template.find("{{", position)
        text = template[position:] if start < 0 else template[position:start]
        if trim_next:
            text = text.lstrip(SPACES)
        if start < 0:
            if text:
                items.append(Item("text", text))
            return items
        trim = template[start + 2 : start + 3] == "-" and template[start + 3 : start + 4] in tuple(SPACES)
        if trim:
            text = text.rstrip(SPACES)
        if text:
            items.append(Item("text", text))
        position = start + 2 + (2 if trim else 0)
        if template.startswith("/*", position):
            end = template.find("*/", position + 2)
            if end < 0:
                raise GoTemplateError("unclosed comment")
            position, closing_trim = _right_delimiter(template, end + 2)
            if position < 0:
                raise GoTemplateError("comment ends before closing delimiter")
            trim_next = closing_trim
            continue
        items.append(Item("left", "{{"))
        position, trim_next = _inside_action(template, position, items)


def _right_delimiter(template: str, position: int) -> tuple[int, bool]:
    """Where text goes on after a right delimiter at `position` (`}}` or ` -}}`) and whether it trims; -1 if none."""
    if template[position : position + 1] in tuple(SPACES) and template.startswith("-}}", position + 1):
        return position + 4, True
    if template.startswith("}}", position):
        return position + 2, False
    return -1, False


def _inside_action(template: str, position: int, items: list[Item]) -> tuple[int, bool]:
    depth = 0
    while True:
        after, trim = _right_delimiter(template, position)
        if after >= 0:
            if depth:
                raise GoTemplateError("unclosed left paren")
            items.append(Item("right", "}}"))
            return after, trim
        if position >= len(template):
            raise GoTemplateError("unclosed action")
        char = template[position]
        if char in SPACES:  # spaces up to a trim marker's own (` -}}`), which the delimiter takes
            end = position + 1
            while end < len(template) and template[end] in SPACES and not _right_delimiter(template, end)[1]:
                end += 1
            items.append(Item("space", template[position:end]))
            position = end
        elif char == "=":
            items.append(Item("assign", "="))
            position += 1
        elif char == ":":
            if not template.startswith(":=", position):
                raise GoTemplateError("expected :=")
            items.append(Item("declare", ":="))
            position += 2
        elif char == "|":
            items.append(Item("pipe", "|"))
            position += 1
        elif char in "\"'":
            position = _quoted(template, position, items, "string" if char == '"' else "char")
        elif char == "`":
            end = template.find("`", position + 1)
            if end < 0:
                raise GoTemplateError("unterminated raw quoted string")
            items.append(Item("raw", template[position + 1 : end]))
            position = end + 1
        elif char == "$" or (char == "." and not template[position + 1 : position + 2].isdigit()):
            end = position + 1
            while end < len(template) and _is_alphanumeric(template[end]):
                end += 1
            word = template[position:end]
            kind = "dot" if word == "." else "variable" if char == "$" else "field"
            items.append(Item(kind, word))
            position = end
        elif char.isdigit() or char in "+-.":
            end = position + 1
            while end < len(template) and (_is_alphanumeric(template[end]) or template[end] in ".+-"):
                end += 1
            items.append(Item("number", template[position:end]))
            position = end
        elif _is_alphanumeric(char):
            end = position
            while end < len(template) and _is_alphanumeric(template[end]):
                end += 1
            word = template[position:end]
            kind = "keyword" if word in KEYWORDS else "bool" if word in ("true", "false") else "identifier"
            items.append(Item("nil" if word == "nil" else kind, word))
            position = end
        elif char == "(":
            depth += 1
            items.append(Item("lparen", "("))
            position += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise GoTemplateError("unexpected right paren")
            items.append(Item("rparen", ")"))
            position += 1
        elif char.isascii() and char.isprintable():
            items.append(Item("other", char))
            position += 1
        else:
            raise GoTemplateError(f"unrecognized character in action: {char!r}")


def _quoted(template: str, position: int, items: list[Item], kind: str) -> int:
    quote, end = template[position], position + 1
    while True:
        char = template[end : end + 1]
        if char == "\\":
            end += 1
            char = template[end : end + 1]
            if char in ("", "\n"):
                raise GoTemplateError(f"unterminated {'quoted string' if kind == 'string' else 'character constant'}")
        elif char in ("", "\n"):
            raise GoTemplateError(f"unterminated {'quoted string' if kind == 'string' else 'character constant'}")
        elif char == quote:
            break
        end += 1
    source = template[position : end + 1]
    if kind == "string":
        items.append(Item("string", _unquote(source)))
    else:
        items.append(Item("char", source))
    return end + 1


GO_ESCAPE = re.compile(r"\\(?:[abfnrtv\\\"]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{3})|[^\\]+")
SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", '"': '"'}


def _unquote(source: str) -> str:
    """strconv.Unquote of a Go "string": its escapes (\\x and octal are bytes, \\u and \\U characters), an error on
    any other backslash and on a surrogate half; bytes that are no UTF-8 kept as surrogate escapes."""
    body = source[1:-1]
    pieces = GO_ESCAPE.findall(body)
    if "".join(pieces) != body:
        raise GoTemplateError(f"malformed string {source}: invalid syntax")
    encoded = b""
    for piece in pieces:
        try:
            if not piece.startswith("\\"):
                encoded += piece.encode()
            elif piece[1] in SIMPLE_ESCAPES:
                encoded += SIMPLE_ESCAPES[piece[1]].encode()
            elif piece[1] in "uU":
                encoded += chr(int(piece[2:], 16)).encode()
            else:
                encoded += bytes([int(piece[2:], 16) if piece[1] == "x" else int(piece[1:], 8)])
        except (ValueError, UnicodeEncodeError):  # a surrogate half, past U+10FFFF, an octal past 255
            raise GoTemplateError(f"malformed string {source}: invalid syntax") from None
    return encoded.decode("utf-8", "surrogateescape")


# --- parse.go: the tree ------------------------------------------------------------------------------------------


@dataclass
class Parser:
    items: list[Item]
    index: int = 0
    variables: tuple[str, ...] = ("$",)

    def peek(self) -> Item | None:
        while self.index < len(self.items) and self.items[self.index].kind == "space":
            self.index += 1
        return self.items[self.index] if self.index < len(self.items) else None

    def next(self) -> Item:
        item = self.peek()
        if item is None:
            raise GoTemplateError("unexpected EOF")
        self.index += 1
        return item

    def list(self, inside: str | None) -> tuple[list, str | None]:
        """Nodes up to `{{ end }}` / `{{ else ... }}` (returned: "end", "else" or "else if") or the end of input."""
        nodes: list = []
        while (item := self.peek()) is not None:
            self.index += 1
            if item.kind == "text":
                nodes.append(("text", item.value))
                continue
            keyword = self.peek()
            if keyword is not None and keyword.kind == "keyword" and keyword.value in ("end", "else"):
                if inside is None:
                    raise GoTemplateError(f"unexpected {{{{{keyword.value}}}}}")
                self.index += 1
                if keyword.value == "end":
                    self.expect_right("end")
                    return nodes, "end"
                following = self.peek()
                if following is not None and following.kind == "keyword" and following.value in ("if", "with"):
                    return nodes, "else if"  # the `if` is read by the caller's loop
                self.expect_right("else")
                return nodes, "else"
            if keyword is not None and keyword.kind == "keyword" and keyword.value in ("if", "range", "with"):
                self.index += 1
                nodes.append(self.control(keyword.value))
            elif keyword is not None and keyword.kind == "keyword":
                raise GoTemplateError(f"unexpected <{keyword.value}> in command")
            else:
                nodes.append(("action", self.pipeline("command")))
        if inside is not None:
            raise GoTemplateError("unexpected EOF")
        return nodes, None

    def expect_right(self, context: str) -> None:
        item = self.next()
        if item.kind != "right":
            raise GoTemplateError(f"unexpected {item.value!r} in {context}")

    def control(self, keyword: str) -> tuple:
        saved = self.variables
        branches = [(self.pipeline(keyword), None)]
        body, terminator = self.list(keyword)
        branches[0] = (branches[0][0], body)
        while terminator != "end":
            if terminator == "else if":
                self.next()  # the `if`
                condition = self.pipeline(keyword)
            else:
                condition = None
            body, terminator = self.list(keyword)
            branches.append((condition, body))
            if condition is None and terminator != "end":
                raise GoTemplateError("expected end; found {{else}}")
        self.variables = saved
        return (keyword, branches)

    def pipeline(self, context: str) -> list:
        """Commands separated by `|` up to the right delimiter (or `)`); Go refuses an empty one."""
        ahead = [item for item in self.items[self.index :] if item.kind != "space"][:4]
        kinds = [item.kind for item in ahead]
        declared = (
            ahead[:1]
            if kinds[:2] in (["variable", "declare"], ["variable", "assign"])
            else [ahead[0], ahead[2]]
            if kinds[:4] == ["variable", "other", "variable", "declare"] and ahead[1].value == ","
            else []
        )
        if declared:
            if kinds[len(declared) * 2 - 1] == "assign" and declared[0].value not in self.variables:
                raise GoTemplateError(f"undefined variable {declared[0].value!r}")
            self.variables = (*self.variables, *(item.value for item in declared))
            for _ in range(len(declared) * 2):
                self.next()
        commands = []
        while True:
            command = []
            while (item := self.peek()) is not None and item.kind not in ("right", "rparen", "pipe"):
                command.append(self.operand())
            if not command:
                raise GoTemplateError(f"missing value for {context}")
            commands.append(command)
            if item is None:
                raise GoTemplateError("unexpected EOF")
            if item.kind != "pipe":
                break
            self.next()
        if context != "paren":
            self.expect_right(context)
        return commands

    def operand(self) -> tuple:
        item = self.next()
        if item.kind == "identifier":
            if item.value not in FUNCTIONS:
                raise GoTemplateError(f'function "{item.value}" not defined')
            node: tuple = ("function", item.value)
        elif item.kind == "variable":
            if item.value not in self.variables:
                raise GoTemplateError(f"undefined variable {item.value!r}")
            node = ("variable", item.value)
        elif item.kind in ("field", "dot", "string", "raw", "bool", "nil", "number", "char"):
            node = ("string" if item.kind == "raw" else item.kind, item.value)
        elif item.kind == "lparen":
            node = ("pipeline", self.pipeline("paren"))
            if self.next().kind != "rparen":
                raise GoTemplateError("unclosed left paren")
        else:
            raise GoTemplateError(f"unexpected {item.value!r} in command")
        following = self.items[self.index] if self.index < len(self.items) else None
        while following is not None and following.kind == "field":  # a chain: $.System, (x).Y
            node = ("chain", node, following.value)
            self.index += 1
            following = self.items[self.index] if self.index < len(self.items) else None
        return node


def parse(template: str) -> list:
    """The tree of `template`; GoTemplateError where Go's text/template refuses it."""
    nodes, _ = Parser(lex(template)).list(None)
    return nodes


# --- running it on a chat --------------------------------------------------------------------------------------------


def _field(value: Any, name: str) -> Any:
    return value.get(name[1:], "") if isinstance(value, dict) else ""


def _evaluate(node: tuple, dot: Any, root: dict) -> Any:
    kind = node[0]
    if kind == "string":
        return node[1]
    if kind == "bool":
        return node[1] == "true"
    if kind == "dot":
        return dot
    if kind == "variable":
        return root
    if kind == "field":
        value = dot
        for name in re.findall(r"\.\w+", node[1]):
            value = _field(value, name)
        return value
    if kind == "chain":
        return _field(_evaluate(node[1], dot, root), node[2])
    if kind == "pipeline":
        return _pipeline(node[1], dot, root)
    raise NotImplementedError(f"the tests' renderer does not run {node}")


def _pipeline(commands: list, dot: Any, root: dict) -> Any:
    value: Any = None
    for index, command in enumerate(commands):
        head, *arguments = command
        values = [_evaluate(argument, dot, root) for argument in arguments] + ([value] if index else [])
        if head[0] == "function":
            if head[1] != "eq":
                raise NotImplementedError(f"the tests' renderer runs only eq, not {head[1]}")
            value = any(values[0] == other for other in values[1:])
        else:
            value = _evaluate(head, dot, root)
    return value


def _run(nodes: list, dot: Any, root: dict) -> str:
    out = []
    for node in nodes:
        if node[0] == "text":
            out.append(node[1])
        elif node[0] == "action":
            out.append(str(_pipeline(node[1], dot, root)))
        elif node[0] == "range":
            (items, body), *otherwise = node[1]
            values = _pipeline(items, dot, root)
            out += [_run(body, item, root) for item in values] if values else [_run(b, dot, root) for _, b in otherwise]
        else:
            branch = next(
                (body for condition, body in node[1] if condition is None or _pipeline(condition, dot, root)), []
            )
            out.append(_run(branch, dot, root))
    return "".join(out)


def render(template: str, messages: list[dict]) -> str:
    """What Ollama writes for a chat: `template` run on `.Messages` (system messages among them)."""
    root = {"Messages": [{"Role": m["role"], "Content": m["content"]} for m in messages], "System": ""}
    return _run(parse(template), root, root)


def render_root(template: str, messages: list[dict]) -> str:
    """`render` with a root that also holds .Role "user" and .Content "root", as tests/go/templatecheck.go gives."""
    root = {"Messages": [{"Role": m["role"], "Content": m["content"]} for m in messages], "System": ""}
    root |= {"Role": "user", "Content": "root"}
    return _run(parse(template), root, root)


# --- Ollama's Modelfile parser ---------------------------------------------------------------------------------------


def _unquote_modelfile(value: str) -> str | None:
    if value.startswith('"""'):
        return value[3:-3] if len(value) >= 6 and value.endswith('"""') else None
    if value.startswith('"'):
        return value[1:-1] if len(value) >= 2 and value.endswith('"') else None
    return value


GO_SPACE = " \t\n\v\f\r\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


COMMANDS = ("from", "license", "template", "system", "adapter", "draft", "renderer", "parser", "parameter", "message")


def _next_state(char: str, state: str) -> tuple[str, str]:
    """parseRuneForState: the next state and the character kept ("" where Go keeps rune 0)."""
    space, newline, letter = char in " \t", char in "\r\n", char.isascii() and char.isalpha()
    if state == "nil":
        return ("comment", "") if char == "#" else ("nil", "") if space or newline else ("name", char)
    if state == "name":
        if not (letter or space):
            raise ValueError("invalid command")
        return ("name", char) if letter else ("value", "")
    if state in ("parameter", "message"):
        if not (letter or space or (state == "parameter" and (char.isascii() and char.isdigit() or char == "_"))):
            raise ValueError("unexpected EOF")
        return (state, char) if not space else ("value", "")
    if state == "comment":
        return ("nil", "") if newline else ("comment", "")
    return ("nil", char) if newline or space else ("value", char)


def parse_modelfile(text: str) -> list[tuple[str, str]]:
    """(command, value) pairs as Ollama's ParseFile reads the Modelfile `text` (FROM as "model", a PARAMETER as its
    name); ValueError where Ollama refuses it."""
    commands: list[tuple[str, str]] = []
    state, buffer, name, role = "nil", "", "", ""
    for char in text:
        following, char = _next_state(char, state)
        if following != state:
            if state == "name":
                command = buffer.lower()
                if command not in COMMANDS:
                    raise ValueError(f"invalid command {buffer!r}")
                name = "model" if command == "from" else command
                following = command if command in ("parameter", "message") else following
            elif state == "parameter":
                name = buffer
            elif state == "message":
                role = buffer
            elif state == "value":
                value = _unquote_modelfile(buffer.strip(GO_SPACE))
                if value is None or char in (" ", "\t"):
                    buffer += char
                    continue
                commands.append((name, f"{role}: {value}" if role else value))
                role = ""
            buffer, state = "", following
        if char and char.isprintable():
            buffer += char
    if state == "value":
        value = _unquote_modelfile(buffer.strip(GO_SPACE))
        if value is None:
            raise ValueError("unexpected EOF")
        commands.append((name, f"{role}: {value}" if role else value))
    elif state not in ("nil", "comment"):
        raise ValueError("unexpected EOF")
    if not any(command == "model" for command, _ in commands):
        raise ValueError("no FROM line")
    return commands


# --- Go itself ------------------------------------------------------------------------------------------------------


def build_go_checker(folder: Path) -> Path | None:
    """tests/go/templatecheck.go built in `folder`, or None where `go` is not installed."""
    go = shutil.which("go")
    if go is None:
        return None
    binary = folder / "templatecheck"
    environment = {**os.environ, "GOCACHE": str(folder / "gocache"), "GO111MODULE": "off"}
    source = Path(__file__).parent / "go" / "templatecheck.go"
    subprocess.run([go, "build", "-o", str(binary), str(source)], check=True, env=environment, cwd=folder)
    return binary


def go_results(binary: Path, checks: list[dict]) -> list[dict]:
    """What Go's text/template does with each {"template", "messages"}: {"error"} (Parse refuses it),
    {"exec_error"} or {"output"}."""
    answer = subprocess.run([str(binary)], input=json.dumps(checks), capture_output=True, text=True, check=True)
    return json.loads(answer.stdout)
