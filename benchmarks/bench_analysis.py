"""Speed of the report analysis and size of the HTML report at Med-RewardBench scale.

Synthesises the arrays of N judges on M cases (six dimensions, both orders, 13 organ systems)
with a realistic structure: cases differ in difficulty, judges in skill, so the judges' mistakes
overlap as they do on real data; a few judges fail some requests, one fails a third of them.
Then times :func:`medrewardbench.metrics.analysis.analyze` (every table, every interval and all
N*(N-1)/2 pairwise tests per dimension) and renders the HTML report with its gallery of wrongly
judged cases (real image content: crops of scikit-image's retina photograph; raw judge outputs
of realistic length), and prints the seconds taken and the HTML size.

Goals (issue): analysis of 32 judges x 1,026 cases x 6 dimensions x 2 orders with 2,000
resamples in under 5 s on a 2-core machine; the HTML under 10 MB.

With ``--from-store DIR`` it measures the whole ``report`` instead, as users run it: the same
synthetic judges are written once into a real results store under DIR (one store, one run per judge,
every judgment a row, the cases a canonical JSONL file that the HTML gallery re-reads), and a fresh
process renders every format from that store (:func:`medrewardbench.report.render.render_report`:
load the runs, analyse, write Markdown, CSV, JSON, XLSX and HTML). It prints the wall time and the
peak RSS of that process. Goal (scale issue): 32 judges x 100,000 cases x 6 dimensions x 2 orders
with 2,000 resamples in under 60 s and under 2 GB.

With ``--viewer`` the HTML also embeds the per-case viewer (:mod:`medrewardbench.report.viewer`):
every case with its image (a distinct crop per case, so nothing is shared) and every judge's raw
output in both orders (about 600 characters each), and the benchmark prints the viewer's share of
the HTML. With ``--browser`` it then opens the page in headless Chromium (Debian's
``/usr/bin/chromium`` through Playwright) and prints the time to load the page, and the time from
opening the viewer to its first page of cases on screen (parsing the embedded JSON included).

Usage: python benchmarks/bench_analysis.py [--judges 32] [--cases 1026] [--resamples 2000]
       [--repeat 3] [--per-judge 50] [--out DIR] [--viewer [--browser]]
       python benchmarks/bench_analysis.py --from-store DIR [--judges 32] [--cases 100000]
       [--resamples 2000] [--timeout 1800]
"""

from __future__ import annotations

import argparse
import io
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from medrewardbench.cases import Case, ImageRef
from medrewardbench.dimensions import DIMENSIONS, ORGAN_SYSTEMS, Order, Winner
from medrewardbench.evaluation.store import StoredJudgment
from medrewardbench.metrics.analysis import analyze, select_wrong_cases
from medrewardbench.metrics.core import RunData
from medrewardbench.metrics.results import Analysis
from medrewardbench.report.gallery import gallery_from_parts
from medrewardbench.report.html import render_html
from medrewardbench.report.markdown import render_markdown
from medrewardbench.report.xlsx import write_xlsx

MODEL_NAMES = (
    "openai:gpt-4o-2024-08-06",
    "openai:gpt-4o-mini",
    "anthropic:claude-3-5-sonnet",
    "google:gemini-1.5-pro",
    "hf:Qwen/Qwen2-VL-7B-Instruct",
    "hf:Qwen/Qwen2.5-VL-72B-Instruct",
    "hf:llava-hf/llava-1.5-7b-hf",
    "hf:OpenGVLab/InternVL2-8B",
    "vllm:meta-llama/Llama-3.2-11B-Vision",
    "hf:microsoft/llava-med-v1.5-mistral-7b",
    "rm:skywork-vl-reward-7b",
    "hf:HuatuoGPT-Vision-7B",
)


