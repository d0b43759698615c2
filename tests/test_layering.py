"""The package's import graph, read from the source with `ast` (every `import`, lazy ones inside functions too,
`importlib.import_module("literal")`, and any string literal that names a module of the project, such as a module
name kept in a constant): no cycle, and every arrow points down the layers, one package never importing another
of its own layer

    cli > commands > the public API (`hf_minitf`) > serving (which runs a folder on a verified engine export) >
    chains (publishing: export then upload; verification) > engines >
    tools (training, conversion, export) > evaluation > model folders > tokenization > hub > cards > safety > models >
    facts (catalog, the model code's light files, the card templates).

Also: the saved model code (hf_minitf/modeling) imports only its siblings, torch and transformers; `hf_minitf`
outside its `conversion` subpackage imports `hf_minitf.conversion` only from the commands (conversion is a library
below them and imports no command line), a command imports no module by a computed name, and neither
`hf_minitf.export` nor `catalog` imports the engines that run the exports (`hf_minitf.engines`).
"""

import ast
from fnmatch import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent

# The layers from the top; a module belongs to the first layer with a pattern (fnmatch over its dotted name) that
# matches it (the light model files are matched by "facts" first). A new module must match one: add its name or a
# pattern here. Imports point down; between packages of one layer they are refused (the tools do not import each
# other: what chains two of them sits above both), except among the facts.
LAYERS = [
    ("cli", ["hf_minitf.cli", "hf_minitf.__main__"]),
    ("commands", ["hf_minitf.commands", "hf_minitf.commands.*"]),
    ("public API", ["hf_minitf"]),  # the package: registers the models and names the public API
    # serving: the models behind the server, each on the engine export verified against it (export, verification)
    ("serving", ["hf_minitf.serving", "hf_minitf.serving.*"]),
    (
        "chains",  # export then upload; an export re-measured against its source
        [
            "hf_minitf.publishing",
            "hf_minitf.verification",
            "hf_minitf.verification.*",
        ],
    ),
    ("engines", ["hf_minitf.engines", "hf_minitf.engines.*"]),
    (
        "tools",
        [
            "hf_minitf.training",
            "hf_minitf.training.*",
            "hf_minitf.conversion",
            "hf_minitf.conversion.*",
            "hf_minitf.export",
            "hf_minitf.export.*",
        ],
    ),
    ("evaluation", ["hf_minitf.evaluation", "hf_minitf.evaluation.*"]),  # measuring a model: the tools' and eval's
    ("model folders", ["hf_minitf.sentence_transformers_folder", "hf_minitf.registration"]),
    ("tokenization", ["hf_minitf.tokenization", "hf_minitf.tokenization.*"]),
    ("hub", ["hf_minitf.hub", "hf_minitf.hub.*"]),
    ("cards", ["hf_minitf.cards", "hf_minitf.cards.*"]),
    ("safety", ["hf_minitf.safety", "hf_minitf.safety.*"]),
    (
        "models",
        [
            "hf_minitf.modeling.configuration_minitf*",
            "hf_minitf.modeling.modeling_minitf*",
            "hf_minitf.modeling.tokenization_minitf*",
            "hf_minitf.modeling.pipeline_minitf*",
        ],
    ),
    (
        "facts",
        [
            "hf_minitf.modeling",
            "hf_minitf.modeling.layers",
            "hf_minitf.catalog",
            "hf_minitf.catalog.*",
            "hf_minitf.model_cards",  # the card templates (package data)
        ],
    ),
]
RANK = {name: len(LAYERS) - index for index, (name, _) in enumerate(LAYERS)}  # higher layer, higher rank
LAYERS.sort(key=lambda layer: layer[0] != "facts")  # the light model files match "facts" before "models"


def package_of(module: str) -> str:
    """The package a module belongs to: `hf_minitf.NAME` (a subpackage, or a module of the top level)."""
    return ".".join(module.split(".")[:2])


