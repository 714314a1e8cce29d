r"""SillyTavern 1.12.6's Text Completion prompt: ONE string, built as ``Generate`` builds it (issue 26).

For a chat whose setup has ``text_completion`` (``main_api`` other than ``openai``),
:func:`assemble_text_completion` (the pipeline's assembly step for such a chat) follows the non-OpenAI branch of ``public/script.js`` ``Generate``:

1. The shared SillyTavern steps (:meth:`engine.assembly.sillytavern.SillyTavernAssembler.shared_steps`,
   one implementation with the Chat Completion path): ``getCharacterCardFields``, the Character's Note
   (``DEPTH_PROMPT``), ``chat[0]``'s macros, ``coreChat`` (hidden messages dropped, the Regex
   extension's scripts applied, caption titles appended; regexed World Info contents too),
   ``setFloatingPrompt``, ``addPersonaDescriptionExtensionPrompt``, ``getWorldInfoPrompt`` with
   ``this_max_context`` (counted with the Text Completion tokenizer, no message overhead),
   ``parseMesExamples`` (Text Completion block heading: ``example_separator`` or, in instruct
   mode, ``<START>``), the World Info at-depth and Author's Note top/bottom entries,
   ``getBiasStrings`` (:func:`engine.assembly.st_bias.bias_strings`, Start Reply With). Macros are
   the one engine (:mod:`engine.assembly.macros`) with ``replaceInstructMacros``' values added.
2. The system prompt (``power_user.sysprompt``, the card's own when ``prefer_character_prompt``;
   ``formatInstructModeSystemPrompt`` in instruct mode), ``formatInstructModeExamples``,
   ``doChatInject`` (extension prompts at depth, one message per role, system / user / assistant),
   the card's post-history instructions when ``context.allow_jailbreak``, each message formatted
   by ``formatMessageHistoryItem`` (plain ``Name: text\n`` or ``formatInstructModeChat`` with the
   first / last sequence variants), the user alignment message.
3. ``renderStoryString`` (:mod:`engine.assembly.story_string`), the extension prompts before and
   after it (``getExtensionPrompt`` ``BEFORE_PROMPT`` / ``IN_PROMPT``).
4. The history cut: ``getTokenCountAsync`` of the fixed parts plus ``token_padding``, then the
   injections, then each message newest first while the running count stays below
   ``max_context − amount_gen``; then the examples the same way (unless pinned).
5. ``modifyLastPromptLine`` (``formatInstructModePrompt`` or ``Name:``), the prompt bias,
   ``getCombinedPrompt`` (``chat_start`` line, ``\r`` removed, ``collapse_newlines``) and
   ``getStoppingStrings``.

Every part of the string is one preview block with its reason and ``span``; message blocks that
were cut are listed excluded with ``HISTORY_OLDEST_FIRST`` (``span`` ``None``); a block a regex script
changed lists it in ``trace["regex"]`` (:func:`engine.assembly.sillytavern.regex_trace`, as on the
Chat Completion path). A group chat is assembled for its next speaker (:mod:`engine.assembly.st_group`).
Not modelled (as in the Chat Completion path): file attachments,
``continue`` / ``impersonate`` / quiet generations, CFG, NovelAI's preamble, Horde's worker-adjusted context.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import SettingsError
from ..schema.blocks import BlockKind
from ..schema.messages import ChatMessage
from ..schema.preview import ContextPreview
from ..schema.sillytavern import (
    EXTENSION_PROMPT_BEFORE_PROMPT,
    EXTENSION_PROMPT_IN_CHAT,
    EXTENSION_PROMPT_IN_PROMPT,
    PERSONA_IN_PROMPT,
    TextCompletionSetup,
)
from . import instruct as ins
from .macros import MacroContext
from .sillytavern import MAX_INJECTION_DEPTH, SillyTavernAssembler, regex_trace
from .st_group import original_book_indexes
from .st_types import AssembledBlock, AssembledPrompt, SillyTavernInputs, TextCounter
from .story_string import StoryStringError, render_handlebars

_ROLE_NAME = {0: "system", 1: "user", 2: "assistant"}
_S0, _S1, _S2 = "\ue000", "\ue001", "\ue002"  # span markers around story string values (private use)
_MARK = re.compile(f"{_S0}(\\d+){_S1}|{_S2}")
_STORY_KEYS = ("system", "description", "personality", "scenario", "persona", "wiBefore", "wiAfter",
               "loreBefore", "loreAfter", "mesExamples", "mesExamplesRaw")
_NO_EXTRA: dict[str, Any] = {}


@dataclass(slots=True)
class _Piece:
    """One part of the prompt string and what it explains (a future preview block)."""

    text: str
    kind: BlockKind
    source: str
    reason: str
    role: str = "system"
    protected: bool = True
    message_index: int | None = None
    name: str | None = None
    parts: list[dict[str, Any]] = field(default_factory=list)
    ident: str = ""


@dataclass(slots=True)
class _Item:
    """A ``coreChat`` entry: a chat message, an injection or the jailbreak."""

    mes: str
    is_user: bool
    name: str | None
    narrator: bool = False
    force_avatar: bool = False
    index: int | None = None
    injected: bool = False
    depth: int = 0
    role: str = "assistant"
    parts: list[dict[str, Any]] = field(default_factory=list)
    source: str = ""


class _TextAssembler(SillyTavernAssembler):
    """``Generate``'s Text Completion branch over the shared SillyTavern steps."""

    def __init__(self, inputs: SillyTavernInputs, tc: TextCompletionSetup, tokenizer: TextCounter) -> None:
        self.instruct_values = ins.instruct_macro_values(tc.instruct, tc.context, tc.sysprompt, "",
                                                         inputs.setup.prefer_character_prompt)
        super().__init__(inputs)
        self.tc = tc
        self.tok = tokenizer
        self.is_instruct = tc.instruct.enabled
        self.char_prompt = ""
        self.system = ""  # the story string's {{system}}, set by on_card_fields
        self._template_subs: dict[str, str] = {}

    # -- counting and macros, as the Text Completion path does them
    def count(self, role: str, content: Any, name: str | None = None) -> int:
        """``getTokenCountAsync(text)``: the Text Completion tokenizer, no message overhead."""
        return self.tok.count(content) if isinstance(content, str) and content else 0

    def wi_count(self, text: str) -> int:
        """``checkWorldInfo`` counts with ``getTokenCountAsync`` (no padding)."""
        return self.tok.count(text) if text else 0

    def macro_context(self) -> MacroContext:
        """``substituteParams``' environment plus ``replaceInstructMacros``' values (the Text Completion setup's)."""
        ctx = super().macro_context()
        return replace(ctx, values={**ctx.values, **self.instruct_values})

    def s(self, text: str | None) -> str:
        """``substituteParams`` of a template text (sequences, separators), once per distinct text.

        Macro results depend only on the text within one preview (names fixed, random macros
        seeded by their text), and each message's sequences are the same few texts.
        """
        if not text:
            return ""
        hit = self._template_subs.get(text)
        if hit is None:
            hit = self._template_subs[text] = self.sub(text, "text completion template")
        return hit

    def example_heading(self) -> str:
        r"""``parseMesExamples``' ``blockHeading`` off the Chat Completion path.

        ``example_separator`` (macros substituted) + ``\n``, else ``<START>\n`` in instruct mode,
        else nothing.
        """
        sep = self.tc.context.example_separator
        return f"{self.s(sep)}\n" if sep else ("<START>\n" if self.is_instruct else "")

    def individual(self, block: str) -> list[dict[str, str]]:
        """``parseExampleIntoIndividual`` of one example block (shared with Chat Completion)."""
        return [{"content": p["content"], "name": p["name"]} for d in self.example_messages([block]) for p in d]

    # -- the assembly
    def on_card_fields(self, fields: dict[str, str]) -> None:
        """``Generate`` right after ``getCharacterCardFields``: the card's system prompt and ``{{system}}``."""
        self.char_prompt = fields["system"]
        self.instruct_values = ins.instruct_macro_values(self.tc.instruct, self.tc.context, self.tc.sysprompt,
                                                         self.char_prompt, self.setup.prefer_character_prompt)
        self.system = self.system_prompt(fields)

    def build(self) -> _Built:
        """``Generate``, non-OpenAI branch (see the module docstring)."""
        sh = self.shared_steps()
        fields, wi, ext = sh.fields, sh.wi, sh.ext
        examples = self.mes_examples(fields["mesExamples"], wi["em"], strip=False)
        raw_examples = list(examples)
        if self.is_instruct:
            examples = ins.format_examples(self.tc.instruct, self.tc.context, examples, self.name1, self.name2,
                                           self.s, self.individual, in_group=self.group is not None)
        self.wi_injections(ext, wi, sh.should_add)
        items, injected = self.chat_items(sh.core, sh.first_sub, ext)
        items = self.jailbreak(items, fields)
        story = self.story_string(fields, self.system, wi, examples, raw_examples)
        if self.setup.strip_examples:
            examples = []
        return _Built(items, injected, story, examples,
                      self.ext_anchor(ext, EXTENSION_PROMPT_BEFORE_PROMPT, True),
                      self.ext_anchor(ext, EXTENSION_PROMPT_IN_PROMPT, False))

    def system_prompt(self, fields: dict[str, str]) -> str:
        """``Generate``: the system prompt for the story string's ``{{system}}``."""
        sp = self.tc.sysprompt
        if not sp.enabled:
            return ""
        content = self.req.system_prompt if self.req.system_prompt is not None else sp.content
        system = (fields["system"] if self.setup.prefer_character_prompt and fields["system"]
                  else self.base_replace(content, "system prompt"))
        if self.is_instruct:
            system = ins.format_system_prompt(self.tc.instruct, self.sub(system, "system prompt", original=content))
        return system

    def chat_items(self, core: list[tuple[int | None, ChatMessage | None]], first_sub: dict[int, str],
                   ext: dict[str, dict[str, Any]]) -> tuple[list[_Item], list[int]]:
        """``coreChat`` as items, then ``doChatInject``; returns the items and the injected indices."""
        items: list[_Item] = []
        for i, m in core:
            if m is None or i is None:
                items.append(_Item("", False, None, source="message:foreign"))
                continue
            meta = m.meta.model_extra or _NO_EXTRA
            raw = meta.get("extra")
            narrator = isinstance(raw, dict) and raw.get("type") == "narrator"
            items.append(_Item(first_sub[i] if i in first_sub else m.text(), m.role == "user", m.name or None,
                               narrator=narrator, force_avatar=bool(meta.get("force_avatar")),
                               index=i, role=m.role, source=f"message:{i}"))
        return self.do_chat_inject(items, ext)

    def do_chat_inject(self, items: list[_Item], ext: dict[str, dict[str, Any]]) -> tuple[list[_Item], list[int]]:
        """``doChatInject``: per depth, one message per role (system, user, assistant), newest first."""
        rev = list(reversed(items))
        injected: list[int] = []
        total = 0
        depths = sorted({int(p["depth"]) for p in ext.values() if p["position"] == EXTENSION_PROMPT_IN_CHAT
                         and p["value"] and 0 <= int(p["depth"]) <= MAX_INJECTION_DEPTH})
        names = {0: "", 1: self.name1, 2: self.name2}
        for depth in depths:
            role_items = []
            for role in (0, 1, 2):
                text, parts = self.extension_prompt(ext, EXTENSION_PROMPT_IN_CHAT, depth, role, wrap=False)
                text = _js_trim_start(text)
                if text:
                    role_items.append(_Item(text, role == 1, names[role] or None, narrator=role == 0, injected=True,
                                            depth=depth, role=_ROLE_NAME[role], parts=parts,
                                            source=f"injection:depth{depth}:{_ROLE_NAME[role]}"))
            if role_items:
                at = depth + total
                rev[at:at] = role_items
                total += len(role_items)
                injected.extend(range(at, at + len(role_items)))
        return list(reversed(rev)), injected

    def ext_anchor(self, ext: dict[str, dict[str, Any]], position: int, trim_start: bool) -> _Piece | None:
        """``beforeScenarioAnchor`` / ``afterScenarioAnchor`` as a piece (``None`` when empty)."""
        text, parts = self.extension_prompt(ext, position)
        if trim_start:
            text = _js_trim_start(text)
        if not text:
            return None
        return _Piece(text, BlockKind.INSTRUCTION, "extension:" + ("before" if trim_start else "in_prompt"),
                      _reason_of(parts, "INSTRUCTION"), parts=parts, ident="extensionPrompt")

    def jailbreak(self, items: list[_Item], fields: dict[str, str]) -> list[_Item]:
        """The card's post-history instructions as the last user message (``context.allow_jailbreak``)."""
        jb = fields["jailbreak"]
        if self.tc.context.allow_jailbreak and self.setup.prefer_character_jailbreak and jb:
            text = self.sub(jb, "card post_history_instructions", original="")
            items = [*items, _Item(text, True, None, role="user", source="character:post_history_instructions")]
        return items

    def story_string(self, fields: dict[str, str], system: str, wi: dict[str, Any], examples: list[str],
                     raw_examples: list[str]) -> list[_Piece]:
        """``renderStoryString``: the story string as pieces, one per value with the template text around it."""
        before, after = "\n".join(wi["before"]), "\n".join(wi["after"])
        persona = fields["persona"] if self.setup.persona_position == PERSONA_IN_PROMPT else ""
        values = {"description": fields["description"], "personality": fields["personality"], "persona": persona,
                  "scenario": fields["scenario"], "system": system, "wiBefore": before, "wiAfter": after,
                  "loreBefore": before, "loreAfter": after, "mesExamples": "".join(examples),
                  "mesExamplesRaw": "".join(raw_examples)}
        plain = self.render_story(values)
        marked = self.render_story({k: (f"{_S0}{_STORY_KEYS.index(k)}{_S1}{v}{_S2}" if v else v)
                                    for k, v in values.items()})
        segments = _segments(marked)
        if segments is None or "".join(plain[a:b] for a, b, _ in segments) != plain:
            return [_Piece(plain, BlockKind.INSTRUCTION, "context:story_string", "INSTRUCTION")] if plain else []
        lore = {"wiBefore": self.lore_parts(wi["before_parts"]), "wiAfter": self.lore_parts(wi["after_parts"])}
        lore.update(loreBefore=lore["wiBefore"], loreAfter=lore["wiAfter"])
        return [self.story_piece(plain[a:b], key, lore) for a, b, key in segments]

    def story_piece(self, text: str, key: str | None, lore: dict[str, list[dict[str, Any]]]) -> _Piece:
        """The block a story string value (with its template text) becomes."""
        if key in ("wiBefore", "wiAfter", "loreBefore", "loreAfter"):
            parts = lore[key]
            return _Piece(text, BlockKind.LOREBOOK, f"context:{key}", _reason_of(parts, "LOREBOOK_MATCHED"),
                          parts=parts, ident=key)
        if key == "system":
            source = "character:system_prompt" if self.setup.prefer_character_prompt and self.char_prompt \
                else "sysprompt"
            return _Piece(text, BlockKind.SYSTEM, source, "SYSTEM_PROMPT", ident="system")
        if key in ("description", "personality", "scenario"):
            return _Piece(text, BlockKind.CHARACTER, f"character:{key}", "CHARACTER", ident=key)
        if key == "persona":
            return _Piece(text, BlockKind.PERSONA, "persona", "PERSONA", ident="persona")
        if key in ("mesExamples", "mesExamplesRaw"):
            return _Piece(text, BlockKind.EXAMPLE, "character:mes_example", "EXAMPLE_DIALOGUE", ident=key)
        return _Piece(text, BlockKind.INSTRUCTION, "context:story_string", "INSTRUCTION", ident="storyString")

    def render_story(self, values: dict[str, str]) -> str:
        """``renderStoryString`` over ``values`` (plus ``char`` / ``user``).

        Raises
        ------
        SettingsError
            ``INVALID_SETTINGS`` naming the context preset and the place, for a template Handlebars
            rejects (or one outside the rendered subset).
        """
        ctx = self.tc.context
        try:
            out = render_handlebars(ctx.story_string, {**values, "char": self.name2, "user": self.name1})
        except StoryStringError as exc:
            raise SettingsError("INVALID_SETTINGS", f"context template {ctx.preset!r}: story string: {exc}",
                                file=f"context template {ctx.preset}",
                                place=f"story_string line {exc.line}, column {exc.column}") from exc
        out = self.sub(out, f"context template {ctx.preset!r} story string")
        out = re.sub(r"^\n+", "", out)
        if out and not out.endswith("\n") and (not self.tc.instruct.enabled or self.tc.instruct.wrap):
            out += "\n"
        return out

    def format_item(self, item: _Item, force: int | None) -> str:
        """``formatMessageHistoryItem``."""
        name = item.name if item.is_user else (item.name or self.name2)
        if self.is_instruct:
            return ins.format_chat(self.tc.instruct, name or "", item.mes, item.is_user, item.narrator,
                                   item.force_avatar, self.name1, force, self.s, in_group=self.group is not None)
        return f"{name}: {item.mes}\n" if item.name and not item.narrator else f"{item.mes}\n"


