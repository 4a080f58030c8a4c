"""Text from data made safe to show on a terminal.

Data sets, stored runs and endpoints are untrusted: a case id, a file name, a metadata value or a
failure reason could carry escape sequences that recolour, hide or rewrite what a terminal shows.
Everything the command line prints that came from data goes through :func:`terminal_safe`.
"""

from __future__ import annotations

_ESCAPED = {
    **{code: f"\\x{code:02x}" for code in range(0x20)},
    0x7F: "\\x7f",
    **{code: f"\\x{code:02x}" for code in range(0x80, 0xA0)},
    # line and paragraph separators, and the bidirectional controls that reorder what is shown
    **{code: f"\\u{code:04x}" for code in (0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A))},
}
_ESCAPED[0x09] = "\t"
_TABLE_KEEP_NEWLINES = {**_ESCAPED, 0x0A: "\n"}


def terminal_safe(text: str, keep_newlines: bool = True) -> str:
    r"""Replace control characters by visible escapes (``ESC`` becomes the four characters ``\x1b``).

    C0 and C1 control characters, DEL, line/paragraph separators and bidirectional formatting
    characters are escaped; tabs are kept, and newlines too unless ``keep_newlines`` is False.
    Rich markup is a separate matter: escape it as well where text is printed with markup.

    Args:
        text: any text.
        keep_newlines: keep ``\n`` (multi-line messages); False escapes it (one-line records).

    Returns:
        The text, unchanged when it holds nothing to escape.
    """
    return text.translate(_TABLE_KEEP_NEWLINES if keep_newlines else _ESCAPED)
