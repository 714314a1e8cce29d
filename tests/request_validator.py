"""An independent check of the OpenAI chat-completions request shape (test helper).

Written from the OpenAI API reference ("Create chat completion", message objects), not from
Loomscope's code, so that it can catch the engine's mistakes:

* ``messages`` is a non-empty list; every role is ``system``, ``developer``, ``user``,
  ``assistant``, ``tool`` or (legacy) ``function``.
* ``content`` is a string or a list of typed content parts; it may be ``null`` only on an
  assistant message that calls tools (or a legacy ``function_call``).
* An assistant message with ``tool_calls`` (a non-empty list, each ``{"id", "type":
  "function", "function": {"name", "arguments": str}}``, ids unique in the message) is followed
  *directly* by exactly its results: one ``tool`` message per call id, nothing else in
  between, no result for another id. (OpenAI: "An assistant message with 'tool_calls' must be
  followed by tool messages responding to each 'tool_call_id'.") Calls without ids (legacy
  transcripts) are answered by as many id-less ``tool`` messages.
* A ``tool`` message only ever appears inside such a run (no orphan result, no result
  before its call); a legacy ``function`` message only directly after a ``function_call``.
"""

from __future__ import annotations

from typing import Any

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


def request_problems(messages: list[dict[str, Any]]) -> list[str]:
    """Everything a provider would reject in ``messages``; empty when the request is valid."""
    problems: list[str] = []
    if not isinstance(messages, list) or not messages:
        return ["messages must be a non-empty list"]
    i = 0
    n = len(messages)
    while i < n:
        m = messages[i]
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            problems.append(f"{where}: not an object")
            i += 1
            continue
        role = m.get("role")
        if role not in ROLES:
            problems.append(f"{where}: invalid role {role!r}")
        content = m.get("content")
        calls = m.get("tool_calls")
        legacy = m.get("function_call")
        if content is None:
            if not (role == "assistant" and (calls or isinstance(legacy, dict))):
                problems.append(f"{where}: content is null on a {role} message without tool calls")
        elif isinstance(content, list):
            for k, part in enumerate(content):
                if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                    problems.append(f"{where}.content[{k}]: not a typed content part")
        elif not isinstance(content, str):
            problems.append(f"{where}: content is {type(content).__name__}")
        if "meta" in m:
            problems.append(f"{where}: Loomscope's meta leaked into the request")
        if role == "tool":
            problems.append(f"{where}: tool result {m.get('tool_call_id')!r} does not directly follow its call")
            i += 1
            continue
        if role == "function":
            problems.append(f"{where}: function result does not directly follow a function_call")
            i += 1
            continue
        if calls is not None:
            if role != "assistant":
                problems.append(f"{where}: tool_calls on a {role} message")
            if not isinstance(calls, list) or not calls:
                problems.append(f"{where}: tool_calls must be a non-empty list")
                i += 1
                continue
            ids: list[str] = []
            anon = 0
            for k, c in enumerate(calls):
                fn = c.get("function") if isinstance(c, dict) else None
                if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) \
                        or not isinstance(fn.get("arguments"), str):
                    problems.append(f"{where}.tool_calls[{k}]: function name and arguments must be strings")
                if isinstance(c, dict) and c.get("type", "function") != "function":
                    problems.append(f"{where}.tool_calls[{k}]: type {c.get('type')!r}")
                cid = c.get("id") if isinstance(c, dict) else None
                if cid:
                    ids.append(cid)
                else:
                    anon += 1
            if len(set(ids)) != len(ids):
                problems.append(f"{where}: duplicate tool call ids {ids}")
            if ids and anon:
                problems.append(f"{where}: some tool calls have ids and some do not")
            j = i + 1
            answered: list[str] = []
            anon_results = 0
            while j < n and isinstance(messages[j], dict) and messages[j].get("role") == "tool":
                rid = messages[j].get("tool_call_id")
                if rid:
                    answered.append(rid)
                else:
                    anon_results += 1
                if messages[j].get("content") is None:
                    problems.append(f"messages[{j}]: tool result without content")
                j += 1
            if ids:
                if sorted(answered) != sorted(ids) or anon_results:
                    problems.append(f"{where}: calls {sorted(ids)} are followed by results {answered}"
                                    f"{f' and {anon_results} without ids' if anon_results else ''}")
            elif anon_results != anon or answered:
                problems.append(f"{where}: {anon} id-less calls are followed by {anon_results} id-less "
                                f"results and results for {answered}")
            i = j
            continue
        if isinstance(legacy, dict):
            if i + 1 >= n or not isinstance(messages[i + 1], dict) or messages[i + 1].get("role") != "function":
                problems.append(f"{where}: function_call is not followed by its function result")
                i += 1
            else:
                i += 2
            continue
        i += 1
    return problems