def synthesise(n_judges: int, n_cases: int, seed: int = 7) -> list[RunData]:
    """Runs with case difficulty and judge skill (logistic model), failures and three baselines."""
    rng = np.random.default_rng(seed)
    organs = tuple(ORGAN_SYSTEMS[i % len(ORGAN_SYSTEMS)] for i in rng.permutation(n_cases))
    labels = rng.integers(1, 3, size=(n_cases, len(DIMENSIONS))).astype(np.int8)
    lengths = rng.integers(80, 2400, size=(n_cases, 2)).astype(np.int64)
    difficulty = rng.normal(0.0, 1.2, size=(n_cases, 1, len(DIMENSIONS)))
    case_ids = tuple(f"{organs[i]}-{i:05d}" for i in range(n_cases))
    runs = []
    for j in range(n_judges):
        if j < 3:
            spec = ("baseline:random", "baseline:first", "baseline:longer")[j]
        else:
            name = MODEL_NAMES[(j - 3) % len(MODEL_NAMES)]
            spec = name if j - 3 < len(MODEL_NAMES) else f"{name}@t{(j - 3) // len(MODEL_NAMES)}"
        skill = 0.0 if j < 3 else rng.uniform(-0.2, 1.6)
        p_right = 1.0 / (1.0 + np.exp(-(skill - difficulty)))
        right = rng.random((n_cases, 2, len(DIMENSIONS))) < p_right
        verdicts = np.where(right, labels[:, None, :], 3 - labels[:, None, :]).astype(np.int8)
        fail_rate = 0.33 if j == n_judges - 1 else (0.02 if j % 5 == 0 and j >= 3 else 0.0)
        failed = rng.random((n_cases, 2)) < fail_rate
        verdicts[failed] = 0
        runs.append(
            RunData(
                run_id=f"run-{j:02d}",
                judge_spec=spec,
                data_hash="synthetic",
                case_ids=case_ids,
                verdicts=verdicts,
                labels=labels,
                lengths=lengths,
                groups={"organ_system": organs},
                orders=(Order.ORIGINAL, Order.SWAPPED),
                failures={"HTTP 429: rate limited": int(failed.sum())} if failed.any() else {},
            )
        )
    return runs