@dataclass
class _Built:
    items: list[_Item]
    injected: list[int]
    story: list[_Piece]
    examples: list[str]
    before: _Piece | None
    after: _Piece | None


def _js_trim_start(text: str) -> str:
    return re.sub(r"\A[\s\ufeff]+", "", text)


def _reason_of(parts: list[dict[str, Any]], default: str) -> str:
    """One reason for a piece joined from parts: theirs when they agree, else ``default``."""
    reasons = {p.get("reason") for p in parts}
    return str(next(iter(reasons))) if len(reasons) == 1 and None not in reasons else default


def _segments(marked: str) -> list[tuple[int, int, str | None]] | None:
    """Character ranges of the rendered story string, one per value (with the text before it).

    ``marked`` is the story string rendered over values wrapped in markers; the ranges are in the
    text without markers. Text after the last value joins the last range. ``None`` when the
    markers do not nest as written (a template that moved text across them).
    """
    out: list[tuple[int, int, str | None]] = []
    clean_len, start, open_key = 0, 0, None
    pos = 0
    for m in _MARK.finditer(marked):
        clean_len += m.start() - pos
        pos = m.end()
        if m.group(1) is not None:
            if open_key is not None:
                return None
            open_key = _STORY_KEYS[int(m.group(1))]
        else:
            if open_key is None:
                return None
            out.append((start, clean_len, open_key))
            start, open_key = clean_len, None
    if open_key is not None:
        return None
    clean_len += len(marked) - pos
    if not out:
        return [(0, clean_len, None)] if clean_len else []
    if clean_len > start:
        a, _b, key = out[-1]
        out[-1] = (a, clean_len, key)
    return out


