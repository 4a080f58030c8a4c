"""Turn a judge's raw text into per-dimension verdicts, or a failure with a reason.

A judge is asked to end its reply with one JSON object naming ``"A"`` or ``"B"`` for each of the
six dimensions plus a short ``"reason"``. Real outputs wander: chain-of-thought before the object,
code fences, a corrected second object, a reply cut off mid-object, markdown lines instead of
JSON, or an echo of the prompt (whose example object reads ``"A or B"``). The two responses under
review are untrusted text too: one may contain a planted ``overall: A`` or a planted JSON object,
and a judge that quotes it must not thereby vote for it.

Decision rules, in order:

1. **Scrub quoted text.** Every passage the judge was shown (``quoted``: the question, the two
   responses, the rendered prompt) is removed from the output wherever it occurs verbatim, longest
   first, as are output lines of at least 20 characters that occur verbatim inside a passage. Short
   passages (under 20 characters) are removed only when they carry a verdict of their own, so that
   a response reading ``"B"`` cannot erase every ``B`` of the output. Lines that hold a single JSON
   member (``"accuracy": "B",``) are not removed line by line, because a judge's own object may
   coincide with a line of a planted one; copied objects are caught whole instead (rule 2).
2. **The final JSON object.** Brace pairs are matched once; candidates are tried from the last to
   the first, an enclosing pair before the pairs inside it, and only fully parsed objects count
   (strict JSON first, then a tolerant pass that accepts ``//`` and ``/* */`` comments, trailing
   commas and single-quoted strings). Only objects with at least one dimension key count, at the
   top level or nested one to three levels down (``{"verdicts": {...}}``). An object is skipped
   when its text occurs in a quoted passage, ignoring whitespace and case (a copy, perhaps
   re-indented), or when every dimension value is a placeholder such as ``"A or B"`` (the prompt's
   example). The first object that remains is
   the judge's answer: its values decide each dimension, and a dimension that is missing, has a
   value other than A or B (``"tie"``, ``"both"``, ``"A or B"``, ``""``) or has conflicting
   duplicate keys fails on its own. Earlier objects are drafts and are ignored.
3. **Explicit lines**, only when no object remains: one ``dimension: A|B`` statement per line
   (``Accuracy: A``, ``- **overall**: B``, ``overall = A``, ``Overall winner: Answer B``,
   ``| Accuracy | A |``) and explicit ``"dimension": "A"`` pairs outside any skipped object; the
   last statement for a dimension wins. A statement whose text, from the dimension name to the
   letter, is a verdict statement of a quoted passage or occurs in one with no letter or digit on
   either side (ignoring spaces and case) is ignored. A line with an unclosed ``"`` is ignored (cut
   off inside its value).
   Prose is never read (``Overall, A``, ``A is worse than B``), and a single letter for the whole
   comparison (``[[A]]``, ``The better answer is A``) is not applied to all six dimensions.

**Truncated objects.** An object cut off before its closing brace is never parsed as JSON, and an
earlier complete object wins over it (the cut-off one may be a correction, but its verdicts cannot
be trusted whole). When it is the only object, its complete
``"dimension": "A"`` pairs are read under rule 3 and the result records ``method="lines"``, so a
reader can tell that the verdicts did not come from a complete object; the dimensions lost to the
cut fail individually.

A copy that the judge altered beyond whitespace and case (keys reordered, a value changed) is the
judge's own statement. Passing ``quoted`` is what protects: without it, copied text counts.

The result keeps one invariant: either at least one dimension is decided, ``failure`` is None and
every other dimension has an entry in ``dimension_failures``; or none is, ``failure`` says why,
``dimension_failures`` is empty and ``method`` is ``"none"``.

Why one module of this size: the verdict parser is one pass over the text, and the adversarial cases
it must survive (quoted prompts, planted verdicts, fences, two objects) are documented beside the
code that handles them.
"""

from __future__ import annotations

import bisect
import functools
import json
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from medrewardbench.dimensions import DIMENSIONS, Position, normalize_dimension

logger = logging.getLogger(__name__)

METHOD_JSON = "json"
METHOD_LINES = "lines"
METHOD_NONE = "none"

#: a line of the output at least this long that occurs verbatim in a quoted passage is removed
MIN_QUOTED_RUN = 20
#: brace pairs containing a dimension name that are tried as JSON before the search gives up
MAX_JSON_ATTEMPTS = 200
#: unmatched opening braces tried as the start of an object whose closing brace a string took
MAX_UNCLOSED_ATTEMPTS = 50
#: the tolerant (comments, trailing commas, single quotes) pass only looks at spans this long
MAX_TOLERANT_SPAN = 100_000
#: total characters the tolerant pass may rewrite for one output
MAX_TOLERANT_TOTAL = 1_000_000
#: how deep below the top-level object dimension keys are looked for
MAX_NESTING = 3
#: longest JSON string value that may still normalise to a letter
MAX_VALUE_LENGTH = 100
#: verdict statements whose copy check an index of quoted passages remembers
MAX_STATEMENT_CACHE = 4096

