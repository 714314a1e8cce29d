"""The lorebook tuning report for a preview request: :func:`report_for_request`.

Above :mod:`engine.resolve` and :mod:`engine.registries` (it resolves the request's books, tokenizer
and budget exactly as the preview does); the report itself (:func:`engine.lorebook.report.build_report`)
is below both, in the lorebook package.
"""

from __future__ import annotations

from collections.abc import Callable

from .errors import SettingsError
from .lorebook.report import LorebookReport, build_report
from .registries import Registries, shared_registries
from .resolve import lorebook_plan, model_profile_and_limit, speaker_names
from .schema.request import PreviewRequest
from .tokenizers.sillytavern_text import sillytavern_text_tokenizer

__all__ = ["report_for_request"]


def report_for_request(request: PreviewRequest, *, registries: Registries | None = None) -> LorebookReport:
    """The report for a :class:`engine.schema.PreviewRequest`.

    Its books exactly as the preview uses them (:func:`engine.resolve.lorebook_plan`: for a SillyTavern chat its
    linked worlds only; otherwise the card's embedded book included once), names, tokenizer and budget (context
    limit minus reply reserve, as :func:`engine.pipeline.preview`).

    Raises
    ------
    SettingsError
        ``INVALID_SETTINGS`` when the reply reserve is not below the context limit,
        ``UNKNOWN_TOKENIZER`` for an unknown tokenizer override.
    """
    reg = registries or shared_registries()
    resolved = model_profile_and_limit(request.settings, reg.tokenizers)
    limit, reserve = resolved.context_limit, resolved.reply_reserve
    if reserve >= limit:
        raise SettingsError("INVALID_SETTINGS", f"reply reserve {reserve} must be below the context limit {limit}")
    # Exactly the books the preview uses (issue 31): a SillyTavern chat's linked worlds only (a
    # card's embedded book is used by SillyTavern only once it is linked as a world, so replaying
    # it beside the world made from it counted its entries twice); a Loomscope chat's books plus
    # the card's embedded book once.
    names = speaker_names(request)
    plan = lorebook_plan(request)
    count_tokens: Callable[[str], int] = resolved.tokenizer.count
    tc = request.sillytavern.text_completion if request.sillytavern is not None else None
    if tc is not None:
        # a Text Completion chat (issue 26): entries counted as its preview counts them
        count_tokens = sillytavern_text_tokenizer(tc.tokenizer, tc.main_api, tc.model).count
    return build_report(plan.activated, request.chat.messages, request.settings.world_info,
                        count_tokens=count_tokens, context_limit=resolved.budget,
                        user_name=names.user, char_name=names.char, character=request.character,
                        persona=request.persona, book_scopes=[plan.scopes[i] for i in plan.order])
