r"""SillyTavern 1.12.x's Chat Completion assembly, for chats imported from a SillyTavern folder.

:func:`assemble_chat_completion` is the pipeline's assembly step (step 3) for a chat from a
SillyTavern folder (``request.sillytavern`` set): a template that builds the messages
SillyTavern 1.12.6 sends, following its code step by step, over the model, tokenizer, limits,
names and books steps 1–2 resolved (:class:`~engine.assembly.st_types.SillyTavernInputs`):

* ``public/script.js`` ``Generate`` (Chat Completion path): ``getCharacterCardFields`` and
  ``baseChatReplace`` for the card fields; the Character's Note (``DEPTH_PROMPT``); the first
  message's macros (``chat[0].mes = substituteParams(chat[0].mes)``); hidden messages
  (``is_system``) dropped (``coreChat``); ``parseMesExamples``; World Info scanned over
  ``Name: text`` of the chat, newest first.
* ``authors-note.js`` ``setFloatingPrompt`` (interval, position, depth, role) and
  ``script.js`` ``addPersonaDescriptionExtensionPrompt`` (persona at the top/bottom of the
  Author's Note or at a depth).
* ``world-info.js`` ``getSortedEntries`` (chat lore first, then character/global lore by
  ``character_strategy``), ``checkWorldInfo``'s budget loop (a running count of the entries'
  text, each count a ``{role: system}`` message counted in full, i.e. tokens + 6; the first
  entry that reaches the budget stops the scan) and its output (``worldInfoBefore`` /
  ``worldInfoAfter`` joined by newlines, lower ``order`` first; at-depth entries joined per
  depth and role; Author's Note top/bottom; example-message positions).
* ``openai.js`` ``setOpenAIMessages`` (names behaviour, ``\\r`` removed, quotes),
  ``setOpenAIMessageExamples`` / ``parseExampleIntoIndividual``, ``preparePromptsForChatCompletion``
  (markers, card prompt overrides with ``{{original}}``), ``populateChatCompletion`` (the
  Prompt Manager's order, in-chat injections via ``populationInjectionPrompts``: per depth one
  message per role, Prompt Manager prompts then extension prompts sorted by key, joined by
  newlines), ``populateChatHistory`` (the new-chat marker, history filled newest-first while
  it fits), ``populateDialogueExamples``, the ``ChatCompletion`` budget (context − reply length
  − 3 for the reply primer) and ``squashSystemMessages``.
* Token accounting: ``tokenizers.js`` ``countTokensOpenAI``: each message costs its role,
  content (and name + 1) tokens + 3 (OpenAI's chat accounting, what the server returns minus
  the client's padding), in the model's tokenizer.

Documented difference: where SillyTavern sends a partial prompt after a required prompt
overflows the budget (its ``TokenBudgetExceededError`` is only logged), Loomscope reports
``TOKEN_BUDGET_EXCEEDED`` and sends nothing. A group chat (``setup.group``) is assembled for
its next speaker (:mod:`engine.assembly.st_group`). Not modelled: file attachments
(``appendFileContent``), Vector Storage/Summary extension prompts, image inlining, ``continue``/``impersonate``
generation types, random probability rolls (World Info probability uses the seeded roll of
:mod:`engine.lorebook`).

It returns an :class:`~engine.assembly.st_types.AssembledPrompt`: every sent message is one
block with a stable reason; a message joined from several parts (World Info before/after, an
injection joining the Author's Note and World Info at the same depth and role) lists them in
``trace["parts"]`` (source, reason, text, tokens of each). History messages, examples and World
Info entries that did not fit are left-out blocks. The pipeline's steps 4–10 take its counts and
fates as final and build the preview (:func:`engine.pipeline.prepare`, with SillyTavern's rules
from :mod:`engine.assembly.st_result`); this module resolves nothing and builds no preview.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..lorebook import ActivatedEntry, activate, compute_budget, without_new_timers
from ..lorebook.budget import fill_budget
from ..lorebook.jsregex import RegexClock
from ..schema.blocks import BlockKind
from ..schema.lorebook import InsertionPosition, Lorebook
from ..schema.messages import ChatMessage
from ..schema.sillytavern import (
    NAMES_COMPLETION,
    NAMES_CONTENT,
    NAMES_DEFAULT,
    PERSONA_AT_DEPTH,
    PERSONA_BOTTOM_AN,
    PERSONA_IN_PROMPT,
    PERSONA_NONE,
    PERSONA_TOP_AN,
)
from ..schema.trace import TraceRecord
from ..tokenizers import count_messages_tokens
from .macros import MacroContext, expand_macros, macro_function
from .regex_scripts import AI_OUTPUT, USER_INPUT, WORLD_INFO, RegexRunner, scripts_for
from .st_bias import BiasStrings, bias_strings
from .st_group import group_depth_prompts, group_names, joined_cards, original_book_indexes
from .st_types import AssembledBlock, AssembledPrompt, BudgetOverflow, SillyTavernInputs

#: SillyTavern ``MAX_INJECTION_DEPTH`` (``script.js``).
MAX_INJECTION_DEPTH = 1000
#: Tokens held back for the reply primer (``populateChatCompletion``: ``reserveBudget(3)``).
REPLY_PRIMER_TOKENS = 3
#: Extra tokens of a World Info budget count: the text is counted as a full
#: ``{role: "system", content}`` message (``counterWrapperOpenAIAsync``): 3 per message + the
#: role's token + 3 padding − 1 (``countTokensOpenAIAsync`` starts at −1).
WI_COUNT_OVERHEAD = 6
_ROLE_NUM = {0: "system", 1: "user", 2: "assistant"}
_ROLE_OF_NAME = {"system": 0, "user": 1, "assistant": 2}
_NAME_OK = re.compile(r"^[a-zA-Z0-9_]{1,64}$")
_ORIGINAL = re.compile(r"\{\{original\}\}", re.IGNORECASE)
_KEEP, _FILL = "\x00loomscope-original-keep\x00", "\x00loomscope-original-fill\x00"
_KIND_OF = {
    "main": BlockKind.SYSTEM, "worldInfoBefore": BlockKind.LOREBOOK, "worldInfoAfter": BlockKind.LOREBOOK,
    "charDescription": BlockKind.CHARACTER, "charPersonality": BlockKind.CHARACTER,
    "scenario": BlockKind.CHARACTER, "personaDescription": BlockKind.PERSONA,
}
_REASON_OF = {
    "main": "SYSTEM_PROMPT", "charDescription": "CHARACTER", "charPersonality": "CHARACTER",
    "scenario": "CHARACTER", "personaDescription": "PERSONA",
}


@dataclass
class SharedSteps:
    """What :meth:`SillyTavernAssembler.shared_steps` computed, for the path-specific rest of ``Generate``.

    ``fields``: the card fields (``getCharacterCardFields``); ``ext``: the extension prompts by key;
    ``first_sub``: message index → its text when it differs from the stored one (``chat[0]``'s
    macros, regex scripts); ``core``: ``coreChat`` as ``(index, message)`` (``(None, None)`` for a
    foreign line); ``should_add``: the Author's Note is added this time; ``wi``: the World Info
    output buckets.
    """

    persona_desc: str
    fields: dict[str, str]
    ext: dict[str, dict[str, Any]]
    first_sub: dict[int, str]
    core: list[tuple[int | None, ChatMessage | None]]
    should_add: bool
    wi: dict[str, Any]


class _BudgetExceeded(Exception):
    """SillyTavern's ``TokenBudgetExceededError``: a required prompt does not fit."""

    def __init__(self, identifier: str, tokens: int, left: int) -> None:
        super().__init__(identifier)
        self.identifier, self.tokens, self.left = identifier, tokens, left


@dataclass
class _Msg:
    """SillyTavern ``Message``: role, content, identifier, its token count, and what it explains."""

    role: str
    content: str
    identifier: str
    tokens: int = 0
    name: str | None = None
    kind: BlockKind = BlockKind.INSTRUCTION
    source: str = ""
    reason: str = "INSTRUCTION"
    protected: bool = True
    message_index: int | None = None
    parts: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Coll:
    """SillyTavern ``MessageCollection``."""

    identifier: str
    items: list[_Msg] = field(default_factory=list)

    def tokens(self) -> int:
        return sum(m.tokens for m in self.items)


