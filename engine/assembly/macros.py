"""SillyTavern macro expansion (``{{char}}``, ``{{user}}``, ``<BOT>``, ...), done before counting.

Supported (names are case-insensitive, as in SillyTavern): ``{{char}}`` / ``<BOT>`` /
``<CHAR>``, ``{{user}}`` / ``<USER>``, ``{{persona}}``, ``{{description}}``,
``{{personality}}``, ``{{scenario}}``, ``{{mesExamples}}``, ``{{charPrompt}}``,
``{{charJailbreak}}``, ``{{original}}`` (only where a card overrides a prompt; elsewhere it is
empty), ``{{model}}``, ``{{maxPrompt}}``, ``{{lastMessage}}``, ``{{lastUserMessage}}``,
``{{lastCharMessage}}``, ``{{input}}``, ``{{newline}}``, ``{{trim}}``, ``{{noop}}``,
``{{// comment}}``, ``{{time}}``, ``{{date}}``, ``{{weekday}}``, ``{{isotime}}``,
``{{isodate}}``, ``{{random::a::b}}`` / ``{{random:a,b}}`` and ``{{pick::a::b}}`` (seeded, so
counts are deterministic), ``{{roll:NdM}}`` (seeded), ``{{charVersion}}``, ``{{group}}``.
An unknown macro is left as written and reported.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

_MACRO = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_LEGACY = re.compile(r"<(BOT|USER|CHAR)>", re.IGNORECASE)
# Bounded digit counts: a 5,000-digit number would exceed Python's int-conversion limit (ValueError);
# a roll this long is left as written (an unknown macro) instead.
_ROLL = re.compile(r"^(\d{0,6})d(\d{1,9})([+-]\d{1,9})?$", re.IGNORECASE)


@dataclass
class MacroContext:
    """Values for macros. ``now`` fixes the clock (tests, reproducible previews)."""

    user: str = "User"
    char: str = ""
    values: Mapping[str, str] = field(default_factory=dict)
    original: str | None = None
    seed: int = 0
    now: datetime | None = None


def expand_macros(text: str, ctx: MacroContext) -> tuple[str, list[str]]:
    """Expand macros in ``text``.

    Returns
    -------
    (text, unknown):
        The expanded text and the unknown macros found (as written, e.g. ``"{{foo}}"``),
        which stay in the text unchanged.
    """
    if not text or ("{{" not in text and "<" not in text):
        return text, []
    unknown: list[str] = []
    rng = random.Random(f"{ctx.seed}:{text}")
    values = {k.lower(): v for k, v in ctx.values.items()}
    now = ctx.now or datetime.now()

    def one(match: re.Match[str]) -> str:
        raw = match.group(1)
        body = raw.strip()
        low = body.lower()
        if low.startswith("//"):
            return ""
        if low in ("char", "charname", "bot"):
            return ctx.char
        if low in ("user", "username"):
            return ctx.user
        if low == "original":
            return ctx.original or ""
        if low in ("newline",):
            return "\n"
        if low in ("noop", "trim"):
            return ""
        # Built by hand: "%-I" / "%-d" are glibc-only and raise ValueError on Windows.
        if low == "time":
            return f"{now.hour % 12 or 12}:{now.minute:02d} {'AM' if now.hour < 12 else 'PM'}"
        if low == "date":
            return f"{now.strftime('%B')} {now.day}, {now.year}"
        if low == "weekday":
            return now.strftime("%A")
        if low == "isotime":
            return now.strftime("%H:%M")
        if low == "isodate":
            return now.strftime("%Y-%m-%d")
        if low in values:
            return values[low]
        for prefix in ("random::", "pick::"):
            if low.startswith(prefix):
                options = body[len(prefix):].split("::")
                return rng.choice(options) if options else ""
        if low.startswith("random:"):
            options = [o.strip() for o in body[len("random:"):].split(",")]
            return rng.choice(options) if options else ""
        if low.startswith("roll:") or low.startswith("roll "):
            m = _ROLL.match(body[5:].strip())
            if m:
                count = int(m.group(1) or 1)
                sides = int(m.group(2))
                bonus = int(m.group(3) or 0)
                return str(sum(rng.randint(1, max(sides, 1)) for _ in range(min(count, 100))) + bonus)
        unknown.append(match.group(0))
        return match.group(0)

    out = _MACRO.sub(one, text)
    out = _LEGACY.sub(lambda m: ctx.user if m.group(1).upper() == "USER" else ctx.char, out)
    if "{{trim}}" in text.lower():
        out = out.strip()
    return out, unknown
