"""Asking an LLM for the summary of old history, and checking what it returns (SPEC §4).

- The request is budgeted for the *summarizer's* model: its context limit (option
  ``summary_context_limit`` or the model table) minus the summary cap (sent as ``max_tokens``)
  minus the instructions; a transcript too long for it is shortened (the longest messages cut in
  the middle first, then the oldest messages left out: those stay unsummarized history).
- At most two requests: a failed one (any provider error but ``CANCELLED``, or an empty
  answer) is retried once after ``retry_delay_s`` seconds; a summary over its cap is re-requested
  once with the measured size and the cap in the instructions. A summary still over the cap is
  never accepted: the caller falls back to truncation.
- Code blocks, file paths, error lines and stack traces of the summarized messages that the
  model dropped are re-appended verbatim under a "Kept verbatim" line; when they do not all fit
  the cap, error lines and paths go first (a trace that does not fit whole is kept as its paths
  and final error line), and the model's prose is cut at sentence ends to make room.
- Provider error text never reaches the summary or the chat: a failure is an error *code*.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ProviderError
from ..schema.messages import ChatMessage
from ..shifting.artifacts import Artifact, find_artifacts, missing_artifacts
from .state import CompactionSummary

#: Appears in the summarizer's instructions (the test server recognises summary requests by it).
SUMMARY_MARKER = "[loomscope:compaction]"
KEPT_HEADER = "Kept verbatim from the summarized messages:"
#: A transcript line is never cut below this many characters.
MIN_LINE_CHARS = 200
_PRIORITY = {"error": 0, "path": 1, "trace": 2, "code": 3}

#: ``messages -> summary text``; raises ``ProviderError`` on failure.
Summarizer = Callable[[list[dict[str, Any]]], str]


@dataclass
class Attempt:
    """One summary request: its outcome, size and error code.

    ``outcome`` is ``ok``, ``over_cap``, ``empty`` or ``error``; ``tokens`` the answer's size (tokens of the generation
    profile), ``error_code`` when failed.
    """

    outcome: str
    tokens: int = 0
    error_code: str | None = None

    def dump(self) -> dict[str, Any]:
        """JSON-able form for the audit."""
        return {"outcome": self.outcome, "tokens": self.tokens, "error_code": self.error_code}


@dataclass
class SummaryOutcome:
    """What :func:`summarize_history` produced.

    ``text`` is ``None`` when no acceptable summary came back (then ``error_code`` says why:
    a provider code, ``SUMMARY_EMPTY`` or ``SUMMARY_OVER_CAP``). ``covered`` are the message
    indices the summary stands for; ``reappended`` the artifacts Loomscope put back;
    ``input_cut`` how many transcript lines were shortened or left out for the summarizer's budget.
    """

    text: str | None
    attempts: list[Attempt] = field(default_factory=list)
    covered: list[int] = field(default_factory=list)
    reappended: list[str] = field(default_factory=list)
    input_cut: int = 0
    error_code: str | None = None
    prose_cut: bool = False


def transcript_line(index: int, message: ChatMessage) -> str:
    """``[#index role] text`` with tool calls as ``→ name(arguments)``."""
    who = message.name or message.role
    parts = [message.text()]
    for call in message.tool_calls or []:
        parts.append(f"→ {call.function.name}({call.function.arguments})")
    body = "\n".join(p for p in parts if p)
    return f"[#{index} {who}] {body}"


def instructions(cap: int, *, measured: int | None = None) -> str:
    """The summarizer's system prompt (``measured``: the size of a rejected, too long summary)."""
    text = (f"{SUMMARY_MARKER} You compress the earlier part of a conversation so that it can go on "
            "without it. Write a concise summary of the messages below: who wants what, decisions, "
            "facts, names, numbers and ids, what was done and what is still open. Copy every code "
            "block, file path, error message and stack trace exactly as written. "
            f"Answer with the summary only, at most {cap} tokens.")
    if measured is not None:
        text += (f" Your previous summary was {measured} tokens, over the limit of {cap}: "
                 "write a shorter one.")
    return text


def _cut_middle(text: str, keep: int) -> str:
    if len(text) <= keep:
        return text
    half = max(1, keep // 2)
    return text[:half] + " …[cut]… " + text[-half:]


def fit_transcript(lines: list[tuple[int, str]], budget: int, count: Callable[[str], int]) -> tuple[list[tuple[int, str]], int]:
    """Shorten ``lines`` (index, text) until their tokens fit ``budget``; returns (lines, number cut).

    The longest line is cut in the middle (to half its length; lines of up to
    2 × :data:`MIN_LINE_CHARS` characters are left whole) until all fit; then the oldest lines
    are left out.
    """
    out = list(lines)
    sizes = [count(t) for _, t in out]
    cut = set()
    while sum(sizes) > budget:
        cuttable = [j for j in range(len(out)) if len(out[j][1]) > 2 * MIN_LINE_CHARS]
        if not cuttable:
            break
        k = max(cuttable, key=lambda j: (len(out[j][1]), -j))
        out[k] = (out[k][0], _cut_middle(out[k][1], len(out[k][1]) // 2))  # strictly shorter
        sizes[k] = count(out[k][1])
        cut.add(out[k][0])
    while out and sum(sizes) > budget:
        cut.add(out[0][0])
        out.pop(0)
        sizes.pop(0)
    return out, len(cut)


def _sentences(text: str) -> list[str]:
    from ..shifting.summarize import split_sentences

    return split_sentences(text) or [text]


def compose(prose: str, missing: list[Artifact], cap: int, count: Callable[[str], int]) -> tuple[str, list[str], bool]:
    """The summary text: ``prose`` plus the ``missing`` artifacts, within ``cap`` tokens.

    Returns (text, re-appended artifact texts, whether the prose was cut). See the module
    docstring for the order.
    """
    prose = prose.strip()

    def render(p: str, items: list[str]) -> str:
        return p if not items else f"{p}\n\n{KEPT_HEADER}\n" + "\n".join(items)

    items: list[str] = []
    for a in sorted(missing, key=lambda a: (_PRIORITY.get(a.kind, 9), a.start)):
        if a.text in items:
            continue
        if a.kind in ("trace", "code"):
            if count(render(prose, [*items, a.text])) <= cap:
                items.append(a.text)
                continue
            for part in find_artifacts(a.text, nested=True):
                if part.kind in ("error", "path") and part.text not in items and part.text not in prose:
                    items.append(part.text)
        else:
            items.append(a.text)
    prose_cut = False
    if count(render(prose, items)) > cap:
        sentences = _sentences(prose)
        while len(sentences) > 1 and count(render(" ".join(sentences), items)) > cap:
            sentences.pop()
            prose_cut = True
        prose = " ".join(sentences) if prose_cut else prose
    while items and count(render(prose, items)) > cap:
        items.pop()  # the lowest-priority artifact goes
    return render(prose, items), items, prose_cut


def summarize_history(
    messages: dict[int, ChatMessage],
    *,
    summarizer: Summarizer,
    cap: int,
    count: Callable[[str], int],
    input_budget: int,
    input_count: Callable[[str], int],
    previous: CompactionSummary | None = None,
    retry_delay_s: float = 2.0,
    cancel: threading.Event | None = None,
) -> SummaryOutcome:
    """Ask ``summarizer`` for a summary of ``messages`` (index → message), checked and completed.

    Parameters
    ----------
    messages:
        The messages to summarize, by chat index.
    summarizer:
        Sends one request (OpenAI chat messages) and returns the answer's text.
    cap:
        Longest acceptable summary, in tokens of ``count`` (the generation's profile).
    count:
        Tokens of a text under the generation's profile.
    input_budget:
        Tokens the transcript may take in the summarizer's request (its model's limit minus the
        cap and the instructions), counted with ``input_count`` (the summarizer's profile).
    previous:
        A summary being extended: its text goes first in the transcript.
    retry_delay_s:
        Seconds before the retry of a failed request (the wait ends early on ``cancel``).

    Raises
    ------
    ProviderError
        ``CANCELLED`` when ``cancel`` is set (during a request or the wait).
    """
    lines = [(i, transcript_line(i, m)) for i, m in sorted(messages.items())]
    head = f"Summary so far:\n{previous.text}\n\n" if previous is not None else ""
    lines, input_cut = fit_transcript(lines, max(0, input_budget - input_count(head)), input_count)
    covered = [i for i, _ in lines]
    outcome = SummaryOutcome(text=None, covered=covered, input_cut=input_cut)
    if not covered:
        outcome.error_code = "SUMMARY_INPUT_TOO_LARGE"
        return outcome
    user = head + "Messages to summarize:\n" + "\n".join(t for _, t in lines)
    artifacts = _artifacts_of(messages, covered, previous)
    measured: int | None = None  # tokens of the last over-cap answer (the retry asks for a shorter one)
    for attempt in range(2):
        if attempt and measured is None and retry_delay_s > 0:
            waiter = cancel or threading.Event()
            if waiter.wait(retry_delay_s):
                raise ProviderError("CANCELLED", "the generation was cancelled during compaction")
        request = [{"role": "system", "content": instructions(cap, measured=measured)},
                   {"role": "user", "content": user}]
        text, measured = _attempt(summarizer, request, cap, count, outcome)
        if text is None:
            continue
        final, reappended, prose_cut = compose(text, missing_artifacts(artifacts, text), cap, count)
        outcome.text, outcome.reappended, outcome.prose_cut = final, reappended, prose_cut
        outcome.error_code = None
        return outcome
    return outcome


def _artifacts_of(messages: dict[int, ChatMessage], covered: list[int],
                  previous: CompactionSummary | None) -> list[Artifact]:
    """Artifacts (paths, error lines, code, traces) of the covered messages and the summary being extended."""
    artifacts: list[Artifact] = []
    for i in covered:
        artifacts.extend(find_artifacts(transcript_line(i, messages[i]).split("] ", 1)[-1]))
    if previous is not None:
        artifacts.extend(a for a in find_artifacts(previous.text) if a.text not in {x.text for x in artifacts})
    return artifacts


def _attempt(summarizer: Summarizer, request: list[dict[str, Any]], cap: int, count: Callable[[str], int],
             outcome: SummaryOutcome) -> tuple[str | None, int | None]:
    """One summary request, recorded in ``outcome.attempts``.

    Returns ``(text, None)`` for an answer within ``cap`` tokens, ``(None, tokens)`` for one over
    it, ``(None, None)`` for a failed or empty answer. ``CANCELLED`` is raised again.
    """
    try:
        text = (summarizer(request) or "").strip()
    except ProviderError as exc:
        if exc.code == "CANCELLED":
            raise
        outcome.attempts.append(Attempt("error", error_code=exc.code))
        outcome.error_code = exc.code
        return None, None
    if not text:
        outcome.attempts.append(Attempt("empty"))
        outcome.error_code = "SUMMARY_EMPTY"
        return None, None
    size = count(text)
    if size > cap:
        outcome.attempts.append(Attempt("over_cap", tokens=size))
        outcome.error_code = "SUMMARY_OVER_CAP"
        return None, size
    outcome.attempts.append(Attempt("ok", tokens=size))
    return text, None


def provider_summarizer(base_url: str, api_key: str | None, model: str, *, cap: int, timeout_s: float = 60.0,
                        extra_body: dict[str, Any] | None = None,
                        cancel: threading.Event | None = None) -> Summarizer:
    """A :data:`Summarizer` that asks an OpenAI-compatible endpoint (one JSON answer, no stream).

    The reply is limited to ``cap`` tokens as ``max_tokens``, or ``max_completion_tokens`` for the models that reject
    ``max_tokens`` (``engine.providers.params``).
    """
    from ..providers import ChatCompletionsClient, reply_limit_fields

    client = ChatCompletionsClient(base_url, api_key, timeout_s=timeout_s)
    limit = reply_limit_fields(model, cap) or {"max_tokens": cap}

    def call(messages: list[dict[str, Any]]) -> str:
        reply = client.complete(model, messages, stream=False, extra_body=extra_body, reply_limit=limit,
                                cancel=cancel)
        return reply.content or ""

    return call
