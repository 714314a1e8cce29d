"""World Info activation: SillyTavern semantics, deterministic, with a per-entry trace.

Algorithm borrowed from SillyTavern 1.12.x ``world-info.js`` ``checkWorldInfo`` (FORMATS.md
b3), with SPEC §5's deliberate differences:

* Constant entries are required: the lorebook budget never drops them. The budget takes
  constants first, then the other candidates by priority, dropping the ones that do not fit
  (reason ``LOREBOOK_BUDGET``) and going on with smaller ones; an overflow does not stop
  recursion (SillyTavern breaks out of the loop and loses every remaining candidate).
* Deterministic tie-breaks: priority = ``order`` (higher first), then the book's index in
  ``books``, then ``uid`` (integers before strings), then the entry's index in its book.
* Probability rolls and weighted group choices use ``random.Random`` seeded from
  ``settings.seed``, the entry's (or group's) name and the chat length, so one entry's roll
  never depends on another's and the same preview is reproducible.
* Activation is a pure function of its inputs: timed effects (sticky, cooldown) are read
  from ``chat_metadata["timedWorldInfo"]`` and the new state is returned, never written.
* An entry whose content is empty after macros is not activated (``LOREBOOK_EMPTY``).

Token budget = ``round(budget_percent × context_limit / 100)`` (half up, at least 1), capped
by ``budget_cap`` when it is > 0. Each entry costs ``count_tokens(content)``; SillyTavern
re-counts the newline-joined text instead, which differs by a token or so per entry.
Book-level ``scan_depth``/``token_budget``/``recursive_scanning`` of imported
``character_book`` objects are ignored, as SillyTavern ignores them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from ..schema._construct import construct
from ..schema.character import Character, Persona
from ..schema.lorebook import Lorebook
from ..schema.messages import ChatMessage
from ..schema.settings import WorldInfoSettings
from .budget import compute_budget
from .jsregex import RegexClock
from .loomscope import MAX_PASSES, _activate_loomscope
from .models import ActivationResult, TraceRecord
from .prepare import _prepared_for, clear_cache
from .st_rules import activate_sillytavern

__all__ = ["MAX_PASSES", "activate", "clear_cache", "compute_budget", "test_text"]


def activate(
    books: Sequence[Lorebook], messages: Sequence[ChatMessage], settings: WorldInfoSettings, *,
    count_tokens: Callable[[str], int], context_limit: int, user_name: str = "User", char_name: str = "",
    character: Character | None = None, persona: Persona | None = None,
    chat_metadata: dict[str, Any] | None = None, extra_scan_text: Sequence[str] = (),
    generation_type: str = "normal", book_scopes: Sequence[str | None] | None = None,
    compare_rules: bool = True, history_offset: int = 0, hidden_before: int = 0,
    macros: Callable[[str], str] | None = None, character_avatar: str | None = None,
    character_tag_ids: Sequence[str] | None = None,
) -> ActivationResult:
    """Activate World Info entries for a chat under ``settings.rules``.

    ``"sillytavern"`` (the default) reproduces SillyTavern 1.12.x ``checkWorldInfo`` exactly
    (:mod:`engine.lorebook.st_rules`); ``"loomscope"`` applies Loomscope's rules (module doc of
    :mod:`engine.lorebook.activation`). Both return the same result shape.

    Parameters
    ----------
    books, messages, settings, count_tokens, context_limit, user_name, char_name, character,
    persona, chat_metadata, extra_scan_text, generation_type:
        As described for :func:`_activate_loomscope` below.
    book_scopes:
        One scope per book: ``"chat"``, ``"persona"``, ``"character"`` or ``"global"`` (SillyTavern's
        lore sources, ranked by ``settings.character_strategy``); ``None`` for a book (or the
        whole argument) uses the book's ``scope`` field, else ``"global"``. Only the
        ``sillytavern`` rules rank by scope.
    compare_rules:
        Under ``sillytavern``, also run the ``loomscope`` rules and mark every entry whose
        outcome differs (``trace[...].detail["loomscope"]`` and ``rule_differences``). Costs a
        second activation; the lorebook report turns it off.
    history_offset, hidden_before:
        For replays of long chats (the lorebook report): ``messages`` is the tail of a chat
        that starts ``history_offset`` messages earlier, ``hidden_before`` of which are hidden.
        Message indexes in the trace and the chat length (timed effects, seeds) count them; only
        the tail is scanned, so pass at least the scan depth's worth of visible messages.
    macros:
        Under ``sillytavern``: SillyTavern's ``substituteParams`` (e.g.
        :func:`engine.assembly.macros.macro_function`), run on each entry's content when it
        passes its probability roll, before the budget count and the recursion buffer
        (world-info.js 4027), and on keys holding macros. ``None``: names only.
    character_avatar, character_tag_ids:
        Under ``sillytavern``: the card's file name in ``characters/`` and its ``tag_map`` tag
        ids; character filters compare them as SillyTavern does (``getCharaFilename``,
        ``getTagKeyForEntity``). ``None``: the character's name and tags.

    Returns
    -------
    ActivationResult
        With ``rules`` set to the rule set used.

    Notes
    -----
    Regex keys run under ``settings.regex_timeout_ms`` per search and
    ``settings.regex_total_timeout_ms`` per call; a key that runs out does not match, its
    entry's trace code is ``LOREBOOK_REGEX_TIMEOUT`` (when nothing else matched) and a
    diagnostic names it. Never raises for bad lorebook content.
    """
    clock = RegexClock(settings.regex_timeout_ms / 1000, settings.regex_total_timeout_ms / 1000)
    # the loomscope rules, with the arguments both rule sets share (run alone, or as the comparison)
    loomscope = partial(
        _activate_loomscope, books, messages, settings, count_tokens=count_tokens, context_limit=context_limit,
        user_name=user_name, char_name=char_name, character=character, persona=persona,
        chat_metadata=chat_metadata, extra_scan_text=extra_scan_text, generation_type=generation_type,
        history_offset=history_offset)
    if settings.rules == "loomscope":
        return loomscope(clock=clock)
    prepared = _prepared_for(books, settings, user_name, char_name)
    result = activate_sillytavern(
        books, messages, settings, prepared, count_tokens=count_tokens,
        budget=compute_budget(settings, context_limit), user_name=user_name, char_name=char_name,
        character=character, persona=persona, chat_metadata=chat_metadata,
        extra_scan_text=extra_scan_text, generation_type=generation_type,
        book_scopes=book_scopes, clock=clock, history_offset=history_offset, hidden_before=hidden_before,
        macros=macros, character_avatar=character_avatar, character_tag_ids=character_tag_ids)
    return compare_results(result, loomscope(clock=_shared_clock(clock))) if compare_rules else result


def _shared_clock(clock: RegexClock) -> RegexClock:
    """The comparison run's clock (one time budget per preview).

    It shares the main run's total and exhausted searches, with its own list of timeouts (it reports none).
    """
    return RegexClock(clock.per_search, clock.total, spent=clock.spent, exhausted=clock.exhausted)


def compare_results(st: ActivationResult, ls: ActivationResult) -> ActivationResult:
    """``st`` with every difference from the ``loomscope`` result ``ls`` marked.

    Each entry whose activation or reason differs gets ``detail["loomscope"] = {"activated",
    "code", "message"}`` in its trace record; ``rule_differences`` lists the same notes plus a
    placement note when both activate the same entries in another order.
    """
    other = {(r.book_index, r.uid): r for r in ls.trace}
    diffs: list[dict[str, Any]] = []
    trace = list(st.trace)
    for i, rec in enumerate(trace):
        o = other.get((rec.book_index, rec.uid))
        if o is None or o.activated == rec.activated:
            continue
        message = _difference_message(rec, o)
        if message is None:
            continue
        note = {"activated": o.activated, "code": o.code, "message": message}
        trace[i] = construct(TraceRecord, {**rec.__dict__, "detail": {**rec.detail, "loomscope": note}})
        diffs.append({"book": rec.book, "uid": rec.uid, "comment": rec.comment,
                      "what": "activation", "message": message})
    st_order = [(a.book_index, a.uid) for a in st.activated]
    ls_order = [(a.book_index, a.uid) for a in ls.activated]
    if st_order != ls_order and sorted(st_order, key=str) == sorted(ls_order, key=str):
        diffs.append({"book": "", "uid": None, "comment": "", "what": "placement",
                      "message": "SillyTavern places these entries in another order than the loomscope "
                                 "rules (equal orders: SillyTavern puts the entry activated later first)",
                      "sillytavern": [list(k) for k in st_order], "loomscope": [list(k) for k in ls_order]})
    return construct(ActivationResult, {**st.__dict__, "trace": trace, "rule_differences": diffs})


def _difference_message(st: TraceRecord, ls: TraceRecord) -> str | None:
    if st.code == "LOREBOOK_BUDGET" and ls.activated:
        if ls.code == "LOREBOOK_CONSTANT":
            return "SillyTavern drops this constant over the budget; the loomscope rules keep it"
        if "not reached" in str(st.detail.get("note", "")):
            return ("SillyTavern stopped at an earlier entry that overflowed the budget; the loomscope "
                    "rules still fit this one")
        return "SillyTavern drops this entry when the running total reaches the budget; the loomscope rules keep it"
    if st.activated and not ls.activated:
        if ls.code == "LOREBOOK_EMPTY":
            return ("SillyTavern activates this entry with empty content (it inserts nothing but counts for "
                    "timed effects and groups); the loomscope rules skip it")
        return f"the loomscope rules would not activate this entry ({ls.code})"
    return f"the loomscope rules would activate this entry (SillyTavern: {st.code})"


def test_text(
    books: Sequence[Lorebook],
    text: str,
    settings: WorldInfoSettings,
    *,
    count_tokens: Callable[[str], int],
    context_limit: int,
    user_name: str = "User",
    char_name: str = "",
    character: Character | None = None,
    persona: Persona | None = None,
) -> ActivationResult:
    """Activate ``books`` against ``text`` taken as one user message (the GUI's "test text" box).

    Same parameters and result as :func:`activate`; the message is named ``user_name``
    when ``include_names`` is on.
    """
    return activate(books, [ChatMessage(role="user", content=text)], settings,
                    count_tokens=count_tokens, context_limit=context_limit, user_name=user_name,
                    char_name=char_name, character=character, persona=persona)


test_text.__test__ = False  # type: ignore[attr-defined]  # not a pytest test when imported
