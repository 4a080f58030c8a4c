"""Sweeps on this machine: one store with eval's fingerprints, resume and lock; endpoint caps; costs; budgets."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from helpers.api import API_KEY_ENV
from helpers.sweep import judgments_of, stored_rows, write_cases, write_sweep
from typer.testing import CliRunner

from medrewardbench.cli.main import app
from medrewardbench.evaluation.job import evaluate
from medrewardbench.evaluation.store import Store
from medrewardbench.metrics.cost import Price, recorded_cost, run_cost
from medrewardbench.prompts import load_template
from medrewardbench.report.format import dollars
from medrewardbench.sweep import SweepOptions, load_sweep, load_sweep_data, run_sweep
from medrewardbench.sweep.budget import CostEstimator, dollar_figures
from medrewardbench.testing.openai_server import OpenAIServer
from medrewardbench.utils.outdir import OutputLock


def _api(server: OpenAIServer, model: str, extra: str = "") -> str:
    return (
        f"  - {{judge: 'api:{model}', base_url: '{server.base_url}', api_key_env: {API_KEY_ENV}, "
        f"max_retries: 0{', ' + extra if extra else ''}}}\n"
    )


def test_a_sweep_writes_one_store_one_leaderboard_and_report_and_a_rerun_resumes(
    tmp_path: Path, openai_server: OpenAIServer, sweep_cases: Path
) -> None:
    sweep = write_sweep(
        tmp_path / "sweep.yaml",
        f"data: {sweep_cases}\nreport: {{n_resamples: 200, formats: [md, csv, json, html]}}\njudges:\n"
        "  - judge: baseline:longer\n"
        + _api(openai_server, "model-one")
        + _api(openai_server, "model-two", "concurrency: 2"),
    )
    out = tmp_path / "out"
    runner = CliRunner()
    result = runner.invoke(app, ["sweep", str(sweep), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "score [95% CI]" in result.output and "Requests judged now: 36, from store: 0" in result.output
    assert len(openai_server.control.chat_requests()) == 24
    for name in ("judgments.jsonl", "metrics.json", "metrics.csv", "sweep.json", "medrewardbench.sqlite"):
        assert (out / name).is_file(), name
    for name in ("report.md", "analysis.json", "analysis.csv", "pairwise.csv", "report.html"):
        assert (out / "report" / name).is_file(), name
    analysis = json.loads((out / "report" / "analysis.json").read_text("utf-8"))
    rows = analysis["leaderboard"]
    assert {row["judge"] for row in rows} == {"baseline:longer", "api:model-one", "api:model-two"}
    assert all(row["tier"] is not None and row["score"]["low"] is not None for row in rows)  # intervals, tiers
    assert analysis["settings"]["n_resamples"] == 200
    summary = json.loads((out / "sweep.json").read_text("utf-8"))
    assert [(e["name"], e["status"], e["stored"]) for e in summary["entries"]] == [
        ("baseline:longer", "done", 12),
        ("api:model-one", "done", 12),
        ("api:model-two", "done", 12),
    ]
    # resume: nothing is sent again, and the files are the same
    before = (out / "judgments.jsonl").read_bytes()
    again = runner.invoke(app, ["sweep", str(sweep), "--out", str(out)])
    assert again.exit_code == 0, again.output
    assert "Requests judged now: 0, from store: 36" in again.output
    assert len(openai_server.control.chat_requests()) == 24
    assert (out / "judgments.jsonl").read_bytes() == before


def test_a_sweep_stores_what_eval_would_with_the_same_fingerprints(
    tmp_path: Path, openai_server: OpenAIServer, sweep_cases: Path
) -> None:
    sweep = write_sweep(
        tmp_path / "sweep.yaml", f"data: {sweep_cases}\njudges:\n" + _api(openai_server, "same-model", "temperature: 0")
    )
    config = load_sweep(sweep)
    out = tmp_path / "out"
    result = run_sweep(config, SweepOptions(out_dir=out, report=False))
    sent = len(openai_server.control.chat_requests())
    evaluated = evaluate(load_sweep_data(config), ["api:same-model"], out, options=config.judges[0].options)
    assert evaluated.summaries[0].judged == 0 and evaluated.summaries[0].reused == 12  # eval resumes the sweep
    assert evaluated.runs[0].run_id == result.outcomes[0].run_id
    assert len(openai_server.control.chat_requests()) == sent


def test_another_process_in_the_output_directory_stops_the_sweep_with_75(
    tmp_path: Path, openai_server: OpenAIServer, sweep_cases: Path
) -> None:
    sweep = write_sweep(tmp_path / "sweep.yaml", f"data: {sweep_cases}\njudges:\n" + _api(openai_server, "m"))
    out = tmp_path / "out"
    out.mkdir()
    with OutputLock(out):
        result = CliRunner().invoke(app, ["sweep", str(sweep), "--out", str(out), "-q"])
    assert result.exit_code == 75, result.output
    assert "is using" in result.output
    assert openai_server.control.chat_requests() == []


def _max_in_flight(server: OpenAIServer, latency: float) -> int:
    """The most requests the server held at once (each is held ``latency`` seconds after it arrives)."""
    times = sorted(r.received_at for r in server.control.chat_requests())
    return max(sum(1 for t in times if start <= t < start + latency * 0.95) for start in times)


def test_an_endpoint_cap_holds_across_every_judge_that_sends_to_it(
    tmp_path: Path, openai_server: OpenAIServer, sweep_cases: Path
) -> None:
    latency = 0.25
    openai_server.control.set_latency(latency)
    judges = _api(openai_server, "m1", "concurrency: 6") + _api(openai_server, "m2", "concurrency: 6")
    free = write_sweep(tmp_path / "free.yaml", f"data: {sweep_cases}\njudges:\n{judges}")
    run_sweep(load_sweep(free), SweepOptions(out_dir=tmp_path / "free", report=False))
    assert _max_in_flight(openai_server, latency) > 3  # without a cap the two judges together send more
    openai_server.control.clear_requests()
    capped = write_sweep(
        tmp_path / "capped.yaml",
        f"data: {sweep_cases}\njudges:\n{judges}"
        f"endpoints:\n  - {{base_url: '{openai_server.base_url}/', max_concurrency: 3}}\n",
    )
    result = run_sweep(load_sweep(capped), SweepOptions(out_dir=tmp_path / "capped", report=False))
    assert all(o.status == "done" and o.stored == 12 for o in result.outcomes)
    assert _max_in_flight(openai_server, latency) == 3


def test_costs_per_run_and_per_1000_cases_are_recorded_and_reported_and_prices_stay_out_of_fingerprints(
    tmp_path: Path, openai_server: OpenAIServer, sweep_cases: Path
) -> None:
    sweep = write_sweep(
        tmp_path / "sweep.yaml",
        f"data: {sweep_cases}\nreport: {{n_resamples: 50}}\njudges:\n"
        + _api(openai_server, "priced", "price: {input: 2.5, output: 10}")
        + "  - judge: baseline:longer\n",
    )
    out = tmp_path / "out"
    prices = tmp_path / "prices.yaml"
    prices.write_text("priced: {input: 5, output: 20}\n")
    result = CliRunner().invoke(app, ["sweep", str(sweep), "--out", str(out), "--prices", str(prices)])
    assert result.exit_code == 0, result.output
    with Store.in_dir(out) as store:
        run = next(r for r in store.runs() if r.judge_spec == "api:priced")
        judgments = store.judgments_for_run(run)
        cost = recorded_cost(run.metadata)
    assert cost is not None and cost.price == Price(5, 20)  # the --prices file won over the entry
    by_hand = sum(j.prompt_tokens * 5 + j.completion_tokens * 20 for j in judgments) / 1e6  # type: ignore[operator]
    assert cost.usd == pytest.approx(by_hand, abs=1e-6) and cost.usd > 0
    assert cost.cases == 6 and cost.per_1000_cases == pytest.approx(by_hand / 6 * 1000, abs=1e-6)
    assert run_cost(Price(5, 20), judgments, 2).usd == pytest.approx(by_hand)
    report = (out / "report" / "report.md").read_text("utf-8")
    assert "| Cost | $ per 1,000 cases |" in report
    assert f"| {dollars(by_hand)} | {dollars(by_hand / 6 * 1000)} |" in report
    analysis = json.loads((out / "report" / "analysis.json").read_text("utf-8"))
    row = next(r for r in analysis["leaderboard"] if r["judge"] == "api:priced")
    assert row["cost_usd"] == pytest.approx(by_hand, abs=1e-6)
    assert math.isclose(row["cost_per_1000_cases"], by_hand / 6 * 1000, abs_tol=1e-5)
    baseline = next(r for r in analysis["leaderboard"] if r["judge"] == "baseline:longer")
    assert baseline["cost_usd"] is None
    metrics = json.loads((out / "metrics.json").read_text("utf-8"))
    assert any(entry.get("cost_usd") for entry in metrics["leaderboard"])
    # a new price is not a new judge: the same run is resumed, nothing is sent again
    sent = len(openai_server.control.chat_requests())
    prices.write_text("priced: {input: 1, output: 1}\n")
    again = CliRunner().invoke(app, ["sweep", str(sweep), "--out", str(out), "--prices", str(prices), "-q"])
    assert again.exit_code == 0, again.output
    assert len(openai_server.control.chat_requests()) == sent
    with Store.in_dir(out) as store:
        run_again = next(r for r in store.runs() if r.judge_spec == "api:priced")
        assert run_again.run_id == run.run_id
        assert recorded_cost(run_again.metadata).price == Price(1, 1)  # type: ignore[union-attr]


def test_a_budget_stops_dispatching_before_it_would_be_exceeded_and_a_larger_one_resumes(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    sweep_cases = write_cases(tmp_path / "data", 6, images=False)
    price = "price: {input: 1000, output: 1000}"
    sweep = write_sweep(
        tmp_path / "sweep.yaml",
        f"data: {sweep_cases}\nreport: {{n_resamples: 20}}\njudges:\n"
        + _api(openai_server, "costly", f"concurrency: 1, max_tokens: 20, {price}")
        + "  - judge: baseline:longer\n",
    )
    config = load_sweep(sweep)
    # what one request costs here, and what the sweep will guess before the first answer
    probe = run_sweep(config, SweepOptions(out_dir=tmp_path / "probe", report=False))
    with Store.in_dir(tmp_path / "probe") as store:
        run = store.run(probe.outcomes[0].run_id)  # type: ignore[arg-type]
        costs = sorted(run_cost(Price(1000, 1000), [j], 2).usd for j in store.judgments_for_run(run))
    benchmark = load_sweep_data(config)
    from medrewardbench.judges.base import JudgeRequest

    first_guess = CostEstimator(Price(1000, 1000), load_template("pairwise"), 20).per_request(
        JudgeRequest(benchmark.cases[0], config.orders[0])
    )
    budget = max(first_guess, costs[-1]) + 2.5 * costs[-1]
    assert budget < sum(costs)  # the budget cannot pay for everything
    openai_server.control.clear_requests()
    out = tmp_path / "out"
    stopped = CliRunner().invoke(app, ["sweep", str(sweep), "--out", str(out), "--budget", f"{budget}"])
    assert stopped.exit_code == 3, stopped.output
    assert "stopped by the budget" in stopped.output and "Rerun with a larger --budget to resume" in stopped.output
    with Store.in_dir(out) as store:
        run = next(r for r in store.runs() if r.judge_spec == "api:costly")
        judgments = store.judgments_for_run(run)
        spent = run_cost(Price(1000, 1000), judgments, 2).usd
        baseline_run = next(r for r in store.runs() if r.judge_spec == "baseline:longer")
        assert len(store.judgments_for_run(baseline_run)) == 12  # free judges are not stopped
    assert 0 < len(judgments) < 12
    assert spent <= budget  # never exceeded
    assert spent + costs[0] > budget  # and it stopped only when the next request would not have fit
    summary = json.loads((out / "sweep.json").read_text("utf-8"))
    costly = next(e for e in summary["entries"] if e["name"] == "api:costly")
    assert costly["status"] == "budget" and summary["budget"]["stopped"] == {"api:costly": 12 - len(judgments)}
    # a larger budget resumes from there; nothing is sent twice
    resumed = CliRunner().invoke(app, ["sweep", str(sweep), "--out", str(out), "--budget", f"{sum(costs) * 2}", "-q"])
    assert resumed.exit_code == 0, resumed.output
    assert len(openai_server.control.chat_requests()) == 12
    keys = [(fp, case, order) for fp, case, order in stored_rows(out)]
    assert len(keys) == len(set(keys)) == 24
    assert len(judgments_of(out, "api:costly")) == 12


def test_a_budget_needs_a_price_for_every_hosted_api_judge(
    tmp_path: Path, openai_server: OpenAIServer, sweep_cases: Path
) -> None:
    sweep = write_sweep(tmp_path / "sweep.yaml", f"data: {sweep_cases}\njudges:\n" + _api(openai_server, "unpriced"))
    result = CliRunner().invoke(app, ["sweep", str(sweep), "--out", str(tmp_path / "out"), "--budget", "5"])
    assert result.exit_code == 2
    assert f"{sweep}:3: api:unpriced: --budget needs a price" in " ".join(result.output.split())
    assert not (tmp_path / "out").exists() and openai_server.control.chat_requests() == []


def test_a_sweep_keeps_the_labels_provenance_of_its_data_in_every_file(tmp_path: Path) -> None:
    from medrewardbench.data.provenance import LabelProvenance, write_dataset_card

    cases = write_cases(tmp_path / "data")
    write_dataset_card(cases.parent, "chest-set", LabelProvenance("expert_majority", 3, "three radiologists", "card"))
    sweep = write_sweep(
        tmp_path / "sweep.yaml",
        f"data: {cases}\nreport: {{n_resamples: 50, formats: [md, json]}}\njudges:\n  - judge: baseline:longer\n",
    )
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["sweep", str(sweep), "--out", str(out)])
    assert result.exit_code == 0, result.output
    [dataset] = json.loads((out / "metrics.json").read_text("utf-8"))["datasets"]
    assert (dataset["labels"]["kind"], dataset["labels"]["raters"]) == ("expert_majority", 3)
    analysis = json.loads((out / "report" / "analysis.json").read_text("utf-8"))
    assert analysis["dataset"]["labels"]["text"] == "three radiologists"
    assert "Labels: three radiologists." in (out / "report" / "report.md").read_text("utf-8")
    with Store.in_dir(out) as store:
        assert store.label_provenance(dataset["data_hash"]).description == "three radiologists"


def test_a_budget_that_is_not_a_finite_number_of_dollars_is_one_line_and_nothing_starts(
    tmp_path: Path, sweep_cases: Path
) -> None:
    sweep = write_sweep(tmp_path / "sweep.yaml", f"data: {sweep_cases}\njudges:\n  - judge: baseline:longer\n")
    out = tmp_path / "out"
    for value in ("nan", "inf", "-inf", "-1", "1e400", "-0.01"):
        result = CliRunner().invoke(app, ["sweep", str(sweep), "--out", str(out), f"--budget={value}"])
        lines = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        assert len(lines) == 1 and lines[0].startswith("error: --budget must be a finite number of dollars >= 0, not ")
    assert not out.exists()
    with pytest.raises(ValueError, match="finite number of dollars"):
        run_sweep(load_sweep(sweep), SweepOptions(out_dir=out, budget_usd=math.nan))
    assert CliRunner().invoke(app, ["sweep", str(sweep), "--out", str(out), "--budget", "0", "-q"]).exit_code == 0


def test_dollar_figures_share_one_precision_fine_enough_for_both_amounts() -> None:
    assert dollar_figures(0.004, 0.0031) == ["$0.004000", "$0.003100"]
    assert dollar_figures(50, 49.87654) == ["$50.00", "$49.88"]
    assert dollar_figures(1234.5, 0) == ["$1,234.50", "$0.00"]
    assert dollar_figures(0.004, 0) == ["$0.004000", "$0.000000"]
    assert dollar_figures(2, 0.00012346) == ["$2.0000000", "$0.0001235"]


def test_the_budget_stop_message_shows_the_limit_and_the_spend_recognisably(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    sweep_cases = write_cases(tmp_path / "data", 6, images=False)
    sweep = write_sweep(
        tmp_path / "sweep.yaml",
        f"data: {sweep_cases}\nreport: {{n_resamples: 20}}\njudges:\n"
        + _api(openai_server, "cheap", "concurrency: 1, max_tokens: 20, price: {input: 1, output: 1}"),
    )
    config = load_sweep(sweep)
    probe = run_sweep(config, SweepOptions(out_dir=tmp_path / "probe", report=False))
    with Store.in_dir(tmp_path / "probe") as store:
        run = store.run(probe.outcomes[0].run_id)  # type: ignore[arg-type]
        costs = sorted(run_cost(Price(1, 1), [j], 2).usd for j in store.judgments_for_run(run))
    assert costs[-1] < 0.001  # a fraction of a cent per request: cents alone would say nothing
    from medrewardbench.judges.base import JudgeRequest

    first_guess = CostEstimator(Price(1, 1), load_template("pairwise"), 20).per_request(
        JudgeRequest(load_sweep_data(config).cases[0], config.orders[0])
    )
    budget = max(first_guess, costs[-1]) + 2.5 * costs[-1]
    out = tmp_path / "out"
    stopped = CliRunner().invoke(app, ["sweep", str(sweep), "--out", str(out), "--budget", f"{budget}", "-q"])
    assert stopped.exit_code == 3, stopped.output
    with Store.in_dir(out) as store:
        run = next(r for r in store.runs() if r.judge_spec == "api:cheap")
        spent = run_cost(Price(1, 1), store.judgments_for_run(run), 2).usd
    assert spent > 0
    found = re.search(r"stopped by the budget \(\$([\d,.]+); the stored judgments cost \$([\d,.]+)\)", stopped.output)
    assert found is not None, stopped.output
    limit_text, spent_text = found.groups()
    assert len(limit_text.split(".")[1]) == len(spent_text.split(".")[1])  # one precision for both
    assert float(limit_text.replace(",", "")) == pytest.approx(budget, rel=1e-3)
    assert float(spent_text.replace(",", "")) == pytest.approx(spent, rel=1e-3)


def test_empty_values_of_paths_and_of_ray_are_one_line(tmp_path: Path, sweep_cases: Path) -> None:
    sweep = write_sweep(tmp_path / "sweep.yaml", f"data: {sweep_cases}\njudges:\n  - judge: baseline:longer\n")
    empty_prices = tmp_path / "prices.yaml"
    empty_prices.write_text("prices: {}\n")
    for args, message in (
        (["", "--check"], "error: SWEEP_FILE is empty"),
        ([str(sweep), "--out", ""], "error: --out is empty"),
        ([str(sweep), "--prices", "", "--check"], "error: --prices is empty"),
        ([str(sweep), "--prices", str(empty_prices), "--check"], f"error: {empty_prices}: holds no prices"),
        ([str(sweep), "--ray", "", "--check"], "error: --ray was given an empty value"),
    ):
        result = CliRunner().invoke(app, ["sweep", *args])
        lines = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith(message), (args, result.output)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "prices.yaml", "sweep.yaml"]


def test_a_request_asked_again_is_billed_again_and_a_jury_adds_nothing_to_its_members(
    tmp_path: Path, openai_server: OpenAIServer, sweep_cases: Path
) -> None:
    price = "price: {input: 1000000, output: 1000000}"  # one dollar a token: costs read as token counts
    sweep = write_sweep(
        tmp_path / "sweep.yaml",
        f"data: {sweep_cases}\nreport: {{n_resamples: 50}}\njudges:\n"
        + _api(openai_server, "one", price)
        + _api(openai_server, "two", price)
        + "juries:\n  - name: both\n    members: [api:one, api:two]\n",
    )
    out = tmp_path / "out"
    openai_server.control.set_default_output("I cannot read these answers.")  # unparseable, but billed
    first = CliRunner().invoke(app, ["sweep", str(sweep), "--out", str(out), "-q"])
    assert first.exit_code in (0, 1), first.output
    with Store.in_dir(out) as store:
        run = next(r for r in store.runs() if r.judge_spec == "api:one")
        paid_first = sum((j.prompt_tokens or 0) + (j.completion_tokens or 0) for j in store.judgments_for_run(run))
        assert all(j.failure for j in store.judgments_for_run(run)) and paid_first > 0
    openai_server.control.reset()
    again = CliRunner().invoke(app, ["sweep", str(sweep), "--out", str(out), "--retry-failures"])
    assert again.exit_code == 0, again.output
    with Store.in_dir(out) as store:
        runs = {r.judge_spec: r for r in store.runs()}
        judgments = store.judgments_for_run(runs["api:one"])
        paid_now = sum((j.prompt_tokens or 0) + (j.completion_tokens or 0) for j in judgments)
        one = recorded_cost(runs["api:one"].metadata)
        two = recorded_cost(runs["api:two"].metadata)
        jury = recorded_cost(runs["jury:both"].metadata)
    assert all(j.failure is None for j in judgments)
    assert one is not None and one.usd == pytest.approx(paid_first + paid_now), "the unreadable answers were paid too"
    assert two is not None and jury is not None and jury.usd == pytest.approx(one.usd + two.usd)
    summary = json.loads((out / "sweep.json").read_text("utf-8"))
    assert summary["cost_usd"] == pytest.approx(one.usd + two.usd), "the jury is not added again"
    assert "juries reuse their members' answers and add nothing" in " ".join(again.output.split())


def test_totals_leave_juries_out() -> None:
    from medrewardbench.metrics.cost import RunCost, total_usd

    members = [RunCost(1.5, 0.0, 6, 12), RunCost(2.0, 0.0, 6, 12)]
    jury = RunCost(3.5, 0.0, 6, 0, members=("a", "b"))
    assert total_usd([*members, jury]) == pytest.approx(3.5)
