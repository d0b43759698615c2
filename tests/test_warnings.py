"""pyproject.toml's warning rule: a FutureWarning or DeprecationWarning that transformers, sentence-transformers or
huggingface_hub raise for the package's own calls fails a test. A warning counts for the module it is attributed to,
which by the stacklevel those libraries pass is the caller's: the rule holds for warnings attributed to hf_minitf's
modules and a saved folder's code (transformers_modules.*), not to a library's own (a test calling a deprecated API
of transformers, torch deprecations inside it). Proved here by transformers' own `deprecate_kwarg` called from code
of those modules, in a pytest run of its own under the project's configuration."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent

WARNING_TESTS = '''
import warnings

from transformers.utils.deprecation import deprecate_kwarg


@deprecate_kwarg("old", version="99.0.0", new_name="new")
def api(new=None):
    return new


def call_from(module_name, category=None):
    """A caller of `api(old=...)` (or of warnings.warn(CATEGORY) at stacklevel=2) whose module is MODULE_NAME."""
    namespace = {"__name__": module_name, "api": api, "warnings": warnings, "category": category}
    code = "def call():\\n    return api(old=1)\\n" if category is None else (
        "def warn():\\n    warnings.warn('going away', category, stacklevel=2)\\n\\ndef call():\\n    return warn()\\n"
    )
    exec(compile(code, module_name.replace(".", "/") + ".py", "exec"), namespace)
    return namespace["call"]()


def test_from_hf_minitf():
    call_from("hf_minitf.commands.generate")


def test_from_a_saved_folders_code():
    call_from("transformers_modules.gpt.modeling_minitf")


def test_from_transformers():
    call_from("transformers.generation.utils")


def test_deprecation_from_huggingface_hub():
    call_from("huggingface_hub.hf_api", DeprecationWarning)


def test_deprecation_from_sentence_transformers():
    call_from("sentence_transformers.models", DeprecationWarning)


def test_from_another_library():
    call_from("torch.nn.modules.module")


def test_from_a_library_named_alike():
    call_from("transformers2.utils")
'''


def test_future_and_deprecation_warnings_from_the_three_libraries_fail_a_test(tmp_path):
    (tmp_path / "test_rule.py").write_text(WARNING_TESTS, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "-p", "no:cacheprovider", "-rA",
         "-p", "no:xdist", str(tmp_path / "test_rule.py")],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    outcomes = {name: outcome for outcome, name in re.findall(r"^(PASSED|FAILED) \S*::(\w+)", run.stdout, re.M)}
    assert outcomes == {
        "test_from_hf_minitf": "FAILED",
        "test_from_a_saved_folders_code": "FAILED",
        "test_from_transformers": "PASSED",
        "test_deprecation_from_huggingface_hub": "PASSED",
        "test_deprecation_from_sentence_transformers": "PASSED",
        "test_from_another_library": "PASSED",
        "test_from_a_library_named_alike": "PASSED",
    }, run.stdout[-3000:] + run.stderr[-2000:]
    assert "FutureWarning: `old` is deprecated" in run.stdout
