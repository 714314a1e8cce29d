"""SillyTavern 1.12.6 group chats: the next speaker and what a group changes in its prompt.

A group chat (``request.sillytavern.group`` set) is assembled as SillyTavern generates for one
member (``public/scripts/group-chats.js`` ``generateGroupWrapper`` → ``Generate`` with that
member as ``this_chid`` / ``name2``):

* :func:`next_speaker`: the writer's pick, else the member SillyTavern's activation strategy
  puts first where that is deterministic: list order (``activateListOrder``: the first enabled
  member), natural order's mention rule (``activateNaturalOrder``: the first enabled member,
  other than the last speaker unless ``allow_self_responses``, whose name has a word of the last
  message; ``extractAllWords``). Otherwise SillyTavern picks at random (talkativeness rolls):
  the first enabled member in list order is previewed, with a warning.
* :func:`speaker_request`: the request for that member: its card, its character worlds only
  (``getCharacterLore`` reads ``characters[this_chid]``), its tags, regex permission and note.
* :func:`joined_cards`: ``getGroupCharacterCards`` (join modes): every member's description,
  personality, scenario and example messages with the join prefix / suffix.
* :func:`group_depth_prompts`: ``getGroupDepthPrompts`` (join modes): every member's Character's
  Note.
* :func:`group_names`: ``{{group}}`` / ``{{charIfNotGroup}}`` (``substituteParams``'s
  ``getGroupValue``).

The assembler (:mod:`engine.assembly.sillytavern`) applies the rest: names before every message
not written as ``name1`` (``setOpenAIMessages``), names in example messages
(``parseExampleIntoIndividual``), ``new_group_chat_prompt`` and the group nudge
(``populateChatHistory``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from ..errors import SettingsError
from ..schema import Character, ChatMessage
from ..schema.request import PreviewRequest
from ..schema.sillytavern import GroupMember, GroupSetup, SillyTavernSetup
from ..schema.trace import TraceRecord

#: ``group_activation_strategy`` (SillyTavern 1.12.6 has these two only).
NATURAL, LIST = 0, 1
#: ``group_generation_mode``.
SWAP, APPEND, APPEND_DISABLED = 0, 1, 2
_WORD = re.compile(r"\b\w+\b", re.ASCII)


def extract_all_words(value: str) -> list[str]:
    r"""``utils.js`` ``extractAllWords``: ``/\b\w+\b/gim`` matches, lower-cased (ASCII words, as in JavaScript)."""
    return [m.group(0).lower() for m in _WORD.finditer(value or "")]


@dataclass(frozen=True)
class Speaker:
    """The member a group chat's preview is for, and how it was chosen (one sentence).

    ``books``: after :func:`speaker_request`, the indexes (into the original ``request.lorebooks``)
    of the books the speaker's request keeps, in order (:func:`original_book_indexes`).
    """

    member: GroupMember
    why: str
    warning: str | None = None
    books: tuple[int, ...] = ()


def _present(group: GroupSetup) -> list[GroupMember]:
    return [m for m in group.members if m.character is not None]


def _enabled(group: GroupSetup) -> list[GroupMember]:
    return [m for m in _present(group) if m.avatar not in group.disabled_members]


def _chosen(group: GroupSetup, wanted: str) -> Speaker:
    """The member the writer named (name or avatar, case-insensitive).

    Raises
    ------
    SettingsError
        ``INVALID_SETTINGS`` naming the members when none matches.
    """
    w = wanted.strip().lower()
    for m in _present(group):
        if w in (m.name.lower(), m.avatar.lower(), m.avatar.lower().removesuffix(".png")):
            muted = " (muted: SillyTavern lets a muted member speak when asked to)" if m.avatar in group.disabled_members else ""
            return Speaker(m, f"chosen by the writer{muted}")
    names = ", ".join(repr(m.name) for m in _present(group)) or "none with a card"
    raise SettingsError("INVALID_SETTINGS", f"the group {group.name!r} has no member {wanted!r} (members: {names})")


def _mentioned(group: GroupSetup, enabled: list[GroupMember], messages: list[ChatMessage]) -> Speaker | None:
    """``activateNaturalOrder``'s mention rule over the last message (its first activated member)."""
    last = messages[-1] if messages else None
    if last is None or last.meta.hidden:  # activationText is empty for a system (hidden) message
        return None
    banned = last.name if last.role != "user" and not group.allow_self_responses else None
    for word in extract_all_words(last.text()):
        for m in enabled:
            if banned is not None and m.name == banned:
                continue
            if word in extract_all_words(m.name):
                return Speaker(m, f"natural order: the last message mentions {m.name}")
    return None


