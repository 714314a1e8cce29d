"""Chats: SillyTavern chat JSONL and OpenAI-shaped message lists (and files that wrap them).

Shapes read (FORMATS.md b5; SOURCES.md):

- **SillyTavern JSONL** (``sillytavern_jsonl``): header line (``user_name``, ``character_name``,
  ``chat_metadata``, other keys kept in ``Chat.st_header``), then one message per line.
  ``is_user`` → role ``user``; messages whose ``extra.type`` is a SillyTavern system-message
  type (``narrator``, ``comment``, ...) or small system notes (``is_system`` +
  ``extra.isSmallSys``) → role ``system``; everything else → ``assistant``. ``is_system`` →
  ``meta.hidden``. Every other key of the line (``send_date``, ``swipes``, ``swipe_id``,
  ``swipe_info``, ``extra``, ``force_avatar``, ``gen_started``, ...) is kept in ``meta`` under its
  own name, plus ``meta.st_keys`` (the line's key order) so that an export writes the same line.
  ``pinned`` / ``manualExcluded`` come from the line's ``extra.loomscope`` object (or the
  line-level ``loomscope`` object earlier exports wrote), else its ``meta`` object, else its
  ``extra`` object; ``extra.loomscope`` itself is not kept (the export writes it anew).
- **Lines that are not messages** (e.g. the ``{"system": "..."}`` line a dataset-export plugin put
  into the Seraphina chat): not a SillyTavern message (no ``mes``/``is_user``/``is_system``/
  ``swipes``), so they are *not* part of ``Chat.messages`` (``message:<i>`` indexes only real
  messages, matching what SillyTavern shows) and are kept verbatim in
  ``Chat.st_extra_lines = [{"line": n, "before": i, "data": {...}}]`` with a warning; the export
  writes them back before message ``i``.
- **OpenAI** messages: a bare array (``openai_messages``), a chat-completions request body
  ``{"messages": [...], "tools": [...]}`` (``openai_request``; legacy ``functions`` become tools),
  SWE-agent ``.traj`` ``{"history": [...]}`` (``swe_agent_traj``; ``tool_call_ids: [x]`` →
  ``tool_call_id = x``, the list kept), tau-bench results ``[{task_id, traj, ...}]``
  (``tau_bench_results``; one chat per transcript), ToolBench answers
  ``answer_generation.train_messages`` (``toolbench_answer``; one chat per attempt;
  ``answer_generation.function`` → tools), OpenAI fine-tuning JSONL (``{"messages": [...]}`` per
  line). ``tool_call_id`` / ``toolCallId`` / ``callId`` stay as given; ``tool_calls`` without ids
  stay without ids; legacy ``function_call`` and ``role: "function"`` are kept.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import LoomscopeImportError
from ..schema import Chat, ChatMessage, MessageMeta, ToolCall, ToolFunction
from ..schema._construct import construct
from ..schema.messages import TOOL_RESULT_ID_KEYS
from . import _io
from ._fields import FieldReader
from ._guard import guarded
from ._io import MAX_MESSAGES, atomic_write_text, decode_utf8, fail, iter_lines, parse_json, read_bytes, reject_binary

ROLES = ("system", "user", "assistant", "tool", "function", "developer")
ST_HEADER_KEYS = ("user_name", "character_name", "chat_metadata")
ST_MESSAGE_KEYS = ("mes", "is_user", "is_system", "swipes")
#: SillyTavern ``system_message_types`` whose messages carry the system role.
ST_SYSTEM_TYPES = frozenset({"narrator", "comment", "generic", "help", "welcome", "empty",
                             "slash_commands", "formatting", "hotkeys", "macros",
                             "welcome_prompt", "assistant_note"})
_FLAG_KEYS = ("pinned", "manualExcluded")


# --------------------------------------------------------------------------------------------
# shapes
# --------------------------------------------------------------------------------------------

def _is_message_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(m, dict) and "role" in m for m in v)


def chat_shape(data: Any) -> str | None:
    """Which chat wrapper a parsed JSON document is, or ``None``.

    One of ``openai_messages``, ``openai_request``, ``swe_agent_traj``, ``tau_bench_results``,
    ``toolbench_answer``.
    """
    if isinstance(data, list):
        if data and all(isinstance(x, dict) and "traj" in x for x in data):
            return "tau_bench_results"
        if _is_message_list(data) and data:
            return "openai_messages"
        return None
    if isinstance(data, dict):
        if "messages" in data:
            return "openai_request"
        if isinstance(data.get("history"), list) and _is_message_list(data["history"]):
            return "swe_agent_traj"
        ag = data.get("answer_generation")
        if isinstance(ag, dict) and isinstance(ag.get("train_messages"), list):
            return "toolbench_answer"
        if isinstance(data.get("traj"), list) and _is_message_list(data["traj"]):
            return "tau_bench_results"
    return None


# --------------------------------------------------------------------------------------------
# OpenAI messages
# --------------------------------------------------------------------------------------------

_META_FLAGS = ("pinned", "manualExcluded", "hidden")
#: ChatMessage's fields in their order, each ``None``: what :func:`openai_message` fills in.
_MESSAGE_FIELDS = dict.fromkeys(ChatMessage.model_fields)


def _meta(r: FieldReader, raw: Any, path: str) -> MessageMeta:
    # every value is checked here, so the model is built without validating it again (as
    # MessageMeta(**values, **rest) would: the same fields, fields set and extras)
    if raw is None:
        return construct(MessageMeta, dict.fromkeys(_META_FLAGS, False), (), {})
    d = r.obj(raw, path)
    values = {k: r.boolean(d, k, path, False) for k in _META_FLAGS}
    rest = {k: v for k, v in d.items() if k not in values}
    return construct(MessageMeta, values, [*values, *rest], rest)  # validation counts extras as set


def _tool_call(r: FieldReader, raw: Any, path: str) -> ToolCall:
    d = r.obj(raw, path)
    fn = r.dict_field(d, "function", path)
    args = fn.get("arguments")
    if args is None:
        args_s = ""
    elif isinstance(args, str):
        args_s = args
    elif isinstance(args, (dict, list)):
        r.warn(f"{path}.function.arguments: an object, not a JSON string; serialized")
        args_s = json.dumps(args, ensure_ascii=False)
    else:
        r.wrong(f"{path}.function.arguments", "string", args)
    fn_extra = {k: v for k, v in fn.items() if k not in ("name", "arguments")}
    call_id = d.get("id")
    if call_id is not None and not isinstance(call_id, str):
        if isinstance(call_id, int) and not isinstance(call_id, bool):
            call_id = str(call_id)
        else:
            r.wrong(f"{path}.id", "string", call_id)
    extra = {k: v for k, v in d.items() if k not in ("id", "type", "function")}
    return ToolCall(id=call_id, type=r.string(d, "type", path, "function"),
                    function=ToolFunction(name=r.string(fn, "name", f"{path}.function"),
                                          arguments=args_s, **fn_extra), **extra)


def openai_message(r: FieldReader, raw: Any, path: str) -> ChatMessage:
    """One OpenAI-shaped message dict → :class:`ChatMessage` (unknown keys kept as extras).

    Every field is checked here, with the JSON path in the error (``IMPORT_WRONG_TYPE``,
    ``IMPORT_INVALID_CHAT``), so the model is then built without pydantic validating it a second
    time (half the import time of a 10,000-message chat): the same values, fields set and extras
    as ``ChatMessage(**values, **extras)``, which tests/engine/importers pins.
    """
    d = r.obj(raw, path)
    role = d.get("role")
    if not isinstance(role, str):
        r.wrong(f"{path}.role", "string", role)
    if role not in ROLES:
        r.fail("IMPORT_INVALID_CHAT", f"unknown role {role!r} (expected one of {', '.join(ROLES)})",
               f"{path}.role")
    content = d.get("content")
    if content is not None and not isinstance(content, (str, list)):
        r.wrong(f"{path}.content", "string, array or null", content)
    if isinstance(content, list):  # OpenAI content parts are objects ({"type": "text", ...})
        for i, part in enumerate(content):
            if not isinstance(part, dict):
                r.wrong(f"{path}.content[{i}]", "object (content part)", part)
    if not d.keys() & _OPTIONAL_KEYS:  # most messages: role and content only (one C-level test)
        values: dict[str, Any] = {"role": role, "content": content, "name": None,
                                  "meta": construct(MessageMeta, dict.fromkeys(_META_FLAGS, False), (), {})}
    else:
        values = _optional_fields(r, d, path, role, content)
    extras = {k: v for k, v in d.items() if k not in _MESSAGE_FIELDS}
    if isinstance(content, list):
        values["content"] = list(content)  # a list field holds its own copy, as validation makes
    return construct(ChatMessage, {**_MESSAGE_FIELDS, **values}, [*values, *extras], extras)


#: The keys of an OpenAI message besides ``role`` and ``content`` that :func:`_optional_fields` reads.
_OPTIONAL_KEYS = frozenset(("name", "tool_calls", *TOOL_RESULT_ID_KEYS, "tool_call_ids", "function_call", "meta"))


def _optional_fields(r: FieldReader, d: dict[str, Any], path: str, role: str, content: Any) -> dict[str, Any]:
    """The checked field values of message ``d`` (role and content already checked), ``meta`` included."""
    values: dict[str, Any] = {"role": role, "content": content, "name": r.opt_string(d, "name", path)}
    calls = d.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list):
            r.wrong(f"{path}.tool_calls", "array", calls)
        values["tool_calls"] = [_tool_call(r, c, f"{path}.tool_calls[{i}]")
                                for i, c in enumerate(calls)]
    for key in TOOL_RESULT_ID_KEYS:
        v = d.get(key)
        if v is None:
            continue
        if isinstance(v, int) and not isinstance(v, bool):
            v = str(v)
        if not isinstance(v, str):
            r.wrong(f"{path}.{key}", "string", v)
        values[key] = v
    ids = d.get("tool_call_ids")
    if ids is not None and not any(values.get(k) for k in ("tool_call_id", "toolCallId", "callId")):
        if not isinstance(ids, list) or not all(isinstance(x, str) for x in ids):
            r.wrong(f"{path}.tool_call_ids", "array of strings", ids)
        if ids:
            values["tool_call_id"] = ids[0]
            if len(ids) > 1:
                r.warn(f"{path}.tool_call_ids: {len(ids)} ids on one result; the first is used")
    fc = d.get("function_call")
    if fc is not None and not isinstance(fc, dict):
        r.wrong(f"{path}.function_call", "object", fc)
    values["meta"] = _meta(r, d.get("meta"), f"{path}.meta")
    return values


def _check_count(r: FieldReader, n: int, place: str) -> None:
    if n > MAX_MESSAGES:
        r.fail("IMPORT_TOO_LARGE", f"{n:,} messages; the limit is {MAX_MESSAGES:,}", place)


def openai_messages(r: FieldReader, raw: Any, path: str) -> list[ChatMessage]:
    """An array of OpenAI messages (count-checked before parsing)."""
    if not isinstance(raw, list):
        r.wrong(path, "array of messages", raw)
    _check_count(r, len(raw), path)
    return [openai_message(r, m, f"{path}[{i}]") for i, m in enumerate(raw)]


def _tools(r: FieldReader, raw: Any, path: str) -> list[dict[str, Any]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        r.wrong(path, "array", raw)
    for i, t in enumerate(raw):
        r.obj(t, f"{path}[{i}]")
    return list(raw)


def _functions_as_tools(r: FieldReader, raw: Any, path: str) -> list[dict[str, Any]]:
    """Legacy ``functions`` definitions → ``[{"type": "function", "function": f}]``."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        r.wrong(path, "array", raw)
    out = []
    for i, f in enumerate(raw):
        out.append({"type": "function", "function": r.obj(f, f"{path}[{i}]")})
    return out


