"""Prompt templates rendered into chat messages with an image part and a text part.

A template is a text file with a ``### system`` section and a ``### user`` section. Placeholders are
written ``{{name}}`` so that literal JSON braces in the instructions need no escaping. Required:
``{{question}}``, ``{{response_a}}``, ``{{response_b}}``. The rendered structure is the same for
every backend::

    [{"role": "system", "content": [{"type": "text", "text": ...}]},
     {"role": "user", "content": [{"type": "image", "image": ImageRef}, {"type": "text", "text": ...}]}]

Backends convert the image part themselves (a data URL for APIs, a PIL image for local models).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import MedRewardBenchError

REQUIRED_PLACEHOLDERS: tuple[str, ...] = ("question", "response_a", "response_b")
KNOWN_PLACEHOLDERS: tuple[str, ...] = (*REQUIRED_PLACEHOLDERS, "dimensions")
BUILTIN_TEMPLATES: tuple[str, ...] = ("pairwise", "pairwise-cot")
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_]+)\s*\}\}")
_SECTION = re.compile(r"^###\s*(system|user)\s*$", re.MULTILINE | re.IGNORECASE)


class TemplateError(MedRewardBenchError, ValueError):
    """A template file is missing, malformed or lacks a required placeholder."""


@dataclass(frozen=True)
class PromptTemplate:
    """A parsed template. ``sha256`` of the file text enters the run fingerprint."""

    name: str
    system: str
    user: str
    source_text: str

    @property
    def sha256(self) -> str:
        """A SHA-256 of the template file's text (enters judge fingerprints)."""
        return hashlib.sha256(self.source_text.encode("utf-8")).hexdigest()

    def static_chunks(self) -> tuple[str, ...]:
        """The fixed text of the template (system section and the user text between placeholders).

        Judges pass these, with the question and both responses, to the parser as quoted passages:
        together they cover an echoed prompt, and unlike the rendered prompt they repeat across
        requests, so the parser's per-passage work is cached.
        """
        pieces = [self.system, *_PLACEHOLDER.split(self.user)[::2]]
        return tuple(p.strip() for p in pieces if p.strip())

    def render_user_text(self, question: str, response_a: str, response_b: str) -> str:
        """The user text with every placeholder replaced, in a single pass (responses stay as written).

        Args:
            question: the question.
            response_a: the response shown as A.
            response_b: the response shown as B.

        Returns:
            The rendered user text.
        """
        values = {
            "question": question,
            "response_a": response_a,
            "response_b": response_b,
            "dimensions": ", ".join(DIMENSIONS),
        }
        # a single pass, so text inside a response that looks like a placeholder stays as written
        return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), self.user)

    def render_messages(
        self, question: str, response_a: str, response_b: str, image: Any | None
    ) -> list[dict[str, Any]]:
        """Chat messages for one comparison; ``image`` goes first in the user turn when given."""
        user_content: list[dict[str, Any]] = []
        if image is not None:
            user_content.append({"type": "image", "image": image})
        user_content.append({"type": "text", "text": self.render_user_text(question, response_a, response_b)})
        messages: list[dict[str, Any]] = []
        if self.system.strip():
            messages.append({"role": "system", "content": [{"type": "text", "text": self.system}]})
        messages.append({"role": "user", "content": user_content})
        return messages


def _sections(text: str, name: str) -> tuple[str, str]:
    """The system and user sections of a template (a file without sections is all user text).

    Raises:
        TemplateError: the file has sections but no ``### user`` one.
    """
    parts = _SECTION.split(text)
    sections: dict[str, str] = {}
    # parts = [preamble, name1, body1, name2, body2, ...]
    for index in range(1, len(parts) - 1, 2):
        sections[parts[index].lower()] = parts[index + 1].strip("\n")
    if "user" not in sections:
        if _SECTION.search(text) is None:
            return "", text.strip("\n")
        raise TemplateError(f"template {name}: has no '### user' section")
    return sections.get("system", ""), sections["user"]


def _check_placeholders(user: str, name: str, required: tuple[str, ...], known: tuple[str, ...]) -> None:
    found = set(_PLACEHOLDER.findall(user))
    missing = [p for p in required if p not in found]
    if missing:
        raise TemplateError(
            f"template {name}: the user section lacks the placeholder(s) " + ", ".join("{{" + m + "}}" for m in missing)
        )
    unknown = sorted(found - set(known))
    if unknown:
        raise TemplateError(
            f"template {name}: unknown placeholder(s) "
            + ", ".join("{{" + u + "}}" for u in unknown)
            + f"; known: {', '.join(known)}"
        )


