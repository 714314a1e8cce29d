"""The typed interface between the pipeline's steps and SillyTavern's assembly template (issue 29).

A chat from a SillyTavern folder (``PreviewRequest.sillytavern`` set) runs the pipeline's steps
like any chat; its assembly step (step 3) runs SillyTavern 1.12.6's own ``Generate`` as a
template (:func:`engine.assembly.st_result.assemble_sillytavern`):

* steps 1–2 (:func:`engine.resolve.sillytavern_limits`) resolve the model, tokenizer, context
  limit and reply reserve by SillyTavern's rules and hand them in as :class:`SillyTavernInputs`;
* the template (:mod:`engine.assembly.sillytavern` for Chat Completion,
  :mod:`engine.assembly.textcompletion` for Text Completion) returns an :class:`AssembledPrompt`:
  every block in prompt order with the fate SillyTavern's own history fill and World Info budget
  gave it, the provider messages or the prompt string, and the budget overflow if any;
* the pipeline's steps 4–10 (:func:`engine.pipeline.prepare`) take the template's figures and
  fates as final (SillyTavern's fill stands in for a context strategy), with SillyTavern's own
  count, budget error and row order (:mod:`engine.assembly.st_result`), and build the preview
  every run builds (:func:`engine.report.report_preview`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ..schema.lorebook import Lorebook
from ..schema.request import PreviewRequest
from ..schema.sillytavern import SillyTavernSetup
from ..schema.trace import TraceRecord
from ..tokenizers import TokenizerProfile
from .st_group import Speaker


class TextCounter(Protocol):
    """What the Text Completion path counts with (``engine.tokenizers.sillytavern_text.TextTokenizer``)."""

    @property
    def key(self) -> str:
        """Short name (``llama3``, ``mistral``, ...)."""

    @property
    def st_id(self) -> int:
        """The ``tokenizers.js`` id SillyTavern uses."""

    @property
    def label(self) -> str:
        """Words for the header (``Llama 3 · exact``)."""

    @property
    def approximate(self) -> bool:
        """Counts are estimates."""

    @property
    def version(self) -> str:
        """Bumped when the counting rule changes."""

    def count(self, text: str) -> int:
        """SillyTavern's count of one piece (``getTokenCountAsync(text)``, no padding)."""

    def prompt_tokens(self, prompt: str) -> int:
        """Tokens of the whole prompt as the backend holds it (BOS etc.)."""

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Token boundaries (character offsets)."""


@dataclass(frozen=True)
class SillyTavernInputs:
    """What the pipeline's steps 1–2 hand SillyTavern's template (step 3).

    Attributes
    ----------
    request:
        The request assembled: for a group chat, its next speaker's
        (:func:`engine.assembly.st_group.speaker_request`).
    setup:
        ``request.sillytavern`` (never ``None`` here).
    profile:
        The tokenizer profile the counts are in (Chat Completion: the model's, SillyTavern's
        ``countTokensOpenAI``; Text Completion: :attr:`text_tokenizer`'s profile face).
    text_tokenizer:
        Text Completion only: SillyTavern's ``getTokenCountAsync`` tokenizer for the setup.
    context_limit, reply_reserve, budget:
        Tokens: ``openai_max_context`` / ``max_context``, ``openai_max_tokens`` / ``amount_gen``,
        and the prompt budget (``context_limit − reply_reserve``; NovelAI: ``context_limit``).
    user_name, char_name:
        SillyTavern's ``name1`` and ``name2`` (:func:`engine.resolve.speaker_names`).
    books:
        ``request.lorebooks`` (a trace's ``book_index`` before :attr:`book_order` remaps it).
    book_order:
        Indexes into :attr:`books` in ``getSortedEntries`` order (chat lore, then character and
        global lore as ``world_info_character_strategy`` ranks them).
    book_groups:
        The same indexes in ``getSortedEntries``'s groups (:func:`engine.resolve.sillytavern_book_groups`).
    speaker:
        A group chat's next speaker (``None`` for a one-to-one chat).
    warnings, diagnostics:
        Steps 1–2's, in order, before the template's own.
    """

    request: PreviewRequest
    setup: SillyTavernSetup
    profile: TokenizerProfile
    context_limit: int
    reply_reserve: int
    budget: int
    user_name: str
    char_name: str
    books: tuple[Lorebook, ...] = ()
    book_order: tuple[int, ...] = ()
    book_groups: tuple[tuple[int, ...], ...] = ()
    text_tokenizer: TextCounter | None = None
    speaker: Speaker | None = None
    warnings: tuple[str, ...] = ()
    diagnostics: tuple[str, ...] = ()


@dataclass(slots=True)
class AssembledBlock:
    """One block of a SillyTavern prompt with the fate SillyTavern gave it (a future preview row).

    ``tokens`` are in the profile's units (Chat Completion: the message's ``countTokensOpenAI``;
    Text Completion: ``getTokenCountAsync`` of the piece). ``status`` is ``"kept"`` for a sent
    block and ``"excluded"`` for one SillyTavern's history fill, World Info budget or example
    fill left out (``reason`` says which). ``span``: a Text Completion block's ``[start, end)``
    in the prompt string.
    """

    kind: str
    role: str
    source: str
    text: str
    tokens: int
    reason: str
    protected: bool
    status: Literal["kept", "excluded"] = "excluded"
    name: str | None = None
    message_index: int | None = None
    trace: dict[str, Any] | None = None
    manual_excluded: bool = False
    span: tuple[int, int] | None = None


@dataclass(frozen=True)
class BudgetOverflow:
    """SillyTavern's ``TokenBudgetExceededError``: a required prompt that does not fit.

    ``prompt`` is its identifier, ``tokens`` its count and ``left`` what was left of the budget
    (``ChatCompletion.checkTokenBudget``), in the profile's units.
    """

    prompt: str
    tokens: int
    left: int


@dataclass
class AssembledPrompt:
    """What SillyTavern's template (step 3) returns to the pipeline's steps 4–10.

    Attributes
    ----------
    api:
        ``"chat_completion"`` or ``"text_completion"``.
    sent:
        The sent blocks in prompt order (``status`` ``"kept"``).
    left_out:
        The blocks SillyTavern left out (``status`` ``"excluded"``), in the template's order.
    messages:
        Chat Completion: the provider messages (after ``squashSystemMessages``); ``[]`` otherwise.
    prompt, stop:
        Text Completion: the prompt string (``getCombinedPrompt``) and ``getStoppingStrings``
        (``None`` and ``[]`` for Chat Completion).
    overflow:
        The required prompt that did not fit (Chat Completion), else ``None``.
    warnings, diagnostics:
        The inputs' followed by the template's own.
    timed_effects:
        ``chat_metadata.timedWorldInfo`` after this activation (``None`` without lorebooks).
    lorebook_trace:
        The World Info trace, ``book_index`` into the original ``request.lorebooks``.
    strategy_info:
        The header's facts (Text Completion: api, main_api, instruct and context presets, tokenizer).
    """

    api: Literal["chat_completion", "text_completion"]
    sent: list[AssembledBlock]
    left_out: list[AssembledBlock]
    messages: list[dict[str, Any]] = field(default_factory=list)
    prompt: str | None = None
    stop: list[str] = field(default_factory=list)
    overflow: BudgetOverflow | None = None
    warnings: list[str] = field(default_factory=list)
    diagnostics: list[str] = field(default_factory=list)
    timed_effects: dict[str, Any] | None = None
    lorebook_trace: list[TraceRecord] = field(default_factory=list)
    strategy_info: dict[str, Any] = field(default_factory=dict)


__all__ = ["AssembledBlock", "AssembledPrompt", "BudgetOverflow", "SillyTavernInputs", "TextCounter"]