class _Completion:
    """SillyTavern ``ChatCompletion``: collections in slots and a token budget.

    The slots are the prompt collection's indices; every ``add``/``insert`` charges the budget.
    """

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.slots: dict[int, _Coll] = {}

    def _check(self, tokens: int, identifier: str) -> None:
        if self.budget - tokens < 0:
            raise _BudgetExceeded(identifier, tokens, self.budget)

    def can_afford(self, m: _Msg) -> bool:
        return self.budget - m.tokens >= 0

    def add(self, coll: _Coll, position: int | None) -> None:
        self._check(coll.tokens(), coll.identifier)
        if position is None or position == -1:
            position = max(self.slots, default=-1) + 1
        self.slots[position] = coll
        self.budget -= coll.tokens()

    def find(self, identifier: str) -> _Coll | None:
        return next((c for c in self.slots.values() if c.identifier == identifier), None)

    def insert(self, m: _Msg, identifier: str, where: str | int = "end") -> None:
        self._check(m.tokens, m.identifier)
        coll = self.find(identifier)
        if coll is None:
            raise _BudgetExceeded(m.identifier, m.tokens, self.budget)  # pragma: no cover - guarded
        if m.content:
            if where == "start":
                coll.items.insert(0, m)
            elif where == "end":
                coll.items.append(m)
            else:
                coll.items.insert(int(where), m)
            self.budget -= m.tokens

    def remove_last_from(self, identifier: str) -> _Msg | None:
        coll = self.find(identifier)
        if coll is None or not coll.items:
            return None
        m = coll.items.pop()
        self.budget += m.tokens
        return m

    def messages(self) -> list[_Msg]:
        return [m for i in sorted(self.slots) for m in self.slots[i].items if m.content]