NO_VERDICTS = "no per-dimension verdicts"


@dataclass(frozen=True)
class ParseResult:
    """What a judge's output says, dimension by dimension.

    Attributes:
        verdicts: dimension -> ``"A"`` or ``"B"`` for each dimension decided.
        dimension_failures: dimension -> reason for each dimension not decided, when at least one
            was; empty otherwise.
        failure: why the output decided no dimension at all; None when at least one was decided.
        reason: the judge's own ``"reason"`` text when present.
        method: ``"json"`` (from a complete JSON object), ``"lines"`` (from explicit
            ``dimension: A`` statements) or ``"none"`` (nothing decided).
        positions: dimension -> offset in the output of the verdict's letter, for the decided
            dimensions whose letter was located (what log-probabilities are read at;
            :mod:`medrewardbench.models.logprobs`). It never changes a verdict.
    """

    verdicts: dict[str, Position]
    dimension_failures: dict[str, str]
    failure: str | None
    reason: str | None
    method: str
    positions: dict[str, int] = field(default_factory=dict)


def parse_verdicts(text: str | None, *, quoted: Sequence[str] = (), positions: bool = True) -> ParseResult:
    """Read per-dimension verdicts from a judge's raw output.

    Never raises: any input, including None, bytes, binary junk, megabytes of text or deeply
    nested braces, yields a :class:`ParseResult` (an internal error becomes a failure reason).

    Args:
        text: the judge's raw output.
        quoted: passages the judge was shown (the question, both responses, the rendered prompt);
            text copied from them never yields a verdict.
        positions: locate each verdict's letter in a JSON answer (:attr:`ParseResult.positions`);
            False leaves them out where finding them costs a search (a fifth of the parse), for
            callers that read no log-probabilities. Verdicts and reasons are the same either way.

    Returns:
        The verdicts found and, for what was not decided, the reasons; see the module docstring
        for the rules.
    """
    try:
        return _parse(text, quoted, positions)
    except Exception as exc:  # the contract is to never raise; the reason is kept as data
        logger.warning("verdict parser error: %s: %s", type(exc).__name__, exc)
        return _failed(f"parser error: {type(exc).__name__}", None)


# --------------------------------------------------------------------------------------------
# patterns