@dataclass
class _Fill:
    """What ``Generate``'s history loop decided."""

    sent: list[_Piece]  # chronological message pieces (the last one without its final newline)
    excluded: list[dict[str, Any]]
    examples: list[str]  # the example strings sent
    examples_left: list[str]
    primer: str  # modifyLastPromptLine + the prompt bias, appended to the last message


def _chat2(asm: _TextAssembler, items: list[_Item]) -> tuple[list[str], list[int]]:
    """``chat2`` (formatted messages, newest first) and the indices of user messages in it."""
    n = len(items)
    chat2 = [""] * n
    user_idx: list[int] = []
    last_user = max((j for j, x in enumerate(items) if x.is_user), default=-1)
    for j, item in enumerate(items):
        i = n - 1 - j
        force = None
        if asm.is_instruct and j == 0:
            force = ins.FORCE_FIRST
        if asm.is_instruct and last_user >= 0 and j == last_user:
            force = ins.FORCE_LAST
        chat2[i] = asm.format_item(item, force)
        if item.is_user:
            user_idx.append(i)
    return chat2, user_idx


class _Counter:
    """``getMessagesTokenCount`` and ``getTokenCountAsync`` for the history loop."""

    def __init__(self, asm: _TextAssembler, built: _Built, ua: str, primer0: str) -> None:
        self.asm, self.ua, self.primer0 = asm, ua, primer0
        self.before = built.before.text if built.before else ""
        self.story = "".join(p.text for p in built.story)
        self.after = built.after.text if built.after else ""

    def one(self, text: str) -> int:
        """``getTokenCountAsync(item)`` of one history entry or example (no padding)."""
        return self.asm.tok.count(text.replace("\r", ""))

    def fixed(self, examples_string: str, chat_string: str) -> int:
        """``getMessagesTokenCount()``: the fixed parts and the chat so far, plus ``token_padding``."""
        text = "".join((self.before, self.story, self.after, examples_string, self.ua, chat_string, self.primer0))
        text = text.replace("\r", "")
        return self.asm.tok.count(text) + self.asm.tc.token_padding if text else 0


