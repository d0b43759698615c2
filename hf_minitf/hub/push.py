"""Upload a saved or converted MiniTF folder, with its model card, to the Hub (`push_folder`, run by `minitf push`;
an export uploaded in one step is `hf_minitf.publishing`).

The folder is checked before anything is sent: it must hold a `config.json` and safetensors weights, no pickle
(by content, whatever the name: see `safety.pickles`), no training state (optimizer, scheduler), since whatever is
uploaded can be downloaded, and unpickled, by anyone, and no link to a file outside it. What a trainer leaves beside
the model (`training_args.bin`, `optimizer.pt`, `checkpoint-*/`, ...: `catalog.publishing.TRAINING_BYPRODUCTS`) is
left out, each one named, so the folder of `Trainer.save_model` (TRL's trainers too) pushes as it is. The files
actually sent are checked again just before the upload. Light to import: the Hub client loads when a push runs.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from hf_minitf.cards import is_eval_results_path
from hf_minitf.catalog.publishing import training_byproduct
from hf_minitf.safety.card_metadata import load_model_card
from hf_minitf.safety.files import UnsafeFileError, check_upload_sources, folder_files
from hf_minitf.safety.pickles import pickle_reason

TRAINING_STATE_NAMES = ("optimizer", "scheduler", "rng_state", "trainer_state", "training_args")
logger = logging.getLogger(__name__)


class PushError(Exception):
    """A folder that cannot be published as it is, or a Hub that refused the push."""


def check_push_folder(folder: str | Path, skipped: dict[str, str] | None = None) -> list[str]:
    """The files of `folder` that a push uploads (relative POSIX paths), or a PushError saying what is wrong.
    A trainer's by-products are left out; `skipped`, when given, receives each (a folder's name ends in `/`) with
    what it holds."""
    folder = Path(folder)
    if not folder.is_dir():
        raise PushError(f"{folder} is not a folder; pass the folder written by save_pretrained or minitf convert.")
    byproducts = skipped if skipped is not None else {}

    def is_byproduct(relative: str) -> bool:
        is_folder = (folder / relative).is_dir() and not (folder / relative).is_symlink()
        what = training_byproduct(relative, is_folder)
        if what is not None:
            byproducts[relative + ("/" if is_folder else "")] = what
        return what is not None

    try:
        files = folder_files(
            folder,
            skip=lambda relative: (
                (
                    any(part.startswith(".") or part == "__pycache__" for part in relative.split("/"))
                    and not is_eval_results_path(relative)  # the Hub's evaluation results: minitf eval wrote them
                )
                or relative.endswith(".pyc")
                or is_byproduct(relative)
            ),
        )
    except UnsafeFileError as error:
        raise PushError(str(error)) from None
    pickles = {name: reason for name in files if (reason := pickle_reason(folder / name))}
    if pickles:
        raise PushError(
            f"{folder} holds pickle files ({', '.join(pickles)}), which run code when loaded "
            f"({'; '.join(f'{name}: {reason}' for name, reason in pickles.items())}); "
            "remove them (the weights belong in model.safetensors) and push again."
        )
    state = [name for name in files if any(marker in Path(name).name.lower() for marker in TRAINING_STATE_NAMES)]
    if state:
        raise PushError(f"{folder} holds training state ({', '.join(state)}); remove it and push again.")
    if "config.json" not in files:
        raise PushError(f"{folder} has no config.json; save the model with save_pretrained (or minitf convert) first.")
    if not any(name.endswith(".safetensors") for name in files):
        raise PushError(f"{folder} has no .safetensors weights; save the model with save_pretrained first.")
    if "README.md" in files:  # the card is completed for the repo: it must read (named here, not in the staging copy)
        try:
            load_model_card(folder / "README.md")
        except ValueError as error:
            raise PushError(str(error)) from None
    return files


def push_folder(
    folder: str | Path,
    repo_id: str,
    *,
    private: bool = False,
    revision: str | None = None,
    license: str | None = None,
    commit_message: str | None = None,
    token: str | None = None,
    note: Callable[[str], None] | None = None,
) -> str:
    """Upload `folder` to the model repo `repo_id` (created if needed) in one commit; return the commit URL.

    What is uploaded is the folder with its model card made complete for that repo (snippets naming `repo_id`,
    `license` when given, else the card's, else `DEFAULT_LICENSE`) and, for a seq2seq model, the
    `minitf-translation` pipeline code and config entry; the local folder itself is not changed. A trainer's
    by-products are left out, each told to `note` (default: a logged warning) in one line. Raises PushError for a
    folder that should not be published or a push the Hub refused.
    """
    folder = Path(folder)
    skipped: dict[str, str] = {}
    files = check_push_folder(folder, skipped)
    for name, what in skipped.items():
        (note or logger.warning)(f"left out {name}: {what}, not needed to load the model")
    from hf_minitf.cards import prepare_upload

    with tempfile.TemporaryDirectory() as staging_dir:
        staging = Path(staging_dir)
        try:
            for name in files:  # small files are copied and completed there, weights are only read
                target = staging / name
                target.parent.mkdir(parents=True, exist_ok=True)
                source = (folder / name).resolve()  # a link inside the folder is sent as a copy of its file
                if name.endswith(".safetensors"):  # only read: linked where the system allows it
                    with contextlib.suppress(OSError):
                        target.symlink_to(source)
                if not target.exists():
                    shutil.copyfile(source, target)
        except OSError as error:  # the temporary copy only: the folder itself is never written
            raise PushError(f"cannot copy {folder} into a temporary folder for the upload: {error}") from None
        try:
            prepare_upload(staging, repo_id, source_folder=folder, license=license)
        except (ValueError, KeyError, OSError) as error:
            raise PushError(f"cannot write the model card of {folder}: {error}") from None
        return commit_folder(
            staging,
            repo_id,
            private=private,
            revision=revision,
            token=token,
            commit_message=commit_message or f"Upload {folder.name} with minitf push",
            roots=[staging, folder],
        )


def commit_folder(
    staging: Path,
    repo_id: str,
    *,
    private: bool,
    revision: str | None,
    token: str | None,
    commit_message: str,
    roots: list[Path],
    space_sdk: str | None = None,
) -> str:
    """Upload every file of `staging` to `repo_id` (created if needed) in one commit; return the commit URL.
    The repo is a model repo, or a Space running `space_sdk` when one is given. The files sent are checked again
    first: no pickle, nothing that resolves outside `roots`."""
    from huggingface_hub import CommitOperationAdd, HfApi
    from huggingface_hub.errors import HfHubHTTPError

    uploads = sorted(path.relative_to(staging).as_posix() for path in staging.rglob("*") if path.is_file())
    try:
        check_upload_sources([(name, staging / name) for name in uploads], roots=roots)
    except UnsafeFileError as error:
        raise PushError(str(error)) from None
    operations = [
        CommitOperationAdd(path_in_repo=name, path_or_fileobj=str((staging / name).resolve())) for name in uploads
    ]
    api = HfApi(token=token)
    repo_type = "model" if space_sdk is None else "space"
    try:
        api.create_repo(repo_id, private=private, exist_ok=True, repo_type=repo_type, space_sdk=space_sdk)
        if revision is not None:
            api.create_branch(repo_id, branch=revision, exist_ok=True, repo_type=repo_type)
        info = api.create_commit(
            repo_id, operations, revision=revision, commit_message=commit_message, repo_type=repo_type
        )
    except HfHubHTTPError as error:
        status = error.response.status_code if error.response is not None else None
        if status in (401, 403):
            refusal = "unauthorized" if status == 401 else "forbidden"
            raise PushError(
                f"the Hub refused the push to {repo_id} ({status} {refusal}): log in with `hf auth login` or "
                "set HF_TOKEN to a token with write access to that namespace."
            ) from None
        raise PushError(f"the push to {repo_id} failed: {str(error).splitlines()[0]}") from None
    except Exception as error:  # no connection, offline mode, ...: one line, never a reported success
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise PushError(f"the push to {repo_id} failed ({type(error).__name__}): {reason}") from None
    return info.commit_url


__all__ = ["PushError", "check_push_folder", "commit_folder", "push_folder"]
