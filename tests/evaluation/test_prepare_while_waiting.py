"""While a run's answers are awaited, the eval job imports its analysis a module per event-loop turn.

The runner takes a caller's ``while_waiting`` steps once the first wave of answers is stored, one per
turn of the event loop (:func:`~medrewardbench.evaluation.runner._judge_all`); the eval job passes
the import of what writing its outputs needs, a module at a time
(:func:`~medrewardbench.evaluation.job._output_import_steps`), so that this import no longer runs
after the last answer. These tests check when the steps are taken, that steps left at the end are
not waited for, that a failing step cannot stop a run, and that the import steps are complete and
in dependency order.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from helpers.cases import RecordingJudge, make_benchmark

from medrewardbench.evaluation import job
from medrewardbench.evaluation.job import evaluate
from medrewardbench.evaluation.runner import execute_plan, execute_while_hashing, plan_run
from medrewardbench.evaluation.store import Store
from medrewardbench.judges.base import JudgeRequest, JudgeResult
from medrewardbench.judges.registry import JudgeOptions


class CountingJudge(RecordingJudge):
    """A judge that counts the requests it has taken and the answers it has given.

    Its answers take 1 to 4 times ``delay_s``, in turn, so that they arrive spread out as real ones do.
    """

    def __init__(self, spec: str = "test:counting", batch_size: int = 1, concurrency: int = 4, delay_s: float = 0.0):
        super().__init__("A", spec=spec, batch_size=batch_size, concurrency=concurrency)
        self.step_s = delay_s
        self.taken = 0
        self.answered = 0

    async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        self.taken += len(requests)
        await asyncio.sleep(self.step_s * (1 + self.taken % 4))
        results: list[JudgeResult] = await super().judge_batch(requests)
        self.answered += len(requests)
        return results


def watched_steps(judge: CountingJudge, seen: list[tuple[int, int]], count: int | None = None) -> Iterator[None]:
    """Steps that note (requests taken, answers given) as each is taken; endless when ``count`` is None."""
    taken = 0
    while count is None or taken < count:
        seen.append((judge.taken, judge.answered))
        taken += 1
        yield None


def test_steps_start_once_the_first_wave_is_answered_and_run_one_per_loop_turn_between_answers(
    tmp_path: Path,
) -> None:
    bench = make_benchmark(30)
    judge = CountingJudge(batch_size=1, concurrency=4, delay_s=0.01)
    seen: list[tuple[int, int]] = []
    with Store.in_dir(tmp_path) as store:
        plan = plan_run(judge, bench, store)
        summary = asyncio.run(execute_plan(judge, plan, store, while_waiting=watched_steps(judge, seen, 5)))
        assert store.count_judgments(judge.fingerprint()) == 60
    assert summary.judged == 60
    assert len(seen) == 5  # every step was taken, once
    assert seen[0][1] >= 4  # not before the first wave (4 workers, a request each) was answered
    assert seen[-1][1] < 60  # long before the last: each step waits one loop turn, not for an answer


def test_steps_left_when_the_run_ends_are_not_waited_for(tmp_path: Path) -> None:
    bench = make_benchmark(10)
    judge = CountingJudge(batch_size=2, concurrency=3, delay_s=0.005)
    seen: list[tuple[int, int]] = []
    with Store.in_dir(tmp_path) as store:
        plan = plan_run(judge, bench, store)
        summary = asyncio.run(execute_plan(judge, plan, store, while_waiting=watched_steps(judge, seen)))
    assert summary.judged == 20
    assert seen and seen[-1][1] <= 20  # endless steps: taken while answers came, stopped with the run


def test_a_first_run_that_hashes_while_judging_takes_them_too(tmp_path: Path) -> None:
    bench = make_benchmark(20)
    judge = CountingJudge(batch_size=2, concurrency=3, delay_s=0.01)
    seen: list[tuple[int, int]] = []
    with Store.in_dir(tmp_path) as store:
        summary, _hashed = asyncio.run(
            execute_while_hashing(judge, bench, store, while_waiting=watched_steps(judge, seen, 3))
        )
    assert summary.judged == 40
    assert len(seen) == 3 and seen[0][1] >= 6 and seen[-1][1] < 40  # 3 workers, 2 requests each


def test_a_run_shorter_than_one_wave_takes_no_step(tmp_path: Path) -> None:
    bench = make_benchmark(3)
    judge = CountingJudge(batch_size=1, concurrency=8, delay_s=0.005)
    seen: list[tuple[int, int]] = []
    with Store.in_dir(tmp_path) as store:
        plan = plan_run(judge, bench, store)
        summary = asyncio.run(execute_plan(judge, plan, store, while_waiting=watched_steps(judge, seen)))
    assert summary.judged == 6 and seen == []


def test_a_failing_step_is_logged_and_the_run_goes_on(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    bench = make_benchmark(12)
    judge = CountingJudge(batch_size=1, concurrency=3, delay_s=0.005)

    def broken() -> Iterator[None]:
        yield None
        raise RuntimeError("an import failed")

    with caplog.at_level(logging.DEBUG, logger="medrewardbench.evaluation.runner"), Store.in_dir(tmp_path) as store:
        plan = plan_run(judge, bench, store)
        summary = asyncio.run(execute_plan(judge, plan, store, while_waiting=broken()))
        assert store.count_judgments(judge.fingerprint()) == 24
    assert summary.judged == 24 and summary.failed == 0
    assert any("an import failed" in (r.exc_text or "") for r in caplog.records)


def test_eval_imports_its_outputs_modules_while_each_judges_answers_are_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first judge runs while the data is hashed, the second from a plan: each gets its own steps."""
    judges = {
        spec: CountingJudge(spec=spec, batch_size=1, concurrency=4, delay_s=0.01)
        for spec in ("test:first", "test:second")
    }
    seen: list[list[str]] = []
    steps = job._output_import_steps

    def watching() -> Iterator[str]:
        for name in steps():
            # the judges with answers still out when a module is imported
            seen[-1].append(",".join(spec for spec, j in judges.items() if 0 < j.answered < j.taken))
            yield name

    def started() -> Iterator[str]:
        seen.append([])
        yield from watching()

    monkeypatch.setattr(job, "_output_import_steps", started)
    result = evaluate(
        make_benchmark(40),
        list(judges),
        tmp_path / "out",
        judge_factory=lambda spec, options: judges[spec],
        options=JudgeOptions(),
    )
    assert [s.judged for s in result.summaries] == [80, 80]
    assert len(seen) == 2  # one set of steps per judge
    assert seen[0] and set(seen[0]) == {"test:first"}  # all taken while the first judge's answers were out
    assert (tmp_path / "out" / "metrics.json").is_file()