def parse_template(text: str, name: str = "<template>") -> PromptTemplate:
    """Parse and validate template text.

    Raises:
        TemplateError: naming the template and the missing placeholder or section.
    """
    system, user = _sections(text, name)
    _check_placeholders(user, name, REQUIRED_PLACEHOLDERS, KNOWN_PLACEHOLDERS)
    return PromptTemplate(name=name, system=system, user=user, source_text=text)


def load_template(name_or_path: str) -> PromptTemplate:
    """Load a shipped template by name (``pairwise``, ``pairwise-cot``) or a user's file by path."""
    if name_or_path in BUILTIN_TEMPLATES:
        text = resources.files("medrewardbench").joinpath(f"templates/{name_or_path}.txt").read_text("utf-8")
        return parse_template(text, name_or_path)
    path = Path(name_or_path)
    if not path.is_file():
        raise TemplateError(
            f"template {name_or_path!r} is neither a shipped template ({', '.join(BUILTIN_TEMPLATES)}) "
            "nor an existing file"
        )
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TemplateError(f"template {path}: cannot be read: {exc}") from exc
    return parse_template(text, str(path))


def verdict_json_schema() -> dict[str, Any]:
    """The JSON schema of a judge's answer, for servers that support structured output."""
    properties: dict[str, Any] = {d: {"type": "string", "enum": ["A", "B"]} for d in DIMENSIONS}
    properties["reason"] = {"type": "string"}
    return {
        "type": "object",
        "properties": properties,
        "required": [*DIMENSIONS, "reason"],
        "additionalProperties": False,
    }


# ------------------------------------------------------------------------ templates of other tasks


@dataclass(frozen=True)
class TextTemplate:
    """A template of another task than pairwise judging (answering a question, grading an answer).

    Same file format as :class:`PromptTemplate` (``### system`` / ``### user``, ``{{name}}``
    placeholders), with the placeholders of its task. ``sha256`` of the file text enters the
    fingerprint of whatever uses it.
    """

    name: str
    system: str
    user: str
    source_text: str

    @property
    def sha256(self) -> str:
        """A SHA-256 of the template file's text (enters generator fingerprints)."""
        return hashlib.sha256(self.source_text.encode("utf-8")).hexdigest()

    def static_chunks(self) -> tuple[str, ...]:
        """The fixed text of the template (system section and the user text between placeholders)."""
        pieces = [self.system, *_PLACEHOLDER.split(self.user)[::2]]
        return tuple(p.strip() for p in pieces if p.strip())

    def render_user_text(self, values: Mapping[str, str]) -> str:
        """The user text with every placeholder replaced, in a single pass (values stay as written).

        Args:
            values: placeholder -> text; a placeholder without a value is left as written.

        Returns:
            The text.
        """
        return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), self.user)

    def render_messages(self, values: Mapping[str, str], image: Any | None) -> list[dict[str, Any]]:
        """Chat messages in the shape :meth:`PromptTemplate.render_messages` gives; the image goes first.

        Args:
            values: placeholder -> text.
            image: the image part's content (an ImageRef, a PIL image), or None for no image part.

        Returns:
            A system message (when the template has one) and the user message.
        """
        user_content: list[dict[str, Any]] = []
        if image is not None:
            user_content.append({"type": "image", "image": image})
        user_content.append({"type": "text", "text": self.render_user_text(values)})
        messages: list[dict[str, Any]] = []
        if self.system.strip():
            messages.append({"role": "system", "content": [{"type": "text", "text": self.system}]})
        messages.append({"role": "user", "content": user_content})
        return messages


def load_text_template(
    name_or_path: str, *, builtins: tuple[str, ...], required: tuple[str, ...], known: tuple[str, ...]
) -> TextTemplate:
    """Load a shipped template of another task by name, or a user's file by path, and check it.

    Args:
        name_or_path: a name in ``builtins`` (the file ``templates/NAME.txt`` of the package) or a path.
        builtins: the shipped names this task accepts.
        required: placeholders the user section must hold.
        known: every placeholder the task fills in.

    Returns:
        The template.

    Raises:
        TemplateError: the file is missing or unreadable, or lacks a required placeholder, or has
            an unknown one.
    """
    if name_or_path in builtins:
        text = resources.files("medrewardbench").joinpath(f"templates/{name_or_path}.txt").read_text("utf-8")
        name = name_or_path
    else:
        path = Path(name_or_path)
        if not path.is_file():
            raise TemplateError(
                f"template {name_or_path!r} is neither a shipped template ({', '.join(builtins)}) nor an existing file"
            )
        try:
            text = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TemplateError(f"template {path}: cannot be read: {exc}") from exc
        name = str(path)
    system, user = _sections(text, name)
    _check_placeholders(user, name, required, known)
    return TextTemplate(name=name, system=system, user=user, source_text=text)