_H = r"[^\S\r\n]"  # horizontal whitespace
_DIM_ALT = "|".join(DIMENSIONS)
_DIM_WORD = re.compile(_DIM_ALT, re.IGNORECASE)
_DIM_WORD_LOWER = re.compile(_DIM_ALT)
_QUALIFIER = (
    r"(?:winner|verdict|choice|preference|pick|result|decision|judge?ment|rating|"
    rf"better(?:{_H}+(?:answer|response))?)"
)
# Every pattern below keeps its runs unambiguous (no two adjacent quantifiers that can match the
# same character), so that long runs of spaces or markup cost linear time, not polynomial
# backtracking.
_MARKUP_RUN = r"(?:[^\S\n]|[*_`\"'])*"
_LETTER_LEAD = r"(?:[^\S\n]|[*_`\[(\"'])*"
_LETTER = rf"{_LETTER_LEAD}(?:(?:answer|response|option|candidate){_LETTER_LEAD})?(?P<val>[ab])[\])*_`\"'}}]*"
# what may follow the letter: nothing, or an explanation that cannot be read as naming the other letter
_LINE_TAIL = (
    rf"(?:{_H}*(?:[.,;!]{_H}*)?$"
    rf"|{_H}*\([^\n]*$"
    rf"|{_H}+[-–—]{_H}+(?![\W_]*[ab]\b)[^\n]*$"
    rf"|{_H}*:{_H}+(?![\W_]*[ab]\b)[^\n]*$"
    rf"|\.{_H}+[^\n]*$"
    rf"|{_H}+because\b[^\n]*$)"
)
_LINE_VERDICT = re.compile(
    rf"^(?:[^\S\n]|[>{{\[,*_#`\"'+•-]|\d{{1,2}}[.)])*(?:final{_H}+)?(?P<dim>{_DIM_ALT})"
    rf"(?:{_H}+{_QUALIFIER})?{_MARKUP_RUN}(?:[:=]|->|=>|[-–—](?={_H})){_LETTER}{_LINE_TAIL}",
    re.IGNORECASE | re.MULTILINE,
)
_TABLE_VERDICT = re.compile(
    rf"^(?:[^\S\n]|[|*_`])*(?P<dim>{_DIM_ALT})(?:{_H}+{_QUALIFIER})?(?:[^\S\n]|[*_`])*\|"
    rf"{_LETTER}{_H}*(?:\|[^\n]*)?$",
    re.IGNORECASE | re.MULTILINE,
)
_JSON_PAIR = re.compile(
    rf"[\"']{_H}*(?P<dim>{_DIM_ALT}){_H}*[\"']{_H}*:{_H}*"
    rf"(?:[\"'](?P<val>[^\"'\n]{{0,{MAX_VALUE_LENGTH}}})[\"']|(?P<bare>[\w.+-]{{1,{MAX_VALUE_LENGTH}}}))",
    re.IGNORECASE,
)
_REASON_LINE = re.compile(
    rf"^(?:[^\S\n]|[-*_#>`\"'•+])*(?:reason|reasoning|rationale|justification|explanation)"
    rf"{_MARKUP_RUN}[:=](?P<text>[^\n]*)$",
    re.IGNORECASE | re.MULTILINE,
)
_REASON_STRIP = " \t*_`\"',"
_REASON_WORD_LOWER = re.compile(r"reason|rationale|justification|explanation")
_REASON_KEYS = ("reason", "reasoning", "rationale", "justification", "explanation")
_VALUE = re.compile(
    r"[\s\[({\"'*`]*(?:(?:answer|response|option|candidate)[\s_:-]*)?(?P<val>[ab])[\s\])}\"'*`.]*",
    re.IGNORECASE,
)
_PLACEHOLDER_VALUE = re.compile(r"[\W_]*a[\W_]*(?:or|/|\||,|and)[\W_]*b[\W_]*", re.IGNORECASE)
_BARE_LETTER = re.compile(
    r"\[\[\s*[ab]\s*\]\]"
    r"|\b(?:better|best|preferred|winning|superior)\s+(?:answer|response|one|choice)\s+is\s*(?::\s*)?"
    r"(?:answer\s+|response\s+)?[\[(\"']?[ab]\b"
    r"|\b(?:answer|response)\s+[ab]\s+is\s+(?:better|preferred|superior|the\s+better)",
    re.IGNORECASE,
)
_BARE_LETTER_ONLY = re.compile(
    r"[\W_]*(?:(?:final\s+)?(?:answer|verdict|choice|winner|decision|preference)[\W_]*)?"
    r"(?:answer\s+|response\s+)?[ab][\W_]*",
    re.IGNORECASE,
)
#: how much of the end of an output is searched for a single overall verdict (for the message only)
BARE_LETTER_WINDOW = 4_000
_BRACE = re.compile(r"[{}]")
_WHITESPACE = re.compile(r"\s+")
_SPACES = re.compile(r"[^\S\n]+")
_LINE_BREAKS = re.compile(r"\n+")
_LONG_LINE = re.compile(rf"^[^\n]{{{MIN_QUOTED_RUN},}}$", re.MULTILINE)
# lines that may bear on a verdict: they name a dimension or hold a brace
_BEARS_ON_VERDICT = re.compile(rf"{_DIM_ALT}|[{{}}]", re.IGNORECASE)
_JSON_MEMBER_LINE = re.compile(
    r"\s*[{\[,]?\s*\"(?:[^\"\\]|\\.)*\"\s*:\s*(?:\"(?:[^\"\\]|\\.)*\"|[\w.+-]+)\s*[,}\]]*\s*"
)
_TOLERANT_TOKEN = re.compile(
    r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\\n]|\\.)*'|//[^\n]*|/\*.*?\*/|,(?=\s*[}\]])",
    re.DOTALL,
)


# --------------------------------------------------------------------------------------------
# the quoted passages


class _Quoted:
    """The passages a judge was shown, indexed for the copy checks."""

    def __init__(self, passages: Iterable[str]) -> None:
        self.passages = sorted({p for p in passages if p}, key=lambda p: (-len(p), p))
        self._infos = [_passage_info(p) for p in self.passages]
        self.compact = "\x00".join(info[0] for info in self._infos)
        self.removable = [
            p for p, info in zip(self.passages, self._infos, strict=True) if len(p) >= MIN_QUOTED_RUN or info[3]
        ]
        self._statement_cache: dict[str, bool] = {}
        self.planted_cores: set[str] = set()
        for info in self._infos:
            self.planted_cores.update(info[2])

    def __bool__(self) -> bool:
        return bool(self.passages)

    # most outputs are one clean object: the texts below serve only the rarer checks
    @functools.cached_property
    def joined(self) -> str:
        """Every passage as written, separated by NUL (for the copied-line check)."""
        return "\x00".join(self.passages)

    @functools.cached_property
    def flat(self) -> str:
        """Every passage flattened (:func:`_flatten`), separated by NUL (for the statement check)."""
        return "\x00".join(info[1] for info in self._infos)

    def has_compact(self, text: str) -> bool:
        """Whether ``text`` occurs in a passage, ignoring whitespace and case."""
        compact = _compact(text)
        return bool(compact) and compact in self.compact

    def has_statement(self, core: str) -> bool:
        """Whether a verdict statement ``core`` was copied from a passage.

        Comparisons ignore case and spaces (not line breaks). True when a passage holds the same
        statement, or holds ``core`` with no letter or digit right before or after it, so that
        ``"A or B"`` does not contain the statement ``"A``.
        """
        core = _flatten(core)
        if not core:
            return False
        if core in self.planted_cores:
            return True
        known = self._statement_cache.get(core)
        if known is None:
            if len(self._statement_cache) >= MAX_STATEMENT_CACHE:  # the index outlives one output
                self._statement_cache.clear()
            known = self._statement_cache[core] = self._occurs_bounded(core)
        return known

    def _occurs_bounded(self, core: str) -> bool:
        hay = self.flat
        start = 0
        for _ in range(10_000):
            index = hay.find(core, start)
            if index < 0:
                return False
            end = index + len(core)
            before_ok = index == 0 or not hay[index - 1].isalnum()
            after_ok = end == len(hay) or not hay[end].isalnum()
            if before_ok and after_ok:
                return True
            start = index + 1
        return True  # an absurd number of near-copies: treat as copied


