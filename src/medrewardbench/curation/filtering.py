"""``build filter``: keep the questions that small models find hard.

Every model (``--model SPEC``, repeatable: ``api:`` and ``hf:`` specs) answers every question that
has a reference answer, with the answer prompt (:mod:`medrewardbench.curation.generators`). Each
answer is then scored:

* a **closed** question's answer by normalised match against the reference
  (:func:`~medrewardbench.curation.scoring.score_closed`);
* an **open** question's answer by the grader (``--grader SPEC``, with the ``grade`` prompt,
  read strictly: :mod:`medrewardbench.curation.grading`). Open questions with a reference need a
  grader: the command refuses to start without one.

An answer that failed (the model erred, or the grader could not be read) counts as **not
correct**, and the decision says so. A question is **kept when at most K models answered it
correctly** (``--max-correct K``), else dropped. A question without a reference answer cannot be
scored and is kept, with that reason. A K at or above the number of models can drop nothing, which
is refused before any request unless ``force`` (``--force``) says it is meant.

Every decision is stored with the answers that caused it: per model its spec, its answer, whether
it was correct, how that was decided (the closed rule and what was read from the answer, or the
grader's output) and any failure. Answers and gradings are stored like judgments (resumable,
fingerprinted), so running the filter again with another K decides again without a single new
request; the last run's decisions are the ones in force (``build responses`` answers the kept
questions).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from medrewardbench.curation.generation import GenerationProgress, GenerationSummary, run_answers, run_requests
from medrewardbench.curation.generators import GenerationRequest, GenerationResult, TextGenerator, build_generator
from medrewardbench.curation.grading import GRADE_PLACEHOLDERS, GRADE_TEMPLATES, grading_key, parse_grade
from medrewardbench.curation.scoring import score_closed
from medrewardbench.curation.store import BuildError, BuildStore, StoredGrading, StoredQuestion
from medrewardbench.models.identity import config_hash
from medrewardbench.models.options import JudgeOptions
from medrewardbench.prompts import TextTemplate, load_text_template

log = logging.getLogger(__name__)

__all__ = ["SCORING_RULES", "FilterSummary", "decide", "load_grade_template", "run_filter"]

SCORING_RULES = "closed-match-1"
"""The version of the closed-answer rules, part of a filter's fingerprint."""

GeneratorFactory = Callable[[str, JudgeOptions, TextTemplate], TextGenerator]


def load_grade_template(name_or_path: str = "grade") -> TextTemplate:
    """The grading prompt: the shipped ``grade``, or a file with the placeholders of :data:`GRADE_PLACEHOLDERS`.

    Args:
        name_or_path: ``grade`` or a template file.

    Returns:
        The template.

    Raises:
        TemplateError: a missing file, or a placeholder missing or unknown.
    """
    return load_text_template(
        name_or_path, builtins=GRADE_TEMPLATES, required=GRADE_PLACEHOLDERS, known=GRADE_PLACEHOLDERS
    )


@dataclass(frozen=True)
class FilterSummary:
    """What a filter run did.

    Attributes:
        filter_fp: the filter's fingerprint (models, K, grader, rules).
        models: what each model did.
        grader: what the grader did, or None without one.
        max_correct: K.
        decided: questions decided.
        kept: questions kept (those without a reference included).
        dropped: questions dropped.
        unscored: questions kept because they have no reference answer.
        failed_answers: answers that counted as not correct because they failed (no answer, or
            an answer the grader could not grade).
        failed_gradings: of those, answers that came back but could not be graded.
    """

    filter_fp: str
    models: tuple[GenerationSummary, ...]
    grader: GenerationSummary | None
    max_correct: int
    decided: int
    kept: int
    dropped: int
    unscored: int
    failed_answers: int
    failed_gradings: int = 0


