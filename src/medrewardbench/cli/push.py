"""``medrewardbench push DIR OWNER/NAME``: upload a Hub dataset folder (``build export --format hub``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, cast

import typer

from medrewardbench.cli.support import console
from medrewardbench.cli.support import fail as _fail
from medrewardbench.errors import MedRewardBenchError


def push_command(
    folder: Annotated[Path, typer.Argument(help="a folder written by 'build export --format hub'")],
    repo: Annotated[str, typer.Argument(help="the dataset repository, OWNER/NAME (created when missing)")],
    private: Annotated[bool, typer.Option("--private", help="create the repository as private")] = False,
    revision: Annotated[str | None, typer.Option("--revision", help="the branch to commit to")] = None,
    message: Annotated[str | None, typer.Option("--message", "-m", help="the commit message")] = None,
) -> None:
    """Upload a Hub dataset folder to the Hugging Face Hub as a dataset, in one commit.

    The token comes from the environment variable HF_TOKEN (a write token); it is never printed.
    """
    from medrewardbench.data.hub import PUSH_TOKEN_ENV, HubUploader, check_push, hf_offline, push_dataset_folder

    try:
        for warning in check_push(folder, repo):
            console.print(f"warning: {warning}", highlight=False)
    except MedRewardBenchError as exc:
        raise _fail(str(exc)) from exc
    token = os.environ.get(PUSH_TOKEN_ENV, "").strip()
    if not token:
        raise _fail(
            f"no Hub token: set {PUSH_TOKEN_ENV} to a token with write access "
            "(https://huggingface.co/settings/tokens); nothing was uploaded"
        )
    if hf_offline():
        raise _fail("HF_HUB_OFFLINE is set, so nothing can be uploaded; unset it to push")
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    try:
        commit = push_dataset_folder(
            folder,
            repo,
            token=token,
            api=cast(HubUploader, HfApi()),
            private=private,
            revision=revision,
            commit_message=message,
        )
    except MedRewardBenchError as exc:
        raise _fail(str(exc)) from exc
    except (HfHubHTTPError, OSError, ValueError) as exc:
        raise _fail(f"the upload to dataset {repo} failed: {' '.join(str(exc).split())}", code=1) from exc
    url = getattr(commit, "commit_url", None) or f"https://huggingface.co/datasets/{repo}"
    console.print(f"pushed {folder} to {url}; load it with --data hf:{repo}", highlight=False)
