"""Fetching the reference data from the Hugging Face Hub, or finding it in the local Hub cache.

Sources are written ``hf:``, ``hf:OWNER/NAME`` or ``hf:OWNER/NAME@REVISION``. Files go to the
normal Hugging Face cache (``HF_HOME`` / ``HF_HUB_CACHE``); with ``HF_HUB_OFFLINE=1`` nothing is
downloaded and the cached snapshot is used.

:func:`push_dataset_folder` uploads a folder ``build export --format hub`` wrote
(:mod:`medrewardbench.data.hub_folder`) as a dataset repository; :func:`check_push` checks it first.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from medrewardbench.errors import DataError, DataProblem

logger = logging.getLogger(__name__)

DEFAULT_REPO = "Nandzy/Med-RewardBench"
"""The public Med-RewardBench dataset repository."""
ALLOW_PATTERNS: tuple[str, ...] = ("pair_gt_all/*",)
"""Only the labels and parquet files are fetched (fnmatch: ``*`` also matches ``/``)."""
HF_PREFIX = "hf:"


def parse_hf_source(source: str) -> tuple[str, str | None]:
    """Split an ``hf:`` source into repository id and revision.

    Args:
        source: ``"hf:"``, ``"hf:OWNER/NAME"`` or ``"hf:OWNER/NAME@REVISION"``.

    Returns:
        (repo_id, revision); the repository defaults to :data:`DEFAULT_REPO`, the revision to None
        (the default branch).

    Raises:
        DataError: not an ``hf:`` source, or a malformed repository id.
    """
    if not source.startswith(HF_PREFIX):
        raise DataError([DataProblem(source, "not an hf: source")])
    spec = source[len(HF_PREFIX) :].strip()
    repo_id, _, revision = spec.partition("@")
    repo_id = repo_id.strip() or DEFAULT_REPO
    revision = revision.strip()
    parts = repo_id.split("/")
    if len(parts) != 2 or not all(parts):
        raise DataError(
            [DataProblem(source, f"expected hf:OWNER/NAME or hf:OWNER/NAME@REVISION, got repository {repo_id!r}")]
        )
    return repo_id, revision or None


def hf_offline() -> bool:
    """Whether Hugging Face Hub access is switched off (``HF_HUB_OFFLINE``).

    huggingface_hub reads the variable once, at import; the environment is read again here so that
    a value set later in the process is honoured too.

    Returns:
        True when offline.
    """
    from huggingface_hub import constants

    value = os.environ.get("HF_HUB_OFFLINE", "").strip().upper()
    return bool(constants.HF_HUB_OFFLINE) or value in {"1", "ON", "YES", "TRUE"}


def hub_cache_dir() -> str:
    """The Hugging Face Hub cache directory huggingface_hub will use.

    Returns:
        The directory (``HF_HUB_CACHE``, by default ``$HF_HOME/hub``).
    """
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def fetch_command(repo_id: str, revision: str | None, include: Sequence[str] = ALLOW_PATTERNS) -> str:
    """The shell command that puts the dataset into the local cache.

    Args:
        repo_id: the dataset repository.
        revision: the revision, or None for the default branch.
        include: the file patterns to fetch.

    Returns:
        An ``hf download`` command line.
    """
    command = f"hf download {repo_id} --repo-type dataset" + "".join(f" --include '{p}'" for p in include)
    return command + (f" --revision {revision}" if revision else "")


def snapshot(repo_id: str = DEFAULT_REPO, revision: str | None = None) -> Path:
    """Return a local directory holding the dataset's files, downloading if allowed.

    The dataset is the reference layout (``pair_gt_all/``) or a Hub dataset folder that ``push``
    uploaded (``README.md``, ``dataset.json``, ``data/*.parquet``).

    Uses ``huggingface_hub.snapshot_download`` with ``repo_type="dataset"`` into the normal cache.
    When offline, only the cache is consulted.

    Args:
        repo_id: the dataset repository, ``OWNER/NAME``.
        revision: a branch, tag or commit hash; None for the default branch.

    Returns:
        The snapshot directory (it contains ``pair_gt_all/``, or ``README.md`` and ``data/``).

    Raises:
        DataError: the dataset is not cached and cannot be downloaded (the message says how to fetch
            it), the repository or revision does not exist, or the snapshot holds neither layout.
    """
    from medrewardbench.data.hub_folder import is_hub_folder

    # the reference set is only ever the reference layout: nothing else of its repository is fetched
    patterns = ALLOW_PATTERNS if repo_id == DEFAULT_REPO else (*ALLOW_PATTERNS, *PUSH_PATTERNS)
    path = dataset_snapshot(repo_id, revision, patterns, "pair_gt_all/ or data/*.parquet")
    if not (path / "pair_gt_all").is_dir() and not is_hub_folder(path):
        where = f"hf:{repo_id}" + (f"@{revision}" if revision else "")
        raise DataError(
            [DataProblem(where, f"the snapshot at {path} has neither pair_gt_all/ nor README.md with data/*.parquet")]
        )
    return path


def dataset_snapshot(
    repo_id: str, revision: str | None, allow_patterns: Sequence[str], what: str = "the dataset's files"
) -> Path:
    """Return a local snapshot of any Hub dataset's files matching ``allow_patterns``, downloading if allowed.

    Args:
        repo_id: the dataset repository, ``OWNER/NAME``.
        revision: a branch, tag or commit hash; None for the default branch.
        allow_patterns: the files to fetch (fnmatch patterns: ``*`` also matches ``/``).
        what: what the files are, for messages.

    Returns:
        The snapshot directory (files in the Hub cache are symbolic links into its ``blobs/``).

    Raises:
        DataError: the dataset is not cached and cannot be downloaded (the message says how to fetch
            it), or the repository or revision does not exist.
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    offline = hf_offline()
    where = f"hf:{repo_id}" + (f"@{revision}" if revision else "")
    shown_revision = revision or "main"
    fetch = fetch_command(repo_id, revision, allow_patterns)
    try:
        folder = snapshot_download(
            repo_id=repo_id,
            repo_type="dataset",
            revision=revision,
            allow_patterns=list(allow_patterns),
            local_files_only=offline,
        )
    except LocalEntryNotFoundError as exc:
        if type(exc).__name__ == "IncompleteSnapshotError":
            message = (
                f"the cached copy of dataset {repo_id} (revision {shown_revision}) is incomplete: {exc} "
                f"Complete it with: {fetch}"
            )
        elif offline:
            message = (
                f"dataset {repo_id} (revision {shown_revision}) is not in the local Hugging Face cache "
                f"({hub_cache_dir()}) and HF_HUB_OFFLINE is set, so nothing can be downloaded. "
                f"Fetch it once on a machine with network access: {fetch} "
                f"(with the same HF_HOME), or unset HF_HUB_OFFLINE, or pass a local directory that "
                f"contains {what}."
            )
        else:
            message = (
                f"dataset {repo_id} (revision {shown_revision}) could not be downloaded and is not in "
                f"the local Hugging Face cache ({hub_cache_dir()}): {exc}. Check the network, or fetch it "
                f"with: {fetch}"
            )
        raise DataError([DataProblem(where, message)]) from exc
    except HfHubHTTPError as exc:
        raise DataError([DataProblem(where, f"the Hub refused the dataset request: {exc}")]) from exc
    except ValueError as exc:
        raise DataError([DataProblem(where, f"invalid dataset reference: {exc}")]) from exc
    path = Path(str(folder))
    logger.info("%s: using snapshot %s", where, path)
    return path


PUSH_TOKEN_ENV = "HF_TOKEN"
"""The environment variable ``push`` reads its Hub token from (a write token; never printed or logged)."""
PUSH_PATTERNS: tuple[str, ...] = ("README.md", "dataset.json", "data/*.parquet")
"""What ``push`` uploads from a Hub dataset folder: its card, the project's card and the data."""
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


class HubUploader(Protocol):
    """The part of ``huggingface_hub.HfApi`` that ``push`` uses (a stand-in can replace it in tests)."""

    def create_repo(self, repo_id: str, **kwargs: Any) -> Any:
        """Create the repository (``exist_ok=True``: an existing one is fine)."""

    def upload_folder(self, **kwargs: Any) -> Any:
        """Upload the folder's files in one commit."""


def check_push(folder: str | Path, repo_id: str) -> list[str]:
    """Check, before any network use, that a folder can be pushed as a dataset and the repository id is valid.

    Args:
        folder: a folder ``build export --format hub`` wrote.
        repo_id: ``OWNER/NAME``.

    Returns:
        Warnings (no licence set in the card), for the caller to show.

    Raises:
        DataError: not a Hub dataset folder, an unreadable README header, or a malformed repository id.
    """
    from medrewardbench.data.hub_folder import HUB_README, hub_data_files, is_hub_folder, read_front_matter

    path = Path(folder)
    if not _REPO_ID.match(repo_id) or ".." in repo_id or repo_id.endswith((".git", ".")):
        raise DataError([DataProblem(repo_id, "expected a dataset repository id OWNER/NAME")])
    if not path.is_dir() or not is_hub_folder(path):
        raise DataError(
            [
                DataProblem(
                    str(path),
                    "not a Hub dataset folder (README.md and data/*.parquet); write one with "
                    "'medrewardbench build export PROJECT --format hub --out DIR'",
                )
            ]
        )
    header = read_front_matter(path / HUB_README)
    if header is None:
        raise DataError([DataProblem(str(path / HUB_README), "has no YAML header (license, configs, ...)")])
    hub_data_files(path)  # the configs name files that exist
    license_id = header.get("license")
    if not license_id or license_id == "unknown":
        return [f"{path / HUB_README}: no licence is set (license: {license_id}); set it before others reuse the set"]
    return []


def push_dataset_folder(
    folder: str | Path,
    repo_id: str,
    *,
    token: str,
    api: HubUploader,
    private: bool = False,
    revision: str | None = None,
    commit_message: str | None = None,
) -> Any:
    """Upload a Hub dataset folder to a dataset repository (created when missing) in one commit.

    Args:
        folder: the folder (checked with :func:`check_push` first).
        repo_id: ``OWNER/NAME``.
        token: a Hub token with write access (passed to the calls, never logged).
        api: ``huggingface_hub.HfApi()`` (or a stand-in with the same two methods).
        private: create the repository as private (an existing repository keeps its visibility).
        revision: the branch to commit to (None: the default branch).
        commit_message: the commit's message (default: names the tool).

    Returns:
        What ``upload_folder`` returned (the commit's information).

    Raises:
        DataError: the folder or repository id is refused by :func:`check_push`.
    """
    from medrewardbench import __version__

    check_push(folder, repo_id)
    api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True, token=token)
    logger.info("uploading %s to dataset %s", folder, repo_id)
    return api.upload_folder(
        folder_path=str(Path(folder)),
        repo_id=repo_id,
        repo_type="dataset",
        revision=revision,
        token=token,
        allow_patterns=list(PUSH_PATTERNS),
        commit_message=commit_message or f"Upload with medrewardbench {__version__}",
    )