@functools.lru_cache(maxsize=4096)
def _passage_info(passage: str) -> tuple[str, str, frozenset[str], bool]:
    """Per-passage work for the copy checks, cached.

    Judges see the same template text, and each response twice (once per order), so most passages
    repeat across requests.
    """
    if _DIM_WORD.search(passage) is None:  # every statement names a dimension: most responses name none
        return _compact(passage), _flatten(passage), frozenset(), False
    cores = frozenset(_flatten(event.core) for event in _statements(passage))
    carries = len(passage) < MIN_QUOTED_RUN and _carries_verdict(passage)
    return _compact(passage), _flatten(passage), cores, carries


_NO_QUOTES: _Quoted | None = None


#: a set of passages whose texts together are longer than this is indexed anew for each output
MAX_CACHED_QUOTED_CHARS = 200_000


def _quoted_index(quoted: Any) -> _Quoted:
    """The index of the passages a judge was shown, shared by outputs shown the same passages.

    Both orders of a case show the same passages (the responses swap places), and every request
    shows the template's fixed text: the index of a set of plain strings is built once and cached.
    """
    if isinstance(quoted, (list, tuple)) and all(type(item) is str for item in quoted):
        key = frozenset(quoted)
        if sum(map(len, key)) <= MAX_CACHED_QUOTED_CHARS:
            return _cached_quoted(key)
    return _Quoted(_coerce_quoted(quoted))


@functools.lru_cache(maxsize=256)
def _cached_quoted(passages: frozenset[str]) -> _Quoted:
    return _Quoted(_coerce_quoted(passages))


def _no_quotes() -> _Quoted:
    global _NO_QUOTES
    if _NO_QUOTES is None:
        _NO_QUOTES = _Quoted(())
    return _NO_QUOTES


def _compact(text: str) -> str:
    """``text`` without whitespace, lower case: a copy check that survives re-indentation."""
    return _WHITESPACE.sub("", text).lower()


def _flatten(text: str) -> str:
    """``text`` without spaces, with single line breaks, lower case."""
    return _LINE_BREAKS.sub("\n", _SPACES.sub("", text)).lower()


def _carries_verdict(passage: str) -> bool:
    """Whether a short passage decides something on its own (then it must be scrubbed)."""
    if not _dimension_positions(passage):
        return False
    return bool(_parse_clean(_normalize_newlines(passage), _no_quotes()).verdicts)


def _coerce_quoted(quoted: Any) -> list[str]:
    if quoted is None:
        return []
    if isinstance(quoted, (str, bytes, bytearray)):
        quoted = [quoted]
    passages: list[str] = []
    try:
        for item in quoted:
            passage = _coerce_text(item)
            if passage is not None and passage.strip():
                passages.append(_normalize_newlines(passage).strip())
    except TypeError:
        return passages
    return passages


def _coerce_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    return None


def _normalize_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _scrub(text: str, quoted: _Quoted) -> str:
    """Blank out quoted passages and long verbatim lines of them from the output.

    Blanked text becomes whitespace of the same length (a passage starts with a line break, so it
    cannot join the text around it into one statement), which keeps every position of the scrubbed
    text valid in the original: copy checks look at what was there before scrubbing, so that
    blanking one line of a copied object cannot make the rest of it look original.
    """
    if not quoted:
        return text
    for passage in quoted.removable:
        if passage in text:
            text = text.replace(passage, "\n" + " " * (len(passage) - 1))

    def drop_copied_line(match: re.Match[str]) -> str:
        line = match.group(0)
        stripped = line.strip()
        if (
            len(stripped) >= MIN_QUOTED_RUN
            and stripped in quoted.joined
            and _BEARS_ON_VERDICT.search(stripped) is not None
            and _JSON_MEMBER_LINE.fullmatch(stripped) is None
        ):
            return " " * len(line)
        return line

    return _LONG_LINE.sub(drop_copied_line, text)


