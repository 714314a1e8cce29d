"""Issue 15 (10): NaN/Infinity in imported extensions are refused with a clear error, never stored as ``null``.

Before: Python's ``json`` read ``NaN`` into a float, pydantic's JSON dump wrote it as ``null``
(SQLite) or PostgreSQL refused the row with a driver error. JSON itself (and SillyTavern's
``JSON.parse``) has no such numbers, so the importer refuses them, naming line and column.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import LoomscopeError
from engine.storage import Store
from tests.engine.importers.helpers import V2_CARD


def _card_text(extension_value: str) -> str:
    doc = json.loads(json.dumps(V2_CARD))
    doc["data"]["extensions"]["custom"] = {"weight": "__X__", "ok": 0.1}
    return json.dumps(doc, indent=1).replace('"__X__"', extension_value)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_number_is_refused_with_its_place_and_nothing_is_stored(store: Store, tmp_path: Path,
                                                                            literal: str) -> None:
    card = tmp_path / "card.json"
    card.write_text(_card_text(literal), encoding="utf-8")
    with pytest.raises(LoomscopeError) as err:
        store.imports.files([card])
    e = err.value
    assert e.code == "IMPORT_INVALID_JSON" and e.file == str(card)
    assert literal in e.message and e.place and e.place.startswith("line ")
    line = int(e.place.split()[1].rstrip(","))
    assert literal in card.read_text().splitlines()[line - 1]
    assert store.characters.summaries() == []


def test_extreme_but_finite_numbers_round_trip_exactly(store: Store, tmp_path: Path) -> None:
    card = tmp_path / "card.json"
    card.write_text(_card_text("1.7976931348623157e308"), encoding="utf-8")
    [ref] = store.imports.files([card])
    custom = store.characters.get(ref.id).extensions["custom"]
    assert custom == {"weight": 1.7976931348623157e308, "ok": 0.1}
