"""SillyTavern timestamp forms (parseTimestamp) → datetime."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.importers import load_chat, parse_send_date


@pytest.mark.parametrize(("value", "expected"), [
    (1729284721000, datetime(2024, 10, 18, 20, 52, 1, tzinfo=UTC)),
    ("1729284721000", datetime(2024, 10, 18, 20, 52, 1, tzinfo=UTC)),
    ("2024-08-07T12:30:37.813Z", datetime(2024, 8, 7, 12, 30, 37, 813000, tzinfo=UTC)),
    ("June 19, 2023 2:20pm", datetime(2023, 6, 19, 14, 20)),
    ("August 7, 2024 12:05am", datetime(2024, 8, 7, 0, 5)),
    ("2024-10-18@20h52m01s", datetime(2024, 10, 18, 20, 52, 1)),
    ("2024-07-12@01h31m37s123ms", datetime(2024, 7, 12, 1, 31, 37, 123000)),
    ("2023-4-21 @20h 02m 47s 124ms", datetime(2023, 4, 21, 20, 2, 47, 124000)),
    ("", None), (None, None), ("yesterday", None), ("Smarch 3, 2020 1:00pm", None),
    ("2023-13-45@99h00m00s", None), (True, None), ([1], None),
])
def test_forms(value: object, expected: datetime | None) -> None:
    assert parse_send_date(value) == expected


@given(st.one_of(st.text(max_size=40), st.integers(), st.floats(), st.none()))
def test_never_raises(value: object) -> None:
    result = parse_send_date(value)
    assert result is None or isinstance(result, datetime)


def test_real_chat_dates(shared_data: Path) -> None:
    for name in ("Seraphina - 2023-5-12 @21h 32m 29s 224ms.jsonl", "1673323621108.jsonl"):
        chat = load_chat(shared_data / "chats" / name)
        dates = [parse_send_date(m.meta.model_extra["send_date"]) for m in chat.messages]
        assert all(dates) and dates == sorted(dates)
