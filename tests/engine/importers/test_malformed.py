"""Malformed-input corpus: each broken file yields its stable code, naming the file and place."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from engine.errors import LoomscopeImportError
from engine.importers import (
    MAX_ENTRIES,
    MAX_MESSAGES,
    load_any,
    load_character,
    load_character_with_info,
    load_chat,
    load_lorebook,
    load_lorebook_with_info,
)
from engine.schema import InsertionPosition

from .helpers import V2_CARD, b64, png_bytes, write


def _err(fn, path: Path) -> LoomscopeImportError:  # type: ignore[no-untyped-def]
    with pytest.raises(LoomscopeImportError) as ei:
        fn(path)
    exc = ei.value
    assert exc.file == str(path)
    assert str(path) in str(exc)  # the message names the file
    assert exc.code.startswith("IMPORT_")
    return exc


# ------------------------------------------------------------------------------ PNG cards

def test_valid_png_card_and_chunk_kinds(tmp_path: Path) -> None:
    for kind in ("tEXt", "zTXt", "iTXt"):
        p = write(tmp_path / f"{kind}.png", png_bytes([(kind, "chara", b64(V2_CARD))]))
        c = load_character(p)
        assert c.name == "Mira" and c.spec == "chara_card_v2"


def test_ccv3_preferred_and_keyword_case_insensitive(tmp_path: Path) -> None:
    v3 = {"spec": "chara_card_v3", "spec_version": "3.0",
          "data": {**V2_CARD["data"], "name": "Mira v3", "group_only_greetings": [],
                   "nickname": "M"}}
    p = write(tmp_path / "both.png", png_bytes([("tEXt", "Chara", b64(V2_CARD)),
                                                 ("tEXt", "CCV3", b64(v3))]))
    c = load_character(p)
    assert (c.name, c.spec, c.spec_version, c.nickname) == ("Mira v3", "chara_card_v3", "3.0", "M")
    assert c.model_extra["group_only_greetings"] == []


def test_card_fields_and_book_mapping(tmp_path: Path) -> None:
    p = write(tmp_path / "card.png", png_bytes([("tEXt", "chara", b64(V2_CARD))]))
    c, _spec, warnings = load_character_with_info(p)
    dp = c.depth_prompt()
    assert dp is not None and (dp.prompt, dp.depth, dp.role) == ("Mira is tired.", 2, "user")
    assert c.extensions["custom"] == {"x": 1}
    assert c.alternate_greetings == ["Door's open."]
    book = c.character_book
    assert book is not None and book.name == "Coast"
    e0, e1 = book.entries
    assert (e0.uid, e0.position, e0.depth, e0.role, e0.order) == (0, InsertionPosition.AT_DEPTH, 1, 2, 10)
    assert e1.uid == 1 and e1.keys == ["storm", "gale"] and e1.disable is True
    assert e1.position == InsertionPosition.BEFORE_CHAR
    assert e1.model_extra == {"priority": 3, "use_regex": True}
    assert any("comma-separated" in w for w in warnings)


def test_truncated_png(tmp_path: Path) -> None:
    data = png_bytes([("tEXt", "chara", b64(V2_CARD))], size=(64, 64))
    for cut in (len(data) // 2, len(data) - 5, 40):
        p = write(tmp_path / f"cut{cut}.png", data[:cut])
        assert _err(load_character, p).code == "IMPORT_INVALID_PNG"


def test_png_bad_signature(tmp_path: Path) -> None:
    p = write(tmp_path / "fake.png", b"GIF89a not a png")
    exc = _err(load_character, p)
    assert exc.code == "IMPORT_INVALID_PNG" and exc.place == "byte 0"


def test_png_corrupt_crc(tmp_path: Path) -> None:
    data = bytearray(png_bytes([("tEXt", "chara", b64(V2_CARD))]))
    i = data.index(b"IDAT")
    data[i + 6] ^= 0xFF  # damage the compressed image data
    p = write(tmp_path / "crc.png", bytes(data))
    assert _err(load_character, p).code == "IMPORT_INVALID_PNG"


def test_png_without_card_chunk(tmp_path: Path) -> None:
    p = write(tmp_path / "plain.png", png_bytes([("tEXt", "Comment", "hello")]))
    exc = _err(load_character, p)
    assert exc.code == "IMPORT_NO_CARD_CHUNK" and "Comment" in exc.message


def test_corrupt_base64(tmp_path: Path) -> None:
    good = b64(V2_CARD)
    for i, bad in enumerate(["@@@" + good, good[:-3] + "*", "a"]):
        p = write(tmp_path / f"b{i}.png", png_bytes([("tEXt", "chara", bad)]))
        exc = _err(load_character, p)
        assert exc.code == "IMPORT_BAD_BASE64" and exc.place == "chunk chara"


def test_chunk_with_invalid_utf8_and_json(tmp_path: Path) -> None:
    p = write(tmp_path / "u.png", png_bytes([("tEXt", "chara", base64.b64encode(b"{\"name\": \"\xff\"}").decode())]))
    exc = _err(load_character, p)
    assert exc.code == "IMPORT_INVALID_UTF8" and exc.place.startswith("chunk chara")
    p = write(tmp_path / "j.png", png_bytes([("tEXt", "chara", base64.b64encode(b'{"name": }').decode())]))
    exc = _err(load_character, p)
    assert exc.code == "IMPORT_INVALID_JSON" and exc.place == "chunk chara, line 1, column 10"


def test_unsupported_card_spec(tmp_path: Path) -> None:
    p = write(tmp_path / "v4.json", {**V2_CARD, "spec": "chara_card_v4"})
    exc = _err(load_character, p)
    assert exc.code == "IMPORT_UNSUPPORTED_SPEC" and exc.place == "$.spec"
    p = write(tmp_path / "v2v3.json", {**V2_CARD, "spec_version": "3.0"})
    assert _err(load_character, p).code == "IMPORT_UNSUPPORTED_SPEC"
    p = write(tmp_path / "lb.json", {"spec": "lorebook_v3", "data": {"entries": []}})
    assert _err(load_character, p).code == "IMPORT_UNSUPPORTED_FORMAT"


def test_card_wrong_types(tmp_path: Path) -> None:
    card = json.loads(json.dumps(V2_CARD))
    card["data"]["name"] = ["Mira"]
    exc = _err(load_character, write(tmp_path / "n.json", card))
    assert exc.code == "IMPORT_WRONG_TYPE" and exc.place == "$.data.name"
    card = json.loads(json.dumps(V2_CARD))
    card["data"]["character_book"]["entries"][0]["keys"] = [["nested"]]
    exc = _err(load_character, write(tmp_path / "k.json", card))
    assert exc.code == "IMPORT_WRONG_TYPE"
    assert exc.place == "$.data.character_book.entries[0].keys[0]"
    card = json.loads(json.dumps(V2_CARD))
    card["data"]["extensions"] = "none"
    exc = _err(load_character, write(tmp_path / "e.json", card))
    assert (exc.code, exc.place) == ("IMPORT_WRONG_TYPE", "$.data.extensions")


# ------------------------------------------------------------------------------ JSON/text

def test_empty_and_whitespace_files(tmp_path: Path) -> None:
    for fn in (load_character, load_lorebook, load_chat, load_any):
        assert _err(fn, write(tmp_path / "e.json", b"")).code == "IMPORT_EMPTY_FILE"
        assert _err(fn, write(tmp_path / "w.jsonl", b" \n\n ")).code == "IMPORT_EMPTY_FILE"


def test_invalid_utf8(tmp_path: Path) -> None:
    p = write(tmp_path / "bad.json", b'{"entries": {}}\n{"x": "\xc3\x28"}')
    exc = _err(load_lorebook, p)
    assert exc.code == "IMPORT_INVALID_UTF8" and "line 2" in exc.place


def test_invalid_json_line_and_column(tmp_path: Path) -> None:
    p = write(tmp_path / "bad.json", '{\n  "entries": {\n    "0": {"key": [}\n  }\n}')
    exc = _err(load_lorebook, p)
    assert exc.code == "IMPORT_INVALID_JSON" and exc.place == "line 3, column 19"


def test_invalid_jsonl_line(tmp_path: Path) -> None:
    lines = ['{"user_name": "a", "character_name": "b", "chat_metadata": {}}',
             '{"name": "b", "is_user": false, "mes": "hi"}', '{"name": "a", "mes": "oops"']
    exc = _err(load_chat, write(tmp_path / "c.jsonl", "\n".join(lines)))
    assert exc.code == "IMPORT_INVALID_JSON" and exc.place.startswith("line 3, column")


def test_deeply_nested_json(tmp_path: Path) -> None:
    for depth in (250, 100_000):
        p = write(tmp_path / f"deep{depth}.json", "[" * depth + "]" * depth)
        for fn in (load_any, load_chat, load_lorebook, load_character):
            assert _err(fn, p).code == "IMPORT_TOO_DEEP"
    p = write(tmp_path / "deep.jsonl", '{"user_name": "a"}\n' + '{"mes": ' + "[" * 5000 + "]" * 5000 + "}")
    assert _err(load_chat, p).code == "IMPORT_TOO_DEEP"


def test_keys_as_string_handled_and_wrong_key_types_flagged(tmp_path: Path) -> None:
    world = {"entries": {"0": {"uid": 0, "key": "alpha, beta ,,gamma", "keysecondary": "x",
                               "content": "c"}}}
    book, _spec, warnings = load_lorebook_with_info(write(tmp_path / "w.json", world))
    assert book.entries[0].keys == ["alpha", "beta", "gamma"]
    assert book.entries[0].secondary_keys == ["x"]
    assert any('$.entries["0"].key' in w for w in warnings)
    world["entries"]["0"]["key"] = 7
    exc = _err(load_lorebook, write(tmp_path / "w2.json", world))
    assert (exc.code, exc.place) == ("IMPORT_WRONG_TYPE", '$.entries["0"].key')


def test_world_wrong_types_and_bad_values(tmp_path: Path) -> None:
    cases = [
        ({"entries": "nope"}, "IMPORT_UNSUPPORTED_FORMAT", "$"),
        ({"entries": {"0": []}}, "IMPORT_WRONG_TYPE", '$.entries["0"]'),
        ({"entries": {"0": {"order": "high"}}}, "IMPORT_WRONG_TYPE", '$.entries["0"].order'),
        ({"entries": {"0": {"disable": "maybe"}}}, "IMPORT_WRONG_TYPE", '$.entries["0"].disable'),
        ({"entries": {"0": {"position": 42}}}, "IMPORT_INVALID_LOREBOOK", '$.entries["0"].position'),
        ({"entries": {"0": {"selectiveLogic": 9}}}, "IMPORT_INVALID_LOREBOOK",
         '$.entries["0"].selectiveLogic'),
        ({"entries": {"0": {"probability": True}}}, "IMPORT_WRONG_TYPE", '$.entries["0"].probability'),
        ({"spec": "lorebook_v3", "spec_version": "4.0", "data": {"entries": []}},
         "IMPORT_UNSUPPORTED_SPEC", "$.spec_version"),
        ([1, 2, 3], "IMPORT_UNSUPPORTED_FORMAT", "$"),
    ]
    for i, (data, code, place) in enumerate(cases):
        exc = _err(load_lorebook, write(tmp_path / f"w{i}.json", data))
        assert (exc.code, exc.place) == (code, place), data


def test_off_values_alike(tmp_path: Path) -> None:
    world = {"entries": {"0": {"sticky": 0, "cooldown": None, "delay": False, "role": None,
                               "delayUntilRecursion": False, "scanDepth": None,
                               "caseSensitive": None},
                         "1": {"sticky": 3, "delayUntilRecursion": True, "role": 1}}}
    b = load_lorebook(write(tmp_path / "w.json", world))
    e0, e1 = b.entries
    assert (e0.sticky, e0.cooldown, e0.delay, e0.role, e0.delay_until_recursion) == (None, None, None, None, 0)
    assert (e1.sticky, e1.delay_until_recursion, e1.role) == (3, 1, 1)


def test_chat_wrong_types(tmp_path: Path) -> None:
    header = '{"user_name": "a", "character_name": "b", "chat_metadata": {}}'
    cases = [
        ('{"name": "b", "mes": {"t": 1}}', "IMPORT_WRONG_TYPE", "line 2: $.mes"),
        ('{"name": "b", "mes": "x", "is_user": "yes"}', "IMPORT_WRONG_TYPE", "line 2: $.is_user"),
        ('{"name": "b", "mes": "x", "swipes": "x"}', "IMPORT_WRONG_TYPE", "line 2: $.swipes"),
        ('{"name": "b", "mes": "x", "extra": []}', "IMPORT_WRONG_TYPE", "line 2: $.extra"),
        ('[1, 2]', "IMPORT_WRONG_TYPE", "line 2: $"),
    ]
    for i, (line, code, place) in enumerate(cases):
        exc = _err(load_chat, write(tmp_path / f"c{i}.jsonl", header + "\n" + line))
        assert (exc.code, exc.place) == (code, place), line
    openai_cases = [
        ([{"role": "robot", "content": "x"}], "IMPORT_INVALID_CHAT", "$[0].role"),
        ([{"role": "user", "content": 5}], "IMPORT_WRONG_TYPE", "$[0].content"),
        ([{"role": "assistant", "tool_calls": {"id": "x"}}], "IMPORT_WRONG_TYPE", "$[0].tool_calls"),
        ([{"role": "assistant", "tool_calls": [{"function": {"name": [3]}}]}], "IMPORT_WRONG_TYPE",
         "$[0].tool_calls[0].function.name"),
        ([{"role": "tool", "tool_call_id": ["a"]}], "IMPORT_WRONG_TYPE", "$[0].tool_call_id"),
        ({"messages": "hi"}, "IMPORT_WRONG_TYPE", "$.messages"),
        ({"messages": [], "tools": {}}, "IMPORT_WRONG_TYPE", "$.tools"),
        ({"something": 1}, "IMPORT_UNSUPPORTED_FORMAT", "$"),
    ]
    for i, (data, code, place) in enumerate(openai_cases):
        exc = _err(load_chat, write(tmp_path / f"o{i}.json", data))
        assert (exc.code, exc.place) == (code, place), data


def test_too_large(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as fh:  # sparse: nothing is read, the size check comes first
        fh.truncate(64 * 1024 * 1024 + 1)
    assert _err(load_any, big).code == "IMPORT_TOO_LARGE"
    entries = {str(i): {} for i in range(MAX_ENTRIES + 1)}
    exc = _err(load_lorebook, write(tmp_path / "many.json", {"entries": entries}))
    assert exc.code == "IMPORT_TOO_LARGE" and exc.place == "$.entries"
    msgs = [{"role": "user", "content": ""}] * (MAX_MESSAGES + 1)
    assert _err(load_chat, write(tmp_path / "msgs.json", msgs)).code == "IMPORT_TOO_LARGE"
    lines = ['{"user_name": "a"}'] + ['{"mes": ""}'] * (MAX_MESSAGES + 1)
    assert _err(load_chat, write(tmp_path / "lines.jsonl", "\n".join(lines))).code == "IMPORT_TOO_LARGE"


def test_missing_file(tmp_path: Path) -> None:
    assert _err(load_any, tmp_path / "nope.json").code == "IMPORT_FILE_NOT_FOUND"
    assert _err(load_any, tmp_path).code == "IMPORT_FILE_NOT_FOUND"


def test_jsonl_of_unknown_lines_is_unsupported(tmp_path: Path) -> None:
    exc = _err(load_chat, write(tmp_path / "x.jsonl", '{"a": 1}\n{"b": 2}'))
    assert exc.code == "IMPORT_UNSUPPORTED_FORMAT" and exc.place == "line 1"


def test_chat_given_to_card_or_lorebook_loader(tmp_path: Path) -> None:
    lines = ['{"user_name": "a", "character_name": "b", "chat_metadata": {}}',
             '{"name": "b", "is_user": false, "mes": "hi"}']
    p = write(tmp_path / "chat.json", "\n".join(lines))
    for fn in (load_character, load_lorebook):
        exc = _err(fn, p)
        assert exc.code == "IMPORT_UNSUPPORTED_FORMAT" and "JSONL" in exc.message
    assert len(load_chat(p).messages) == 1  # the chat loader reads it


def _charx(path: Path, members: dict[str, bytes]) -> Path:
    import zipfile

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def test_charx_cards(tmp_path: Path) -> None:
    v3 = {"spec": "chara_card_v3", "spec_version": "3.0", "data": {**V2_CARD["data"],
                                                                   "group_only_greetings": []}}
    p = _charx(tmp_path / "m.charx", {"card.json": json.dumps(v3).encode(),
                                      "assets/icon/images/main.png": png_bytes()})
    c, spec, warnings = load_character_with_info(p)
    assert (c.name, spec) == ("Mira", "chara_card_v3")
    assert any("1 asset file" in w for w in warnings)
    assert load_any(p).kind == "character"
    exc = _err(load_character, _charx(tmp_path / "n.charx", {"readme.txt": b"x"}))
    assert exc.code == "IMPORT_INVALID_CARD"
    raw = p.read_bytes()
    exc = _err(load_character, write(tmp_path / "t.charx", raw[: len(raw) // 2]))
    assert exc.code == "IMPORT_INVALID_CARD"
    exc = _err(load_character, _charx(tmp_path / "j.charx", {"card.json": b'{"spec": '}))
    assert exc.code == "IMPORT_INVALID_JSON" and exc.place.startswith("card.json, line 1")


def test_lone_surrogate_escapes_are_replaced(tmp_path: Path) -> None:
    from engine.importers import export_chat_jsonl

    text = ('{"user_name": "a", "character_name": "b", "chat_metadata": {}}\n'
            '{"name": "b", "is_user": false, "mes": "cut emoji \\ud83d and pair \\ud83d\\ude00"}')
    chat = load_chat(write(tmp_path / "s.jsonl", text))
    assert chat.messages[0].content == "cut emoji \ufffd and pair \U0001F600"
    export_chat_jsonl(chat).encode("utf-8")  # encodable


def test_plain_json_chunk_in_text_and_itxt(tmp_path: Path) -> None:
    card = {**V2_CARD, "data": {**V2_CARD["data"], "name": "Míra 白"}}
    raw = json.dumps(card, ensure_ascii=False)
    p = write(tmp_path / "i.png", png_bytes([("iTXt", "chara", raw)]))
    c, _spec, warnings = load_character_with_info(p)
    assert c.name == "Míra 白" and any("plain JSON" in w for w in warnings)
    # tEXt is Latin-1 only: the UTF-8 bytes of the JSON, written as Latin-1 characters
    p = write(tmp_path / "t.png", png_bytes([("tEXt", "chara", raw.encode("utf-8").decode("latin-1"))]))
    assert load_character(p).name == "Míra 白"


def test_card_given_to_chat_or_lorebook_loader(tmp_path: Path) -> None:
    p = write(tmp_path / "card.png", png_bytes([("tEXt", "chara", b64(V2_CARD))]))
    for fn in (load_chat, load_lorebook):
        exc = _err(fn, p)
        assert exc.code == "IMPORT_UNSUPPORTED_FORMAT" and "PNG" in exc.message


def test_content_parts_must_be_objects(tmp_path: Path) -> None:
    # OpenAI content arrays hold part objects; a bare number would be sent to the provider as-is
    for i, parts in enumerate(([1, 2], [{"type": "text", "text": "ok"}, "loose text"], [None])):
        exc = _err(load_chat, write(tmp_path / f"p{i}.json", [{"role": "user", "content": parts}]))
        bad = next(k for k, p in enumerate(parts) if not isinstance(p, dict))
        assert (exc.code, exc.place) == ("IMPORT_WRONG_TYPE", f"$[0].content[{bad}]")
        assert exc.file and exc.file.endswith(f"p{i}.json")
    ok = load_chat(write(tmp_path / "ok.json", [{"role": "user", "content": [
        {"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}]))
    assert ok.messages[0].text() == "look"
