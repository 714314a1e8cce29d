"""The compaction state stored with a chat (``chats.data["loomscope_compaction"]``).

One active summary at most: it covers a set of message indices (a range of the oldest
history, pinned messages inside it excepted) and remembers a fingerprint of each covered
message, so an edited or deleted message makes the summary stale (not used, with a warning)
instead of silently standing for text that changed. ``failures`` counts failed compactions in
a row (``MAX_FAILURES`` stops auto-compaction); ``stall`` records a compaction that did not
bring the prompt below the trigger, so the next turn does not fire again without progress;
``removed`` keeps the last removed summaries so a removal can be undone.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..schema.messages import Chat, ChatMessage
from .options import CHAT_KEY, MAX_FAILURES

#: Removed summaries kept for undo.
REMOVED_KEPT = 5


def message_fingerprint(message: ChatMessage) -> str:
    """A short hash of what a message says (role, name, content, tool calls, result id)."""
    doc = message.to_provider()
    raw = json.dumps(doc, sort_keys=True, ensure_ascii=False, default=str).encode()
    return hashlib.sha256(raw).hexdigest()[:16]


class CompactionSummary(BaseModel):
    """An LLM summary standing for old messages.

    Attributes
    ----------
    id:
        Unique id (hex).
    text:
        The summary text as sent (model text plus re-appended verbatim artifacts).
    covered:
        Message indices the summary stands for (chat order).
    fingerprints:
        ``str(index) → message_fingerprint`` at the time of summarizing.
    tokens:
        Tokens of ``text`` under the profile it was made with (``profile``).
    replaced_tokens:
        Tokens of the covered messages (and of the summary it extended) that it replaced.
    model:
        The model that wrote it.
    attempts:
        Summary requests made for it (1 or 2).
    reappended:
        Artifacts (paths, error lines, code, traces) the model dropped and Loomscope re-appended.
    created_at:
        UTC time it was made.
    """

    model_config = ConfigDict(extra="ignore")

    id: str
    text: str
    covered: list[int] = Field(default_factory=list)
    fingerprints: dict[str, str] = Field(default_factory=dict)
    tokens: int = 0
    replaced_tokens: int = 0
    profile: str = ""
    model: str = ""
    attempts: int = 1
    reappended: list[str] = Field(default_factory=list)
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    @property
    def first(self) -> int:
        """The oldest covered message index (-1 when none)."""
        return min(self.covered) if self.covered else -1

    @property
    def last(self) -> int:
        """The newest covered message index (-1 when none)."""
        return max(self.covered) if self.covered else -1


class CompactionState(BaseModel):
    """Everything compaction keeps with a chat (see the module docstring)."""

    model_config = ConfigDict(extra="ignore")

    summary: CompactionSummary | None = None
    failures: int = Field(0, ge=0)
    stall: dict[str, Any] | None = None
    removed: list[CompactionSummary] = Field(default_factory=list)
    last: dict[str, Any] | None = None

    @property
    def disabled(self) -> bool:
        """``True`` after :data:`MAX_FAILURES` failed compactions in a row."""
        return self.failures >= MAX_FAILURES

    @classmethod
    def from_raw(cls, raw: Any) -> CompactionState:
        """Parse a stored dict; anything unreadable gives an empty state (never raises)."""
        if not isinstance(raw, dict):
            return cls()
        try:
            return cls.model_validate(raw)
        except Exception:
            return cls()

    @classmethod
    def of_chat(cls, chat: Chat) -> CompactionState:
        """The state stored in ``chat`` (an empty one when there is none)."""
        return cls.from_raw((chat.model_extra or {}).get(CHAT_KEY))

    def dump(self) -> dict[str, Any]:
        """JSON-able dict for ``chats.data``."""
        return self.model_dump(mode="json")

    def with_summary_removed(self) -> CompactionState:
        """A copy without the active summary (kept in ``removed`` for undo); failures and stall reset."""
        if self.summary is None:
            return self
        removed = [self.summary, *self.removed][:REMOVED_KEPT]
        return self.model_copy(update={"summary": None, "removed": removed, "stall": None, "failures": 0})


def covers_label(indices: list[int]) -> str:
    """``#0–#4, #6`` for message ``indices``: runs of consecutive indices joined, in order (exactly the set)."""
    out: list[str] = []
    run: list[int] = []
    for i in sorted(set(indices)):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(f"#{run[0]}" if len(run) == 1 else f"#{run[0]}–#{run[-1]}")
        run = [i]
    if run:
        out.append(f"#{run[0]}" if len(run) == 1 else f"#{run[0]}–#{run[-1]}")
    return ", ".join(out)


def make_summary(text: str, covered: dict[int, ChatMessage], *, previous: CompactionSummary | None = None,
                 tokens: int = 0, replaced_tokens: int = 0, profile: str = "", model: str = "",
                 attempts: int = 1, reappended: list[str] | None = None) -> CompactionSummary:
    """A new summary standing for the messages ``covered`` (index → message).

    When ``previous`` is given, the new summary also stands for everything it stood for (its fingerprints carried over).
    """
    fingerprints = dict(previous.fingerprints) if previous is not None else {}
    fingerprints.update({str(i): message_fingerprint(m) for i, m in covered.items()})
    indices = sorted({*(previous.covered if previous is not None else []), *covered})
    return CompactionSummary(id=uuid.uuid4().hex, text=text, covered=indices, fingerprints=fingerprints,
                             tokens=tokens, replaced_tokens=replaced_tokens, profile=profile, model=model,
                             attempts=attempts, reappended=list(reappended or []))
