"""Engine rules the Lorebook tab still copies (temporary: replaced by ``engine.resolve``)."""

from __future__ import annotations

import math
from typing import Any


def tokenizers(ctx: Any) -> Any:
    registry = getattr(getattr(ctx, "registries", None), "tokenizers", None)
    if registry is None:
        from engine.tokenizers import default_tokenizer_registry

        registry = default_tokenizer_registry()
    return registry


def profile_and_limit(request: Any, preview: Any) -> tuple[str, int]:
    """Tokenizer profile and the context size World Info budgets against (tokens).

    Mirrors ``engine.pipeline``: activation gets ``context_limit − reply_reserve``
    (``preview.budget``) as its context limit.
    """
    if preview is not None:
        return preview.tokenizer.profile, int(preview.budget)
    from engine.tokenizers import lookup_model

    settings = request.settings
    info = lookup_model(settings.model)
    limit = int(settings.context_limit or info.context_limit)
    try:
        reserve = settings.resolve_reply_reserve(limit)
    except Exception:
        reserve = 0
    return settings.tokenizer or info.profile, max(1, limit - reserve)


def lorebook_budget(settings: Any, context_limit: int) -> int:
    """The lorebook token budget for ``context_limit`` (tokens)."""
    wi = settings.get("world_info", settings) if isinstance(settings, dict) else getattr(settings, "world_info", settings)
    from engine.lorebook import compute_budget

    if not isinstance(wi, dict):
        return int(compute_budget(wi, context_limit))
    percent = float(wi.get("budget_percent", 25) or 0)
    cap = int(wi.get("budget_cap", 0) or 0)
    budget = max(1, math.floor(percent * max(0, context_limit) / 100 + 0.5))
    if cap > 0:
        budget = min(budget, cap)
    return budget


def books_for(request: Any) -> list[Any]:
    """The books World Info runs on: ``request.lorebooks`` plus the card's embedded book."""
    books = list(request.lorebooks)
    card = getattr(request, "character", None)
    embedded = getattr(card, "character_book", None) if card is not None else None
    if embedded is not None and embedded.entries:
        if not embedded.name:
            embedded = embedded.model_copy(update={"name": f"{card.name or 'character'} (card)"})
        if all(b.name != embedded.name for b in books):
            books.append(embedded)
    return books


def macro_names(request: Any) -> tuple[str, str]:
    card = request.character
    persona = request.persona
    user = (persona.name if persona is not None and persona.name else None) or request.chat.user_name or "User"
    char = ((card.nickname or card.name) if card is not None and (card.nickname or card.name)
            else (request.chat.character_name or ""))
    return user, char


def trace_records(records: Any) -> list[Any]:
    from engine.lorebook import TraceRecord

    return [r if isinstance(r, TraceRecord) else TraceRecord.model_validate(r) for r in records or []]
