"""``engine.schema._construct``: models built from already-valid values, one or many at a time."""

from __future__ import annotations

from engine.schema._construct import construct, construct_many, model_fields_of
from engine.schema.preview import PreviewBlock


def _row(i: int) -> PreviewBlock:
    return PreviewBlock(id=f"message:{i}", kind="message", role="user", source=f"message:{i}", position=i,
                        tokens=5 + i, status="kept", reason="HISTORY", protected=False, pinned=False,
                        text=f"text {i}", message_index=i, trace={"free": i}, template_tokens=1000 + i)


def test_construct_many_equals_validated_models():
    rows = [_row(i) for i in range(5)]
    fields = set(model_fields_of(PreviewBlock))
    built = construct_many(PreviewBlock, [dict(r.__dict__) for r in rows], fields)
    assert built == rows
    assert [b.model_dump_json() for b in built] == [r.model_dump_json() for r in rows]
    assert all(b.model_fields_set == set(PreviewBlock.model_fields) for b in built)


def test_construct_many_rows_copy_independently():
    """The rows share one fields set; ``model_copy(update=)`` copies it, leaving the others as they were."""
    fields = set(model_fields_of(PreviewBlock))
    a, b = construct_many(PreviewBlock, [dict(_row(1).__dict__), dict(_row(2).__dict__)], fields)
    c = a.model_copy(update={"tokens": 99})
    assert (c.tokens, a.tokens, b.tokens) == (99, 6, 7)
    assert fields == set(PreviewBlock.model_fields)


def test_construct_takes_the_dict_as_is():
    values = dict(_row(3).__dict__)
    row = construct(PreviewBlock, values)
    assert row.__dict__ is values and row == _row(3)
