"""SillyTavern's macro engine (``{{char}}``, ``{{user}}``, ``<BOT>``, ``{{getvar::x}}``, ...), done before counting.

One engine for every place SillyTavern evaluates macros: the stage pipeline, the Chat Completion
path (``engine.assembly.sillytavern``), World Info content and keys (handed to
:func:`engine.lorebook.activate` as a callable) and the Text Completion path. It is a literal
reading of SillyTavern 1.12.6 ``evaluateMacros`` (``public/scripts/macros.js`` 417–492) with
``substituteParams``'s environment (``script.js`` 2474–2533): a fixed sequence of global,
case-insensitive replacements, so the order decides nested cases (``{{user}}`` inside a
``{{// comment}}`` is replaced first, then the comment goes):

1. legacy ``<USER>``, ``<BOT>``, ``<CHAR>``, ``<CHARIFNOTGROUP>``, ``<GROUP>``; no ``{{``: done;
2. ``{{roll:NdM}}`` (droll's formula; seeded; an invalid one becomes empty);
3. instruct macros (``{{instructInput}}``, ``{{systemPrompt}}``, ``{{chatStart}}``, ...) from
   ``values`` when the caller gives them;
4. variables, line by line (``variables.js`` ``replaceVariableMacros``): ``getvar``,
   ``setvar``, ``addvar``, ``incvar``, ``decvar`` on ``chat_metadata.variables``
   (:attr:`MacroContext.variables`, changed in place) and the ``*globalvar`` forms on
   :attr:`MacroContext.global_variables`;
5. ``{{newline}}``, ``{{trim}}`` (with the line breaks around it), ``{{noop}}``, ``{{input}}``;
6. the environment in SillyTavern's order: ``charPrompt``, ``charJailbreak``, ``description``,
   ``personality``, ``scenario``, ``persona``, ``mesExamples``, ``charVersion``,
   ``char_version``, ``user``, ``char``, ``group``, ``charIfNotGroup``, ``model``, then any
   other value given;
7. ``maxPrompt``, ``lastMessage``, ``lastMessageId``, ``lastUserMessage``, ``lastCharMessage``,
   ``firstIncludedMessageId``, ``lastSwipeId``, ``currentSwipeId`` (from ``values``),
   ``{{reverse:…}}``, ``{{// comments}}``, ``{{time}}``, ``{{date}}``, ``{{weekday}}``,
   ``{{isotime}}``, ``{{isodate}}``, ``{{time_UTC±N}}``, ``{{banned "…"}}`` (removed),
   ``{{random…}}`` and ``{{pick…}}`` (seeded, so counts are deterministic).

``{{original}}`` is filled from :attr:`MacroContext.original` (empty without one). A ``{{…}}``
left at the end is an unknown macro: it stays as written and is reported.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from ..lorebook.st_hash import js_number, js_number_string

__all__ = ["MacroContext", "expand_macros", "macro_function"]

_LEFT = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
# droll.parse (public/lib/droll.js 61); digits bounded: an absurd roll is left as written
_DROLL = re.compile(r"^([1-9]\d*)?d([1-9]\d*)([+-]\d+)?$", re.IGNORECASE)
_ROLL_OK = re.compile(r"^(\d{0,6})d(\d{1,9})([+-]\d{1,9})?$", re.IGNORECASE)
_ROLL = re.compile(r"\{\{roll[ :]([^}]+)\}\}", re.IGNORECASE)
_TRIM = re.compile(r"(?:\r?\n)*\{\{trim\}\}(?:\r?\n)*", re.IGNORECASE)
_COMMENT = re.compile(r"\{\{//([\s\S]*?)\}\}")
_REVERSE = re.compile(r"\{\{reverse:(.+?)\}\}", re.IGNORECASE)
_UTC = re.compile(r"\{\{time_UTC([-+]\d+)\}\}", re.IGNORECASE)
_BANNED = re.compile(r'\{\{banned "(.*)"\}\}', re.IGNORECASE)
_RANDOM = re.compile(r"\{\{random\s?::?([^}]+)\}\}", re.IGNORECASE)
_PICK = re.compile(r"\{\{pick\s?::?([^}]+)\}\}", re.IGNORECASE)

#: ``substituteParams``'s environment, in its order (script.js 2509–2526).
ENV_ORDER = ("charPrompt", "charJailbreak", "description", "personality", "scenario", "persona", "mesExamples",
             "charVersion", "char_version", "user", "char", "group", "charIfNotGroup", "model")
#: Replaced after the environment (macros.js 459–466).
LATE_VALUES = ("maxPrompt", "lastMessage", "lastMessageId", "lastUserMessage", "lastCharMessage",
               "firstIncludedMessageId", "lastSwipeId", "currentSwipeId")
#: ``replaceInstructMacros`` names (instruct-mode.js 576–611); values come from the caller.
INSTRUCT_NAMES = ("instructSystemPromptPrefix", "instructSystemPromptSuffix", "instructInput", "instructUserPrefix",
                  "instructUserSuffix", "instructOutput", "instructAssistantPrefix", "instructSeparator",
                  "instructAssistantSuffix", "instructSystemPrefix", "instructSystemSuffix", "instructFirstOutput",
                  "instructFirstAssistantPrefix", "instructLastOutput", "instructLastAssistantPrefix",
                  "instructStop", "instructUserFiller", "instructSystemInstructionPrefix", "instructFirstInput",
                  "instructFirstUserPrefix", "instructLastInput", "instructLastUserPrefix", "systemPrompt",
                  "defaultSystemPrompt", "instructSystem", "instructSystemPrompt", "exampleSeparator", "chatStart")
_SPECIAL = {n.lower() for n in (*ENV_ORDER, *LATE_VALUES, *INSTRUCT_NAMES, "input", "original")}


@dataclass
class MacroContext:
    """Values for macros.

    Attributes
    ----------
    user, char:
        ``name1`` / ``name2``.
    values:
        Other macro values by name (case-insensitive): the card fields, ``persona``, ``model``,
        ``maxPrompt``, ``lastMessage``, ``input``, instruct sequences, ...
    original:
        ``{{original}}`` (empty when ``None``).
    seed:
        Seeds ``{{random}}``, ``{{pick}}`` and ``{{roll}}`` (SillyTavern rolls them at random).
    now:
        Fixes the clock (tests, reproducible previews).
    variables, global_variables:
        ``chat_metadata.variables`` and ``extension_settings.variables.global``: read by
        ``{{getvar}}``, changed in place by ``{{setvar}}`` / ``{{addvar}}`` / ``{{incvar}}``, so
        later texts of the same assembly see the change, as in SillyTavern.
    """

    user: str = "User"
    char: str = ""
    values: Mapping[str, str] = field(default_factory=dict)
    original: str | None = None
    seed: int = 0
    now: datetime | None = None
    variables: dict[str, Any] = field(default_factory=dict)
    global_variables: dict[str, Any] = field(default_factory=dict)


def expand_macros(text: str, ctx: MacroContext) -> tuple[str, list[str]]:
    """Expand macros in ``text`` as SillyTavern's ``evaluateMacros`` does (see the module doc).

    Returns
    -------
    (text, unknown):
        The expanded text and the unknown macros found (as written, e.g. ``"{{foo}}"``),
        which stay in the text unchanged.
    """
    if not text or ("{{" not in text and "<" not in text):
        return text, []
    raw = text
    values = {k.lower(): ("" if v is None else str(v)) for k, v in ctx.values.items()}
    group = values.get("group", ctx.char)
    for pat, rep in ((r"<USER>", ctx.user), (r"<BOT>", ctx.char), (r"<CHAR>", ctx.char),
                     (r"<CHARIFNOTGROUP>", group), (r"<GROUP>", group)):
        text = re.sub(pat, _lit(rep), text, flags=re.IGNORECASE)
    if "{{" not in text:
        return text, []
    rng = random.Random(f"{ctx.seed}:{raw}")
    text = _ROLL.sub(lambda m: _roll(m, rng), text)
    for name in INSTRUCT_NAMES:
        if name.lower() in values:
            text = _replace(text, name, values[name.lower()])
    text = _variables(text, ctx)
    text = re.sub(r"\{\{newline\}\}", "\n", text, flags=re.IGNORECASE)
    text = _TRIM.sub("", text)
    text = re.sub(r"\{\{noop\}\}", "", text, flags=re.IGNORECASE)
    if "input" in values:
        text = _replace(text, "input", values["input"])
    text = _environment(text, ctx, values, group)
    for name in LATE_VALUES:
        if name.lower() in values:
            text = _replace(text, name, values[name.lower()])
    text = _REVERSE.sub(lambda m: m.group(1)[::-1], text)
    text = _COMMENT.sub("", text)
    text = _clock(text, ctx.now or datetime.now())
    text = _BANNED.sub("", text)
    text = _RANDOM.sub(lambda m: _choose(m.group(1), rng), text)
    text = _PICK.sub(lambda m: _choose(m.group(1), random.Random(f"{ctx.seed}:{raw}:{m.start()}")), text)
    unknown = [m.group(0) for m in _LEFT.finditer(text)]
    return text, unknown


def macro_function(ctx: MacroContext, on_unknown: Callable[[list[str]], None] | None = None) -> Callable[[str], str]:
    """``substituteParams`` bound to ``ctx``: ``text -> expanded text`` (World Info's hook).

    ``on_unknown`` receives the unknown macros of each call that has some.
    """
    def sub(text: str) -> str:
        out, unknown = expand_macros(text, ctx)
        if unknown and on_unknown is not None:
            on_unknown(unknown)
        return out

    return sub


def _lit(value: str) -> Callable[[re.Match[str]], str]:
    return lambda _m: value


def _replace(text: str, name: str, value: str) -> str:
    return re.sub("\\{\\{" + re.escape(name) + "\\}\\}", _lit(value), text, flags=re.IGNORECASE)


def _environment(text: str, ctx: MacroContext, values: dict[str, str], group: str) -> str:
    """The ``env`` loop (macros.js 449–457): each name, in ``substituteParams``'s order."""
    env: dict[str, str] = {}
    for name in ENV_ORDER:
        low = name.lower()
        if low == "user":
            env[name] = ctx.user
        elif low == "char":
            env[name] = ctx.char
        elif low in ("group", "charifnotgroup"):
            env[name] = values.get(low, group)
        elif low in values:
            env[name] = values[low]
    env["original"] = ctx.original or ""
    for low, v in values.items():
        if low not in _SPECIAL and low not in {k.lower() for k in env}:
            env[low] = v
    for name, v in env.items():
        if "{{" not in text:
            break
        text = _replace(text, name, v)
    return text


def _roll(m: re.Match[str], rng: random.Random) -> str:
    """``diceRollReplace`` (macros.js 368–387): ``{{roll:N}}`` is ``1dN``; invalid -> empty."""
    formula = m.group(1).strip()
    if formula.isascii() and formula.isdigit():
        formula = f"1d{formula}"
    if not _DROLL.match(formula):
        return ""
    ok = _ROLL_OK.match(formula)
    if ok is None:
        return m.group(0)  # too large to roll here: left as written (reported unknown)
    count = int(ok.group(1) or 1)
    sides = int(ok.group(2))
    bonus = int(ok.group(3) or 0)
    return str(sum(rng.randint(1, sides) for _ in range(min(count, 1000))) + bonus)


def _choose(spec: str, rng: random.Random) -> str:
    r"""``randomReplace`` / ``pickReplace``'s list: ``::``-separated, else commas (``\,`` escapes)."""
    if "::" in spec:
        options = spec.split("::")
    else:
        options = [o.strip().replace("\x00c", ",") for o in spec.replace("\\,", "\x00c").split(",")]
    return rng.choice(options) if options else ""


def _clock(text: str, now: datetime) -> str:
    """``{{time}}``, ``{{date}}``, ``{{weekday}}``, ``{{isotime}}``, ``{{isodate}}``, ``{{time_UTC±N}}``."""
    def lt(t: datetime) -> str:  # moment's "LT" in English; built by hand ("%-I" is glibc-only)
        return f"{t.hour % 12 or 12}:{t.minute:02d} {'AM' if t.hour < 12 else 'PM'}"

    text = re.sub(r"\{\{time\}\}", _lit(lt(now)), text, flags=re.IGNORECASE)
    text = re.sub(r"\{\{date\}\}", _lit(f"{now.strftime('%B')} {now.day}, {now.year}"), text, flags=re.IGNORECASE)
    text = re.sub(r"\{\{weekday\}\}", _lit(now.strftime("%A")), text, flags=re.IGNORECASE)
    text = re.sub(r"\{\{isotime\}\}", _lit(now.strftime("%H:%M")), text, flags=re.IGNORECASE)
    text = re.sub(r"\{\{isodate\}\}", _lit(now.strftime("%Y-%m-%d")), text, flags=re.IGNORECASE)

    def utc(m: re.Match[str]) -> str:
        offset = int(m.group(1))
        if abs(offset) > 16:
            offset = offset // 60 if abs(offset) <= 16 * 60 else 0  # moment reads large numbers as minutes
            return lt(datetime.now(UTC) + timedelta(hours=offset))
        base = now.astimezone(UTC) if now.tzinfo else now
        return lt(base + timedelta(hours=offset))

    return _UTC.sub(utc, text)


# ---------------------------------------------------------------------------- variables (variables.js)
def _js_str(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return ""
    if isinstance(v, float) and math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, (int, float)):
        return js_number_string(v)
    if isinstance(v, list):
        return ",".join(_js_str(x) for x in v)
    if isinstance(v, dict):
        return "[object Object]"
    return str(v)


def _get(store: dict[str, Any], name: str) -> Any:
    """``getLocalVariable`` (variables.js 21–45): a number when the value reads as one.

    ``(v?.trim?.() === '' || isNaN(Number(v))) ? (v || '') : Number(v)``.
    """
    if name not in store:
        return ""
    v = store[name]
    if isinstance(v, str) and v.strip() == "":
        return v
    n = js_number(v)
    if math.isnan(n):
        return v if (v or isinstance(v, (list, dict))) else ""
    return int(n) if n.is_integer() and abs(n) < 2**53 else n


def _add(store: dict[str, Any], name: str, value: Any) -> Any:
    """``addLocalVariable`` (127–155): push to a JSON array, add numbers, else append text."""
    current = _get(store, name) or 0
    try:
        parsed = json.loads(current) if isinstance(current, str) else None
    except ValueError:
        parsed = None
    if isinstance(parsed, list):
        parsed.append(value)
        store[name] = json.dumps(parsed, ensure_ascii=False, separators=(",", ":"))
        return parsed
    inc = js_number(value)
    if math.isnan(inc) or math.isnan(js_number(current)):
        text = _js_str(current or "") + _js_str(value)
        store[name] = text
        return text
    new = js_number(current) + inc
    if math.isnan(new):
        return ""
    out = int(new) if new.is_integer() and abs(new) < 2**53 else new
    store[name] = out
    return out


_VAR_MACROS: tuple[tuple[str, str, bool], ...] = (
    # (regex, operation, global); the order of replaceVariableMacros (variables.js 225–300)
    (r"\{\{getvar::([^}]+)\}\}", "get", False),
    (r"\{\{setvar::([^:]+)::([^}]+)\}\}", "set", False),
    (r"\{\{addvar::([^:]+)::([^}]+)\}\}", "add", False),
    (r"\{\{incvar::([^}]+)\}\}", "inc", False),
    (r"\{\{decvar::([^}]+)\}\}", "dec", False),
    (r"\{\{getglobalvar::([^}]+)\}\}", "get", True),
    (r"\{\{setglobalvar::([^:]+)::([^}]+)\}\}", "set", True),
    (r"\{\{addglobalvar::([^:]+)::([^}]+)\}\}", "add", True),
    (r"\{\{incglobalvar::([^}]+)\}\}", "inc", True),
    (r"\{\{decglobalvar::([^}]+)\}\}", "dec", True),
)
_VAR_RES = tuple((re.compile(p, re.IGNORECASE), op, g) for p, op, g in _VAR_MACROS)


def _variables(text: str, ctx: MacroContext) -> str:
    """``replaceVariableMacros``: each line, each variable macro in turn."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if not line or "{{" not in line:
            continue
        for rx, op, is_global in _VAR_RES:
            line = rx.sub(partial(_var_op, ctx.global_variables if is_global else ctx.variables, op), line)
        lines[i] = line
    return "\n".join(lines)


def _var_op(store: dict[str, Any], op: str, m: re.Match[str]) -> str:
    name = m.group(1).strip()
    if op == "get":
        return _js_str(_get(store, name))
    if op == "set":
        store[name] = m.group(2)
        return ""
    if op == "add":
        _add(store, name, m.group(2))
        return ""
    return _js_str(_add(store, name, 1 if op == "inc" else -1))
