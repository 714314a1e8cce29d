"""What the *Prompt text* view shows, worked out without Qt (issue 26 item 4).

A Text Completion preview (``ContextPreview.api == "text_completion"``) is one string
(``ContextPreview.prompt``) whose blocks carry their character range (``PreviewBlock.span``);
the view shades each block's range. A Chat Completion preview is a list of messages: the view
lays them out one after another as plain text (:func:`chat_completion_text`) and says so.

:func:`shade_runs` is the one rule for what a paragraph of the view shows: which block owns each
character (nested spans: the innermost wins) and, with token boundaries on, which token.
:func:`header_text` names the mode, the instruct preset and the tokenizer, e.g. "Text Completion ·
Llama 3 Instruct · llama3 exact".
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise
from typing import Any

from engine.assembly.textcompletion import text_completion_title
from engine.errors import LoomscopeError
from engine.schema import ContextPreview, PreviewRequest
from engine.tokenizers.sillytavern_text import sillytavern_text_tokenizer

#: ``ContextPreview.api`` values.
TEXT_COMPLETION = "text_completion"
CHAT_COMPLETION = "chat_completion"

#: What the view says about a Chat Completion preview.
CHAT_NOTE = ("This chat is sent as Chat Completion: the request is a list of messages, not one string. "
             "They are shown here one after another; the server puts them into the model's chat template.")


@dataclass(frozen=True)
class Run:
    """A stretch ``[start, end)`` (code points) of the view's text with one look.

    ``owner`` is the index of the shaded range that owns it (into :attr:`Layout.owners`), or ``-1``
    for text no block owns (template sequences between blocks); ``token`` is the index of the token
    it belongs to (``-1``: token boundaries off, or no token covers it).
    """

    start: int
    end: int
    owner: int
    token: int


@dataclass(frozen=True)
class Layout:
    """The view's text and the ranges it shades.

    ``ranges`` are ``(start, end)`` in code points, sorted, never overlapping (nested block spans
    are flattened: the inner block owns its range, the outer one the rest); ``owners[i]`` is the
    block index (into ``ContextPreview.blocks``; ``-1`` for a Chat Completion message) of
    ``ranges[i]`` and ``kinds[i]`` its block kind (for the colour); ``shade[i]`` alternates 0/1 per
    block so that neighbours differ.
    """

    text: str
    ranges: list[tuple[int, int]]
    owners: list[int]
    kinds: list[str]
    shade: list[int]
    api: str = TEXT_COMPLETION

    @cached_property
    def ends(self) -> list[int]:
        """The ends of :attr:`ranges` (sorted), for bisecting."""
        return [e for _, e in self.ranges]


def _flatten(spans: Sequence[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """``(start, end, owner)`` spans, possibly nested, as disjoint runs; the innermost span wins."""
    events = sorted(spans, key=lambda s: (s[0], -s[1]))
    out: list[tuple[int, int, int]] = []
    stack: list[tuple[int, int, int]] = []  # open spans, outermost first
    pos = 0

    def emit_until(limit: int) -> None:
        nonlocal pos
        while stack and pos < limit:
            top = stack[-1]
            end = min(top[1], limit)
            if end > pos:
                out.append((pos, end, top[2]))
                pos = end
            if pos >= top[1]:
                stack.pop()
        pos = max(pos, limit)

    for start, end, owner in events:
        if end <= start:
            continue
        emit_until(start)
        stack.append((start, end, owner))
    emit_until(max((e for _, e, _ in events), default=0))
    return out


def text_completion_layout(preview: ContextPreview) -> Layout:
    """The layout of a Text Completion preview: its ``prompt``, each block's ``span`` shaded.

    Spans outside the string are clipped; blocks without a span (excluded, not in the string) are
    not shown.
    """
    text = preview.prompt or ""
    n = len(text)
    spans = []
    kinds: dict[int, str] = {}
    for i, b in enumerate(preview.blocks):
        if b.span is None:
            continue
        start, end = max(0, b.span[0]), min(n, b.span[1])
        if end > start:
            spans.append((start, end, i))
            kinds[i] = b.kind
    runs = _flatten(spans)
    shade: list[int] = []
    parity: dict[int, int] = {}
    for _, _, owner in runs:
        if owner not in parity:
            parity[owner] = len(parity) % 2
        shade.append(parity[owner])
    return Layout(text, [(s, e) for s, e, _ in runs], [o for _, _, o in runs], [kinds[o] for _, _, o in runs],
                  shade, TEXT_COMPLETION)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def chat_completion_layout(preview: ContextPreview) -> Layout:
    """A Chat Completion preview's ``messages`` as plain text: a ``── role (name) ──`` line, then
    the content, per message; each message's content is one shaded range (kind ``message``,
    ``system`` for system messages)."""
    parts: list[str] = []
    ranges: list[tuple[int, int]] = []
    kinds: list[str] = []
    pos = 0
    for msg in preview.messages:
        role = str(msg.get("role", ""))
        name = msg.get("name")
        head = f"── {role}{f' ({name})' if name else ''} ──\n"
        body = _content_text(msg.get("content"))
        if msg.get("tool_calls"):
            body += "".join(f"\n[tool call] {c.get('function', {}).get('name', '')}"
                            f"({c.get('function', {}).get('arguments', '')})" for c in msg["tool_calls"])
        parts += [head, body, "\n\n"]
        start = pos + len(head)
        if body:
            ranges.append((start, start + len(body)))
            kinds.append("system" if role == "system" else "tool_result" if role == "tool" else "message")
        pos = start + len(body) + 2
    return Layout("".join(parts), ranges, [-1] * len(ranges), kinds, [i % 2 for i in range(len(ranges))],
                  CHAT_COMPLETION)


def layout_of(preview: ContextPreview | None) -> Layout:
    """:func:`text_completion_layout` or :func:`chat_completion_layout` by ``preview.api``."""
    if preview is None:
        return Layout("", [], [], [], [], TEXT_COMPLETION)
    if preview.api == TEXT_COMPLETION:
        return text_completion_layout(preview)
    return chat_completion_layout(preview)


def shade_runs(layout: Layout, start: int, end: int, tokens: Sequence[tuple[int, int]] | None = None,
               token_ends: Sequence[int] | None = None) -> list[Run]:
    """The runs of ``[start, end)`` (code points): where a shaded range or a token begins or ends.

    Text no range owns and no token covers is left out. ``tokens`` are sorted token spans
    (``None``: boundaries off); ``token_ends`` their ends, when the caller keeps them.
    Costs O(log n + runs in the stretch), so a view shades only the paragraphs on screen.
    """
    cuts = {start, end}
    ranges = layout.ranges
    i = first_range = bisect.bisect_right(layout.ends, start)
    while i < len(ranges) and ranges[i][0] < end:
        cuts.update((max(start, ranges[i][0]), min(end, ranges[i][1])))
        i += 1
    last_range = i
    t_first = t_last = 0
    if tokens is not None:
        ends = token_ends if token_ends is not None else [e for _, e in tokens]
        t = t_first = bisect.bisect_right(ends, start)
        while t < len(tokens) and tokens[t][0] < end:
            cuts.update((max(start, tokens[t][0]), min(end, tokens[t][1])))
            t += 1
        t_last = t
    points = sorted(c for c in cuts if start <= c <= end)
    runs: list[Run] = []
    ri, ti = first_range, t_first
    for a, b in pairwise(points):
        while ri < last_range and ranges[ri][1] <= a:
            ri += 1
        owner = ri if ri < last_range and ranges[ri][0] <= a else -1
        token = -1
        if tokens is not None:
            while ti < t_last and tokens[ti][1] <= a:
                ti += 1
            token = ti if ti < t_last and tokens[ti][0] <= a else -1
        if owner >= 0 or token >= 0:
            runs.append(Run(a, b, owner, token))
    return runs


def owner_at(layout: Layout, pos: int) -> int:
    """The index into ``layout.ranges`` of the range holding code point ``pos`` (``-1``: none)."""
    i = bisect.bisect_right(layout.ends, pos)
    if i < len(layout.ranges) and layout.ranges[i][0] <= pos:
        return i
    return -1


def instruct_label(preview: ContextPreview | None, request: PreviewRequest | None = None) -> str | None:
    """The instruct part of the header: the preset's name, or "instruct off · <context preset>".

    Read from what the preview was built with (``strategy_info``: ``instruct``, ``context``), else
    from the chat's Text Completion setup; ``None`` when neither says.
    """
    info = preview.strategy_info if preview is not None else {}
    if info.get("api") == TEXT_COMPLETION:
        if info.get("instruct"):
            return str(info["instruct"])
        return f"instruct off · {info.get('context') or 'context'}"
    st = request.sillytavern if request is not None else None
    tc = st.text_completion if st is not None else None
    if tc is None:
        return None
    if tc.instruct.enabled:
        return tc.instruct.preset or "instruct (unnamed preset)"
    return f"instruct off · {tc.context.preset or 'context'}"


def tokenizer_label(preview: ContextPreview, label: str | None = None) -> str:
    """The tokenizer part of the header: ``label``, the tokenizer the preview counted with in its own
    words (``strategy_info["tokenizer"]``, e.g. "Llama 3 · exact"), or the preview's profile with
    ``exact`` / ``≈ approximate``."""
    if label:
        return label
    own = preview.strategy_info.get("tokenizer") if preview.api == TEXT_COMPLETION else None
    if isinstance(own, str) and own:
        return own
    return f"{preview.tokenizer.profile} {'≈ approximate' if preview.tokenizer.approximate else 'exact'}"


def header_text(preview: ContextPreview | None, request: PreviewRequest | None = None,
                tokenizer: str | None = None) -> str:
    """"Text Completion · <instruct preset> · <tokenizer>" or "Chat Completion · <model> · <tokenizer>"."""
    if preview is None:
        return "No preview"
    if preview.api == TEXT_COMPLETION and tokenizer is None and preview.strategy_info.get("api") == TEXT_COMPLETION:
        title = text_completion_title(preview)  # the engine's words for a preview it built
        if title:
            return title
    tok = tokenizer_label(preview, tokenizer)
    if preview.api == TEXT_COMPLETION:
        return " · ".join(p for p in ("Text Completion", instruct_label(preview, request) or "", tok) if p)
    return f"Chat Completion · {preview.model} · {tok}"


TokenSpansFn = Callable[[str], list[tuple[int, int]]]


def _text_tokenizer(preview: ContextPreview | None, request: PreviewRequest | None) -> Any:
    """SillyTavern's Text Completion tokenizer for ``preview`` (the id it counted with,
    ``strategy_info["st_tokenizer_id"]``, else the setup's ``power_user.tokenizer``), or ``None``."""
    st = request.sillytavern if request is not None else None
    tc = st.text_completion if st is not None else None
    if preview is None or preview.api != TEXT_COMPLETION or tc is None:
        return None
    st_id = preview.strategy_info.get("st_tokenizer_id", tc.tokenizer)
    try:
        return sillytavern_text_tokenizer(int(st_id), tc.main_api, tc.model or preview.model)
    except (LoomscopeError, TypeError, ValueError):  # UNKNOWN_TOKENIZER: no boundaries from it
        return None


