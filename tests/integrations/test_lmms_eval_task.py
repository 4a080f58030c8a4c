"""The lmms-eval task's functions on real data, without lmms-eval: docs, prompt, image, parser, metrics, YAML."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from PIL import ImageChops

from medrewardbench.data import load_benchmark
from medrewardbench.data.hub_folder import write_hub_data
from medrewardbench.images import load_image
from medrewardbench.integrations.lmms_eval import TASK_YAML, utils, write_task_folder
from medrewardbench.prompts import load_template

datasets = pytest.importorskip("datasets")


class FunctionTag(yaml.SafeLoader):
    """Reads lmms-eval's ``!function utils.NAME`` tags as their text."""


FunctionTag.add_constructor("!function", lambda loader, node: ("!function", loader.construct_scalar(node)))


def hub_folder(root: Path, n: int = 6) -> Path:
    write_hub_data(load_benchmark("demo").cases[:n], root)
    (root / "README.md").write_text(
        "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n    path: data/test-*.parquet\n---\n"
    )
    return root


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = hub_folder(tmp_path_factory.mktemp("lmms") / "set")
    return utils.process_docs(datasets.load_dataset(str(folder), split="test"))


def test_every_case_comes_twice_once_in_each_order(docs: Any) -> None:
    demo = load_benchmark("demo").cases[:6]
    assert len(docs) == 12
    assert [(d["id"], d["order"]) for d in docs] == [(c.case_id, o) for c in demo for o in ("original", "swapped")]


def test_the_image_is_what_every_judge_sees(docs: Any) -> None:
    case = load_benchmark("demo").cases[0]  # a builtin DICOM: rendered the project's way
    (image,) = utils.doc_to_visual(docs[0])
    assert image.mode == "RGB" and ImageChops.difference(image, load_image(case.image)).getbbox() is None
    assert utils.doc_to_visual({**docs[0], "image": None, "image_builtin": None, "image_original": None}) == []


def test_the_prompt_is_the_projects_with_the_answers_in_the_docs_order(docs: Any) -> None:
    template = load_template("pairwise")
    case = load_benchmark("demo").cases[0]
    original, swapped = utils.doc_to_text(docs[0]), utils.doc_to_text(docs[1])
    assert original == f"{template.system.strip()}\n\n" + template.render_user_text(
        case.question, case.response_1, case.response_2
    )
    assert swapped.endswith(template.render_user_text(case.question, case.response_2, case.response_1))
    target = json.loads(utils.doc_to_target(docs[1]))
    assert all(target[d] == ("B" if case.labels[d] == 1 else "A") for d in case.labels)


def verdict_json(letters: dict[str, str]) -> str:
    return "Reasoning first.\n" + json.dumps({**letters, "reason": "the image shows it"})


def test_process_results_uses_the_parser_and_maps_back_to_source_order(docs: Any) -> None:
    case = load_benchmark("demo").cases[0]
    swapped = docs[1]
    expert = json.loads(utils.doc_to_target(swapped))
    record = utils.process_results(swapped, [verdict_json(expert)])["medrewardbench_accuracy"]
    assert record["verdicts"] == dict(case.labels) and record["order"] == "swapped" and record["failure"] is None
    # a verdict planted inside an answer and copied back is no verdict
    planted = f'I compare: "{case.response_1}" and overall: A'
    echoed = utils.process_results(docs[0], [planted])["medrewardbench_accuracy"]
    assert echoed["verdicts"] == {} and echoed["failure"]
    records = [record, echoed]
    assert utils.aggregate_accuracy(records) == pytest.approx(len(case.labels) / (2 * len(case.labels)))
    assert utils.aggregate_answered_accuracy(records) == 1.0 and utils.aggregate_failure_rate(records) == 0.5


def test_the_yaml_parses_and_names_functions_that_exist(tmp_path: Path) -> None:
    config = yaml.load(TASK_YAML.read_text(), Loader=FunctionTag)
    assert config["task"] == "medrewardbench_pairwise" and config["test_split"] == "test"
    named = [v[1] for v in config.values() if isinstance(v, tuple)]
    named += [m["aggregation"][1] for m in config["metric_list"]]
    assert len(named) == 8
    for reference in named:
        module, _, function = reference.partition(".")
        assert module == "utils" and callable(getattr(utils, function)), reference
    metrics = {m["metric"] for m in config["metric_list"]}
    assert metrics == set(
        utils.process_results({"id": "x", "question": "q", "response_1": "a", "response_2": "b"}, [""])
    )
    written = write_task_folder(tmp_path / "task", "/data/my set", task="chest_pairwise")
    copied = yaml.load(written.read_text(), Loader=FunctionTag)
    assert copied["task"] == "chest_pairwise" and copied["dataset_path"] == "/data/my set"
    assert (tmp_path / "task" / "utils.py").read_text() == (TASK_YAML.parent / "utils.py").read_text()
    with pytest.raises(ValueError, match="task name"):
        write_task_folder(tmp_path / "bad", "x/y", task="no spaces")


def test_the_command_writes_a_task_folder_for_a_set(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from medrewardbench.cli import app

    result = CliRunner().invoke(
        app, ["lmms-eval-task", "--out", str(tmp_path / "tasks"), "--dataset", "someone/chest-pairs", "--task", "chest"]
    )
    assert result.exit_code == 0, result.output
    assert "--include_path" in result.output and "--tasks chest" in " ".join(result.output.split())
    config = yaml.load((tmp_path / "tasks" / "chest.yaml").read_text(), Loader=FunctionTag)
    assert config["dataset_path"] == "someone/chest-pairs"
    bad = CliRunner().invoke(app, ["lmms-eval-task", "--out", str(tmp_path / "t2"), "--dataset", "x", "--task", "a b"])
    assert bad.exit_code == 2 and "task name" in bad.output
