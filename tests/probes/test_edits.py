"""Every generator of probes/edits, type by type, on fixed inputs with the exact expected output."""

from __future__ import annotations

import pytest

from medrewardbench.probes.edits import (
    CUE_TYPES,
    ERROR_TYPES,
    GENERATORS,
    HARMLESS_TYPES,
    Edit,
    EditContext,
    Skip,
    apply_edit,
    split_sentences,
)

EYE = EditContext("c1", "eye", "fundus_photography")

# (type, input, expected text, expected severity)
EXPECTED = [
    (
        "laterality",
        "Left eye. The optic disc sits to the left of the macula, not the right.",
        "Right eye. The optic disc sits to the right of the macula, not the left.",
        3,
    ),
    ("anatomy", "It is the descending thoracic aorta.", "It is the descending thoracic pulmonary artery.", 3),
    (
        "negation",
        "Yes. No hyperdense collection is seen, so a subdural haematoma is excluded.",
        "No. No hyperdense collection is seen, so a subdural haematoma is excluded.",
        4,
    ),
    ("negation", "There is no evidence of a fracture.", "There is evidence of a fracture.", 4),
    ("negation", "There is no mass in the liver.", "There is a mass in the liver.", 3),
    ("negation", "The liver is not enlarged.", "The liver is enlarged.", 3),
    ("number", "The lesion measures 3.5 cm.", "The lesion measures 7.0 cm.", 2),
    ("number", "Two small dark dots.", "Four small dark dots.", 1),
    ("unit_dose", "Give amoxicillin 500 mg three times daily.", "Give amoxicillin 500 g three times daily.", 4),
    ("unit_dose", "A 3 mm nodule.", "A 3 cm nodule.", 3),
    ("modality", "Heavily T2-weighted (long TR, very long TE).", "Heavily T1-weighted (long TR, very long TE).", 2),
    ("modality", "This axial CT shows the spine.", "This axial MRI shows the spine.", 2),
    (
        "invented",
        "Normal fundus. No exudates.",
        "Normal fundus. There is also a large flame-shaped haemorrhage beside the optic disc. No exudates.",
        3,
    ),
    (
        "omitted",
        "Axial CT of the head. There is a large subdural haematoma. Review the full series.",
        "Axial CT of the head. Review the full series.",
        4,
    ),
    ("omitted", "The scan is blurred. There is a cyst in the liver.", "The scan is blurred.", 3),
    (
        "paraphrase",
        "This is consistent with oedema because the signal is high.",
        "This fits with oedema since the signal is high.",
        0,
    ),
    (
        "reorder",
        "Left eye. The disc is nasal. The macula is temporal.",
        "Left eye. The macula is temporal. The disc is nasal.",
        0,
    ),
    ("formatting", "Left eye. The disc is nasal.", "Left eye.\nThe disc is nasal.", 0),
    (
        "synonyms",
        "It demonstrates a large haemorrhage of approximately 2 cm.",
        "It shows a big bleed of about 2 cm.",
        0,
    ),
    ("image_mention", "The disc is nasal.", "As seen in the image, the disc is nasal.", 0),
    ("image_mention", "CT shows a mass.", "As seen in the image, CT shows a mass.", 0),
    ("confident", "Left eye.", "I am completely certain of this. Left eye.", 0),
    (
        "markdown",
        "Left eye. The disc is nasal. The macula is temporal.",
        "**Answer:** Left eye.\n\n- The disc is nasal.\n- The macula is temporal.",
        0,
    ),
]

SKIPS = [
    ("laterality", "The optic disc is normal.", "no left or right in the answer"),
    ("anatomy", "The image is blurred.", "names no organ or structure of the anatomy table"),
    ("negation", "It is a cyst.", "no yes/no answer, negation or normal/abnormal to reverse"),
    ("number", "It is a cyst.", "no measurement, interval or count to change"),
    ("unit_dose", "Give amoxicillin.", "no dose or length unit after a number"),
    ("modality", "It is a cyst.", "names no modality or MR weighting"),
    (
        "invented",
        "Fine. There is also a large flame-shaped haemorrhage beside the optic disc.",
        "the answer already states the finding that would be invented",
    ),
    ("omitted", "There is a cyst.", "one sentence only: nothing would be left"),
    ("omitted", "It is blurred. Ask again.", "no sentence names a finding"),
    ("paraphrase", "It is a cyst.", "no phrase of the paraphrase table"),
    ("reorder", "Left eye. The disc is nasal.", "fewer than three sentences"),
    ("formatting", "Left eye.", "one sentence only"),
    ("synonyms", "It is a cyst.", "no word of the synonym table"),
    ("image_mention", "   ", "empty answer"),
]


def test_every_type_has_an_exact_example_and_a_documented_skip() -> None:
    covered = {kind for kind, *_ in EXPECTED}
    assert set(GENERATORS) == {*ERROR_TYPES, *HARMLESS_TYPES, *CUE_TYPES}
    assert set(GENERATORS) - covered == {"authority"}  # its citation is drawn: tested below
    for kind in (*ERROR_TYPES, *HARMLESS_TYPES):
        assert kind in {k for k, *_ in SKIPS}, kind


@pytest.mark.parametrize(("kind", "text", "expected", "severity"), EXPECTED)
def test_each_generator_gives_the_exact_edit(kind: str, text: str, expected: str, severity: int) -> None:
    result = apply_edit(kind, text, EYE, seed=0)
    assert isinstance(result, Edit), result
    assert result.text == expected
    assert result.severity == severity
    assert result.kind == kind and result.detail


@pytest.mark.parametrize(("kind", "text", "reason"), SKIPS)
def test_a_generator_that_does_not_apply_says_why(kind: str, text: str, reason: str) -> None:
    assert apply_edit(kind, text, EYE) == Skip(kind, reason)


def test_the_authority_cue_appends_one_of_three_made_up_references_chosen_by_the_seed() -> None:
    made = {apply_edit("authority", "Left eye.", EditContext(f"c{i}"), seed=0).text for i in range(30)}  # type: ignore[union-attr]
    assert len(made) == 3
    assert all(t.startswith("Left eye. (") and t.endswith(".)") for t in made)


def test_edits_are_deterministic_given_the_seed_and_the_site_follows_it() -> None:
    text = "The liver and the spleen and the kidney are normal."
    first = [apply_edit("anatomy", text, EditContext(f"case-{i}"), seed=3) for i in range(20)]
    again = [apply_edit("anatomy", text, EditContext(f"case-{i}"), seed=3) for i in range(20)]
    assert first == again
    assert len({r.text for r in first if isinstance(r, Edit)}) == 3  # every site gets chosen somewhere


def test_an_unknown_type_is_refused_and_an_edit_that_changes_nothing_is_a_skip() -> None:
    with pytest.raises(ValueError, match="unknown edit type 'colour'"):
        apply_edit("colour", "x", EYE)
    assert apply_edit("number", "It is 0 cm.", EYE) == Skip("number", "the edit left the answer unchanged")


def test_sentences_split_after_a_full_stop_before_a_capital_or_digit() -> None:
    assert split_sentences("Yes. The aorta, e.g. here, is 3.5 cm. 2 lesions!  Done?") == [
        "Yes.",
        "The aorta, e.g. here, is 3.5 cm.",
        "2 lesions!",
        "Done?",
    ]
