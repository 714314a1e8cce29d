"""SillyTavern 1.12.6's own readers accept every exported file (issue 30).

The expectations below were found by running SillyTavern's code under Node on this very export
(outside the repository): ``src/character-card-parser.js`` ``parse`` / ``read`` for the cards,
the ``POST /api/chats/get`` handler of ``src/endpoints/chats.js`` for the chats, and
``readWorldInfoFile`` (``POST /api/worldinfo/get``) of ``src/endpoints/worldinfo.js`` for the
worlds. Each test restates the reader's rule in a few lines and checks the file against what
SillyTavern returned.
"""

from __future__ import annotations

import base64
import json
import struct
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine.cli import main
from engine.importers.chats import stamp_message_times
from engine.schema import ChatMessage, MessageMeta
from engine.storage import open_store
from tests.engine.importers.lived_in import LUMINE_CHAT, build_lived_in

KAEL_CHAT = "Kael - 2024-10-03 @22h 00m 00s 000ms"


@pytest.fixture()
def exported(tmp_path: Path, capsys) -> Path:
    """The lived-in folder (generated, no shared data) imported, three messages added in Loomscope, exported."""
    user = build_lived_in(tmp_path)
    db = str(tmp_path / "lib.db")
    assert main(["import", str(user), "--db", db, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    chats = {r["key"]: r["id"] for r in report["added"] if r["kind"] == "chat"}
    drafts = next(r["id"] for r in report["added"] if r["key"] == "worlds/Drafts.json")
    kael = chats[f"chats/Kael/{KAEL_CHAT}.jsonl"]
    at = datetime(2024, 10, 4, 13, 5, 7, 250000, tzinfo=UTC)
    with open_store(db, seed=False) as store:
        store.messages.append(kael, stamp_message_times(ChatMessage(role="user", content="And the gate?",
                                                                   name="Paimon"), at, None))
        store.messages.append(kael, stamp_message_times(ChatMessage(role="assistant", content="Open.", name="Kael",
                                                                   meta=MessageMeta(manualExcluded=True)), at, at))
        store.messages.append(kael, ChatMessage(role="system", content="A bell rings."))
        # a character lorebook for Kael: the V3 card changes (extensions.world) and is written anew
        links = [(link.lorebook_id, link.scope) for link in store.chats.get_setup(kael).lorebooks]
        store.chats.set_lorebook_links(kael, [*links, (drafts, "character")])
    out = tmp_path / "out"
    assert main(["export", *chats.values(), "--to", str(out), "--db", db, "--format", "json"]) == 0
    capsys.readouterr()
    return out


def _text_chunks(png: bytes) -> list[tuple[str, bytes]]:
    """The PNG's ``tEXt`` chunks, ``(keyword lower-cased, text)``, in file order (``png-chunks-extract``)."""
    pos, texts = 8, []
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos:pos + 4])
        kind, data = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + length]
        if kind == b"tEXt":
            keyword, _, text = data.partition(b"\x00")
            texts.append((keyword.decode("latin-1").lower(), text))
        pos += 12 + length
    return texts


def _st_read_card(png: bytes) -> dict:
    """``character-card-parser.js`` ``read``: ``ccv3`` wins over ``chara``; base64 → UTF-8 JSON."""
    texts = dict(_text_chunks(png))
    return json.loads(base64.b64decode(texts.get("ccv3") or texts["chara"]).decode("utf-8"))


def test_sillytavern_reads_the_cards(exported: Path) -> None:
    # Node, parse(): Lumine.png → spec chara_card_v2, world Lumine-Lore; Kael.png → the ccv3 chunk, chara_card_v3,
    # world Drafts (the card changed: written anew with both chunks, as charaWrite does)
    seen = {}
    for f in sorted((exported / "characters").iterdir()):
        card = _st_read_card(f.read_bytes())
        data = card["data"]
        seen[f.name] = (data["name"], card["spec"], data["extensions"].get("world"), data.get("nickname"))
    assert seen == {"Kael.png": ("Kael", "chara_card_v3", "Drafts", "Sir Kael"),
                    "Lumine.png": ("Lumine", "chara_card_v2", "Lumine-Lore", None)}
    kael = _text_chunks((exported / "characters" / "Kael.png").read_bytes())
    assert [k for k, _ in kael] == ["chara", "ccv3"]
    chara = json.loads(base64.b64decode(dict(kael)["chara"]))
    assert chara["spec"] == "chara_card_v2" and chara["data"]["extensions"]["world"] == "Drafts"
    assert [k for k, _ in _text_chunks((exported / "characters" / "Lumine.png").read_bytes())] == ["chara"]


