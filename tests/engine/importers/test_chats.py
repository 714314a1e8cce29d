"""engine/importers/chats.py builds messages without validating them twice: the same models as validation.

``openai_message`` checks every field itself (with JSON paths in its errors) and then builds
``ChatMessage`` / ``MessageMeta`` with :func:`engine.schema._construct.construct`. These tests run
the importer twice, once as it is and once with ``construct`` replaced by the validating
constructor it stands for (``cls(**values, **extras)``, the code before), and require the very
same models: equal values, the same fields set, extras, JSON, and lists of their own.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from engine.importers import chats as chats_module
from engine.importers import load_chats
from engine.importers._fields import FieldReader
from engine.schema import ChatMessage, MessageMeta


def _validating(cls: type, values: dict[str, Any], fields_set: Any = None, extra: dict[str, Any] | None = None
                ) -> Any:
    """What the importer built before: pydantic validation of the explicitly given values and extras."""
    given = {k: values[k] for k in (fields_set or ()) if k in cls.model_fields}
    return cls(**given, **(extra or {}))


def _same(built: ChatMessage, validated: ChatMessage) -> None:
    assert built == validated
    assert built.model_fields_set == validated.model_fields_set
    assert built.model_extra == validated.model_extra
    assert built.meta.model_fields_set == validated.meta.model_fields_set
    assert built.meta.model_extra == validated.meta.model_extra
    assert built.model_dump_json() == validated.model_dump_json()
    assert built.model_dump(exclude_unset=True) == validated.model_dump(exclude_unset=True)
    assert list(built.__dict__) == list(validated.__dict__)


RAW_MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "hello"},
    {"role": "system", "content": None},
    {"role": "assistant", "content": "calling", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}},
        {"id": 7, "function": {"name": "g", "arguments": {"b": 2}, "extra_fn": True}, "index": 1}]},
    {"role": "tool", "content": "42", "tool_call_id": "c1"},
    {"role": "tool", "content": "43", "toolCallId": 9},
    {"role": "function", "name": "f", "content": "x", "callId": "c3"},
    {"role": "tool", "content": "44", "tool_call_ids": ["c4", "c5"]},
    {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "u"}}]},
    {"role": "user", "content": "flags", "meta": {"pinned": True, "manualExcluded": 0, "hidden": "false",
                                                   "swipes": ["a", "b"], "send_date": 5}},
    {"role": "user", "content": "empty meta", "meta": {}},
    {"role": "developer", "content": "odd keys", "name": "n", "_x": 1, "model_config": 2, "weird key": [3],
     "refusal": None},
]


@pytest.mark.parametrize("raw", RAW_MESSAGES, ids=lambda d: f"{d['role']}-{len(d)}")
def test_openai_message_builds_what_validation_builds(raw: dict[str, Any], monkeypatch) -> None:
    built = chats_module.openai_message(FieldReader("f.json"), copy.deepcopy(raw), "$[0]")
    monkeypatch.setattr(chats_module, "construct", _validating)
    validated = chats_module.openai_message(FieldReader("f.json"), copy.deepcopy(raw), "$[0]")
    _same(built, validated)


def test_a_plain_message_has_the_fields_set_that_validation_records() -> None:
    m = chats_module.openai_message(FieldReader("f.json"), {"role": "user", "content": "hi", "x": 1}, "$[0]")
    assert m.model_fields_set == {"role", "content", "name", "meta", "x"}
    assert m.model_extra == {"x": 1}
    assert m.meta.model_fields_set == set() and m.meta.model_extra == {}
    assert isinstance(m.meta, MessageMeta)


def test_a_content_list_is_the_messages_own_copy() -> None:
    parts = [{"type": "text", "text": "a"}]
    m = chats_module.openai_message(FieldReader("f.json"), {"role": "user", "content": parts}, "$[0]")
    assert m.content == parts and m.content is not parts


@pytest.mark.parametrize("bad, code, place", [
    ({"role": "wizard", "content": "x"}, "IMPORT_INVALID_CHAT", "$[0].role"),
    ({"role": "user", "content": 5}, "IMPORT_WRONG_TYPE", "$[0].content"),
    ({"role": "user", "content": "x", "name": [1]}, "IMPORT_WRONG_TYPE", "$[0].name"),
    ({"role": "user", "content": "x", "meta": {"pinned": "often"}}, "IMPORT_WRONG_TYPE", "$[0].meta.pinned"),
    ({"role": "tool", "content": "x", "tool_call_id": {"a": 1}}, "IMPORT_WRONG_TYPE", "$[0].tool_call_id"),
])
def test_bad_fields_still_fail_with_file_place_and_code(bad: dict[str, Any], code: str, place: str) -> None:
    from engine.errors import LoomscopeImportError

    with pytest.raises(LoomscopeImportError) as info:
        chats_module.openai_message(FieldReader("f.json"), bad, "$[0]")
    assert (info.value.code, info.value.file, info.value.place) == (code, "f.json", place)


def test_every_real_chat_imports_to_the_validated_models(shared_data: Path, monkeypatch) -> None:
    files = sorted((shared_data / "chats").iterdir())
    assert files
    for path in files:
        built = load_chats(path)
        with monkeypatch.context() as m:
            m.setattr(chats_module, "construct", _validating)
            validated = load_chats(path)
        assert len(built) == len(validated)
        for a, b in zip(built, validated):
            assert a == b
            assert a.model_dump_json() == b.model_dump_json()
            for ma, mb in zip(a.messages, b.messages, strict=True):
                _same(ma, mb)
