"""hf_minitf as installed: the optional parts, `pip install "hf-minitf[NAME]"` (what each brings, the modules it
provides and what needs it), and where the documentation is. Everything the models, training, conversion, `minitf
push` and the Python API import is a base dependency; an extra holds what only its commands need.

pyproject.toml's `[project.optional-dependencies]` lists the same requirements (tests/test_packaging.py holds the
two equal). A command that meets a missing module of an extra says which extra to install (`missing_extra`). The
transformers releases the suite is tested on, and the warning outside them (`version_warning`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import metadata

PACKAGE = "hf-minitf"
SOURCE_DISTRIBUTION = f"pip download --no-deps --no-binary :all: {PACKAGE}"


def docs_page(page: str) -> str:
    """A page of the documentation, named where a user finds it: docs/ is in the source distribution (and the
    repository), not in the wheel."""
    return f"docs/{page} (in {PACKAGE}'s source distribution: `{SOURCE_DISTRIBUTION}`)"


@dataclass(frozen=True)
class Extra:
    """One extra of the package."""

    name: str
    requirements: tuple[str, ...]
    """Its requirements, as pyproject.toml lists them."""
    modules: tuple[str, ...]
    """The top-level modules it provides (what `import` names)."""
    needed_by: str
    """What needs it, in a user's words."""
    in_test_extra: bool = True
    """Whether the test extra (`make test`) installs it: False for one that builds from source for minutes."""

    @property
    def install(self) -> str:
        """The command that installs it."""
        return f'pip install "{PACKAGE}[{self.name}]"'


EXTRAS: dict[str, Extra] = {
    extra.name: extra
    for extra in (
        Extra(
            name="serve",
            # The server (FastAPI, on transformers' public API: it takes the transformers installed). httpx, the client
            # of `minitf serve --engine vllm`'s front, is a base dependency (huggingface_hub's too).
            requirements=("fastapi>=0.110", "uvicorn>=0.29", "openai>=1.98", "pydantic>=2"),
            modules=("fastapi", "starlette", "uvicorn", "openai", "pydantic"),
            needed_by="minitf serve",
        ),
        Extra(
            name="engines",
            requirements=("ctranslate2>=4.5", "onnxruntime>=1.20", "onnx>=1.17", "onnxscript>=0.2"),
            modules=("ctranslate2", "onnxruntime", "onnx", "onnxscript"),
            needed_by="minitf export ctranslate2 / onnx / web and running their folders",
        ),
        Extra(
            name="llama",
            # llama.cpp itself: its quantizer writes the K-quants (q4_k_m, q5_k_m, q6_k) the gguf package cannot, and
            # `minitf verify` and the engines tests run GGUF files in it. It compiles llama.cpp on install (about ten
            # minutes), so the test extra leaves it out: `pytest -m engines` needs it.
            requirements=("llama-cpp-python>=0.3",),
            modules=("llama_cpp",),
            needed_by="minitf export gguf / ollama at q4_k_m, q5_k_m and q6_k, and running GGUF files in llama.cpp",
            in_test_extra=False,
        ),
        Extra(
            name="plot",
            requirements=("matplotlib>=3.8",),
            modules=("matplotlib",),
            needed_by="the loss curve (loss_curve.png) of minitf train and quickstart",
        ),
        Extra(
            name="eval",
            requirements=("sacrebleu>=2.4",),
            modules=("sacrebleu",),
            needed_by="minitf eval's BLEU and chrF of a translator",
        ),
        Extra(
            name="quantization",
            requirements=("torchao>=0.14",),
            modules=("torchao",),
            needed_by="transformers' TorchAoConfig (int8 / bf16 weights)",
        ),
    )
}


def extra_providing(module: str | None) -> Extra | None:
    """The extra that provides `module` (a dotted name), if one does."""
    top = (module or "").partition(".")[0]
    return next((extra for extra in EXTRAS.values() if top in extra.modules), None)


def missing_extra(error: BaseException) -> str | None:
    """For a module an extra provides that is not installed, what to install, in one line; else None (also for a
    module that is installed but fails to import: that is no missing extra)."""
    if not isinstance(error, ModuleNotFoundError):
        return None
    extra = extra_providing(error.name)
    if extra is None:
        return None
    return (
        f"no module named {error.name!r}, which the {extra.name} extra brings (for {extra.needed_by}): {extra.install}"
    )


# The transformers releases the whole suite passed on, at the last run of the support matrix (`make test-oldest`:
# constraints/oldest.txt's transformers, which tests/test_packaging.py holds equal to this; `make test-latest`: the
# newest release that passed). README.md and CHANGELOG.md state the same range and date.
TESTED_TRANSFORMERS = ("5.17.0", "5.25.0")
TESTED_ON = "2026-12-06"

# What `minitf info` and the server's start-up line name, in this order.
VERSIONS_SHOWN = ("transformers", "sentence-transformers", "huggingface_hub", "torch")


def installed_version(distribution: str) -> str | None:
    """The installed version of `distribution`, read from its metadata (nothing is imported); None if absent."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def release(version: str) -> tuple[int, ...]:
    """A version's release numbers (`5.25.0.dev0` -> (5, 25, 0)), enough to compare releases of one project."""
    numbers = re.match(r"\d+(?:\.\d+)*", version)
    if numbers is None:
        raise ValueError(f"{version!r} is no version number (expected one like 5.24.0)")
    return tuple(int(number) for number in numbers[0].split("."))


def version_warning() -> str | None:
    """One line naming the installed transformers and the range hf-minitf is tested on, when it is outside that
    range; None inside it. Torch-free: `minitf info` and the server's start-up line call it."""
    installed = installed_version("transformers")
    oldest, newest = TESTED_TRANSFORMERS
    if installed is not None and release(oldest) <= release(installed) <= release(newest):
        return None
    found = f"transformers {installed} is outside" if installed else "transformers is not installed, outside"
    return (
        f"{found} the range {PACKAGE} is tested on ({oldest} to {newest}, last run {TESTED_ON}): "
        f'pip install "transformers>={oldest},<={newest}" for a tested one'
    )


__all__ = [
    "EXTRAS",
    "PACKAGE",
    "SOURCE_DISTRIBUTION",
    "TESTED_ON",
    "TESTED_TRANSFORMERS",
    "VERSIONS_SHOWN",
    "Extra",
    "docs_page",
    "extra_providing",
    "installed_version",
    "missing_extra",
    "release",
    "version_warning",
]
