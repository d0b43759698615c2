"""`minitf push DIR REPO_ID`: upload a saved or converted MiniTF folder, with its model card, to the Hub.

The folder is checked before anything is sent: it must hold a `config.json` and safetensors weights, and no
pickle (`*.bin`, `*.pt`, `*.pth`, `*.pkl`, `*.ckpt`) or training state (optimizer, scheduler), since whatever is
uploaded can be downloaded, and unpickled, by anyone. Light to import: the Hub client loads when a push runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
TRAINING_STATE_NAMES = ("optimizer", "scheduler", "rng_state", "trainer_state", "training_args")
LOCAL_ONLY_PATTERNS = [".*", "**/.*", "__pycache__/**", "**/__pycache__/**", "*.pyc", "**/*.pyc"]


class PushError(Exception):
    """A folder that cannot be published as it is, or a Hub that refused the push."""


def check_push_folder(folder: str | Path) -> list[str]:
    """The files of `folder` that a push uploads (relative POSIX paths), or a PushError saying what is wrong."""
    folder = Path(folder)
    if not folder.is_dir():
        raise PushError(f"{folder} is not a folder; pass the folder written by save_pretrained or minitf convert.")
    files = sorted(
        path.relative_to(folder).as_posix() for path in folder.rglob("*")
        if path.is_file() and not any(part.startswith(".") or part == "__pycache__"
                                      for part in path.relative_to(folder).parts) and path.suffix != ".pyc"
    )
    pickles = [name for name in files if name.lower().endswith(PICKLE_SUFFIXES)]
    if pickles:
        raise PushError(
            f"{folder} holds pickle files ({', '.join(pickles)}), which run code when loaded; "
            "remove them (the weights belong in model.safetensors) and push again."
        )
    state = [name for name in files if any(marker in Path(name).name.lower() for marker in TRAINING_STATE_NAMES)]
    if state:
        raise PushError(f"{folder} holds training state ({', '.join(state)}); remove it and push again.")
    if "config.json" not in files:
        raise PushError(f"{folder} has no config.json; save the model with save_pretrained (or minitf convert) first.")
    if not any(name.endswith(".safetensors") for name in files):
        raise PushError(f"{folder} has no .safetensors weights; save the model with save_pretrained first.")
    return files


def push_folder(folder: str | Path, repo_id: str, *, private: bool = False, revision: str | None = None,
                license: str | None = None, commit_message: str | None = None, token: str | None = None) -> str:
    """Upload `folder` to the model repo `repo_id` (created if needed) and return the commit URL.

    The folder's model card is written or updated first (with `license` when given), so the repo never
    gets a blank card. Raises PushError for a folder that should not be published or a refused push.
    """
    check_push_folder(folder)
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    from .model_card import update_model_card

    update_model_card(folder, license=license)
    api = HfApi(token=token)
    try:
        api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        if revision is not None:
            api.create_branch(repo_id, branch=revision, exist_ok=True)
        info = api.upload_folder(
            repo_id=repo_id, folder_path=str(folder), revision=revision,
            commit_message=commit_message or f"Upload {Path(folder).name} with minitf push",
            ignore_patterns=LOCAL_ONLY_PATTERNS,
        )
    except HfHubHTTPError as error:
        status = error.response.status_code if error.response is not None else None
        if status in (401, 403):
            raise PushError(
                f"the Hub refused the push to {repo_id} ({status} {'unauthorized' if status == 401 else 'forbidden'}):"
                " log in with `hf auth login` or set HF_TOKEN to a token with write access to that namespace."
            ) from None
        raise PushError(f"the push to {repo_id} failed: {str(error).splitlines()[0]}") from None
    return str(info.commit_url if hasattr(info, "commit_url") else info)


def add_push_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `minitf push`."""
    parser.add_argument("folder", type=Path, metavar="DIR",
                        help="a folder written by save_pretrained, a training command or minitf convert")
    parser.add_argument("repo_id", metavar="REPO_ID", help="the model repo to push to, as namespace/name")
    parser.add_argument("--private", action="store_true", help="create the repo as private (if it does not exist)")
    parser.add_argument("--revision", default=None, metavar="REV",
                        help="branch to push to (created from main if missing; default: main)")
    parser.add_argument("--license", default=None, metavar="ID",
                        help="license identifier written into the model card, e.g. mit or apache-2.0")
    parser.add_argument("--commit-message", default=None, metavar="TEXT", help="message of the Hub commit")
    parser.add_argument("--token", default=None,
                        help="Hub token with write access (default: the logged-in token or HF_TOKEN)")


def push_command(args: argparse.Namespace) -> int:
    """Run `minitf push`: 0 when the Hub accepted the commit, 2 (with a one-line error) otherwise."""
    try:
        url = push_folder(args.folder, args.repo_id, private=args.private, revision=args.revision,
                          license=args.license, commit_message=args.commit_message, token=getattr(args, "token", None))
    except PushError as error:
        print(f"minitf push: error: {error}", file=sys.stderr)
        return 2
    print(f"Pushed {args.folder} to {args.repo_id}: {url}")
    return 0


__all__ = ["PushError", "add_push_arguments", "check_push_folder", "push_command", "push_folder"]
