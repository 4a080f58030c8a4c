r"""``build pairs``: two responses per question from different generators, seeded, as canonical cases.

For every kept question (every question when no filter ran), in import order:

1. **Candidates.** The pool's answers to it (``build responses``), one per generator, failures and
   empty answers left out. Every two answers from different generators (different specs: two
   configurations of one spec, say at two temperatures, never form a pair) form a candidate pair,
   unless they are **duplicates**: equal after normalisation (Unicode NFKC, lower case, only the
   words kept: ``[\w]+`` runs joined by single spaces), or **near duplicates**: the Jaccard
   similarity of their sets of word 3-shingles (every run of three consecutive normalised words;
   a text of fewer words is one shingle) is at least :data:`NEAR_DUPLICATE_JACCARD` (0.8). A
   question with no candidate left gets no pair (counted).
2. **Choice.** The candidates are shuffled with a generator seeded by ``(seed, question id)``, so
   a question's pairs do not depend on the other questions (except for the length balance below),
   and the first ``per_question`` are taken.
3. **Length balance** (``length_balance``). Without labels, which answer will win is unknown; what
   can be predicted is a closed question's: when its reference answer is known and exactly one of
   the two answers matches it (:func:`~medrewardbench.curation.scoring.score_closed`), that one is the
   *predicted winner*. The balance keeps, over the final set, the number of pairs whose predicted
   winner is the **longer** answer (in characters) as close as possible to the number whose
   predicted winner is the **shorter** one. It does not change which kind of pair a question gets:
   when the shuffled first candidate has no prediction (both answers right, both wrong, equal
   lengths, an open question), it is taken as it is; when it has one, the balance takes instead,
   among the question's candidates *with* a prediction, the first (in shuffled order) that leaves
   ``|longer - shorter|`` smallest. So the share of pairs with a predicted winner stays what
   random sampling gives, and among them "the longer answer wins" stays within one pair of 50 %
   whenever the candidates allow it. The command reports both counts, and ``build report`` shows
   the real share per dimension once labels are attached.
4. **Presentation order.** Each pair's two answers are put in a random order (seeded by the same
   generator): which one becomes ``response_1`` says nothing about its generator.

The output is canonical cases without labels (``id`` = the question's project id, or
``ID#N`` with ``per_question`` > 1; the image embedded; ``question_type`` = the answer type), with
the generator that wrote each response kept under ``metadata.build`` (``response_1`` /
``response_2``: spec and fingerprint), beside the question's source, source id, reference answer
and the seed. The annotation app never shows metadata. The same project, pool and options give
byte-identical output. The pairs are also kept in the project store, where ``build labels``
attaches labels to them; sampling again with other options is refused once labels are attached.
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medrewardbench.cases import Case, ImageRef
from medrewardbench.curation.scoring import score_closed
from medrewardbench.curation.store import BuildError, BuildStore, StoredPair, StoredQuestion
from medrewardbench.utils.outdir import check_output_file

__all__ = [
    "NEAR_DUPLICATE_JACCARD",
    "SHINGLE_WORDS",
    "PairsSummary",
    "pair_case",
    "is_duplicate",
    "jaccard",
    "normalized_words",
    "sample_pairs",
    "shingles",
]

NEAR_DUPLICATE_JACCARD = 0.8
"""Two answers whose word 3-shingle sets have at least this Jaccard similarity are near duplicates."""
SHINGLE_WORDS = 3
_WORDS = re.compile(r"\w+")


def normalized_words(text: str) -> list[str]:
    """The words of a text after NFKC and lower-casing (runs of word characters).

    Args:
        text: an answer.

    Returns:
        The words, in order.
    """
    return _WORDS.findall(unicodedata.normalize("NFKC", text).lower())


def shingles(text: str, size: int = SHINGLE_WORDS) -> set[tuple[str, ...]]:
    """Every run of ``size`` consecutive normalised words (a shorter text is one shingle).

    Args:
        text: an answer.
        size: words per shingle.

    Returns:
        The set of shingles.
    """
    words = normalized_words(text)
    if len(words) < size:
        return {tuple(words)}
    return {tuple(words[i : i + size]) for i in range(len(words) - size + 1)}


def jaccard(a: set[tuple[str, ...]], b: set[tuple[str, ...]]) -> float:
    """The Jaccard similarity of two sets of shingles.

    Args:
        a: one set.
        b: the other.

    Returns:
        ``|a & b| / |a | b|`` (1.0 for two empty sets).
    """
    union = a | b
    return 1.0 if not union else len(a & b) / len(union)


def is_duplicate(a: str, b: str, threshold: float = NEAR_DUPLICATE_JACCARD) -> bool:
    """Whether two answers are equal after normalisation, or near duplicates (see the module docstring).

    Args:
        a: one answer.
        b: the other.
        threshold: the shingle Jaccard similarity from which they are near duplicates.

    Returns:
        True when they must not form a pair.
    """
    if normalized_words(a) == normalized_words(b):
        return True
    return jaccard(shingles(a), shingles(b)) >= threshold


@dataclass
class PairsSummary:
    """What ``build pairs`` wrote.

    Attributes:
        path: the output file.
        pairs: pairs written.
        questions: questions considered.
        without_pair: questions with fewer than two usable, different answers.
        duplicates_skipped: candidate pairs left out as exact or near duplicates.
        longer_predicted: pairs whose predicted winner is the longer answer.
        shorter_predicted: pairs whose predicted winner is the shorter answer.
        generators: spec -> how many responses of the set it wrote.
    """

    path: Path
    pairs: int = 0
    questions: int = 0
    without_pair: int = 0
    duplicates_skipped: int = 0
    longer_predicted: int = 0
    shorter_predicted: int = 0
    generators: dict[str, int] = field(default_factory=dict)

    @property
    def longer_share(self) -> float | None:
        """Share of predicted pairs whose predicted winner is the longer answer (None without any)."""
        total = self.longer_predicted + self.shorter_predicted
        return None if total == 0 else self.longer_predicted / total


@dataclass(frozen=True)
class _Candidate:
    first: tuple[str, str, str]
    """(fingerprint, spec, text)"""
    second: tuple[str, str, str]
    effect: int
    """+1: the predicted winner is the longer answer; -1: the shorter; 0: no prediction or equal length."""


def _effect(question: StoredQuestion, a: str, b: str) -> int:
    if question.answer_type != "closed" or question.reference_answer is None or len(a) == len(b):
        return 0
    a_right = score_closed(a, question.reference_answer).correct
    b_right = score_closed(b, question.reference_answer).correct
    if a_right == b_right:
        return 0
    winner_longer = len(a) > len(b) if a_right else len(b) > len(a)
    return 1 if winner_longer else -1


def _choose(candidates: list[_Candidate], per_question: int, balance: bool, summary: PairsSummary) -> list[_Candidate]:
    if not balance:
        return candidates[:per_question]
    chosen: list[_Candidate] = []
    remaining = list(candidates)
    for _ in range(min(per_question, len(remaining))):
        gap = summary.longer_predicted - summary.shorter_predicted
        best = 0
        if remaining[0].effect != 0:
            predicted = [i for i, c in enumerate(remaining) if c.effect != 0]
            best = min(predicted, key=lambda i: (abs(gap + remaining[i].effect), i))
        pick = remaining.pop(best)
        chosen.append(pick)
        summary.longer_predicted += int(pick.effect == 1)
        summary.shorter_predicted += int(pick.effect == -1)
    return chosen


def pair_case(
    question: StoredQuestion,
    image: ImageRef,
    pair_id: str,
    first: tuple[str, str, str],
    second: tuple[str, str, str],
    seed: int,
) -> tuple[Case, StoredPair]:
    """A pair as a canonical case (no labels) and as the store keeps it.

    Args:
        question: the question.
        image: its image.
        pair_id: the pair's id.
        first: (generator fingerprint, spec, text) of response_1.
        second: the same for response_2.
        seed: the sampling seed, recorded in the metadata.

    Returns:
        The case and the stored pair (``seq`` 0: the caller numbers pairs).
    """
    build: dict[str, Any] = {
        "question_id": question.qid,
        "source": question.source,
        "source_id": question.source_id,
        "reference_answer": question.reference_answer,
        "answer_type": question.answer_type,
        "response_1": {"generator": first[1], "fingerprint": first[0]},
        "response_2": {"generator": second[1], "fingerprint": second[0]},
        "seed": seed,
    }
    metadata = {**question.metadata, "build": build}
    case = Case(
        case_id=pair_id,
        image=image,
        question=question.question,
        response_1=first[2],
        response_2=second[2],
        organ_system=question.organ_system,
        department=question.department,
        modality=question.modality,
        source_dataset=question.source_dataset,
        question_type=question.answer_type,
        metadata=metadata,
    )
    stored = StoredPair(pair_id, 0, question.qid, first[0], second[0], first[2], second[2], {"build": build})
    return case, stored


def _pairs_config(store: BuildStore, seed: int, per_question: int, balance: bool, threshold: float) -> dict[str, Any]:
    active = store.active_filter()
    return {
        "seed": seed,
        "per_question": per_question,
        "length_balance": balance,
        "near_duplicate_jaccard": threshold,
        "pool": [fp for fp, _ in store.pool()],
        "filter": None if active is None else active[0],
    }


def sample_pairs(
    store: BuildStore,
    out: str | Path,
    *,
    seed: int,
    per_question: int = 1,
    length_balance: bool = False,
    near_duplicate_jaccard: float = NEAR_DUPLICATE_JACCARD,
) -> PairsSummary:
    """Sample pairs from the pool and write them as canonical cases (rules in the module docstring).

    Args:
        store: the project's store (the caller holds the project's lock).
        out: the output file (``.jsonl``, ``.json`` or ``.parquet``).
        seed: the seed of every random choice.
        per_question: pairs per question (at most).
        length_balance: balance "the predicted winner is the longer answer" to near 50 %.
        near_duplicate_jaccard: the shingle similarity from which two answers are near duplicates.

    Returns:
        What was written.

    Raises:
        BuildError: no pool, fewer than two generators in it, a bad number, an output suffix that
            is not a canonical one, or labels attached to pairs sampled with other options.
        OutputDirError: ``out`` is a directory, lies below a file, or cannot be written (checked
            before any work).
    """
    from medrewardbench.data.canonical import CANONICAL_SUFFIXES, write_canonical

    if Path(out).suffix.lower() not in CANONICAL_SUFFIXES:
        raise BuildError(f"--out {out}: pairs are written to a {', '.join(CANONICAL_SUFFIXES)} file")
    check_output_file(out)
    if per_question < 1:
        raise BuildError(f"--per-question must be at least 1, not {per_question}")
    if not 0.0 < near_duplicate_jaccard <= 1.0:
        raise BuildError(f"the near-duplicate threshold must be in (0, 1], not {near_duplicate_jaccard}")
    pool = store.pool()
    if len(pool) < 2:
        raise BuildError(
            f"the response pool has {len(pool)} generator(s); pairs need answers from at least two: "
            "run 'build responses PROJECT --generator SPEC ...' first"
        )
    config = _pairs_config(store, seed, per_question, length_balance, near_duplicate_jaccard)
    previous = store.get_meta("pairs")
    if store.count_labels() and previous is not None and previous != config:
        raise BuildError(
            "labels are attached to the pairs sampled before with other options (seed, pool, filter or "
            "balance); sampling again would orphan them. Use the same options, or start a new project"
        )
    kept_only = store.active_filter() is not None
    summary = PairsSummary(Path(out))

    def cases() -> Iterator[Case]:
        position = 0
        for chunk in store.iter_questions(kept_only=kept_only):
            hashes = [q.content_hash for q in chunk]
            answers = [(fp, spec, store.generations(fp, hashes)) for fp, spec in pool]
            images: dict[str, ImageRef] | None = None
            stored: list[StoredPair] = []
            for question in chunk:
                summary.questions += 1
                usable = []
                for fp, spec, found in answers:
                    answer = found.get(question.content_hash)
                    if answer is not None and answer.failure is None and answer.text and answer.text.strip():
                        usable.append((fp, spec, answer.text))
                candidates: list[_Candidate] = []
                for i in range(len(usable)):
                    for j in range(i + 1, len(usable)):
                        if usable[i][1] == usable[j][1]:
                            continue  # two configurations of one model are not different generators
                        if is_duplicate(usable[i][2], usable[j][2], near_duplicate_jaccard):
                            summary.duplicates_skipped += 1
                            continue
                        candidates.append(
                            _Candidate(usable[i], usable[j], _effect(question, usable[i][2], usable[j][2]))
                        )
                if not candidates:
                    summary.without_pair += 1
                    continue
                rng = random.Random(f"{seed}:{question.qid}")
                rng.shuffle(candidates)
                for number, pick in enumerate(_choose(candidates, per_question, length_balance, summary), start=1):
                    first, second = (pick.second, pick.first) if rng.random() < 0.5 else (pick.first, pick.second)
                    pair_id = question.qid if per_question == 1 else f"{question.qid}#{number}"
                    if images is None:
                        images = store.images(chunk)
                    case, pair = pair_case(question, images[question.qid], pair_id, first, second, seed)
                    position += 1
                    stored.append(dataclasses.replace(pair, seq=position))
                    for spec in (first[1], second[1]):
                        summary.generators[spec] = summary.generators.get(spec, 0) + 1
                    summary.pairs += 1
                    yield case
            store.insert_pairs(stored)

    target = Path(out)
    partial = target.with_name(f".{target.stem}.partial{target.suffix}")
    try:
        with store.transaction():
            store.clear_pairs()
            write_canonical(cases(), partial, embed_images=True)
            if summary.pairs == 0:
                raise BuildError(
                    f"no pair could be sampled: {summary.questions} question(s), none with two usable, different "
                    "answers from the pool's generators (see 'build report')"
                )
            store.set_meta("pairs", config, commit=False)
            os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return summary