def parse_chat_document(data: Any, file: str, *, title: str, reader: FieldReader | None = None
                        ) -> tuple[list[Chat], str]:
    """Read a parsed JSON chat document; returns ``(chats, shape)``.

    Several chats for files that hold several transcripts (tau-bench, ToolBench), otherwise one.

    Raises ``IMPORT_UNSUPPORTED_FORMAT`` when the document is not a chat shape Loomscope reads.
    """
    r = reader or FieldReader(file)
    shape = chat_shape(data)
    if shape is None:
        r.fail("IMPORT_UNSUPPORTED_FORMAT",
               "not a chat Loomscope reads (SillyTavern JSONL, an OpenAI message array or request "
               "body, or a file that wraps one: SWE-agent .traj, tau-bench results, ToolBench)", "$")
    if shape == "openai_messages":
        return [Chat(title=title, messages=openai_messages(r, data, "$"))], shape
    if shape == "openai_request":
        msgs = openai_messages(r, data["messages"], "$.messages")
        tools = _tools(r, data.get("tools"), "$.tools")
        if data.get("functions") is not None:
            tools += _functions_as_tools(r, data.get("functions"), "$.functions")
            r.warn("legacy `functions` definitions read as tools")
        rest = {k: v for k, v in data.items() if k not in ("messages", "tools", "functions")}
        chat = Chat(title=title, messages=msgs, tools=tools)
        if rest:
            chat = Chat(title=title, messages=msgs, tools=tools, request_fields=rest)
        return [chat], shape
    if shape == "swe_agent_traj":
        msgs = openai_messages(r, data["history"], "$.history")
        n_ids = sum(1 for m in msgs if m.model_extra and "tool_call_ids" in m.model_extra)
        if n_ids:
            r.warn(f"SWE-agent tool results: tool_call_ids lists read as tool_call_id ({n_ids} results)")
        r.warn("SWE-agent trajectory: only .history (the OpenAI message list) is read")
        return [Chat(title=title, messages=msgs)], shape
    if shape == "tau_bench_results":
        items = data if isinstance(data, list) else [data]
        _check_count(r, sum(len(x.get("traj") or []) for x in items), "$")
        chats = []
        for i, item in enumerate(items):
            path = f"$[{i}].traj" if isinstance(data, list) else "$.traj"
            msgs = openai_messages(r, item.get("traj"), path)
            fields = {k: item[k] for k in ("task_id", "reward", "trial") if k in item}
            chats.append(Chat(title=f"{title} #{i} (task {item.get('task_id')})", messages=msgs,
                              source_fields=fields))
        if len(chats) > 1:
            r.warn(f"tau-bench results: {len(chats)} transcripts (one chat each)")
        return chats, shape
    # toolbench_answer
    ag = data["answer_generation"]
    tools = _functions_as_tools(r, ag.get("function"), "$.answer_generation.function")
    tms = ag["train_messages"]
    _check_count(r, sum(len(x) if isinstance(x, list) else 0 for x in tms), "$.answer_generation")
    chats = []
    for i, attempt in enumerate(tms):
        msgs = openai_messages(r, attempt, f"$.answer_generation.train_messages[{i}]")
        chats.append(Chat(title=f"{title} attempt {i}", messages=msgs, tools=list(tools),
                          source_fields={"query": ag.get("query"), "attempt": i}))
    r.warn(f"ToolBench answer: {len(chats)} attempts (one chat each); only train_messages are read")
    return chats, shape


