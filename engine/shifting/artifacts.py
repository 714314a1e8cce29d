r"""Verbatim artifacts in message text: code blocks, file paths, error lines and stack traces.

SPEC §4 (and seed 003): a summary of old history must keep these verbatim; ``summarize``
prefers sentences holding them, ``compact`` checks the model's summary for each and re-appends
the ones it dropped. Detection is by regular expressions (no model):

- ``code``: fenced blocks (```` ``` ```` or ``~~~``, with or without a language);
- ``trace``: a Python traceback (``Traceback (most recent call last):`` through its final
  exception line) or a run of JavaScript/Java ``at f (file:line)`` frames with the error line
  before them;
- ``error``: one line naming an exception or error (``KeyError: 'id'``, ``TypeError: ...``,
  ``Error: ENOENT ...``, ``error[E0382]: ...``, ``fatal: ...``, ``panic: ...``);
- ``path``: POSIX absolute or home paths (``/home/u/x.py``, ``~/x``), Windows paths
  (``C:\\x\\y.txt``) and relative paths with a directory and an extension (``apps/api/mapper.py``);
  URLs are not paths.

Artifacts are returned in text order, each once; a path or error line inside a code block or
trace found earlier is not returned again (the block already carries it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE = re.compile(r"(?ms)^[ \t]*(```|~~~)[^\n]*\n.*?^[ \t]*\1[ \t]*$")
_PY_TRACE = re.compile(
    r"(?m)^[ \t]*Traceback \(most recent call last\):[^\n]*\n"  # header
    r"(?:(?:[ \t]+[^\n]*|[ \t]*\^+[ \t]*)\n)*?"  # indented frame lines
    r"[ \t]*[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Iteration)\b[^\n]*")
_JS_TRACE = re.compile(
    r"(?m)^[^\n]*(?:Error|Exception)\b[^\n]*\n(?:[ \t]+at [^\n]+(?:\n|$))+")
_ERROR_LINE = re.compile(
    r"(?m)^[ \t>]*(?:"
    r"(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Warning)(?::[^\n]*|$)"  # KeyError: 'id'
    r"|(?:error|Error|ERROR|fatal|FATAL|panic|E)(?:\[[A-Z]?\d+\])?: [^\n]+"  # error: ..., E: ...
    r")")
_PATH = re.compile(
    r"(?<![\w:/.~-])"  # not inside a word or a URL (https://host/...)
    r"(?:"
    r"~?/(?:[\w.@+-]+/)*[\w.@+-]*[\w@+-]"  # /abs/path or ~/path
    r"|[A-Za-z]:\\(?:[\w .@+-]+\\)*[\w.@+-]+"  # C:\path\file
    r"|(?:\.{1,2}/)?(?:[\w@+-][\w.@+-]*/)+[\w@+-][\w.@+-]*\.[A-Za-z][\w]{0,7}"  # rel/dir/file.ext
    r")")


@dataclass(frozen=True)
class Artifact:
    """One verbatim artifact: its kind, exact text and start offset.

    ``kind`` is ``code``, ``trace``, ``error`` or ``path``; ``start`` is the offset (characters) in the text it came
    from.
    """

    kind: str
    text: str
    start: int


def _path_ok(text: str) -> bool:
    # a lone "/" or "/n" (a fraction, "and/or") is not worth keeping; a path has a directory
    # part and a name, or an extension
    body = text.lstrip("~")
    if body.count("/") + body.count("\\") < 2 and "." not in body.rsplit("/", 1)[-1]:
        return False
    return len(body) >= 4


def find_artifacts(text: str, *, nested: bool = False) -> list[Artifact]:
    """All artifacts in ``text``, in text order, each once (see the module docstring).

    With ``nested``, paths and error lines inside code blocks and traces are returned too
    (callers that cannot afford a whole trace keep its parts).
    """
    if not text:
        return []
    found: list[Artifact] = []
    spans: list[tuple[int, int]] = []

    def covered(a: int, b: int) -> bool:
        return any(s <= a and b <= e for s, e in spans)

    for kind, pattern in (("code", _FENCE), ("trace", _PY_TRACE), ("trace", _JS_TRACE)):
        for m in pattern.finditer(text):
            if covered(m.start(), m.end()):
                continue
            found.append(Artifact(kind, m.group(0).strip("\n"), m.start()))
            spans.append((m.start(), m.end()))
    for kind, pattern in (("error", _ERROR_LINE), ("path", _PATH)):
        for m in pattern.finditer(text):
            value = m.group(0).strip()
            if not value or (not nested and covered(m.start(), m.end())):
                continue
            if kind == "path" and not _path_ok(value):
                continue
            found.append(Artifact(kind, value, m.start()))
    found.sort(key=lambda a: a.start)
    seen: set[str] = set()
    out: list[Artifact] = []
    for a in found:
        if a.text not in seen:
            seen.add(a.text)
            out.append(a)
    return out


def _squash(text: str) -> str:
    return " ".join(text.split())


def missing_artifacts(artifacts: list[Artifact], summary: str) -> list[Artifact]:
    """The artifacts whose text is not in ``summary`` (whitespace runs compared as one space)."""
    flat = _squash(summary)
    return [a for a in artifacts if _squash(a.text) not in flat]