def module_files() -> dict[str, Path]:
    """Each module of the project by its dotted name (`conversion/` and `model_cards/` install as hf_minitf.*)."""
    files = {}
    folders = (
        ("hf_minitf", ROOT / "hf_minitf"),
        ("hf_minitf.conversion", ROOT / "conversion"),
        ("hf_minitf.model_cards", ROOT / "model_cards"),
    )
    for package, folder in folders:
        for path in sorted(folder.rglob("*.py")):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            files[".".join(parts)] = path
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
    tree = ast.parse(path.read_text(encoding="utf-8"))
    # `python -m hf_minitf.cli` in a command line runs that module as a program: it is not imported.
    programs = {
        id(b)
        for node in ast.walk(tree)
        if isinstance(node, (ast.List, ast.Tuple))
        for a, b in zip(node.elts, node.elts[1:])
        if isinstance(a, ast.Constant) and a.value == "-m"
    }
    for node in ast.walk(tree):
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
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value in MODULES
            and id(node) not in programs
        ):
            found.add(node.value)  # importlib.import_module("hf_minitf.x"), or a module name kept in a constant
    return {name for name in found if name in MODULES and name != module}


GRAPH = {module: imports_of(module) for module in MODULES}


def test_every_module_has_a_layer_and_the_layers_are_in_order():
    placed = {module: layer_of(module) for module in MODULES}
    assert placed["hf_minitf.cli"] == placed["hf_minitf.__main__"] == "cli"
    assert placed["hf_minitf.conversion.__main__"] == placed["hf_minitf.conversion"] == "tools"  # below the commands
    assert placed["hf_minitf.commands.train"] == placed["hf_minitf.commands"] == "commands"
    assert {placed[name] for name in ("hf_minitf.training.trainers", "hf_minitf.conversion.base")} == {"tools"}
    assert placed["hf_minitf.export.native"] == "tools" and placed["hf_minitf.engines.dispatch"] == "engines"
    assert placed["hf_minitf.serving.server"] == "serving" and placed["hf_minitf.publishing"] == "chains"
    assert placed["hf_minitf.hub.push"] == "hub" and placed["hf_minitf.cards.update"] == "cards"
    assert placed["hf_minitf.modeling.modeling_minitf_gpt"] == placed["hf_minitf.modeling.configuration_minitf_seq2seq"]
    assert placed["hf_minitf.modeling.modeling_minitf_gpt"] == "models" and placed["hf_minitf.tokenization.gpt"] == (
        "tokenization"
    )
    assert placed["hf_minitf.modeling.layers"] == placed["hf_minitf.catalog.families"] == "facts"
    order = [
        "cli",
        "commands",
        "public API",
        "serving",
        "chains",
        "engines",
        "tools",
        "evaluation",
        "model folders",
        "tokenization",
    ]
    order += ["hub", "cards", "safety", "models", "facts"]
    assert sorted(RANK, key=RANK.get, reverse=True) == order


def wrong_arrows(graph: dict[str, set[str]]) -> list[str]:
    """The imports of `graph` that point up, or across to another package of the same layer."""
    return sorted(
        f"{module} ({layer_of(module)}) imports {target} ({layer_of(target)})"
        for module, targets in graph.items()
        for target in targets
        if RANK[layer_of(target)] > RANK[layer_of(module)]
        or (layer_of(target) == layer_of(module) not in ("facts", "cli") and package_of(target) != package_of(module))
    )


def test_imports_point_down_never_up_nor_across_packages_of_a_layer():
    wrong = wrong_arrows(GRAPH)
    assert not wrong, "\n".join(wrong)


def test_the_arrow_check_finds_arrows_up_and_across():
    assert wrong_arrows({"hf_minitf.training.trainers": {"hf_minitf.export.native"}})  # across: two tools
    assert wrong_arrows({"hf_minitf.hub.push": {"hf_minitf.training.trainers"}})  # up
    assert wrong_arrows({"hf_minitf.conversion.base": {"hf_minitf"}})  # up, to the public API
    assert not wrong_arrows({"hf_minitf.training.trainers": {"hf_minitf.training.runs", "hf_minitf.cards.update"}})


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
            assert cycle is None, " -> ".join(cycle[cycle.index(cycle[-1]) :])


