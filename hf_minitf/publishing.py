"""Publish an export in one step: export a MiniTF folder (its native form with GGUF files, or its web page), then
upload the result (`minitf push --native`, `minitf push --space`), or every runtime's export to its own repo
(`minitf push --all-runtimes`). It chains two tools, so it sits above both: `hf_minitf.export` writes,
`hf_minitf.hub` uploads, and neither imports the other."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from hf_minitf.cards import drop_local_source
from hf_minitf.catalog.packaging import EXTRAS
from hf_minitf.catalog.publishing import ALL_RUNTIMES_GGUF_DTYPES, RUNTIME_REPO_SUFFIXES
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
    source_repo: str | None = None,
    verbose: bool = False,
) -> str:
    """Export `source` (a MiniTF folder) to its native transformers architecture (`export_native`), with GGUF files
    of `gguf_dtypes` beside it, and upload that folder to `repo_id` in one commit; return the commit URL. `check`, when
    given, is called with the exported folder before the upload (`minitf push` verifies it there: its card gets the
    "Runs in" table); a ValueError it raises is a PushError, and nothing is uploaded.

    The card's snippets name `repo_id` (transformers, vLLM, and llama.cpp / Ollama for the GGUF files); its license
    is `license`, else the source card's; its `base_model` is `source_repo` (the Hub repo the MiniTF folder was
    pushed to, if it was), else the source's repo id when `source` is one, else none: nothing of this machine is
    named (the GGUF files record `source_repo`, else `source`'s repo id, else no source). A model with no exact
    native or GGUF form is a PushError, and nothing is uploaded. The progress bars and
    notes of the models the export and `check` load are shown only when `verbose` (`quiet_loading`).
    """
    from hf_minitf.export.native import export_native

    return _export_then_commit(
        lambda staging: export_native(
            source,
            staging,
            gguf_dtypes=gguf_dtypes,
            model_id=repo_id,
            license=license,
            source_repo=source_repo,
            published=True,
        ),
        repo_id,
        HubTarget(private, revision, token),
        commit_message or f"Upload {Path(source).name} exported with minitf push --native",
        check,
        verbose,
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
    verbose: bool = False,
) -> str:
    """Upload a web page running a MiniTF model in the browser to the static Space `repo_id` (created if needed) in
    one commit; return the commit URL. `source` is the page `minitf export web` wrote (uploaded as it is), or a
    MiniTF GPT or encoder folder, exported first (`export_web`, with `examples` in its boxes and `license` in its
    card) and given to `check` (as `push_native` does, quiet unless `verbose`). A model the web export refuses is a
    PushError, and nothing is uploaded."""
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
        verbose,
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


@contextlib.contextmanager
def quiet_loading(verbose: bool = False) -> Iterator[None]:
    """transformers' progress bars and notes hidden while a push's exports and checks load models (a native push
    loads four, each with its "Loading weights" bar), then as they were; shown when `verbose`."""
    from transformers.utils import logging

    if verbose:
        yield
        return
    shown, verbosity = logging.is_progress_bar_enabled(), logging.get_verbosity()
    logging.disable_progress_bar()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)
        if shown:
            logging.enable_progress_bar()


def _export_then_commit(
    export: Callable[[Path], object],
    repo_id: str,
    target: HubTarget,
    message: str,
    check: Callable[[Path], object] | None = None,
    verbose: bool = False,
) -> str:
    """Export into a temporary folder and `check` it, quiet unless `verbose` (a refused export or check is a
    PushError, and nothing is sent), then commit it."""
    with tempfile.TemporaryDirectory() as staging_dir:
        staging = Path(staging_dir) / "export"
        try:
            with quiet_loading(verbose):
                export(staging)
                if check is not None:
                    check(staging)
        except (ValueError, OSError) as error:
            raise PushError(str(error).strip().splitlines()[0]) from None
        drop_local_source(staging)
        return target.commit(staging, repo_id, message, roots=[staging])


@dataclass(frozen=True)
class RuntimeRepo:
    """One repo of `push_all_runtimes`: what goes there (`runtime`), its id, how it is committed and the export that
    fills a folder for it."""

    runtime: str
    repo_id: str
    target: HubTarget
    export: Callable[[Path], object]


def _gguf_repo(
    source: str | Path,
    folder: Path,
    dtypes: tuple[str, ...],
    repo_id: str,
    native_repo: str,
    license: str | None,
    source_repo: str | None = None,
) -> None:
    """The GGUF repo's folder: `<name>-<DTYPE>.gguf` per type (`export_gguf_report`, each agreement measured; each
    recording its source as `source_repo`, the Hub repo of the MiniTF folder, else the source's repo id, else none),
    for a GPT the `Modelfile` of the first (`export_ollama`'s, FROM that file) and the card
    (model_cards/gguf_repo.md)."""
    from hf_minitf.cards import export_card, export_card_data, model_examples, source_naming
    from hf_minitf.cards.facts import FolderFacts
    from hf_minitf.catalog.exports import OLLAMA_GGUF_FILE, OLLAMA_MODELFILE
    from hf_minitf.export.gguf import export_gguf_report
    from hf_minitf.export.ollama import export_ollama, ollama_name
    from hf_minitf.export.source import open_source
    from hf_minitf.safety.output_folders import size_text

    opened = open_source(source)
    name = repo_id.split("/")[-1].removesuffix(RUNTIME_REPO_SUFFIXES["gguf"])
    folder.mkdir(parents=True)
    files, created, reports = [f"{name}-{dtype.upper()}.gguf" for dtype in dtypes], None, []
    for index, (dtype, file) in enumerate(zip(dtypes, files)):
        if index == 0 and opened.family == "gpt":  # the Ollama folder of the first type: its GGUF and Modelfile
            ollama = export_ollama(
                source, folder / ".ollama", dtype=dtype, license=license, source_repo=source_repo, published=True
            )
            report = ollama.gguf
            (folder / ".ollama" / OLLAMA_GGUF_FILE).rename(folder / file)
            lines = (folder / ".ollama" / OLLAMA_MODELFILE).read_text(encoding="utf-8").splitlines(keepends=True)
            written_from = f"FROM ./{OLLAMA_GGUF_FILE}\n"  # the Modelfile names the file: now the renamed one
            if written_from not in lines:
                raise RuntimeError(f"the Ollama export's {OLLAMA_MODELFILE} has no line {written_from.strip()!r}")
            modelfile = "".join(f"FROM ./{file}\n" if line == written_from else line for line in lines)
            (folder / OLLAMA_MODELFILE).write_text(modelfile, encoding="utf-8")
            shutil.rmtree(folder / ".ollama")
            created = ollama_name(name)
        else:
            report = export_gguf_report(
                source, folder / file, dtype=dtype, license=license, source_repo=source_repo, published=True
            )
        reports.append(report)
    rows = [
        {
            "name": file,
            "dtype": report.dtype,
            "quant": report.dtype.upper(),
            "size": size_text((folder / file).stat().st_size),
            "writer": report.quantizer or "the gguf package",
            "agreement": report.advised_summary() if report.agreement else "measured by minitf verify (below)",
        }
        for file, report in zip(files, reports)
    ]
    card = export_card(
        "gguf_repo.md",
        library_name="gguf",
        pipeline_tag=FolderFacts.from_folder(opened.folder).pipeline_tag,
        tags=["gguf", *(["ollama"] if created else [])],
        carried=export_card_data(opened.folder, license, figures=False),  # the float32 figures: not these files'
        **source_naming(opened.family, opened.repo_id, opened.revision, native_repo),
        title=name,
        native_repo=native_repo,
        model_id=repo_id,
        files=rows,
        examples=model_examples(opened.folder),
        modelfile=OLLAMA_MODELFILE if created else None,
        name=created,
    )
    card.save(folder / "README.md")


def push_all_runtimes(
    source: str | Path,
    repo_id: str,
    *,
    gguf_dtypes: tuple[str, ...] = ALL_RUNTIMES_GGUF_DTYPES,
    examples: tuple[str, ...] = (),
    license: str | None = None,
    private: bool = False,
    revision: str | None = None,
    token: str | None = None,
    commit_message: str | None = None,
    check_for: Callable[[str], Callable[[Path], object]] | None = None,
    note: Callable[[str], object] = print,
    source_repo: str | None = None,
    verbose: bool = False,
) -> dict[str, str]:
    """Export the MiniTF folder `source` to every runtime its family has and upload each to its conventional place
    (`catalog.publishing.RUNTIME_REPO_SUFFIXES`): the native folder to `repo_id`, GGUF files of `gguf_dtypes` (with a
    GPT's Ollama Modelfile) to `repo_id-GGUF`, the ONNX folder to `repo_id-ONNX`, the CTranslate2 folder to
    `repo_id-ct2`, the web page (`examples` in its boxes) to the static Space `repo_id`. Returns each repo's commit URL, by repo id.
    The native card's `base_model` is `source_repo` (the Hub repo the MiniTF folder was pushed to, if it was), the
    other cards' the native repo `repo_id`: no card names a folder of this machine, nor does a GGUF file's metadata
    (its source: `source_repo`, else `source` when it is a repo id, else none).

    Every export is written and checked (`check_for(repo)` gives the check of that repo's folder: `minitf push` runs
    its verification there, which writes the card's "Runs in" table) before anything is sent: a refused export or
    check is a PushError, and nothing is uploaded. A GGUF type only llama.cpp's quantizer writes is left out with a
    `note` where llama-cpp-python is not installed. The progress bars and notes of the models loaded are shown only
    when `verbose`."""
    from hf_minitf.export.ctranslate2 import export_ctranslate2
    from hf_minitf.export.formats import export_format
    from hf_minitf.export.gguf_file import llama_quantizer_installed, needs_llama_quantizer
    from hf_minitf.export.native import export_native
    from hf_minitf.export.onnx import export_onnx
    from hf_minitf.export.source import open_source
    from hf_minitf.export.web import export_web

    try:
        family = open_source(source).family
    except (ValueError, OSError) as error:
        raise PushError(str(error).strip().splitlines()[0]) from None
    if not llama_quantizer_installed():
        skipped = [dtype for dtype in gguf_dtypes if needs_llama_quantizer(dtype)]
        for dtype in skipped:
            note(
                f"GGUF {dtype} left out: llama.cpp's quantizer writes its K-quants, and llama-cpp-python is not "
                f"installed ({EXTRAS['llama'].install})"
            )
        gguf_dtypes = tuple(dtype for dtype in gguf_dtypes if dtype not in skipped)
    model = HubTarget(private, revision, token)
    gguf_repo, onnx_repo, ct2_repo = (repo_id + RUNTIME_REPO_SUFFIXES[kind] for kind in ("gguf", "onnx", "ctranslate2"))
    repos = [
        RuntimeRepo(
            "native",
            repo_id,
            model,
            lambda out: export_native(
                source, out, model_id=repo_id, license=license, source_repo=source_repo, published=True
            ),
        ),
        RuntimeRepo(
            "gguf",
            gguf_repo,
            model,
            lambda out: _gguf_repo(source, out, gguf_dtypes, gguf_repo, repo_id, license, source_repo),
        ),
        RuntimeRepo(
            "onnx", onnx_repo, model, lambda out: export_onnx(source, out, license=license, source_repo=repo_id)
        ),
        RuntimeRepo(
            "ctranslate2",
            ct2_repo,
            model,
            lambda out: export_ctranslate2(source, out, license=license, source_repo=repo_id),
        ),
        RuntimeRepo(
            "web",
            repo_id,
            HubTarget(private, revision, token, space_sdk="static"),
            lambda out: export_web(
                source, out, examples=examples, title=repo_id.split("/")[-1], license=license, source_repo=repo_id
            ),
        ),
    ]
    kept = []
    for repo in repos:
        families = export_format(repo.runtime).families
        if family not in families:
            note(f"{repo.runtime} left out: it exports {', '.join(families)} models, not a {family}")
        elif repo.runtime == "gguf" and not gguf_dtypes:
            note("gguf left out: no GGUF type left to write")
        else:
            kept.append(repo)
    with tempfile.TemporaryDirectory() as staging_dir:
        folders = []
        for index, repo in enumerate(kept):
            folder = Path(staging_dir) / str(index) / repo.repo_id.split("/")[-1]  # a card's title names it
            folder.parent.mkdir()
            try:
                with quiet_loading(verbose):
                    repo.export(folder)
                    if check_for is not None:
                        check_for(repo.repo_id)(folder)
            except (ValueError, OSError) as error:
                raise PushError(f"{repo.runtime}: {str(error).strip().splitlines()[0]}") from None
            drop_local_source(folder)
            folders.append(folder)
        return {
            f"{repo.repo_id}{' (Space)' if repo.target.space_sdk else ''}": repo.target.commit(
                folder,
                repo.repo_id,
                commit_message or f"Upload {Path(source).name} ({repo.runtime}) with minitf push --all-runtimes",
                roots=[folder],
            )
            for repo, folder in zip(kept, folders)
        }


__all__ = ["push_all_runtimes", "push_native", "push_space"]
