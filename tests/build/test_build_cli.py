"""``medrewardbench build``: the command group, its one-line errors and its exit statuses."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.build import VQA_MAP, api_flags, write_jsonl, write_vqa_source
from typer.testing import CliRunner

from medrewardbench.cli import app
from medrewardbench.testing.openai_server import OpenAIServer

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["build", *args], catch_exceptions=False)
    return result.exit_code, result.output


def errors(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def test_the_group_lists_its_commands() -> None:
    code, output = invoke("--help")
    assert code == 0
    for command in ("import", "filter", "responses", "pairs", "labels", "export", "report"):
        assert command in output


def test_bad_input_is_one_line_with_exit_status_2(tmp_path: Path) -> None:
    source = write_vqa_source(tmp_path / "vqa")
    code, output = invoke("import", str(tmp_path / "p"), str(source), "--map", "colour=c")
    assert code == 2 and len(errors(output)) == 1 and "'colour' is not a field of the questions format" in output
    code, output = invoke("report", str(tmp_path / "nothing"))
    assert code == 2 and errors(output) == [
        f"error: {tmp_path / 'nothing'}: not a build project (no build.sqlite); start one with 'medrewardbench build "
        f"import {tmp_path / 'nothing'} SOURCE'"
    ]
    assert invoke("import", str(tmp_path / "p"), str(source), "--map", VQA_MAP)[0] == 0
    code, output = invoke("filter", str(tmp_path / "p"), "--model", "gpt-4o", "--max-correct", "0", "-q")
    assert code == 2 and "expected KIND:NAME" in errors(output)[0]
    code, output = invoke("pairs", str(tmp_path / "p"), "--out", str(tmp_path / "x.jsonl"))
    assert code == 2 and "the response pool has 0 generator(s)" in errors(output)[0]


def test_problems_in_a_source_name_file_row_and_field(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "q.jsonl", [{"id": "a", "question": "", "image": None}, {"question": "x"}])
    code, output = invoke("import", str(tmp_path / "p"), str(path))
    assert code == 2
    assert f"{path}, row 1 (case a), field 'question': missing required field" in output
    assert f"{path}, row 2, field 'id': missing id" in output
    assert not (tmp_path / "p" / "build.sqlite").exists() or "imported" not in output


def test_a_generator_that_fails_everything_exits_1_with_its_reasons(
    answer_server: OpenAIServer, tmp_path: Path
) -> None:
    source = write_vqa_source(tmp_path / "vqa")
    assert invoke("import", str(tmp_path / "p"), str(source), "--map", VQA_MAP)[0] == 0
    answer_server.control.set_faults(rate_400=1.0)
    code, output = invoke("responses", str(tmp_path / "p"), "-g", "api:broken", *api_flags(answer_server), "-q")
    assert code == 1
    assert "api:broken: 6 stored answer(s) failed. Most common: HTTP 400" in output
    assert "every request failed for api:broken" in errors(output)[0] and "--retry-failures" in output
    answer_server.control.set_faults()
    code, output = invoke(
        "responses", str(tmp_path / "p"), "-g", "api:broken", *api_flags(answer_server), "--retry-failures", "-q"
    )
    assert code == 0 and "the pool holds 1 generator(s): api:broken" in output
    code, output = invoke("report", str(tmp_path / "p"))
    assert code == 0 and "api:broken" in output
    assert json.loads(json.dumps(output))  # printable