def _grading_requests(
    store: BuildStore,
    model_fps: Sequence[str],
    grader_fp: str,
    template: TextTemplate,
    retry_failures: bool,
) -> Iterator[GenerationRequest]:
    """One request per successful open answer the grader has not graded yet."""
    for chunk in store.iter_questions(with_reference=True):
        open_questions = [q for q in chunk if q.answer_type == "open" and q.reference_answer is not None]
        if not open_questions:
            continue
        wanted: dict[str, GenerationRequest] = {}
        for fp in model_fps:
            answers = store.generations(fp, (q.content_hash for q in open_questions))
            for question in open_questions:
                answer = answers.get(question.content_hash)
                if answer is None or answer.failure is not None or answer.text is None:
                    continue
                reference = question.reference_answer or ""
                key = grading_key(question.content_hash, reference, answer.text)
                values = {"question": question.question, "reference_answer": reference, "answer": answer.text}
                quoted = (answer.text, reference, question.question, *template.static_chunks())
                wanted.setdefault(key, GenerationRequest(key=key, values=values, quoted=quoted))
        stored = store.gradings(grader_fp, wanted)
        for key, request in wanted.items():
            done = stored.get(key)
            if done is not None and (done.failure is None or not retry_failures):
                continue
            yield request


def _count_gradings(store: BuildStore, model_fps: Sequence[str], grader_fp: str) -> tuple[int, int, int]:
    """(gradings the step covers, stored, stored failures), counted chunk by chunk."""
    total = stored = failed = 0
    for chunk in store.iter_questions(with_reference=True):
        open_questions = [q for q in chunk if q.answer_type == "open"]
        keys: set[str] = set()
        for fp in model_fps:
            answers = store.generations(fp, (q.content_hash for q in open_questions))
            for question in open_questions:
                answer = answers.get(question.content_hash)
                if answer is not None and answer.failure is None and answer.text is not None:
                    keys.add(grading_key(question.content_hash, question.reference_answer or "", answer.text))
        found = store.gradings(grader_fp, keys)
        total += len(keys)
        stored += len(found)
        failed += sum(1 for g in found.values() if g.failure is not None)
    return total, stored, failed


def _run_grader(
    store: BuildStore,
    grader: TextGenerator,
    model_fps: Sequence[str],
    *,
    fresh: bool,
    retry_failures: bool,
    progress: GenerationProgress,
) -> GenerationSummary:
    fp = grader.fingerprint()
    store.register_generator(fp, grader.spec, {**grader.config(), "role": "grader"}, grader.metadata())
    if fresh:
        store.delete_gradings(fp)
    progress.stage(f"counting the open answers {grader.spec} grades")
    total, stored, stored_failed = _count_gradings(store, model_fps, fp)
    reused = stored - (stored_failed if retry_failures else 0)

    def write(rows: Sequence[tuple[GenerationRequest, GenerationResult]]) -> None:
        gradings = []
        for request, result in rows:
            if result.failure is not None:
                gradings.append(
                    StoredGrading(
                        fp, request.key, None, result.text, result.failure, result.latency_s, extra=result.extra
                    )
                )
                continue
            parsed = parse_grade(result.text, quoted=request.quoted)
            extra = dict(result.extra)
            if parsed.reason:
                extra["reason"] = parsed.reason
            gradings.append(
                StoredGrading(
                    fp,
                    request.key,
                    parsed.correct,
                    result.text,
                    parsed.failure,
                    result.latency_s,
                    result.prompt_tokens,
                    result.completion_tokens,
                    extra,
                )
            )
        store.write_gradings(gradings)

    requests = _grading_requests(store, model_fps, fp, grader.template, retry_failures)
    generated, failed, wall = run_requests(
        grader,
        requests,
        write,
        total=total,
        reused=reused,
        progress=progress,
        count_stored=lambda: _count_gradings(store, model_fps, fp)[1],
    )
    _, _, failures = _count_gradings(store, model_fps, fp)
    reasons = store.grading_failure_reasons(fp, limit=3)
    summary = GenerationSummary(
        grader.spec,
        fp,
        total,
        reused,
        generated,
        failed,
        failures,
        wall,
        tuple(reasons),
    )
    progress.finish_generation(summary)
    return summary