def test_the_outputs_import_what_the_steps_end_with() -> None:
    source = textwrap.dedent(inspect.getsource(job._write_outputs))
    imported = {
        node.module
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module is not None
    }
    assert imported == set(job._OUTPUT_MODULES)


ORDER_PROBE = """
import importlib, json, sys
sys.argv = ['medrewardbench', 'eval', '--data', 'demo', '--judge', 'api:m', '--quiet', '--out', sys.argv[1]]
import medrewardbench.cli.eval as command
from medrewardbench.evaluation import job

def evaluate(*args, **kwargs):
    # the state of an eval run when its steps start: the judge's modules are imported too
    importlib.import_module("medrewardbench.judges.api")
    importlib.import_module("medrewardbench.models.api.direct")
    before = set(sys.modules)
    steps = []
    for name in job._output_import_steps():
        steps.append([name, sorted(m for m in set(sys.modules) - before if m.startswith("medrewardbench"))])
        before = set(sys.modules)
    for name in job._OUTPUT_MODULES:
        importlib.import_module(name)
    import numpy as np
    np.unique(np.array([2, 1, 2]))  # numpy imports numpy.ma here on first use
    np.random.default_rng(0)
    print("STEPS", json.dumps({"steps": steps, "after": sorted(set(sys.modules) - before)}))
    raise SystemExit(0)

command.evaluate = evaluate
from medrewardbench.cli.main import main
main()
"""


def test_each_import_step_runs_its_own_module_only_and_leaves_nothing_for_the_outputs(tmp_path: Path) -> None:
    """In a fresh eval process: a step imports no other module of the package than its own (and a
    package its submodules; the dependencies came before), and after the steps the outputs' imports
    and numpy's lazy ones add nothing."""
    done = subprocess.run(
        [sys.executable, "-c", ORDER_PROBE, str(tmp_path / "out")], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.rpartition("STEPS ")[2])
    # a package's step brings the submodules its __init__ imports
    larger = {
        name: modules
        for name, modules in found["steps"]
        if {m for m in modules if m.split(".")[: len(name.split("."))] != name.split(".")}
    }
    assert not larger, f"steps that import other modules of the package (list those first): {larger}"
    assert found["after"] == [], "modules imported after the steps: add them to _OUTPUT_IMPORT_STEPS"