# --------------------------------------------------------------------------------------------
# SillyTavern JSONL
# --------------------------------------------------------------------------------------------

def _st_role(is_user: bool, is_system: bool, extra: dict[str, Any]) -> str:
    if is_user:
        return "user"
    kind = extra.get("type")
    if isinstance(kind, str) and kind in ST_SYSTEM_TYPES:
        return "system"
    if is_system and extra.get("isSmallSys") is True:
        return "system"
    return "assistant"


def _flag(r: FieldReader, sources: list[tuple[dict[str, Any], str]], key: str) -> bool:
    for src, path in sources:
        if key in src and src[key] is not None:
            return r.boolean(src, key, path, False)
    return False


def st_message(r: FieldReader, d: dict[str, Any], path: str) -> ChatMessage:
    """One SillyTavern message line (already parsed) → :class:`ChatMessage`."""
    mes = r.string(d, "mes", path)
    name = r.opt_string(d, "name", path)
    is_user = r.boolean(d, "is_user", path, False)
    is_system = r.boolean(d, "is_system", path, False)
    extra = r.dict_field(d, "extra", path)
    lms = dict(r.dict_field(d, "loomscope", path))  # Loomscope < issue 30 wrote it on the line
    if "loomscope" in extra:
        lms.update(r.dict_field(extra, "loomscope", f"{path}.extra"))
        d = _without_loomscope_extra(d, lms)
        extra = r.dict_field(d, "extra", path)
    line_meta = r.dict_field(d, "meta", path)
    for key in ("swipes", "swipe_info"):
        if d.get(key) is not None and not isinstance(d[key], list):
            r.wrong(f"{path}.{key}", "array", d[key])
    if d.get("swipe_id") is not None:
        r.integer(d, "swipe_id", path, 0)
    flags = {k: _flag(r, [(lms, f"{path}.loomscope"), (line_meta, f"{path}.meta"),
                          (extra, f"{path}.extra")], k) for k in _FLAG_KEYS}
    if "message" in lms:
        # written by Loomscope before issue 30 (the whole message repeated): restore it exactly
        msg = openai_message(r, lms["message"], f"{path}.loomscope.message")
        update: dict[str, Any] = {}
        if mes != msg.text():
            update["content"] = mes
        meta = msg.meta.model_copy(update={"hidden": is_system, **flags})
        return msg.model_copy(update={**update, "meta": meta})
    # is_user / is_system are not copied: role and meta.hidden hold them (st_keys records that
    # the line had them). Flags found inside `extra` / `meta` move to the MessageMeta fields and
    # st_flag_keys remembers where they were, so nothing is stored twice and edits export right.
    meta_extra: dict[str, Any] = {"st_keys": [k for k in d if k != "loomscope"]}
    flag_places: dict[str, list[str]] = {}
    for k, v in d.items():
        if k in ("mes", "name", "loomscope", "is_user", "is_system"):
            continue
        if k in ("extra", "meta") and isinstance(v, dict) and any(f in v for f in _FLAG_KEYS):
            flag_places[k] = [f for f in _FLAG_KEYS if f in v]
            v = {kk: vv for kk, vv in v.items() if kk not in _FLAG_KEYS}
        meta_extra[f"st_{k}" if k in MessageMeta.model_fields or k.startswith("st_") else k] = v
    if flag_places:
        meta_extra["st_flag_keys"] = flag_places
    role = lms.get("role") if isinstance(lms.get("role"), str) else _st_role(is_user, is_system, extra)
    if role not in ROLES:
        r.fail("IMPORT_INVALID_CHAT", f"unknown role {role!r}", f"{path}.loomscope.role")
    if lms.get("no_name") is True:
        name = None  # the export filled in a name SillyTavern needs
    values: dict[str, Any] = {"role": role, "content": mes, "name": name}
    if "content" in lms:
        c = lms["content"]
        if c is not None and not isinstance(c, (str, list)):
            r.wrong(f"{path}.loomscope.content", "string, array or null", c)
        values["content"] = c
    if lms.get("tool_calls") is not None:
        tc = lms["tool_calls"]
        if not isinstance(tc, list):
            r.wrong(f"{path}.loomscope.tool_calls", "array", tc)
        values["tool_calls"] = [_tool_call(r, c, f"{path}.loomscope.tool_calls[{i}]")
                                for i, c in enumerate(tc)]
    for key in ("tool_call_id", "toolCallId", "callId"):
        if lms.get(key) is not None:
            values[key] = r.string(lms, key, f"{path}.loomscope")
    fields = r.dict_field(lms, "fields", f"{path}.loomscope")
    fields = {k: v for k, v in fields.items() if k not in ChatMessage.model_fields}
    for k, v in r.dict_field(lms, "meta", f"{path}.loomscope").items():
        if k not in MessageMeta.model_fields:
            meta_extra.setdefault(k, v)
    meta = MessageMeta(hidden=is_system, **flags, **meta_extra)
    return ChatMessage(**values, meta=meta, **fields)


