"""Background imports: modules arrive loaded, and a failing import still fails where it is used."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from medrewardbench.utils.warm import import_in_background


@pytest.fixture
def package(tmp_path: Path) -> Iterator[Path]:
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))
    for name in [m for m in sys.modules if m.startswith("warmpkg")]:
        del sys.modules[name]


def test_modules_are_imported_on_a_daemon_thread(package: Path) -> None:
    (package / "warmpkg").mkdir()
    (package / "warmpkg" / "__init__.py").write_text("")
    (package / "warmpkg" / "heavy.py").write_text("import threading\nLOADED_ON = threading.current_thread().name\n")
    thread = import_in_background(["warmpkg.heavy"])
    assert thread is not None and thread.daemon
    thread.join(10)
    assert sys.modules["warmpkg.heavy"].LOADED_ON == "medrewardbench-imports"
    assert import_in_background(["warmpkg.heavy"]) is None  # nothing left to do


def test_a_module_that_fails_in_the_background_fails_again_where_it_is_used(package: Path) -> None:
    (package / "warmpkg").mkdir()
    (package / "warmpkg" / "__init__.py").write_text("")
    (package / "warmpkg" / "broken.py").write_text("raise RuntimeError('broken on purpose')\n")
    (package / "warmpkg" / "after.py").write_text("VALUE = 1\n")
    thread = import_in_background(["warmpkg.broken", "warmpkg.after"])
    assert thread is not None
    thread.join(10)
    assert "warmpkg.broken" not in sys.modules
    with pytest.raises(RuntimeError, match="broken on purpose"):
        importlib.import_module("warmpkg.broken")
    assert importlib.import_module("warmpkg.after").VALUE == 1  # the rest is imported where used
