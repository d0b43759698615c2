"""The package's import graph, read from the source with `ast` (every `import`, lazy ones inside functions too, and
`importlib.import_module("literal")`): no cycle, and every arrow points down the layers

    cli -> commands -> tools (training, conversion, export, publishing, serving) -> models -> layers.

Also: the package never imports the command-line module `minitf_cli`, and `hf_minitf` outside its `conversion`
subpackage never imports `hf_minitf.conversion`.
"""

import ast
from fnmatch import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent

# The layers from the top; a module belongs to the first layer with a pattern (fnmatch over its dotted name) that
# matches it. A new module must match one: add its name or a pattern here.
LAYERS = [
    ("cli", ["minitf_cli", "hf_minitf.cli", "hf_minitf.conversion.__main__"]),
    ("commands", ["hf_minitf.quickstart"]),
    ("tools", [
        "hf_minitf",  # the package: registers the models and re-exports the tools
        "hf_minitf.training", "hf_minitf.training_data", "hf_minitf.presets", "hf_minitf.builtin_tasks",
        "hf_minitf.conversion", "hf_minitf.conversion.*",
        "hf_minitf.sentence_transformers_export", "hf_minitf.export", "hf_minitf.export_*", "hf_minitf.engines",
        "hf_minitf.serving", "hf_minitf.serving_*", "hf_minitf.file_safety", "hf_minitf.hub_source",
        "hf_minitf.publishing", "hf_minitf.model_card",
        "hf_minitf.output_folder",
    ]),
    ("models", ["hf_minitf.configuration_minitf*", "hf_minitf.modeling_minitf*", "hf_minitf.tokenization_minitf*",
                "hf_minitf.pipeline_minitf_translation"]),
    ("layers", ["hf_minitf.layers", "hf_minitf.compat", "hf_minitf.input_checks"]),
]
RANK = {name: len(LAYERS) - index for index, (name, _) in enumerate(LAYERS)}  # higher layer, higher rank


def module_files() -> dict[str, Path]:
    """Each module of the project by its dotted name (the `conversion/` folder installs as hf_minitf.conversion)."""
    files = {"minitf_cli": ROOT / "minitf_cli.py"}
    for package, folder in (("hf_minitf", ROOT / "hf_minitf"), ("hf_minitf.conversion", ROOT / "conversion")):
        for path in sorted(folder.glob("*.py")):
            files[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return files


MODULES = module_files()


def layer_of(module: str) -> str:
    for name, patterns in LAYERS:
        if any(fnmatch(module, pattern) for pattern in patterns):
            return name
    raise AssertionError(f"{module} is in no layer: add it to LAYERS in {Path(__file__).name}")


def imports_of(module: str) -> set[str]:
    """The project modules `module` imports (a `from X import name` counts as importing X.name when that is a
    module of the project, else X)."""
    path = MODULES[module]
    package = module if path.stem == "__init__" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module
            found.add(source)
            found.update(f"{source}.{alias.name}" for alias in node.names)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.add(node.args[0].value)
    return {name for name in found if name in MODULES and name != module}


GRAPH = {module: imports_of(module) for module in MODULES}


def test_every_module_has_a_layer_and_the_layers_are_in_order():
    placed = {module: layer_of(module) for module in MODULES}
    assert [name for name, _ in LAYERS] == ["cli", "commands", "tools", "models", "layers"]
    assert placed["minitf_cli"] == placed["hf_minitf.cli"] == "cli"
    assert placed["hf_minitf.quickstart"] == "commands"
    assert {placed[name] for name in ("hf_minitf.training", "hf_minitf.conversion.base", "hf_minitf.publishing",
                                      "hf_minitf.sentence_transformers_export", "hf_minitf.output_folder")} == {"tools"}
    assert placed["hf_minitf.modeling_minitf_gpt"] == placed["hf_minitf.configuration_minitf_seq2seq"] == "models"
    assert placed["hf_minitf.layers"] == "layers"
    assert RANK["cli"] > RANK["commands"] > RANK["tools"] > RANK["models"] > RANK["layers"]


def test_imports_point_down_or_sideways_never_up():
    upward = sorted(f"{module} ({layer_of(module)}) imports {target} ({layer_of(target)})"
                    for module, targets in GRAPH.items() for target in targets
                    if RANK[layer_of(target)] > RANK[layer_of(module)])
    assert not upward, "\n".join(upward)


def test_the_import_graph_has_no_cycle():
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> list[str] | None:
        state[module] = "open"
        for target in sorted(GRAPH[module]):
            if state.get(target) == "open":
                return path + [module, target]
            if target not in state:
                cycle = visit(target, path + [module])
                if cycle:
                    return cycle
        state[module] = "done"
        return None

    for module in sorted(MODULES):
        if module not in state:
            cycle = visit(module, [])
            assert cycle is None, " -> ".join(cycle[cycle.index(cycle[-1]):])


def test_the_package_never_imports_the_command_line_module():
    importers = sorted(module for module, targets in GRAPH.items() if "minitf_cli" in targets)
    assert all(layer_of(module) == "cli" for module in importers), importers
    assert "minitf_cli" not in GRAPH["hf_minitf.cli"]


def test_hf_minitf_outside_conversion_never_imports_conversion():
    offenders = sorted(f"{module} imports {target}" for module, targets in GRAPH.items()
                       if module.startswith("hf_minitf") and not module.startswith("hf_minitf.conversion")
                       and layer_of(module) != "cli"
                       for target in targets if target.startswith("hf_minitf.conversion"))
    assert not offenders, offenders


@pytest.mark.parametrize("source, expected", [
    ("from .x import y", {"hf_minitf.x"}),
    ("from . import training", {"hf_minitf", "hf_minitf.training"}),
    ("from ..layers import Z", {"hf_minitf.layers"}),
])
def test_relative_imports_resolve_as_python_resolves_them(source, expected, tmp_path, monkeypatch):
    """The graph reader's own check: relative imports of hf_minitf.conversion.base and hf_minitf.cli."""
    module = "hf_minitf.conversion.base" if source.startswith("from ..") else "hf_minitf.cli"
    path = tmp_path / "module.py"
    path.write_text(source + "\n")
    monkeypatch.setitem(MODULES, module, path)
    monkeypatch.setitem(MODULES, "hf_minitf.x", path)
    assert imports_of(module) == expected - {module}


def test_every_export_format_of_the_parser_has_a_runner():
    from hf_minitf.export import EXPORTERS
    from minitf_cli import EXPORT_FORMATS

    assert set(EXPORT_FORMATS) == set(EXPORTERS)