def _fill(asm: _TextAssembler, built: _Built) -> _Fill:
    """``Generate``'s history and example loops (newest first while the count stays below the budget)."""
    tc, setup = asm.tc, asm.setup
    items = built.items or [_Item("", False, None, source="message:none")]
    chat2, user_idx = _chat2(asm, items)
    if not built.items:
        chat2 = [""]
    bias, user_bias = asm.bias, asm.bias_info.is_user_prompt_bias
    force_name2 = bool(bias and not user_bias) or tc.always_force_name2 or tc.main_api == "novel"
    ua = ""
    if asm.is_instruct and tc.instruct.user_alignment_message:
        ua = asm.format_item(_Item(tc.instruct.user_alignment_message, True, asm.name1), ins.FORCE_FIRST)
    cnt = _Counter(asm, built, ua, _last_line(asm, "", bias, force_name2))
    chat_string = asm.s(tc.context.chat_start + "\n") if tc.context.chat_start else ""
    examples_string = "".join(built.examples) if setup.pin_examples else ""
    arr: list[str | None] = [None] * len(chat2)
    total = cnt.fixed(examples_string, chat_string)
    last_added = -1
    for order in (built.injected, range(len(chat2))):
        for i in order:
            if i >= len(chat2) or (order is not built.injected and arr[i] is not None):
                continue
            total += cnt.one(chat2[i])
            if total >= asm.budget:
                break
            chat_string += chat2[i]
            arr[i] = chat2[i]
            last_added = max(last_added, i)
    origin: list[_Piece | None] = [_item_piece(asm, items[len(items) - 1 - i], chat2[i]) if arr[i] is not None else None
                                   for i in range(len(chat2))]
    if ua and last_added not in user_idx:
        chat_string = ua + chat_string
        arr.append(ua)
        origin.append(_Piece(ua, BlockKind.INSTRUCTION, "instruct:user_alignment_message", "INSTRUCTION",
                             role="user", ident="userAlignment"))
    total = cnt.fixed(examples_string, chat_string)
    n_examples = 0
    if not setup.pin_examples:
        for ex in built.examples:
            total += cnt.one(ex)
            if total >= asm.budget:
                break
            n_examples += 1
    shown = built.examples if setup.pin_examples else built.examples[:n_examples]
    sent = [p for p in reversed(origin) if p is not None]
    left = [i for i in range(len(chat2)) if arr[i] is None and built.items]
    counts = _count_many(asm.tok, [chat2[i] for i in left])  # one batch: a long chat leaves most out
    excluded = [_excluded_item(asm, items[len(items) - 1 - i], chat2[i], n) for i, n in zip(left, counts, strict=True)]
    return _Fill(sent, excluded, shown, built.examples[len(shown):], _primer(asm, sent, bias, force_name2))