def _st_get_chat(path: Path) -> tuple[int, list[dict]]:
    """``chats.js`` ``/get``: split on ``\\n``, ``JSON.parse`` each line, drop the lines that fail."""
    lines = path.read_text("utf-8").split("\n")
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            continue
    return len(lines), parsed


def _summary(m: dict) -> tuple:
    return (m["name"], m["is_user"], m["is_system"], m["send_date"], len(m.get("swipes") or []) or None,
            m.get("swipe_id"), "gen_started" in m, m.get("extra", {}).get("loomscope"))


def test_sillytavern_reads_the_chats(exported: Path) -> None:
    lines, lumine = _st_get_chat(exported / "chats" / "Lumine" / f"{LUMINE_CHAT}.jsonl")
    assert (lines, len(lumine)) == (6, 6)  # every line read (Node: lines 6, parsed 6)
    assert list(lumine[0]) == ["user_name", "character_name", "create_date", "chat_metadata"]
    assert lumine[0]["chat_metadata"]["world_info"] == "Mondstadt"
    assert lumine[0]["chat_metadata"]["note_prompt"] == "[Tone: wistful. {{char}} misses her brother.]"
    assert [_summary(m) for m in lumine[1:]] == [
        ("Lumine", False, False, "October 2, 2024 7:12pm", 1, 0, False, None),
        ("Aether", True, False, "October 2, 2024 7:13pm", None, None, False, None),
        ("Lumine", False, True, "October 2, 2024 7:14pm", None, None, False, None),
        ("Lumine", False, False, "October 2, 2024 7:15pm", 2, 1, True, {"pinned": True}),
        ("Aether", True, False, "October 2, 2024 7:16pm", None, None, False, None),
    ]
    lines, kael = _st_get_chat(exported / "chats" / "Kael" / f"{KAEL_CHAT}.jsonl")
    assert (lines, len(kael)) == (6, 6)
    assert kael[0]["chat_metadata"]["persona"] == "paimon.png"  # the chat's persona stays locked to it
    made = [_summary(m) for m in kael[3:]]
    assert made[:2] == [("Paimon", True, False, "October 4, 2024 1:05pm", None, None, False, None),
                        ("Kael", False, False, "October 4, 2024 1:05pm", 1, 0, True, {"manualExcluded": True})]
    assert made[2][:3] == ("System", False, False) and made[2][7] == {"no_name": True}
    assert kael[4]["gen_started"] == "2024-10-04T13:05:07.250Z" and kael[4]["swipes"] == ["Open."]
    assert kael[5]["extra"]["type"] == "narrator"  # saveReply / sendNarratorMessage's system message


def test_sillytavern_reads_the_worlds_and_settings(exported: Path) -> None:
    # readWorldInfoFile: JSON.parse of worlds/<name>.json; the client reads its `entries` object
    counts = {}
    for f in sorted((exported / "worlds").iterdir()):
        world = json.loads(f.read_text("utf-8"))
        assert isinstance(world["entries"], dict)
        counts[f.stem] = (len(world["entries"]), next(iter(world["entries"].values()))["key"])
    assert counts == {"Drafts": (1, ["draft"]), "GI-Core": (5, ["Mondstadt"]), "Lumine-Lore": (2, ["brother", "Aether"]),
                      "Mondstadt": (2, ["gate", "gates"]), "Teyvat-Extra": (1, ["Paimon"])}
    settings = json.loads((exported / "settings.json").read_text("utf-8"))
    assert settings["power_user"]["personas"] == {"paimon.png": "Paimon", "aether.png": "Aether"}
    assert settings["world_info_settings"]["world_info"]["globalSelect"] == ["GI-Core"]
    assert sorted(p.name for p in (exported / "User Avatars").iterdir()) == ["aether.png", "paimon.png"]
