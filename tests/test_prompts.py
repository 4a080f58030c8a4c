"""Prompt templates: shipped ones, user files validated up front, one message structure for all."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from medrewardbench.cases import ImageRef
from medrewardbench.cli import app
from medrewardbench.prompts import BUILTIN_TEMPLATES, TemplateError, load_template, parse_template


@pytest.mark.parametrize("name", BUILTIN_TEMPLATES)
def test_shipped_templates_render_an_image_part_then_the_text(name: str) -> None:
    template = load_template(name)
    image = ImageRef.builtin("skimage:retina")
    messages = template.render_messages("Is the optic disc normal?", "first answer", "second answer", image)
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert user[0] == {"type": "image", "image": image}
    text = user[1]["text"]
    assert text.index("Is the optic disc normal?") < text.index("first answer") < text.index("second answer")
    assert "[Answer A]\nfirst answer\n[End of Answer A]" in text
    for dim in ("accuracy", "relevance", "comprehensiveness", "creativity", "responsiveness", "overall"):
        assert f'"{dim}"' in text
    assert len(template.sha256) == 64


def test_templates_differ_and_their_hash_follows_the_text() -> None:
    assert load_template("pairwise").sha256 != load_template("pairwise-cot").sha256
    assert "last thing" in load_template("pairwise-cot").user


def test_placeholder_text_inside_a_response_is_not_expanded() -> None:
    text = load_template("pairwise").render_user_text("q", "I say {{response_b}} and {{question}}", "b")
    assert "I say {{response_b}} and {{question}}" in text


def test_static_chunks_cover_the_prompt_outside_the_placeholders() -> None:
    template = load_template("pairwise")
    rendered = template.render_user_text("QQQ", "AAA", "BBB")
    leftover = rendered
    for chunk in template.static_chunks():
        leftover = leftover.replace(chunk, "")
    assert sorted(leftover.split()) == ["AAA", "BBB", "QQQ"]


def test_a_user_template_file_is_validated(tmp_path: Path) -> None:
    good = tmp_path / "mine.txt"
    good.write_text(
        "### system\nBe brief.\n### user\nQ: {{question}}\nA: {{response_a}}\nB: {{response_b}}\n"
        'Answer {"overall": "A or B"}\n'
    )
    template = load_template(str(good))
    assert template.system == "Be brief." and template.name == str(good)
    assert template.render_user_text("q", "a", "b").startswith("Q: q\nA: a\nB: b")
    with pytest.raises(TemplateError, match=r"lacks the placeholder\(s\) \{\{response_b\}\}"):
        parse_template("### user\n{{question}} {{response_a}}\n", "x.txt")
    with pytest.raises(TemplateError, match=r"unknown placeholder\(s\) \{\{answer\}\}"):
        parse_template("### user\n{{question}} {{response_a}} {{response_b}} {{answer}}\n", "x.txt")
    with pytest.raises(TemplateError, match="neither a shipped template"):
        load_template(str(tmp_path / "missing.txt"))


def test_a_bad_template_fails_before_any_request(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("### user\nOnly {{question}} here\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        [
            "eval",
            "--judge",
            "api:never-called",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--template",
            str(bad),
            "--limit",
            "1",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 2
    assert "bad.txt" in result.output and "response_a" in result.output
    assert not (out / "judgments.jsonl").exists()