def _dimension_positions(text: str) -> list[int]:
    """Where a dimension name starts in ``text``, any case."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a few characters change length when lowered
        return [match.start() for match in _DIM_WORD.finditer(text)]
    return [match.start() for match in _DIM_WORD_LOWER.finditer(lowered)]


# --------------------------------------------------------------------------------------------
# the core


def _parse(text: Any, quoted: Any, positions: bool = True) -> ParseResult:
    raw = _coerce_text(text)
    if raw is None:
        return _failed("empty output" if text is None else f"output is not text ({type(text).__name__})", None)
    if not raw.strip():
        return _failed("empty output", None)
    passages = _quoted_index(quoted)
    original = _normalize_newlines(raw)
    clean = _scrub(original, passages)
    if not clean.strip():
        return _failed(f"{NO_VERDICTS}: the output only repeats text it was shown", None)
    result = _parse_clean(clean, passages, original, positions)
    if result.positions and len(original) != len(raw):
        result = replace(result, positions=_raw_offsets(raw, result.positions))
    return result


def _raw_offsets(raw: str, positions: dict[str, int]) -> dict[str, int]:
    """Offsets in the newline-normalised text mapped back to ``raw``, which has carriage returns."""
    starts = [i for i, char in enumerate(raw) if char != "\n" or i == 0 or raw[i - 1] != "\r"]
    return {dim: starts[offset] for dim, offset in positions.items() if offset < len(starts)}


def _parse_clean(text: str, quoted: _Quoted, original: str | None = None, positions: bool = True) -> ParseResult:
    """Parse scrubbed ``text``; ``original`` is the same output before scrubbing (same length)."""
    dim_positions = _dimension_positions(text)
    search = _JsonSearch(text, quoted, dim_positions, original if original is not None else text, positions)
    chosen = search.final_object()
    if chosen is not None:
        return chosen
    return _parse_lines(text, quoted, search)


def _failed(reason: str, judge_reason: str | None) -> ParseResult:
    return ParseResult(verdicts={}, dimension_failures={}, failure=reason, reason=judge_reason, method=METHOD_NONE)


def _finish(
    verdicts: dict[str, Position],
    failures: dict[str, str],
    judge_reason: str | None,
    method: str,
    none_prefix: str,
) -> ParseResult:
    """Assemble a result that keeps the invariant described in the module docstring."""
    if not verdicts:
        details = "; ".join(f"{dim}: {why}" for dim, why in failures.items())
        return _failed(f"{none_prefix}: {details}" if details else none_prefix, judge_reason)
    ordered = {dim: verdicts[dim] for dim in DIMENSIONS if dim in verdicts}
    missing = {dim: failures.get(dim, "no verdict") for dim in DIMENSIONS if dim not in verdicts}
    return ParseResult(verdicts=ordered, dimension_failures=missing, failure=None, reason=judge_reason, method=method)


def _normalize_value(value: Any) -> Position | None:
    if value == "A" or value == "B":
        return "A" if value == "A" else "B"
    if not isinstance(value, str) or len(value) > MAX_VALUE_LENGTH:
        return None
    match = _VALUE.fullmatch(value)
    if match is None:
        return None
    return "A" if match.group("val").upper() == "A" else "B"


def _describe(value: Any) -> str:
    shown = json.dumps(value, ensure_ascii=False) if isinstance(value, str) else repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


# --------------------------------------------------------------------------------------------
# JSON


class _JsonObject(dict[str, Any]):
    """A decoded JSON object that remembers its members in order, duplicates included."""

    pairs: list[tuple[str, Any]]
    members: list[tuple[str, str, Any]] | None = None
    """Its dimension members (:func:`_dimension_members`), once asked for."""


def _object_hook(pairs: list[tuple[str, Any]]) -> _JsonObject:
    obj = _JsonObject(pairs)
    obj.pairs = pairs
    return obj


_DECODER = json.JSONDecoder(strict=False, object_pairs_hook=_object_hook)


def _tolerant_token(match: re.Match[str]) -> str:
    token = match.group(0)
    if token.startswith('"'):
        return token
    if token.startswith("'"):
        inner = token[1:-1].replace("\\'", "'").replace('"', '\\"')
        return f'"{inner}"'
    return " "  # a comment or a trailing comma


class _JsonSearch:
    """Finds the judge's final JSON object; remembers the objects it skipped."""

    def __init__(
        self, text: str, quoted: _Quoted, dim_positions: list[int], original: str, positions: bool = True
    ) -> None:
        self.want_positions = positions
        self.text = text
        # nothing scrubbed (the usual case): one text, so each check below runs once
        self.original = original if len(original) == len(text) and original != text else text
        self.quoted = quoted
        self.pairs: list[tuple[int, int]] = []
        self.unclosed: list[int] = []
        self.skipped_spans: list[tuple[int, int]] = []
        self.skip_notes: list[str] = []
        self.tolerant_budget = MAX_TOLERANT_TOTAL
        self._closes: list[int] | None = None
        self._skipped_starts: list[int] | None = None
        self.dim_positions = dim_positions
        if self.dim_positions:
            self._match_braces()

    def _match_braces(self) -> None:
        stack: list[int] = []
        pairs = self.pairs
        text = self.text
        for match in _BRACE.finditer(text):
            index = match.start()
            if text[index] == "{":
                stack.append(index)
            elif stack:
                pairs.append((stack.pop(), index))
        self.unclosed = stack

    def _has_dimension_name(self, start: int, end: int) -> bool:
        index = bisect.bisect_left(self.dim_positions, start)
        return index < len(self.dim_positions) and self.dim_positions[index] < end

    def _decode(self, start: int, close: int) -> tuple[Any, int] | None:
        """Decode the JSON value starting at ``start``; returns it and where it ends."""
        try:
            return _DECODER.raw_decode(self.text, start)
        except (ValueError, RecursionError):
            pass
        length = close - start + 1
        if length > MAX_TOLERANT_SPAN or length > self.tolerant_budget:
            return None
        self.tolerant_budget -= length
        fixed = _TOLERANT_TOKEN.sub(_tolerant_token, self.text[start : close + 1])
        try:
            value, end = _DECODER.raw_decode(fixed)
        except (ValueError, RecursionError):
            return None
        if fixed[end:].strip():
            return None
        return value, close + 1

    def final_object(self) -> ParseResult | None:
        """The result of the last usable object, or None when there is none."""
        result: ParseResult | None = None
        found_end = -1
        attempts = 0
        inside: tuple[int, int] | None = None
        for start, close in reversed(self.pairs):
            if inside is not None and inside[0] < start and close < inside[1]:
                continue
            if not self._has_dimension_name(start, close):
                continue
            attempts += 1
            if attempts > MAX_JSON_ATTEMPTS:
                logger.debug("verdict parser: gave up the JSON search after %d attempts", attempts - 1)
                break
            decoded = self._decode(start, close)
            if decoded is None:
                continue
            value, end = decoded
            inside = (start, end)
            result = self._usable(start, end, value)
            if result is not None:
                found_end = end
                break
        # a brace inside a JSON string steals the closing brace of its object, leaving the object's
        # own opening brace unmatched: such objects are decoded (strictly) from that brace
        attempts = 0
        for start in reversed(self.unclosed):
            if start < found_end:
                break
            if not self._has_dimension_name(start, len(self.text)):
                continue
            attempts += 1
            if attempts > MAX_UNCLOSED_ATTEMPTS:
                break
            try:
                value, end = _DECODER.raw_decode(self.text, start)
            except (ValueError, RecursionError):
                continue
            later = self._usable(start, end, value)
            if later is not None:
                return later
        return result

    def _usable(self, start: int, end: int, value: Any) -> ParseResult | None:
        """The result of a decoded object, or None when it is no answer (noting why it was skipped)."""
        found = _find_verdict_object(value)
        if found is None:
            return None
        verdict_obj, top_obj = found
        if self._is_copied(start, end, verdict_obj, verdict_obj is top_obj):
            self._skip(start, end, "a JSON object copied from the prompt or a response was ignored")
            return None
        if _is_placeholder_echo(verdict_obj):
            self._skip(start, end, "the prompt's example object ('A or B') is not an answer")
            return None
        result = _evaluate_object(verdict_obj, top_obj)
        original_reason = self._original_reason(start)
        if original_reason is not None and original_reason != result.reason:
            result = replace(result, reason=original_reason)
        if result.verdicts and self.want_positions:
            result = replace(result, positions=_letter_positions(self.text, start, end, result.verdicts))
        return result

    def _original_reason(self, start: int) -> str | None:
        """The judge's reason as written, before quoted passages inside it were blanked."""
        if self.original is self.text:
            return None
        try:
            value, _ = _DECODER.raw_decode(self.original, start)
        except (ValueError, RecursionError):
            return None
        found = _find_verdict_object(value)
        return None if found is None else _judge_reason_of(*found)

    def _skip(self, start: int, end: int, note: str) -> None:
        self.skipped_spans.append((start, end))
        self._skipped_starts = None
        if note not in self.skip_notes:
            self.skip_notes.append(note)

    def _is_copied(self, start: int, end: int, verdict_obj: Any, is_top: bool) -> bool:
        if not self.quoted:
            return False
        if self.quoted.has_compact(self.original[start:end]):
            return True
        if self.original is not self.text and self.quoted.has_compact(self.text[start:end]):
            return True
        if is_top:
            return False
        # the verdicts sit in a nested object: was that inner object copied?
        if self._closes is None:
            self._closes = [close for _, close in self.pairs]
        closes = self._closes
        low = bisect.bisect_right(closes, start)
        high = bisect.bisect_left(closes, end)
        for inner_start, inner_close in self.pairs[low:high][-50:]:
            if inner_start <= start or not self._has_dimension_name(inner_start, inner_close):
                continue
            if not self.quoted.has_compact(self.original[inner_start : inner_close + 1]):
                continue
            decoded = self._decode(inner_start, inner_close)
            if decoded is not None and decoded[0] == verdict_obj:
                return True
        return False

    def in_skipped(self, position: int) -> bool:
        """Whether ``position`` lies inside an object that was skipped as a copy or an echo."""
        if not self.skipped_spans:
            return False
        if self._skipped_starts is None:
            # skipped objects never overlap: each one is tried only outside the objects decoded before it
            self.skipped_spans.sort()
            self._skipped_starts = [start for start, _ in self.skipped_spans]
        index = bisect.bisect_right(self._skipped_starts, position) - 1
        return index >= 0 and position < self.skipped_spans[index][1]


