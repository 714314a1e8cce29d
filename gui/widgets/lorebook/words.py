"""Words for lorebook entry fields, and the comma-separated key text the editors read and write.

Used by the Lorebook tab's table and form and by the full entry editor
(:mod:`gui.widgets.entry_editor`). The words follow SillyTavern 1.12.6's World Info editor
(``world-info.js``: ``world_info_logic``, ``world_info_position``).
"""

from __future__ import annotations

from engine.schema import InsertionPosition, LorebookEntry, SelectiveLogic

LOGIC_WORDS: dict[SelectiveLogic, str] = {
    SelectiveLogic.AND_ANY: "AND ANY",
    SelectiveLogic.NOT_ALL: "NOT ALL",
    SelectiveLogic.NOT_ANY: "NOT ANY",
    SelectiveLogic.AND_ALL: "AND ALL",
}

POSITION_WORDS: dict[InsertionPosition, str] = {
    InsertionPosition.BEFORE_CHAR: "Before character",
    InsertionPosition.AFTER_CHAR: "After character",
    InsertionPosition.AN_TOP: "Author's note top",
    InsertionPosition.AN_BOTTOM: "Author's note bottom",
    InsertionPosition.AT_DEPTH: "At depth",
    InsertionPosition.BEFORE_EXAMPLES: "Before examples",
    InsertionPosition.AFTER_EXAMPLES: "After examples",
    InsertionPosition.OUTLET: "Outlet",
}

#: ``LorebookEntry.role`` (the message role of an ``@depth`` entry) → words.
ROLE_WORDS = {0: "system", 1: "user", 2: "assistant"}


def split_keys(text: str) -> list[str]:
    """Comma-separated keys → list; a regex key ``/a,b/i`` keeps its commas.

    Whitespace around keys is dropped, empty keys are skipped. A key starting with ``/`` runs
    to the next unescaped ``/`` followed only by flag letters and a comma (or the end).

    Parameters
    ----------
    text:
        What the user typed in a keys field.

    Returns
    -------
    list[str]
        The keys in order; ``split_keys(join_keys(keys)) == keys`` for keys without a leading or
        trailing space.
    """
    keys: list[str] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t\r\n,":
            i += 1
        if i >= n:
            break
        end = -1
        if text[i] == "/":
            j = i + 1
            while j < n:
                if text[j] == "\\":
                    j += 2
                    continue
                if text[j] == "/":
                    k = j + 1
                    while k < n and text[k].isalpha():
                        k += 1
                    rest = k
                    while rest < n and text[rest] in " \t":
                        rest += 1
                    if rest >= n or text[rest] == ",":
                        end = k
                        break
                j += 1
        if end < 0:
            comma = text.find(",", i)
            end = n if comma < 0 else comma
        key = text[i:end].strip()
        if key:
            keys.append(key)
        i = end + 1
    return keys


def join_keys(keys: list[str]) -> str:
    """List of keys → the comma-separated text :func:`split_keys` reads back."""
    return ", ".join(keys)


def entry_title(entry: LorebookEntry) -> str:
    """``comment  #uid``: the entry by its title, the uid as a detail (issue 31); without a comment,
    the first keys in brackets (real books often lack titles)."""
    if entry.comment:
        return f"{entry.comment}  #{entry.uid}"
    if entry.keys:
        keys = join_keys(entry.keys[:3]) + (", …" if len(entry.keys) > 3 else "")
        return f"[{keys}]  #{entry.uid}"
    return f"#{entry.uid}"


def escape(text: str) -> str:
    """``text`` for a rich-text ``QLabel`` (``&``, ``<``, ``>`` escaped)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
