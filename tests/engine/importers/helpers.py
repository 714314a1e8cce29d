"""Small fixtures built in code: card PNGs, world files, chats (always available, unlike shared/data)."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

from PIL import Image
from PIL.PngImagePlugin import PngInfo

V2_CARD: dict[str, Any] = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Mira",
        "description": "A lighthouse keeper.",
        "personality": "dry",
        "scenario": "storm",
        "first_mes": "You're late.",
        "mes_example": "<START>\n{{user}}: hi\n{{char}}: hm.",
        "creator_notes": "test card",
        "system_prompt": "",
        "post_history_instructions": "",
        "alternate_greetings": ["Door's open."],
        "tags": ["test"],
        "creator": "tests",
        "character_version": "1",
        "extensions": {"depth_prompt": {"prompt": "Mira is tired.", "depth": 2, "role": "user"},
                       "custom": {"x": 1}},
        "character_book": {
            "name": "Coast",
            "entries": [
                {"id": 0, "keys": ["lighthouse", "lamp"], "content": "The lamp is old.",
                 "extensions": {"position": 4, "depth": 1, "role": 2}, "enabled": True,
                 "insertion_order": 10},
                {"keys": "storm, gale", "secondary_keys": [], "content": "Storms come in autumn.",
                 "enabled": False, "insertion_order": 5, "position": "before_char",
                 "priority": 3, "use_regex": True},
            ],
        },
    },
}


def b64(obj: Any) -> str:
    """base64(UTF-8 JSON) as card chunks hold it."""
    return base64.b64encode(json.dumps(obj).encode("utf-8")).decode("ascii")


def png_bytes(chunks: list[tuple[str, str, str]] | None = None, size: tuple[int, int] = (8, 8)) -> bytes:
    """A small RGB PNG with text chunks ``(kind, keyword, text)``; kind is tEXt, zTXt or iTXt."""
    info = PngInfo()
    for kind, key, text in chunks or []:
        if kind == "tEXt":
            info.add_text(key, text)
        elif kind == "zTXt":
            info.add_text(key, text, zip=True)
        else:
            info.add_itxt(key, text)
    buf = io.BytesIO()
    Image.new("RGB", size, (10, 20, 30)).save(buf, format="PNG", pnginfo=info)
    return buf.getvalue()


def write(path: Path, data: bytes | str | Any) -> Path:
    """Write bytes, text, or JSON (anything else) to ``path``."""
    if isinstance(data, bytes):
        path.write_bytes(data)
    elif isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def st_chat_lines() -> list[dict[str, Any]]:
    """A SillyTavern chat (header + 5 messages) using hidden, narrator, swipes and flags."""
    return [
        {"user_name": "Ana", "character_name": "Mira", "create_date": "2024-10-18@20h52m01s",
         "chat_metadata": {"note_prompt": "", "integrity": "abc"}},
        {"name": "Mira", "is_user": False, "is_system": False, "send_date": "1729284721000",
         "mes": "Hello {{user}}.", "extra": {}, "swipe_id": 1, "swipes": ["Hi.", "Hello {{user}}."],
         "swipe_info": [{}, {}]},
        {"name": "Ana", "is_user": True, "is_system": True, "send_date": "2024-10-18T20:53:00Z",
         "mes": "(hidden by /hide)", "extra": {"pinned": True}},
        {"name": "Narrator", "is_user": False, "is_system": False, "send_date": "June 19, 2023 2:20pm",
         "mes": "The storm grows.", "extra": {"type": "narrator"}},
        {"name": "Ana", "is_user": True, "is_system": False, "send_date": 1729284800000,
         "mes": "Ok.", "meta": {"manualExcluded": True}, "title": "t"},
        {"name": "Mira", "is_user": False, "mes": "…", "gen_started": "x", "force_avatar": "a.png"},
    ]
