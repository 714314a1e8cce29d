"""SillyTavern 1.12.6's instruct mode (``public/scripts/instruct-mode.js``), one function per function.

Each function takes the live :class:`~engine.schema.sillytavern.InstructTemplate` (and, where
SillyTavern reads it, the :class:`~engine.schema.sillytavern.ContextTemplate`) plus ``sub``,
SillyTavern's ``substituteParams`` for the chat being assembled (``sub(text)``; the names are
bound by the caller). ``in_group``: the chat is a group chat (issue 27 item 7).

1.12.6 has no ``formatInstructModeStoryString`` (the story string is not wrapped in the system
sequence in this version); the system prompt is wrapped by :func:`format_system_prompt`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..schema.sillytavern import (
    INSTRUCT_NAMES_ALWAYS,
    INSTRUCT_NAMES_FORCE,
    ContextTemplate,
    InstructTemplate,
    SystemPromptPreset,
)

#: ``force_output_sequence`` (``instruct-mode.js``).
FORCE_FIRST, FORCE_LAST = 1, 2

Sub = Callable[[str], str]
_NAME = re.compile(r"\{\{name\}\}", re.IGNORECASE)


def format_chat(it: InstructTemplate, name: str, mes: str, is_user: bool, is_narrator: bool, force_avatar: bool,
                name1: str, force: int | None, sub: Sub, in_group: bool = False) -> str:
    """``formatInstructModeChat``: one chat message with its sequences.

    Parameters
    ----------
    it:
        The instruct template.
    name, mes:
        The speaker's name and the message text.
    is_user, is_narrator, force_avatar:
        A user message; a narrator (system) message; a message with its own avatar (written under
        another persona).
    name1:
        The user's name (``{{user}}``).
    force:
        :data:`FORCE_FIRST` / :data:`FORCE_LAST` for the first / last sequence variants, else ``None``.
    sub:
        ``substituteParams``.
    in_group:
        A group chat (``selected_group``).

    Returns
    -------
    str
        Prefix and text (with ``Name: `` when the names behaviour says so) and suffix, joined by a
        newline when ``wrap`` is on.
    """
    include_names = False if is_narrator else it.names_behavior == INSTRUCT_NAMES_ALWAYS
    if (not is_narrator and it.names_behavior == INSTRUCT_NAMES_FORCE
            and ((in_group and name != name1) or (force_avatar and name != name1))):
        include_names = True
    prefix = _chat_prefix(it, is_user, is_narrator, force) or ""
    if is_narrator:
        suffix = it.input_suffix if it.system_same_as_user else it.system_suffix
    else:
        suffix = it.input_suffix if is_user else it.output_suffix
    suffix = suffix or ""
    if it.macro:
        prefix = _NAME.sub(lambda _m: name or "System", sub(prefix))
        suffix = _NAME.sub(lambda _m: name or "System", sub(suffix))
    if not suffix and it.wrap:
        suffix = "\n"
    separator = "\n" if it.wrap else ""
    body = f"{name}: {mes}{suffix}" if include_names and name else mes + suffix
    return separator.join(x for x in (prefix, body) if x)


def _chat_prefix(it: InstructTemplate, is_user: bool, is_narrator: bool, force: int | None) -> str:
    """``formatInstructModeChat``'s ``getPrefix``."""
    if is_narrator:
        return it.input_sequence if it.system_same_as_user else it.system_sequence
    if is_user:
        if force == FORCE_FIRST:
            return it.first_input_sequence or it.input_sequence
        if force == FORCE_LAST:
            return it.last_input_sequence or it.input_sequence
        return it.input_sequence
    if force == FORCE_FIRST:
        return it.first_output_sequence or it.output_sequence
    if force == FORCE_LAST:
        return it.last_output_sequence or it.output_sequence
    return it.output_sequence


def format_system_prompt(it: InstructTemplate, system: str) -> str:
    """``formatInstructModeSystemPrompt``: the system prompt between ``system_sequence_prefix`` / ``_suffix``."""
    separator = "\n" if it.wrap else ""
    if it.system_sequence_prefix:
        system = _NAME.sub("System", it.system_sequence_prefix) + separator + system
    if it.system_sequence_suffix:
        system = system + separator + it.system_sequence_suffix
    return system


