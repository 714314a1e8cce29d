"""``ContextPreview.blocks`` is a plain list of frozen rows, and :func:`engine.schema.preview_changes` says
where two previews' rows differ (issue 29 item 3)."""

from __future__ import annotations

import copy
import json
import pickle

from pydantic import TypeAdapter

from engine.schema import ContextPreview, Explanation, PreviewBlock, TokenizerInfo, preview_changes


def _rows(n: int = 3) -> list[PreviewBlock]:
    return [PreviewBlock(id=f"b{k}", kind="chat", role="user", source=f"message:{k}", position=k, tokens=5 + k,
                         status="kept" if k else "excluded", reason="FITS" if k else "OUT_OF_BUDGET",
                         protected=False, pinned=False, text=f"turn {k}", message_index=k)
            for k in range(n)]


def _preview(blocks: list[PreviewBlock], fits: list[int | None] | None = None,
             details: list[Explanation | None] | None = None) -> ContextPreview:
    return ContextPreview(
        model="gpt-4o", tokenizer=TokenizerInfo(profile="o200k_base", approximate=False), context_limit=1000,
        reply_reserve=100, budget=900, safety_margin=0, headroom=880, prompt_tokens=20, strategy="truncate",
        blocks=blocks, fit_windows=fits if fits is not None else [100 + k for k in range(len(blocks))],
        reason_details=details if details is not None else [None] * len(blocks))


def test_blocks_are_a_plain_list_that_pickles_copies_and_serializes() -> None:
    rows = _rows()
    pv = _preview(rows)
    assert type(pv.blocks) is list and pv.blocks == rows
    assert pickle.loads(pickle.dumps(pv)).blocks == rows
    assert copy.deepcopy(pv).blocks == rows
    dumped = json.loads(pv.model_dump_json())["blocks"]
    plain = TypeAdapter(list[PreviewBlock]).dump_python(rows, mode="json")
    # each row's JSON carries the preview's figures, in the place the fields had (before ``span``)
    assert dumped == [{**{k: v for k, v in r.items() if k != "span"}, "reason_detail": None, "reason_data": None,
                       "fit_window": 100 + k, "span": None} for k, r in enumerate(plain)]
    assert list(dumped[0])[-4:] == ["reason_detail", "reason_data", "fit_window", "span"]
    assert pv.model_dump(include={"blocks": {0: {"id"}}})["blocks"] == [{"id": "b0"}]
    assert pv.model_dump(include={"blocks": {"__all__": {"id", "fit_window"}}})["blocks"][2] == {
        "id": "b2", "fit_window": 102}
    assert "fit_window" not in pv.model_dump(exclude={"blocks": {"__all__": {"fit_window"}}})["blocks"][0]


def test_the_row_figures_round_trip_through_json() -> None:
    """A preview read back from its JSON has the same columns (``ContextPreview._figures_in``)."""
    why = Explanation("needs 12 tokens but only 3 of the 900-token budget are free", {"free": 3, "tokens": 12})
    pv = _preview(_rows(3), fits=[None, 101, 102], details=[why, None, None])
    back = ContextPreview.model_validate_json(pv.model_dump_json())
    assert back.fit_windows == [None, 101, 102] and back.reason_details == [why, None, None]
    assert back.blocks == pv.blocks and back.model_dump_json() == pv.model_dump_json()
    row = json.loads(pv.model_dump_json())["blocks"][0]
    assert (row["reason_detail"], row["reason_data"]) == (why.text, why.data)
    assert "fit_window" not in pv.model_dump(exclude_none=True)["blocks"][0]


def test_the_json_schema_of_blocks_is_the_lists() -> None:
    schema = ContextPreview.model_json_schema()
    assert schema["properties"]["blocks"]["type"] == "array"
    assert schema["properties"]["blocks"]["items"] == {"$ref": "#/$defs/PreviewBlock"}


def test_preview_changes_names_each_moved_field_and_nothing_else() -> None:
    rows = _rows(5)
    new_rows = list(rows)
    new_rows[1] = rows[1].model_copy(update={"status": "excluded", "reason": "OUT_OF_BUDGET"})
    new_rows[4] = rows[4].model_copy(update={"tokens": 99})
    new_rows[0] = rows[0].model_copy()  # a new object, equal
    fits = [100, 101, 7, 103, 104]  # row 2's fit window moved
    details: list[Explanation | None] = [None, None, None, Explanation("x", {"free": 3}), None]  # row 3's reason
    changes = preview_changes(_preview(rows), _preview(new_rows, fits, details))
    assert changes is not None
    assert changes.rows == [0, 1, 4]
    assert (changes.block, changes.status, changes.reason, changes.reason_detail, changes.fit_window) == (
        [4], [1], [1], [3], [2])


def test_preview_changes_of_other_rows_is_none() -> None:
    rows = _rows(3)
    assert preview_changes(_preview(rows), _preview(rows[:2])) is None
    moved = [rows[0], rows[1], rows[2].model_copy(update={"source": "message:9", "message_index": 9})]
    assert preview_changes(_preview(rows), _preview(moved)) is None
    same = preview_changes(_preview(rows), _preview(list(rows)))
    assert same is not None and same.rows == []


def test_row_picks_keep_each_rows_own_figures() -> None:
    """``include`` / ``exclude`` by row number (negative from the end) pick rows with their own figures."""
    pv = _preview(_rows(4), fits=[100, 101, 102, 103])
    assert [(r["id"], r["fit_window"]) for r in pv.model_dump(exclude={"blocks": {1}})["blocks"]] == [
        ("b0", 100), ("b2", 102), ("b3", 103)]
    assert [(r["id"], r["fit_window"]) for r in pv.model_dump(include={"blocks": {0, 3}})["blocks"]] == [
        ("b0", 100), ("b3", 103)]
    assert "fit_window" not in pv.model_dump(exclude={"blocks": {-1: {"fit_window"}}})["blocks"][3]
    assert pv.model_dump(exclude={"blocks": {-1: {"fit_window"}}})["blocks"][2]["fit_window"] == 102


def test_the_serialization_schema_describes_each_json_row() -> None:
    """The API's response schema: rows typed, with the figures before ``span`` as they are written."""
    schema = ContextPreview.model_json_schema(mode="serialization")
    assert schema["properties"]["blocks"] == {"items": {"$ref": "#/$defs/PreviewBlock"}, "title": "Blocks",
                                              "type": "array"}
    assert list(schema["$defs"]["PreviewBlock"]["properties"])[-4:] == [
        "reason_detail", "reason_data", "fit_window", "span"]
