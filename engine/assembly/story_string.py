r"""SillyTavern's story string: a context template rendered as Handlebars 4 does (issue 26).

SillyTavern 1.12.6 ``power-user.js`` ``renderStoryString`` compiles ``power_user.context.story_string``
with ``Handlebars.compile(story_string, {noEscape: true})`` and renders it over the card fields,
with two helpers of its own (``macros.js``): ``trim`` renders as the text ``{{trim}}`` (left for
the macro pass) and ``helperMissing`` renders any unknown mustache ``{{name}}`` as the macro
``{{name}}``. Then ``substituteParams`` runs, leading newlines are dropped and a newline is added
when the text does not end with one (unless instruct mode is on without ``wrap``).

No maintained Python Handlebars exists on PyPI (``pybars3`` had its last release in 2019), so this is a
small, documented renderer of the subset SillyTavern's context templates use, with Handlebars'
own rules for it:

* ``{{name}}``, ``{{{name}}}``, ``{{&name}}``: the parameter's text, unescaped (``noEscape``);
  an unknown name renders as ``{{name}}`` (``helperMissing``), ``{{trim}}`` as ``{{trim}}``;
  ``{{name arg ...}}`` (a helper call SillyTavern does not define) also as ``{{name}}``.
* ``{{#if name}}...{{else}}...{{/if}}`` and ``{{#unless name}}``: Handlebars' truthiness (an empty
  string, ``false``, ``0``, ``None`` and an empty list are falsy).
* ``{{! comment }}`` / ``{{!-- comment --}}``; ``~`` whitespace control; ``\{{`` for a literal
  mustache; "standalone" block and comment tags (alone on their line) take their line's
  indentation and line break with them, as Handlebars' ``WhitespaceControl`` does.

A template Handlebars would reject (an unclosed or mismatched block, ``{{`` without ``}}``, an
``{{else}}`` outside a block) raises :class:`StoryStringError` naming the place (line and column);
constructs outside the subset (``{{#each}}``, partials, paths like ``{{a.b}}``, ``{{else if}}``)
raise it too, saying Loomscope does not render them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_TAG = re.compile(r"(\\)?\{\{(~?)(\{?)(.*?)(\}?)(~?)\}\}", re.DOTALL)
_COMMENT_LONG = re.compile(r"\{\{(~?)!--(.*?)--(~?)\}\}", re.DOTALL)
_ID = re.compile(r"^[A-Za-z_$][\w$-]*$")


class StoryStringError(ValueError):
    """A story string that cannot be rendered: ``message`` says what, ``line``/``column`` where (1-based)."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(f"{message} (line {line}, column {column})")
        self.line, self.column, self.problem = line, column, message


@dataclass
class _Content:
    """A ``ContentStatement``: ``original`` as written (the standalone tests read it), ``value`` as stripped."""

    original: str
    value: str
    right_stripped: bool = False
    left_stripped: bool = False


@dataclass
class _Mustache:
    name: str
    open_strip: bool = False  # {{~
    close_strip: bool = False  # ~}}
    comment: bool = False


@dataclass
class _Block:
    kind: str  # if / unless
    name: str
    program: list[Any] = field(default_factory=list)
    inverse: list[Any] | None = None
    open_tag: tuple[bool, bool] = (False, False)  # ({{~#if, ~}})
    inverse_tag: tuple[bool, bool] = (False, False)
    close_tag: tuple[bool, bool] = (False, False)
    start: int = 0


def _place(template: str, pos: int) -> tuple[int, int]:
    line = template.count("\n", 0, pos) + 1
    col = pos - (template.rfind("\n", 0, pos) + 1) + 1
    return line, col


@dataclass
class _Token:
    kind: str  # text, open, else, close, var, comment
    start: int
    text: str = ""
    name: str = ""
    strip_left: bool = False
    strip_right: bool = False


def _tokenize(template: str) -> list[_Token]:
    """Text and tags in order (long comments first, then ``{{...}}`` tags)."""
    tokens: list[_Token] = []
    pos = 0
    while pos < len(template):
        long_c = _COMMENT_LONG.search(template, pos)
        tag = _TAG.search(template, pos)
        m = long_c if long_c is not None and (tag is None or long_c.start() <= tag.start()) else tag
        if m is None:
            if "{{" in template[pos:]:
                line, col = _place(template, template.index("{{", pos))
                raise StoryStringError("'{{' is never closed by '}}'", line, col)
            tokens.append(_Token("text", pos, template[pos:]))
            break
        if m.start() > pos:
            tokens.append(_Token("text", pos, template[pos:m.start()]))
        tokens.append(_classify(m, template, m is long_c))
        pos = m.end()
    return tokens


