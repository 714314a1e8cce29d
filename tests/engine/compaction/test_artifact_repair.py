"""Issue 28 item 2: every artifact of the summarized messages is in the summary or counted.

A stand-in provider (a real HTTP server on 127.0.0.1, ``tests.fake_provider``) answers summary
requests with prose that drops every artifact; Loomscope re-attaches each verbatim under the
summary, up to its cap, and counts what does not fit in the audit and a diagnostic. The retry
asks again naming what the first summary dropped.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.compaction.run import run_compaction
from engine.compaction.summarizer import KEPT_HEADER, provider_summarizer, summarize_history
from engine.generation import ProviderConfig, generate_and_store
from engine.schema import Chat, ChatMessage, ContextSettings, PreviewRequest
from engine.shifting.artifacts import find_artifacts, missing_artifacts
from engine.storage import open_store
from engine.tokenizers import default_tokenizer_registry
from tests.fake_provider import FakeProviderServer

from .test_artifacts import KIND_CASES, TRACE

COUNT = default_tokenizer_registry().get("o200k_base").count
KEY = "sk-test-artifacts"
#: What the stand-in summarizer answers: plain prose, no artifact at all.
DROPPING_SUMMARY = "The user and the assistant debugged the service together and agreed on next steps."
CODE = "```python\ndef map_row(row):\n    return row.get('id')\n```"
ALL_CASES = [*KIND_CASES, (f"It failed:\n{TRACE}", "trace", TRACE), (f"Fix:\n{CODE}", "code", CODE)]


@pytest.fixture(scope="module")
def server():
    with FakeProviderServer("answer", summary_text=DROPPING_SUMMARY) as srv:
        yield srv


@pytest.mark.parametrize(("text", "kind", "expected"), ALL_CASES, ids=[f"{k}-{i}" for i, (_, k, _) in enumerate(ALL_CASES)])
def test_each_kind_dropped_by_the_provider_is_re_attached_verbatim(server, text, kind, expected):
    messages = {1: ChatMessage(role="user", content="Here is what I saw."),
                2: ChatMessage(role="assistant", content=text)}
    call = provider_summarizer(server.base_url, KEY, "gpt-4o", cap=300)
    out = summarize_history(messages, summarizer=call, cap=300, count=COUNT, input_budget=10_000,
                            input_count=COUNT, retry_delay_s=0)
    assert out.text is not None and out.text.startswith(DROPPING_SUMMARY)
    assert KEPT_HEADER in out.text
    [art] = [a for a in find_artifacts(text) if a.kind == kind and a.text == expected] or [
        a for a in find_artifacts(text, nested=True) if a.text == expected]
    assert missing_artifacts([art], out.text) == []  # present verbatim
    assert out.dropped == [] and out.artifact_report()["dropped"] == 0


def test_a_tight_cap_counts_what_does_not_fit_and_the_retry_names_it(server):
    text = "\n".join(t for t, _, _ in ALL_CASES)
    messages = {1: ChatMessage(role="assistant", content=text)}
    calls: list[list[dict]] = []
    http = provider_summarizer(server.base_url, KEY, "gpt-4o", cap=60)

    def recording(request):
        calls.append(request)
        return http(request)

    out = summarize_history(messages, summarizer=recording, cap=60, count=COUNT, input_budget=10_000,
                            input_count=COUNT, retry_delay_s=0)
    assert out.text is not None and COUNT(out.text) <= 60
    arts = find_artifacts(text)
    lost = missing_artifacts(arts, out.text)
    assert lost and out.dropped == lost  # every artifact present or counted, none silently
    assert out.artifact_report()["dropped"] == len(lost) and out.artifact_report()["found"] == len(arts)
    assert len(calls) == 2  # asked once more
    retry = calls[1][0]["content"]
    assert "Your previous summary dropped these" in retry
    named = retry.split("copy each exactly as written: ", 1)[1]
    assert f"(and {len(lost) - 12} more)" in named  # the same answer twice: the same losses
    assert "KeyError: 'id'" in out.text and "KeyError: 'id'" not in named  # errors re-attached first
    for item in named.split(" (and ")[0].split("; ")[:5]:
        assert item in {" ".join(a.text.split()) for a in lost}


def _store(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOMSCOPE_API_KEY", KEY)
    monkeypatch.setenv("LOOMSCOPE_DB", str(tmp_path / "lib.sqlite3"))
    return open_store(f"sqlite:///{tmp_path / 'lib.sqlite3'}", seed=False)


def test_generation_audit_counts_re_attached_and_dropped_artifacts(tmp_path, monkeypatch, server):
    """The issue's two kinds: an error inside a FAILED line, and backticked / dotted names and settings."""
    msgs = [ChatMessage(role="system", content="You are a coding assistant.")]
    for i in range(30):
        msgs.append(ChatMessage(role="user", content=f"Step {i}: ran the suite. " + "details " * 40))
        msgs.append(ChatMessage(role="assistant", content=f"Step {i} notes. " + "more " * 40))
    msgs[3] = ChatMessage(role="user", content="FAILED tests/test_mapper.py::test_map_row - KeyError: 'id'")
    msgs[4] = ChatMessage(role="assistant", content="Call `user.profile.save()` after np.linalg.norm; set MAX_RETRIES=5.")
    msgs.append(ChatMessage(role="user", content="What next?"))
    store = _store(tmp_path, monkeypatch)
    try:
        chat_id = store.chats.add(Chat(messages=msgs), settings=ContextSettings(
            model="gpt-4o", context_limit=4000, reply_reserve=200, strategy="compact",
            strategy_options={"retry_delay_s": 0, "summary_cap_tokens": 200}))
        with FakeProviderServer("answer", summary_text=DROPPING_SUMMARY, reply_text="Done.") as srv:
            res = generate_and_store(store, chat_id, ProviderConfig(base_url=srv.base_url, model="gpt-4o",
                                                                    api_key=KEY, stream=False))
    finally:
        store.close()
    record = res.audit.compaction
    assert record["status"] in ("compacted", "compacted_then_truncated")
    [summary] = [b for b in res.audit.blocks if b.kind == "summary"]
    for expected in ("KeyError: 'id'", "tests/test_mapper.py", "user.profile.save()", "np.linalg.norm", "MAX_RETRIES=5"):
        assert expected in summary.text
    report = record["artifacts"]
    assert report["reattached"] >= 5 and report["found"] >= report["reattached"]
    assert report["dropped"] == 0 and "diagnostics" not in record
    # the header names exactly the covered messages
    first_line = summary.text.splitlines()[0]
    assert first_line.startswith("[Summary of the earlier conversation, messages #")