def _without_loomscope_extra(d: dict[str, Any], lms: dict[str, Any]) -> dict[str, Any]:
    """The line without ``extra.loomscope``; without ``extra`` at all when the export added it (``lms.no_extra``)."""
    extra = {k: v for k, v in d["extra"].items() if k != "loomscope"}
    if lms.get("no_extra") is True and not extra:
        return {k: v for k, v in d.items() if k != "extra"}
    return {**d, "extra": extra}


def _line_obj(r: FieldReader, line: str, n: int) -> dict[str, Any]:
    v = parse_json(line, r.file, line_offset=n - 1)
    if not isinstance(v, dict):
        r.wrong(f"line {n}: $", "object", v)
    return v


def parse_st_jsonl(text: str, file: str, *, title: str, reader: FieldReader | None = None
                   ) -> tuple[list[Chat], str]:
    """Read JSONL chat text: SillyTavern (header + messages) or OpenAI lines. Returns ``(chats, shape)``.

    Raises ``IMPORT_INVALID_JSON`` with the file's line and column, ``IMPORT_WRONG_TYPE`` with
    ``line N: $.field``, ``IMPORT_TOO_LARGE`` (more than 100,000 lines) and
    ``IMPORT_UNSUPPORTED_FORMAT`` (lines of another kind).
    """
    r = reader or FieldReader(file)
    lines = list(iter_lines(text))
    if not lines:
        r.fail("IMPORT_EMPTY_FILE", "no lines")
    _check_count(r, len(lines) - 1, f"line {lines[-1][0]}")
    n0, first_line = lines[0]
    first = _line_obj(r, first_line, n0)
    openai = _openai_jsonl(r, lines, first, title)
    if openai is not None:
        return openai, "openai_jsonl"
    header, body = _st_header_and_body(r, lines, first)
    hp = f"line {n0}: $"
    user_name = r.string(header, "user_name", hp, "User") if header else "User"
    char_name = r.string(header, "character_name", hp, "") if header else ""
    chat_metadata = dict(r.dict_field(header, "chat_metadata", hp)) if header else {}
    lms_header = r.dict_field(header, "loomscope", hp) if header else {}
    st_header = {k: v for k, v in header.items() if k not in (*ST_HEADER_KEYS, "loomscope")}
    # newer SillyTavern writes "unused" placeholders here (the names come from elsewhere); keep
    # the placeholder for the export but do not let {{user}}/{{char}} become "unused"
    if user_name == "unused":
        st_header["user_name"], user_name = "unused", "User"
    if char_name == "unused":
        st_header["character_name"], char_name = "unused", ""
    messages, foreign = _st_messages(r, body)
    extra: dict[str, Any] = {}
    if st_header:
        extra["st_header"] = st_header
    if foreign:
        extra["st_extra_lines"] = foreign
    fields = r.dict_field(lms_header, "fields", f"{hp}.loomscope")
    for k, v in fields.items():
        if k not in Chat.model_fields:
            extra.setdefault(k, v)
    tools = _tools(r, lms_header.get("tools"), f"{hp}.loomscope.tools")
    chat = Chat(title=title, messages=messages, tools=tools, user_name=user_name,
                character_name=char_name, metadata=chat_metadata, **extra)
    return [chat], "sillytavern_jsonl"