def _classify(m: re.Match[str], template: str, long_comment: bool) -> _Token:
    """One ``{{...}}`` tag as a token."""
    start = m.start()
    if long_comment:
        return _Token("comment", start, strip_left=m.group(1) == "~", strip_right=m.group(3) == "~")
    escaped, tl, brace_open, body, brace_close, tr = m.groups()
    if escaped:
        return _Token("text", start, m.group(0)[1:])
    line, col = _place(template, start)
    if bool(brace_open) != bool(brace_close):
        raise StoryStringError("'{{{' and '}}}' do not match", line, col)
    body = body.strip()
    sl, sr = tl == "~", tr == "~"
    if body.startswith("!"):
        return _Token("comment", start, strip_left=sl, strip_right=sr)
    if body.startswith("#"):
        parts = body[1:].split()
        if len(parts) != 2 or parts[0] not in ("if", "unless"):
            raise StoryStringError(f"'{{{{{body}}}}}': only {{{{#if name}}}} and {{{{#unless name}}}} blocks are "
                                   "rendered by Loomscope", line, col)
        _check_id(parts[1], line, col)
        return _Token("open", start, text=parts[0], name=parts[1], strip_left=sl, strip_right=sr)
    if body.startswith("/"):
        return _Token("close", start, text=body[1:].strip(), strip_left=sl, strip_right=sr)
    if body == "else" or body == "^":
        return _Token("else", start, strip_left=sl, strip_right=sr)
    if body.startswith((">", "^", "else ")):
        raise StoryStringError(f"'{{{{{body}}}}}' is not rendered by Loomscope (partials, inverse and "
                               "'else if' blocks are outside SillyTavern's templates)", line, col)
    if body.startswith("&"):
        body = body[1:].strip()
    words = body.split()
    if not words:
        raise StoryStringError("an empty '{{}}' tag", line, col)
    _check_id(words[0], line, col)
    return _Token("var", start, name=words[0], strip_left=sl, strip_right=sr)


def _check_id(name: str, line: int, col: int) -> None:
    if not _ID.match(name):
        raise StoryStringError(f"'{name}': only plain names are rendered by Loomscope (no paths or literals)",
                               line, col)


def parse(template: str) -> list[Any]:
    """The template as Handlebars' program tree, whitespace control and standalone lines applied.

    Raises
    ------
    StoryStringError
        A template Handlebars rejects, or one outside the rendered subset (see the module docstring).
    """
    root: list[Any] = []
    stack: list[tuple[_Block, bool]] = []  # open blocks, and whether in their {{else}} part
    for t in _tokenize(template):
        target = root if not stack else (stack[-1][0].inverse if stack[-1][1] else stack[-1][0].program)
        assert target is not None
        if t.kind == "text":
            target.append(_Content(t.text, t.text))
        elif t.kind in ("var", "comment"):
            target.append(_Mustache(t.name, t.strip_left, t.strip_right, comment=t.kind == "comment"))
        elif t.kind == "open":
            block = _Block(t.text, t.name, open_tag=(t.strip_left, t.strip_right), start=t.start)
            target.append(block)
            stack.append((block, False))
        elif t.kind == "else":
            if not stack or stack[-1][1]:
                raise StoryStringError("'{{else}}' outside an {{#if}} block", *_place(template, t.start))
            stack[-1][0].inverse, stack[-1][0].inverse_tag = [], (t.strip_left, t.strip_right)
            stack[-1] = (stack[-1][0], True)
        else:
            if not stack:
                raise StoryStringError(f"'{{{{/{t.text}}}}}' closes no block", *_place(template, t.start))
            block, _ = stack.pop()
            if t.text != block.kind:
                raise StoryStringError(f"'{{{{#{block.kind} {block.name}}}}}' is closed by '{{{{/{t.text}}}}}'",
                                       *_place(template, t.start))
            block.close_tag = (t.strip_left, t.strip_right)
    if stack:
        block = stack[-1][0]
        raise StoryStringError(f"'{{{{#{block.kind} {block.name}}}}}' is never closed", *_place(template, block.start))
    _program(root, is_root=True)
    return root


# --- Handlebars 4 WhitespaceControl (compiler/whitespace-control.js), over the tree ---------------

# (JavaScript's ``$`` without the m flag is Python's ``\\Z``: Python's ``$`` also matches before a final newline)
def _prev_ws(body: list[Any], i: int | None, is_root: bool) -> bool:
    i = len(body) if i is None else i
    prev = body[i - 1] if i - 1 >= 0 else None
    sibling = body[i - 2] if i - 2 >= 0 else None
    if prev is None:
        return is_root
    if isinstance(prev, _Content):
        pattern = r"\r?\n\s*?\Z" if (sibling is not None or not is_root) else r"(^|\r?\n)\s*?\Z"
        return re.search(pattern, prev.original) is not None
    return False


