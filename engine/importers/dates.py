"""SillyTavern ``send_date`` / ``create_date`` values → :class:`datetime.datetime`.

Rules borrowed from SillyTavern ``public/scripts/utils.js`` ``parseTimestamp`` (FORMATS.md b5):
unix milliseconds (number or digit string), ISO 8601, ``"June 19, 2023 2:20pm"``, and the
humanized ``2024-10-18@20h52m01s``, ``2024-07-12@01h31m37s123ms`` and
``2023-4-21 @20h 02m 47s 124ms`` forms. The importers keep the original value untouched (for
round trips); this helper is for code that needs a time (sorting, display, storage).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

_MONTHS = {m: i for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"], start=1)}
_MERIDIEM = re.compile(r"(\w+)\s(\d{1,2}),\s(\d{4})\s(\d{1,2}):(\d{1,2})\s?(am|pm)", re.I)
_HUMANIZED = [
    re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})@(\d{1,2})h(\d{1,2})m(\d{1,2})s(\d{1,3})ms"),
    re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})@(\d{1,2})h(\d{1,2})m(\d{1,2})s"),
    re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2}) ?@(\d{1,2})h ?(\d{1,2})m ?(\d{1,2})s ?(\d{1,3})ms"),
    re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2}) ?@(\d{1,2})h ?(\d{1,2})m ?(\d{1,2})s"),
]


def parse_send_date(value: Any) -> datetime | None:
    """Parse a SillyTavern timestamp; ``None`` when it is missing or not understood.

    Returns
    -------
    datetime | None
        Timezone-aware (UTC) for unix milliseconds and ISO strings with a zone; naive (the
        writer's local time, as SillyTavern wrote it) for the human-readable forms.
    """
    if value is None or isinstance(value, bool) or value == "":
        return None
    try:
        if isinstance(value, (int, float)) or (isinstance(value, str) and value.strip().isascii() and value.strip().isdigit()):
            ms = float(value)
            if ms < 0 or ms != ms or ms > 1e15:
                return None
            return datetime.fromtimestamp(ms / 1000, tz=UTC)
        if not isinstance(value, str):
            return None
        text = value.strip()
        try:
            iso = datetime.fromisoformat(text.replace("Z", "+00:00"))
            return iso
        except ValueError:
            pass
        m = _MERIDIEM.search(text)
        if m:
            month = _MONTHS.get(m.group(1).lower())
            if month is None:
                return None
            hour = int(m.group(4)) % 12 + (12 if m.group(6).lower() == "pm" else 0)
            return datetime(int(m.group(3)), month, int(m.group(2)), hour, int(m.group(5)))
        for pattern in _HUMANIZED:
            m = pattern.search(text)
            if m:
                parts = [int(g) for g in m.groups()]
                year, month, day, hour, minute, second = parts[:6]
                ms = parts[6] if len(parts) > 6 else 0
                return datetime(year, month, day, hour, minute, second, ms * 1000)
    except (ValueError, OverflowError, OSError):
        return None
    return None