def format_examples(it: InstructTemplate, ctx: ContextTemplate, examples: list[str], name1: str, name2: str,
                    sub: Sub, individual: Callable[[str], list[dict[str, str]]], in_group: bool = False) -> list[str]:
    """``formatInstructModeExamples``: each example dialogue as instruct messages.

    ``individual`` is ``parseExampleIntoIndividual`` (``openai.js``) for one block, returning
    ``{"content", "name"}`` items (``name`` ``example_user`` / ``example_assistant``).
    """
    heading = f"{sub(ctx.example_separator)}\n" if ctx.example_separator else ""
    if it.skip_examples:
        return [re.sub(r"<START>\n", lambda _m: heading, x, count=1, flags=re.IGNORECASE) for x in examples]
    include_names = it.names_behavior == INSTRUCT_NAMES_ALWAYS or (in_group and it.names_behavior == INSTRUCT_NAMES_FORCE)
    in_pre, out_pre = it.input_sequence or "", it.output_sequence or ""
    in_suf, out_suf = it.input_suffix or "", it.output_suffix or ""
    if it.macro:
        in_pre = _NAME.sub(lambda _m: name1, sub(in_pre))
        out_pre = _NAME.sub(lambda _m: name2, sub(out_pre))
        in_suf = _NAME.sub(lambda _m: name1, sub(in_suf))
        out_suf = _NAME.sub(lambda _m: name2, sub(out_suf))
        if not in_suf and it.wrap:
            in_suf = "\n"
        if not out_suf and it.wrap:
            out_suf = "\n"
    separator = "\n" if it.wrap else ""
    out: list[str] = []
    for item in examples:
        block = individual(item)
        if not block:
            continue
        if heading:
            out.append(heading)
        for ex in block:
            user = ex["name"] == "example_user"
            this_name = include_names or (it.names_behavior == INSTRUCT_NAMES_FORCE and user)
            content = f"{name1 if user else name2}: {ex['content']}" if this_name else ex["content"]
            out.append(separator.join(x for x in (in_pre if user else out_pre, content + (in_suf if user else out_suf))
                                      if x))
    if not out:
        return [re.sub(r"<START>\n", lambda _m: heading, x, count=1, flags=re.IGNORECASE) for x in examples]
    return out


def format_prompt(it: InstructTemplate, name: str, is_impersonate: bool, prompt_bias: str, sub: Sub,
                  is_quiet: bool = False, quiet_to_loud: bool = False, in_group: bool = False) -> str:
    """``formatInstructModePrompt``: the last line that opens the reply (output sequence, maybe ``Name:``)."""
    include_names = bool(name) and (it.names_behavior == INSTRUCT_NAMES_ALWAYS
                                    or (in_group and it.names_behavior == INSTRUCT_NAMES_FORCE)) \
        and not (is_quiet and not quiet_to_loud)
    if is_impersonate:
        sequence = it.input_sequence
    elif is_quiet and not quiet_to_loud:
        sequence = it.last_system_sequence or it.output_sequence
    else:
        sequence = it.last_output_sequence or it.output_sequence
    sequence = sequence or ""
    filler = ""
    # SillyTavern's hack for Mistral: an output sequence ending in a space, a last one that does not
    if (include_names and it.last_output_sequence and it.output_sequence and sequence == it.last_output_sequence
            and re.search(r"\s\Z", it.output_sequence) and not re.search(r"\s\Z", it.last_output_sequence)):
        filler = it.output_sequence[-1]
    if it.macro:
        sequence = _NAME.sub(lambda _m: name or "System", sub(sequence))
    separator = "\n" if it.wrap else ""
    text = (separator + sequence + separator + filler + f"{name}:") if include_names else (separator + sequence)
    if is_quiet and separator:
        text = text[len(separator):]
    if not is_impersonate and prompt_bias:
        text += prompt_bias if include_names else separator + prompt_bias.lstrip()
    return (_js_trim_end(text) if it.wrap else text) + ("" if include_names else separator)