def _next_ws(body: list[Any], i: int | None, is_root: bool) -> bool:
    i = -1 if i is None else i
    nxt = body[i + 1] if i + 1 < len(body) else None
    sibling = body[i + 2] if i + 2 < len(body) else None
    if nxt is None:
        return is_root
    if isinstance(nxt, _Content):
        pattern = r"^\s*?\r?\n" if (sibling is not None or not is_root) else r"^\s*?(\r?\n|$)"
        return re.search(pattern, nxt.original) is not None
    return False


def _omit_right(body: list[Any], i: int | None, multiple: bool = False) -> None:
    k = 0 if i is None else i + 1
    cur = body[k] if 0 <= k < len(body) else None
    if not isinstance(cur, _Content) or (not multiple and cur.right_stripped):
        return
    before = cur.value
    cur.value = re.sub(r"^\s+" if multiple else r"^[ \t]*\r?\n?", "", cur.value, count=1)
    cur.right_stripped = cur.value != before


def _omit_left(body: list[Any], i: int | None, multiple: bool = False) -> bool:
    k = len(body) - 1 if i is None else i - 1
    cur = body[k] if 0 <= k < len(body) else None
    if not isinstance(cur, _Content) or (not multiple and cur.left_stripped):
        return False
    before = cur.value
    cur.value = re.sub(r"\s+\Z" if multiple else r"[ \t]+\Z", "", cur.value, count=1)
    cur.left_stripped = cur.value != before
    return cur.left_stripped


def _program(body: list[Any], is_root: bool) -> None:
    """``WhitespaceControl.prototype.Program``."""
    for i, cur in enumerate(body):
        strip = _statement(cur)
        if strip is None:
            continue
        prev_ws, next_ws = _prev_ws(body, i, is_root), _next_ws(body, i, is_root)
        if strip["close"]:
            _omit_right(body, i, True)
        if strip["open"]:
            _omit_left(body, i, True)
        if strip.get("inline") and prev_ws and next_ws:
            _omit_right(body, i)
            _omit_left(body, i)
        if strip.get("open_standalone") and prev_ws:
            assert isinstance(cur, _Block)
            _omit_right(cur.program if cur.program is not None else cur.inverse or [], None)
            _omit_left(body, i)
        if strip.get("close_standalone") and next_ws:
            assert isinstance(cur, _Block)
            _omit_right(body, i)
            _omit_left(cur.inverse if cur.inverse is not None else cur.program, None)


def _statement(cur: Any) -> dict[str, bool] | None:
    if isinstance(cur, _Content):
        return None
    if isinstance(cur, _Mustache):
        return {"open": cur.open_strip, "close": cur.close_strip, "inline": cur.comment}
    return _block(cur)


def _block(block: _Block) -> dict[str, bool]:
    """``WhitespaceControl.prototype.BlockStatement``."""
    _program(block.program, is_root=False)
    if block.inverse is not None:
        _program(block.inverse, is_root=False)
    program, inverse = block.program, block.inverse
    strip = {"open": block.open_tag[0], "close": block.close_tag[1],
             "open_standalone": _next_ws(program, None, False),
             "close_standalone": _prev_ws(inverse if inverse is not None else program, None, False)}
    if block.open_tag[1]:
        _omit_right(program, None, True)
    if inverse is not None:
        if block.inverse_tag[0]:
            _omit_left(program, None, True)
        if block.inverse_tag[1]:
            _omit_right(inverse, None, True)
        if block.close_tag[0]:
            _omit_left(inverse, None, True)
        if _prev_ws(program, None, False) and _next_ws(inverse, None, False):
            _omit_left(program, None)
            _omit_right(inverse, None)
    elif block.close_tag[0]:
        _omit_left(program, None, True)
    return strip


def _truthy(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return len(value) > 0
    return bool(value)


def _render_nodes(nodes: list[Any], params: Mapping[str, Any], out: list[str]) -> None:
    for n in nodes:
        if isinstance(n, _Content):
            out.append(n.value)
        elif isinstance(n, _Mustache):
            if n.comment:
                continue
            if n.name == "trim":
                out.append("{{trim}}")  # SillyTavern's registered 'trim' helper (macros.js)
            elif n.name in params and params[n.name] is not None:
                out.append(_js_string(params[n.name]))
            else:
                out.append("{{" + n.name + "}}")  # helperMissing: left as a macro
        else:
            cond = _truthy(params.get(n.name))
            if n.kind == "unless":
                cond = not cond
            _render_nodes(n.program if cond else (n.inverse or []), params, out)


def _js_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def render_handlebars(template: str, params: Mapping[str, Any]) -> str:
    """``Handlebars.compile(template, {noEscape: true})(params)`` with SillyTavern's helpers.

    Raises
    ------
    StoryStringError
        See :func:`parse`.
    """
    out: list[str] = []
    _render_nodes(parse(template), params, out)
    return "".join(out)


__all__ = ["StoryStringError", "parse", "render_handlebars"]