def _openai_jsonl(r: FieldReader, lines: list[tuple[int, str]], first: dict[str, Any],
                  title: str) -> list[Chat] | None:
    """OpenAI JSONL: one message per line (one chat), or ``{"messages", "tools"}`` per line (a chat each); else ``None``."""
    if "role" in first and not any(k in first for k in ST_HEADER_KEYS + ST_MESSAGE_KEYS):
        msgs = [openai_message(r, _line_obj(r, ln, n), f"line {n}: $") for n, ln in lines]
        return [Chat(title=title, messages=msgs)]
    if isinstance(first.get("messages"), list) and not any(k in first for k in ST_HEADER_KEYS):
        chats = []
        for i, (n, ln) in enumerate(lines):
            obj = _line_obj(r, ln, n)
            msgs = openai_messages(r, obj.get("messages"), f"line {n}: $.messages")
            chats.append(Chat(title=f"{title} #{i}", messages=msgs,
                              tools=_tools(r, obj.get("tools"), f"line {n}: $.tools")))
        return chats
    return None


def _st_header_and_body(r: FieldReader, lines: list[tuple[int, str]],
                        first: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[int, str]]]:
    """SillyTavern's header line (``{}`` when the file starts with a message, with a warning) and the message lines."""
    if any(k in first for k in ST_HEADER_KEYS) and not any(k in first for k in ST_MESSAGE_KEYS):
        return first, lines[1:]
    if any(k in first for k in ST_MESSAGE_KEYS):
        r.warn("no header line (user_name, character_name, chat_metadata); defaults used")
    else:
        r.fail("IMPORT_UNSUPPORTED_FORMAT",
               "line 1 is neither a SillyTavern chat header nor a message", f"line {lines[0][0]}")
    return {}, lines