def next_speaker(group: GroupSetup, messages: list[ChatMessage]) -> Speaker:
    """The member whose prompt the preview shows (see the module docstring).

    Parameters
    ----------
    group:
        The group with its members' cards (``GroupMember.character``).
    messages:
        The chat's messages, oldest first (the last one drives natural order).

    Raises
    ------
    SettingsError
        ``INVALID_SETTINGS``: ``group.speaker`` names no member, or no member has a card.
    """
    if group.speaker:
        return _chosen(group, group.speaker)
    present = _present(group)
    if not present:
        raise SettingsError("INVALID_SETTINGS", f"the group {group.name!r} has no member whose card is in the library")
    enabled = _enabled(group)
    if not enabled:
        return Speaker(present[0], "first member in list order",
                       f"every member of the group {group.name!r} is muted: SillyTavern generates no reply; "
                       f"showing {present[0].name}'s prompt")
    if group.activation_strategy == LIST:
        return Speaker(enabled[0], "list order: the first enabled member")
    if group.activation_strategy == NATURAL:
        hit = _mentioned(group, enabled, messages)
        if hit is not None:
            return hit
        why = "natural order picks by talkativeness rolls (random)"
    else:
        why = f"activation strategy {group.activation_strategy} is not one SillyTavern 1.12.6 knows (it replies with nobody)"
    return Speaker(enabled[0], "first enabled member in list order",
                   f"{why}: showing the prompt for {enabled[0].name}, the first enabled member in list order; "
                   "pick a speaker to see another")


def speaker_request(request: PreviewRequest) -> tuple[PreviewRequest, Speaker | None]:
    """``request`` as SillyTavern generates it for the next speaker of its group (unchanged for a 1-on-1 chat).

    The speaker's card becomes ``request.character``; of the character worlds only the speaker's
    stay (``getCharacterLore``); the speaker's avatar, tags, regex permission and Author's Note
    replace the chat's; ``group.speaker`` is set to the speaker's name.

    Raises
    ------
    SettingsError
        As :func:`next_speaker`.
    """
    setup = request.sillytavern
    if setup is None or setup.group is None:
        return request, None
    group = setup.group
    sp = next_speaker(group, request.chat.messages)
    m = sp.member
    scopes = list(setup.lorebook_scopes)
    keep = [i for i, b in enumerate(request.lorebooks)
            if (scopes[i] if i < len(scopes) else "global") != "character" or b.name in m.worlds]
    new_setup = setup.model_copy(update={
        "group": group.model_copy(update={"speaker": m.name}),
        "lorebook_scopes": [scopes[i] for i in keep if i < len(scopes)],
        "character_avatar": m.avatar, "character_tags": list(m.tags), "character_regex_allowed": m.regex_allowed,
        "character_note": m.note,
        "source": {**setup.source, "character_file": m.key},
    })
    out = request.model_copy(update={"character": m.character, "sillytavern": new_setup,
                                     "lorebooks": [request.lorebooks[i] for i in keep]})
    return out, replace(sp, books=tuple(keep))


def original_book_indexes(trace: list[TraceRecord], speaker: Speaker | None) -> list[TraceRecord]:
    """``trace`` with each ``book_index`` pointing into the group chat's own ``request.lorebooks`` again.

    The speaker's request leaves the other members' character worlds out (:func:`speaker_request`);
    the preview's trace must index the books the caller gave.
    """
    if speaker is None:
        return trace
    kept = speaker.books
    return [r.model_copy(update={"book_index": kept[r.book_index]})
            if 0 <= r.book_index < len(kept) and kept[r.book_index] != r.book_index else r for r in trace]


def group_diagnostic(setup: SillyTavernSetup, why: str) -> str:
    """The preview's note on a group chat: whose prompt it shows and why (``why``: :attr:`Speaker.why`).

    Members whose card is missing are named (``getGroupCharacterCards`` skips them).
    """
    group = setup.group
    assert group is not None
    missing = [m.avatar for m in group.members if m.character is None]
    gone = f"; members without a card, left out: {', '.join(missing)}" if missing else ""
    return f"group chat {group.name!r}: the prompt for the next speaker, {group.speaker} ({why}){gone}"