def _last_line(asm: _TextAssembler, text: str, bias: str, force_name2: bool) -> str:
    """``modifyLastPromptLine`` (a normal generation: no quiet prompt, impersonation or continue)."""
    if asm.is_instruct:
        text += ins.format_prompt(asm.tc.instruct, asm.name2, False, bias, asm.s, in_group=asm.group is not None)
    if not asm.is_instruct and force_name2:
        if not text.endswith("\n"):
            text += "\n"
        text += f"{asm.name2}:"
    return text


def _primer(asm: _TextAssembler, sent: list[_Piece], bias: str, force_name2: bool) -> str:
    r"""What the last message gets: its final newline dropped, the last prompt line and the prompt bias added.

    Trims the last sent piece in place (``item.replace(/\n?$/, '')`` when instruct is off or wraps).
    """
    if not sent:
        return ""
    last = sent[-1]
    if (not asm.is_instruct or asm.tc.instruct.wrap) and last.text.endswith("\n"):
        last.text = last.text[:-1]
    full = _last_line(asm, last.text, bias, force_name2)
    if not asm.is_instruct and bias.strip():
        full += bias.lstrip() if full[-1:].isspace() else " " + bias.lstrip()
    return full[len(last.text):]


def _item_piece(asm: _TextAssembler, item: _Item, text: str) -> _Piece:
    """The block a history entry becomes."""
    if item.injected:
        reasons = {p.get("reason") for p in item.parts}
        sources = [str(p.get("source", "")) for p in item.parts]
        kind = (BlockKind.LOREBOOK if sources and all(x.startswith("lorebook:") for x in sources)
                else BlockKind.PERSONA if reasons == {"PERSONA"} else BlockKind.INSTRUCTION)
        return _Piece(text, kind, item.source, _reason_of(item.parts, "INSTRUCTION"), role=item.role,
                      parts=item.parts, ident=f"injection-{item.depth}-{item.role}")
    if item.source == "character:post_history_instructions":
        return _Piece(text, BlockKind.INSTRUCTION, item.source, "INSTRUCTION", role="user", ident="jailbreak")
    return _Piece(text, BlockKind.MESSAGE, item.source, "FITS_BUDGET", role=item.role, protected=False,
                  message_index=item.index, name=item.name, ident="chatHistory")