def _st_messages(r: FieldReader, body: list[tuple[int, str]]) -> tuple[list[ChatMessage], list[dict[str, Any]]]:
    """The chat messages of SillyTavern lines, and the other lines kept aside (``{"line", "before", "data"}``)."""
    messages: list[ChatMessage] = []
    foreign: list[dict[str, Any]] = []
    for n, ln in body:
        obj = _line_obj(r, ln, n)
        if any(k in obj for k in ST_MESSAGE_KEYS) or "loomscope" in obj:
            messages.append(st_message(r, obj, f"line {n}: $"))
        else:
            keys = ", ".join(list(obj)[:5]) or "none"
            r.warn(f"line {n}: not a chat message (keys: {keys}); kept aside, not part of the chat")
            foreign.append({"line": n, "before": len(messages), "data": obj})
    return messages, foreign


# --------------------------------------------------------------------------------------------
# loading
# --------------------------------------------------------------------------------------------

def _looks_like_jsonl(text: str) -> bool:
    for _n, line in iter_lines(text):
        try:
            return isinstance(json.loads(line), dict)
        except (ValueError, RecursionError):
            return False
    return False


def parse_chat_text(text: str, file: str, *, title: str, suffix: str = "",
                    reader: FieldReader | None = None) -> tuple[list[Chat], str]:
    """Read chat text of any supported shape (JSONL or one JSON document)."""
    r = reader or FieldReader(file)
    if suffix.lower() == ".jsonl":
        return _bounded(parse_st_jsonl(text, file, title=title, reader=r), file)
    try:
        data = parse_json(text, file)
    except LoomscopeImportError as exc:
        if exc.code == "IMPORT_INVALID_JSON" and _looks_like_jsonl(text):
            return _bounded(parse_st_jsonl(text, file, title=title, reader=r), file)
        raise
    return _bounded(parse_chat_document(data, file, title=title, reader=r), file)


def _bounded(parsed: tuple[list[Chat], str], file: str) -> tuple[list[Chat], str]:
    check_message_sizes(parsed[0], file)
    return parsed


def check_message_sizes(chats: list[Chat], file: str | None) -> None:
    """Refuse a message longer than :data:`~engine.importers._io.MAX_MESSAGE_CHARS` characters.

    Raises ``IMPORT_TOO_LARGE`` with place ``message I`` (or ``transcript K, message I``).
    """
    limit = _io.MAX_MESSAGE_CHARS
    for k, chat in enumerate(chats):
        for i, m in enumerate(chat.messages):
            size = len(m.text())
            if size > limit:
                where = f"message {i}" if len(chats) == 1 else f"transcript {k}, message {i}"
                _io.fail("IMPORT_TOO_LARGE", f"a message of {size:,} characters; the limit is "
                         f"{limit:,} (about a million tokens, beyond any model's context)", file, where)


def load_chats_with_info(path: str | Path) -> tuple[list[Chat], str, list[str]]:
    """All chats in a file with ``(chats, shape, warnings)``."""
    name, raw = read_bytes(path)
    reject_binary(raw, name, "chat")
    text = decode_utf8(raw, name)
    r = FieldReader(name)
    p = Path(path)
    chats, shape = parse_chat_text(text, name, title=p.stem, suffix=p.suffix, reader=r)
    return chats, shape, r.warnings


def load_chats(path: str | Path) -> list[Chat]:
    """Every chat in a file (same errors as :func:`load_chat`).

    One for most shapes, one per transcript for tau-bench results and ToolBench answers.
    """
    return guarded(path, lambda: load_chats_with_info(path)[0])


def load_chat(path: str | Path, index: int = 0) -> Chat:
    """Read a chat file.

    Parameters
    ----------
    path:
        SillyTavern chat JSONL, an OpenAI message array / request body, or a file that wraps
        OpenAI messages (SWE-agent ``.traj``, tau-bench results, ToolBench answer).
    index:
        Which transcript to return when the file holds several (tau-bench: one per task
        record; ToolBench: one per attempt). Default 0, the first; negative counts from the
        end. Use :func:`load_chats` for all of them.

    Returns
    -------
    Chat
        ``messages`` in file order (``message:<i>`` is index ``i``); see the module docstring for
        the mapping of each shape.

    Raises
    ------
    LoomscopeImportError
        ``IMPORT_FILE_NOT_FOUND``, ``IMPORT_EMPTY_FILE``, ``IMPORT_TOO_LARGE`` (file over 64 MiB or
        more than 100,000 messages), ``IMPORT_INVALID_UTF8``, ``IMPORT_INVALID_JSON`` (line,
        column), ``IMPORT_TOO_DEEP``, ``IMPORT_WRONG_TYPE`` (JSON path), ``IMPORT_INVALID_CHAT``
        (unknown role, index out of range), ``IMPORT_UNSUPPORTED_FORMAT``. Nothing else.
    """

    def run() -> Chat:
        chats, _shape, _w = load_chats_with_info(path)
        if not -len(chats) <= index < len(chats):
            fail("IMPORT_INVALID_CHAT",
                 f"the file holds {len(chats)} transcript(s); index {index} is out of range",
                 str(path))
        return chats[index]

    return guarded(path, run)


