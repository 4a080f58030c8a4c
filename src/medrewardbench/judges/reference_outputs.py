"""``reference:PATH``: a judge whose verdicts come from the reference implementation's output files.

The reference Med-RewardBench code writes one JSON object per line with ``question_id``,
``modality_type`` (the organ file) and ``chosen_answer`` (the model's raw text, or after its
normalisation step a dict ``{dimension: "A"|"B", "reason": ...}``). It shows each case once, in
the original order, and scores a question whose answer it cannot normalise as wrong.

To reproduce its numbers exactly, this judge reads verdicts with the reference's own, more lenient
normalisation rules (:func:`reference_normalize`), not with :mod:`medrewardbench.parsing`. Cases
with no line in the files become failures ("no prediction"), which the reference also counts wrong.
Run it with ``--orders original``; ``medrewardbench import-reference`` does that for you.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from medrewardbench.dimensions import DIMENSIONS, Order, Position
from medrewardbench.errors import DataError, DataProblem, JudgeSpecError
from medrewardbench.judges.base import Judge, JudgeRequest, JudgeResult
from medrewardbench.judges.registry import JudgeOptions

_KEY_PATTERNS = {dim: re.compile(rf'"?{dim}"?\s*:\s*"?([AB])"?', flags=re.IGNORECASE) for dim in DIMENSIONS}
_DOUBLE_BRACKET = re.compile(r"\[\[([AB])\]\]", flags=re.IGNORECASE)
_STANDALONE = re.compile(r"\b([AB])\b", flags=re.IGNORECASE)


def reference_normalize(answer: Any) -> dict[str, Position] | None:
    """Normalise a ``chosen_answer`` the way the reference implementation does.

    Rules, in order: (1) the text from the first ``{`` to the last ``}`` parsed as JSON with an
    A/B value for all six dimensions; (2) ``dimension: A`` patterns found for all six dimensions;
    (3) a single ``[[A]]`` applied to every dimension; (4) exactly one standalone letter A/B
    (case-insensitive) applied to every dimension; (5) the whole text being A or B. Otherwise None.
    Already normalised dicts are checked for six A/B values.

    Args:
        answer: the ``chosen_answer`` value of one output line.

    Returns:
        dimension -> "A"/"B" (presentation order, which is the original order), or None.
    """
    if isinstance(answer, dict):
        return _six_letters(answer)
    if not isinstance(answer, str):
        return None
    text = answer.strip().strip('"')
    candidate = text[text.find("{") : text.rfind("}") + 1] if "{" in text and "}" in text else text
    try:
        parsed = json.loads(candidate)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        letters = _six_letters(parsed)
        if letters is not None:
            return letters
    found: dict[str, Position] = {}
    for dim, pattern in _KEY_PATTERNS.items():
        match = pattern.search(text)
        if match:
            found[dim] = "A" if match.group(1).upper() == "A" else "B"
    if len(found) == len(DIMENSIONS):
        return found
    match = _DOUBLE_BRACKET.search(text)
    if match:
        return dict.fromkeys(DIMENSIONS, "A" if match.group(1).upper() == "A" else "B")
    standalone = _STANDALONE.findall(text)
    if len(standalone) == 1:
        return dict.fromkeys(DIMENSIONS, "A" if standalone[0].upper() == "A" else "B")
    if text.upper() in ("A", "B"):
        return dict.fromkeys(DIMENSIONS, "A" if text.upper() == "A" else "B")
    return None


def _six_letters(mapping: dict[str, Any]) -> dict[str, Position] | None:
    out: dict[str, Position] = {}
    for dim in DIMENSIONS:
        value = str(mapping.get(dim, "")).strip().upper()
        if value not in ("A", "B"):
            return None
        out[dim] = "A" if value == "A" else "B"
    return out


def output_files(path: str | Path) -> list[Path]:
    """The JSONL output files under a path (a file, or a directory searched recursively)."""
    p = Path(path)
    if p.is_file():
        return [p]
    if p.is_dir():
        return sorted(f for f in p.rglob("*.jsonl") if f.is_file())
    raise JudgeSpecError(f"reference outputs {str(p)!r}: no such file or directory")


def index_outputs(files: Iterable[Path]) -> sqlite3.Connection:
    """Index the outputs by ``organ/question_id`` in a private temporary SQLite database.

    Later lines win, as in the reference's dict-based evaluation; the answers go to disk as they
    are read, so memory does not grow with the number of lines. The database is deleted when the
    connection is closed.

    Args:
        files: the output files, in order.

    Returns:
        A connection with a table ``answers(key, answer_json)``.

    Raises:
        DataError: lines that are not JSON or lack question_id / modality_type, with file and row.
    """
    index = sqlite3.connect("", check_same_thread=False)  # "": a temporary file, removed on close
    index.execute("CREATE TABLE answers (key TEXT PRIMARY KEY, answer_json TEXT)")
    problems: list[DataProblem] = []
    rows: list[tuple[str, str]] = []
    for file in files:
        with file.open(encoding="utf-8") as fh:
            for row, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError as exc:
                    problems.append(DataProblem(str(file), f"not valid JSON: {exc}", row=row))
                    continue
                if not isinstance(record, dict):
                    problems.append(DataProblem(str(file), "a line must be a JSON object", row=row))
                    continue
                missing = [k for k in ("question_id", "modality_type") if k not in record]
                if missing:
                    for key in missing:
                        problems.append(DataProblem(str(file), "missing", row=row, field=key))
                    continue
                key = f"{record['modality_type']}/{record['question_id']}"
                rows.append((key, json.dumps(record.get("chosen_answer"), ensure_ascii=False)))
                if len(rows) >= _INDEX_CHUNK:
                    index.executemany("INSERT OR REPLACE INTO answers VALUES (?, ?)", rows)
                    rows.clear()
    index.executemany("INSERT OR REPLACE INTO answers VALUES (?, ?)", rows)
    index.commit()
    if problems:
        index.close()
        raise DataError(problems)
    return index


_INDEX_CHUNK = 4096


class ReferenceOutputJudge(Judge):
    """Replays the reference implementation's stored verdicts.

    The outputs are indexed on disk (:func:`index_outputs`) and looked up a batch at a time, so a
    file of any length is never held in memory.

    Args:
        path: a JSONL output file, or a directory searched for them recursively.
        name: the name in the spec (``reference:NAME``); the path when None.
    """

    kind = "reference"
    batch_size = 1024

    def __init__(self, path: str, name: str | None = None):
        self.files = output_files(path)
        if not self.files:
            raise JudgeSpecError(f"reference outputs {path!r}: no .jsonl files found")
        self.path = path
        self.spec = f"reference:{name or path}"
        self._index = index_outputs(self.files)
        digest = hashlib.sha256()
        for file in self.files:
            with file.open("rb") as fh:
                while block := fh.read(1 << 20):
                    digest.update(block)
        self.content_sha256 = digest.hexdigest()

    def config(self) -> dict[str, Any]:
        """The hash of the output files' contents: the outputs are the judge."""
        return {"spec": "reference", "outputs_sha256": self.content_sha256}

    def metadata(self) -> dict[str, Any]:
        """The files read, and that only the original order is covered."""
        return {"files": [str(f) for f in self.files], "normalisation": "reference rules", "orders": "original"}

    def _answers(self, keys: Sequence[str]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for start in range(0, len(keys), 500):
            part = list(keys[start : start + 500])
            marks = ",".join("?" * len(part))
            query = f"SELECT key, answer_json FROM answers WHERE key IN ({marks})"
            for key, answer_json in self._index.execute(query, part):
                found[key] = json.loads(answer_json)
        return found

    async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """Look up each case's recorded answer (original order only) and normalise it as the reference does."""
        answers = self._answers([r.case.case_id for r in requests if r.order is Order.ORIGINAL])
        results = []
        for request in requests:
            if request.order is not Order.ORIGINAL:
                results.append(JudgeResult.failed("the reference outputs cover the original order only"))
                continue
            answer = answers.get(request.case.case_id, _MISSING)
            if answer is _MISSING:
                results.append(JudgeResult.failed("no prediction in the reference outputs"))
                continue
            raw = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
            verdicts = reference_normalize(answer)
            if verdicts is None:
                results.append(JudgeResult.failed("reference normalisation found no verdict", raw_output=raw))
            else:
                results.append(JudgeResult(verdicts=verdicts, raw_output=raw))
        return results

    async def aclose(self) -> None:
        """Close (and so delete) the index of the outputs."""
        self._index.close()


_MISSING = object()


def build(name: str, options: JudgeOptions) -> Judge:
    """Build ``reference:PATH`` (a JSONL file or a directory of them)."""
    if not name:
        raise JudgeSpecError("reference judge needs a path: reference:PATH")
    return ReferenceOutputJudge(name)