class _Assembler:
    """One SillyTavern Chat Completion assembly (see the module docstring)."""

    def __init__(self, inputs: SillyTavernInputs) -> None:
        self.inputs = inputs
        self.req = request = inputs.request
        self.setup = setup = inputs.setup
        self.profile = inputs.profile
        self.budget = inputs.budget  # openai_max_context - openai_max_tokens
        self.card = request.character
        self.name1 = inputs.user_name
        self.name2 = inputs.char_name
        self.warnings: list[str] = []
        self.diagnostics: list[str] = []
        self.excluded: list[dict[str, Any]] = []  # PreviewBlock fields of the blocks left out
        self._counts: dict[tuple[str, str, str | None], int] = {}
        self.values: dict[str, str] = {}
        # chat_metadata.variables: {{setvar}} in one text is seen by {{getvar}} in later ones (a copy:
        # the preview never writes the chat)
        raw_vars = (request.chat.metadata or {}).get("variables")
        self.variables: dict[str, Any] = dict(raw_vars) if isinstance(raw_vars, dict) else {}
        self.global_variables: dict[str, Any] = dict(setup.global_variables)
        self.timed_effects: dict[str, Any] | None = None
        self.bias = ""  # getBiasStrings' promptBias (Start Reply With), set by shared_steps()
        self.bias_info = BiasStrings("", "", False)
        self.scan_index: list[int] | None = None
        self.regex_changes: dict[str, list[dict[str, str]]] = {}  # block source -> scripts that changed it
        self.regex = self.regex_runner()
        self.lorebook_trace: list[TraceRecord] = []
        self.group = setup.group  # a group chat (issue 27 item 7): the request is for its next speaker
        self.group_nudge: dict[str, Any] | None = None  # the prepared groupNudge prompt (complete())

    # ------------------------------------------------------------------ helpers
    def count(self, role: str, content: Any, name: str | None = None) -> int:
        """``countTokensOpenAI({role, content[, name]})``: 0 for empty content (``new Message``)."""
        if not isinstance(content, str) or not content:
            return 0
        key = (role, content, name)
        hit = self._counts.get(key)
        if hit is None:
            msg: dict[str, Any] = {"role": role, "content": content}
            if name:
                msg["name"] = name
            hit = self._counts[key] = count_messages_tokens(self.profile, [msg])[0]
        return hit

    def wi_count(self, text: str) -> int:
        return self.profile.count(text) + WI_COUNT_OVERHEAD if text else 0

    def sub(self, text: str | None, where: str, original: str | None = None) -> str:
        """``substituteParams``: SillyTavern's macros (unknown ones stay, with a warning).

        ``{{original}}`` is filled once with ``original`` (later ones become empty), and stays as
        written when there is no original, as in SillyTavern.
        """
        if not text:
            return ""
        # {{original}}: without a value it stays as written (SillyTavern has no macro for it then);
        # with one, only the first occurrence is filled, later ones become "" (substituteParams)
        found = _ORIGINAL.findall(text)
        if found:
            first = [True]

            def mark(_m: re.Match[str]) -> str:
                if original is None:
                    return _KEEP
                if first[0]:
                    first[0] = False
                    return _FILL
                return ""

            text = _ORIGINAL.sub(mark, text)
        out, unknown = expand_macros(text, self.macro_context())
        if found:
            out = out.replace(_KEEP, "{{original}}").replace(_FILL, original or "")
        for u in dict.fromkeys(unknown):
            w = f"unknown macro {u} in {where} (left as written)"
            if w not in self.warnings:
                self.warnings.append(w)
        return out

    def macro_context(self) -> MacroContext:
        """The macro values of this assembly (``substituteParams``'s environment), variables shared."""
        return MacroContext(user=self.name1, char=self.name2, values=self.values,
                            seed=self.req.settings.world_info.seed, variables=self.variables,
                            global_variables=self.global_variables)

    def wi_macros(self) -> Callable[[str], str]:
        """``substituteParams`` for World Info contents and keys (unknown macros: one warning each)."""
        def unknown(found: list[str]) -> None:
            for u in dict.fromkeys(found):
                w = f"unknown macro {u} in World Info (left as written)"
                if w not in self.warnings:
                    self.warnings.append(w)

        return macro_function(self.macro_context(), unknown)

    def base_replace(self, text: str | None, where: str) -> str:
        r"""``baseChatReplace``: macros, ``collapse_newlines``, ``\\r`` removed."""
        if not text:
            return text or ""
        out = self.sub(text, where)
        if self.setup.collapse_newlines:
            out = re.sub(r"\n+", "\n", out)
        return out.replace("\r", "")

    def replace_as(self, text: str, char: str) -> str:
        """``baseChatReplace(text, name1, char)``: :meth:`base_replace` with ``{{char}}`` = ``char`` (group members)."""
        saved, self.name2 = self.name2, char
        try:
            return self.base_replace(text, f"{char}'s card")
        finally:
            self.name2 = saved

    # ------------------------------------------------------------------ the chat as SillyTavern holds it
    def st_chat(self) -> list[tuple[int | None, ChatMessage | None]]:
        """``chat``: the messages plus the foreign lines SillyTavern also loads (empty ``mes``)."""
        msgs = self.req.chat.messages
        extra = [x for x in (getattr(self.req.chat, "st_extra_lines", None) or []) if isinstance(x, dict)]
        out: list[tuple[int | None, ChatMessage | None]] = []
        by_before: dict[int, int] = {}
        for x in extra:
            b = x.get("before")
            if isinstance(b, int):
                by_before[b] = by_before.get(b, 0) + 1
        for i, m in enumerate(msgs):
            out.extend([(None, None)] * by_before.pop(i, 0))
            out.append((i, m))
        for n in by_before.values():
            out.extend([(None, None)] * n)
        return out

    @staticmethod
    def _meta(m: ChatMessage) -> dict[str, Any]:
        return dict(m.meta.model_extra or {})

    def st_role(self, m: ChatMessage) -> str:
        """``setOpenAIMessages``: user, the narrator as system, everything else assistant."""
        meta = self._meta(m)
        raw = meta.get("extra")
        extra = raw if isinstance(raw, dict) else {}
        if "st_keys" not in meta:
            return m.role if m.role in ("user", "assistant", "system") else "assistant"
        if m.role == "user":
            return "user"
        return "system" if extra.get("type") == "narrator" else "assistant"

    # ------------------------------------------------------------------ world info
    def world_info(self, scan: list[ChatMessage], ext_prompts: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """``getWorldInfoPrompt``: before/after text, example entries, depth entries, AN top/bottom.

        ``checkWorldInfo`` in three steps: activation without a budget (:func:`engine.lorebook.activate`
        over the books in ``getSortedEntries`` order), the budget loop pass by pass
        (:meth:`wi_budget`), the output buckets (:func:`_wi_output`).
        """
        inputs = self.inputs
        if not inputs.books:
            return _wi_output([])
        wi = self.req.settings.world_info
        groups = [list(g) for g in inputs.book_groups]
        order = list(inputs.book_order)
        ordered = [inputs.books[i] for i in order]
        extra_scan = [p["value"] for k, p in sorted(ext_prompts.items()) if p.get("scan") and p.get("value")]
        unlimited = wi.model_copy(update={"budget_percent": 100, "budget_cap": 0})
        act = activate(ordered, scan, unlimited, count_tokens=self.profile.count, context_limit=10 ** 9,
                       user_name=self.name1, char_name=self.name2, character=self.card,
                       persona=self.req.persona, chat_metadata=self.req.chat.metadata,
                       extra_scan_text=extra_scan, macros=self.wi_macros(),
                       character_avatar=self.setup.character_avatar or None,
                       character_tag_ids=self.setup.character_tags)
        self.diagnostics.extend(act.diagnostics)
        self.timed_effects = dict(act.timed_effects)
        kept = self.wi_budget(list(act.activated), ordered, _sorted_entry_ranks(groups, ordered),
                              compute_budget(wi, self.budget))
        kept_keys = {(a.book, str(a.uid)) for a, _ in kept}
        stopped = [f"{a.book}.{a.uid}" for a in act.activated if (a.book, str(a.uid)) not in kept_keys]
        if stopped:  # setTimedEffects(allActivatedEntries): no timer for an entry the budget stopped
            visible = sum(1 for m in scan if not m.meta.hidden)
            self.timed_effects = without_new_timers(self.timed_effects, stopped, visible)
        kept = [(a, self.regexed_lore(a, c)) for a, c in kept]
        out = _wi_output(kept)
        self.wi_trace(act.trace, order, kept)
        return out

    def regexed_lore(self, a: ActivatedEntry, content: str) -> str:
        """``getRegexedString(entry.content, WORLD_INFO, {depth})`` (world-info.js 4127–4128)."""
        if not self.regex.scripts:
            return content
        depth = int(a.depth) if a.position == InsertionPosition.AT_DEPTH else None
        new, changes = self.regex.apply(content, WORLD_INFO, depth=depth)
        if changes:
            self.regex_changes[f"lorebook:{a.book}:{a.uid}"] = [c.as_dict() for c in changes]
        return new

    def wi_budget(self, activated: list[Any], ordered: list[Lorebook], st_rank: dict[tuple[int, str], int],
                  wi_budget: int) -> list[tuple[Any, str]]:
        """``checkWorldInfo``'s budget loop, pass by pass, over the entries activated without a budget.

        Each pass's entries (sticky first, then ``getSortedEntries`` order) go through
        :func:`engine.lorebook.budget.fill_budget`, counted as SillyTavern's Chat Completion path
        counts them (:meth:`wi_count`); the first entry that reaches the budget stops the scan, so
        it, the rest of its pass and every later pass are dropped (listed as excluded blocks).
        Returns the kept ``(entry, content after macros)`` pairs in activation order.
        """
        entries = {(i, str(e.uid)): e for i, b in enumerate(ordered) for e in b.entries}
        kept: list[tuple[Any, str]] = []
        dropped: list[tuple[Any, dict[str, Any]]] = []
        all_text = ""
        passes = sorted({_pass_of(a) for a in activated})
        overflow = False
        for n, p in enumerate(passes):
            now = sorted((a for a in activated if _pass_of(a) == p),
                         key=lambda a: (0 if a.reason == "LOREBOOK_STICKY" else 1,
                                        st_rank.get((a.book_index, str(a.uid)), 0)))
            if overflow:
                dropped.extend((a, {"budget": wi_budget, "note": "scan stopped at the budget"}) for a in now)
                continue
            # contents come with their macros substituted by the activation (world-info.js 4027)
            fill = fill_budget(now, content=lambda a: a.content,
                               scanned_tokens=self.wi_count(all_text), budget=wi_budget, count=self.wi_count)
            kept.extend(fill.kept)
            if fill.overflow_at is not None:
                overflow = True
                dropped.extend((b, {"budget": wi_budget, "used": fill.overflow_total})
                               for b in now[fill.overflow_at:])
            elif n + 1 < len(passes):
                rec = [c for a, c in fill.kept
                       if not bool(getattr(entries.get((a.book_index, str(a.uid))), "prevent_recursion", False))]
                all_text = "\n".join(rec) + "\n" + all_text
        for a, detail in dropped:
            self.excluded.append(dict(
                kind=BlockKind.LOREBOOK.value, role="system", source=f"lorebook:{a.book}:{a.uid}",
                text=a.content, tokens=self.count("system", a.content), reason="LOREBOOK_BUDGET",
                protected=False, trace={**(a.trace or {}), **detail}))
        return kept

    def wi_trace(self, trace: list[TraceRecord], order: list[int], kept: list[tuple[ActivatedEntry, str]]) -> None:
        """The preview's lorebook trace: book indexes into ``request.lorebooks``, budget drops marked."""
        kept_ids = {(a.book, str(a.uid)) for a, _ in kept}
        for rec in trace:
            update: dict[str, Any] = {}
            bi = rec.book_index
            if 0 <= bi < len(order) and order[bi] != bi:
                update["book_index"] = order[bi]  # an index into request.lorebooks, as the stage pipeline gives
            if rec.activated and (rec.book, str(rec.uid)) not in kept_ids:
                update["activated"], update["code"] = False, "LOREBOOK_BUDGET"
            detail = self.chat_indexes(rec.detail)
            if detail is not rec.detail:
                update["detail"] = detail
            # (model_construct: the activation builds its records without validation, as valid)
            self.lorebook_trace.append(TraceRecord.model_construct(**{**rec.__dict__, **update}) if update else rec)

    # ------------------------------------------------------------------ the assembly
    def shared_steps(self) -> SharedSteps:
        """``Generate``'s steps before its Chat / Text Completion branches, in SillyTavern's order.

        One implementation for both paths: ``getCharacterCardFields`` (then :meth:`on_card_fields`),
        the Character's Note, ``chat[0]``'s macros, ``coreChat`` with the Regex extension's
        ``getRegexedString`` (script.js 3559–3583), ``setFloatingPrompt``, the persona prompt,
        ``getWorldInfoPrompt`` over the regexed chat (World Info contents regexed in
        ``checkWorldInfo``), and ``getBiasStrings`` (Start Reply With, :attr:`bias`).
        """
        persona_desc = (self.req.persona.description if self.req.persona is not None else "") or ""
        fields = self.card_fields(persona_desc)
        self.on_card_fields(fields)
        ext: dict[str, dict[str, Any]] = {}
        self.character_note(ext)
        st_chat = self.st_chat()
        first_sub = self.regexed_chat(st_chat, self.first_message_macros(st_chat))
        core = self.core_chat(st_chat)
        should_add = self.authors_note(ext)
        self.persona_prompt(ext, persona_desc, should_add)
        # World Info, scanned over the chat without hidden messages (first message substituted)
        scan = [m.model_copy(update={"content": first_sub[i]}) if i in first_sub else m
                for i, m in core if m is not None and i is not None]
        # the trace's message indexes count the scanned chat (no hidden messages): name chat messages
        self.scan_index = [i for i, m in core if m is not None and i is not None]
        wi = self.world_info(scan, ext)
        # getBiasStrings runs first in Generate (script.js 3490); here after the card fields, which
        # set the macro values its substituteParams reads (the order only matters to {{setvar}})
        self.bias_info = bias_strings(self.req.chat.messages, self.setup.start_reply_with,
                                      lambda t: self.sub(t, "Start Reply With"))
        self.bias = self.bias_info.prompt_bias
        return SharedSteps(persona_desc, fields, ext, first_sub, core, should_add, wi)

    def on_card_fields(self, fields: dict[str, str]) -> None:
        """Called right after ``getCharacterCardFields`` (the Text Completion path takes its system prompt)."""

    def run(self) -> tuple[list[_Msg], str | None, dict[str, Any]]:
        """``Generate`` (Chat Completion path), step by step.

        Returns the messages to send, the overflowing identifier or ``None``, and the overflow details.
        """
        sh = self.shared_steps()
        fields, wi, ext = sh.fields, sh.wi, sh.ext
        examples = self.mes_examples(fields["mesExamples"], wi["em"])
        self.wi_injections(ext, wi, sh.should_add)
        oai = self.openai_messages(sh.core, sh.first_sub)
        return self.complete(fields, "\n".join(wi["before"]), "\n".join(wi["after"]),
                             self.lore_parts(wi["before_parts"]), self.lore_parts(wi["after_parts"]),
                             ext, oai, examples)

    def card_fields(self, persona_desc: str) -> dict[str, str]:
        """``getCharacterCardFields`` with ``baseChatReplace``; sets the macro values they feed."""
        setup, card = self.setup, self.card
        meta = self.req.chat.metadata or {}
        fields = {"description": "", "personality": "", "scenario": "", "mesExamples": "", "system": "",
                  "jailbreak": "", "persona": self.base_replace(persona_desc.strip(), "persona")}
        self.values = {"persona": fields["persona"], "charifnotgroup": self.name2, "group": self.name2,
                       "model": self.req.settings.model, "maxprompt": str(self.budget)}
        self.values.update(_last_messages(self.req.chat.messages))
        if self.group is not None:  # substituteParams' getGroupValue
            self.values["group"] = self.values["charifnotgroup"] = group_names(self.group)
        if card is None:
            return fields
        scen = meta.get("scenario") if isinstance(meta.get("scenario"), str) and meta.get("scenario") else card.scenario
        fields.update(
            description=self.base_replace((card.description or "").strip(), "card description"),
            personality=self.base_replace((card.personality or "").strip(), "card personality"),
            scenario=self.base_replace((scen or "").strip(), "card scenario"),
            mesExamples=self.base_replace((card.mes_example or "").strip(), "card mes_example"),
            system=(self.base_replace((card.system_prompt or "").strip(), "card system_prompt")
                    if setup.prefer_character_prompt else ""),
            jailbreak=(self.base_replace((card.post_history_instructions or "").strip(),
                                         "card post_history_instructions")
                       if setup.prefer_character_jailbreak else ""),
        )
        if self.group is not None:  # getCharacterCardFields: the joined cards in join mode
            joined = joined_cards(self.group, setup.character_avatar, self.replace_as,
                                  str(meta.get("scenario") or "") if isinstance(meta.get("scenario"), str) else "")
            if joined is not None:
                fields.update(joined)
        self.values.update(description=fields["description"], personality=fields["personality"],
                           scenario=fields["scenario"], mesexamples=fields["mesExamples"],
                           charprompt=fields["system"], charjailbreak=fields["jailbreak"],
                           charversion=card.character_version or "", char_version=card.character_version or "")
        return fields

    def character_note(self, ext: dict[str, dict[str, Any]]) -> None:
        """The Character's Note (``Generate``: ``DEPTH_PROMPT``), an extension prompt at its depth."""
        card = self.card
        if self.group is not None:  # getGroupDepthPrompts (join modes): every member's note, DEPTH_PROMPT_<i>
            group_dps = group_depth_prompts(self.group, self.setup.character_avatar, self.replace_as)
            for k, (text, depth, role) in enumerate(group_dps):
                role_num = role if isinstance(role, int) and role in _ROLE_NUM else _ROLE_OF_NAME.get(str(role), 0)
                ext[f"DEPTH_PROMPT_{k}"] = _ext_prompt(
                    text, 1, depth, self.setup.author_note.allow_wi_scan, role_num,
                    [{"source": "character:depth_prompt", "reason": "INSTRUCTION", "text": text}])
            if group_dps:
                return
        if card is None:
            return
        raw = card.extensions.get("depth_prompt")
        dp = raw if isinstance(raw, dict) else {}
        text = self.base_replace(str(dp.get("prompt") or "").strip(), "card depth_prompt")
        d = dp.get("depth")
        role = dp.get("role")
        role_num = role if isinstance(role, int) and role in _ROLE_NUM else _ROLE_OF_NAME.get(str(role or "system"), 0)
        ext["DEPTH_PROMPT"] = _ext_prompt(
            text, 1, int(d) if isinstance(d, (int, float)) else 4, self.setup.author_note.allow_wi_scan, role_num,
            [{"source": "character:depth_prompt", "reason": "INSTRUCTION", "text": text}] if text else [])

    def regex_runner(self) -> RegexRunner:
        """The Regex extension's scripts for this chat (global, then the card's when allowed)."""
        setup, wi = self.setup, self.req.settings.world_info
        scripts = scripts_for(setup.regex_scripts, self.card.extensions if self.card is not None else None,
                              allowed=setup.character_regex_allowed, disabled=setup.regex_disabled,
                              warn=self.warnings.append)
        return RegexRunner(scripts, lambda t: self.sub(t, "regex script"),
                           RegexClock(wi.regex_timeout_ms / 1000, wi.regex_total_timeout_ms / 1000),
                           self.warnings)

    def regexed_chat(self, st_chat: list[tuple[int | None, ChatMessage | None]],
                     first_sub: dict[int, str]) -> dict[int, str]:
        """``coreChat``'s mapping (script.js 3565–3583): message index → its text when it changed.

        ``getRegexedString`` with user messages as user input, the others as AI output,
        ``depth`` = messages after it in ``coreChat`` (hidden ones left out); then a caption title
        (``extra.append_title`` and ``extra.title``, the Image Captioning extension) after a blank
        line. Before World Info scans the chat. File attachments (``appendFileContent``) are not
        read.
        """
        core = [(i, m) for i, m in st_chat if m is None or not (m.meta.hidden or m.meta.manualExcluded)]
        out = dict(first_sub)
        for k, (i, m) in enumerate(core):
            if i is None or m is None:
                continue
            text = first_sub.get(i, m.text())
            if self.regex.scripts:
                new, changes = self.regex.apply(text, USER_INPUT if m.role == "user" else AI_OUTPUT,
                                                depth=len(core) - k - 1)
                if changes:
                    text = out[i] = new
                    self.regex_changes[f"message:{i}"] = [c.as_dict() for c in changes]
            extra = self._meta(m).get("extra")
            if isinstance(extra, dict) and extra.get("append_title") and isinstance(extra.get("title"), str) \
                    and extra["title"]:
                out[i] = f"{text}\n\n{extra['title']}"
        return out

    def first_message_macros(self, st_chat: list[tuple[int | None, ChatMessage | None]]) -> dict[int, str]:
        """``Generate``: ``chat[0].mes = substituteParams(chat[0].mes)``; message index → its text."""
        first_sub: dict[int, str] = {}
        i0, m0 = st_chat[0] if st_chat else (None, None)
        if i0 is not None and m0 is not None:  # a message always has its index (st_chat)
            first_sub[i0] = self.sub(m0.text(), "message 0")
        return first_sub

    def core_chat(self, st_chat: list[tuple[int | None, ChatMessage | None]]
                  ) -> list[tuple[int | None, ChatMessage | None]]:
        """``coreChat``: the chat without hidden messages (each listed as an excluded block).

        A message the writer excluded in Loomscope is never sent (issue 9): SillyTavern's own
        way to keep a message out is hiding it, so an excluded message is treated the same.
        """
        core = [(i, m) for i, m in st_chat if m is None or not (m.meta.hidden or m.meta.manualExcluded)]
        for i, m in st_chat:
            if m is not None and (m.meta.hidden or m.meta.manualExcluded):
                self.excluded.append(dict(kind=BlockKind.MESSAGE.value, role=m.role, source=f"message:{i}",
                                          text=m.text(), tokens=self.count(m.role, m.text()),
                                          reason="HIDDEN" if m.meta.hidden else "MANUAL_EXCLUDED",
                                          protected=False, message_index=i,
                                          manual_excluded=bool(m.meta.manualExcluded)))
        return core

    def authors_note(self, ext: dict[str, dict[str, Any]]) -> bool:
        """``setFloatingPrompt`` (authors-note.js): the note every ``interval`` user messages.

        Returns whether the note is added this generation.
        """
        an = self.setup.author_note
        user_count = sum(1 for m in self.req.chat.messages if m.role == "user")
        last = 1 if an.interval == 1 else user_count
        should_add = False
        if last > 0 and an.interval > 0:
            till = last % an.interval if last >= an.interval else an.interval - last
            should_add = till == 0
        an_text = an.prompt if should_add else ""
        an_parts = [{"source": "author_note", "reason": "INSTRUCTION", "text": an_text}] if an_text else []
        cn = self.setup.character_note
        if should_add and self.card is not None and cn is not None and cn.use_chara:
            # extension_settings.note.chara (authors-note.js 329–346): the card's own note replaces the
            # chat's (position 0), or goes before (1) / after (2) it, joined by a newline
            part = {"source": "character:author_note", "reason": "INSTRUCTION", "text": cn.prompt}
            if cn.position == 1:
                an_text, an_parts = f"{cn.prompt}\n{an_text}", [part, *an_parts]
            elif cn.position == 2:
                an_text, an_parts = f"{an_text}\n{cn.prompt}", [*an_parts, part]
            else:
                an_text, an_parts = cn.prompt, [part] if cn.prompt else []
        ext["2_floating_prompt"] = _ext_prompt(an_text, an.position, an.depth, an.allow_wi_scan, an.role, an_parts)
        return should_add

    def persona_prompt(self, ext: dict[str, dict[str, Any]], pd: str, should_add: bool) -> None:
        """``addPersonaDescriptionExtensionPrompt``: persona at the top/bottom of the note or at a depth."""
        setup = self.setup
        ext["PERSONA_DESCRIPTION"] = _ext_prompt("", 0, 0, False, 0)
        if not pd or setup.persona_position == PERSONA_NONE:
            return
        if setup.persona_position in (PERSONA_TOP_AN, PERSONA_BOTTOM_AN) and should_add:
            cur = ext["2_floating_prompt"]
            part = {"source": "persona", "reason": "PERSONA", "text": pd}
            if setup.persona_position == PERSONA_TOP_AN:
                cur["value"], cur["parts"] = f"{pd}\n{cur['value']}", [part, *cur["parts"]]
            else:
                cur["value"], cur["parts"] = f"{cur['value']}\n{pd}", [*cur["parts"], part]
        if setup.persona_position == PERSONA_AT_DEPTH:
            ext["PERSONA_DESCRIPTION"] = _ext_prompt(pd, 1, setup.persona_depth, True, setup.persona_role,
                                                     [{"source": "persona", "reason": "PERSONA", "text": pd}])

    def lore_parts(self, pairs: list[tuple[Any, str]]) -> list[dict[str, Any]]:
        """``trace["parts"]`` of a message joined from World Info entries."""
        return [{"source": f"lorebook:{a.book}:{a.uid}", "reason": a.reason, "text": c,
                 "tokens": self.count("system", c), "trace": dict(self.chat_indexes(a.trace or {}))}
                for a, c in pairs]

    def chat_indexes(self, detail: dict[str, Any]) -> dict[str, Any]:
        """``detail`` with its ``message_index`` turned into the chat's own message index.

        The activation counts the scanned chat (hidden messages left out); ``detail`` itself is
        returned when it names no message or the index is already the chat's.
        """
        mi = detail.get("message_index")
        index = self.scan_index
        if not isinstance(mi, int) or index is None or not 0 <= mi < len(index) or index[mi] == mi:
            return detail
        return {**detail, "message_index": index[mi]}

    def mes_examples(self, mes_examples: str, em: list[tuple[str, str]], strip: bool = True) -> list[str]:
        """``parseMesExamples`` with World Info's example-message entries before/after.

        ``strip``: apply ``strip_examples`` here (Chat Completion); the Text Completion path
        strips them only after the story string is rendered.
        """
        examples = self.parse_mes_examples(mes_examples)
        for where, content in em:
            cleaned = self.parse_mes_examples(self.base_replace(content, "lorebook example entry"))
            if where == "before":
                examples[0:0] = cleaned
            else:
                examples.extend(cleaned)
        if strip and self.setup.strip_examples:
            examples = []
        return examples

    def wi_injections(self, ext: dict[str, dict[str, Any]], wi: dict[str, Any], should_add: bool) -> None:
        """World Info at depth (``customDepthWI-*`` extension prompts) and in the Author's Note."""
        for (d, role), pairs in wi["depth"]:
            ext[f"customDepthWI-{d}-{role}"] = _ext_prompt("\n".join(c for _, c in pairs), 1, d, False, role,
                                                          self.lore_parts(pairs))
        if should_add:
            cur = ext["2_floating_prompt"]
            top, bottom = wi["an_top"], wi["an_bottom"]
            value = f"{chr(10).join(c for _, c in top)}\n{cur['value']}\n{chr(10).join(c for _, c in bottom)}"
            value = re.sub(r"^\n", "", value)
            value = re.sub(r"\n$", "", value)
            cur["value"] = value
            cur["parts"] = [*self.lore_parts(top), *cur["parts"], *self.lore_parts(bottom)]

    def openai_messages(self, core: list[tuple[int | None, ChatMessage | None]],
                        first_sub: dict[int, str]) -> list[dict[str, Any]]:
        """``setOpenAIMessages`` (openai.js): the chat newest first, names behaviour applied."""
        setup = self.setup
        oai: list[dict[str, Any]] = []
        for i, m in reversed(core):
            if m is None:
                oai.append({"role": "assistant", "content": "", "name": None, "index": None})
                continue
            role = self.st_role(m)
            content = first_sub.get(i, m.text()) if i is not None else m.text()
            meta_x = self._meta(m)
            raw = meta_x.get("extra")
            extra = raw if isinstance(raw, dict) else {}
            narrator = extra.get("type") == "narrator"
            name = m.name or (self.name1 if m.role == "user" else self.name2)
            if setup.names_behavior == NAMES_DEFAULT:
                # in a group every name but name1; else a message written under another persona's name
                if name != self.name1 and (self.group is not None or (meta_x.get("force_avatar") and not narrator)):
                    content = f"{name}: {content}"
            elif setup.names_behavior == NAMES_CONTENT and not narrator:
                content = f"{name}: {content}"
            content = content.replace("\r", "")
            if role == "user" and setup.wrap_in_quotes:
                content = f'"{content}"'
            oai.append({"role": role, "content": content, "name": name, "index": i})
        return oai

    def parse_mes_examples(self, text: str) -> list[str]:
        """``Generate``'s ``parseMesExamples`` (script.js 3634–3648), one for both paths.

        Blocks split at ``<START>``, each headed by :meth:`example_heading`.
        """
        if not text or text == "<START>":
            return []
        if not text.startswith("<START>"):
            text = "<START>\n" + text.strip()
        heading = self.example_heading()
        return [f"{heading}{b.strip()}\n" for b in re.split(r"<START>", text, flags=re.IGNORECASE)[1:]]

    def example_heading(self) -> str:
        r"""``parseMesExamples``' ``blockHeading`` on the Chat Completion path (``main_api === 'openai'``): ``<START>\n``."""
        return "<START>\n"

    def example_messages(self, blocks: list[str]) -> list[list[dict[str, Any]]]:
        """``setOpenAIMessageExamples`` and ``parseExampleIntoIndividual``."""
        out = []
        for item in blocks:
            replaced = re.sub(r"<START>", "{Example Dialogue:}", item, count=1, flags=re.IGNORECASE).replace("\r", "")
            lines = replaced.split("\n")
            result: list[dict[str, Any]] = []
            cur: list[str] = []
            in_user = in_bot = False

            def add(name: str, system_name: str, cur: list[str] = cur,
                    result: list[dict[str, Any]] = result) -> None:
                text = "\n".join(cur).replace(name + ":", "", 1).strip()
                if self.group is not None:  # parseExampleIntoIndividual(appendNamesForGroup) in a group
                    text = f"{name}: {text}"
                result.append({"role": "system", "content": text, "name": system_name})
                cur.clear()

            for line in lines[1:]:
                if line.startswith(self.name1 + ":"):
                    in_user = True
                    if in_bot:
                        add(self.name2, "example_assistant")
                    in_bot = False
                elif line.startswith(self.name2 + ":"):
                    in_bot = True
                    if in_user:
                        add(self.name1, "example_user")
                    in_user = False
                cur.append(line)
            if in_user:
                add(self.name1, "example_user")
            elif in_bot:
                add(self.name2, "example_assistant")
            out.append(result)
        return out

    def complete(self, fields: dict[str, str], wi_before: str, wi_after: str, before_parts: list[dict[str, Any]],
                 after_parts: list[dict[str, Any]], ext: dict[str, dict[str, Any]], oai: list[dict[str, Any]],
                 examples: list[str]) -> tuple[list[_Msg], str | None, dict[str, Any]]:
        """``prepareOpenAIMessages``: the prompt collection, then ``populateChatCompletion``."""
        prompts, enabled = self.prompt_collection()

        def index(identifier: str) -> int:
            return next((k for k, p in enumerate(prompts) if p["identifier"] == identifier), -1)

        system_prompts = self.system_prompts(fields, wi_before, wi_after, before_parts, after_parts, ext)
        for sp in system_prompts:
            cp = next((p for p in prompts if p["identifier"] == sp["identifier"]), None)
            if cp is not None:
                for k in ("injection_position", "injection_depth", "role"):
                    if cp.get(k) is not None:
                        sp[k] = cp[k]
            new = self.prepare(sp)
            at = index(sp["identifier"])
            if at != -1:
                prompts[at] = new
            else:
                prompts.append(new)
        self.card_overrides(prompts, fields, index)
        if self.group is not None and index("groupNudge") != -1:
            self.group_nudge = prompts[index("groupNudge")]
        cc = _Completion(self.budget)
        try:
            return self.populate(cc, prompts, enabled, index, ext, oai, examples), None, {}
        except _BudgetExceeded as exc:
            return cc.messages(), exc.identifier, {"tokens": exc.tokens, "left": exc.left}

    def prompt_collection(self) -> tuple[list[dict[str, Any]], dict[str, bool]]:
        """``getPromptCollection``: enabled prompts in order (a disabled main stays, emptied), prepared.

        Returns the prompts and whether each identifier of the order is enabled.
        """
        setup = self.setup
        by_id = {p.identifier: p for p in setup.prompts}
        if self.req.system_prompt is not None and "main" in by_id:  # `preview --system` overrides the main prompt
            by_id["main"] = by_id["main"].model_copy(update={"content": self.req.system_prompt})
        prompts: list[dict[str, Any]] = []
        enabled: dict[str, bool] = {}
        for o in setup.prompt_order:
            enabled.setdefault(o.identifier, o.enabled)
            p = by_id.get(o.identifier)
            if p is None:
                continue
            if o.enabled:
                prompts.append(self.prepare(p.model_dump()))
            elif o.identifier == "main":
                prompts.append(self.prepare({**p.model_dump(), "content": ""}))
        return prompts, enabled

    def system_prompts(self, fields: dict[str, str], wi_before: str, wi_after: str,
                       before_parts: list[dict[str, Any]], after_parts: list[dict[str, Any]],
                       ext: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
        """``prepareOpenAIMessages``' ``systemPrompts``: World Info, card fields, the note, the persona."""
        setup = self.setup

        def fmt_wi(value: str) -> str:
            if not value:
                return ""
            if not setup.wi_format.strip():
                return value
            return setup.wi_format.replace("{0}", value)

        scenario_text = self.sub(setup.scenario_format, "scenario format") if fields["scenario"] and setup.scenario_format else ""
        personality_text = (self.sub(setup.personality_format, "personality format")
                            if fields["personality"] and setup.personality_format else "")
        system_prompts: list[dict[str, Any]] = [
            {"role": "system", "content": fmt_wi(wi_before), "identifier": "worldInfoBefore", "parts": before_parts},
            {"role": "system", "content": fmt_wi(wi_after), "identifier": "worldInfoAfter", "parts": after_parts},
            {"role": "system", "content": fields["description"], "identifier": "charDescription"},
            {"role": "system", "content": personality_text, "identifier": "charPersonality"},
            {"role": "system", "content": scenario_text, "identifier": "scenario"},
            {"role": "system", "content": "", "identifier": "impersonate"},
            {"role": "system", "content": "", "identifier": "quietPrompt"},
            {"role": "system", "content": self.bias, "identifier": "bias"},
            {"role": "system", "content": self.sub(setup.group_nudge_prompt, "group nudge"), "identifier": "groupNudge"},
        ]
        an = ext.get("2_floating_prompt")
        if an and an["value"]:
            pos = {2: "start", 0: "end"}.get(an["position"], False)
            system_prompts.append({"role": _ROLE_NUM.get(an["role"], "system"), "content": an["value"],
                                   "identifier": "authorsNote", "position": pos, "parts": an["parts"]})
        persona = self.req.persona.description if self.req.persona is not None else ""
        if persona and setup.persona_position == PERSONA_IN_PROMPT:
            system_prompts.append({"role": "system", "content": persona, "identifier": "personaDescription"})
        return system_prompts

    def card_overrides(self, prompts: list[dict[str, Any]], fields: dict[str, str],
                       index: Callable[[str], int]) -> None:
        """The card's system prompt and post-history instructions replace ``main``/``jailbreak``.

        ``{{original}}`` is the replaced text; a prompt with ``forbid_overrides`` keeps its own.
        """
        for ident, override, field_name in (("main", fields["system"], "system_prompt"),
                                            ("jailbreak", fields["jailbreak"], "post_history_instructions")):
            at = index(ident)
            if override and at != -1 and prompts[at].get("forbid_overrides") is not True:
                original = prompts[at]["content"]
                replaced = self.prepare({**prompts[at], "content": override}, original=original)
                replaced["parts"] = [{"source": f"character:{field_name}", "reason": "SYSTEM_PROMPT"
                                      if ident == "main" else "INSTRUCTION", "text": override}]
                prompts[at] = replaced

    def prepare(self, prompt: dict[str, Any], original: str | None = None) -> dict[str, Any]:
        """``PromptManager.preparePrompt``: a copy with macros expanded in ``content``."""
        out = dict(prompt)
        out["content"] = self.sub(prompt.get("content") or "", f"prompt {prompt.get('identifier')}",
                                  original=original)
        return out

    def msg(self, p: dict[str, Any], *, identifier: str | None = None) -> _Msg:
        ident = identifier or p["identifier"]
        role = p.get("role") or "system"
        content = p.get("content") or ""
        kind = _KIND_OF.get(ident, BlockKind.INSTRUCTION)
        reason = _REASON_OF.get(ident, "INSTRUCTION")
        if kind == BlockKind.LOREBOOK:
            reason = "LOREBOOK_MATCHED"
        return _Msg(role, content, ident, self.count(role, content), kind=kind, source=f"prompt:{ident}",
                    reason=reason, parts=list(p.get("parts") or []))

    def populate(self, cc: _Completion, prompts: list[dict[str, Any]], enabled: dict[str, bool], index: Any,
                 ext: dict[str, dict[str, Any]], oai: list[dict[str, Any]], examples: list[str]) -> list[_Msg]:
        """``populateChatCompletion`` (raises :class:`_BudgetExceeded` where SillyTavern throws)."""
        setup = self.setup

        def get(identifier: str) -> dict[str, Any] | None:
            at = index(identifier)
            return prompts[at] if at != -1 else None

        def add_to(source: str) -> None:
            p = get(source)
            if p is None:
                return
            if enabled.get(source) is False and source != "main":
                return
            if p.get("injection_position") == 1:
                return
            cc.add(_Coll(source, [self.msg(p)]), index(source))

        cc.budget -= REPLY_PRIMER_TOKENS
        for source in ("worldInfoBefore", "main", "worldInfoAfter", "charDescription", "charPersonality",
                       "scenario", "personaDescription"):
            add_to(source)
        user_relative = [p["identifier"] for p in prompts
                         if p.get("system_prompt") is False and p.get("injection_position") != 1]
        absolute = [p for p in prompts if p.get("injection_position") == 1]
        for ident in ("nsfw", "jailbreak", *user_relative):
            add_to(ident)
        if get("enhanceDefinitions") is not None:
            add_to("enhanceDefinitions")
        if self.bias.strip():  # Start Reply With (openai.js 1036), after every ordered prompt
            add_to("bias")
        an = get("authorsNote")
        if an is not None and an.get("position") and cc.find("main") is not None:
            m = self.msg(an)
            m.kind, m.reason, m.source = BlockKind.INSTRUCTION, "INSTRUCTION", "author_note"
            cc.insert(m, "main", an["position"])
        messages = self.inject(absolute, ext, oai)
        if setup.pin_examples:
            self.dialogue_examples(cc, prompts, index, examples)
            self.chat_history(cc, index, messages)
        else:
            self.chat_history(cc, index, messages)
            self.dialogue_examples(cc, prompts, index, examples)
        return cc.messages()

    def extension_prompt(self, ext: dict[str, dict[str, Any]], position: int, depth: int | None = None,
                         role: int | None = None, separator: str = "\n", wrap: bool = True
                         ) -> tuple[str, list[dict[str, Any]]]:
        """``getExtensionPrompt`` (script.js 2787–2806), for both paths.

        The extension prompts at ``position`` (and ``depth`` / ``role`` when given), sorted by key,
        each trimmed, joined by ``separator``; wrapped in it when ``wrap``; macros substituted.
        Returns the text and the joined prompts' ``parts``.
        """
        chosen = [p for _k, p in sorted(ext.items()) if p["position"] == position and p["value"]
                  and (depth is None or p["depth"] == depth) and (role is None or p["role"] == role)]
        text = separator.join(p["value"].strip() for p in chosen)
        if wrap and text and not text.startswith(separator):
            text = separator + text
        if wrap and text and not text.endswith(separator):
            text = text + separator
        where = f"extension prompt at depth {depth}" if depth is not None else "extension prompt"
        return (self.sub(text, where) if text else text), [part for p in chosen for part in p["parts"]]

    def inject(self, absolute: list[dict[str, Any]], ext: dict[str, dict[str, Any]],
               oai: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``populationInjectionPrompts``: the chat with the depth prompts injected, in chronological order.

        Per depth, one message per role (system, user, assistant) joins the Prompt Manager's absolute prompts and the
        extension prompts of that depth and role (sorted by key).
        """
        messages = list(oai)  # newest first
        inserted = 0
        # prompt.injection_depth === i: a prompt without a numeric depth is never injected
        absolute = [p for p in absolute if isinstance(p.get("injection_depth"), int)
                    and not isinstance(p.get("injection_depth"), bool)]
        depths = sorted({p["injection_depth"] for p in absolute if p.get("content")}
                        | {e["depth"] for e in ext.values() if e["position"] == 1 and e["value"]})
        for i in depths:
            if i < 0 or i > MAX_INJECTION_DEPTH:
                continue
            at_depth = [p for p in absolute if p["injection_depth"] == i and p.get("content")]
            role_msgs = []
            for role in ("system", "user", "assistant"):
                rp = [p for p in at_depth if p.get("role") == role]
                role_prompts = "\n".join(p["content"] for p in rp)
                ext_text, ext_parts = self.extension_prompt(ext, 1, i, _ROLE_OF_NAME[role], wrap=False)
                joint = "\n".join(x.strip() for x in (role_prompts, ext_text) if x)
                if joint:
                    parts = [{"source": f"prompt:{p['identifier']}", "reason": "INSTRUCTION", "text": p["content"]}
                             for p in rp]
                    parts.extend(ext_parts)
                    role_msgs.append({"role": role, "content": joint, "injected": True, "parts": parts,
                                      "depth": i})
            if role_msgs:
                at = i + inserted
                messages[at:at] = role_msgs
                inserted += len(role_msgs)
        messages.reverse()
        return messages

    def chat_history(self, cc: _Completion, index: Any, messages: list[dict[str, Any]]) -> None:
        """``populateChatHistory``."""
        setup = self.setup
        at = index("chatHistory")
        if at == -1:
            for cp in messages:
                if cp.get("index") is not None:
                    self.excluded.append(self.history_excluded(cp, "HISTORY_OLDEST_FIRST"))
            self.diagnostics.append("the Prompt Manager's Chat History is off: no chat message is sent")
            return
        cc.add(_Coll("chatHistory"), at)
        new_text = setup.new_group_chat_prompt if self.group is not None else setup.new_chat_prompt
        new_chat = _Msg("system", self.sub(new_text, "new chat prompt"), "newMainChat",
                        source="prompt:newMainChat", reason="INSTRUCTION")
        new_chat.tokens = self.count("system", new_chat.content)
        cc.budget -= new_chat.tokens
        nudge = self.msg(self.group_nudge) if self.group_nudge is not None else None  # populateChatHistory
        if nudge is not None:
            cc.budget -= nudge.tokens
        if messages and messages[-1]["role"] == "assistant" and setup.send_if_empty:
            m = _Msg("user", setup.send_if_empty, "emptyUserMessageReplacement",
                     self.count("user", setup.send_if_empty), source="prompt:send_if_empty")
            if cc.can_afford(m):
                cc.insert(m, "chatHistory")
        pool = list(reversed(messages))
        stop: int | None = None
        for k, cp in enumerate(pool):
            content = self.sub(cp["content"], "chat message")
            m = _Msg(cp["role"], content, f"chatHistory-{len(messages) - k}", message_index=cp.get("index"))
            if cp.get("injected"):
                m.kind, m.reason, m.source, m.parts = (BlockKind.INSTRUCTION, "INSTRUCTION",
                                                       f"injection:depth{cp.get('depth')}:{cp['role']}", cp["parts"])
            else:
                idx = cp.get("index")
                m.kind, m.source, m.reason, m.protected = (BlockKind.MESSAGE, f"message:{idx}", "FITS_BUDGET", False)
            if setup.names_behavior == NAMES_COMPLETION and cp.get("name"):
                nm = cp["name"]
                m.name = nm if _NAME_OK.match(nm) else re.sub(r"[^a-zA-Z0-9_]", "_", nm)[:64]
                m.tokens = self.count(m.role, m.content, m.name)
            else:
                m.tokens = self.count(m.role, m.content)
            if cc.can_afford(m):
                cc.insert(m, "chatHistory", "start")
            else:
                stop = k
                break
        if stop is not None:
            for cp in pool[stop:]:
                if cp.get("index") is not None or cp.get("injected"):
                    self.excluded.append(self.history_excluded(cp, "HISTORY_OLDEST_FIRST"))
        cc.budget += new_chat.tokens
        cc.insert(new_chat, "chatHistory", "start")
        if nudge is not None:
            cc.budget += nudge.tokens
            cc.insert(nudge, "chatHistory")

    def history_excluded(self, cp: dict[str, Any], reason: str) -> dict[str, Any]:
        content = self.sub(cp["content"], "chat message")
        if cp.get("injected"):
            return dict(kind=BlockKind.INSTRUCTION.value, role=cp["role"],
                        source=f"injection:depth{cp.get('depth')}:{cp['role']}", text=content,
                        tokens=self.count(cp["role"], content), reason=reason, protected=False,
                        trace={"parts": cp["parts"]})
        return dict(kind=BlockKind.MESSAGE.value, role=cp["role"], source=f"message:{cp.get('index')}",
                    text=content, tokens=self.count(cp["role"], content), reason=reason, protected=False,
                    message_index=cp.get("index"))

    def dialogue_examples(self, cc: _Completion, prompts: list[dict[str, Any]], index: Any, blocks: list[str]) -> None:
        """``populateDialogueExamples``."""
        at = index("dialogueExamples")
        if at == -1:
            return
        cc.add(_Coll("dialogueExamples"), at)
        dialogues = self.example_messages(blocks)
        if not dialogues:
            return
        marker_text = self.sub(self.setup.new_example_chat_prompt, "new example chat prompt")
        for d, dialogue in enumerate(dialogues):
            added = 0
            marker = _Msg("system", marker_text, "newChat", self.count("system", marker_text),
                          source="prompt:newExampleChat", reason="EXAMPLE_DIALOGUE", protected=False,
                          kind=BlockKind.EXAMPLE)
            if cc.can_afford(marker):
                cc.insert(marker, "dialogueExamples")
            for k, p in enumerate(dialogue):
                content = p.get("content") or ""
                m = _Msg("system", content, f"dialogueExamples {d}-{k}", name=p["name"], kind=BlockKind.EXAMPLE,
                         source="character:mes_example", reason="EXAMPLE_DIALOGUE", protected=False)
                m.tokens = self.count("system", content, p["name"])
                if not cc.can_afford(m):
                    for q in dialogue[k:]:
                        self.excluded.append(dict(kind=BlockKind.EXAMPLE.value, role="system",
                                                  source="character:mes_example", text=q.get("content") or "",
                                                  tokens=self.count("system", q.get("content") or "", q["name"]),
                                                  reason="EXAMPLES_PUSHED_OUT", protected=False))
                    break
                cc.insert(m, "dialogueExamples")
                added += 1
            if added == 0:
                cc.remove_last_from("dialogueExamples")


def _ext_prompt(value: str, position: int, depth: int, scan: bool, role: int,
                parts: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """An extension prompt (``setExtensionPrompt``): value, position, depth, scan flag, role, and its parts."""
    return {"value": str(value), "position": int(position), "depth": int(depth), "scan": bool(scan),
            "role": int(role), "parts": parts or []}


def _sorted_entry_ranks(groups: list[list[int]], ordered: list[Lorebook]) -> dict[tuple[int, str], int]:
    """``getSortedEntries``: (index in ``ordered``, uid) → rank.

    Entries in ``Object.keys`` order (integer keys ascending), each group stably sorted by
    ``order``, highest first.
    """
    st_rank: dict[tuple[int, str], int] = {}
    rank = 0
    pos = 0
    for g in groups:
        items: list[tuple[float, int, int, str]] = []
        for _ in g:
            book = ordered[pos]
            for e in _object_keys_order(book):
                items.append((-float(e.order), len(items), pos, str(e.uid)))
            pos += 1
        for _o, _k, bi, uid in sorted(items):
            st_rank[(bi, uid)] = rank
            rank += 1
    return st_rank


def _pass_of(a: Any) -> int:
    """The scan pass an activated entry came from (its trace's ``pass``)."""
    return int((a.trace or {}).get("pass", 0) or 0)


def _last_messages(messages: list[ChatMessage]) -> dict[str, str]:
    """``{{lastMessage}}``, ``{{lastMessageId}}``, ``{{lastUserMessage}}``, ``{{lastCharMessage}}`` (macros.js 172–239).

    The newest message, the newest user message and the newest character message that is not a
    system (hidden) one.
    """
    last = len(messages) - 1
    user = next((m.text() for m in reversed(messages) if m.role == "user" and not m.meta.hidden), "")
    char = next((m.text() for m in reversed(messages) if m.role != "user" and not m.meta.hidden), "")
    return {"lastmessage": messages[last].text() if messages else "", "lastmessageid": str(last) if messages else "",
            "lastusermessage": user, "lastcharmessage": char}


def _wi_output(kept: list[tuple[Any, str]]) -> dict[str, Any]:
    """``checkWorldInfo``'s output (world-info.js 4113–4145): each kept entry ``unshift``-ed into its bucket.

    Entries sorted by ``order`` (highest first, stable), so lower order comes first; at-depth
    entries grouped per (depth, role) in first-seen order; entries with empty content insert nothing.
    """
    out: dict[str, Any] = {"before": [], "after": [], "em": [], "an_top": [], "an_bottom": [],
                           "depth": [], "before_parts": [], "after_parts": []}
    buckets = {InsertionPosition.BEFORE_CHAR: out["before_parts"], InsertionPosition.AFTER_CHAR: out["after_parts"],
               InsertionPosition.AN_TOP: out["an_top"], InsertionPosition.AN_BOTTOM: out["an_bottom"]}
    depth: dict[tuple[int, int], list[tuple[Any, str]]] = {}
    for a, content in sorted(kept, key=lambda ac: -float(ac[0].order)):
        if not content or (a.trace or {}).get("no_position"):
            continue  # an entry without a position is placed nowhere (world-info.js 4133–4173)
        if a.position in buckets:
            buckets[a.position].insert(0, (a, content))
        elif a.position == InsertionPosition.BEFORE_EXAMPLES:
            out["em"].insert(0, ("before", content))
        elif a.position == InsertionPosition.AFTER_EXAMPLES:
            out["em"].insert(0, ("after", content))
        elif a.position == InsertionPosition.AT_DEPTH:
            depth.setdefault((int(a.depth), _ROLE_OF_NAME.get(a.role, 0)), []).insert(0, (a, content))
    out["depth"] = list(depth.items())
    out["before"] = [c for _, c in out["before_parts"]]
    out["after"] = [c for _, c in out["after_parts"]]
    return out


def _object_keys_order(book: Lorebook) -> list[Any]:
    """Entries of a world's ``entries`` object in JavaScript ``Object.keys`` order.

    Keys that are array indices (canonical non-negative integers) come first, ascending, then the others as written.
    """
    ints: list[tuple[int, int, Any]] = []
    rest: list[Any] = []
    for k, e in enumerate(book.entries):
        u = str(e.uid)
        if u.isascii() and u.isdigit() and (u == "0" or not u.startswith("0")) and int(u) < 2 ** 32 - 1:
            ints.append((int(u), k, e))
        else:
            rest.append(e)
    return [e for _, _, e in sorted(ints, key=lambda t: (t[0], t[1]))] + rest


def assemble_chat_completion(inputs: SillyTavernInputs) -> AssembledPrompt:
    """Pipeline step 3 for a Chat Completion chat: the messages SillyTavern 1.12.6 sends, and why.

    ``public/script.js`` ``Generate`` (Chat Completion path) → ``scripts/openai.js``
    ``prepareOpenAIMessages`` / ``populateChatCompletion`` → ``ChatCompletion.squashSystemMessages``
    (see the module docstring). ``inputs`` come from steps 1–2 (the budget is SillyTavern's
    ``openai_max_context − openai_max_tokens``, less 3 for the reply primer; no safety margin).

    Returns
    -------
    AssembledPrompt
        One sent block per message in prompt order (a joined message lists its
        ``trace["parts"]``), the blocks left out (hidden or excluded messages, history and
        examples that did not fit, World Info the budget stopped), the provider messages and,
        when a required prompt does not fit, the overflow (``TokenBudgetExceededError``; steps
        9–10 then send nothing).
    """
    asm = _Assembler(inputs)
    asm.diagnostics.extend(inputs.diagnostics)
    sent, overflow, details = asm.run()
    if inputs.setup.squash_system_messages:
        sent = _squash(asm, sent)
    messages = [{"role": m.role, "content": m.content, **({"name": m.name} if m.name else {})} for m in sent]
    return AssembledPrompt(
        api="chat_completion", sent=_sent_blocks(sent, asm.regex_changes),
        left_out=[AssembledBlock(**x) for x in asm.excluded], messages=messages,
        overflow=None if overflow is None else BudgetOverflow(overflow, details["tokens"], details["left"]),
        warnings=[*inputs.warnings, *asm.warnings], diagnostics=asm.diagnostics, timed_effects=asm.timed_effects,
        lorebook_trace=original_book_indexes(asm.lorebook_trace, inputs.speaker))


def _sent_blocks(sent: list[_Msg], regex_changes: dict[str, list[dict[str, str]]]) -> list[AssembledBlock]:
    """One kept block per sent message, in prompt order, with its trace.

    ``trace``: the ``Message`` identifier (``st_identifier``), the parts of a joined message, the
    regex scripts that changed it (:func:`regex_trace`) and, for a message of one World Info
    entry, that entry's activation trace.
    """
    blocks: list[AssembledBlock] = []
    for m in sent:
        trace: dict[str, Any] = {"st_identifier": m.identifier}
        if m.parts:
            trace["parts"] = m.parts
        changed = regex_trace(m.source, m.parts, regex_changes)
        if changed:
            trace["regex"] = changed
        if len(m.parts) == 1 and m.kind == BlockKind.LOREBOOK and m.parts[0].get("trace"):
            trace.update(m.parts[0]["trace"])
        blocks.append(AssembledBlock(kind=m.kind.value, role=m.role, source=m.source, text=m.content,
                                     tokens=m.tokens, reason=m.reason, protected=m.protected, status="kept",
                                     name=m.name, message_index=m.message_index, trace=trace))
    return blocks


def regex_trace(source: str, parts: list[dict[str, Any]],
                regex_changes: dict[str, list[dict[str, str]]] | None) -> list[dict[str, str]]:
    """A block's ``trace["regex"]``: each regex script change to its own text or one of its parts.

    ``source`` and ``parts`` are the block's; ``regex_changes`` maps a source (``message:3``,
    ``lorebook:Book:7``) to the changes ``getRegexedString`` made to it. Returns
    ``[{"source", "script", "before", "after"}, ...]`` in block order (empty: nothing changed).
    """
    if not regex_changes:
        return []
    return [{"source": src, **c} for src in dict.fromkeys([source, *(p.get("source") for p in parts)])
            if isinstance(src, str) for c in regex_changes.get(src, [])]


def _squash(asm: _Assembler, sent: list[_Msg]) -> list[_Msg]:
    """``ChatCompletion.squashSystemMessages``: consecutive unnamed system messages joined.

    They are joined by a newline; the new-chat markers are never squashed.
    """
    exclude = {"newMainChat", "newChat", "groupNudge"}
    out: list[_Msg] = []

    def squashable(m: _Msg) -> bool:
        return m.identifier not in exclude and m.role == "system" and not m.name

    for m in sent:
        if m.role == "system" and not m.content:
            continue
        if squashable(m) and out and squashable(out[-1]):
            last = out[-1]
            joined = _Msg(last.role, last.content + "\n" + m.content, last.identifier, kind=last.kind,
                          source=last.source, reason=last.reason, protected=last.protected or m.protected,
                          parts=(last.parts or [{"source": last.source, "reason": last.reason, "text": last.content}])
                          + (m.parts or [{"source": m.source, "reason": m.reason, "text": m.content}]))
            joined.tokens = asm.count(joined.role, joined.content)
            out[-1] = joined
        else:
            out.append(m)
    return out


#: The shared SillyTavern steps (card fields, Character's Note, Author's Note, persona, World Info,
#: example parsing), also run by the Text Completion path (:mod:`engine.assembly.textcompletion`).
SillyTavernAssembler = _Assembler
ext_prompt = _ext_prompt

__all__ = [
    "MAX_INJECTION_DEPTH",
    "REPLY_PRIMER_TOKENS",
    "WI_COUNT_OVERHEAD",
    "SharedSteps",
    "SillyTavernAssembler",
    "assemble_chat_completion",
    "ext_prompt",
    "regex_trace",
]