# --------------------------------------------------------------------------------------------
# export
# --------------------------------------------------------------------------------------------

def _dumps(value: Any) -> str:
    """``JSON.stringify`` equivalent: compact, non-ASCII kept."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


#: Meta keys a Loomscope-made message carries as SillyTavern's own line fields.
ST_TIME_KEYS = ("send_date", "gen_started", "gen_finished")


def _loomscope_fields(m: ChatMessage, line: dict[str, Any], lms: dict[str, Any]) -> None:
    """Add to ``lms`` what SillyTavern's line cannot hold: role, non-text content, tool calls, unknown fields."""
    given_extra = line.get("extra")
    extra = given_extra if isinstance(given_extra, dict) else {}
    derived = _st_role(bool(line.get("is_user")), bool(line.get("is_system")), extra)
    if m.role != derived:
        lms["role"] = m.role
    if not isinstance(m.content, str):
        lms["content"] = m.content
    if m.tool_calls is not None:
        lms["tool_calls"] = [c.model_dump(mode="json") for c in m.tool_calls]
    for key in ("tool_call_id", "toolCallId", "callId"):
        if getattr(m, key) is not None:
            lms[key] = getattr(m, key)
    if m.model_extra:
        lms["fields"] = dict(m.model_extra)


def _put_loomscope(line: dict[str, Any], lms: dict[str, Any]) -> dict[str, Any]:
    """``line`` with ``lms`` as ``extra.loomscope`` (SillyTavern keeps ``extra`` whole; nothing when ``lms`` is empty)."""
    if not lms:
        return line
    extra = line.get("extra")
    if "extra" not in line:
        lms = {**lms, "no_extra": True}  # read back without an `extra` the line never had
        line["extra"] = {"loomscope": lms}
    elif isinstance(extra, dict):
        line["extra"] = {**extra, "loomscope": lms}
    else:
        line["loomscope"] = lms  # `extra` is not an object: SillyTavern would drop ours inside it
    return line


def _new_st_line(m: ChatMessage, chat: Chat, lms: dict[str, Any]) -> dict[str, Any]:
    """A message made in Loomscope as SillyTavern 1.12.6 writes one.

    ``sendMessageAsUser`` for user messages; ``saveReply`` for replies: ``send_date``
    (``getMessageTimeStamp``), ``extra``, ``swipes`` / ``swipe_id`` / ``swipe_info`` and, for a
    generated reply, ``gen_started`` / ``gen_finished``; narrator ``extra.type`` for system messages.
    """
    meta_extra = dict(m.meta.model_extra or {})
    name = m.name
    if name is None:
        # SillyTavern names narrator messages "System" (NARRATOR_NAME_DEFAULT, slash-commands.js)
        name = {"user": chat.user_name, "assistant": chat.character_name, "system": "System"}.get(m.role, m.role)
    if m.name is None:
        lms["no_name"] = True
    text = m.text()
    line: dict[str, Any] = {"name": name, "is_user": m.role == "user", "is_system": m.meta.hidden}
    line["send_date"] = meta_extra.pop("send_date", None) or st_timestamp(None)
    line["mes"] = text
    line["extra"] = {"type": "narrator"} if m.role == "system" else {}
    if m.role not in ("user", "system"):
        times = {k: meta_extra.pop(k) for k in ("gen_started", "gen_finished") if meta_extra.get(k)}
        line.update(times)
        line["swipe_id"] = 0
        line["swipes"] = [text]
        line["swipe_info"] = [{"send_date": line["send_date"], **times, "extra": {}}]
    if meta_extra:
        lms["meta"] = meta_extra
    _loomscope_fields(m, line, lms)
    return _put_loomscope(line, lms)


def st_timestamp(when: Any) -> str:
    """A time as SillyTavern's ``getMessageTimeStamp`` writes it (``June 19, 2023 2:20pm``), in UTC.

    ``when`` is a :class:`datetime.datetime` (``None``: now).
    """
    d = when if isinstance(when, datetime) else datetime.now(UTC)
    months = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
              "October", "November", "December")
    hours = d.hour % 12 or 12
    return f"{months[d.month - 1]} {d.day}, {d.year} {hours}:{d.minute:02d}{'pm' if d.hour >= 12 else 'am'}"


def _js_date(d: Any) -> str:
    """A time as ``JSON.stringify(new Date())`` writes it: ``2024-06-19T14:20:03.123Z``."""
    d = d.astimezone(UTC)
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond // 1000:03d}Z"


def stamp_message_times(m: ChatMessage, started: Any, finished: Any) -> ChatMessage:
    """``m`` with the times SillyTavern records on a message it sends or receives, in ``meta``.

    ``send_date`` (``getMessageTimeStamp``) for every message; ``gen_started`` / ``gen_finished``
    (``saveReply``, JSON dates) for an assistant reply. ``started`` / ``finished`` are aware
    :class:`datetime.datetime` values (``finished`` ``None``: ``started``). Keys already set are kept.
    """
    finished = finished or started
    times: dict[str, Any] = {"send_date": st_timestamp(finished)}
    if m.role == "assistant":
        times.update(gen_started=_js_date(started), gen_finished=_js_date(finished))
    have = m.meta.model_extra or {}
    new = {k: v for k, v in times.items() if k not in have}
    return m.model_copy(update={"meta": m.meta.model_copy(update=new)}) if new else m


