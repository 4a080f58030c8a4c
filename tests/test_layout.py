"""The test tree mirrors the package, shares code only through tests/helpers/, and allows repeated basenames."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import medrewardbench

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
PACKAGE = Path(medrewardbench.__file__).resolve().parent


def folders_under_tests() -> list[str]:
    return sorted(
        path.relative_to(TESTS).as_posix()
        for path in TESTS.rglob("*")
        if path.is_dir() and not any(part.startswith((".", "__")) for part in path.relative_to(TESTS).parts)
    )


def test_every_test_folder_mirrors_a_package_of_the_source() -> None:
    folders = folders_under_tests()
    assert {"data", "images", "judges", "judges/api", "metrics", "report", "train", "cli", "models"} <= set(folders)
    strays = [f for f in folders if f.split("/")[0] not in ("helpers", "benchmarks") and not (PACKAGE / f).is_dir()]
    assert not strays, f"test folders with no package of the same path under src/medrewardbench: {strays}"


def test_fixtures_come_from_the_plugins_not_from_star_imports() -> None:
    offenders = [
        str(path.relative_to(TESTS))
        for path in TESTS.rglob("*.py")
        if re.search(r"^\s*from\s+\S+\s+import\s+\*", path.read_text(encoding="utf-8"), re.MULTILINE)
    ]
    assert not offenders, offenders
    conftests = sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("conftest.py"))
    assert conftests == ["conftest.py"], "one conftest, at the root, registers the helpers as plugins"


def test_two_folders_may_hold_test_files_of_the_same_name(tmp_path: Path) -> None:
    for folder, value in (("one", 1), ("two", 2)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "test_same_name.py").write_text(
            f"from helpers.images import png_bytes\n\n\ndef test_{folder}() -> None:\n"
            f"    assert {value} == {value} and png_bytes()[:4] == b'\\x89PNG'\n"
        )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT)]
        + ["-p", "no:cacheprovider", "-q", str(tmp_path / "one"), str(tmp_path / "two")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout + done.stderr


def test_pytest_collects_every_test_folder() -> None:
    """pytest's default norecursedirs holds ``build``: a folder it skips silently runs no test at all."""
    import fnmatch

    match = re.search(r"^norecursedirs = \[(.*)\]$", (ROOT / "pyproject.toml").read_text("utf-8"), re.MULTILINE)
    assert match is not None, "set norecursedirs: pytest's default list skips tests/build/"
    patterns = re.findall(r'"([^"]+)"', match.group(1))
    folders = folders_under_tests()
    skipped = [f for f in folders if any(fnmatch.fnmatch(part, p) for part in f.split("/") for p in patterns)]
    assert not skipped, f"test folders pytest would not collect: {skipped}"


def test_no_module_is_over_600_lines_without_saying_why() -> None:
    import ast

    import medrewardbench

    package = Path(medrewardbench.__file__).parent
    unexplained = []
    for path in sorted(package.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") <= 600 or "migrations" in path.parts:
            continue
        doc = ast.get_docstring(ast.parse(text)) or ""
        if "Why one module of this size:" not in doc and "longer than most" not in doc:
            unexplained.append(f"{path.relative_to(package)} ({text.count(chr(10))} lines)")
    assert not unexplained, "split these, or say in the docstring why they are one module:\n" + "\n".join(unexplained)
