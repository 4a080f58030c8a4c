"""import-inspect refuses what it cannot store faithfully, with one line naming the log, sample and field.

Real logs, written by inspect with its mock model: one of the medrewardbench/pairwise task on a
canonical set, one of another task, one without samples, one of two epochs. Nothing is written to
the results directory when a log is refused.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

from helpers.data import build_canonical_set, canonical_rows
from helpers.inspect_runs import MockJudge, run_task
from inspect_ai import Task, task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.scorer import match
from inspect_ai.solver import generate
from typer.testing import CliRunner

from medrewardbench.cli import app
from medrewardbench.errors import DataError
from medrewardbench.evaluation.store import STORE_FILENAME
from medrewardbench.integrations.inspect.logs import read_log

pytestmark = [
    pytest.mark.slow,  # each log is a real inspect eval (seconds each)
    # inspect_ai's model retry passes tenacity a deprecated argument, once per request
    pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated:DeprecationWarning"),
]

runner = CliRunner()


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, " ".join(result.output.split())


@task
def echo_task() -> Task:
    return Task(dataset=[Sample(input="Say hello.", target="hello")], solver=generate(), scorer=match())


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("inspect")
    data = build_canonical_set(root / "data")
    found = {"data": data, "root": root}
    # without its images (--no-log-images): import does not need them
    found["good"] = run_task(root / "logs", MockJudge(), data=str(data), orders="original", eval_log_images=False)
    found["no_samples"] = run_task(root / "logs", MockJudge(), data=str(data), limit=2, eval_log_samples=False)
    found["epochs"] = run_task(root / "logs", MockJudge(), data=str(data), limit=1, eval_epochs=2)
    (other,) = inspect_eval(
        echo_task(),
        model="mockllm/model",
        model_args={"custom_outputs": MockJudge(answer=lambda _: "hello")},
        log_dir=str(root / "logs"),
        display="none",
    )
    found["other_task"] = Path(str(other.location))
    return found


def _refused(tmp_path: Path, *args: str) -> str:
    out = tmp_path / "results"
    code, output = cli("import-inspect", *args, "--out", str(out))
    assert code == 2, output
    assert not (out / STORE_FILENAME).exists(), "a refused import writes nothing"
    return output


def test_a_log_is_read_with_its_model_settings_and_one_sample_per_case_and_order(logs: dict[str, Path]) -> None:
    log = read_log(logs["good"])
    assert log.model == "mockllm/model" and log.status == "success" and log.inspect_version
    assert [s.case_id for s in log.samples] == ["c1", "c2", "c3", "c4", "c5"]
    assert {s.order.value for s in log.samples} == {"original"}
    config = log.judge_config()
    assert config["spec"] == "inspect:mockllm/model" and config["task_version"] == 1
    assert config["model_args"] == {"custom_outputs": None}  # a callable is not recorded as text


def test_a_log_of_another_task_is_refused(logs: dict[str, Path], tmp_path: Path) -> None:
    output = _refused(tmp_path, str(logs["other_task"]))
    assert f"{logs['other_task']}: a log of the task 'echo_task', not 'medrewardbench/pairwise'" in output


def test_a_log_without_samples_is_refused(logs: dict[str, Path], tmp_path: Path) -> None:
    output = _refused(tmp_path, str(logs["no_samples"]))
    assert f"{logs['no_samples']}: holds no samples (status success; was it written with --no-log-samples" in output


def test_a_log_of_several_epochs_is_refused(logs: dict[str, Path], tmp_path: Path) -> None:
    output = _refused(tmp_path, str(logs["epochs"]))
    assert "field 'epochs': run with 2 epochs" in output and "rerun with --epochs 1" in output


def test_a_file_that_is_not_a_log_or_is_missing_is_refused(tmp_path: Path) -> None:
    junk = tmp_path / "notes.json"
    junk.write_text(json.dumps({"hello": "world"}))
    assert f"{junk}: not an inspect eval log" in _refused(tmp_path, str(junk))
    assert f"{tmp_path / 'gone.eval'}: no such file" in _refused(tmp_path, str(tmp_path / "gone.eval"))


def test_a_case_missing_from_the_data_is_refused(logs: dict[str, Path], tmp_path: Path) -> None:
    root = tmp_path / "moved"
    data = build_canonical_set(root, rows=[row for row in canonical_rows() if row["id"] != "c2"])
    output = _refused(tmp_path, str(logs["good"]), "--data", str(data))
    assert f"{logs['good']}, sample c2:original (case c2): names a case that is not in {data}" in output


def test_a_case_whose_content_changed_is_refused(logs: dict[str, Path], tmp_path: Path) -> None:
    rows = canonical_rows()
    rows[0] = {**rows[0], "response_2": "No lesion is visible, as edited later."}
    data = build_canonical_set(tmp_path / "edited", rows=rows)
    output = _refused(tmp_path, str(logs["good"]), "--data", str(data))
    assert f"{logs['good']}, sample c1:original (case c1): the case was judged on other content" in output


def test_data_with_other_labels_is_refused(logs: dict[str, Path], tmp_path: Path) -> None:
    rows = canonical_rows()
    rows[0] = {**rows[0], "labels": {"accuracy": 2, "overall": "B"}}  # labels are not in the case hash
    data = build_canonical_set(tmp_path / "relabelled", rows=rows)
    output = _refused(tmp_path, str(logs["good"]), "--data", str(data))
    assert f"{logs['good']}: the task ran on data with fingerprint" in output and "(other cases or labels)" in output


def test_the_data_may_have_moved(logs: dict[str, Path], tmp_path: Path) -> None:
    moved = build_canonical_set(tmp_path / "elsewhere")
    out = tmp_path / "results"
    code, output = cli("import-inspect", str(logs["good"]), "--out", str(out), "--data", str(moved), "--quiet")
    assert code == 0, output
    assert "Stored inspect:mockllm/model as run" not in output  # --quiet
    with pytest.raises(DataError, match="no such file"):
        read_log(tmp_path / "missing.eval")


def test_a_folder_of_logs_is_searched_for_the_tasks_logs(logs: dict[str, Path], tmp_path: Path) -> None:
    folder = tmp_path / "logs" / "nested"
    folder.mkdir(parents=True)
    for name in ("good", "other_task"):
        shutil.copy(logs[name], folder / logs[name].name)
    out = tmp_path / "results"
    code, output = cli("import-inspect", str(tmp_path / "logs"), "--out", str(out))
    assert code == 0, output
    assert "from 1 log(s): 5 judgments written" in output  # the other task's log is passed over
    only_other = tmp_path / "other"
    only_other.mkdir()
    shutil.copy(logs["other_task"], only_other / logs["other_task"].name)
    output = _refused(tmp_path / "second", str(only_other))
    assert f"{only_other}: a folder with no inspect log of the task medrewardbench/pairwise" in output
