"""The aiohttp backend's direct POST: the same body bytes and error messages as through ``openai``."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from medrewardbench.models.api.direct import encode_body, status_message


def _plain(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def _body(url: str, text: str = "Which answer is better?") -> dict[str, Any]:
    content = [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": text}]
    return {"model": "m", "messages": [{"role": "system", "content": "judge"}, {"role": "user", "content": content}]}


LONG_URL = "data:image/png;base64," + base64.b64encode(bytes(range(256)) * 40).decode("ascii")


@pytest.mark.parametrize(
    "body",
    [
        _body(LONG_URL),
        _body(LONG_URL, "quotes \" and \\ backslashes, é, \x00mrb-image-0\x00 and a marker's text"),
        _body(LONG_URL + "\x01"),  # not base64: encoded the usual way
        _body("data:image/png;base64,AAAA"),  # short: encoded the usual way
        _body(LONG_URL + '"'),  # a quote: escaped by the encoder
        _body(LONG_URL + "\\"),  # a backslash: escaped
        _body(LONG_URL + "\x7f"),  # DEL: not printable, left to the encoder (which keeps it)
        _body(LONG_URL + "\n"),  # a newline: escaped
        _body(LONG_URL + " not base64 but nothing to escape!"),  # spliced as it is, as json.dumps gives it
        _body(LONG_URL + "é"),  # not ASCII: left to the encoder
        {"model": "m", "messages": [{"role": "user", "content": "plain"}], "seed": 0, "temperature": 0.5},
        {  # two images, the marker of the second one's text before them
            "model": "m",
            "messages": [
                {"role": "system", "content": "\x00mrb-image-1\x00"},
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": LONG_URL, "detail": "high"}},
                        {"type": "image_url", "image_url": {"url": LONG_URL[:-4] + "AAAA"}},
                        {"type": "text", "text": "both"},
                    ],
                },
            ],
        },
        {  # two images, each spliced in its place
            "model": "m",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": LONG_URL}},
                        {"type": "text", "text": "between"},
                        {"type": "image_url", "image_url": {"url": LONG_URL[:-4] + "AAAA"}},
                    ],
                },
            ],
        },
    ],
)
def test_the_body_is_byte_for_byte_what_json_dumps_gives(body: dict[str, Any]) -> None:
    assert encode_body(body) == _plain(body)
    assert encode_body(body) == _plain(body)  # again, with the URLs' encodings remembered


def test_a_remembered_url_is_told_apart_from_an_equal_or_a_changed_one() -> None:
    url = LONG_URL
    assert encode_body(_body(url)) == _plain(_body(url))
    equal = "".join(["data:image/png;base64,", LONG_URL.partition(",")[2]])  # another object, same text
    assert equal is not url and encode_body(_body(equal)) == _plain(_body(equal))
    changed = url[:-4] + "\x01AAA"  # not base64: the encoder escapes it
    assert encode_body(_body(changed)) == _plain(_body(changed))


def test_a_url_the_image_module_made_is_spliced_without_scanning_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from PIL import Image

    from medrewardbench.cases import ImageRef
    from medrewardbench.models.api import direct
    from medrewardbench.models.api.images import DataUrl, passthrough_data_url, to_data_url

    buffer = io.BytesIO()
    Image.effect_noise((96, 96), 40).save(buffer, format="PNG")
    ref = ImageRef.from_bytes(buffer.getvalue(), "scan.png")
    made = [passthrough_data_url(ref), to_data_url(ref, compress_level=1), to_data_url(ref, "JPEG")]
    assert all(isinstance(url, DataUrl) and len(url) >= direct.SPLICE_MIN_CHARS for url in made)

    def scanned(url: str) -> bool:
        raise AssertionError(f"scanned a URL the image module made: {url[:40]}")

    monkeypatch.setattr(direct, "_check_splice", scanned)
    for url in made:
        assert encode_body(_body(url)) == _plain(_body(url))
    # a string made from one is a plain str again, and checked: the quote is escaped
    monkeypatch.undo()
    tampered = made[0] + '"'
    assert not isinstance(tampered, DataUrl) and encode_body(_body(tampered)) == _plain(_body(tampered))


def test_an_error_message_is_read_as_the_openai_client_reads_it() -> None:
    error = {"error": {"message": "Invalid request (injected).", "type": "invalid", "param": None}}
    assert status_message(400, json.dumps(error)) == "Invalid request (injected)."
    with_param = {"error": {"message": "bad", "param": "response_format"}}
    assert status_message(422, json.dumps(with_param)) == "bad (param: response_format)"
    assert status_message(503, "upstream down") == "Error code: 503"
    assert status_message(500, json.dumps({"detail": "x"})) == "Error code: 500"
