"""``ContextPreview.blocks`` as a :class:`~engine.schema.preview.PreviewRows` (a warm preview's rows,
built on first read) reads, compares, copies and serializes as the list it stands for."""

from __future__ import annotations

import copy
import json
import pickle

import pytest
from pydantic import TypeAdapter

from engine.schema import ContextPreview, PreviewBlock, PreviewRows, TokenizerInfo


def _rows(n: int = 3) -> list[PreviewBlock]:
    return [PreviewBlock(id=f"b{k}", kind="chat", role="user", source=f"message:{k}", position=k, tokens=5 + k,
                         status="kept" if k else "excluded", reason="FITS" if k else "OUT_OF_BUDGET",
                         protected=False, pinned=False, text=f"turn {k}", message_index=k, fit_window=100 + k)
            for k in range(n)]


def _preview(blocks: object) -> ContextPreview:
    return ContextPreview.model_construct(
        model="gpt-4o", tokenizer=TokenizerInfo(profile="o200k_base", approximate=False), context_limit=1000,
        reply_reserve=100, budget=900, safety_margin=0, headroom=880, prompt_tokens=20, strategy="truncate",
        blocks=blocks)


def _lazy(rows: list[PreviewBlock]) -> tuple[PreviewRows, list[int]]:
    calls: list[int] = []

    def build() -> list[PreviewBlock]:
        calls.append(1)
        return rows

    return PreviewRows(len(rows), build), calls


def test_len_builds_nothing_and_the_first_read_builds_once() -> None:
    rows = _rows()
    lazy, calls = _lazy(rows)
    assert len(lazy) == 3 and lazy.built is None and calls == []
    assert lazy[1] is rows[1] and lazy[-1] is rows[2] and lazy[0:2] == rows[:2] and type(lazy[0:2]) is list
    assert list(lazy) == rows and list(reversed(lazy)) == rows[::-1] and rows[0] in lazy
    assert lazy.index(rows[2]) == 2 and lazy.count(rows[0]) == 1 and lazy.copy() == rows
    assert calls == [1] and lazy.built is rows


def test_equal_to_its_list_either_way_round_and_to_another_preview_rows() -> None:
    rows = _rows()
    lazy, _ = _lazy(rows)
    assert lazy == rows and rows == lazy and lazy == PreviewRows(3, lambda: list(rows))
    assert lazy != _rows(2) and lazy != "abc"
    assert lazy + rows[:1] == [*rows, rows[0]] and rows[:1] + lazy == [rows[0], *rows]
    with pytest.raises(TypeError):
        hash(lazy)


def test_a_preview_with_preview_rows_serializes_and_compares_as_with_the_list() -> None:
    rows = _rows()
    eager, lazy = _preview(rows), _preview(_lazy(rows)[0])
    assert lazy.model_dump_json() == eager.model_dump_json()
    assert lazy.model_dump() == eager.model_dump() and lazy.model_dump(mode="json") == eager.model_dump(mode="json")
    assert type(lazy).__pydantic_serializer__.to_json(lazy, indent=2) == eager.model_dump_json(indent=2).encode()
    assert lazy == eager and eager == lazy
    back = ContextPreview.model_validate_json(lazy.model_dump_json())
    assert back == eager and type(back.blocks) is list
    assert lazy.model_dump(exclude={"blocks"}) == eager.model_dump(exclude={"blocks"})


def test_pickle_copy_and_deepcopy_give_lists() -> None:
    rows = _rows()
    lazy = _preview(_lazy(rows)[0])
    for other in (pickle.loads(pickle.dumps(lazy)), copy.deepcopy(lazy)):
        assert type(other.blocks) is list and other == lazy
    assert copy.copy(lazy).blocks is lazy.blocks  # a shallow copy shares the (read-only) rows


def test_the_json_schema_is_the_lists() -> None:
    """The field's serializer keeps ``blocks`` an array of ``PreviewBlock`` in both schemas (the API's OpenAPI)."""
    for mode in ("validation", "serialization"):
        schema = ContextPreview.model_json_schema(mode=mode)  # type: ignore[arg-type]
        assert schema["properties"]["blocks"]["items"] == {"$ref": "#/$defs/PreviewBlock"}
        assert schema["properties"]["blocks"]["type"] == "array"
    ta = TypeAdapter(list[PreviewBlock])
    assert json.loads(_preview(_lazy(_rows())[0]).model_dump_json())["blocks"] == json.loads(ta.dump_json(_rows()))


def test_a_builder_that_returns_another_number_of_rows_is_an_error() -> None:
    lazy = PreviewRows(4, lambda: _rows(3))
    with pytest.raises(ValueError, match="built 3 rows for 4 blocks"):
        lazy.rows()


def test_serialized_inside_other_models_and_by_the_api_layer_as_the_list() -> None:
    """pydantic-core serializes a nested preview without calling its methods (a ``TypeAdapter``, a
    parent model, FastAPI's response encoding): the field's serializer builds the rows there too."""
    from fastapi.encoders import jsonable_encoder
    from pydantic import BaseModel

    class Envelope(BaseModel):
        preview: ContextPreview

    rows = _rows()
    eager = _preview(rows)
    expected = json.loads(eager.model_dump_json())
    assert json.loads(TypeAdapter(ContextPreview).dump_json(_preview(_lazy(rows)[0]))) == expected
    assert TypeAdapter(ContextPreview).dump_python(_preview(_lazy(rows)[0]), mode="json") == expected
    assert json.loads(Envelope.model_construct(preview=_preview(_lazy(rows)[0])).model_dump_json()) == {
        "preview": expected}
    assert jsonable_encoder(_preview(_lazy(rows)[0])) == expected


@pytest.mark.parametrize("lazy", [False, True])
def test_nested_include_and_exclude_under_blocks_apply(lazy: bool) -> None:
    rows = _rows()
    pv = _preview(_lazy(rows)[0] if lazy else rows)
    ta = TypeAdapter(list[PreviewBlock])
    assert json.loads(pv.model_dump_json(include={"blocks": {0: {"id"}}})) == {"blocks": [{"id": "b0"}]}
    dumped = pv.model_dump(exclude={"blocks": {"__all__": {"text", "trace"}}})
    assert dumped["blocks"] == ta.dump_python(rows, exclude={"__all__": {"text", "trace"}})
    assert pv.model_dump(mode="json", exclude={"blocks": {"__all__": {"reason_data"}}}, exclude_none=True)["blocks"] == (
        ta.dump_python(rows, mode="json", exclude={"__all__": {"reason_data"}}, exclude_none=True))
    assert pv.model_dump(exclude={"blocks": True}) == _preview(rows).model_dump(exclude={"blocks"})
