"""Import modules on a background thread while the main one waits on the network.

``eval`` needs numpy's statistics and the report writers only after its last request, but imports
cost a tenth of a second of CPU. While the requests are out, the event loop mostly waits, so
:func:`import_in_background` does those imports in the waits; the analysis then finds them loaded.
Nothing depends on the thread: a module it has not finished is imported (or waited for, under
Python's per-module import lock) where it is used, and an import that fails there raises there.
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading
from collections.abc import Sequence

log = logging.getLogger(__name__)

__all__ = ["import_in_background"]


def import_in_background(modules: Sequence[str]) -> threading.Thread | None:
    """Start importing ``modules`` (in order) on a daemon thread.

    Args:
        modules: dotted module names.

    Returns:
        The thread, or None when every module is imported already.
    """
    missing = [name for name in modules if name not in sys.modules]
    if not missing:
        return None

    def run() -> None:
        for name in missing:
            try:
                importlib.import_module(name)
            except Exception as exc:  # the import where the module is used reports it
                log.debug("background import of %s failed: %s", name, exc)
                return

    thread = threading.Thread(target=run, name="medrewardbench-imports", daemon=True)
    thread.start()
    return thread