def _letter_positions(text: str, start: int, end: int, verdicts: dict[str, Position]) -> dict[str, int]:
    """Where each verdict's letter stands in ``text[start:end]``, the chosen object.

    The last ``"dimension": "letter"`` member there whose letter is the verdict counts.
    """
    positions: dict[str, int] = {}
    for match in _JSON_PAIR.finditer(text, start, end):
        dim = match.group("dim").lower()
        group = "val" if match.group("val") is not None else "bare"
        value = match.group(group)
        if verdicts.get(dim) is None or _normalize_value(value) != verdicts[dim]:
            continue
        letter = _VALUE.fullmatch(value)
        if letter is not None:
            positions[dim] = match.start(group) + letter.start("val")
    return positions


def _dimension_members(obj: Any) -> list[tuple[str, str, Any]]:
    """(dimension, key as written, value) for each member of ``obj`` whose key is a dimension."""
    if isinstance(obj, _JsonObject):
        if obj.members is None:  # asked up to three times per object: found, echo check, verdicts
            obj.members = _members_of(obj.pairs)
        return obj.members
    return _members_of(list(obj.items()))


def _members_of(pairs: list[tuple[str, Any]]) -> list[tuple[str, str, Any]]:
    members = []
    for key, value in pairs:
        if isinstance(key, str):
            dim = _DIMENSION_KEYS.get(key) or normalize_dimension(key)
            if dim is not None:
                members.append((dim, key, value))
    return members