def _count_many(tok: TextCounter, texts: list[str]) -> list[int]:
    """``tok.count`` of each text, in one batch when the tokenizer has ``count_many``."""
    many = getattr(tok, "count_many", None)
    return list(many(texts)) if many is not None else [tok.count(t) for t in texts]


def _excluded_item(asm: _TextAssembler, item: _Item, text: str, tokens: int) -> dict[str, Any]:
    if item.index is not None and not item.injected:  # a chat message (most of a long chat's cut)
        return dict(kind="message", role=item.role, source=item.source, text=text, tokens=tokens,
                    reason="HISTORY_OLDEST_FIRST", protected=False, message_index=item.index, name=item.name,
                    trace=None)
    p = _item_piece(asm, item, text)
    return dict(kind=p.kind.value, role=p.role, source=p.source, text=text, tokens=tokens,
                reason="HISTORY_OLDEST_FIRST", protected=False, message_index=p.message_index, name=p.name,
                trace={"parts": p.parts} if p.parts else None)


def stopping_strings(asm: _TextAssembler) -> list[str]:
    """``getStoppingStrings(false, false)``: names, instruct sequences, custom strings, single line."""
    tc = asm.tc
    result: list[str] = []
    if tc.context.names_as_stop_strings:
        result += [f"\n{asm.name1}:", f"\n{asm.name1}:"]
        if asm.group is not None and asm.name2:  # the other members' names (every member with a card)
            result += [f"\n{m.name}:" for m in asm.group.members if m.character is not None and m.name
                       and m.name != asm.name2]
    result += ins.stopping_sequences(tc.instruct, tc.context, asm.name1, asm.name2, asm.s, tc.instruct.enabled)
    result += _custom_stopping_strings(asm)
    if tc.single_line:
        result.insert(0, "\n")
    return list(dict.fromkeys(result))