def decide(
    question: StoredQuestion,
    answers: Sequence[tuple[str, Any]],
    gradings: dict[str, StoredGrading],
    max_correct: int,
) -> tuple[bool, bool, int, int, str, list[dict[str, Any]]]:
    """The filter's decision about one question from its models' answers.

    Args:
        question: the question.
        answers: (model spec, stored answer or None) per model.
        gradings: grading key -> stored grading (open questions).
        max_correct: K: kept when at most K answers are correct.

    Returns:
        ``(kept, scored, correct, failed, reason, evidence)``; evidence has one entry per model.
    """
    if question.reference_answer is None:
        return True, False, 0, 0, "no reference answer: nothing to score, kept", []
    reference = question.reference_answer
    correct = failed = 0
    evidence: list[dict[str, Any]] = []
    for spec, answer in answers:
        entry: dict[str, Any] = {"generator": spec, "answer": None, "correct": False}
        if answer is None or answer.failure is not None or answer.text is None:
            entry["failure"] = "no answer stored" if answer is None else answer.failure
            entry["how"] = "failed"
            failed += 1
        elif question.answer_type == "closed":
            score = score_closed(answer.text, reference)
            entry.update(answer=answer.text, correct=score.correct, how=f"closed:{score.kind}", read=score.read)
        else:
            grading = gradings.get(grading_key(question.content_hash, reference, answer.text))
            entry.update(answer=answer.text, how="grader")
            if grading is None or grading.correct is None:
                entry["failure"] = "not graded" if grading is None else f"grader: {grading.failure}"
                failed += 1
            else:
                entry["correct"] = grading.correct
            if grading is not None:
                entry["grader_output"] = grading.raw_output
        correct += int(bool(entry["correct"]))
        evidence.append(entry)
    kept = correct <= max_correct
    verb = "kept" if kept else "dropped"
    limit = f"at most {max_correct} allowed" if kept else f"more than {max_correct}"
    reason = f"{verb}: {correct} of {len(answers)} models answered correctly ({limit})"
    if failed:
        reason += f"; {failed} answer(s) could not be scored and count as wrong"
    return kept, True, correct, failed, reason, evidence