def _image_bytes(base: np.ndarray, rng: np.random.Generator) -> bytes:
    from PIL import Image

    size = 512
    y, x = rng.integers(0, base.shape[0] - size, size=2)
    crop = Image.fromarray(base[y : y + size, x : x + size])
    buffer = io.BytesIO()
    crop.save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def gallery_inputs(
    runs: list[RunData], per_judge: int, *, every_case: bool = False
) -> tuple[dict[str, Case], dict[str, dict[tuple[str, str], StoredJudgment]]]:
    """Cases (with real image content) and raw judge outputs for the cases the report will show.

    ``every_case``: every case and every judgment (what the per-case viewer embeds), not only the
    gallery's.
    """
    from skimage import data as skdata

    rng = np.random.default_rng(3)
    retina = skdata.retina()
    selection = select_wrong_cases(runs, per_judge=per_judge)
    if every_case:
        selection = {run.run_id: list(range(run.n_cases)) for run in runs}
    shown = sorted({i for indices in selection.values() for i in indices})
    first = runs[0]
    cases: dict[str, Case] = {}
    sentence = "The image shows findings consistent with the clinical question; the report should mention them. "
    for i in shown:
        n1, n2 = (int(v) for v in first.lengths[i])
        cases[first.case_ids[i]] = Case(
            case_id=first.case_ids[i],
            image=ImageRef.from_bytes(_image_bytes(retina, rng), name=f"{i}.jpg"),
            question="Describe the abnormality visible in this image and suggest the next diagnostic step.",
            response_1=(sentence * (n1 // len(sentence) + 1))[:n1],
            response_2=(sentence * (n2 // len(sentence) + 1))[:n2],
            labels={d: int(first.labels[i, k]) for k, d in enumerate(DIMENSIONS)},  # type: ignore[misc]
            organ_system=first.groups["organ_system"][i],
        )
    reason = (
        "Response A identifies the lesion and its location correctly, while response B misses the "
        "differential diagnosis; both are relevant, A is more complete and more useful clinically. "
    ) * 3
    # every case: each output its own text (90 words drawn from 4,000 made-up ones, about as
    # compressible as English), so that compressing the viewer's document is not flattered
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocabulary = np.array(["".join(letters[rng.integers(0, 26, rng.integers(2, 10))]) for _ in range(4000)])
    judgments: dict[str, dict[tuple[str, str], StoredJudgment]] = {}
    for run in runs:
        rows = {}
        for i in selection[run.run_id]:
            for o, order in enumerate(run.orders):
                verdicts: dict[str, Winner] = {
                    d: 1 if v == 1 else 2 for d, v in zip(DIMENSIONS, run.verdicts[i, o].tolist(), strict=True) if v > 0
                }
                failed = run.verdicts[i, o, 0] == 0
                said = reason if not every_case else " ".join(vocabulary[rng.integers(0, len(vocabulary), 90)])
                raw = None if failed else json.dumps({**{d: "A" for d in DIMENSIONS}, "reason": said})
                rows[(run.case_ids[i], order.value)] = StoredJudgment(
                    case_id=run.case_ids[i],
                    order=order,
                    case_hash="",
                    fingerprint="",
                    verdicts=verdicts,
                    raw_output=raw,
                    failure="HTTP 429: rate limited" if failed else None,
                    dimension_failures={},
                    latency_s=None,
                    prompt_tokens=None,
                    completion_tokens=None,
                    scores=None,
                    extra={},
                )
        judgments[run.run_id] = rows
    return cases, judgments


def write_store(root: Path, n_judges: int, n_cases: int) -> Path:
    """The synthetic runs as a real results store: cases in a canonical file, one run per judge.

    The cases (builtin CT image, texts of the synthetic lengths) go to ``root/cases.jsonl`` and are
    hashed and registered by the library itself; the judgments are inserted in bulk with SQL (the
    store's own layout), which is what ``eval`` would have left behind. Reused when already built.
    """
    from medrewardbench.data import load_benchmark
    from medrewardbench.evaluation.store import RunRecord, Store, judgment_fingerprint, make_run_id

    run_dir = root / f"store-{n_judges}x{n_cases}"
    done = run_dir / "complete"
    if done.is_file():
        return run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    runs = synthesise(n_judges, n_cases)
    first = runs[0]
    data_file = run_dir / "cases.jsonl"
    sentence = "The image shows findings consistent with the clinical question; the report should mention them. "
    with data_file.open("w", encoding="utf-8") as handle:
        for i in range(n_cases):
            n1, n2 = (int(v) for v in first.lengths[i])
            row = {
                "id": first.case_ids[i],
                "image": {"builtin": "pydicom:CT_small.dcm"},
                "question": f"Describe the abnormality visible in image {i} and suggest the next diagnostic step.",
                "response_1": (sentence * (n1 // len(sentence) + 1))[:n1],
                "response_2": (sentence * (n2 // len(sentence) + 1))[:n2],
                "labels": {d: int(first.labels[i, k]) for k, d in enumerate(DIMENSIONS)},
                "organ_system": first.groups["organ_system"][i],
                "department": ("radiology", "ophthalmology", "pathology")[i % 3],
            }
            handle.write(json.dumps(row) + "\n")
    benchmark = load_benchmark(str(data_file))
    data_hash = benchmark.data_hash()
    hashes = [case.content_hash() for case in benchmark]
    store_path = run_dir / "medrewardbench.sqlite"
    store_path.unlink(missing_ok=True)
    reason = (
        "Response A identifies the lesion and its location correctly, while response B misses the "
        "differential diagnosis; both are relevant, A is more complete."
    )
    with Store(store_path) as store:
        for j, run in enumerate(runs):
            judge_fp = f"synthetic-judge-{j:03d}"
            record = RunRecord(
                run_id=make_run_id(run.judge_spec, judge_fp, data_hash),
                judge_spec=run.judge_spec,
                judge_fingerprint=judge_fp,
                data_hash=data_hash,
                dataset_name="synthetic",
                dataset_source=str(data_file),
                orders=run.orders,
                config={"spec": run.judge_spec},
                metadata={},
                n_cases=n_cases,
            )
            store.register_run(record, benchmark.cases if j == 0 else [], data_hash)
    db = sqlite3.connect(store_path)
    letters = {1: "1", 2: "2"}
    for j, run in enumerate(runs):
        judge_fp = f"synthetic-judge-{j:03d}"
        rows = []
        for i in range(n_cases):
            case_id = first.case_ids[i]
            for o, order in enumerate(run.orders):
                verdict = run.verdicts[i, o].tolist()
                failed = verdict[0] == 0
                verdicts = (
                    "{}"
                    if failed
                    else "{"
                    + ", ".join(
                        f'"{d}": {letters[v]}' for d, v in sorted(zip(DIMENSIONS, verdict, strict=True)) if v > 0
                    )
                    + "}"
                )
                raw = None if failed else json.dumps({"overall": "A", "reason": reason})
                rows.append(
                    (
                        judge_fp,
                        case_id,
                        order.value,
                        hashes[i],
                        judgment_fingerprint(judge_fp, hashes[i], order),
                        verdicts,
                        raw,
                        "HTTP 429: rate limited" if failed else None,
                        "{}",
                        0.5,
                        900,
                        120,
                        None,
                        "{}",
                        0.0,
                    )
                )
        with db:
            db.executemany(
                """INSERT OR REPLACE INTO judgments(judge_fingerprint, case_id, order_, case_hash,
                       fingerprint, verdicts_json, raw_output, failure, dimension_failures_json,
                       latency_s, prompt_tokens, completion_tokens, scores_json, extra_json, created_at)
                   VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)""",
                rows,
            )
    db.close()
    done.write_text("ok\n")
    return run_dir


REPORT_CHILD = r"""
import json, resource, sys, time
from medrewardbench.report.render import ReportSettings, render_report

run_dir, out, resamples = sys.argv[1], sys.argv[2], int(sys.argv[3])
start = time.perf_counter()
settings = ReportSettings(n_resamples=resamples, group_fields=("organ_system", "department"))
written = render_report([run_dir], out, settings=settings)
wall = time.perf_counter() - start
peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
sizes = {kind: path.stat().st_size for kind, path in written.items()}
print(json.dumps({"wall_s": wall, "peak_rss_mb": peak_kb / 1024, "sizes": sizes}))
"""


def report_from_store(
    root: Path, n_judges: int, n_cases: int, resamples: int, timeout: float, memory_limit_gb: float | None = None
) -> None:
    """Build (or reuse) the store, then time ``render_report`` on it in a fresh process.

    ``memory_limit_gb`` caps the child's address space (a report that needs more fails with a
    MemoryError instead of pushing a shared machine into swap or the OOM killer).
    """
    start = time.perf_counter()
    run_dir = write_store(root, n_judges, n_cases)
    print(f"store: {run_dir} (ready in {time.perf_counter() - start:.1f} s)")
    out = root / f"report-{n_judges}x{n_cases}"

    def limit_memory() -> None:
        if memory_limit_gb is not None:
            import resource

            cap = int(memory_limit_gb * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    try:
        done = subprocess.run(
            [sys.executable, "-c", REPORT_CHILD, str(run_dir), str(out), str(resamples)],
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=limit_memory,
        )
    except subprocess.TimeoutExpired:
        print(f"report: did not finish within {timeout:.0f} s")
        return
    if done.returncode != 0:
        print(f"report: failed with exit status {done.returncode}: {done.stderr.strip()[-2000:]}")
        return
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    sizes = ", ".join(f"{kind} {size / 1e6:.2f} MB" for kind, size in figures["sizes"].items())
    print(
        f"report: {figures['wall_s']:.1f} s wall, peak RSS {figures['peak_rss_mb']:.0f} MB "
        f"(goal < 60 s and < 2048 MB); {sizes}"
    )


def open_in_browser(html_path: Path) -> None:
    """Time loading the report in headless Chromium, then opening the viewer to its first page of cases."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        start = time.perf_counter()
        page.goto(html_path.as_uri(), wait_until="load")
        t_load = time.perf_counter() - start
        if page.locator("#viewer").count() == 0:
            browser.close()
            print(f"browser: page loaded in {t_load:.2f} s (no viewer)")
            return
        start = time.perf_counter()
        page.locator("#viewer details.v-open > summary").click()
        page.locator("article.v-case").first.wait_for()
        t_open = time.perf_counter() - start
        parse_ms = page.evaluate("document.getElementById('viewer').dataset.openMs")
        start = time.perf_counter()
        page.locator(".v-next").first.click()
        page.locator(".v-status").first.wait_for()
        t_page = time.perf_counter() - start
        browser.close()
    print(
        f"browser: page loaded in {t_load:.2f} s; viewer opened to its first page in {t_open:.2f} s "
        f"(parse + filter + render {parse_ms} ms in the page); next page {t_page:.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--judges", type=int, default=32)
    parser.add_argument("--cases", type=int, default=None, help="default 1026; 100000 with --from-store")
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--per-judge", type=int, default=50)
    parser.add_argument("--out", type=Path, default=None, help="where to keep report.html (default: a temp dir)")
    parser.add_argument("--from-store", type=Path, default=None, help="time the whole report from a store built here")
    parser.add_argument("--timeout", type=float, default=1800.0, help="--from-store: give the report this long")
    parser.add_argument("--viewer", action="store_true", help="embed the per-case viewer (every case, every judge)")
    parser.add_argument("--browser", action="store_true", help="time opening the page (and the viewer) in Chromium")
    parser.add_argument("--memory-limit-gb", type=float, default=None, help="--from-store: cap the report's memory")
    args = parser.parse_args()
    if args.from_store is not None:
        n_cases = args.cases or 100_000
        print(
            f"report from a store: {args.judges} judges x {n_cases} cases x {len(DIMENSIONS)} dimensions x "
            f"2 orders, {args.resamples} resamples"
        )
        report_from_store(args.from_store, args.judges, n_cases, args.resamples, args.timeout, args.memory_limit_gb)
        return
    args.cases = args.cases or 1026

    runs = synthesise(args.judges, args.cases)
    n_pairs = args.judges * (args.judges - 1) // 2
    print(
        f"{args.judges} judges x {args.cases} cases x {len(DIMENSIONS)} dimensions x 2 orders, "
        f"{args.resamples} resamples, {n_pairs} pairs x {len(DIMENSIONS) + 1} columns"
    )
    times = []
    analysis: Analysis | None = None
    for _ in range(args.repeat):
        start = time.perf_counter()
        analysis = analyze(runs, n_resamples=args.resamples)
        times.append(time.perf_counter() - start)
    print(
        f"analyze: best {min(times):.2f} s, median {statistics.median(times):.2f} s over {len(times)} runs (goal < 5 s)"
    )
    assert analysis is not None and len(analysis.pairwise.on_score()) == n_pairs

    start = time.perf_counter()
    cases, judgments = gallery_inputs(runs, args.per_judge)
    setup = time.perf_counter() - start
    start = time.perf_counter()
    gallery = gallery_from_parts(runs, judgments, cases, per_judge=args.per_judge)
    t_gallery = time.perf_counter() - start
    viewer = None
    if args.viewer:
        from medrewardbench.report.viewer import viewer_from_parts, viewer_json, viewer_payload

        every, all_judgments = gallery_inputs(runs, args.per_judge, every_case=True)
        start = time.perf_counter()
        viewer = viewer_from_parts(runs, all_judgments, every, [{"template": "pairwise"}] * len(runs))
        t_viewer = time.perf_counter() - start
        viewer_mb = len(viewer_json(viewer).encode("utf-8")) / 1e6
        encoding, embedded = viewer_payload(viewer)
        images_mb = sum(len(uri) for uri in viewer["images"].values()) / 1e6
        print(
            f"viewer: {len(viewer['cases'])} cases x {len(runs)} judges built in {t_viewer:.2f} s: "
            f"{viewer_mb:.2f} MB of JSON, of which {len(viewer['images'])} thumbnails {images_mb:.2f} MB; "
            f"embedded as {encoding}: {len(embedded) / 1e6:.2f} MB"
        )
    start = time.perf_counter()
    html = render_html(analysis, gallery, viewer=viewer)
    t_html = time.perf_counter() - start
    out_dir = args.out or Path(tempfile.mkdtemp(prefix="bench-analysis-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    html_path = out_dir / "report.html"
    html_path.write_text(html, encoding="utf-8")
    size_mb = html_path.stat().st_size / 1e6
    print(
        f"gallery: {len(gallery.cases)} distinct cases shown (<= {args.per_judge} per judge), thumbnails "
        f"{t_gallery:.2f} s (test data setup {setup:.2f} s)"
    )
    print(f"html: rendered in {t_html:.2f} s, {size_mb:.2f} MB (goal < 10 MB) -> {html_path}")
    if args.browser:
        open_in_browser(html_path)

    start = time.perf_counter()
    markdown = render_markdown(analysis)
    t_md = time.perf_counter() - start
    start = time.perf_counter()
    xlsx_path = write_xlsx(analysis, out_dir / "report.xlsx")
    t_xlsx = time.perf_counter() - start
    start = time.perf_counter()
    payload = json.dumps(analysis.to_json())
    t_json = time.perf_counter() - start
    print(
        f"markdown {len(markdown) / 1e3:.0f} kB in {t_md:.2f} s; xlsx {xlsx_path.stat().st_size / 1e6:.2f} MB "
        f"in {t_xlsx:.2f} s; analysis JSON {len(payload) / 1e6:.2f} MB in {t_json:.2f} s"
    )


if __name__ == "__main__":
    main()
