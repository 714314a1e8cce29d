"""Asking an LLM for the summary of old history, and checking what it returns (SPEC §4).

- The request is budgeted for the *summarizer's* model: its context limit (option
  ``summary_context_limit`` or the model table) minus the summary cap (sent as ``max_tokens``)
  minus the instructions; a transcript too long for it is shortened (the longest messages cut in
  the middle first, then the oldest messages left out: those stay unsummarized history).
- At most two requests: a failed one (any provider error but ``CANCELLED``, or an empty
  answer) is retried once after ``retry_delay_s`` seconds; a summary over its cap is re-requested
  once with the measured size and the cap in the instructions. A summary still over the cap is
  never accepted: the caller falls back to truncation.
- Verified, then repaired (issue 28 item 2): every artifact of the summarized messages
  (``engine.shifting.artifacts``: code, traces, errors, log lines, paths, backticked spans,
  identifiers, settings, URLs, ids, quantities) is checked in the answer; the ones the model
  dropped are re-attached verbatim under a "Kept verbatim" line, up to the cap. When they do not
  all fit, the model's prose is cut at sentence ends first (never a sentence holding an
  artifact), then the lowest-priority items go (code blocks first, then traces, which leave
  their paths and last line; errors last: :data:`PRIORITY`). Whatever is then not in the
  summary is counted (``SummaryOutcome.dropped``), never silently lost; the caller writes it
  to the audit and a diagnostic.
- When the first acceptable summary still loses artifacts after repair, it is asked for once
  more, and the retry's instructions name what the first one dropped; the better of the two
  (fewer artifacts lost) is kept.
- Provider error text never reaches the summary or the chat: a failure is an error *code*.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ProviderError
from ..providers import ChatCompletionsClient, reply_limit_fields
from ..schema.messages import ChatMessage
from ..shifting.artifacts import Artifact, find_artifacts, missing_artifacts
from .state import CompactionSummary

#: Appears in the summarizer's instructions (the test server recognises summary requests by it).
SUMMARY_MARKER = "[loomscope:compaction]"
KEPT_HEADER = "Kept verbatim from the summarized messages:"
#: A transcript line is never cut below this many characters.
MIN_LINE_CHARS = 200
#: Which re-attached artifacts stay longest when the cap is tight (lower stays longer).
PRIORITY = {"error": 0, "log": 1, "path": 2, "setting": 3, "identifier": 4, "id": 5, "url": 6, "quantity": 7,
            "span": 8, "trace": 9, "code": 10}
#: Artifacts named in a retry's instructions at most (the rest counted).
RETRY_NAMED = 12

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
    artifacts: int = 0
    dropped: list[Artifact] = field(default_factory=list)

    def artifact_report(self) -> dict[str, Any]:
        """JSON-able counts for the audit: artifacts found, re-attached, lost (and the lost ones' kinds)."""
        kinds: dict[str, int] = {}
        for a in self.dropped:
            kinds[a.kind] = kinds.get(a.kind, 0) + 1
        return {"found": self.artifacts, "reattached": len(self.reappended), "dropped": len(self.dropped),
                "dropped_kinds": kinds}


def transcript_line(index: int, message: ChatMessage) -> str:
    """``[#index role] text`` with tool calls as ``→ name(arguments)``."""
    who = message.name or message.role
    parts = [message.text()]
    for call in message.tool_calls or []:
        parts.append(f"→ {call.function.name}({call.function.arguments})")
    body = "\n".join(p for p in parts if p)
    return f"[#{index} {who}] {body}"


def instructions(cap: int, *, measured: int | None = None, dropped: list[str] | None = None) -> str:
    """The summarizer's system prompt.

    ``measured``: the size of a rejected, too long summary; ``dropped``: artifacts the previous
    summary left out (named, so the retry copies them).
    """
    text = (f"{SUMMARY_MARKER} You compress the earlier part of a conversation so that it can go on "
            "without it. Write a concise summary of the messages below: who wants what, decisions, "
            "facts, names, numbers and ids, what was done and what is still open. Copy every code "
            "block, file path, error message, stack trace, identifier, setting, URL and id exactly as written. "
            f"Answer with the summary only, at most {cap} tokens.")
    if measured is not None:
        text += (f" Your previous summary was {measured} tokens, over the limit of {cap}: "
                 "write a shorter one.")
    if dropped:
        shown = dropped[:RETRY_NAMED]
        more = f" (and {len(dropped) - len(shown)} more)" if len(dropped) > len(shown) else ""
        text += (" Your previous summary dropped these; copy each exactly as written: "
                 + "; ".join(_one_line(d) for d in shown) + more + ".")
    return text


def _one_line(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


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


_BOUNDARY = re.compile(r"(?<=[.!?…])[ \t]+|\n+")


def sentence_spans(prose: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence of ``prose``, in order; code blocks and traces stay whole.

    Spans are exact slices of ``prose`` (nothing squashed or shortened), so cutting some keeps
    the rest as the model wrote it.
    """
    atoms = sorted((a.start, a.start + len(a.text)) for a in find_artifacts(prose) if a.kind in ("code", "trace"))
    spans: list[tuple[int, int]] = []
    pos = 0
    for a, b in [*atoms, (len(prose), len(prose))]:
        if a < pos:
            continue
        start = pos
        for m in _BOUNDARY.finditer(prose, pos, a):
            if prose[start:m.start()].strip():
                spans.append((start, m.start()))
            start = m.end()
        if prose[start:a].strip():
            spans.append((start, a))
        if a < b:
            spans.append((a, b))
        pos = b
    return spans


def _join_spans(prose: str, spans: list[tuple[int, int]], kept: list[int]) -> str:
    """The kept sentences with the text between neighbours as written (a newline or a space across a cut)."""
    out: list[str] = []
    for n, k in enumerate(kept):
        if n:
            prev = kept[n - 1]
            gap = prose[spans[prev][1]:spans[k][0]]
            out.append(gap if prev == k - 1 else ("\n" if "\n" in gap else " "))
        out.append(prose[spans[k][0]:spans[k][1]])
    return "".join(out).strip()


@dataclass
class Repaired:
    """A summary after verification and repair: its text, what was re-attached, cut and lost."""

    text: str
    reattached: list[str]
    prose_cut: bool
    dropped: list[Artifact]


def repair(prose: str, artifacts: list[Artifact], cap: int, count: Callable[[str], int]) -> Repaired:
    """``prose`` checked against ``artifacts`` and completed within ``cap`` tokens (see the module docstring).

    Every artifact not in the result is in ``dropped``; ``cap`` holds unless the prose alone
    (one sentence) is over it.
    """
    prose = prose.strip()
    missing = missing_artifacts(artifacts, prose)
    items = sorted(_unique(missing), key=lambda a: (PRIORITY.get(a.kind, 99), a.start))
    spans = sentence_spans(prose)
    kept = list(range(len(spans)))
    cut = False

    def render(items_: list[Artifact]) -> str:
        body = _join_spans(prose, spans, kept) if cut else prose
        return body if not items_ else f"{body}\n\n{KEPT_HEADER}\n" + "\n".join(a.text for a in items_)

    while count(render(items)) > cap:
        k = _cuttable_sentence([prose[spans[i][0]:spans[i][1]] for i in kept], artifacts)
        if k is not None:
            kept.pop(k)
            cut = True
            continue
        if not items:
            break
        gone = items.pop()  # the lowest priority goes; a trace or code block leaves its parts
        if gone.kind in ("trace", "code"):
            flat = render(items)
            parts = [p for p in find_artifacts(gone.text, nested=True)
                     if p.kind in ("error", "log", "path") and _absent(p.core, flat)
                     and p.text not in {i.text for i in items}]
            items = sorted([*items, *parts], key=lambda a: (PRIORITY.get(a.kind, 99), a.start))
    text = render(items)
    dropped = missing_artifacts(artifacts, text)
    return Repaired(text, [a.text for a in items], cut, dropped)


def _absent(core: str, text: str) -> bool:
    """``True`` when ``core`` is *not* in ``text`` (whitespace runs compared as one space)."""
    return " ".join(core.split()) not in " ".join(text.split())


def _unique(arts: list[Artifact]) -> list[Artifact]:
    seen: set[str] = set()
    out = []
    for a in arts:
        if a.text not in seen:
            seen.add(a.text)
            out.append(a)
    return out


def _cuttable_sentence(sentences: list[str], artifacts: list[Artifact]) -> int | None:
    """The last sentence (never the only one) that holds no artifact, or ``None``."""
    if len(sentences) <= 1:
        return None
    for k in range(len(sentences) - 1, -1, -1):
        flat = " ".join(sentences[k].split())
        if not any(" ".join(a.core.split()) in flat for a in artifacts):
            return k
    return None


def compose(prose: str, missing: list[Artifact], cap: int, count: Callable[[str], int]) -> tuple[str, list[str], bool]:
    """The summary text: ``prose`` plus the ``missing`` artifacts, within ``cap`` tokens.

    Returns (text, re-appended artifact texts, whether the prose was cut); :func:`repair` also
    says what was lost.
    """
    fixed = repair(prose, missing, cap, count)
    return fixed.text, fixed.reattached, fixed.prose_cut


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
    outcome.artifacts = len(artifacts)
    measured: int | None = None  # tokens of the last over-cap answer (the retry asks for a shorter one)
    dropped: list[str] | None = None  # what the last answer dropped (the retry names it)
    best: tuple[str, Repaired] | None = None
    for attempt in range(2):
        if attempt and measured is None and best is None and retry_delay_s > 0:  # a failure: wait first
            waiter = cancel or threading.Event()
            if waiter.wait(retry_delay_s):
                raise ProviderError("CANCELLED", "the generation was cancelled during compaction")
        request = [{"role": "system", "content": instructions(cap, measured=measured, dropped=dropped)},
                   {"role": "user", "content": user}]
        text, measured, answer = _attempt(summarizer, request, cap, count, outcome)
        if answer is not None and text is None:  # over the cap: name everything it left out
            dropped = _by_priority(missing_artifacts(artifacts, answer)) or None
        if text is None:
            continue
        fixed = repair(text, artifacts, cap, count)
        dropped = _by_priority(fixed.dropped) or None  # what repair could not put back
        if best is None or len(fixed.dropped) < len(best[1].dropped):
            best = (text, fixed)
        if not best[1].dropped:
            break
    if best is not None:
        _, fixed = best
        outcome.text, outcome.reappended, outcome.prose_cut = fixed.text, fixed.reattached, fixed.prose_cut
        outcome.dropped = fixed.dropped
        outcome.error_code = None
    return outcome


def _by_priority(arts: list[Artifact]) -> list[str]:
    return [a.text for a in sorted(arts, key=lambda a: (PRIORITY.get(a.kind, 99), a.start))]


def _artifacts_of(messages: dict[int, ChatMessage], covered: list[int],
                  previous: CompactionSummary | None) -> list[Artifact]:
    """Artifacts (every kind of ``engine.shifting.artifacts``) of the covered messages and the summary being extended."""
    artifacts: list[Artifact] = []
    for i in covered:
        artifacts.extend(find_artifacts(transcript_line(i, messages[i]).split("] ", 1)[-1]))
    if previous is not None:
        artifacts.extend(find_artifacts(previous.text))
    return _unique(artifacts)  # the same text in two messages is one artifact to keep


def _attempt(summarizer: Summarizer, request: list[dict[str, Any]], cap: int, count: Callable[[str], int],
             outcome: SummaryOutcome) -> tuple[str | None, int | None, str | None]:
    """One summary request, recorded in ``outcome.attempts``.

    Returns ``(text, None, text)`` for an answer within ``cap`` tokens, ``(None, tokens, text)``
    for one over it, ``(None, None, None)`` for a failed or empty answer. ``CANCELLED`` is raised
    again.
    """
    try:
        text = (summarizer(request) or "").strip()
    except ProviderError as exc:
        if exc.code == "CANCELLED":
            raise
        outcome.attempts.append(Attempt("error", error_code=exc.code))
        outcome.error_code = exc.code
        return None, None, None
    if not text:
        outcome.attempts.append(Attempt("empty"))
        outcome.error_code = "SUMMARY_EMPTY"
        return None, None, None
    size = count(text)
    if size > cap:
        outcome.attempts.append(Attempt("over_cap", tokens=size))
        outcome.error_code = "SUMMARY_OVER_CAP"
        return None, size, text
    outcome.attempts.append(Attempt("ok", tokens=size))
    return text, None, text


def provider_summarizer(base_url: str, api_key: str | None, model: str, *, cap: int, timeout_s: float = 60.0,
                        extra_body: dict[str, Any] | None = None,
                        cancel: threading.Event | None = None) -> Summarizer:
    """A :data:`Summarizer` that asks an OpenAI-compatible endpoint (one JSON answer, no stream).

    The reply is limited to ``cap`` tokens as ``max_tokens``, or ``max_completion_tokens`` for the models that reject
    ``max_tokens`` (``engine.providers.params``).
    """
    client = ChatCompletionsClient(base_url, api_key, timeout_s=timeout_s)
    limit = reply_limit_fields(model, cap) or {"max_tokens": cap}

    def call(messages: list[dict[str, Any]]) -> str:
        reply = client.complete(model, messages, stream=False, extra_body=extra_body, reply_limit=limit,
                                cancel=cancel)
        return reply.content or ""

    return call
