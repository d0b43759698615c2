"""Servers in subprocesses on free loopback ports: `minitf serve` for tests, benchmarks and notebooks
(`server_process`), and the servers `minitf serve --engine vllm` runs behind its front (`running`). Both wait for
/health (`wait_for_health`) and stop what they started (`stop`)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hf_minitf.serving import API_KEY_VARIABLE


@dataclass
class ServerProcess:
    """A `minitf serve` subprocess started by `server_process`: its base URL and process."""

    url: str
    process: Any


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_health(
    process: subprocess.Popen, url: str, key: str, timeout: float, pause: float
) -> Literal["exited", "timeout"] | None:
    """None once `url`/health answers (asked with `key`); "exited" if `process` exits first, "timeout" once
    `timeout` seconds pass. Asks every `pause` seconds."""
    health = urllib.request.Request(f"{url}/health", headers={"Authorization": f"Bearer {key}"})
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(health, timeout=5):
                return None
        except OSError:  # not listening yet
            pass
        if process.poll() is not None:
            return "exited"
        if time.monotonic() > deadline:
            return "timeout"
        time.sleep(pause)


def stop(process: subprocess.Popen, grace: float, group: bool = False) -> None:
    """Stop a server started here: SIGTERM, then SIGKILL after `grace` seconds; to its whole process group when
    `group` (started with start_new_session: vLLM's engine processes too), else to the process alone."""
    if process.poll() is not None:
        return

    def send(number: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(process.pid, number)
            else:
                process.send_signal(number)

    send(signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        send(signal.SIGKILL)
        process.wait()


@contextlib.contextmanager
def running(
    command: Sequence[str], environment: dict[str, str], url: str, key: str, what: str, timeout: float
) -> Iterator[subprocess.Popen]:
    """Run a server subprocess (output to this process's, in its own process group) until the block ends, once its
    /health at `url` answers; a RuntimeError if it exits first or does not answer within `timeout` seconds."""
    process = subprocess.Popen(list(command), env=environment, start_new_session=True)
    try:
        failure = wait_for_health(process, url, key, timeout, pause=0.5)
        if failure == "exited":
            raise RuntimeError(f"{what} exited with status {process.poll()} before it was ready (its output is above)")
        if failure == "timeout":
            raise RuntimeError(f"{what} did not answer within {timeout:.0f} s (its output is above)")
        yield process
    finally:
        stop(process, grace=30, group=True)


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
    import sys
    import tempfile

    port = free_port()
    command = [sys.executable, "-m", "hf_minitf.cli", "serve", *map(str, models), "--port", str(port), *options]
    env = {**os.environ, API_KEY_VARIABLE: api_key or ""}
    with contextlib.ExitStack() as stack:
        if log is None:
            log = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "server.log"
        output = stack.enter_context(open(log, "w"))
        process = subprocess.Popen(command, cwd=cwd, stdout=output, stderr=subprocess.STDOUT, env=env)
        stack.callback(stop, process, 15)
        url = f"http://127.0.0.1:{port}"
        failure = wait_for_health(process, url, api_key or "", timeout, pause=0.2)
        if failure:
            output.flush()
            state = "exited" if failure == "exited" else f"did not answer in {timeout:.0f} s"
            raise RuntimeError(f"minitf serve {state}:\n{Path(log).read_text()[-3000:]}")
        yield ServerProcess(url, process)


__all__ = ["ServerProcess", "free_port", "running", "server_process", "stop", "wait_for_health"]