_KINDS_TEXT = [t for t, _, _ in ALL_CASES]


@st.composite
def _chats(draw):
    n = draw(st.integers(14, 30))
    msgs = [ChatMessage(role="system", content="You are a coding assistant.")]
    for i in range(n):
        parts = draw(st.lists(st.sampled_from(_KINDS_TEXT), max_size=3))
        filler = " ".join(draw(st.lists(st.sampled_from(["salt", "road", "mapper", "retry", "queue"]),
                                        min_size=20, max_size=80)))
        msgs.append(ChatMessage(role="user" if i % 2 == 0 else "assistant",
                                content=f"Turn {i}. {filler}.\n" + "\n".join(parts)))
    msgs.append(ChatMessage(role="user", content="Go on."))
    return msgs


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(msgs=_chats(), cap=st.integers(40, 400), keep=st.integers(2, 6), drop_every=st.integers(1, 3))
def test_property_compaction_is_cheaper_keeps_the_newest_and_loses_nothing_silently(msgs, cap, keep, drop_every):
    request = PreviewRequest(chat=Chat(messages=msgs), settings=ContextSettings(
        model="gpt-4o", context_limit=900, reply_reserve=100, strategy="compact",
        strategy_options={"retry_delay_s": 0, "summary_cap_tokens": cap, "keep_recent": keep}))

    def summarizer(request):  # keeps every drop_every-th line of the transcript, drops the rest
        lines = request[1]["content"].splitlines()[1:]
        return "\n".join(ln.split("] ", 1)[-1] for k, ln in enumerate(lines) if k % drop_every == 0)[:4 * cap] or "x"

    out = run_compaction(request, ProviderConfig(base_url="http://127.0.0.1:9", model="gpt-4o", api_key=None),
                         generation_id="g", summarizer=summarizer)
    record, prepared = out.record, out.prepared
    assert prepared is not None
    # the N newest messages are kept verbatim, whatever the outcome
    kept = {b.message_index for b in prepared.preview.blocks if b.status == "kept" and b.message_index is not None}
    newest = list(range(len(msgs) - keep, len(msgs)))  # keep_recent counts the current input
    assert set(newest) <= kept
    if record.get("status") not in ("compacted", "compacted_then_truncated"):
        return
    # never costs more than what it replaces
    assert record["summary_tokens"] < record["replaced_tokens"]
    [sblock] = [b for b in prepared.preview.blocks if b.kind == "summary"]
    # every artifact of the covered messages is in the summary, or counted
    arts = []
    for i in record["covered"]:
        arts.extend(find_artifacts(msgs[i].text()))
    lost = missing_artifacts(arts, sblock.text)
    assert len({a.text for a in lost}) <= record["artifacts"]["dropped"]
    if record["artifacts"]["dropped"]:
        assert any("did not fit the summary cap" in d for d in record["diagnostics"])
