"""``build responses``: the response pool, N generators answering every kept question.

Each generator (``--generator SPEC``, repeatable) answers every question the difficulty filter
kept (every question, when no filter has run) with the answer prompt, and joins the project's
pool; ``build pairs`` samples its pairs from the pool's answers. Generation is resumable and
fingerprinted exactly like judging (:mod:`medrewardbench.curation.generation`): the same command
after a crash, a Ctrl-C or with more generators asks only for what is missing; a generator whose
fingerprint (spec, model, template hash, sampling, seed) already answered a question in the filter
step is not asked again. Failures are stored with their reasons; ``retry_failures`` asks again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from medrewardbench.curation.generation import GenerationProgress, GenerationSummary, run_answers
from medrewardbench.curation.generators import TextGenerator, build_generator
from medrewardbench.curation.store import BuildError, BuildStore
from medrewardbench.models.options import JudgeOptions
from medrewardbench.prompts import TextTemplate

__all__ = ["run_responses"]


def run_responses(
    store: BuildStore,
    generator_specs: Sequence[str],
    *,
    options: JudgeOptions | None = None,
    template: TextTemplate,
    fresh: bool = False,
    retry_failures: bool = False,
    progress: GenerationProgress | None = None,
    generator_factory: Callable[[str, JudgeOptions, TextTemplate], TextGenerator] = build_generator,
) -> list[GenerationSummary]:
    """Have every generator answer every kept question, and add it to the pool.

    Args:
        store: the project's store (the caller holds the project's lock).
        generator_specs: ``api:`` and ``hf:`` specs.
        options: shared settings.
        template: the answer prompt.
        fresh: forget these configurations' stored answers first.
        retry_failures: answer again where a stored answer failed.
        progress: progress receiver.
        generator_factory: how a spec becomes a generator (tests inject generators here).

    Returns:
        What each generator did.

    Raises:
        BuildError: no generator, no question, or a filter that kept no question.
        EvaluationInterrupted: Ctrl-C, after storing what finished.
    """
    specs = list(dict.fromkeys(generator_specs))
    if not specs:
        raise BuildError("build responses needs at least one --generator SPEC")
    filtered = store.active_filter() is not None
    count = store.count_questions(kept_only=filtered)
    if count == 0:
        if filtered:
            raise BuildError(
                "the difficulty filter kept no question; run 'build filter' again with a larger --max-correct"
            )
        raise BuildError(f"{store.path}: the project has no questions; import some with 'build import'")
    options = options or JudgeOptions()
    sink = progress or GenerationProgress()
    generators = [generator_factory(spec, options, template) for spec in specs]
    summaries = []
    for generator in generators:
        store.add_to_pool(generator.fingerprint(), generator.spec)
        summaries.append(
            run_answers(
                store,
                generator,
                kept_only=filtered,
                with_reference=False,
                fresh=fresh,
                retry_failures=retry_failures,
                progress=sink,
            )
        )
    return summaries
