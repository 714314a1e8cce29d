"""Macro edge cases: portable time/date text, absurd dice never crash."""

from __future__ import annotations

import time
from datetime import datetime

import pytest

from engine.assembly import MacroContext
from engine.assembly.macros import expand_macros


@pytest.mark.parametrize(("now", "time_text", "date_text"), [
    (datetime(2026, 11, 29, 22, 5), "10:05 PM", "November 29, 2026"),
    (datetime(2026, 1, 3, 0, 7), "12:07 AM", "January 3, 2026"),
    (datetime(2026, 7, 4, 12, 0), "12:00 PM", "July 4, 2026"),
    (datetime(2026, 7, 4, 9, 30), "9:30 AM", "July 4, 2026"),
])
def test_time_and_date_like_sillytavern_without_platform_strftime(now, time_text, date_text, monkeypatch) -> None:
    # "%-I" / "%-d" are glibc extensions (ValueError on Windows): the text must not depend on them
    real = datetime.strftime

    def strict(self, fmt):  # behave like Windows: no "-" flag
        if "%-" in fmt:
            raise ValueError("Invalid format string")
        return real(self, fmt)

    class StrictDatetime(datetime):
        strftime = strict

    strict_now = StrictDatetime(now.year, now.month, now.day, now.hour, now.minute)
    out, unknown = expand_macros("{{time}} | {{date}}", MacroContext(user="U", char="C", now=strict_now))
    assert out == f"{time_text} | {date_text}" and unknown == []


@pytest.mark.parametrize("macro", ["{{roll:1d" + "9" * 5000 + "}}", "{{roll:" + "9" * 5000 + "d6}}",
                                   "{{roll:2d6+" + "1" * 5000 + "}}"])
def test_absurd_dice_are_left_as_written(macro) -> None:
    start = time.perf_counter()
    out, unknown = expand_macros(f"a {macro} b", MacroContext(user="U", char="C"))
    assert out == f"a {macro} b" and unknown == [macro]
    assert time.perf_counter() - start < 1.0
