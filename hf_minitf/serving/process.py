"""`minitf serve` in a subprocess on a free loopback port, for tests, benchmarks and notebooks (`server_process`)."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hf_minitf.serving import API_KEY_VARIABLE


@dataclass
class ServerProcess:
    """A `minitf serve` subprocess started by `server_process`: its base URL and process."""

    url: str
    process: Any


@contextlib.contextmanager
def server_process(
    models: Sequence[str],
    *options: str,
    api_key: str | None = None,
    cwd: str | None = None,
    log: str | os.PathLike | None = None,
    timeout: float = 300,
) -> Iterator[ServerProcess]:
    """Run `minitf serve MODELS OPTIONS` on a free loopback port until the block ends (tests, benchmarks, notebooks).

    Waits until /health answers; raises RuntimeError with the end of the server's output (kept in the file `log`,
    else in a temporary file) if it exits or does not answer within `timeout` seconds.
    """
    import subprocess
    import sys
    import tempfile
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "hf_minitf.cli", "serve", *map(str, models), "--port", str(port), *options]
    env = {**os.environ, API_KEY_VARIABLE: api_key or ""}
    with contextlib.ExitStack() as stack:
        if log is None:
            log = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "server.log"
        output = stack.enter_context(open(log, "w"))
        process = subprocess.Popen(command, cwd=cwd, stdout=output, stderr=subprocess.STDOUT, env=env)
        stack.callback(_stop, process)
        url = f"http://127.0.0.1:{port}"
        health = urllib.request.Request(f"{url}/health", headers={"Authorization": f"Bearer {api_key or ''}"})
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(health, timeout=5):
                    break
            except OSError:  # not listening yet
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                output.flush()
                state = "exited" if process.poll() is not None else f"did not answer in {timeout:.0f} s"
                raise RuntimeError(f"minitf serve {state}:\n{Path(log).read_text()[-3000:]}")
            time.sleep(0.2)
        yield ServerProcess(url, process)


def _stop(process) -> None:
    import subprocess

    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


__all__ = ["ServerProcess", "server_process"]
