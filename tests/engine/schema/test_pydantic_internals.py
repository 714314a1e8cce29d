"""The pydantic internals the engine relies on (issue 29 item 7), checked one by one with a loud message.

pyproject.toml bounds pydantic below the next minor release for these; before raising the bound,
run this module against the new release. What the engine does outside pydantic's public API:

* builds validated-equivalent instances with ``object.__new__`` and sets ``__dict__`` plus the
  three slots ``__pydantic_fields_set__``, ``__pydantic_extra__``, ``__pydantic_private__``
  through ``BaseModel``'s own slot descriptors (:mod:`engine.schema._construct`: preview rows,
  lorebook trace records, imported chats);
* reads a model's field values as its ``__dict__`` and its extras as ``__pydantic_extra__``
  (:mod:`engine.incremental`'s change keys, :mod:`engine.lorebook.prepare`);
* takes ``model_fields``' order as the field order (:mod:`engine.lorebook.prepare`).
"""

from __future__ import annotations

import tomllib
import types
from pathlib import Path

import pydantic
import pytest
from pydantic import BaseModel

from engine.schema import ChatMessage, LorebookEntry
from engine.schema._construct import construct, construct_many, model_fields_of
from engine.schema.preview import PreviewBlock

ROOT = Path(__file__).resolve().parents[3]
SLOTS = ("__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__")


def _changed(what: str) -> str:
    return (f"pydantic {pydantic.VERSION} changed an internal Loomscope relies on: {what}. "
            "Fix engine/schema/_construct.py (and engine/incremental.py, engine/lorebook/prepare.py) "
            "before raising the pydantic bound in pyproject.toml.")


def _row(i: int) -> PreviewBlock:
    return PreviewBlock(id=f"message:{i}", kind="message", role="user", source=f"message:{i}", position=i,
                        tokens=5 + i, status="kept", reason="HISTORY", protected=False, pinned=False,
                        text=f"text {i}", message_index=i, trace={"free": i}, template_tokens=1000 + i)


def test_the_installed_pydantic_is_inside_the_bound() -> None:
    """pyproject's upper bound holds for the installed release (the bound is what this module vouches for)."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    spec = next(d for d in deps if d.replace(" ", "").startswith("pydantic>="))
    upper = spec.split("<", 1)[1].strip()
    assert "<" in spec, "pyproject.toml must bound pydantic from above (issue 29 item 7)"
    major, minor = (int(x) for x in pydantic.VERSION.split(".")[:2])
    bound_major, bound_minor = (int(x) for x in upper.split(".")[:2])
    assert (major, minor) < (bound_major, bound_minor), _changed(f"installed {pydantic.VERSION} is not below {upper}")


@pytest.mark.parametrize("slot", SLOTS)
def test_base_model_keeps_its_three_slots(slot: str) -> None:
    """``BaseModel.__slots__`` holds each slot, as a member descriptor ``_construct`` sets directly."""
    assert slot in BaseModel.__slots__, _changed(f"BaseModel.__slots__ no longer has {slot}")
    assert isinstance(BaseModel.__dict__.get(slot), types.MemberDescriptorType), _changed(
        f"BaseModel.{slot} is no longer a slot descriptor")


def test_field_values_are_the_instance_dict() -> None:
    """A validated model's ``__dict__`` is exactly its field values, in ``model_fields`` order."""
    row = _row(1)
    assert list(row.__dict__) == list(PreviewBlock.model_fields), _changed(
        "a model's __dict__ is no longer its fields in model_fields order")
    assert row.__dict__["tokens"] == 6


def test_extras_live_in_pydantic_extra() -> None:
    """``extra="allow"`` models keep unknown keys in ``__pydantic_extra__`` ({} when none); others have ``None``."""
    m = ChatMessage.model_validate({"role": "user", "content": "hi", "x_custom": 1})
    assert m.__pydantic_extra__ == {"x_custom": 1} and m.model_extra == {"x_custom": 1}, _changed(
        "extras are no longer held in __pydantic_extra__")
    assert ChatMessage(role="user", content="hi").__pydantic_extra__ == {}, _changed(
        "an extra='allow' model without extras no longer has {} in __pydantic_extra__")
    assert _row(0).__pydantic_extra__ is None, _changed("a model without extras no longer has None there")


def test_a_constructed_model_behaves_as_the_validated_one() -> None:
    """Equality, dumps, JSON, ``model_copy(update=)`` and frozenness of a ``construct``-ed row."""
    want = _row(2)
    got = construct(PreviewBlock, dict(want.__dict__))
    assert got == want, _changed("a constructed model no longer equals the validated one")
    assert got.model_dump() == want.model_dump() and got.model_dump_json() == want.model_dump_json(), _changed(
        "a constructed model dumps differently")
    assert got.model_fields_set == set(PreviewBlock.model_fields), _changed("model_fields_set is not read from its slot")
    copy = got.model_copy(update={"tokens": 1})
    assert (copy.tokens, got.tokens) == (1, want.tokens), _changed("model_copy(update=) of a constructed model")
    with pytest.raises(pydantic.ValidationError):
        got.tokens = 3  # type: ignore[misc]  # frozen


def test_constructed_models_with_extras_and_in_bulk() -> None:
    """``construct`` with extras (imported messages, lorebook entries) and ``construct_many`` (preview rows)."""
    want = ChatMessage.model_validate({"role": "user", "content": "hi", "x_custom": 1})
    got = construct(ChatMessage, dict(want.__dict__), want.model_fields_set, dict(want.__pydantic_extra__ or {}))
    assert got == want and got.model_dump() == want.model_dump(), _changed("construct with extras")
    entry = LorebookEntry(uid=1, keys=["a"], content="x")
    assert construct(LorebookEntry, dict(entry.__dict__), entry.model_fields_set, {}) == entry
    rows = [_row(i) for i in range(3)]
    built = construct_many(PreviewBlock, [dict(r.__dict__) for r in rows], set(model_fields_of(PreviewBlock)))
    assert built == rows and [b.model_dump_json() for b in built] == [r.model_dump_json() for r in rows], _changed(
        "construct_many (slot descriptors applied in bulk)")
