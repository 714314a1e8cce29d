"""The request validator itself: it must reject what a provider rejects (or it proves nothing)."""

from __future__ import annotations

import pytest

from tests.request_validator import request_problems

CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
    {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
RA = {"role": "tool", "tool_call_id": "a", "content": "1"}
RB = {"role": "tool", "tool_call_id": "b", "content": "2"}
USER = {"role": "user", "content": "hi"}
SYS = {"role": "system", "content": "lore"}


@pytest.mark.parametrize("messages", [
    [USER, CALL, RA, RB, USER],
    [USER, CALL, RB, RA],  # results in any order
    [SYS, USER, {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": ""}},
     {"role": "function", "name": "f", "content": "x"}],
    [{"role": "developer", "content": [{"type": "text", "text": "x"}]}, USER],
])
def test_valid_requests_pass(messages):
    assert request_problems(messages) == []


@pytest.mark.parametrize("messages, fragment", [
    ([], "non-empty"),
    ([USER, CALL, RA, SYS, RB], "followed by results"),  # a depth insertion inside the batch
    ([USER, CALL, RA], "followed by results"),  # half a pair
    ([USER, RA, CALL, RB], "does not directly follow"),  # result before its call
    ([USER, CALL, RA, RB, RA], "followed by results"),  # a result answered twice
    ([USER, CALL, RA, RB, USER, RA], "does not directly follow"),  # a result outside its run
    ([{"role": "narrator", "content": "x"}], "invalid role"),
    ([{"role": "user", "content": None}], "content is null"),
    ([{"role": "user", "content": "x", "meta": {}}], "meta"),
    ([{"role": "assistant", "content": None, "tool_calls": []}], "non-empty"),
    ([{"role": "assistant", "content": None, "function_call": {"name": "f"}}, USER], "function_call"),
])
def test_invalid_requests_are_caught(messages, fragment):
    problems = request_problems(messages)
    assert problems and any(fragment in p for p in problems), problems