def _js_trim_end(text: str) -> str:
    """JavaScript's ``trimEnd`` (whitespace and line terminators)."""
    return re.sub(r"[\s\ufeff]+\Z", "", text)


def stopping_sequences(it: InstructTemplate, ctx: ContextTemplate, name1: str, name2: str, sub: Sub,
                       enabled: bool) -> list[str]:
    """``getInstructStoppingSequences``: instruct sequences (when ``enabled``) and the context's separators."""
    result: list[str] = []
    if enabled:
        seqs = [it.stop_sequence or "",
                _NAME.sub(lambda _m: name1, it.input_sequence or ""),
                _NAME.sub(lambda _m: name2, it.output_sequence or ""),
                _NAME.sub(lambda _m: name2, it.first_output_sequence or ""),
                _NAME.sub(lambda _m: name2, it.last_output_sequence or ""),
                _NAME.sub("System", it.system_sequence or ""),
                _NAME.sub("System", it.last_system_sequence or "")]
        lines = "\n".join(seqs).split("\n")
        for k, line in enumerate(lines):
            if lines.index(line) != k or not line or not line.strip():
                continue
            wrapped = "\n" + line if it.wrap else line
            result.append(sub(wrapped) if it.macro else wrapped)
    if ctx.use_stop_strings:
        if ctx.chat_start:
            result.append(f"\n{sub(ctx.chat_start)}")
        if ctx.example_separator:
            result.append(f"\n{sub(ctx.example_separator)}")
    return result


def instruct_macro_values(it: InstructTemplate, ctx: ContextTemplate, sp: SystemPromptPreset,
                          char_prompt: str, prefer_character_prompt: bool) -> dict[str, str]:
    """``replaceInstructMacros``' values (instruct-mode.js 571–613), by macro name.

    For :class:`engine.assembly.macros.MacroContext` ``values``: the one macro engine
    (:func:`engine.assembly.macros.expand_macros`) replaces them at ``evaluateMacros``' step
    (after ``{{roll}}``, before the variables). Instruct macros are empty while instruct mode is
    off, system prompt macros while the system prompt is off (as in SillyTavern);
    ``char_prompt``: the card's system prompt (``{{systemPrompt}}`` with
    ``prefer_character_prompt``).
    """
    on = it.enabled
    seq = {
        "instructSystemPromptPrefix": it.system_sequence_prefix,
        "instructSystemPromptSuffix": it.system_sequence_suffix,
        "instructInput|instructUserPrefix": it.input_sequence,
        "instructUserSuffix": it.input_suffix,
        "instructOutput|instructAssistantPrefix": it.output_sequence,
        "instructSeparator|instructAssistantSuffix": it.output_suffix,
        "instructSystemPrefix": it.system_sequence,
        "instructSystemSuffix": it.system_suffix,
        "instructFirstOutput|instructFirstAssistantPrefix": it.first_output_sequence or it.output_sequence,
        "instructLastOutput|instructLastAssistantPrefix": it.last_output_sequence or it.output_sequence,
        "instructStop": it.stop_sequence,
        "instructUserFiller": it.user_alignment_message,
        "instructSystemInstructionPrefix": it.last_system_sequence,
        "instructFirstInput|instructFirstUserPrefix": it.first_input_sequence or it.input_sequence,
        "instructLastInput|instructLastUserPrefix": it.last_input_sequence or it.input_sequence,
    }
    system = {
        "systemPrompt": char_prompt if prefer_character_prompt and char_prompt else sp.content,
        "defaultSystemPrompt|instructSystem|instructSystemPrompt": sp.content,
    }
    out: dict[str, str] = {}
    for table, enabled in ((seq, on), (system, sp.enabled)):
        for names, value in table.items():
            out.update(dict.fromkeys(names.split("|"), (value or "") if enabled else ""))
    out.update(exampleSeparator=ctx.example_separator or "", chatStart=ctx.chat_start or "")
    return out


__all__ = ["FORCE_FIRST", "FORCE_LAST", "format_chat", "format_examples", "format_prompt", "format_system_prompt",
           "instruct_macro_values", "stopping_sequences"]
