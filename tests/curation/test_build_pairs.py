"""``build pairs``: two responses from different generators, seeded, duplicates skipped, length-balanced."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.curation import api_options, imported_project, project_store

from medrewardbench.curation.generators import load_answer_template
from medrewardbench.curation.labels import attach_labels
from medrewardbench.curation.pairs import is_duplicate, jaccard, sample_pairs, shingles
from medrewardbench.curation.pool import run_responses
from medrewardbench.curation.project import open_project
from medrewardbench.curation.store import BuildError
from medrewardbench.testing.openai_server import OpenAIServer, free_text_answer


def closed_rows(count: int) -> list[dict[str, Any]]:
    return [
        {"qid": f"q{i:02d}", "q": f"Is finding {i} present?", "ans": "yes" if i % 2 else "no", "img": "images/ct.png",
         "body": "chest" if i % 3 else "lung"}
        for i in range(count)
    ]  # fmt: skip


def pool(server: OpenAIServer, project: Path, specs: list[str]) -> None:
    with open_project(project) as store:
        run_responses(store, specs, options=api_options(server), template=load_answer_template())


def pairs(project: Path, out: Path, **options: Any):  # type: ignore[no-untyped-def]
    with open_project(project) as store:
        return sample_pairs(store, out, **options)


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_pairs_come_from_two_generators_and_say_which_wrote_which(answer_server: OpenAIServer, tmp_path: Path) -> None:
    project = imported_project(tmp_path, closed_rows(12))
    pool(answer_server, project, ["api:gen-a", "api:gen-b", "api:gen-c"])
    summary = pairs(project, tmp_path / "pairs.jsonl", seed=7)
    rows = read(tmp_path / "pairs.jsonl")
    assert summary.pairs == len(rows) == 12 and [r["id"] for r in rows] == [f"q{i:02d}" for i in range(12)]
    for row in rows:
        build = row["metadata"]["build"]
        first, second = build["response_1"]["generator"], build["response_2"]["generator"]
        assert first != second and {first, second} <= {"api:gen-a", "api:gen-b", "api:gen-c"}
        assert "labels" not in row and "annotations" not in row
        assert row["image"]["bytes"] and row["question_type"] == "closed" and build["reference_answer"] in ("yes", "no")
        # the response text is what that generator answered (the test server's answers are a function of the model)
        body = {"model": first.removeprefix("api:"), "messages": []}
        assert row["response_1"] and isinstance(free_text_answer(body), str)
    # presentation order is random per pair: each generator shows up as response_1 and as response_2
    firsts = {r["metadata"]["build"]["response_1"]["generator"] for r in rows}
    seconds = {r["metadata"]["build"]["response_2"]["generator"] for r in rows}
    assert len(firsts) >= 2 and len(seconds) >= 2
    assert sum(summary.generators.values()) == 24


def test_the_same_seed_gives_byte_identical_pairs_and_another_seed_does_not(
    answer_server: OpenAIServer, tmp_path: Path
) -> None:
    project = imported_project(tmp_path, closed_rows(16))
    pool(answer_server, project, ["api:gen-a", "api:gen-b", "api:gen-c"])
    pairs(project, tmp_path / "one.jsonl", seed=3)
    pairs(project, tmp_path / "two.jsonl", seed=3)
    pairs(project, tmp_path / "other.jsonl", seed=4)
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "two.jsonl").read_bytes()
    assert (tmp_path / "one.jsonl").read_bytes() != (tmp_path / "other.jsonl").read_bytes()
    # a second project built the same way gives the same bytes too
    other_root = tmp_path / "again"
    other_root.mkdir()
    twin = imported_project(other_root, closed_rows(16))
    pool(answer_server, twin, ["api:gen-a", "api:gen-b", "api:gen-c"])
    pairs(twin, tmp_path / "twin.jsonl", seed=3)
    assert (tmp_path / "twin.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()


LONG = (
    "There is a well-defined rounded opacity in the right upper zone measuring about two centimetres, "
    "with smooth margins and no cavitation, most consistent with a benign granuloma."
)


def duplicate_responder(body: dict[str, Any]) -> str:
    model = body["model"]
    if model in ("same-a", "same-b"):  # equal after normalisation: case, spacing, punctuation
        return "No.  There is NO effusion!" if model == "same-a" else "no there is no effusion"
    if model == "near":  # one word of 28 changed: word 3-shingle Jaccard about 0.83
        return LONG.replace("benign", "healed")
    if model == "long":
        return LONG
    return "Yes. A large effusion fills the left base."


def test_exact_and_near_duplicate_answers_never_form_a_pair(answer_server: OpenAIServer, tmp_path: Path) -> None:
    assert jaccard(shingles(LONG), shingles(LONG.replace("benign", "healed"))) >= 0.8
    assert is_duplicate("No.  There is NO effusion!", "no there is no effusion")
    assert not is_duplicate(LONG, "Yes. A large effusion fills the left base.")
    answer_server.control.set_responder(duplicate_responder)
    project = imported_project(tmp_path, closed_rows(6))
    pool(answer_server, project, ["api:same-a", "api:same-b", "api:near", "api:long", "api:other"])
    summary = pairs(project, tmp_path / "pairs.jsonl", seed=1, per_question=10)
    # 10 candidate pairs per question, 2 of them duplicates (same-a/same-b, near/long)
    assert summary.duplicates_skipped == 2 * 6 and summary.pairs == 8 * 6
    for row in read(tmp_path / "pairs.jsonl"):
        assert not is_duplicate(row["response_1"], row["response_2"])
        build = row["metadata"]["build"]
        assert {build["response_1"]["generator"], build["response_2"]["generator"]} not in (
            {"api:same-a", "api:same-b"},
            {"api:near", "api:long"},
        )
    ids = [r["id"] for r in read(tmp_path / "pairs.jsonl")]
    assert ids[:3] == ["q00#1", "q00#2", "q00#3"] and len(set(ids)) == len(ids)


def balance_responder(body: dict[str, Any]) -> str:
    """Right answers that are long, wrong answers that are short: "longer wins" by construction."""
    text = json.dumps(body["messages"])
    number = int(text.split("Is finding ")[1].split(" ")[0])
    right, wrong = ("Yes", "No") if number % 2 else ("No", "Yes")
    if body["model"] == "right-long":
        return f"{right}. " + LONG
    if body["model"] == "right-short":
        return f"{right}."
    if body["model"] == "wrong-long":
        return f"{wrong}. " + LONG + " Nothing else."
    return f"{wrong}, I think."


def test_the_length_balance_keeps_longer_wins_near_half_where_a_winner_is_predicted(
    answer_server: OpenAIServer, tmp_path: Path
) -> None:
    answer_server.control.set_responder(balance_responder)
    project = imported_project(tmp_path, closed_rows(40))
    pool(answer_server, project, ["api:right-long", "api:right-short", "api:wrong-long", "api:wrong-short"])
    plain = pairs(project, tmp_path / "plain.jsonl", seed=5)
    balanced = pairs(project, tmp_path / "balanced.jsonl", seed=5, length_balance=True)
    assert plain.pairs == balanced.pairs == 40 and plain.longer_share is None  # without balance nothing is counted
    # 4 of a question's 6 candidate pairs have a predicted winner, 3 of them the shorter answer
    assert abs(balanced.longer_predicted - balanced.shorter_predicted) <= 1 and balanced.longer_predicted >= 8
    # recount from the file: where exactly one answer is right, the right one is the longer about half the time
    longer = shorter = 0
    for row in read(tmp_path / "balanced.jsonl"):
        build = row["metadata"]["build"]
        right = [
            i for i, key in ((1, "response_1"), (2, "response_2")) if build[key]["generator"].startswith("api:right")
        ]
        if len(right) != 1:
            continue
        texts = (row["response_1"], row["response_2"])
        winner, loser = texts[right[0] - 1], texts[2 - right[0]]
        longer += len(winner) > len(loser)
        shorter += len(winner) < len(loser)
    assert (longer, shorter) == (balanced.longer_predicted, balanced.shorter_predicted)
    # the balance steers which predicted pair a question gets, not whether it gets one
    predicted_plain = sum(
        1
        for row in read(tmp_path / "plain.jsonl")
        if sum(row["metadata"]["build"][k]["generator"].startswith("api:right") for k in ("response_1", "response_2"))
        == 1
    )
    assert predicted_plain == longer + shorter


def test_pairs_need_two_generators_and_labelled_pairs_are_not_resampled_differently(
    answer_server: OpenAIServer, tmp_path: Path
) -> None:
    project = imported_project(tmp_path, closed_rows(4))
    pool(answer_server, project, ["api:gen-a"])
    with pytest.raises(BuildError, match="at least two"):
        pairs(project, tmp_path / "p.jsonl", seed=1)
    pool(answer_server, project, ["api:gen-b"])
    pairs(project, tmp_path / "p.jsonl", seed=1)
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"id": "q00", "annotator": "dr_a", "labels": {"overall": "A"}}) + "\n")
    with open_project(project) as store:
        attach_labels(store, labels)
    with pytest.raises(BuildError, match="would orphan them"):
        pairs(project, tmp_path / "p2.jsonl", seed=2)
    assert not (tmp_path / "p2.jsonl").exists()
    pairs(project, tmp_path / "p3.jsonl", seed=1)  # the same options give the same pairs: allowed
    assert (tmp_path / "p3.jsonl").read_bytes() == (tmp_path / "p.jsonl").read_bytes()
    with project_store(project) as store:
        assert store.count_labels() == 1 and store.orphan_labels() == 0
