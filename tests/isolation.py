"""Run Python code in a fresh process that cannot import hf_minitf (as a user without the package would)."""

import json
import os
import subprocess
import sys
import textwrap

from _hf_minitf_autoregister import DISABLE_VARIABLE

_HIDE_HF_MINITF = """
import importlib.util, os, sys
sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != os.path.abspath({root!r})]
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()
                    and "editable" not in getattr(f, "__module__", "").lower()]
sys.path_hooks[:] = [h for h in sys.path_hooks if "editable" not in getattr(h, "__module__", "").lower()]
sys.path_importer_cache.clear()
assert importlib.util.find_spec("hf_minitf") is None, "hf_minitf is still importable"
"""

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_without_hf_minitf(code: str, cwd: str, timeout: int = 300) -> dict:
    """Run `code` where hf_minitf is not importable; the code prints one JSON object last, which is returned."""
    program = _HIDE_HF_MINITF.format(root=REPO_ROOT) + textwrap.dedent(code)
    # The installed package's start-up hook (hf_minitf.pth) would try to register it in that process: off.
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, DISABLE_VARIABLE: "1"}
    result = subprocess.run(
        [sys.executable, "-c", program], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, f"subprocess failed:\n{result.stdout}\n{result.stderr}"
    return json.loads(result.stdout.strip().splitlines()[-1])
