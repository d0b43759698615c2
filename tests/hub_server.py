"""A loopback Hugging Face Hub for tests: real HTTP, no network.

`LoopbackHub` is a threaded `http.server` bound to 127.0.0.1 (a free port) that speaks the part of the Hub API
huggingface_hub uses to push and pull model repos, and to push Space repos: create repo, branches, preupload,
commit (NDJSON, base64 files), resolve/download (with `X-Repo-Commit`, `ETag`, `X-Error-Code`), repo info, tree,
refs, whoami and validate-yaml. Repos live in memory; every commit is kept, so a test can see exactly what each
push uploaded.

Use it through the `hub` fixture (module-scoped: one server per test module; conftest.py imports it):

    def test_push(hub, tmp_path):
        model.push_to_hub("org/name")                   # huggingface_hub, transformers, sentence-transformers
        assert hub.files("org/name") == {"config.json", ...}
        assert hub.uploads[-1].paths == [...]           # what one commit sent
        hub.files("org/demo", repo_type="space")        # a Space repo (hub.spaces["org/demo"].sdk: its SDK)
        hub.subprocess_env()                            # env for a child process that should use this Hub

While the fixture is active, `huggingface_hub.constants.ENDPOINT` (and the derived URL template), the shared
HfApi instances, `HF_ENDPOINT`, `HF_TOKEN` and the offline switches point at this server, with hub offline
mode off (tests/conftest.py turns it on for everything else). `hub.offline()` turns offline mode back on,
for tests of loading from the cache. Writes need `Authorization: Bearer <hub.token>`: anything else is a 401.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

import pytest

TOKEN = "hf_loopback_test_token"
USER = "tester"


@dataclass
class Commit:
    """One commit: its id, message and the full file tree after it (path -> bytes)."""

    repo_id: str
    oid: str
    message: str
    files: dict[str, bytes]
    paths: list[str] = field(default_factory=list)  # what this commit added or changed
    revision: str = "main"


@dataclass
class Repo:
    repo_id: str
    private: bool = False
    sdk: str | None = None  # a Space's SDK (static, gradio, docker); None for a model repo
    branches: dict[str, str] = field(default_factory=dict)  # branch -> commit oid
    commits: dict[str, Commit] = field(default_factory=dict)


class LoopbackHub:
    """The server and its repos; see the module docstring."""

    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}  # model repos
        self.spaces: dict[str, Repo] = {}  # Space repos (a Space may share its id with a model)
        self.uploads: list[Commit] = []
        self.unknown_requests: list[str] = []
        self.token = TOKEN
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def kinds(self) -> dict[str, dict[str, Repo]]:
        """The repos of each kind, by the name the API paths give it (`/api/models/...`, `/api/spaces/...`)."""
        return {"models": self.repos, "spaces": self.spaces}

    def start(self) -> LoopbackHub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # --- what tests read ---
    def files(self, repo_id: str, revision: str = "main", repo_type: str = "model") -> set[str]:
        """The paths in `repo_id` (a model repo, or a Space with repo_type="space") at `revision`."""
        return set(self._tree(repo_id, revision, repo_type))

    def read(self, repo_id: str, path: str, revision: str = "main", repo_type: str = "model") -> bytes:
        return self._tree(repo_id, revision, repo_type)[path]

    def _tree(self, repo_id: str, revision: str, repo_type: str = "model") -> dict[str, bytes]:
        repo = self.kinds[f"{repo_type}s"][repo_id]
        oid = repo.branches.get(revision, revision)
        return repo.commits[oid].files if oid in repo.commits else {}

    def subprocess_env(self, **extra: str) -> dict[str, str]:
        """Environment for a child process that should talk to this Hub (online)."""
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(
            HF_ENDPOINT=self.url,
            HF_TOKEN=self.token,
            HF_HUB_OFFLINE="0",
            TRANSFORMERS_OFFLINE="0",
            HF_HUB_DISABLE_XET="1",
            **extra,
        )
        return env

    @contextlib.contextmanager
    def offline(self):
        """Hub offline mode on (as `HF_HUB_OFFLINE=1` does), for loading from the cache."""
        from huggingface_hub import constants

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(constants, "HF_HUB_OFFLINE", True)
            patch.setenv("HF_HUB_OFFLINE", "1")
            yield

    # --- request handling ---
    def _commit(self, repo: Repo, revision: str, lines: list[dict]) -> Commit:
        header = next(line["value"] for line in lines if line["key"] == "header")
        parent = repo.branches.get(revision)
        files = dict(repo.commits[parent].files) if parent else {}
        paths = []
        for line in lines:
            value = line["value"]
            if line["key"] == "file":
                files[value["path"]] = base64.b64decode(value["content"])
                paths.append(value["path"])
            elif line["key"] in ("deletedFile", "deletedFolder"):
                prefix = value["path"].rstrip("/")
                for path in [p for p in files if p == prefix or p.startswith(prefix + "/")]:
                    del files[path]
            elif line["key"] == "lfsFile":
                raise ValueError("LFS uploads are not supported by the loopback Hub (preupload answers regular)")
        digest = hashlib.sha1(
            json.dumps([header.get("summary"), sorted(paths), parent, len(repo.commits)]).encode()
        ).hexdigest()
        commit = Commit(repo.repo_id, digest, header.get("summary", ""), files, sorted(paths), revision)
        repo.commits[digest] = commit
        repo.branches[revision] = digest
        self.uploads.append(commit)
        return commit


def _etag(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _handler_for(hub: LoopbackHub):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            pass

        # --- helpers ---
        def _send(self, status: int, body: bytes = b"", headers: dict | None = None, head: bool = False) -> None:
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _json(self, status: int, data, headers: dict | None = None) -> None:
            self._send(status, json.dumps(data).encode(), {"Content-Type": "application/json", **(headers or {})})

        def _error(self, status: int, code: str, message: str, head: bool = False) -> None:
            body = json.dumps({"error": message}).encode()
            self._send(
                status,
                body,
                {"Content-Type": "application/json", "X-Error-Code": code, "X-Error-Message": message},
                head=head,
            )

        def _body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _authorized(self) -> bool:
            return self.headers.get("Authorization") == f"Bearer {hub.token}"

        def _repo(self, repo_id: str, head: bool = False, kind: str = "models") -> Repo | None:
            repo = hub.kinds[kind].get(repo_id)
            if repo is None or (repo.private and not self._authorized()):
                self._error(404, "RepoNotFound", f"Repository Not Found for url: {self.path}", head=head)
                return None
            return repo

        def _commit_of(self, repo: Repo, revision: str, head: bool = False) -> Commit | None:
            oid = repo.branches.get(revision, revision)
            if oid not in repo.commits:
                self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}", head=head)
                return None
            return repo.commits[oid]

        def _repo_info(self, repo: Repo, commit: Commit) -> dict:
            info = {
                "id": repo.repo_id,
                "sha": commit.oid,
                "private": repo.private,
                "siblings": [{"rfilename": path} for path in sorted(commit.files)],
                "tags": [],
                "likes": 0,
                "author": repo.repo_id.split("/")[0],
            }
            if repo.sdk is not None:  # a Space
                return {**info, "sdk": repo.sdk}
            return {**info, "modelId": repo.repo_id, "downloads": 0}

        # --- verbs ---
        def do_HEAD(self) -> None:
            self._get(head=True)

        def do_GET(self) -> None:
            self._get(head=False)

        def _get(self, head: bool) -> None:
            url = urlparse(self.path)
            path = unquote(url.path)
            with hub._lock:
                if path == "/api/whoami-v2":
                    if not self._authorized():
                        return self._error(401, "Unauthorized", "Invalid credentials in Authorization header")
                    return self._json(
                        200,
                        {
                            "type": "user",
                            "name": USER,
                            "orgs": [],
                            "auth": {"type": "access_token", "accessToken": {"displayName": "test", "role": "write"}},
                        },
                    )
                match = re.fullmatch(r"/api/(models|spaces)/([^/]+/[^/]+)(?:/revision/(.+))?", path)
                if match:
                    repo = self._repo(match[2], head, match[1])
                    commit = repo and self._commit_of(repo, match[3] or "main", head)
                    return commit and self._json(200, self._repo_info(repo, commit))
                match = re.fullmatch(r"/api/(models|spaces)/([^/]+/[^/]+)/refs", path)
                if match:
                    repo = self._repo(match[2], head, match[1])
                    return repo and self._json(
                        200,
                        {
                            "branches": [
                                {"name": name, "ref": f"refs/heads/{name}", "targetCommit": oid}
                                for name, oid in repo.branches.items()
                            ],
                            "tags": [],
                            "converts": [],
                        },
                    )
                match = re.fullmatch(r"/api/(models|spaces)/([^/]+/[^/]+)/tree/([^/]+)(?:/(.*))?", path)
                if match:
                    repo = self._repo(match[2], head, match[1])
                    commit = repo and self._commit_of(repo, match[3], head)
                    if not commit:
                        return None
                    recursive = parse_qs(url.query).get("recursive", ["false"])[0].lower() == "true"
                    prefix = (match[4] or "").strip("/")
                    return self._json(200, _tree_entries(commit.files, prefix, recursive))
                match = re.fullmatch(r"/(spaces/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
                if match:
                    return self._resolve(match[2], match[3], match[4], head, "spaces" if match[1] else "models")
            hub.unknown_requests.append(f"GET {self.path}")
            self._error(404, "NotFound", f"loopback Hub: no route for GET {path}", head=head)

        def _resolve(self, repo_id: str, revision: str, filename: str, head: bool, kind: str) -> None:
            repo = self._repo(repo_id, head, kind)
            commit = repo and self._commit_of(repo, revision, head)
            if not commit:
                return
            if filename not in commit.files:
                return self._error(404, "EntryNotFound", f"{filename} does not exist on {revision}", head=head)
            data = commit.files[filename]
            self._send(
                200,
                data,
                {"X-Repo-Commit": commit.oid, "ETag": f'"{_etag(data)}"', "Content-Type": "application/octet-stream"},
                head=head,
            )

        def do_POST(self) -> None:
            path = unquote(urlparse(self.path).path)
            body = self._body()
            with hub._lock:
                if path == "/api/validate-yaml":
                    return self._json(200, {"errors": [], "warnings": []})
                if not self._authorized():
                    return self._error(401, "Unauthorized", "Invalid username or password.")
                if path == "/api/repos/create":
                    request = json.loads(body)
                    repo_id = f"{request.get('organization') or USER}/{request['name']}"
                    repo_type = request.get("type") or "model"
                    if repo_type not in ("model", "space"):
                        return self._error(400, "BadRequest", "the loopback Hub holds model and Space repos only")
                    if repo_type == "space" and not request.get("sdk"):
                        return self._error(400, "BadRequest", "a Space needs an sdk (static, gradio, docker)")
                    repos = hub.kinds[f"{repo_type}s"]
                    url = f"{hub.url}/{'spaces/' if repo_type == 'space' else ''}{repo_id}"
                    if repo_id in repos:
                        return self._json(409, {"error": f"You already created this {repo_type} repo", "url": url})
                    private = bool(request.get("private")) or request.get("visibility") == "private"
                    repo = Repo(repo_id, private=private, sdk=request.get("sdk") if repo_type == "space" else None)
                    repos[repo_id] = repo
                    hub._commit(repo, "main", [{"key": "header", "value": {"summary": "initial commit"}}])
                    return self._json(200, {"url": url, "name": repo_id, "id": repo_id})
                match = re.fullmatch(r"/api/(models|spaces)/([^/]+/[^/]+)/preupload/(.+)", path)
                if match:
                    if not self._repo(match[2], kind=match[1]):
                        return None
                    files = json.loads(body)["files"]
                    return self._json(
                        200,
                        {
                            "files": [
                                {"path": entry["path"], "uploadMode": "regular", "shouldIgnore": False}
                                for entry in files
                            ]
                        },
                    )
                match = re.fullmatch(r"/api/(models|spaces)/([^/]+/[^/]+)/commit/(.+)", path)
                if match:
                    repo = self._repo(match[2], kind=match[1])
                    if not repo:
                        return None
                    if match[3] not in repo.branches:
                        return self._error(404, "RevisionNotFound", f"Invalid rev id: {match[3]}")
                    lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
                    commit = hub._commit(repo, match[3], lines)
                    return self._json(
                        200,
                        {
                            "commitUrl": f"{hub.url}/{'spaces/' if match[1] == 'spaces' else ''}{repo.repo_id}"
                            f"/commit/{commit.oid}",
                            "commitOid": commit.oid,
                            "pullRequestUrl": None,
                        },
                    )
                match = re.fullmatch(r"/api/(models|spaces)/([^/]+/[^/]+)/branch/(.+)", path)
                if match:
                    repo = self._repo(match[2], kind=match[1])
                    if not repo:
                        return None
                    if match[3] in repo.branches:
                        return self._error(409, "Conflict", f"Reference already exists: {match[3]}")
                    request = json.loads(body) if body else {}
                    repo.branches[match[3]] = repo.branches[request.get("startingPoint") or "main"]
                    return self._json(200, {})
            hub.unknown_requests.append(f"POST {self.path}")
            self._error(404, "NotFound", f"loopback Hub: no route for POST {path}")

    return Handler


def _tree_entries(files: dict[str, bytes], prefix: str, recursive: bool) -> list[dict]:
    entries, folders = [], set()
    for path in sorted(files):
        if prefix and not path.startswith(prefix + "/"):
            continue
        rest = path[len(prefix) + 1 :] if prefix else path
        if "/" in rest and not recursive:
            folders.add(f"{prefix}/{rest.split('/')[0]}" if prefix else rest.split("/")[0])
            continue
        if recursive:
            parts = rest.split("/")[:-1]
            for depth in range(1, len(parts) + 1):
                folders.add("/".join(([prefix] if prefix else []) + parts[:depth]))
        entries.append({"type": "file", "path": path, "size": len(files[path]), "oid": _etag(files[path])})
    return [{"type": "directory", "path": folder, "oid": "0" * 40, "size": 0} for folder in sorted(folders)] + entries


@contextlib.contextmanager
def serve_hub():
    """Run a LoopbackHub and point huggingface_hub (this process, and child processes through os.environ) at it."""
    import huggingface_hub.hf_api
    from huggingface_hub import constants

    hub = LoopbackHub().start()
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(constants, "ENDPOINT", hub.url)
            patch.setattr(
                constants, "HUGGINGFACE_CO_URL_TEMPLATE", hub.url + "/{repo_id}/resolve/{revision}/{filename}"
            )
            patch.setattr(constants, "HF_HUB_OFFLINE", False)
            patch.setattr(constants, "HF_HUB_DISABLE_XET", True)
            patch.setattr(huggingface_hub.hf_api.api, "endpoint", hub.url)
            for name, value in hub.subprocess_env().items():
                if os.environ.get(name) != value:
                    patch.setenv(name, value)
            try:
                import transformers.utils.hub as transformers_hub

                patch.setattr(transformers_hub, "_hf_api", None)  # rebuilt on first use, with the new endpoint
            except ImportError:
                pass
            yield hub
    finally:
        hub.stop()


@pytest.fixture(scope="module")
def hub():
    """A loopback Hub shared by the tests of one module (see the module docstring)."""
    with serve_hub() as server:
        yield server