_DIMENSION_KEYS = {dim: dim for dim in DIMENSIONS}
"""Keys written exactly as the dimension's name (nearly all), found without normalising them."""


def _find_verdict_object(value: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The object holding the dimension keys (``value`` or one nested in it) and ``value``."""
    if not isinstance(value, dict):
        return None
    level: list[dict[str, Any]] = [value]
    for _ in range(MAX_NESTING + 1):
        following: list[dict[str, Any]] = []
        for obj in level:
            if _dimension_members(obj):
                return obj, value
            following.extend(child for child in obj.values() if isinstance(child, dict))
        if not following:
            return None
        level = following[:100]
    return None


def _is_placeholder_echo(obj: dict[str, Any]) -> bool:
    members = _dimension_members(obj)
    return bool(members) and all(
        isinstance(value, str) and len(value) <= MAX_VALUE_LENGTH and _PLACEHOLDER_VALUE.fullmatch(value) is not None
        for _, _, value in members
    )


def _judge_reason_of(*objects: dict[str, Any]) -> str | None:
    for obj in objects:
        for key, value in obj.items():
            if isinstance(key, str) and key.strip().lower() in _REASON_KEYS and isinstance(value, str):
                stripped = value.strip()
                if stripped:
                    return stripped
    return None


def _evaluate_object(verdict_obj: dict[str, Any], top_obj: dict[str, Any]) -> ParseResult:
    by_dim: dict[str, list[tuple[str, Any]]] = {}
    for dim, key, value in _dimension_members(verdict_obj):
        by_dim.setdefault(dim, []).append((key, value))
    verdicts: dict[str, Position] = {}
    failures: dict[str, str] = {}
    for dim in DIMENSIONS:
        members = by_dim.get(dim)
        if not members:
            failures[dim] = "missing from the JSON object"
            continue
        letters = [_normalize_value(value) for _, value in members]
        if len(members) > 1 and len(set(letters)) > 1:
            shown = ", ".join(f"{json.dumps(key)}: {_describe(value)}" for key, value in members)
            failures[dim] = f"conflicting values ({shown})"
            continue
        letter = letters[0]
        if letter is None:
            failures[dim] = f"value {_describe(members[0][1])} is not A or B"
            continue
        verdicts[dim] = letter
    judge_reason = _judge_reason_of(verdict_obj, top_obj)
    return _finish(verdicts, failures, judge_reason, METHOD_JSON, f"{NO_VERDICTS}: the JSON object decided none")


# --------------------------------------------------------------------------------------------
# explicit lines


class _Statement(NamedTuple):
    """One explicit verdict statement; ``core`` runs from the dimension name to the letter."""

    position: int
    dimension: str
    letter: Position | None
    value: str
    core: str
    letter_at: int = -1
    """where the letter stands in the text (-1 when the value holds none)"""


def _statements(text: str) -> list[_Statement]:
    """Every explicit ``dimension: letter`` statement and ``"dimension": value`` pair in ``text``."""
    found: list[_Statement] = []
    for pattern in (_LINE_VERDICT, _TABLE_VERDICT):
        for match in pattern.finditer(text):
            if match.group(0).count('"') % 2:
                continue  # an unclosed string: the line was cut off inside the value
            dim_start, val_end = match.start("dim"), match.end("val")
            value = match.group("val")
            found.append(
                _Statement(
                    dim_start,
                    match.group("dim").lower(),
                    "A" if value in "aA" else "B",
                    value,
                    text[dim_start:val_end],
                    match.start("val"),
                )
            )
    if '"' in text or "'" in text:
        for match in _JSON_PAIR.finditer(text):
            group = "val" if match.group("val") is not None else "bare"
            value = match.group(group)
            dim_start = match.start("dim")
            letter = _VALUE.fullmatch(value) if len(value) <= MAX_VALUE_LENGTH else None
            found.append(
                _Statement(
                    dim_start,
                    match.group("dim").lower(),
                    _normalize_value(value),
                    value,
                    text[dim_start : match.end()],
                    -1 if letter is None else match.start(group) + letter.start("val"),
                )
            )
    found.sort(key=lambda statement: statement.position)
    return found


def _parse_lines(text: str, quoted: _Quoted, search: _JsonSearch) -> ParseResult:
    latest: dict[str, _Statement] = {}
    copied = 0
    for statement in _statements(text) if search.dim_positions else ():
        if search.in_skipped(statement.position):
            continue
        original_core = search.original[statement.position : statement.position + len(statement.core)]
        if quoted and (quoted.has_statement(statement.core) or quoted.has_statement(original_core)):
            copied += 1
            continue
        latest[statement.dimension] = statement
    verdicts: dict[str, Position] = {}
    failures: dict[str, str] = {}
    for dim in DIMENSIONS:
        last = latest.get(dim)
        if last is None:
            failures[dim] = "no verdict line"
        elif last.letter is None:
            failures[dim] = f"value {_describe(last.value)} is not A or B"
        else:
            verdicts[dim] = last.letter
    judge_reason = _line_reason(text)
    if verdicts:
        positions = {dim: latest[dim].letter_at for dim in verdicts if latest[dim].letter_at >= 0}
        return replace(_finish(verdicts, failures, judge_reason, METHOD_LINES, NO_VERDICTS), positions=positions)
    return _failed(_nothing_found_reason(text, latest, copied, search), judge_reason)


def _line_reason(text: str) -> str | None:
    if _REASON_WORD_LOWER.search(text.lower()) is None:
        return None
    reason = None
    for match in _REASON_LINE.finditer(text):
        candidate = match.group("text").strip(_REASON_STRIP)
        if candidate:
            reason = candidate
    return reason


def _nothing_found_reason(text: str, latest: dict[str, _Statement], copied: int, search: _JsonSearch) -> str:
    if latest:
        details = "; ".join(
            f"{dim}: value {_describe(latest[dim].value)} is not A or B" for dim in DIMENSIONS if dim in latest
        )
        return f"{NO_VERDICTS}: {details}"
    notes = list(search.skip_notes)
    if copied:
        notes.append("verdict lines copied from the prompt or a response were ignored")
    stripped = text.strip()
    if (len(stripped) <= 100 and _BARE_LETTER_ONLY.fullmatch(stripped)) or _BARE_LETTER.search(
        stripped[-BARE_LETTER_WINDOW:]
    ):
        notes.append("a single verdict for the whole comparison is not applied to all six dimensions")
    if search.unclosed and search._has_dimension_name(search.unclosed[0], len(text)):
        notes.append("a JSON object is cut off and holds no complete dimension pair")
    if not notes:
        notes.append("no JSON object with dimension keys and no 'dimension: A|B' lines")
    return f"{NO_VERDICTS} found: " + "; ".join(notes)
