"""What ``pip install .`` installs is enough for the README's first steps: eval, then report (HTML, XLSX).

The metadata test reads pyproject.toml, the file pip builds the metadata from. The slow test builds
a throwaway virtualenv, installs a copy of the project with ``pip install`` (from the package index,
like a new user; it needs the network) and runs ``eval`` then ``report`` in it, then checks that a
missing extra names the command for this kind of install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
tomllib = pytest.importorskip("tomllib")  # Python 3.11+


def project() -> dict:  # type: ignore[type-arg]
    return tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]


def _names(requirements: list[str]) -> set[str]:
    import re

    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements}


def test_the_report_dependencies_are_core_and_torch_is_not() -> None:
    core = _names(project()["dependencies"])
    assert {"openpyxl", "jinja2"} <= core, "report (xlsx, html) right after the first eval needs no extra"
    assert not core & {"torch", "transformers", "openai", "fastapi"}, "the core install stays small"
    extras = project()["optional-dependencies"]
    assert extras["report"] == [], "the old extra still installs (nothing more to add)"
    assert {"api", "serve", "hf", "train", "annotate"} <= set(extras)


def test_the_clinic_install_has_the_app_and_the_reports_without_torch_or_ray() -> None:
    extras = project()["optional-dependencies"]
    closure: set[str] = set()
    pending = list(extras["clinic"])
    while pending:  # follow medrewardbench[...] self-references down to real packages
        requirement = pending.pop()
        if requirement.startswith("medrewardbench["):
            pending.extend(r for extra in requirement[15:-1].split(",") for r in extras[extra])
        else:
            closure |= _names([requirement])
    closure |= _names(project()["dependencies"])
    assert {"fastapi", "sqlalchemy", "alembic", "openpyxl", "jinja2"} <= closure
    assert not closure & {"torch", "transformers", "trl", "ray", "vllm", "accelerate", "peft"}


@pytest.mark.slow
def test_pip_install_dot_then_eval_report_and_a_missing_extra_in_a_fresh_venv(tmp_path: Path) -> None:
    source = tmp_path / "checkout"
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bindir = env_dir / ("Scripts" if sys.platform == "win32" else "bin")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", PIP_DISABLE_PIP_VERSION_CHECK="1")

    def run(*args: str, cwd: Path = tmp_path, timeout: int = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)

    installed = run(str(bindir / "pip"), "install", "--quiet", ".", cwd=source)
    if installed.returncode != 0 and "Could not find a version" in installed.stderr + installed.stdout:
        pytest.skip("no package index reachable to install the dependencies from")
    assert installed.returncode == 0, installed.stderr[-3000:]
    tool = str(bindir / "medrewardbench")
    evaluated = run(tool, "eval", "--out", "results", "--quiet")
    assert evaluated.returncode == 0, evaluated.stderr
    reported = run(tool, "report", "results", "--bootstrap", "200")
    assert reported.returncode == 0, reported.stderr
    assert {"report.html", "report.xlsx", "report.md", "analysis.json"} <= {
        p.name for p in (tmp_path / "results").iterdir()
    }
    assert "Labels: illustrative" in reported.stdout
    missing = run(tool, "eval", "--judge", "api:gpt-4o", "--limit", "1", "--out", "api-results")
    assert missing.returncode == 2
    assert f"pip install '{source}[api]'" in " ".join(missing.stderr.split()), missing.stderr


def _code_blocks(text: str) -> list[list[str]]:
    import re

    return [block.strip().splitlines() for block in re.findall(r"```bash\n(.*?)```", text, re.S)]


def test_the_readme_first_screen_has_the_two_set_up_commands_then_the_first_steps() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    first_screen, _, rest = readme.partition("## First steps")
    assert rest, "a 'First steps' section follows the first screen"
    [setup] = _code_blocks(first_screen)  # exactly one code block there, with exactly two commands
    assert len(setup) == 2
    assert setup[0].endswith("pip install . && medrewardbench eval") and setup[1].endswith("&& pytest")
    steps = _code_blocks(rest)[0]  # report and the HTML come right after the first eval
    assert [line.split()[1] for line in steps] == ["report", "leaderboard", "compare"]
    for command in ("'.[api]'", "'.[hf]'", "'.[train]'", "'.[serve,hf]'"):  # beside the examples needing them
        assert f"pip install {command}" in readme or f"pip install -c constraints.txt {command}" in readme, command
    assert "pip install '.[api]'" in readme and "pip install 'medrewardbench[api]'" in readme


def _documentation() -> str:
    """The README and every page of the documentation site, as one text."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return " ".join(" ".join(page.read_text("utf-8").split()) for page in pages)


def test_the_readme_is_one_screen_and_a_map_of_the_docs() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    assert len(readme.splitlines()) <= 100, "the manual lives in docs/, the README is what a newcomer needs"
    guides = ("evaluate", "data", "reading-the-numbers", "build", "annotation", "sweeps", "train")
    for guide in (*guides, "selective", "probes", "interop"):
        assert f"(docs/guides/{guide}.md)" in readme and (ROOT / "docs" / "guides" / f"{guide}.md").is_file(), guide


def test_the_docs_say_what_a_new_user_trips_over() -> None:
    readme = _documentation()
    assert "`modality_type` holds the organ system**" in readme
    assert "`Accuracy`, `Comprehensiveness`, `over_all`" in readme  # accepted human_answer key spellings
    assert "`--by site` and `--by metadata.site` are the same field" in readme
    assert "Shepp-Logan CT phantom" in readme and "pydicom" in readme and "scikit-image" in readme
    assert "eval --judge 'hf:tiny-qwen#constrained'" in readme
    assert "A random-weight model writes random tokens" in readme
    assert "medrewardbench report runs/cv-rm" in readme and "p = 2.9e-70" not in readme