def with_speaker(request: PreviewRequest, speaker: str | None, *, where: str = "speaker") -> PreviewRequest:
    """``request`` with ``speaker`` as the group chat's next speaker (``None``: unchanged).

    Raises
    ------
    SettingsError
        ``INVALID_SETTINGS`` when the chat is not a group chat or ``speaker`` names no member with
        a card (``where``: the flag, or a JSON path such as ``$.speaker``, named in the error).
    """
    if speaker is None:
        return request
    place, file = (where, None) if where.startswith("$") else (None, where)
    setup = request.sillytavern
    if setup is None or setup.group is None:
        raise SettingsError("INVALID_SETTINGS", "a speaker is only for a group chat (imported from a SillyTavern "
                            "folder's groups/); this chat has one character",
                            file=file, place=place)
    group = setup.group.model_copy(update={"speaker": speaker})
    try:
        _chosen(group, speaker)
    except SettingsError as exc:
        raise SettingsError(exc.code, exc.message, file=file, place=place) from None
    return request.model_copy(update={"sillytavern": setup.model_copy(update={"group": group})})


def group_names(group: GroupSetup) -> str:
    """``{{group}}``: the names of every member with a card, muted ones included, joined by ``", "``."""
    return ", ".join(m.name for m in group.members if m.character is not None and m.name)


def _joinable(group: GroupSetup, speaker: str) -> list[tuple[GroupMember, Character]]:
    out = []
    for m in group.members:
        if m.character is None:
            continue
        if m.avatar in group.disabled_members and m.avatar != speaker and group.generation_mode != APPEND_DISABLED:
            continue
        out.append((m, m.character))
    return out


def joined_cards(group: GroupSetup, speaker: str, replace: Callable[[str, str], str],
                 scenario_override: str) -> dict[str, str] | None:
    """``getGroupCharacterCards``: the joined card fields, or ``None`` in swap mode.

    Parameters
    ----------
    group:
        The group with its members' cards.
    speaker:
        The speaker's avatar (a muted speaker's card is still joined).
    replace:
        ``replace(text, member_name)``: ``baseChatReplace`` with ``{{char}}`` = that member.
    scenario_override:
        ``chat_metadata.scenario`` (replaces the joined scenarios, as written).

    Returns
    -------
    dict or None
        ``description``, ``personality``, ``scenario``, ``mesExamples``.
    """
    if not group.generation_mode or not group.members:
        return None
    sep = "\n" if group.instruct_wrap else ""  # power_user.instruct.wrap

    def prep(value: str, name: str, label: str) -> str:
        value = value.strip()
        if not value:
            return ""

        def custom(text: str) -> str:
            return replace(re.sub(r"<FIELDNAME>", lambda _m: label, text, flags=re.IGNORECASE).strip(), name) if text else ""

        prefix, suffix = custom(group.join_prefix), custom(group.join_suffix)
        return f"{prefix + sep if prefix else ''}{custom(value)}{sep + suffix if suffix else ''}"

    fields: dict[str, list[str]] = {"description": [], "personality": [], "scenario": [], "mesExamples": []}
    for _m, c in _joinable(group, speaker):
        fields["description"].append(prep(c.description or "", c.name, "Description"))
        fields["personality"].append(prep(c.personality or "", c.name, "Personality"))
        fields["scenario"].append(prep(c.scenario or "", c.name, "Scenario"))
        fields["mesExamples"].append(prep(c.mes_example or "", c.name, "Example Messages"))
    out = {k: "\n".join(x for x in v if x) for k, v in fields.items()}
    out["scenario"] = scenario_override.strip() or out["scenario"]
    return out


def group_depth_prompts(group: GroupSetup, speaker: str,
                        replace: Callable[[str, str], str]) -> list[tuple[str, int, object]]:
    """``getGroupDepthPrompts``: ``(text, depth, role)`` of each member's Character's Note (join modes only).

    ``speaker`` is the speaker's avatar; ``replace(text, member_name)`` is ``baseChatReplace``.
    ``role`` is the card's ``depth_prompt.role`` as written (a name such as ``"system"``); muted
    members are left out unless they speak.
    """
    if group.generation_mode == SWAP or not group.members:
        return []
    out: list[tuple[str, int, object]] = []
    for m in group.members:
        c = m.character
        if c is None or (m.avatar in group.disabled_members and m.avatar != speaker):
            continue
        raw = c.extensions.get("depth_prompt")
        dp = raw if isinstance(raw, dict) else {}
        text = replace(str(dp.get("prompt") or "").strip(), c.name)
        depth = dp.get("depth")
        if text:
            out.append((text, int(depth) if isinstance(depth, (int, float)) else 4, dp.get("role", "system")))
    return out


__all__ = ["APPEND", "APPEND_DISABLED", "LIST", "NATURAL", "SWAP", "Speaker", "extract_all_words", "group_depth_prompts",
           "group_diagnostic",
           "group_names", "joined_cards", "next_speaker", "original_book_indexes", "speaker_request", "with_speaker"]