def _custom_stopping_strings(asm: _TextAssembler) -> list[str]:
    """``getCustomStoppingStrings``: ``power_user.custom_stopping_strings`` (a JSON array as text)."""
    raw = asm.tc.custom_stopping_strings
    if not raw:
        return []
    try:
        strings = json.loads(raw)
    except ValueError:
        asm.warnings.append("custom stopping strings are not a JSON array; SillyTavern ignores them")
        return []
    if not isinstance(strings, list):
        return []
    out = [x for x in strings if isinstance(x, str) and x]
    return [asm.s(x) for x in out] if asm.tc.custom_stopping_strings_macro else out


def _assemble(asm: _TextAssembler, built: _Built, fill: _Fill) -> list[_Piece]:
    """``getCombinedPrompt``: the pieces of the string in order (before it is cleaned)."""
    pieces: list[_Piece] = []
    if built.before is not None:
        pieces.append(built.before)
    pieces.extend(built.story)
    if built.after is not None:
        pieces.append(built.after)
    pieces.extend(_Piece(x, BlockKind.EXAMPLE, "character:mes_example", "EXAMPLE_DIALOGUE", protected=False,
                         ident="dialogueExamples") for x in fill.examples)
    if asm.tc.context.chat_start:
        pieces.append(_Piece(asm.s(asm.tc.context.chat_start + "\n"), BlockKind.INSTRUCTION, "context:chat_start",
                             "INSTRUCTION", ident="chatStart"))
    pieces.extend(fill.sent)
    if fill.primer:
        pieces.append(_Piece(fill.primer, BlockKind.INSTRUCTION, "instruct:last_output_sequence"
                             if asm.is_instruct else "context:reply_name", "INSTRUCTION", role="assistant",
                             ident="replyPrimer"))
    return [p for p in pieces if p.text]


def _clean(pieces: list[_Piece], collapse: bool) -> tuple[str, list[tuple[int, int]]]:
    r"""The prompt (``\r`` removed, ``collapseNewlines`` when on) and each piece's span in it."""
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    pos = 0
    for p in pieces:
        text = p.text.replace("\r", "")
        if collapse:
            text = re.sub(r"\n+", "\n", text)
            if out and out[-1].endswith("\n") and text.startswith("\n"):
                text = text[1:]
        out.append(text)
        spans.append((pos, pos + len(text)))
        pos += len(text)
    return "".join(out), spans


