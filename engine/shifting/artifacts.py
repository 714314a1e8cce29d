r"""Verbatim artifacts in message text: what a summary of old history must keep exactly.

SPEC §4, seed 003 and issue 28 item 1: a summary of old history keeps these verbatim;
``summarize`` prefers sentences holding them, ``compact`` checks the model's summary for each
and re-attaches the ones it dropped (``engine.compaction.summarizer``). Detection is by regular
expressions (no model). The kinds, found wherever they sit in a message (whole lines or inside
prose, list items, quotes and test-runner or log output):

=============  =====================================================================================
kind           what (examples)
=============  =====================================================================================
``code``       fenced blocks, ```` ``` ```` or ``~~~``, with or without a language
``trace``      a Python traceback (``Traceback (most recent call last):`` through its last line, the
               exception) or a JavaScript/Java error line followed by ``at f (file:line)`` frames
``error``      a line naming an error (``KeyError: 'id'``, ``Error: ENOENT …``, ``error[E0382]: …``,
               ``fatal: …``, ``panic: …``); a test runner's failure line, whole *and* its exception
               (``FAILED tests/t.py::test_x - AssertionError: assert 1 == 2`` gives the line and
               ``AssertionError: assert 1 == 2``); an exception inside another line, from its name to
               the end of the line; a bare exception name in prose (``a KeyError``)
``log``        a log line with a level near its start (``2024-05-01 12:00:01 ERROR db: refused``,
               ``[WARN] disk 91% full``, ``level=error msg=…``, ``{"level":"error",…}``,
               ``npm ERR! code ENOENT``): the whole line
``path``       POSIX absolute or home paths (``/home/u/x.py``, ``~/x``), Windows paths
               (``C:\\x\\y.txt``), relative paths with a directory and an extension
               (``apps/api/mapper.py``), bare file names with a known extension (``mapper.py``) and
               dot files (``.env``), each with an optional test node id (``tests/t.py::test_x``)
               and ``:line`` or ``:line:column`` (``mapper.py:42``)
``span``       a backticked span in prose (`` `user.save()` ``); checked by its inside
``identifier`` a dotted or ``::`` name (``np.linalg.norm``, ``user.profile.save()``,
               ``Vec::with_capacity(8)``) or a call of a
               snake_case / camelCase name or with empty parentheses (``getUserById(42)``,
               ``load_config()``, ``main()``)
``setting``    ``NAME=value`` with an upper-case, dotted, dashed or snake_case name, or a
               ``--flag=value`` (``MAX_RETRIES=5``, ``retry_delay=2``, ``--workers=4``)
``url``        ``http(s)://``, ``ftp://``, ``ws(s)://`` addresses (trailing punctuation left out)
``id``         ticket ids (``PROJ-123``), issue numbers (``#1234``), UUIDs, git hashes (7–40 hex
               characters with a digit and a letter), versions (``4.2.1``, ``v1.0.0-rc.1``)
``quantity``   a number with a unit (``30 s``, ``120ms``, ``512 MiB``, ``2.5 GB``, ``85 %``,
               ``4 days``, ``$40``): the values a conversation decides on
=============  =====================================================================================

Artifacts are returned in text order, each text once. Inside a code block or trace nothing else
is returned (the block carries it) unless ``nested`` is asked; outside them, an artifact that
overlaps one found earlier in the table's order (a path inside a log line, a name inside a
backticked span) is not returned again.
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
    r"(?m)^[ \t>*-]*(?:"
    r"(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Warning)(?::[^\n]*|$)"  # KeyError: 'id'
    r"|(?:error|Error|ERROR|fatal|FATAL|panic|E)(?:\[[A-Z]?\d+\])?: [^\n]+"  # error: ..., E: ...
    r")")
#: A test runner's failure line (pytest ``FAILED tests/t.py::test_x - KeyError: 'id'``, unittest ``FAIL: test_x``).
_RUNNER_LINE = re.compile(r"(?m)^[ \t]*(?:FAILED|FAIL:|ERROR:?|✗|✕)[ \t]+\S[^\n]*")
_LEVELS = r"ERROR|FATAL|CRITICAL|SEVERE|WARN|WARNING"
_LOG_LINE = re.compile(
    rf"(?m)^(?=[^\n]{{0,60}}?(?:\[(?:{_LEVELS})\]|(?<![\w-])(?:{_LEVELS}|ERR!)(?=[\s:\]|])"
    r"|level=(?:error|fatal|warn(?:ing)?)\b|\"level\":\s*\"(?:error|fatal|critical|warn(?:ing)?)\"))"
    r"[^\n]*\S[^\n]*")
_ERROR_IN_LINE = re.compile(
    r"(?<![\w.])(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Warning)\b(?::[ \t]*[^\n]*)?")
_URL = re.compile(r"\b(?:https?|ftp|wss?)://[^\s<>\"'`\])]+")
_SPAN = re.compile(r"(?<!`)`([^`\n]{2,200})`(?!`)")
_EXT = (r"(?:py|pyi|ipynb|js|mjs|cjs|ts|tsx|jsx|rs|go|java|kt|c|h|cc|cpp|hpp|cs|rb|php|swift|scala|lua|sh|bash|zsh|"
        r"ps1|bat|sql|json|jsonl|yaml|yml|toml|ini|cfg|conf|env|lock|xml|html|htm|css|scss|md|rst|txt|csv|tsv|log|"
        r"proto|gradle|vue|svelte|dart|ex|exs|erl|hs|ml|r|jl|pl|tf|dockerfile|png|jpg|svg|pdf|db|sqlite)")
_PATH = re.compile(
    r"(?<![\w:/.~@-])"  # not inside a word or a URL (https://host/...)
    r"(?:"
    r"~?/(?:[\w.@+-]+/)*[\w.@+-]*[\w@+-]"  # /abs/path or ~/path
    r"|[A-Za-z]:\\(?:[\w .@+-]+\\)*[\w.@+-]+"  # C:\path\file
    r"|(?:\.{1,2}/)?(?:[\w@+-][\w.@+-]*/)+[\w@+-][\w.@+-]*\.[A-Za-z][\w]{0,7}"  # rel/dir/file.ext
    rf"|[\w-][\w.-]*\.{_EXT}(?![\w(])"  # mapper.py
    r"|\.(?:env|gitignore|dockerignore|npmrc|bashrc|zshrc|profile|editorconfig)(?:\.[\w-]+)?"  # .env
    r")(?:::[\w\[\]./-]+)*(?::\d+(?::\d+)?)?(?![\w/])")
_SETTING = re.compile(r"(?<![\w=-])(?:--)?[A-Za-z_][\w.-]*=[^\s,;'\"`)\]}]+")
_IDENT = re.compile(
    r"(?<![\w.@/:-])[A-Za-z_]\w*(?:::[A-Za-z_]\w*)+(?:\([^()\n]{0,60}\))?"  # Type::method, maybe called
    r"|(?<![\w.@/:-])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:\([^()\n]{0,60}\))?"  # dotted, maybe called
    r"|(?<![\w.@/:-])[A-Za-z_]\w*\([^()\n]{0,60}\)")  # called
_ID = re.compile(
    r"(?<![\w-])(?:[A-Z][A-Z0-9]{1,9}-\d+"  # PROJ-123
    r"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"  # UUID
    r"|(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}"  # git hash
    r")(?![\w-])|(?<![\w&])#\d{2,}\b"
    r"|(?<![\w.])v?\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?(?:\+[0-9A-Za-z.]+)?(?![\w.])")  # versions: 4.2.1
_UNITS = (r"ms|µs|us|ns|sec|secs|seconds?|mins?|minutes?|hrs?|hours?|days?|weeks?|months?|years?|"
          r"[KMGTP]i?B|kB|bytes?|px|pt|em|rem|dpi|tokens?|req/s|rps|rpm|qps|fps|Hz|kHz|MHz|GHz|"
          r"°C|°F|kg|mg|km|cm|mm|MB/s|GB/s|Mbps|Gbps|USD|EUR|GBP|cores?|threads?|workers?|retries|times")
_QUANTITY = re.compile(
    rf"(?<![\w.$])\d+(?:[.,]\d+)?(?:[ \t]?(?:{_UNITS}|[smh])(?![\w/])|[dg](?![\w/])|[ \t]?%)"
    r"|(?<![\w$])[$€£]\d+(?:[.,]\d+)?(?![\w.])")
_TRAIL = ".,;:!?"


@dataclass(frozen=True)
class Artifact:
    """One verbatim artifact: its kind, exact text and start offset.

    ``kind`` is one of the module docstring's kinds; ``text`` is exactly as written (a span
    with its backticks); ``start`` is the offset (characters) in the text it came from.
    """

    kind: str
    text: str
    start: int

    @property
    def core(self) -> str:
        """What a summary must contain for this artifact to be present (a span: its inside)."""
        if self.kind == "span" and len(self.text) > 2:
            return self.text[1:-1]
        return self.text


#: The kinds, in the order overlaps are settled (an earlier kind wins).
KINDS = ("code", "trace", "error", "log", "url", "span", "path", "setting", "identifier", "id", "quantity")


def _path_ok(text: str) -> bool:
    # a lone "/" or "/n" (a fraction, "and/or") is not worth keeping; a path has a directory
    # part and a name, or an extension
    body = re.sub(r"(?::\d+)+$", "", text.lstrip("~"))
    if body.count("/") + body.count("\\") < 2 and "." not in body.rsplit("/", 1)[-1]:
        return False
    return len(body) >= 4


def _ident_ok(text: str) -> bool:
    name = text.split("(", 1)[0]
    if "::" in name:
        return len(name) >= 5
    parts = name.split(".")
    if len(parts) > 1:
        if re.fullmatch(rf"[\w.-]+\.{_EXT}", name, flags=re.I) and "(" not in text:
            return False  # a file name: the path kind has it
        return sum(len(p) for p in parts) >= 4 and all(len(p) >= 1 for p in parts) and max(map(len, parts)) >= 3
    called_empty = text.endswith("()")
    return len(name) >= 3 and (called_empty or "_" in name.strip("_") or bool(re.search(r"[a-z][A-Z]", name)))


def _setting_ok(text: str) -> bool:
    name, _, value = text.partition("=")
    if not value:
        return False
    bare = name.lstrip("-")
    return name.startswith("--") or bare.isupper() or any(c in bare for c in "_.-")


_LINE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("error", _RUNNER_LINE), ("error", _ERROR_LINE), ("log", _LOG_LINE), ("url", _URL), ("span", _SPAN), ("error", _ERROR_IN_LINE),
    ("path", _PATH), ("setting", _SETTING), ("identifier", _IDENT), ("id", _ID), ("quantity", _QUANTITY))
_CHECKS = {"path": _path_ok, "identifier": _ident_ok, "setting": _setting_ok}


def _clean(kind: str, value: str) -> str:
    value = value.strip()
    if kind in ("url", "setting", "path"):
        value = value.rstrip(_TRAIL)
    return value


def find_artifacts(text: str, *, nested: bool = False) -> list[Artifact]:
    """All artifacts in ``text``, in text order, each text once (see the module docstring).

    With ``nested``, the artifacts inside code blocks and traces are returned too (callers that
    cannot afford a whole trace keep its parts: its paths and its last line).
    """
    if not text:
        return []
    found: list[Artifact] = []
    blocks: list[tuple[int, int]] = []
    taken: list[tuple[int, int]] = []

    def inside(a: int, b: int, spans: list[tuple[int, int]]) -> bool:
        return any(s <= a and b <= e for s, e in spans)

    def overlaps(a: int, b: int) -> bool:
        return any(a < e and s < b for s, e in taken)

    for kind, pattern in (("code", _FENCE), ("trace", _PY_TRACE), ("trace", _JS_TRACE)):
        for m in pattern.finditer(text):
            if inside(m.start(), m.end(), blocks):
                continue
            found.append(Artifact(kind, m.group(0).strip("\n"), m.start()))
            blocks.append((m.start(), m.end()))
    for kind, pattern in _LINE_PATTERNS:
        for m in pattern.finditer(text):
            value = _clean(kind, m.group(0))
            start = m.start() + (len(m.group(0)) - len(m.group(0).lstrip()))
            end = start + len(value)
            if not value or (not nested and inside(m.start(), m.end(), blocks)) or overlaps(start, end):
                continue
            check = _CHECKS.get(kind)
            if check is not None and not check(value):
                continue
            found.append(Artifact(kind, value, start))
            taken.append((start, end))
    for art in [a for a in found if a.kind == "error" and _RUNNER_LINE.match(a.text)]:
        # a test runner's line also names its exception on its own (a summary may quote just that)
        inner = _ERROR_IN_LINE.search(art.text, 1)
        if inner is not None and inner.group(0).strip() != art.text:
            found.append(Artifact("error", inner.group(0).strip(), art.start + inner.start()))
    if nested:  # a trace's last line, the exception, is worth keeping on its own
        for art in [a for a in found if a.kind == "trace"]:
            last = art.text.rstrip().rsplit("\n", 1)[-1].strip()
            if last and last != art.text.strip():
                found.append(Artifact("error", last, art.start + art.text.rfind(last)))
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
    """The artifacts whose text (a span: its inside) is not in ``summary`` (whitespace runs compared as one space)."""
    flat = _squash(summary)
    return [a for a in artifacts if _squash(a.core) not in flat]
