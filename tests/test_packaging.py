"""hf-minitf as a distribution: pyproject.toml's dependencies match what the code imports (the base dependencies
everything but an extra's commands, each extra what only its commands need, as hf_minitf.catalog.packaging declares),
their floors are the versions `make test-oldest` runs, a command that meets a missing extra says which to install, and
`minitf info` warns outside the tested transformers. `make test-wheel` installs the wheel for real."""

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import huggingface_hub
import pytest
import sentence_transformers
import tomllib
import torch
import transformers
from factories import model_folder
from helpers import assert_one_line_error, run_cli, run_minitf

from hf_minitf.catalog import packaging
from hf_minitf.catalog.packaging import (
    EXTRAS,
    PACKAGE,
    TESTED_TRANSFORMERS,
    extra_providing,
    missing_extra,
    release,
    version_warning,
)

ROOT = Path(__file__).parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def name_of(requirement: str) -> str:
    """A requirement's distribution name, normalized (PEP 503)."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement)[0]).lower()


def third_party_imports() -> dict[str, set[str]]:
    """Each top-level module the package and its conversion code import (not the standard library), by file."""
    found: dict[str, set[str]] = {}
    for path in [*(ROOT / "hf_minitf").rglob("*.py"), *(ROOT / "conversion").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                else []
            )
            for name in names:
                top = name.partition(".")[0]
                if top not in sys.stdlib_module_names and top not in ("hf_minitf", "_hf_minitf_autoregister"):
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_the_extras_of_pyproject_are_the_catalogs():
    declared = PYPROJECT["optional-dependencies"]
    for extra in EXTRAS.values():
        assert declared[extra.name] == list(extra.requirements), extra.name
    # the test extra takes every extra by name instead of listing their requirements again, except those it leaves
    # out (llama.cpp compiles for minutes on install: `pytest -m engines` needs it, `make test` does not build it)
    (itself,) = [requirement for requirement in declared["test"] if name_of(requirement) == PACKAGE]
    assert set(itself[len(PACKAGE) + 1 : -1].split(",")) == {*(n for n, e in EXTRAS.items() if e.in_test_extra), "lint"}
    left_out = {name_of(r) for n, e in EXTRAS.items() if not e.in_test_extra for r in e.requirements}
    assert "llama-cpp-python" in left_out and not left_out & {name_of(r) for r in declared["test"]}


def test_every_import_is_a_base_dependency_or_an_extras():
    base = {name_of(requirement) for requirement in PYPROJECT["dependencies"]}
    distributions = packages_distributions()
    undeclared = {}
    for module, files in third_party_imports().items():
        if extra_providing(module) is not None:
            continue
        provided_by = {name_of(name) for name in distributions.get(module, [])}
        if not provided_by & base:
            undeclared[module] = (sorted(provided_by), sorted(files)[:3])
    assert not undeclared, f"imported but neither a base dependency nor an extra's: {undeclared}"


def test_each_extras_modules_come_from_its_requirements():
    distributions = packages_distributions()
    for extra in EXTRAS.values():
        required = {name_of(requirement) for requirement in extra.requirements}
        for module in extra.modules:
            provided_by = {name_of(name) for name in distributions.get(module, [])}
            if not provided_by and not extra.in_test_extra:
                continue  # an extra the test extra leaves out is checked where it is installed
            # starlette and pydantic's own modules come with fastapi; the rest with a requirement of the extra
            assert provided_by & required or module == "starlette", (extra.name, module, provided_by)


def test_a_missing_extra_is_named_with_its_install_line():
    error = ModuleNotFoundError("No module named 'fastapi'", name="fastapi")
    assert missing_extra(error) == (
        "no module named 'fastapi', which the serve extra brings (for minitf serve): pip install \"hf-minitf[serve]\""
    )
    assert missing_extra(ModuleNotFoundError("No module named 'x'", name="x")) is None
    assert missing_extra(ValueError("fastapi")) is None
    broken = ImportError("cannot import name 'FastAPI' from 'fastapi'", name="fastapi")  # installed, but broken
    assert missing_extra(broken) is None


# A `minitf` process in which the modules of an extra cannot be imported, as in an environment without it.
WITHOUT = """
import sys
for name in {modules!r}:
    sys.modules[name] = None  # `import name` raises ModuleNotFoundError, as where it is not installed
from hf_minitf.cli import main
sys.exit(main({arguments!r}))
"""


@pytest.mark.parametrize(
    ("extra", "arguments"),
    [
        ("serve", ["serve", "{gpt}", "--port", "1"]),
        ("engines", ["export", "onnx", "{gpt}", "{out}"]),
        ("engines", ["export", "ctranslate2", "{gpt}", "{out}"]),
        ("engines", ["export", "web", "{gpt}", "{out}"]),
    ],
)
def test_a_command_without_its_extra_says_which_to_install(extra, arguments, tmp_path):
    import subprocess

    gpt = model_folder("gpt", "learned")
    arguments = [argument.format(gpt=gpt, out=tmp_path / "out") for argument in arguments]
    code = WITHOUT.format(modules=list(EXTRAS[extra].modules), arguments=arguments)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert_one_line_error(done.returncode, done.stderr, EXTRAS[extra].install, "no module named")
    assert not (tmp_path / "out").exists()


def test_without_matplotlib_no_loss_curve_is_promised(tmp_path):
    """The plot extra draws the loss curve: without it the folder has none, and neither its card nor the
    quickstart's report says it has."""
    from hf_minitf.training.quickstart import report

    code = f"""
import sys
sys.modules["matplotlib"] = None
from hf_minitf.training.trainers import TrainSettings, train_gpt
train_gpt("abcdefgh\\n" * 40, {str(tmp_path / "gpt")!r}, block_size=8,
          settings=TrainSettings(max_steps=2, batch_size=4, progress=False),
          config_overrides={{"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2}})
"""
    import subprocess

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "gpt" / "loss_curve.png").exists()
    assert "loss_curve" not in (tmp_path / "gpt" / "README.md").read_text(encoding="utf-8")

    figures = {
        "gpt": dict(
            parameters=1, seconds=1, exact_match=1.0, held_out=100, eval_loss=0.1, uniform_loss=3.0, samples=[]
        ),
        "encoder": dict(parameters=1, seconds=1, held_out=200, top1=1.0, chance=0.005, query="q", candidates=[]),
        "seq2seq": dict(parameters=1, seconds=1, exact_match=1.0, held_out=200, samples=[]),
    }
    without, drawn = report(figures, tmp_path, loss_curves=False), report(figures, tmp_path, loss_curves=True)
    assert "and loss_curve.png" not in without and EXTRAS["plot"].install + " adds loss_curve.png" in without
    assert "and loss_curve.png" in drawn


