"""The summary request: cap, one re-request, one retry after a delay, verbatim artifacts re-appended."""

from __future__ import annotations

import threading
import time

import pytest

from engine.compaction.summarizer import KEPT_HEADER, compose, fit_transcript, summarize_history
from engine.errors import ProviderError
from engine.schema import ChatMessage
from engine.shifting.artifacts import find_artifacts
from engine.tokenizers import default_tokenizer_registry

PROFILE = default_tokenizer_registry().get("o200k_base")
COUNT = PROFILE.count
TRACE = """Traceback (most recent call last):
  File "/home/u/proj-fix-123/apps/api/mapper.py", line 42, in map_row
    return row["id"]
KeyError: 'id'"""


class Scripted:
    """A summarizer that answers from a script (str = answer, Exception = raise) and records calls."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls: list[list[dict]] = []
        self.times: list[float] = []

    def __call__(self, messages):
        self.calls.append(messages)
        self.times.append(time.monotonic())
        a = self.answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a


MESSAGES = {1: ChatMessage(role="user", content="Please fix the mapper."),
            2: ChatMessage(role="tool", tool_call_id="c1", content=f"$ pytest\n{TRACE}"),
            3: ChatMessage(role="assistant", content="The row has no id key.")}


def _run(summ, cap=200, delay=0.0, **kw):
    return summarize_history(MESSAGES, summarizer=summ, cap=cap, count=COUNT, input_budget=10_000,
                             input_count=COUNT, retry_delay_s=delay, **kw)


def test_over_cap_is_re_requested_once_then_refused():
    long = "The user and the assistant discussed the mapper at length. " * 50  # ~500 tokens
    assert COUNT(long) > 500
    summ = Scripted(long, long)
    out = _run(summ, cap=20)
    assert out.text is None and out.error_code == "SUMMARY_OVER_CAP"
    assert [a.outcome for a in out.attempts] == ["over_cap", "over_cap"]
    assert len(summ.calls) == 2
    assert f"previous summary was {COUNT(long.strip())} tokens" in summ.calls[1][0]["content"]
    assert "at most 20 tokens" in summ.calls[1][0]["content"]


def test_over_cap_then_short_enough_is_accepted():
    summ = Scripted("word " * 300, "Fixing the mapper.")
    out = _run(summ, cap=60)
    assert out.text is not None and COUNT(out.text) <= 60
    assert [a.outcome for a in out.attempts] == ["over_cap", "ok"]


def test_dropped_path_and_error_line_are_re_appended_verbatim():
    out = _run(Scripted("The assistant was editing mapper.py."), cap=200)
    assert out.text is not None and KEPT_HEADER in out.text
    assert "/home/u/proj-fix-123/apps/api/mapper.py" in out.text
    assert "KeyError: 'id'" in out.text
    assert out.reappended


def test_tight_cap_keeps_the_path_and_error_line_and_cuts_prose():
    prose = "First the user asked for a fix. Then the tests ran. Then a lot more happened in detail. " * 3
    text, _items, cut = compose(prose, find_artifacts(TRACE), 45, COUNT)
    assert COUNT(text) <= 45
    assert "/home/u/proj-fix-123/apps/api/mapper.py" in text and "KeyError: 'id'" in text
    assert cut


def test_failure_is_retried_once_after_the_delay_then_given_up():
    err = ProviderError("PROVIDER_RATE_LIMITED", "429")
    summ = Scripted(err, err)
    out = _run(summ, delay=0.2)
    assert out.text is None and out.error_code == "PROVIDER_RATE_LIMITED"
    assert len(summ.calls) == 2 and summ.times[1] - summ.times[0] >= 0.2
    summ = Scripted(err, "Mapper fixed; /home/u/proj-fix-123/apps/api/mapper.py raised KeyError: 'id'.")
    out = _run(summ, delay=0.0)
    assert out.text is not None and [a.outcome for a in out.attempts] == ["error", "ok"]


def test_empty_answer_counts_as_a_failure():
    out = _run(Scripted("", "  "))
    assert out.text is None and out.error_code == "SUMMARY_EMPTY"


def test_cancel_during_the_retry_wait_raises_cancelled():
    cancel = threading.Event()
    summ = Scripted(ProviderError("PROVIDER_SERVER_ERROR", "500"), "never")
    threading.Timer(0.05, cancel.set).start()
    with pytest.raises(ProviderError) as exc:
        _run(summ, delay=5.0, cancel=cancel)
    assert exc.value.code == "CANCELLED" and len(summ.calls) == 1


def test_transcript_is_fitted_to_the_summarizers_budget():
    lines = [(i, f"[#{i} user] " + "salt " * 400) for i in range(5)]
    out, cut = fit_transcript(lines, 600, COUNT)
    assert sum(COUNT(t) for _, t in out) <= 600 and cut >= 1
    assert [i for i, _ in out] == sorted(i for i, _ in out)
    # the summary then covers only what the summarizer saw
    big = {i: ChatMessage(role="user", content=f"note {i} " + "salt " * 3000) for i in range(6)}
    res = summarize_history(big, summarizer=Scripted("Salt notes."), cap=100, count=COUNT, input_budget=2000,
                            input_count=COUNT, retry_delay_s=0)
    assert res.text is not None and res.input_cut > 0 and res.covered and res.covered[-1] == 5


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(0, 3000), max_size=8), budget=st.integers(0, 2000))
def test_fit_transcript_always_ends_fits_or_cannot_cut_further(sizes, budget):
    count = len  # one "token" per character keeps the property exact
    lines = [(i, "x" * n) for i, n in enumerate(sizes)]
    out, _cut = fit_transcript(lines, budget, count)
    assert sum(len(t) for _, t in out) <= budget or not out
    assert [i for i, _ in out] == [i for i, _ in lines][len(lines) - len(out):]  # only the oldest left out


def test_cutting_prose_keeps_the_models_text_exactly_and_code_whole():
    from engine.compaction.summarizer import repair, sentence_spans

    code = "```py\n" + "\n".join(f"step_{i} = run({i})  # long line {'x' * 30}" for i in range(12)) + "\n```"
    filler = " ".join(f"Sentence {i} says the queue drained." for i in range(400))  # > 6,000 characters
    prose = f"The fix:\n{code}\n{filler}\nThe last word names /srv/app/queue.py for the record."
    arts = find_artifacts(prose)
    fixed = repair(prose, arts, 400, COUNT)
    assert COUNT(fixed.text) <= 400 and fixed.prose_cut
    assert code in fixed.text  # never shortened or squashed
    assert "/srv/app/queue.py" in fixed.text  # a sentence holding an artifact is never cut, even past 6,000 chars
    assert fixed.dropped == []
    assert fixed.text.startswith(f"The fix:\n{code}\n")  # the model's own layout
    assert fixed.text.endswith("\nThe last word names /srv/app/queue.py for the record.")
    assert len(sentence_spans(prose)) == 403  # two lines, the code block, 400 sentences