def _export_st_message(m: ChatMessage, chat: Chat) -> dict[str, Any]:
    meta_extra = dict(m.meta.model_extra or {})
    st_keys = meta_extra.pop("st_keys", None)
    flags = {k: getattr(m.meta, k) for k in _FLAG_KEYS}
    lms: dict[str, Any] = {k: True for k, v in flags.items() if v}
    if not isinstance(st_keys, list):
        return _new_st_line(m, chat, lms)
    flag_places = meta_extra.pop("st_flag_keys", None) or {}
    values: dict[str, Any] = {}
    for k, v in meta_extra.items():
        key = k[3:] if k.startswith("st_") and (k[3:] in MessageMeta.model_fields
                                                or k[3:].startswith("st_")) else k
        values[key] = v
    values["mes"] = m.text()
    values["name"] = m.name
    values["is_user"] = m.role == "user"
    values["is_system"] = m.meta.hidden
    if isinstance(flag_places, dict):
        for src_key, keys in flag_places.items():
            src = values.get(src_key)
            if src_key in ("extra", "meta") and isinstance(src, dict) and isinstance(keys, list):
                values[src_key] = {**src, **{k: flags[k] for k in _FLAG_KEYS if k in keys}}
                for k in keys:
                    lms.pop(k, None)  # written back where it was read from
    line = {}
    for k in st_keys:
        if k in values:
            line[k] = values.pop(k)
    if "is_system" in values and not values["is_system"]:
        values.pop("is_system")
    if "is_user" in values and not values["is_user"]:
        values.pop("is_user")
    if values.get("name") is None:
        values.pop("name", None)
    line.update(values)
    _loomscope_fields(m, line, lms)
    return _put_loomscope(line, lms)


def export_chat_jsonl(chat: Chat) -> str:
    r"""The chat as SillyTavern chat JSONL text (header line, then one line per message).

    Messages read from SillyTavern are written back with their original keys and key order
    (``send_date``, ``swipes``, ``extra``, ...); ``is_user`` / ``is_system`` follow the current
    role and hidden flag; messages made in Loomscope get SillyTavern's own fields (``name``,
    ``is_user``, ``is_system``, ``send_date``, ``mes``, ``extra``, and for replies ``swipes``,
    ``swipe_id``, ``swipe_info``, ``gen_started``, ``gen_finished``). What SillyTavern cannot
    express (pinned / manual-exclude flags, tool calls, other roles) goes into one small
    ``extra.loomscope`` object, which SillyTavern keeps and ignores and :func:`load_chat` reads
    back (as it reads the line-level ``loomscope`` object of earlier exports); tools and other
    chat fields go into the header's ``loomscope`` object. Lines that were not messages
    (``Chat.st_extra_lines``) are written back in place. Like SillyTavern's ``saveChat``
    (``JSON.stringify`` per line, joined by ``\\n``): compact separators, no trailing newline.

    ``load_chat(write(export_chat_jsonl(c)))`` equals ``c`` (title aside, which comes from the file
    name) for chats read from SillyTavern and from the OpenAI shapes.
    """
    extra = dict(chat.model_extra or {})
    st_header = extra.pop("st_header", None) or {}
    foreign = extra.pop("st_extra_lines", None) or []
    header: dict[str, Any] = {"user_name": chat.user_name, "character_name": chat.character_name}
    header.update(st_header)  # includes "unused" placeholders read from the file
    header["chat_metadata"] = chat.metadata
    lms: dict[str, Any] = {}
    if chat.tools:
        lms["tools"] = chat.tools
    if extra:
        lms["fields"] = extra
    if lms:
        header["loomscope"] = lms
    out = [_dumps(header)]
    pending = sorted((f for f in foreign if isinstance(f, dict)), key=lambda f: f.get("before", 0))
    fi = 0
    for i, m in enumerate(chat.messages):
        while fi < len(pending) and pending[fi].get("before", 0) <= i:
            out.append(_dumps(pending[fi].get("data")))
            fi += 1
        out.append(_dumps(_export_st_message(m, chat)))
    for f in pending[fi:]:
        out.append(_dumps(f.get("data")))
    return "\n".join(out)


def write_chat_jsonl(chat: Chat, path: str | Path) -> None:
    """Write :func:`export_chat_jsonl` to ``path`` atomically (temp file + ``os.replace``)."""
    atomic_write_text(path, export_chat_jsonl(chat))


__all__ = [
    "chat_shape",
    "export_chat_jsonl",
    "load_chat",
    "load_chats",
    "load_chats_with_info",
    "parse_chat_document",
    "parse_chat_text",
    "parse_st_jsonl",
    "st_timestamp",
    "stamp_message_times",
    "write_chat_jsonl",
]
