"""Importers: SillyTavern cards, worlds and chats; OpenAI message arrays (and files wrapping them).

Public API (every loader raises only :class:`engine.errors.LoomscopeImportError`, with a stable
``IMPORT_*`` code, the file name and the place inside it):

- :func:`load_character` — PNG (``ccv3`` preferred over ``chara``), JSON card (V1/V2/V3,
  Pygmalion keys) or V3 ``.charx`` (``card.json``).
- :func:`load_lorebook` — SillyTavern world JSON, V2 ``character_book`` / V3 ``lorebook_v3``,
  NovelAI ``.lorebook``.
- :func:`load_chat` / :func:`load_chats` — SillyTavern JSONL, OpenAI arrays / request bodies,
  SWE-agent ``.traj``, tau-bench results, ToolBench answers.
- :func:`load_any` → :class:`ImportedItem`; :func:`inspect_file` → :class:`InspectReport`.
- :func:`export_chat_jsonl`, :func:`export_world_json` (and atomic ``write_*`` helpers).
- :func:`parse_send_date` — SillyTavern timestamps (kept verbatim on import) as ``datetime``.

Limits: files over 64 MiB, lorebooks over 100,000 entries and chats over 100,000 messages get
``IMPORT_TOO_LARGE`` before being parsed in full; JSON deeper than 200 levels ``IMPORT_TOO_DEEP``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._io import MAX_ENTRIES, MAX_FILE_BYTES, MAX_JSON_DEPTH, MAX_MESSAGES
from .books import load_lorebook_or_card_book
from .cards import load_character, load_character_with_info, parse_card_data
from .chats import export_chat_jsonl, load_chat, load_chats, load_chats_with_info, parse_chat_text, write_chat_jsonl
from .dates import parse_send_date
from .lorebooks import export_world_json, load_lorebook, load_lorebook_with_info, parse_lorebook_data, write_world_json

if TYPE_CHECKING:
    from .detect import ImportedItem, InspectReport, chat_counts, inspect_file, load_any

#: Format detection (:mod:`.detect`, with its two report models) loads on first use, by name: ``loomscope
#: preview --chat FILE`` never needs it (tests/engine/commands/test_preview_cli.py checks).
_LAZY = frozenset(("ImportedItem", "InspectReport", "chat_counts", "inspect_file", "load_any"))


def __getattr__(name: str) -> object:
    """Resolve the names of :mod:`.detect` listed in ``_LAZY`` on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module 'engine.importers' has no attribute {name!r}")
    return getattr(importlib.import_module(".detect", __name__), name)


__all__ = [
                    "MAX_ENTRIES",
                    "MAX_FILE_BYTES",
                    "MAX_JSON_DEPTH",
                    "MAX_MESSAGES",
                    "ImportedItem",
                    "InspectReport",
                    "chat_counts",
                    "export_chat_jsonl",
                    "export_world_json",
                    "inspect_file",
                    "load_any",
                    "load_character",
                    "load_character_with_info",
                    "load_chat",
                    "load_chats",
                    "load_chats_with_info",
                    "load_lorebook",
                    "load_lorebook_or_card_book",
                    "load_lorebook_with_info",
                    "parse_card_data",
                    "parse_chat_text",
                    "parse_lorebook_data",
                    "parse_send_date",
                    "write_chat_jsonl",
                    "write_world_json",
]
