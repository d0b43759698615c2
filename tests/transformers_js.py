"""transformers.js for the tests: its npm install (tests/js), Node and headless-Chromium runners, a static server.

`node_modules` (a session fixture; conftest.py imports it) runs `npm ci` in tests/js when node_modules is missing
or was installed from another package-lock.json, with onnxruntime-node's download of a CUDA provider skipped
(`ONNXRUNTIME_NODE_INSTALL=skip`, `--ignore-scripts`: its CPU binary is inside the npm package). Node and npm are
needed (the README says how to get them); Chromium only for the `browser` tests.

`NodeRunner` and `BrowserPage` run tests/js/run.mjs and tests/js/browser.mjs: each loads its model once, then
answers one JSON request per line. Every process and server started here is stopped by its PID.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from filelock import FileLock

JS_DIR = Path(__file__).parent / "js"
LOCKFILE = JS_DIR / "package-lock.json"
INSTALLED_STAMP = JS_DIR / "node_modules" / ".minitf-lock-sha256"
CHROMIUM = "/usr/bin/chromium"
NO_NODE = (
    "node and npm are needed for the transformers.js tests (tests/js): install Node.js 20 or later "
    "(apt-get install nodejs npm, or https://nodejs.org), then run the tests again"
)


def _lock_digest() -> str:
    return hashlib.sha256(LOCKFILE.read_bytes()).hexdigest()


def install_node_modules() -> Path:
    """tests/js/node_modules as package-lock.json pins it (`npm ci` unless already installed from this lockfile)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail(NO_NODE)
    with FileLock(JS_DIR / ".npm-ci.lock"):  # pytest-xdist workers install once, one after another
        if INSTALLED_STAMP.is_file() and INSTALLED_STAMP.read_text() == _lock_digest():
            return JS_DIR / "node_modules"
        _npm_ci()
    return JS_DIR / "node_modules"


def _npm_ci() -> None:
    env = {**os.environ, "ONNXRUNTIME_NODE_INSTALL": "skip", "npm_config_fund": "false", "npm_config_audit": "false"}
    result = subprocess.run(
        ["npm", "ci", "--ignore-scripts", "--no-progress"],
        cwd=JS_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if result.returncode != 0:
        pytest.fail(f"npm ci in {JS_DIR} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    INSTALLED_STAMP.write_text(_lock_digest())


@pytest.fixture(scope="session")
def node_modules() -> Path:
    """transformers.js and playwright-core installed in tests/js (see the module docstring)."""
    return install_node_modules()


class _LineProcess:
    """A child process answering one JSON line per JSON request line, after a first {"ready": true} line."""

    def __init__(self, args: list[str], timeout: float = 300) -> None:
        self.timeout = timeout
        self.stderr = tempfile.TemporaryFile(mode="w+")  # read on failure; a pipe nobody reads could fill and block
        self.process = subprocess.Popen(
            args,
            cwd=JS_DIR,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        first = self._read()
        if first.get("ready") is not True:
            raise AssertionError(f"{' '.join(args)} did not start: {first}")

    def _read(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            self.process.wait(timeout=self.timeout)
            self.stderr.seek(0)
            raise AssertionError(
                f"{self.process.args} exited with {self.process.returncode}:\n{self.stderr.read()[-4000:]}"
            )
        return json.loads(line)

    def ask(self, request: dict) -> dict:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process.stdout.close()
        self.stderr.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


class NodeRunner(_LineProcess):
    """`node tests/js/run.mjs TASK FOLDER DTYPE`: transformers.js in Node on an ONNX export folder (`translate`: on
    the page `minitf export web` wrote). `ask` takes {"prompts", "max_new_tokens"} (answer: the new token ids of each
    prompt; for `text-generation`, the cards' pipeline, each prompt's {"ids", "text"}), {"sentences"} (the
    embeddings) or {"texts", "max_new_tokens"} (each translation's ids and text).

    `hub`: (the URL of a Hub, a cache folder): `folder` is then a repo id of that Hub, loaded as a web page loads one
    (remote only, downloads cached in the folder)."""

    def __init__(self, task: str, folder: Path | str, dtype: str = "fp32", hub: tuple[str, Path] | None = None) -> None:
        remote = ["--hub", hub[0], str(hub[1])] if hub else []
        super().__init__(["node", str(JS_DIR / "run.mjs"), task, str(folder), dtype, *remote])


class BrowserPage(_LineProcess):
    """`node tests/js/browser.mjs URL`: the page at URL in headless Chromium (see browser.mjs for the requests);
    `offline`: every request off the page's own server refused, its policy sent as a header (a bundled page)."""

    def __init__(self, url: str, offline: bool = False) -> None:
        if not Path(CHROMIUM).is_file():
            pytest.fail(f"{CHROMIUM} is missing: the browser tests need Debian's chromium (apt-get install chromium)")
        super().__init__(["node", str(JS_DIR / "browser.mjs"), url, *(["--offline"] if offline else [])])


class StaticServer:
    """`python -m http.server` serving `folder` on a free 127.0.0.1 port, in a child process stopped by its PID."""

    def __init__(self, folder: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", str(folder)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        line = self.process.stdout.readline()  # "Serving HTTP on 127.0.0.1 port 40123 (http://127.0.0.1:40123/) ..."
        if "port" not in line:
            self.stop()
            raise AssertionError(f"http.server did not start: {line!r}")
        self.url = f"http://127.0.0.1:{int(line.split(' port ')[1].split()[0])}/"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self.process.stdout.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()
