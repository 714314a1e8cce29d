"""Which World Info entries a prompt block holds, and why each fired, in words.

One implementation for every front end: the Block inspector's entry table, the blocks table's
Source cell, the Lorebook tab's test box, ``loomscope preview`` and ``lorebook-report`` all name
an entry by its title (SillyTavern's *Title/Memo*, the entry ``comment``) with the uid as a
detail, and say why it fired the same way: ``key "harbor" in message 3``, ``via recursion from
#1 Dragons``, ``constant``, ``sticky, 2 turns left``.

A block holds entries in two shapes (both read here, never re-derived elsewhere):

- a Loomscope-assembled lorebook block (source ``lorebook:<book>:<uid>``) is one entry; its
  ``trace`` is the entry's :class:`~engine.schema.TraceRecord` flattened, plus ``placement``;
- a SillyTavern-assembled block joins several (``prompt:worldInfoBefore``/``After``, a depth
  injection with the Author's Note): ``trace["parts"]`` lists them, each with ``source``,
  ``tokens`` and the activation ``trace`` (``engine.assembly.sillytavern._Assembler.lore_parts``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .lorebook.keys import InvalidRegexKey, compile_regex_key, is_regex_key
from .schema import ContextPreview, PreviewBlock
from .schema.trace import TraceRecord
from .vocabulary import words

__all__ = [
    "EntryFact",
    "block_entry_facts",
    "block_source_label",
    "entry_title",
    "is_lorebook_source",
    "key_spans",
    "parse_lorebook_source",
    "record_fact",
    "why_fired",
]

_LOREBOOK_PREFIX = "lorebook:"
_TITLE_WORDS = 6

#: Where a SillyTavern block's source puts its entries, in words.
_CONTAINER_WORDS = {
    "prompt:worldInfoBefore": "before the character (World Info before)",
    "prompt:worldInfoAfter": "after the character (World Info after)",
}
_CONTAINER_LABELS = {"prompt:worldInfoBefore": "World Info before", "prompt:worldInfoAfter": "World Info after"}
_INJECTION = re.compile(r"^injection:depth(\d+):(\w+)$")


@dataclass(frozen=True)
class EntryFact:
    """One World Info entry in a block (or a test run), in words.

    Attributes
    ----------
    title:
        The entry's title (:func:`entry_title`): its comment, else its first words.
    book, uid:
        The book's name and the entry's uid (the detail shown after the title).
    why:
        Why it fired, in words (:func:`why_fired`): ``key "ship" in message 1 (depth 2)``.
    key:
        The key that matched (``None``: constant, sticky, decorator); a front end highlights it.
    message_index:
        The chat message the key was found in (``None``: elsewhere, or no key).
    position:
        Where the entry goes in the prompt, in words (``after the character``, ``@depth 2 as
        system``); ``""`` when not known.
    tokens:
        The entry's tokens as counted for the lorebook budget (``None``: not counted).
    code:
        The trace code (``LOREBOOK_KEY_MATCH``, ``LOREBOOK_CONSTANT``, ``LOREBOOK_STICKY``, ...).
    """

    title: str
    book: str
    uid: int | str
    why: str
    key: str | None
    message_index: int | None
    position: str
    tokens: int | None
    code: str

    @property
    def label(self) -> str:
        """``Title (book #uid)``: the entry named by its title, the uid as a detail."""
        return f"{self.title} ({self.book} #{self.uid})"


def entry_title(comment: str | None, uid: int | str, content: str = "") -> str:
    """An entry's title: its comment (SillyTavern's *Title/Memo*), else its first words, else ``entry #uid``.

    Parameters
    ----------
    comment:
        The entry's ``comment``.
    uid:
        The entry's uid.
    content:
        The entry's text (its first six words stand in for a missing comment).
    """
    title = " ".join((comment or "").split())
    if title:
        return title
    first = (content or "").split()
    if first:
        return " ".join(first[:_TITLE_WORDS]) + (" …" if len(first) > _TITLE_WORDS else "")
    return f"entry #{uid}"


def is_lorebook_source(source: str) -> bool:
    """``True`` for a block or part source ``lorebook:<book>:<uid>``."""
    return source.startswith(_LOREBOOK_PREFIX)


def parse_lorebook_source(source: str) -> tuple[str, str] | None:
    """``("GI-Core", "3")`` for ``"lorebook:GI-Core:3"`` (a book name may hold colons); else ``None``."""
    if not is_lorebook_source(source):
        return None
    book, sep, uid = source[len(_LOREBOOK_PREFIX):].rpartition(":")
    return (book, uid) if sep else None


def why_fired(code: str, detail: Mapping[str, Any] | None, *, chat_length: int | None = None,
              scanned: str | None = None) -> str:
    """Why an entry fired (or did not), in a short phrase.

    Parameters
    ----------
    code:
        The trace code (``LOREBOOK_KEY_MATCH``, ``LOREBOOK_CONSTANT``, ``LOREBOOK_STICKY``, ...).
    detail:
        The evidence (``TraceRecord.detail``, or the flattened block trace): ``key``,
        ``source`` (``chat``, ``recursion``, ``extra``), ``message_index``, ``depth``,
        ``from_uid`` / ``from_comment`` (recursion), ``until`` (sticky: the chat length it ends at).
    chat_length:
        Messages in the chat, for a sticky entry's turns left (``until − chat_length``,
        SillyTavern ``world-info.js`` ``WorldInfoTimedEffects``); ``None``: not said.
    scanned:
        A name for the scanned chat when it is not a chat (``"the test text"``): a key found in
        it is said to be there, not in "message 0".

    Returns
    -------
    str
        ``key "ship" in message 1 (depth 2)``, ``key "bell" via recursion from #1 Dragons``,
        ``constant``, ``sticky, 2 turns left``; other codes in the vocabulary's words.
    """
    d = dict(detail or {})
    if code == "LOREBOOK_CONSTANT":
        return "constant"
    if code == "LOREBOOK_STICKY":
        until = d.get("until")
        if isinstance(until, int) and chat_length is not None:
            left = max(0, until - chat_length)
            return f"sticky, {left} turn{'' if left == 1 else 's'} left"
        return "sticky (still active)"
    if code == "LOREBOOK_DECORATOR_ACTIVATE":
        return "forced on by @@activate"
    key = d.get("key")
    if code != "LOREBOOK_KEY_MATCH" or key is None:
        return words(code)
    phrase = f'key "{key}"'
    source = d.get("source")
    if source == "recursion":
        origin = d.get("from_uid")
        if origin is not None:
            who = entry_title(d.get("from_comment"), origin)
            phrase += f" via recursion from #{origin}" + (f" {who}" if who != f"entry #{origin}" else "")
        else:
            phrase += " via recursion"
        return phrase
    if scanned is not None and source in (None, "chat"):
        phrase += f" in {scanned}"
    elif d.get("message_index") is not None:
        phrase += f" in message {d['message_index']}"
        if d.get("depth") is not None:
            phrase += f" (depth {d['depth']})"
    elif source == "extra":
        phrase += " in the character or persona text scanned with the chat"
    elif source:
        phrase += f" in {source}"
    return phrase


def record_fact(rec: TraceRecord, *, position: str = "", chat_length: int | None = None,
                tokens: int | None = None, content: str = "", scanned: str | None = None) -> EntryFact:
    """One trace record as an :class:`EntryFact` (the test box, the report, a block's entry).

    ``scanned`` names a scanned text that is not a chat (:func:`why_fired`).
    """
    detail = rec.detail or {}
    key = detail.get("key") if rec.code == "LOREBOOK_KEY_MATCH" else None
    mi = detail.get("message_index")
    return EntryFact(
        title=entry_title(rec.comment, rec.uid, content), book=rec.book, uid=rec.uid,
        why=why_fired(rec.code, detail, chat_length=chat_length, scanned=scanned), key=str(key) if key is not None else None,
        message_index=mi if isinstance(mi, int) else None, position=position,
        tokens=tokens if tokens is not None else rec.tokens, code=rec.code)


def _index(preview: ContextPreview | None) -> dict[tuple[str, str], TraceRecord]:
    if preview is None:
        return {}
    return {(r.book, str(r.uid)): r for r in preview.lorebook_trace}


def _container_position(block: PreviewBlock, part_at: int, parts: Sequence[Mapping[str, Any]]) -> str:
    """Where a SillyTavern block puts its part ``part_at``, in words."""
    if block.source in _CONTAINER_WORDS:
        return _CONTAINER_WORDS[block.source]
    m = _INJECTION.match(block.source)
    if m:
        depth, role = m.group(1), m.group(2)
        note = next((k for k, p in enumerate(parts) if p.get("source") == "author_note"), None)
        if note is not None:
            side = "top" if part_at < note else "bottom"
            return f"Author's Note {side}, @depth {depth} as {role}"
        return f"@depth {depth} as {role}"
    return block.source


def _loomscope_position(preview: ContextPreview | None, block: PreviewBlock) -> str:
    """Where a Loomscope lorebook block sits: its depth placement, else before/after the character."""
    trace = block.trace or {}
    placement = trace.get("placement")
    if isinstance(placement, Mapping) and placement.get("depth") is not None:
        return f"@depth {placement['depth']} as {block.role}"
    if preview is not None:
        char = next((b.position for b in preview.blocks if b.kind == "character"), None)
        if char is not None:
            return "before the character" if block.position < char else "after the character"
        chat = next((b.position for b in preview.blocks if b.message_index is not None), None)
        if chat is not None:
            return "before the chat" if block.position < chat else "in the chat"
    return ""


def block_entry_facts(block: PreviewBlock, preview: ContextPreview | None = None, *,
                      chat_length: int | None = None) -> list[EntryFact]:
    """The World Info entries ``block`` holds, in prompt order, each with why it fired.

    Parameters
    ----------
    block:
        A preview block. A Loomscope lorebook block gives one entry; a SillyTavern block
        joined from entries (World Info before/after, a depth injection, the Author's Note)
        one per entry part; any other block (a plain message, a system prompt) none.
    preview:
        The preview the block belongs to: its ``lorebook_trace`` names the entries (title)
        and the character block places a Loomscope entry before or after it.
    chat_length:
        Messages in the chat (sticky entries' turns left); ``None``: not said.

    Returns
    -------
    list[EntryFact]
        Empty for a block that holds no World Info entry.
    """
    records = _index(preview)
    trace = block.trace or {}
    parts = trace.get("parts")
    if isinstance(parts, list) and parts:
        out = []
        for k, part in enumerate(parts):
            src = parse_lorebook_source(str(part.get("source", "")))
            if src is None:
                continue
            book, uid = src
            rec = records.get((book, uid))
            ptrace = part.get("trace") or {}
            code = str(ptrace.get("code") or (rec.code if rec else part.get("reason", "")))
            detail = ptrace if ptrace else (rec.detail if rec else {})
            key = detail.get("key") if code == "LOREBOOK_KEY_MATCH" else None
            mi = detail.get("message_index")
            uid_value: int | str = int(uid) if uid.lstrip("-").isdigit() else uid
            out.append(EntryFact(
                title=entry_title(rec.comment if rec else None, uid_value, str(part.get("text", ""))),
                book=book, uid=uid_value, why=why_fired(code, detail, chat_length=chat_length),
                key=str(key) if key is not None else None, message_index=mi if isinstance(mi, int) else None,
                position=_container_position(block, k, parts), tokens=part.get("tokens"), code=code))
        return out
    src = parse_lorebook_source(block.source)
    if src is None:
        return []
    book, uid = src
    rec = records.get((book, uid))
    if rec is None and {"book", "uid", "code"} <= set(trace):
        rec = TraceRecord(book=str(trace["book"]), book_index=int(trace.get("book_index") or 0), uid=trace["uid"],
                          comment=str(trace.get("comment") or ""), activated=bool(trace.get("activated", True)),
                          code=str(trace["code"]), detail=dict(trace.get("detail") or {}), tokens=trace.get("tokens"))
    if rec is None:
        return []
    return [record_fact(rec, position=_loomscope_position(preview, block), chat_length=chat_length,
                        content=block.text)]


def block_source_label(block: PreviewBlock, preview: ContextPreview | None = None) -> str:
    """A block's source for a table cell: lorebook entries by title, the uid as a detail.

    ``lorebook:GI-Core:3`` → ``Liyue Harbor (GI-Core #3)``; a SillyTavern World Info block →
    ``World Info before: Harbor, Ship``; any other block its source (with its name).
    """
    facts = block_entry_facts(block, preview)
    base = f"{block.name} · {block.source}" if block.name else block.source
    if not facts:
        return base
    if parse_lorebook_source(block.source) is not None and len(facts) == 1:
        return facts[0].label
    titles = ", ".join(f.title for f in facts)
    m = _INJECTION.match(block.source)
    where = (_CONTAINER_LABELS.get(block.source) or (f"@depth {m.group(1)} ({m.group(2)})" if m else block.source))
    return f"{where}: {titles}"


_MAX_SPANS = 200


def key_spans(text: str, key: str) -> list[tuple[int, int]]:
    """Where ``key`` occurs in ``text``: ``[(start, end)]`` code-point offsets, for highlighting.

    A plain key is found case-insensitively (the default of SillyTavern's ``world_info_case_sensitive``);
    a ``/regex/flags`` key runs through the engine's JavaScript regex (``engine.lorebook.keys``,
    time-limited). At most 200 spans; an invalid regex gives none.

    Parameters
    ----------
    text:
        The text the key was found in (a test text, a message).
    key:
        The matched key as the trace gives it (:attr:`EntryFact.key`).
    """
    if not key or not text:
        return []
    spans: list[tuple[int, int]] = []
    if is_regex_key(key):
        try:
            rx = compile_regex_key(key)
        except InvalidRegexKey:
            return []
        pos = 0
        while pos <= len(text) and len(spans) < _MAX_SPANS:
            m = rx.search(text, pos)
            if m is None or (m.end() <= pos and m.start() < pos):
                break
            if m.end() == m.start():
                pos = m.end() + 1
                continue
            spans.append((m.start(), m.end()))
            pos = m.end()
        return spans
    low, needle = text.casefold(), key.casefold()
    if len(low) != len(text):  # casefold changed lengths (ß → ss): fall back to lower()
        low, needle = text.lower(), key.lower()
    at = low.find(needle)
    while at >= 0 and len(spans) < _MAX_SPANS:
        spans.append((at, at + len(needle)))
        at = low.find(needle, at + len(needle))
    return spans
