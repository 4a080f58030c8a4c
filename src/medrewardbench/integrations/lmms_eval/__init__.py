"""medrewardbench as an lmms-eval task, and lmms-eval's logged samples brought back as runs.

The task folder is this package's directory: ``medrewardbench_pairwise.yaml`` and ``utils.py``
(:mod:`medrewardbench.integrations.lmms_eval.utils`). :func:`write_task_folder` copies them with
``dataset_path`` set to a set of yours (a folder ``build export --format hub`` wrote, or the Hub
repository ``push`` made of it), for ``lmms-eval --include_path FOLDER --tasks TASK``.
``medrewardbench import-lmms-eval`` stores the ``--log_samples`` output as a run
(:mod:`medrewardbench.integrations.lmms_eval.samples`).

lmms-eval itself is not a dependency: it pulls torch, torchvision and a GPU stack. Nothing here
imports it; ``utils.py`` needs ``datasets`` (extra ``train``) for ``process_docs`` only.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

__all__ = ["TASK_DIR", "TASK_YAML", "write_task_folder"]

TASK_DIR = Path(__file__).parent
"""The task folder shipped with the package."""
TASK_YAML = TASK_DIR / "medrewardbench_pairwise.yaml"
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def write_task_folder(out_dir: str | Path, dataset_path: str, task: str = "medrewardbench_pairwise") -> Path:
    """Copy the task folder, with ``dataset_path`` and the task's name set.

    Args:
        out_dir: the folder to write (``--include_path`` for lmms-eval).
        dataset_path: what lmms-eval passes to ``datasets.load_dataset``: a Hub dataset id or a
            local Hub dataset folder.
        task: the task's name (``--tasks``).

    Returns:
        The YAML file written.

    Raises:
        ValueError: an empty ``dataset_path`` or a task name lmms-eval cannot take.
    """
    if not dataset_path.strip() or "\n" in dataset_path:
        raise ValueError("dataset_path must be one line naming a Hub dataset or a local folder")
    if not _NAME.match(task):
        raise ValueError(f"task name {task!r}: use letters, digits, '_', '.' and '-'")
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(TASK_DIR / "utils.py", folder / "utils.py")
    text = TASK_YAML.read_text("utf-8")
    text = re.sub(r"(?m)^task: .*$", f"task: {task}", text, count=1)
    quoted = dataset_path.replace("\\", "\\\\").replace('"', '\\"')
    text = re.sub(r"(?m)^dataset_path: .*$", lambda _m: f'dataset_path: "{quoted}"', text, count=1)
    target = folder / f"{task}.yaml"
    target.write_text(text, encoding="utf-8")
    return target