def test_python_m_hf_minitf_is_the_minitf_command():
    done = run_minitf("--version")
    import subprocess

    module = subprocess.run([sys.executable, "-m", "hf_minitf", "--version"], capture_output=True, text=True)
    assert module.returncode == done.returncode == 0 and module.stdout == done.stdout
    assert module.stdout.startswith("minitf")


def pins(name: str) -> dict[str, str]:
    """constraints/NAME.txt: each distribution (name normalized) pinned to the version its make target runs."""
    lines = (ROOT / "constraints" / f"{name}.txt").read_text(encoding="utf-8").splitlines()
    pairs = [line.split("==") for line in lines if line.strip() and not line.startswith("#")]
    return {name_of(name): version for name, version in pairs}


def oldest_pins() -> dict[str, str]:
    """constraints/oldest.txt: the versions `make test-oldest` runs."""
    return pins("oldest")


def test_the_pinned_versions_meet_every_requirement():
    """constraints/pinned.txt (`make test`) holds a version of every dependency, of the base and of the test extra's,
    inside the range pyproject.toml gives it."""
    from packaging.requirements import Requirement

    pinned = pins("pinned")
    extras = PYPROJECT["optional-dependencies"]
    tested = [*(name for name, extra in EXTRAS.items() if extra.in_test_extra), "lint"]
    requirements = [*PYPROJECT["dependencies"], *(r for name in tested for r in extras[name])]
    requirements += [r for r in extras["test"] if not r.startswith(PACKAGE)]
    for requirement in map(Requirement, requirements):
        if requirement.name == "torch":  # held at TORCH_VERSION by the Makefile
            continue
        version = pinned.get(name_of(requirement.name))
        assert version is not None and requirement.specifier.contains(version), (str(requirement), version)


def test_each_floor_of_pyproject_is_the_version_test_oldest_pins():
    floors = {}
    for requirement in PYPROJECT["dependencies"]:
        floor = re.search(r">=([^,;\s]+)", requirement)
        assert floor is not None, f"{requirement}: every dependency has a floor, tested by make test-oldest"
        floors[name_of(requirement)] = floor[1]
    assert floors == oldest_pins()


def test_the_tested_range_starts_at_the_oldest_transformers():
    oldest, newest = TESTED_TRANSFORMERS
    assert oldest == oldest_pins()["transformers"]
    assert release(oldest) < release(newest)


@pytest.mark.parametrize(
    ("installed", "warned"),
    [("5.17.0", False), ("5.20.1", False), ("5.24.0", False), ("5.16.1", True), ("5.99.0", True), ("6.0.0.dev0", True)],
)
def test_version_warning_names_a_transformers_outside_the_tested_range(monkeypatch, installed, warned):
    real_version = packaging.metadata.version
    monkeypatch.setattr(
        packaging.metadata, "version", lambda name: installed if name == "transformers" else real_version(name)
    )
    monkeypatch.setattr(packaging, "TESTED_TRANSFORMERS", ("5.17.0", "5.24.0"))
    warning = version_warning()
    if not warned:
        assert warning is None
    else:
        assert warning is not None and "\n" not in warning
        assert warning.startswith(f"transformers {installed} is outside the range hf-minitf is tested on (5.17.0 to ")
        assert 'pip install "transformers>=5.17.0,<=5.24.0"' in warning


def test_version_warning_without_transformers(monkeypatch):
    def not_found(name):
        raise packaging.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(packaging.metadata, "version", not_found)
    assert version_warning().startswith("transformers is not installed, outside the range hf-minitf is tested on")


def test_minitf_info_names_the_versions_and_warns_outside_the_range(monkeypatch, capsys):
    status, out, err = run_cli(["info"], capsys)
    assert status == 0 and err == ""
    assert out == (
        f"versions: transformers {transformers.__version__}, sentence-transformers {sentence_transformers.__version__}, "
        f"huggingface_hub {huggingface_hub.__version__}, torch {torch.__version__}\n"
    )
    monkeypatch.setattr(packaging, "TESTED_TRANSFORMERS", ("5.0.0", "5.1.0"))
    status, out, err = run_cli(["info"], capsys)
    assert status == 0 and out.startswith("versions: transformers ")
    assert err.startswith(f"minitf info: warning: transformers {transformers.__version__} is outside the range ")


def test_every_subpackage_ships_in_the_wheel():
    """pyproject.toml lists the packages setuptools puts in the wheel: every folder of hf_minitf with an __init__.py
    is one (a new subpackage left out installs a wheel that fails at its import)."""
    import tomllib

    root = Path(__file__).parents[1]
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(path.parent.relative_to(root).parts) for path in (root / "hf_minitf").rglob("__init__.py")}
    assert found <= listed, sorted(found - listed)
