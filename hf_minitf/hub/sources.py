"""Where a conversion or an export reads from: a local file or folder, or a Hub repository id downloaded with
huggingface_hub.

Only the named data files of a repository are downloaded (never its code), so converting a published folder
runs nothing from it. Offline mode (`HF_HUB_OFFLINE=1`) is respected: a repository is then read from the
local Hugging Face cache, or the error says how to get it there.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path


class HubSourceError(ValueError):
    """A Hub repository that cannot be read; the message says why and what to do."""


# File names that say "this is a checkpoint file", so a missing one is reported as a missing path, not looked up
# on the Hub.
CHECKPOINT_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt", ".safetensors", ".json")
REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def looks_like_repo_id(source: str | os.PathLike) -> bool:
    """True for `owner/name` strings that are not an existing path and do not name a checkpoint file."""
    text = str(source)
    return (
        not Path(text).exists()
        and REPO_ID.fullmatch(text) is not None
        and not text.lower().endswith(CHECKPOINT_SUFFIXES)
    )


def download_repo_files(repo_id: str, files: Sequence[str], revision: str | None = None) -> Path:
    """Download `files` (glob patterns) of a Hub model repository, or find them in the cache when offline;
    returns the local snapshot folder. Errors say what to do (log in, go online, fill the cache, fix the id)."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = f"{repo_id}" + (f" (revision {revision})" if revision else "")
    try:
        return Path(snapshot_download(repo_id, revision=revision, allow_patterns=list(files)))
    except LocalEntryNotFoundError as error:
        if constants.is_offline_mode():
            raise HubSourceError(
                f"{where} is not a local path, nor in the local Hugging Face cache ({constants.HF_HUB_CACHE}), and "
                "HF_HUB_OFFLINE=1 forbids downloading it. Unset HF_HUB_OFFLINE to download it, or fill the cache "
                f"first while online (`hf download {repo_id}` with the same HF_HOME), or pass the path of a local copy "
                "of the folder."
            ) from error
        raise HubSourceError(
            f"{where} is not a local path, and downloading it from {constants.ENDPOINT} failed: "
            f"{error}. Check the network (and HF_ENDPOINT), or pass the path of a local copy of the "
            "folder."
        ) from error
    except GatedRepoError as error:
        raise HubSourceError(
            f"{where} is gated: accept its terms on the Hub and log in (`hf auth login`), then convert again."
        ) from error
    except RepositoryNotFoundError as error:
        raise HubSourceError(
            f"{repo_id} is neither a local path nor a Hub model repository that can be read (it does not exist, or it "
            "is private: log in with `hf auth login`). Check the spelling, or pass the path of a local folder."
        ) from error
    except RevisionNotFoundError as error:
        raise HubSourceError(
            f"{repo_id} has no revision {revision!r}; pass an existing branch, tag or commit with --revision."
        ) from error
    except (HfHubHTTPError, OSError) as error:
        raise HubSourceError(f"Cannot download {where} from {constants.ENDPOINT}: {error}") from error


__all__ = ["download_repo_files", "looks_like_repo_id"]