def test_the_saved_model_code_imports_only_its_siblings():
    """hf_minitf/modeling is what `save_pretrained` copies beside a model: no import reaches the rest of the project."""
    offenders = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if module.startswith("hf_minitf.modeling.")
        for target in targets
        if not target.startswith("hf_minitf.modeling.")
    )
    assert not offenders, offenders


def test_string_module_names_count_as_imports(tmp_path, monkeypatch):
    """The graph reader's own check: a module named in a string (how the model code once reached the card writer)."""
    path = tmp_path / "module.py"
    path.write_text('WRITER = "hf_minitf.cards.update"\n')
    monkeypatch.setitem(MODULES, "hf_minitf.modeling.modeling_minitf", path)
    assert imports_of("hf_minitf.modeling.modeling_minitf") == {"hf_minitf.cards.update"}


def test_only_the_commands_import_conversion_and_conversion_imports_no_command_line():
    """conversion/ is a library: the `convert` command (and the CLI) call it, nothing else in hf_minitf imports it,
    and none of its modules, its `__main__` included, imports the command line."""
    offenders = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if module.startswith("hf_minitf")
        and not module.startswith("hf_minitf.conversion")
        and layer_of(module) not in ("cli", "commands")
        for target in targets
        if target.startswith("hf_minitf.conversion")
    )
    offenders += sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if module.startswith("hf_minitf.conversion")
        for target in targets
        if layer_of(target) in ("cli", "commands")
    )
    assert not offenders, offenders


def test_the_commands_import_no_module_by_a_computed_name():
    """What a command runs is an import the graph above sees: no `importlib.import_module` in a command's module
    (the package's `__init__` alone lists its own command modules by name)."""
    offenders = sorted(
        str(path.relative_to(ROOT))
        for module, path in MODULES.items()
        if module.startswith("hf_minitf.commands.") and "import_module" in path.read_text(encoding="utf-8")
    )
    assert not offenders, offenders


def test_the_exports_and_the_catalog_never_import_the_engines():
    """The engines run export folders: they read `hf_minitf.export`'s facts, never the other way round."""
    offenders = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if module.startswith(("hf_minitf.export", "hf_minitf.catalog"))
        for target in targets
        if target.startswith("hf_minitf.engines")
    )
    assert not offenders, offenders


def test_cards_import_no_tool_and_hub_imports_no_export():
    """The cards sit below the tools that write them: `hf_minitf.cards` reads the catalog, the model code and the
    file checks, never the hub, the exports, training, serving, the engines or the commands; and the hub uploads what
    the exports wrote without importing them (`hf_minitf.publishing` chains the two)."""
    tools = ("hub", "export", "training", "serving", "commands", "engines")
    offenders = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        for target in targets
        if (
            module.startswith("hf_minitf.cards")
            and any(target == f"hf_minitf.{tool}" or target.startswith(f"hf_minitf.{tool}.") for tool in tools)
        )
        or (module.startswith("hf_minitf.hub") and target.startswith("hf_minitf.export"))
    )
    assert not offenders, offenders


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from .x import y", {"hf_minitf.x"}),
        ("from . import training", {"hf_minitf", "hf_minitf.training"}),
        ("from ..modeling.layers import Z", {"hf_minitf.modeling.layers"}),
    ],
)
def test_relative_imports_resolve_as_python_resolves_them(source, expected, tmp_path, monkeypatch):
    """The graph reader's own check: relative imports of hf_minitf.conversion.base and hf_minitf.registration."""
    module = "hf_minitf.conversion.base" if source.startswith("from ..") else "hf_minitf.registration"
    path = tmp_path / "module.py"
    path.write_text(source + "\n")
    monkeypatch.setitem(MODULES, module, path)
    monkeypatch.setitem(MODULES, "hf_minitf.x", path)
    assert imports_of(module) == expected - {module}


def test_every_export_format_has_its_arguments_and_its_writer():
    from hf_minitf.catalog.exports import EXPORTS
    from hf_minitf.commands.export import FORMAT_ARGUMENTS, WRITERS

    assert set(EXPORTS) == set(WRITERS) == set(FORMAT_ARGUMENTS)
