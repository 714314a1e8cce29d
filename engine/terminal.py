r"""Text that is safe to print on a terminal: control and escape characters made visible.

Card names, chat titles, file names, JSON keys and message text come from files a user
downloaded. Printed raw, an ESC sequence retitles or clears the terminal, a carriage return
overwrites the line, and a newline inside a JSON key starts a second, attacker-written
``loomscope: …`` line. Every CLI line built from such text goes through :func:`visible`
(one line) or :func:`visible_text` (keeps line breaks and tabs), and every rich table cell
through :func:`markup_safe`.

Made visible (as Python-style escapes, ``\\x1b``, ``\\n``, ``\\u202e``): C0 and C1 control
characters and DEL (Unicode category ``Cc``), the line and paragraph separators U+2028/U+2029,
and the bidirectional embedding, override and isolate controls U+202A–U+202E and
U+2066–U+2069 (which reorder what follows them on screen, "Trojan Source"). A backslash
itself is left alone, so ordinary text prints unchanged; other format characters (the
zero-width joiner inside emoji sequences, soft hyphens) are kept.
"""

from __future__ import annotations

import re

_BIDI = "\u202a-\u202e\u2066-\u2069"
#: Everything :func:`visible` escapes.
_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f\u2028\u2029{_BIDI}]")
#: Everything :func:`visible_text` escapes (line feed and tab stay).
_UNSAFE_TEXT = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029{_BIDI}]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group(0)
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: object) -> str:
    r"""``str(text)`` on one line with control, escape and bidi characters written as escapes.

    ``"Mira\\x1b]0;owned\\x07"`` → ``"Mira\\\\x1b]0;owned\\\\x07"``; ``"a\\nb"`` → ``"a\\\\nb"``.
    """
    s = text if isinstance(text, str) else str(text)
    return _UNSAFE.sub(_escape, s)


def visible_text(text: object) -> str:
    """Like :func:`visible` but keeps line feeds and tabs (for multi-line text such as a reply)."""
    s = text if isinstance(text, str) else str(text)
    return _UNSAFE_TEXT.sub(_escape, s)


def markup_safe(text: object) -> str:
    """:func:`visible`, then escaped for rich markup (``[sigh]`` stays text, not a style)."""
    from rich.markup import escape

    return escape(visible(text))