def run_filter(
    store: BuildStore,
    model_specs: Sequence[str],
    max_correct: int,
    *,
    grader_spec: str | None = None,
    options: JudgeOptions | None = None,
    template: TextTemplate,
    grade_template: TextTemplate | None = None,
    grader_options: JudgeOptions | None = None,
    fresh: bool = False,
    retry_failures: bool = False,
    progress: GenerationProgress | None = None,
    generator_factory: GeneratorFactory = build_generator,
    force: bool = False,
) -> FilterSummary:
    """Answer, score and decide every question (rules in the module docstring).

    Args:
        store: the project's store (the caller holds the project's lock).
        model_specs: the small models.
        max_correct: K.
        grader_spec: the grader of open answers, or None.
        options: shared settings of the models.
        template: the answer prompt.
        grade_template: the grading prompt (default ``grade``).
        grader_options: settings of the grader (default ``options``).
        fresh: forget the stored answers (and gradings) of these configurations first.
        retry_failures: ask again where a stored answer (or grading) failed.
        progress: progress receiver.
        generator_factory: how a spec becomes a generator (tests inject generators here).
        force: run even when K is at least the number of models, so that nothing can be dropped
            (the answers are stored and every question is kept).

    Returns:
        What the run did.

    Raises:
        BuildError: no model, a negative K, a K that can drop nothing (without ``force``), no
            question, or open questions with references and no grader.
        EvaluationInterrupted: Ctrl-C, after storing what finished.
        JudgeSpecError, MissingExtraError, ModelLoadError, TemplateError: a model cannot be built.
    """
    specs = list(dict.fromkeys(model_specs))
    if not specs:
        raise BuildError("build filter needs at least one --model SPEC")
    if max_correct < 0:
        raise BuildError(f"--max-correct must be >= 0, not {max_correct}")
    if max_correct >= len(specs) and not force:
        raise BuildError(
            f"--max-correct {max_correct} can drop nothing with {len(specs)} filter model(s): a question is "
            f"dropped only when more than {max_correct} of them get it right. Give a K below {len(specs)} (or "
            "more --model), or --force to run the models anyway and keep every question"
        )
    if store.count_questions() == 0:
        raise BuildError(f"{store.path}: the project has no questions; import some with 'build import'")
    open_count = store.count_open_with_reference()
    if open_count and grader_spec is None:
        raise BuildError(
            f"{open_count} open question(s) have reference answers, and only a grader can score open answers: "
            "give --grader SPEC (for example --grader api:gpt-4o), or import them with --set answer_type=closed "
            "if their answers are short"
        )
    options = options or JudgeOptions()
    sink = progress or GenerationProgress()
    # build every model first: a bad spec fails before any request is sent
    models = [generator_factory(spec, options, template) for spec in specs]
    grader = None
    if grader_spec is not None and open_count:
        grader = generator_factory(grader_spec, grader_options or options, grade_template or load_grade_template())
    summaries = []
    for model in models:
        summaries.append(
            run_answers(
                store,
                model,
                kept_only=False,
                with_reference=True,
                fresh=fresh,
                retry_failures=retry_failures,
                progress=sink,
            )
        )
    fps = [s.fingerprint for s in summaries]
    grader_summary = None
    if grader is not None:
        grader_summary = _run_grader(store, grader, fps, fresh=fresh, retry_failures=retry_failures, progress=sink)
    config = {
        "models": [{"spec": s.spec, "fingerprint": s.fingerprint} for s in summaries],
        "max_correct": max_correct,
        "grader": None
        if grader_summary is None
        else {"spec": grader_summary.spec, "fingerprint": grader_summary.fingerprint},
        "rules": SCORING_RULES,
    }
    filter_fp = config_hash(config)
    sink.stage("deciding")
    decided = kept = dropped = unscored = failed_answers = failed_gradings = 0
    for chunk in store.iter_questions():
        hashes = [q.content_hash for q in chunk]
        per_model = [(s.spec, store.generations(s.fingerprint, hashes)) for s in summaries]
        gradings: dict[str, StoredGrading] = {}
        if grader_summary is not None:
            keys = [
                grading_key(q.content_hash, q.reference_answer or "", answers[q.content_hash].text or "")
                for q in chunk
                if q.answer_type == "open" and q.reference_answer is not None
                for _, answers in per_model
                if q.content_hash in answers and answers[q.content_hash].text is not None
            ]
            gradings = store.gradings(grader_summary.fingerprint, keys)
        rows = []
        for question in chunk:
            answers = [(spec, found.get(question.content_hash)) for spec, found in per_model]
            is_kept, scored, correct, failed, reason, evidence = decide(question, answers, gradings, max_correct)
            rows.append((question.qid, filter_fp, is_kept, scored, correct, failed, reason, evidence))
            decided += 1
            kept += int(is_kept)
            dropped += int(not is_kept)
            unscored += int(not scored)
            failed_answers += failed
            failed_gradings += sum(1 for entry in evidence if entry.get("how") == "grader" and "failure" in entry)
        store.write_decisions(rows)
    store.record_filter_run(filter_fp, config)
    return FilterSummary(
        filter_fp,
        tuple(summaries),
        grader_summary,
        max_correct,
        decided,
        kept,
        dropped,
        unscored,
        failed_answers,
        failed_gradings,
    )