def text_token_spans(preview: ContextPreview | None, request: PreviewRequest | None) -> TokenSpansFn | None:
    """The token boundaries SillyTavern's Text Completion tokenizer gives a prompt
    (:func:`engine.tokenizers.sillytavern_text.sillytavern_text_tokenizer`); ``None`` for another
    preview, or when the chat has no Text Completion setup."""
    tok = _text_tokenizer(preview, request)
    return tok.spans if tok is not None else None


def profile_token_spans(preview: ContextPreview | None, tokenizers: Any) -> TokenSpansFn | None:
    """The token spans of ``preview``'s tokenizer profile from the registry ``tokenizers``
    (``None``: no preview, or the profile is not registered)."""
    if preview is None:
        return None
    try:
        profile = tokenizers.get(preview.tokenizer.profile)
    except LoomscopeError:  # UNKNOWN_TOKENIZER: the header still names it; no boundaries
        return None
    return profile.token_spans


def token_spans_for(preview: ContextPreview | None, request: PreviewRequest | None, tokenizers: Any) -> TokenSpansFn | None:
    """The view's token boundaries: those of the tokenizer the preview's counts come from.

    SillyTavern's Text Completion tokenizer when the preview counted with it (its ``key`` is the
    preview's ``tokenizer.profile``: it knows the template's control tokens), else the preview's
    tokenizer profile from ``tokenizers``, else SillyTavern's tokenizer anyway.
    """
    tok = _text_tokenizer(preview, request)
    if tok is not None and preview is not None and tok.key == preview.tokenizer.profile:
        return tok.spans
    return profile_token_spans(preview, tokenizers) or (tok.spans if tok is not None else None)


def profile_for(preview: ContextPreview | None, request: PreviewRequest | None, tokenizers: Any) -> Any:
    """The tokenizer profile ``preview``'s counts come from, or ``None``.

    A Text Completion preview counted with SillyTavern's tokenizer (its ``key`` is the preview's
    ``tokenizer.profile``, a name the registry does not hold) gets that tokenizer's profile; any
    other preview its profile from the registry ``tokenizers``.
    """
    tok = _text_tokenizer(preview, request)
    if tok is not None and preview is not None and tok.key == preview.tokenizer.profile:
        return tok.profile
    if preview is None:
        return None
    try:
        return tokenizers.get(preview.tokenizer.profile)
    except LoomscopeError:  # UNKNOWN_TOKENIZER
        return None
