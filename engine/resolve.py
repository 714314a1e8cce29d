"""The rules a preview resolves from a request, for callers that must agree with it.

The pipeline (:mod:`engine.pipeline`) and the SillyTavern assembly
(:mod:`engine.assembly.sillytavern`) use these functions for their own work, and the GUI asks
them instead of copying the rules: which tokenizer profile and context limit the settings
select, the ``{{user}}``/``{{char}}`` names, which lorebooks a chat uses (and how the trace's
``book_index`` maps onto them), and the lorebook budget.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from .errors import SettingsError
from .lorebook.budget import compute_budget
from .schema.lorebook import Lorebook
from .schema.request import PreviewRequest
from .schema.settings import ContextSettings
from .schema.sillytavern import TextCompletionSetup
from .tokenizers import TokenizerProfile, TokenizerRegistry, default_tokenizer_registry, lookup_model
from .tokenizers.models import known_models
from .tokenizers.sillytavern_text import TextTokenizer, sillytavern_text_tokenizer

if TYPE_CHECKING:
    from .shifting.registry import ContextStrategyRegistry


@lru_cache(maxsize=1)
def _builtin_tokenizers() -> TokenizerRegistry:
    # The built-in profiles, for callers that pass no registry (read-only use).
    return default_tokenizer_registry()


@dataclass(frozen=True)
class ResolvedModel:
    """The tokenizer profile and context limit a preview uses for some settings.

    Attributes
    ----------
    profile:
        Name of the tokenizer profile: ``settings.tokenizer``, else the model table's profile
        for ``settings.model`` (``generic-approx`` for unknown models).
    context_limit:
        Context window in tokens: ``settings.context_limit``, else the model's known limit.
    known:
        Whether ``settings.model`` is in the model table.
    reply_reserve:
        ``settings.resolve_reply_reserve(context_limit)`` in tokens (not checked against the
        limit here; the pipeline raises ``INVALID_SETTINGS`` when it is not below it).
    budget:
        ``context_limit − reply_reserve`` in tokens: the prompt budget, the limit the lorebook
        budget percentage applies to (:func:`lorebook_budget`).
    tokenizer:
        The resolved :class:`~engine.tokenizers.TokenizerProfile` object itself (counts with it).
    warnings:
        The warnings the preview emits for this resolution, in order (unknown model, a limit above
        the model's, approximate counts).
    """

    profile: str
    context_limit: int
    known: bool
    reply_reserve: int
    budget: int
    tokenizer: TokenizerProfile = field(compare=False, repr=False)
    warnings: tuple[str, ...] = ()


def model_profile_and_limit(settings: ContextSettings, tokenizers: TokenizerRegistry | None = None, *,
                            sillytavern: bool = False) -> ResolvedModel:
    """Resolve ``settings`` to a tokenizer profile and context limit (pipeline step 1).

    Parameters
    ----------
    settings:
        The chat's context settings (``model``, ``tokenizer``, ``context_limit``, ``reply_reserve``).
    tokenizers:
        The registry to resolve the profile in (plugin profiles included); the built-in profiles
        when ``None``.
    sillytavern:
        Word the warnings as the SillyTavern assembly does (a request with ``sillytavern`` set).

    Returns
    -------
    ResolvedModel

    Raises
    ------
    SettingsError
        ``UNKNOWN_TOKENIZER`` when the selected profile is not registered.
    """
    reg = tokenizers if tokenizers is not None else _builtin_tokenizers()
    info = lookup_model(settings.model)
    profile = reg.get(settings.tokenizer or info.profile)
    limit = settings.context_limit or info.context_limit
    warnings = (_sillytavern_warnings(settings, info.known, info.profile, profile) if sillytavern
                else _pipeline_warnings(settings, info.known, info.context_limit, profile, limit))
    reserve = settings.resolve_reply_reserve(limit)
    return ResolvedModel(profile=profile.name, context_limit=limit, known=info.known, reply_reserve=reserve,
                         budget=limit - reserve, tokenizer=profile, warnings=tuple(warnings))


@lru_cache(maxsize=256)
def did_you_mean(model: str) -> str:
    """``" (did you mean 'gpt-4o'?)"`` for a model name close to a known one (``difflib``), else ``""``.

    Parameters
    ----------
    model:
        The model name the settings give (``"gpt4o"``, ``"claude-3-5-sonet"``).
    """
    names = known_models()
    close = difflib.get_close_matches(model.strip().lower(), [n.lower() for n in names], n=1, cutoff=0.75)
    if not close:
        return ""
    match = next(n for n in names if n.lower() == close[0])
    return f" (did you mean {match!r}?)" if match != model else ""


def _pipeline_warnings(settings: ContextSettings, known: bool, known_limit: int, profile: TokenizerProfile,
                       limit: int) -> list[str]:
    warnings: list[str] = []
    if not known:
        # Name what is actually used, after the user's overrides.
        tok = (f"the tokenizer profile {profile.name!r} you set" if settings.tokenizer
               else f"the {'approximate ' if profile.approximate else ''}profile {profile.name!r}")
        lim = (f"the {limit}-token context limit you set" if settings.context_limit
               else f"a default {limit}-token context limit")
        missing = [w for w, given in (("the context limit", settings.context_limit),
                                      ("the tokenizer", settings.tokenizer)) if not given]
        warnings.append(f"unknown model {settings.model!r}{did_you_mean(settings.model)}: counting with {tok} and "
                        f"{lim}" + (f"; set {' and '.join(missing)} for exact figures" if missing else ""))
    if settings.context_limit and known and settings.context_limit > known_limit:
        warnings.append(f"context limit {settings.context_limit} is above {settings.model}'s known "
                        f"limit of {known_limit} tokens")
    if profile.approximate:
        warnings.append(f"token counts are approximate ({profile.name}: {profile.description})")
    return warnings


def _sillytavern_warnings(settings: ContextSettings, known: bool, table_profile: str,
                          profile: TokenizerProfile) -> list[str]:
    warnings: list[str] = []
    if not known:
        warnings.append(f"unknown model {settings.model!r}{did_you_mean(settings.model)}: counting with the "
                        f"approximate profile "
                        f"{table_profile!r}; set the tokenizer for exact figures")
    if profile.approximate:
        warnings.append(f"token counts are approximate ({profile.name}: {profile.description})")
    return warnings


@dataclass(frozen=True)
class SpeakerNames:
    """The names the preview substitutes for ``{{user}}`` and ``{{char}}``."""

    user: str
    char: str


def speaker_names(request: PreviewRequest) -> SpeakerNames:
    """The ``{{user}}``/``{{char}}`` names the preview of ``request`` substitutes.

    The stage pipeline: the persona's name, else ``chat.user_name``, else ``"User"``; the card's
    nickname or name, else ``chat.character_name``, else ``""``. A chat from a SillyTavern folder
    (``request.sillytavern``): SillyTavern's ``name1`` (``sillytavern.user_name``, else
    ``"User"``) and ``name2`` (the card's name, never its nickname, else
    ``chat.character_name``, else ``""``).
    """
    card = request.character
    if request.sillytavern is not None:
        user = request.sillytavern.user_name or "User"
        return SpeakerNames(user, (card.name if card is not None else "") or request.chat.character_name or "")
    persona = request.persona
    user = (persona.name if persona is not None and persona.name else None) or request.chat.user_name or "User"
    char = ((card.nickname or card.name) if card is not None and (card.nickname or card.name)
            else (request.chat.character_name or ""))
    return SpeakerNames(user, char)


@dataclass(frozen=True)
class LorebookPlan:
    """Which lorebooks a chat's preview uses, and in which order it activates them.

    Attributes
    ----------
    books:
        Every book the preview considers; a trace record's ``book_index`` is an index into it.
        The stage pipeline: ``request.lorebooks``, then the card's embedded book (named
        ``"<card> (card)"`` when unnamed) unless a listed book has its name. A SillyTavern chat:
        ``request.lorebooks`` only (SillyTavern uses a card's book only when it is linked as a world).
    order:
        Indexes into ``books`` in activation order, duplicates omitted.
    duplicate_of:
        Per book, the index of the book it repeats (its own index when distinct). A duplicate's
        entries are traced as ``LOREBOOK_DUPLICATE_BOOK``, not activated.
    scopes:
        Per book, its World Info scope (``"chat"``, ``"character"``, ``"global"``; ``"character"``
        for the card's embedded book), or ``None``: the book's own ``scope`` field, else global
        (:func:`engine.lorebook.activate` ``book_scopes``).
    embedded:
        Index of the card's embedded book in ``books``, or ``None`` (not in ``request.lorebooks``).
    """

    books: tuple[Lorebook, ...]
    order: tuple[int, ...]
    duplicate_of: tuple[int, ...]
    scopes: tuple[str | None, ...]
    embedded: int | None = None

    @property
    def activated(self) -> list[Lorebook]:
        """The distinct books in activation order (``books[i] for i in order``)."""
        return [self.books[i] for i in self.order]


def lorebook_plan(request: PreviewRequest) -> LorebookPlan:
    """The lorebooks the preview of ``request`` uses (see :class:`LorebookPlan`).

    A world imported from a card is the card's embedded book again (SillyTavern creates the world
    file from ``character_book``), so in the stage pipeline a book equal to one already listed
    (same name, and the same keys and content in its entries) is not activated twice. A
    SillyTavern chat activates its books in ``getSortedEntries`` order: chat lore, then character
    and global lore as ``world_info.character_strategy`` ranks them.
    """
    if request.sillytavern is not None:
        books = tuple(request.lorebooks)
        given = list(request.sillytavern.lorebook_scopes)[:len(books)]
        st_scopes: list[str | None] = [*given, *["global"] * (len(books) - len(given))]
        groups = sillytavern_book_groups([s or "global" for s in st_scopes],
                                         request.settings.world_info.character_strategy)
        return LorebookPlan(books, tuple(i for g in groups for i in g), tuple(range(len(books))),
                            tuple(st_scopes))
    candidates = list(request.lorebooks)
    embedded_at: int | None = None
    card = request.character
    if card is not None and card.character_book is not None and card.character_book.entries:
        embedded = card.character_book
        if not embedded.name:
            embedded = embedded.model_copy(update={"name": f"{card.name or 'character'} (card)"})
        if all(b.name != embedded.name for b in candidates):
            embedded_at = len(candidates)
            candidates.append(embedded)
    first_of: dict[tuple[str, str], int] = {}
    duplicate_of: list[int] = []
    for i, book in enumerate(candidates):
        key = (book.name, json.dumps(sorted([sorted(e.keys), e.content] for e in book.entries)))
        duplicate_of.append(first_of.setdefault(key, i))
    # The card's embedded book is character lore (SillyTavern getCharacterLore); listed books
    # say their own scope (``None``: the book's ``scope`` field, else global lore).
    scopes: list[str | None] = ["character" if i == embedded_at else None for i in range(len(candidates))]
    return LorebookPlan(tuple(candidates), tuple(i for i, d in enumerate(duplicate_of) if d == i),
                        tuple(duplicate_of), tuple(scopes), embedded_at)


def chat_lorebooks(request: PreviewRequest) -> list[Lorebook]:
    """The lorebooks of ``request``'s chat, indexed as the trace's ``book_index`` (``lorebook_plan(request).books``)."""
    return list(lorebook_plan(request).books)


def sillytavern_book_groups(scopes: Sequence[str], strategy: str) -> list[list[int]]:
    """Book indexes in SillyTavern ``getSortedEntries``'s groups (world-info.js 3593–3640).

    Chat lore, then character and global lore as ``world_info_character_strategy`` ranks them
    (``global_first``, ``evenly``, else character first).
    """
    chat_b = [i for i, s in enumerate(scopes) if s == "chat"]
    char_b = [i for i, s in enumerate(scopes) if s == "character"]
    glob_b = [i for i, s in enumerate(scopes) if s not in ("chat", "character")]
    if strategy == "global_first":
        return [chat_b, glob_b, char_b]
    if strategy == "evenly":
        return [chat_b, glob_b + char_b]
    return [chat_b, char_b, glob_b]


def honours_exclusions(settings: ContextSettings, strategies: ContextStrategyRegistry, *,
                       sillytavern: bool = False) -> bool:
    """Whether the chat's strategy never sends a message the writer excluded by hand.

    ``sillytavern=True`` (a chat from a SillyTavern folder, ``PreviewRequest.sillytavern`` set):
    always, whatever ``settings.strategy`` says, since SillyTavern's own assembly
    (:mod:`engine.assembly.sillytavern`, ``coreChat``) leaves excluded messages out like hidden ones.
    Otherwise true when the registry entry of ``settings.strategy`` declares it (``StrategyInfo.honors_manual``:
    manual, summarize, vector-recall, compact; not truncate) and ``settings.strategy_options`` does
    not switch it off (``"honor_manual": False``). The pipeline holds a strategy to this in its
    host check (:func:`engine.shifting.check_shift_result`); the GUI asks it before deciding
    whether a hand exclusion needs the ``manual`` strategy.

    Raises
    ------
    SettingsError
        ``UNKNOWN_STRATEGY`` when the registry lacks ``settings.strategy``.
    """
    if sillytavern:
        return True
    info = strategies.get(settings.strategy)
    return info.honors_manual and settings.strategy_options.get("honor_manual", True) is not False


def lorebook_budget(settings: ContextSettings, context_limit: int) -> int:
    """The lorebook token budget (:func:`engine.lorebook.compute_budget` of ``settings.world_info``).

    Parameters
    ----------
    settings:
        The chat's settings; ``world_info.budget_percent`` (0–100) and ``budget_cap`` (tokens,
        0 = none) apply.
    context_limit:
        The tokens the percentage applies to. The preview passes its prompt budget, context limit
        − reply reserve (:attr:`ResolvedModel.budget`).

    Returns
    -------
    int
        Tokens, at least 1.
    """
    return compute_budget(settings.world_info, context_limit)



@dataclass(frozen=True)
class SillyTavernLimits:
    """Steps 1–2 for a chat from a SillyTavern folder: what SillyTavern counts with and within.

    Attributes
    ----------
    profile:
        The tokenizer profile the counts are in (Chat Completion: the model's; Text Completion:
        :attr:`text_tokenizer`'s profile face, for generation and recounts).
    context_limit, reply_reserve, budget:
        Tokens. Chat Completion: ``openai_max_context``, ``openai_max_tokens`` and their
        difference. Text Completion: ``max_context``, ``amount_gen`` and their difference
        (NovelAI: ``max_context``, ``getMaxContextSize``).
    warnings:
        Chat Completion: an unknown model, approximate counts (worded for SillyTavern).
    text_tokenizer:
        Text Completion only: the tokenizer ``getTokenCountAsync`` uses for the setup.
    """

    profile: TokenizerProfile
    context_limit: int
    reply_reserve: int
    budget: int
    warnings: tuple[str, ...] = ()
    text_tokenizer: TextTokenizer | None = None


def sillytavern_limits(request: PreviewRequest, tokenizers: TokenizerRegistry | None = None) -> SillyTavernLimits:
    """Pipeline steps 1–2 for ``request`` (``request.sillytavern`` set): tokenizer, limit, reserve, budget.

    Chat Completion: :func:`model_profile_and_limit` (SillyTavern's warnings), the reply
    reserve from the settings, no safety margin (SillyTavern applies none; ``scripts/openai.js``
    ``prepareOpenAIMessages``: ``openai_max_context − openai_max_tokens``). Text Completion
    (``setup.text_completion``): ``settings.context_limit`` / ``reply_reserve`` when set (the import
    sets them from the setup), else ``max_context`` / ``amount_gen``; NovelAI keeps the whole
    window (``public/script.js`` ``getMaxContextSize``); the tokenizer is
    :func:`text_completion_tokenizer`.

    Raises
    ------
    SettingsError
        ``INVALID_SETTINGS`` (reply reserve ≥ context limit, except NovelAI), ``UNKNOWN_TOKENIZER``.
    """
    settings, setup = request.settings, request.sillytavern
    tc = setup.text_completion if setup is not None else None
    if tc is None:
        resolved = model_profile_and_limit(settings, tokenizers, sillytavern=True)
        limit = resolved.context_limit
        reserve = settings.resolve_reply_reserve(limit)
        if reserve >= limit:
            raise SettingsError("INVALID_SETTINGS", f"reply reserve {reserve} must be below the context limit {limit}")
        return SillyTavernLimits(resolved.tokenizer, limit, reserve, limit - reserve, resolved.warnings)
    limit = settings.context_limit or tc.max_context
    reserve = settings.resolve_reply_reserve(limit) if settings.context_limit else tc.amount_gen
    if reserve >= limit and tc.main_api != "novel":
        raise SettingsError("INVALID_SETTINGS", f"reply length {reserve} must be below the context size {limit}")
    tok = text_completion_tokenizer(tc)
    return SillyTavernLimits(text_tokenizer_profile(tok), limit, reserve,
                             limit if tc.main_api == "novel" else limit - reserve, (), tok)


def text_completion_tokenizer(tc: TextCompletionSetup) -> TextTokenizer:
    """The tokenizer SillyTavern's Text Completion path counts ``tc``'s chat with.

    ``power_user.tokenizer`` resolved by ``main_api`` and the model name (``public/scripts/tokenizers.js``
    ``getTokenizerBestMatch``; :func:`engine.tokenizers.sillytavern_text.sillytavern_text_tokenizer`).
    A module-level name so that tests can count with a stand-in.

    Raises
    ------
    SettingsError
        ``UNKNOWN_TOKENIZER`` for a ``power_user.tokenizer`` SillyTavern 1.12.6 does not define.
    """
    return sillytavern_text_tokenizer(tc.tokenizer, tc.main_api, tc.model)


def text_tokenizer_profile(tok: TextTokenizer) -> TokenizerProfile:
    """``tok`` as a :class:`TokenizerProfile` (the same counts and cache; a module-level name for tests)."""
    return tok.profile


def sillytavern_setup_diagnostics(request: PreviewRequest, interceptor_names: Sequence[str]) -> list[str]:
    """What SillyTavern's setup leaves out of a Chat Completion chat's preview (step 1's notes).

    A card's embedded lorebook not linked as a world (``extensions.world``: SillyTavern reads a
    card's book only as a world file) and the interceptors installed (``interceptor_names``),
    which a SillyTavern chat does not run.
    """
    out: list[str] = []
    card = request.character
    if card is not None and card.character_book is not None and card.character_book.entries:
        linked = {b.name for b in request.lorebooks}
        world = card.extensions.get("world")
        if not (isinstance(world, str) and world in linked):
            out.append(
                f"the card's embedded lorebook {card.character_book.name or card.name!r} is not linked as a "
                "world (extensions.world); SillyTavern does not use it, so it is not activated")
    if interceptor_names:
        out.append(f"interceptors ({', '.join(interceptor_names)}) are not applied: this chat is assembled "
                   "exactly as SillyTavern sends it")
    return out

__all__ = [
    "LorebookPlan", "ResolvedModel", "SillyTavernLimits", "SpeakerNames", "chat_lorebooks", "honours_exclusions",
    "lorebook_budget", "lorebook_plan", "model_profile_and_limit", "sillytavern_book_groups", "sillytavern_limits",
    "sillytavern_setup_diagnostics", "speaker_names", "text_completion_tokenizer", "text_tokenizer_profile",
]
