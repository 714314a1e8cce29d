"""SillyTavern's Regex extension on the prompt: 1.12.6 ``extensions/regex/engine.js``.

``getRegexedString(text, placement, {isMarkdown, isPrompt, depth})`` runs the global scripts
(``extension_settings.regex``) then the card's own (``data.extensions.regex_scripts``, only when
the card is in ``character_allowed_regex``), each when:

* its ``markdownOnly`` / ``promptOnly`` switches fit (a prompt is never Markdown: scripts that
  are neither, or ``promptOnly``, run);
* the depth (when given, ``>= 0``) lies within ``minDepth`` / ``maxDepth`` (each ignored when
  missing or negative);
* its ``placement`` holds the placement (1 user input, 2 AI output, 3 slash command, 5 World Info).

``runRegexScript``: a disabled script, an empty ``findRegex`` or an empty text changes nothing;
``findRegex`` (after macros with ``substituteRegex``) is read by ``regexFromString`` as
``/pattern/flags`` (or the whole text as a pattern when the flags are not ``[gmixXsuUAJ]``); a
pattern JavaScript rejects is skipped (a warning names the script). Each match (all of them with
``g``) becomes ``replaceString`` with ``{{match}}`` as ``$0``, ``$n`` the n-th group with every
``trimStrings`` entry (after macros) removed, and macros substituted in the result.

Patterns are JavaScript's, through :mod:`engine.lorebook.jsregex`, under the same time limit as
World Info regex keys: a search that runs out leaves the text unchanged and names the script.

Where SillyTavern runs it while building a prompt: every chat message of ``coreChat`` (user
input for the user's messages, AI output for the rest; ``depth`` = messages after it), before
World Info scans them (``Generate``, script.js 3567–3583); each activated World Info entry's
content (World Info; ``depth`` only for at-depth entries) when it is placed (world-info.js 4128).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..lorebook.jsregex import JsRegex, JsRegexError, RegexClock, compile_js
from ..schema.sillytavern import RegexScript

__all__ = [
    "AI_OUTPUT",
    "MD_DISPLAY",
    "PLACEMENTS",
    "SLASH_COMMAND",
    "USER_INPUT",
    "WORLD_INFO",
    "RegexChange",
    "RegexRunner",
    "regex_from_string",
]

#: ``regex_placement`` (engine.js 12–19).
MD_DISPLAY, USER_INPUT, AI_OUTPUT, SLASH_COMMAND, WORLD_INFO = 0, 1, 2, 3, 5
PLACEMENTS = {USER_INPUT: "user input", AI_OUTPUT: "AI output", SLASH_COMMAND: "slash command",
              WORLD_INFO: "World Info"}

# regexFromString (utils.js 971–986): `input.match(/(\/?)(.+)\1([a-z]*)/i)`; "." is JavaScript's
_FROM_STRING = re.compile("(/?)([^\n\r\u2028\u2029]+)\\1([a-z]*)", re.IGNORECASE)
_FLAGS_OK = re.compile(r"^(?!.*?(.).*?\1)[gmixXsuUAJ]+$")
_JS_FLAGS = set("dgimsuyv")
_GROUP_REF = re.compile(r"\$(\d+)")
_MATCH_MACRO = re.compile(r"\{\{match\}\}", re.IGNORECASE)


class _Rejected(Exception):
    """A pattern JavaScript's ``RegExp`` rejects (``regexFromString`` returns undefined)."""


def regex_from_string(text: str) -> tuple[str, str]:
    """``regexFromString``'s (pattern, flags), before ``new RegExp``.

    Raises
    ------
    ValueError
        When the text holds no pattern (SillyTavern's ``match`` gives ``null``: the script is skipped).
    """
    m = _FROM_STRING.search(text)
    if m is None:
        raise ValueError("no pattern")
    if m.group(3) and not _FLAGS_OK.match(m.group(3)):
        return text, ""  # `RegExp(input)`: the whole text is the pattern
    return m.group(2), m.group(3)


@dataclass(frozen=True)
class RegexChange:
    """One script that changed a text: its name, the text before and after."""

    script: str
    before: str
    after: str

    def as_dict(self) -> dict[str, str]:
        """For a block's trace."""
        return {"script": self.script, "before": self.before, "after": self.after}