def assemble_text_completion(inputs: SillyTavernInputs) -> AssembledPrompt:
    """Pipeline step 3 for a Text Completion chat: SillyTavern 1.12.6's one prompt string, and why.

    ``public/script.js`` ``Generate``'s non-OpenAI branch (see the module docstring), over the
    inputs steps 1–2 resolved: the budget (``max_context − amount_gen``, ``getMaxContextSize``;
    NovelAI: ``max_context``) and the tokenizer (``inputs.text_tokenizer``).

    Returns
    -------
    AssembledPrompt
        ``api="text_completion"``: ``prompt`` (``getCombinedPrompt``), ``stop``
        (``getStoppingStrings``), one sent block per part of the string with its ``span``, the
        cut history and examples as left-out blocks, no messages.

    Raises
    ------
    SettingsError
        ``INVALID_SETTINGS`` for a story string Handlebars rejects.
    """
    setup, tok = inputs.setup, inputs.text_tokenizer
    tc = setup.text_completion
    assert tc is not None and tok is not None
    asm = _TextAssembler(inputs, tc, tok)
    asm.warnings.extend(inputs.warnings)
    asm.diagnostics.extend(inputs.diagnostics)
    asm.diagnostics.extend(_backend_notes(tc))
    built = asm.build()
    asm.lorebook_trace = original_book_indexes(asm.lorebook_trace, inputs.speaker)
    fill = _fill(asm, built)
    if built.items and not any(p.kind == BlockKind.MESSAGE for p in fill.sent):
        asm.warnings.append(f"no chat message fits: the story string and the injections alone fill the budget "
                            f"({inputs.budget} tokens = max_context − amount_gen); SillyTavern sends them without "
                            "the chat")
    pieces = _assemble(asm, built, fill)
    prompt, spans = _clean(pieces, setup.collapse_newlines)
    info = {"api": "text_completion", "main_api": tc.main_api,
            "instruct": tc.instruct.preset if tc.instruct.enabled else None, "context": tc.context.preset,
            "tokenizer": tok.label, "st_tokenizer_id": tok.st_id, "token_padding": tc.token_padding}
    return AssembledPrompt(
        api="text_completion", sent=_sent_pieces(asm, pieces, spans), left_out=_left_out(asm, fill),
        prompt=prompt, stop=stopping_strings(asm), warnings=list(asm.warnings), diagnostics=asm.diagnostics,
        timed_effects=asm.timed_effects, lorebook_trace=asm.lorebook_trace, strategy_info=info)


def _backend_notes(tc: TextCompletionSetup) -> list[str]:
    """What the preview of a Kobold Horde / NovelAI chat does not model (``getMaxContextSize``, NovelAI's preamble)."""
    notes: list[str] = []
    if tc.main_api == "koboldhorde" and tc.horde_auto_adjust_context:
        notes.append("Kobold Horde with 'adjust context to workers': SillyTavern shrinks the window to "
                     "the chosen workers' limit, unknown offline; the preview uses max_context")
    if tc.main_api == "novel":
        notes.append("NovelAI: its preamble (nai_settings.preamble) and per-model context limits are not "
                     "modelled; the prompt is SillyTavern's without them")
    return notes


def _sent_pieces(asm: _TextAssembler, pieces: list[_Piece], spans: list[tuple[int, int]]) -> list[AssembledBlock]:
    """One kept block per piece in string order, with its span and trace (``st_identifier``, parts, regex)."""
    out: list[AssembledBlock] = []
    for p, span in zip(pieces, spans, strict=True):
        trace: dict[str, Any] = {"st_identifier": p.ident}
        if p.parts:
            trace["parts"] = p.parts
        changed = regex_trace(p.source, p.parts, asm.regex_changes)
        if changed:
            trace["regex"] = changed
        out.append(AssembledBlock(kind=p.kind.value, role=p.role, source=p.source, text=p.text,
                                  tokens=asm.tok.count(p.text), reason=p.reason, protected=p.protected,
                                  status="kept", name=p.name, message_index=p.message_index, trace=trace, span=span))
    return out


def _left_out(asm: _TextAssembler, fill: _Fill) -> list[AssembledBlock]:
    """The blocks left out: examples pushed out, then the cut history, then hidden / excluded messages."""
    out = [AssembledBlock(kind=BlockKind.EXAMPLE.value, role="system", source="character:mes_example", text=x,
                          tokens=asm.tok.count(x), reason="EXAMPLES_PUSHED_OUT", protected=False)
           for x in fill.examples_left]
    out.extend(AssembledBlock(**row) for row in [*fill.excluded, *asm.excluded])
    return out


def text_completion_title(pv: ContextPreview) -> str | None:
    """The header words of a Text Completion preview: mode, instruct preset and tokenizer.

    ``"Text Completion · Alpaca · llama approximate"`` (``instruct off`` when instruct mode is off);
    ``None`` for a Chat Completion preview.
    """
    if pv.api != "text_completion":
        return None
    info = pv.strategy_info
    instruct = info.get("instruct") or "instruct off"
    exactness = "approximate" if pv.tokenizer.approximate else "exact"
    return f"Text Completion · {instruct} · {pv.tokenizer.profile} {exactness}"


__all__ = ["TextCounter", "assemble_text_completion", "stopping_strings", "text_completion_title"]
