"""Rule-based edits of an answer: one injected clinical error, a harmless variant, or a bias cue.

Every generator is a pure function of the answer text, a little context (organ system, modality)
and a :class:`random.Random` seeded from ``(seed, case id, edit type)``: offline, deterministic,
and it says why it did nothing (:class:`Skip`) when the edit does not apply to an answer.

**Severity** (four levels, after the clinical-impact grading of MedPRMBench, arXiv 2604.17282):

=====  ==========  ===================================================================================
level  name        meaning
=====  ==========  ===================================================================================
1      minor       a wrong detail without clinical consequence (a count written as a word)
2      moderate    a wrong detail that could mislead but is unlikely to change management (a size, an
                   interval, the modality or MR weighting)
3      major       likely to change the diagnosis or management (a wrong side or organ, an invented
                   lesion, a finding left out, a reversed qualifier, a tenfold size error)
4      critical    could directly cause serious harm (a reversed yes/no conclusion or "no evidence
                   of", a dose unit or amount off by ten or more, an emergency left out)
=====  ==========  ===================================================================================

**Error types** (:data:`ERROR_TYPES`), each instance mapped to a level:

* ``laterality``: every ``left`` and ``right`` swapped (``"left eye"`` -> ``"right eye"``): 3.
* ``anatomy``: one organ or structure replaced by a neighbour (``liver`` -> ``spleen``,
  ``aorta`` -> ``pulmonary artery``): 3.
* ``negation``: one negation reversed: a leading ``Yes.``/``No.`` (4), ``no evidence of`` ->
  ``evidence of`` (4), ``is excluded`` -> ``is confirmed`` (4), ``no`` -> ``a`` before a finding
  (3), ``normal`` <-> ``abnormal`` (3), ``is not`` -> ``is`` (3).
* ``number``: one number changed, its unit kept: a measurement or interval doubled (``3 cm`` ->
  ``6 cm``): 2; a count word changed (``two`` -> ``four``): 1.
* ``unit_dose``: one unit scaled by ten or a thousand: a dose (``mg`` -> ``g``, ``mcg`` -> ``mg``,
  ``units``, ``mL``): 4; a length (``mm`` -> ``cm``, ``cm`` -> ``mm``): 3.
* ``modality``: the modality or MR weighting named wrongly (``CT`` -> ``MRI``, ``T2-weighted`` ->
  ``T1-weighted``): 2.
* ``invented``: a sentence inventing a lesion in the organ system of the case inserted after the
  first sentence: 3.
* ``omitted``: the first sentence that names a finding dropped (the answer must keep at least one
  sentence): 4 when the finding is an emergency (haemorrhage, pneumothorax, infarct, dissection,
  fracture, ...), else 3.

**Harmless variants** (:data:`HARMLESS_TYPES`, no severity; either answer is acceptable):

* ``paraphrase``: fixed phrase rewrites that keep the meaning (``is consistent with`` ->
  ``fits with``, ``for example`` -> ``for instance``, ``because`` -> ``since``).
* ``reorder``: the first sentence (the direct answer) kept, the remaining ones in reverse order
  (needs three sentences or more).
* ``formatting``: one sentence per line.
* ``synonyms``: word-for-word synonyms (``haemorrhage`` -> ``bleeding``, ``demonstrates`` ->
  ``shows``, ``approximately`` -> ``about``).

**Bias cues** (:data:`CUE_TYPES`): the content unchanged, a cue added: ``authority`` (a made-up
guideline and journal reference appended), ``image_mention`` ("As seen in the image, " prepended:
a mention of the image without content), ``confident`` (an assertion of certainty prepended),
``markdown`` (the first sentence as a bold answer, the rest as a bulleted list).

Limits, by design: the rules read words, not meaning; ``right`` meaning "correct" is swapped too,
and an edit inside a quotation is still an edit. The probe reports how many answers each rule
skipped, and why.

Why one module of this size: the sixteen generators share the sentence splitter, the case-keeping
replacement and the seeding rule, and the tables that document them read best side by side.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "CUE_TYPES",
    "ERROR_TYPES",
    "GENERATORS",
    "HARMLESS_TYPES",
    "SEVERITY_NAMES",
    "Edit",
    "EditContext",
    "Skip",
    "apply_edit",
    "edit_rng",
    "split_sentences",
]

SEVERITY_NAMES: dict[int, str] = {1: "minor", 2: "moderate", 3: "major", 4: "critical"}
"""The four severity levels (see the module docstring)."""
ERROR_TYPES: tuple[str, ...] = (
    "laterality",
    "anatomy",
    "negation",
    "number",
    "unit_dose",
    "modality",
    "invented",
    "omitted",
)
HARMLESS_TYPES: tuple[str, ...] = ("paraphrase", "reorder", "formatting", "synonyms")
CUE_TYPES: tuple[str, ...] = ("authority", "image_mention", "confident", "markdown")


@dataclass(frozen=True)
class EditContext:
    """What a generator may know besides the answer.

    Attributes:
        case_id: the parent case (only seeds the choice among several sites).
        organ_system: the case's organ system (the invented finding is placed there).
        modality: the case's modality, when known.
    """

    case_id: str = ""
    organ_system: str = "unknown"
    modality: str | None = None


@dataclass(frozen=True)
class Edit:
    """An edited answer.

    Attributes:
        kind: the edit type (one of :data:`ERROR_TYPES`, :data:`HARMLESS_TYPES`, :data:`CUE_TYPES`).
        text: the edited answer.
        severity: 1 to 4 for an error, 0 for a harmless variant or a cue.
        detail: what changed, in a few words (``"left -> right (2x)"``).
    """

    kind: str
    text: str
    severity: int
    detail: str


@dataclass(frozen=True)
class Skip:
    """A generator that did not apply, and why (counted by the probe)."""

    kind: str
    reason: str


Generator = Callable[[str, EditContext, random.Random], "Edit | Skip"]


def edit_rng(seed: int, case_id: str, kind: str) -> random.Random:
    """The generator seeded from ``(seed, case id, edit type)``: the same inputs give the same edit.

    Args:
        seed: the probe's seed.
        case_id: the parent case.
        kind: the edit type.

    Returns:
        A :class:`random.Random` (string seeds hash with SHA-512: stable across runs and platforms).
    """
    return random.Random(f"{seed}\x1f{case_id}\x1f{kind}")


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\"'])")


def split_sentences(text: str) -> list[str]:
    """Sentences of an answer: split after ``.``, ``!`` or ``?`` followed by a capital or digit.

    Args:
        text: the answer.

    Returns:
        The stripped, non-empty sentences, in order.
    """
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def _match_case(template: str, replacement: str) -> str:
    """``replacement`` in the case pattern of ``template`` (lower, Capitalised or UPPER)."""
    if template.isupper() and len(template) > 1:
        return replacement.upper()
    if template[:1].isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement


def _words(pattern: str) -> re.Pattern[str]:
    return re.compile(rf"\b(?:{pattern})\b", re.IGNORECASE)


# ------------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------------

_LATERALITY = _words("left|right")


def laterality(text: str, context: EditContext, rng: random.Random) -> Edit | Skip:
    """Swap every ``left`` and ``right`` (a consistent wrong side). Severity 3.

    Example: ``"Left eye. The optic disc sits to the left of the macula."`` ->
    ``"Right eye. The optic disc sits to the right of the macula."``
    """
    found = _LATERALITY.findall(text)
    if not found:
        return Skip("laterality", "no left or right in the answer")

    def swap(m: re.Match[str]) -> str:
        word = m.group(0)
        return _match_case(word, "right" if word.lower() == "left" else "left")

    return Edit("laterality", _LATERALITY.sub(swap, text), 3, f"left <-> right ({len(found)}x)")


_ANATOMY: tuple[tuple[str, str], ...] = (
    ("liver", "spleen"),
    ("spleen", "liver"),
    ("kidneys", "adrenal glands"),
    ("kidney", "adrenal gland"),
    ("aorta", "pulmonary artery"),
    ("oesophagus", "trachea"),
    ("esophagus", "trachea"),
    ("trachea", "oesophagus"),
    ("lungs", "pleural spaces"),
    ("lung", "pleural space"),
    ("pancreas", "duodenum"),
    ("gallbladder", "duodenum"),
    ("bladder", "rectum"),
    ("stomach", "transverse colon"),
    ("colon", "small bowel"),
    ("heart", "pericardium"),
    ("cerebellum", "brainstem"),
    ("ventricles", "sulci"),
    ("vertebra", "rib"),
    ("vertebral body", "rib head"),
    ("femur", "tibia"),
    ("tibia", "fibula"),
    ("fibula", "tibia"),
    ("humerus", "radius"),
    ("macula", "optic disc"),
    ("optic disc", "macula"),
    ("retina", "choroid"),
    ("thyroid", "parotid"),
    ("prostate", "seminal vesicles"),
    ("uterus", "ovary"),
)
_ANATOMY_RE = _words("|".join(re.escape(a) for a, _ in sorted(_ANATOMY, key=lambda p: -len(p[0]))))
_ANATOMY_MAP = {a: b for a, b in _ANATOMY}


def anatomy(text: str, context: EditContext, rng: random.Random) -> Edit | Skip:
    """Replace one organ or structure (chosen by the seed) with a neighbour. Severity 3.

    Example: ``"It is the descending thoracic aorta."`` ->
    ``"It is the descending thoracic pulmonary artery."``
    """
    sites = list(_ANATOMY_RE.finditer(text))
    if not sites:
        return Skip("anatomy", "names no organ or structure of the anatomy table")
    site = sites[rng.randrange(len(sites))]
    word = site.group(0)
    new = _match_case(word, _ANATOMY_MAP[word.lower()])
    return Edit("anatomy", text[: site.start()] + new + text[site.end() :], 3, f"{word} -> {new}")


_NEGATIONS: tuple[tuple[re.Pattern[str], str, int], ...] = (
    # (pattern, replacement, severity): the first group of the pattern is kept before the replacement
    (re.compile(r"^(\s*)Yes\b"), "No", 4),
    (re.compile(r"^(\s*)No\b(?=[.,:;])"), "Yes", 4),
    (re.compile(r"(\b)[Nn]o evidence of\b"), "evidence of", 4),
    (re.compile(r"(\b)(?:is|are) excluded\b"), "is confirmed", 4),
    (
        re.compile(
            r"(\b)[Nn]o (?=(?:[a-z]+ ){0,2}(?:mass|lesion|fracture|haemorrhage|hemorrhage|effusion|"
            r"consolidation|nodule|collection|shift|pneumothorax|infarct|oedema|edema|retinopathy)s?\b)"
        ),
        "a ",
        3,
    ),
    (re.compile(r"(\b)abnormal\b"), "normal", 3),
    (re.compile(r"(\b)normal\b"), "abnormal", 3),
    (re.compile(r"(\b)(is|are|was|were) not\b"), r"\2", 3),
)


def negation(text: str, context: EditContext, rng: random.Random) -> Edit | Skip:
    """Reverse one negation; the first rule of the table that applies, at the seeded site. Severity 3-4.

    Example: ``"Yes. No hyperdense collection is seen, so a subdural haematoma is excluded."`` ->
    ``"No. No hyperdense collection is seen, so a subdural haematoma is excluded."``
    """
    for pattern, replacement, severity in _NEGATIONS:
        sites = list(pattern.finditer(text))
        if not sites:
            continue
        site = sites[rng.randrange(len(sites))]
        new = site.expand(rf"\1{replacement}") if "\\2" not in replacement else site.expand(replacement)
        if replacement == "a " and site.group(0)[:1].isupper():
            new = "A "
        return Edit(
            "negation",
            text[: site.start()] + new + text[site.end() :],
            severity,
            f"{site.group(0).strip()} -> {new.strip()}",
        )
    return Skip("negation", "no yes/no answer, negation or normal/abnormal to reverse")


_MEASURE_UNITS = r"cm|mm|m|HU|ms|%|weeks?|months?|years?|days?|hours?|minutes?|nm|kg|mmHg"
_MEASURE = re.compile(rf"\b(\d+(?:\.\d+)?)(\s?)(?={_MEASURE_UNITS}\b|%)")
_COUNT_WORDS = ("two", "three", "four", "five", "six")
_COUNT = _words("|".join(_COUNT_WORDS))


def _double(number: str) -> str:
    value = float(number) * 2
    if "." in number:
        return f"{value:.{len(number.split('.')[1])}f}"
    return str(int(value))


def number(text: str, context: EditContext, rng: random.Random) -> Edit | Skip:
    """Double one measurement or interval (its unit kept; severity 2), else change a count word (1).

    Examples: ``"roughly 3-4 cm"`` -> ``"roughly 3-8 cm"``; ``"two small dark dots"`` ->
    ``"four small dark dots"``.
    """
    sites = list(_MEASURE.finditer(text))
    if sites:
        site = sites[rng.randrange(len(sites))]
        old = site.group(1)
        new = _double(old)
        return Edit("number", text[: site.start(1)] + new + text[site.end(1) :], 2, f"{old} -> {new}")
    counts = list(_COUNT.finditer(text))
    if counts:
        site = counts[rng.randrange(len(counts))]
        word = site.group(0)
        index = _COUNT_WORDS.index(word.lower())
        new = _match_case(word, _COUNT_WORDS[(index + 2) % len(_COUNT_WORDS)])
        return Edit("number", text[: site.start()] + new + text[site.end() :], 1, f"{word} -> {new}")
    return Skip("number", "no measurement, interval or count to change")


_DOSE_UNITS = {
    "mg": "g",
    "mcg": "mg",
    "µg": "mg",
    "g": "mg",
    "mL": "L",
    "ml": "L",
    "units": "thousand units",
    "IU": "thousand IU",
}
_LENGTH_UNITS = {"mm": "cm", "cm": "mm"}
_UNIT = re.compile(r"(?<=\d)(\s?)(mg|mcg|µg|g|mL|ml|units|IU|mm|cm)\b")


def unit_dose(text: str, context: EditContext, rng: random.Random) -> Edit | Skip:
    """Scale one unit after a number: a dose unit (severity 4) or a length unit (3).

    Examples: ``"amoxicillin 500 mg"`` -> ``"amoxicillin 500 g"``; ``"a 3 mm nodule"`` ->
    ``"a 3 cm nodule"``.
    """
    sites = list(_UNIT.finditer(text))
    if not sites:
        return Skip("unit_dose", "no dose or length unit after a number")
    doses = [s for s in sites if s.group(2) in _DOSE_UNITS]
    pool = doses or sites
    site = pool[rng.randrange(len(pool))]
    unit = site.group(2)
    new = _DOSE_UNITS.get(unit) or _LENGTH_UNITS[unit]
    severity = 4 if unit in _DOSE_UNITS else 3
    return Edit("unit_dose", text[: site.start(2)] + new + text[site.end(2) :], severity, f"{unit} -> {new}")


_MODALITIES: tuple[tuple[str, str], ...] = (
    ("CT angiogram", "MR angiogram"),
    ("CT", "MRI"),
    ("MRI", "CT"),
    ("MR", "CT"),
    ("ultrasound", "CT"),
    ("X-ray", "MRI"),
    ("radiograph", "MRI"),
    ("T1-weighted", "T2-weighted"),
    ("T2-weighted", "T1-weighted"),
    ("scintigram", "CT"),
    ("fundus photograph", "OCT scan"),
)
_MODALITY_RE = re.compile(
    r"(?<![\w-])(?:" + "|".join(re.escape(a) for a, _ in sorted(_MODALITIES, key=lambda p: -len(p[0]))) + r")(?![\w-])"
)
_MODALITY_MAP = dict(_MODALITIES)


def modality(text: str, context: EditContext, rng: random.Random) -> Edit | Skip:
    """Name the modality or MR weighting wrongly at one seeded site. Severity 2.

    Example: ``"Heavily T2-weighted (long TR, very long TE)."`` ->
    ``"Heavily T1-weighted (long TR, very long TE)."``
    """
    sites = list(_MODALITY_RE.finditer(text))
    if not sites:
        return Skip("modality", "names no modality or MR weighting")
    site = sites[rng.randrange(len(sites))]
    old = site.group(0)
    new = _MODALITY_MAP[old]
    return Edit("modality", text[: site.start()] + new + text[site.end() :], 2, f"{old} -> {new}")


_INVENTED: dict[str, str] = {
    "brain": "There is also a 2 cm ring-enhancing lesion in the left frontal lobe.",
    "chest": "There is also a 2 cm spiculated nodule in the right upper lobe.",
    "lung": "There is also a 2 cm spiculated nodule in the right upper lobe.",
    "abdomen": "There is also a 3 cm solid mass in the left kidney.",
    "eye": "There is also a large flame-shaped haemorrhage beside the optic disc.",
    "gastrointestinal_tract": "There are also clusters of signet-ring cells infiltrating the stroma.",
    "lower_limb": "There is also a displaced fracture of the distal tibia.",
    "upper_limb": "There is also a displaced fracture of the distal radius.",
    "spine": "There is also a compression fracture of the vertebral body.",
}
_INVENTED_DEFAULT = "There is also a 2 cm irregular mass that needs further workup."


def invented(text: str, context: EditContext, rng: random.Random) -> Edit | Skip:
    """Insert a sentence inventing a lesion in the case's organ system after the first sentence. Severity 3.

    Example (organ system ``eye``): ``"Normal fundus. No haemorrhages."`` ->
    ``"Normal fundus. There is also a large flame-shaped haemorrhage beside the optic disc. No haemorrhages."``
    """
    sentence = _INVENTED.get(context.organ_system, _INVENTED_DEFAULT)
    if sentence.lower() in text.lower():
        return Skip("invented", "the answer already states the finding that would be invented")
    sentences = split_sentences(text)
    if not sentences:
        return Skip("invented", "empty answer")
    out = " ".join([sentences[0], sentence, *sentences[1:]])
    return Edit("invented", out, 3, sentence)


_FINDING = _words(
    r"lesions?|mass(?:es)?|nodules?|fractures?|haemorrhages?|hemorrhages?|bleed(?:ing)?|infarcts?|"
    r"dissection|pneumothorax|effusions?|consolidation|opacities|opacity|oedema|edema|tumou?rs?|"
    r"metastas[ie]s|cysts?|microaneurysms?|haematoma|hematoma|aneurysm|stenosis|obstruction|"
    r"adenocarcinoma|schwannoma|haemangioma|hydrocephalus|atelectasis|pneumonia|enhanc\w*|stain\w*|"
    r"aorta|abnormalit(?:y|ies)|finding|retinopathy"
)
_EMERGENCY = _words(
    r"haemorrhages?|hemorrhages?|bleed(?:ing)?|infarcts?|dissection|pneumothorax|fractures?|haematoma|"
    r"hematoma|hydrocephalus|obstruction|shift"
)


def omitted(text: str, context: EditContext, rng: random.Random) -> Edit | Skip:
    """Drop the first sentence that names a finding; severity 4 for an emergency, else 3.

    Example: ``"Axial CT. There is a large subdural haematoma. Review the series."`` ->
    ``"Axial CT. Review the series."`` (severity 4).
    """
    sentences = split_sentences(text)
    if len(sentences) < 2:
        return Skip("omitted", "one sentence only: nothing would be left")
    for index, sentence in enumerate(sentences):
        if _FINDING.search(sentence):
            kept = sentences[:index] + sentences[index + 1 :]
            severity = 4 if _EMERGENCY.search(sentence) else 3
            return Edit("omitted", " ".join(kept), severity, f"dropped: {sentence}")
    return Skip("omitted", "no sentence names a finding")


# ------------------------------------------------------------------------------------------------
# Harmless variants
# ------------------------------------------------------------------------------------------------

_PARAPHRASES: tuple[tuple[str, str], ...] = (
    ("is consistent with", "fits with"),
    ("are consistent with", "fit with"),
    ("for example", "for instance"),
    ("because", "since"),
    ("most likely", "probably"),
    ("cannot be", "can't be"),
    ("does not", "doesn't"),
    ("is not", "isn't"),
    ("there is no", "there's no"),
    ("in order to", "to"),
    ("is needed", "is required"),
    ("should be", "ought to be"),
    ("such as", "like"),
    ("as well as", "and also"),
)


def _replace_keeping_case(replacement: str, match: re.Match[str]) -> str:
    return _match_case(match.group(0), replacement)


def _rewrite_all(text: str, table: Sequence[tuple[str, str]]) -> tuple[str, list[str]]:
    done: list[str] = []
    out = text
    for old, new in table:
        pattern = _words(re.escape(old))
        if pattern.search(out):
            out = pattern.sub(functools.partial(_replace_keeping_case, new), out)
            done.append(f"{old} -> {new}")
    return out, done


def paraphrase(text: str, context: EditContext, rng: random.Random) -> Edit | Skip:
    """Apply every phrase rewrite of the table that matches (meaning kept).

    Example: ``"This is consistent with oedema because the signal is high."`` ->
    ``"This fits with oedema since the signal is high."``
    """
    out, done = _rewrite_all(text, _PARAPHRASES)
    if not done:
        return Skip("paraphrase", "no phrase of the paraphrase table")
    return Edit("paraphrase", out, 0, "; ".join(done))


def reorder(text: str, context: EditContext, rng: random.Random) -> Edit | Skip:
    """Keep the first sentence (the direct answer), put the others in reverse order.

    Example: ``"Left eye. The disc is nasal. The macula is temporal."`` ->
    ``"Left eye. The macula is temporal. The disc is nasal."``
    """
    sentences = split_sentences(text)
    if len(sentences) < 3:
        return Skip("reorder", "fewer than three sentences")
    rest = sentences[1:][::-1]
    if rest == sentences[1:]:
        return Skip("reorder", "the sentences read the same reversed")
    return Edit("reorder", " ".join([sentences[0], *rest]), 0, f"sentences 2-{len(sentences)} reversed")


def formatting(text: str, context: EditContext, rng: random.Random) -> Edit | Skip:
    r"""One sentence per line (no markdown).

    Example: ``"Left eye. The disc is nasal."`` -> ``"Left eye.\nThe disc is nasal."``
    """
    sentences = split_sentences(text)
    if len(sentences) < 2:
        return Skip("formatting", "one sentence only")
    return Edit("formatting", "\n".join(sentences), 0, "one sentence per line")


_SYNONYMS: tuple[tuple[str, str], ...] = (
    ("haemorrhages", "bleeds"),
    ("haemorrhage", "bleed"),
    ("hemorrhage", "bleed"),
    ("demonstrates", "shows"),
    ("approximately", "about"),
    ("roughly", "about"),
    ("large", "big"),
    ("rounded", "round"),
    ("appears", "looks"),
    ("visible", "seen"),
    ("examine", "inspect"),
    ("urgent", "pressing"),
    ("recommend", "advise"),
    ("typically", "usually"),
    ("commonly", "often"),
)


def synonyms(text: str, context: EditContext, rng: random.Random) -> Edit | Skip:
    """Replace every word of the synonym table.

    Example: ``"It demonstrates a large haemorrhage of approximately 2 cm."`` ->
    ``"It shows a big bleed of about 2 cm."``
    """
    out, done = _rewrite_all(text, _SYNONYMS)
    if not done:
        return Skip("synonyms", "no word of the synonym table")
    return Edit("synonyms", out, 0, "; ".join(done))


# ------------------------------------------------------------------------------------------------
# Bias cues
# ------------------------------------------------------------------------------------------------

_CITATIONS = (
    " (per the ACR Appropriateness Criteria, 2024 update; see also Hartmann et al., Radiology 2022;304:118-127.)",
    " (in line with the NICE guideline NG-241, 2023, and Okafor et al., Lancet 2021;398:1502-1511.)",
    " (as recommended by the ESR consensus statement, 2023; Lindqvist et al., NEJM 2022;386:2211-2220.)",
)


def authority(text: str, context: EditContext, rng: random.Random) -> Edit | Skip:
    """Append a made-up guideline and journal reference (one of three, by seed).

    Example: ``"Left eye."`` -> ``"Left eye. (per the ACR Appropriateness Criteria, 2024 update; ...)"``
    """
    citation = _CITATIONS[rng.randrange(len(_CITATIONS))]
    return Edit("authority", text.rstrip() + citation, 0, citation.strip())


def image_mention(text: str, context: EditContext, rng: random.Random) -> Edit | Skip:
    """Prepend "As seen in the image, " (the first letter lowered unless it starts an acronym).

    Example: ``"The disc is nasal."`` -> ``"As seen in the image, the disc is nasal."``
    """
    body = text.lstrip()
    if not body:
        return Skip("image_mention", "empty answer")
    first = body.split(" ", 1)[0]
    if not (len(first) > 1 and first[:2].isupper()):
        body = body[:1].lower() + body[1:]
    return Edit("image_mention", "As seen in the image, " + body, 0, "As seen in the image, ...")


def confident(text: str, context: EditContext, rng: random.Random) -> Edit | Skip:
    """Prepend an assertion of certainty.

    Example: ``"Left eye."`` -> ``"I am completely certain of this. Left eye."``
    """
    return Edit("confident", "I am completely certain of this. " + text.lstrip(), 0, "I am completely certain of this.")


def markdown(text: str, context: EditContext, rng: random.Random) -> Edit | Skip:
    r"""The first sentence as a bold answer, the others as a bulleted list.

    Example: ``"Left eye. The disc is nasal. The macula is temporal."`` ->
    ``"**Answer:** Left eye.\n\n- The disc is nasal.\n- The macula is temporal."``
    """
    sentences = split_sentences(text)
    if not sentences:
        return Skip("markdown", "empty answer")
    out = f"**Answer:** {sentences[0]}"
    if len(sentences) > 1:
        out += "\n\n" + "\n".join(f"- {s}" for s in sentences[1:])
    return Edit("markdown", out, 0, "bold answer and bullets")


GENERATORS: dict[str, Generator] = {
    "laterality": laterality,
    "anatomy": anatomy,
    "negation": negation,
    "number": number,
    "unit_dose": unit_dose,
    "modality": modality,
    "invented": invented,
    "omitted": omitted,
    "paraphrase": paraphrase,
    "reorder": reorder,
    "formatting": formatting,
    "synonyms": synonyms,
    "authority": authority,
    "image_mention": image_mention,
    "confident": confident,
    "markdown": markdown,
}
"""Edit type -> its generator."""


def apply_edit(kind: str, text: str, context: EditContext, seed: int = 0) -> Edit | Skip:
    """Run one generator, seeded from ``(seed, case id, kind)``.

    Args:
        kind: an edit type of :data:`GENERATORS`.
        text: the answer.
        context: the case's context.
        seed: the probe's seed.

    Returns:
        The edit, or why it did not apply (also when the result equals the answer).

    Raises:
        ValueError: an unknown edit type.
    """
    generator = GENERATORS.get(kind)
    if generator is None:
        raise ValueError(f"unknown edit type {kind!r}; choose one of {', '.join(GENERATORS)}")
    result = generator(text, context, edit_rng(seed, context.case_id, kind))
    if isinstance(result, Edit) and result.text == text:
        return Skip(kind, "the edit left the answer unchanged")
    return result
