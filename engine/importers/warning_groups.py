"""Warnings of a folder import, grouped: one line per message however many files repeat it (issue 25 item 4).

A 10,000-chat folder whose chats all name a missing world printed 10,000 identical lines; the CLI and the app
print each message once, with how many files (and which kind) it concerns.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

#: The word for a file by the folder it lies in (relative to the user folder).
_KIND_WORDS = {"chats": ("chat", "chats"), "worlds": ("world", "worlds"), "characters": ("card", "cards"),
               "User Avatars": ("persona", "personas")}


@dataclass
class WarningGroup:
    """One warning message and the files (relative to the user folder) it was given for, in order."""

    message: str
    files: list[str] = field(default_factory=list)

    def line(self) -> str:
        """``file: message`` for one file; ``10,000 chats: message (first: chats/a/b.jsonl)`` for several."""
        if len(self.files) == 1:
            return f"{self.files[0]}: {self.message}"
        tops = {f.split("/", 1)[0] for f in self.files}
        one, many = _KIND_WORDS.get(tops.pop(), ("file", "files")) if len(tops) == 1 else ("file", "files")
        return f"{len(self.files):,} {many if len(self.files) != 1 else one}: {self.message} (first: {self.files[0]})"


def group_warnings(warnings: Iterable[tuple[str, str]]) -> list[WarningGroup]:
    """Group ``(file, message)`` pairs by message, in the order each message first appeared.

    Parameters
    ----------
    warnings:
        ``(file relative to the user folder, message)``, as ``read_st_folder``'s ``on_warning`` receives them.

    Returns
    -------
    list[WarningGroup]
        One group per distinct message; a file given the same message twice counts once.
    """
    groups: dict[str, WarningGroup] = {}
    seen: set[tuple[str, str]] = set()
    for file, message in warnings:
        if (file, message) in seen:
            continue
        seen.add((file, message))
        groups.setdefault(message, WarningGroup(message)).files.append(file)
    return list(groups.values())


__all__ = ["WarningGroup", "group_warnings"]