@dataclass
class RegexRunner:
    """The scripts of one assembly (global, then the card's when allowed) and how to run them.

    ``substitute`` is ``substituteParams`` (:func:`engine.assembly.macros.macro_function`);
    ``clock`` the regex time limits (World Info's); ``warnings`` collects one line per script
    that does not compile or runs out of time.
    """

    scripts: Sequence[RegexScript]
    substitute: Callable[[str], str]
    clock: RegexClock
    warnings: list[str] = field(default_factory=list)
    _compiled: dict[str, JsRegex | None] = field(default_factory=dict)

    def apply(self, text: str, placement: int, *, depth: int | None = None, is_prompt: bool = True,
              is_markdown: bool = False) -> tuple[str, list[RegexChange]]:
        """``getRegexedString``: ``text`` after every script that applies, and what each changed."""
        changes: list[RegexChange] = []
        if not text or not self.scripts:
            return text, changes
        out = text
        for script in self.scripts:
            if not _applies(script, placement, depth=depth, is_prompt=is_prompt, is_markdown=is_markdown):
                continue
            new = self.run(script, out)
            if new != out:
                changes.append(RegexChange(_name(script), out, new))
                out = new
        return out, changes

    def run(self, script: RegexScript, text: str) -> str:
        """``runRegexScript`` (engine.js 95–135)."""
        if script.disabled or not script.findRegex or not text:
            return text
        find = self.substitute(script.findRegex) if script.substituteRegex else script.findRegex
        rx = self.compiled(script, find)
        if rx is None:
            return text

        def replace(m: Any) -> str:
            groups = [m.group(0), *m.groups()]
            body = _MATCH_MACRO.sub("$0", script.replaceString)

            def group(g: re.Match[str]) -> str:
                n = int(g.group(1))
                value: Any = groups[n] if n < len(groups) else (m.start() if n == len(groups) else
                                                                m.string if n == len(groups) + 1 else None)
                if not value:
                    return ""
                return self.trim(str(value), script.trimStrings)

            return self.substitute(_GROUP_REF.sub(group, body))

        try:
            limit = self.clock.remaining()
            if limit <= 0:
                raise TimeoutError
            if "y" in rx.flags:
                m = rx.compiled.match(text, timeout=limit)
                return text if m is None else text[:m.start()] + replace(m) + text[m.end():]
            return str(rx.compiled.sub(replace, text, count=0 if "g" in rx.flags else 1, timeout=limit))
        except TimeoutError:
            w = (f"regex script {_name(script)!r} ran out of its {self.clock.per_search * 1000:g} ms; "
                 "the text was left unchanged")
            if w not in self.warnings:
                self.warnings.append(w)
            return text

    def trim(self, value: str, trim_strings: Sequence[str]) -> str:
        """``filterString``: every trim string (after macros) removed."""
        for t in trim_strings:
            value = value.replace(self.substitute(t), "") if t else value
        return value

    def compiled(self, script: RegexScript, find: str) -> JsRegex | None:
        """The script's pattern compiled as JavaScript would, or ``None`` (skipped, with a warning)."""
        if find in self._compiled:
            return self._compiled[find]
        try:
            pattern, flags = regex_from_string(find)
            if set(flags) - _JS_FLAGS:
                raise _Rejected(f"invalid flags {flags!r}")
            rx: JsRegex | None = compile_js(find, pattern, flags.replace("d", "").replace("v", "u"))
        except (ValueError, JsRegexError, _Rejected) as exc:
            rx = None
            w = (f"regex script {_name(script)!r}: {find!r} does not compile in JavaScript ({exc}); "
                 "skipped, as SillyTavern skips it")
            if w not in self.warnings:
                self.warnings.append(w)
        self._compiled[find] = rx
        return rx


def _name(script: RegexScript) -> str:
    return script.scriptName or script.id or "(unnamed)"


def _limit(v: Any) -> float | None:
    """A ``minDepth`` / ``maxDepth`` that counts: a number ``>= 0`` (``!isNaN(v) && v !== null && v >= 0``)."""
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if not math.isnan(f) and f >= 0 else None


def _applies(script: RegexScript, placement: int, *, depth: int | None, is_prompt: bool, is_markdown: bool) -> bool:
    """``getRegexedString``'s conditions (engine.js 57–85)."""
    if not ((script.markdownOnly and is_markdown) or (script.promptOnly and is_prompt)
            or (not script.markdownOnly and not script.promptOnly and not is_markdown)):
        return False
    if depth is not None and depth >= 0:
        lo, hi = _limit(script.minDepth), _limit(script.maxDepth)
        if lo is not None and depth < lo:
            return False
        if hi is not None and depth > hi:
            return False
    return placement in script.placement


def scripts_for(global_scripts: Sequence[RegexScript], card_extensions: dict[str, Any] | None, *,
                allowed: bool, disabled: bool, warn: Callable[[str], None] | None = None) -> list[RegexScript]:
    """``[...extension_settings.regex, ...getScopedRegex()]`` (engine.js 35–52), or none when disabled.

    The card's ``regex_scripts`` run only when ``allowed`` (``character_allowed_regex``); a card
    script that cannot be read is left out with a warning.
    """
    if disabled:
        return []
    out = list(global_scripts)
    raw = (card_extensions or {}).get("regex_scripts")
    if allowed and isinstance(raw, list):
        for i, r in enumerate(raw):
            try:
                out.append(RegexScript.model_validate(r))
            except ValueError:
                if warn is not None:
                    warn(f"the card's regex script {i} cannot be read; left out")
    return out
