"""Publish an export in one step: export a MiniTF folder (its native form with GGUF files, or its web page), then
upload the result (`minitf push --native`, `minitf push --space`). It chains two tools, so it sits above both:
`hf_minitf.export` writes, `hf_minitf.hub` uploads, and neither imports the other."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hf_minitf.hub.push import PushError, commit_folder


def push_native(
    source: str | Path,
    repo_id: str,
    *,
    gguf_dtypes: tuple[str, ...] = (),
    private: bool = False,
    revision: str | None = None,
    license: str | None = None,
    commit_message: str | None = None,
    token: str | None = None,
    check: Callable[[Path], object] | None = None,
) -> str:
    """Export `source` (a MiniTF folder) to its native transformers architecture (`export_native`), with GGUF files
    of `gguf_dtypes` beside it, and upload that folder to `repo_id` in one commit; return the commit URL. `check`, when
    given, is called with the exported folder before the upload (`minitf push` verifies it there: its card gets the
    "Runs in" table); a ValueError it raises is a PushError, and nothing is uploaded.

    The card's snippets name `repo_id` (transformers, vLLM, and llama.cpp / Ollama for the GGUF files); its license
    is `license`, else the source card's. A model with no exact native or GGUF form is a PushError, and nothing is
    uploaded.
    """
    from hf_minitf.export.native import export_native

    return _export_then_commit(
        lambda staging: export_native(source, staging, gguf_dtypes=gguf_dtypes, model_id=repo_id, license=license),
        repo_id,
        HubTarget(private, revision, token),
        commit_message or f"Upload {Path(source).name} exported with minitf push --native",
        check,
    )


def push_space(
    source: str | Path,
    repo_id: str,
    *,
    examples: tuple[str, ...] = (),
    private: bool = False,
    revision: str | None = None,
    license: str | None = None,
    commit_message: str | None = None,
    token: str | None = None,
    check: Callable[[Path], object] | None = None,
) -> str:
    """Upload a web page running a MiniTF model in the browser to the static Space `repo_id` (created if needed) in
    one commit; return the commit URL. `source` is the page `minitf export web` wrote (uploaded as it is), or a
    MiniTF GPT or encoder folder, exported first (`export_web`, with `examples` in its boxes and `license` in its
    card) and given to `check` (as `push_native` does). A model the web export refuses is a PushError, and nothing
    is uploaded."""
    from hf_minitf.export.web import SITE_FILE, export_web

    target = HubTarget(private, revision, token, space_sdk="static")
    message = commit_message or f"Upload {Path(source).name} as a web page with minitf push --space"
    if (Path(source) / SITE_FILE).is_file():
        if examples or license:
            raise PushError(
                f"{source} is a page minitf export web wrote, uploaded as it is; its examples and card are written: "
                "export the model again with them, or push the model folder with them."
            )
        return target.commit(Path(source), repo_id, message, roots=[Path(source)])
    return _export_then_commit(
        lambda staging: export_web(source, staging, examples=examples, title=repo_id.split("/")[-1], license=license),
        repo_id,
        target,
        message,
        check,
    )


@dataclass(frozen=True)
class HubTarget:
    """Where and how a commit goes: a private repo or not, a branch, a token, a Space's SDK (None: a model repo)."""

    private: bool
    revision: str | None
    token: str | None
    space_sdk: str | None = None

    def commit(self, folder: Path, repo_id: str, message: str, roots: list[Path]) -> str:
        return commit_folder(
            folder,
            repo_id,
            private=self.private,
            revision=self.revision,
            token=self.token,
            commit_message=message,
            roots=roots,
            space_sdk=self.space_sdk,
        )


def _export_then_commit(
    export: Callable[[Path], object],
    repo_id: str,
    target: HubTarget,
    message: str,
    check: Callable[[Path], object] | None = None,
) -> str:
    """Export into a temporary folder and `check` it (a refused export or check is a PushError, and nothing is
    sent), then commit it."""
    with tempfile.TemporaryDirectory() as staging_dir:
        staging = Path(staging_dir) / "export"
        try:
            export(staging)
            if check is not None:
                check(staging)
        except (ValueError, OSError) as error:
            raise PushError(str(error).strip().splitlines()[0]) from None
        return target.commit(staging, repo_id, message, roots=[staging])


__all__ = ["push_native", "push_space"]
