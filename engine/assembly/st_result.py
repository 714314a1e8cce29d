"""SillyTavern's own rules in the pipeline's steps for a chat from a SillyTavern folder.

A SillyTavern chat runs the pipeline's ten steps like any chat (:func:`engine.pipeline.prepare`,
SPEC §2); what differs is who decides, and this module holds what only SillyTavern decides:

* step 3, :func:`assemble_sillytavern`: SillyTavern 1.12.6's ``Generate`` is the template the
  assembly step runs (:func:`engine.assembly.sillytavern.assemble_chat_completion`,
  :func:`engine.assembly.textcompletion.assemble_text_completion`), over the inputs steps 1–2
  resolved (:class:`~engine.assembly.st_types.SillyTavernInputs`); its own history fill and
  World Info budget stand in for a context strategy, so the counts and fates it returns are
  final (steps 4–7 take them as they are: no shift, no fit map, no interceptor);
* step 8, :func:`sillytavern_prompt_tokens`: the count of what is sent (Chat Completion's
  messages; Text Completion's whole string as the backend holds it);
* step 9, :func:`sillytavern_budget_error`: a required prompt that did not fit
  (``TokenBudgetExceededError``) is ``TOKEN_BUDGET_EXCEEDED`` and nothing is sent;
* step 10, :func:`preview_rows`: the rows in story order (:func:`in_story_order`). The preview
  around them is the pipeline's one (:func:`engine.report.report_preview`).
"""

from __future__ import annotations

import bisect
from typing import Any

from ..schema._construct import construct_many, model_fields_of
from ..schema.blocks import BlockKind
from ..schema.preview import PreviewBlock, PreviewError
from ..tokenizers import num_tokens_from_messages
from .sillytavern import REPLY_PRIMER_TOKENS, assemble_chat_completion
from .st_types import AssembledBlock, AssembledPrompt, BudgetOverflow, SillyTavernInputs
from .textcompletion import assemble_text_completion


def assemble_sillytavern(inputs: SillyTavernInputs) -> AssembledPrompt:
    """Pipeline step 3 for a SillyTavern chat: run SillyTavern's ``Generate`` as the template.

    Text Completion when the setup has ``text_completion`` (``main_api`` other than ``openai``),
    else Chat Completion (``public/script.js`` ``Generate``'s two branches).
    """
    if inputs.setup.text_completion is not None:
        return assemble_text_completion(inputs)
    return assemble_chat_completion(inputs)


def sillytavern_budget_error(assembled: AssembledPrompt, inputs: SillyTavernInputs) -> PreviewError | None:
    """Step 9: ``TOKEN_BUDGET_EXCEEDED`` for a required prompt that does not fit, else ``None``.

    SillyTavern's ``TokenBudgetExceededError`` (``scripts/openai.js`` ``ChatCompletion.checkTokenBudget``),
    which SillyTavern only logs before sending a partial prompt; Loomscope sends nothing.
    """
    overflow = assembled.overflow
    if overflow is None:
        return None
    return _budget_error(overflow, inputs.budget, inputs.context_limit, inputs.reply_reserve)


def _budget_error(overflow: BudgetOverflow, budget: int, limit: int, reserve: int) -> PreviewError:
    return PreviewError(
        code="TOKEN_BUDGET_EXCEEDED",
        message=(f"SillyTavern's required prompt {overflow.prompt!r} needs {overflow.tokens} tokens but only "
                 f"{max(0, overflow.left)} are left of the budget {budget - REPLY_PRIMER_TOKENS} "
                 f"(context {limit} − reply reserve {reserve} − {REPLY_PRIMER_TOKENS} for the reply primer); "
                 "SillyTavern would send a partial prompt, Loomscope sends nothing"),
        details={"prompt": overflow.prompt, "tokens": overflow.tokens, "left": overflow.left, "budget": budget})


def sillytavern_prompt_tokens(assembled: AssembledPrompt, inputs: SillyTavernInputs) -> int:
    """Step 8: the tokens of what the template sends (``inputs.profile``'s units; 0 when nothing is).

    Chat Completion: the provider count of the messages (``num_tokens_from_messages``, no tools).
    Text Completion: the backend's count of the whole string (``TextTokenizer.prompt_tokens``:
    BOS and the like included).
    """
    tok = inputs.text_tokenizer
    if assembled.api == "text_completion" and tok is not None:
        prompt = assembled.prompt or ""
        return tok.prompt_tokens(prompt) if prompt else 0
    messages = assembled.messages
    return num_tokens_from_messages(inputs.profile, messages, []) if messages else 0


def preview_rows(assembled: AssembledPrompt, error: PreviewError | None) -> list[PreviewBlock]:
    """Step 10's rows: the sent blocks in prompt order with the left-out ones.

    Both APIs: the left-out blocks sorted by message index sit among the sent ones in story
    order (:func:`in_story_order`; issue 31: "rows stay in story order in every mode"); on
    ``error`` every sent block is excluded with ``OVER_BUDGET_PROTECTED``. Text Completion's
    sent blocks are in the string's order (their ``span`` ascending), which is story order.
    """
    failed = error is not None
    sent = [_row(b, "excluded" if failed else "kept", "OVER_BUDGET_PROTECTED" if failed else b.reason)
            for b in assembled.sent]
    left = sorted(assembled.left_out, key=lambda b: -1 if b.message_index is None else b.message_index)
    rows = in_story_order(sent, [_row(b, "excluded", b.reason) for b in left])
    # the values are the template's typed ones: rows are built without validation (10,000 rows cost
    # ~50 ms validated), every field given (the model's defaults under the template's values)
    dicts = [{**_ROW_DEFAULTS, "id": f"b{i}", "position": i, **row} for i, row in enumerate(rows)]
    return construct_many(PreviewBlock, dicts, set(model_fields_of(PreviewBlock)))


#: Every ``PreviewBlock`` field in the model's order, at its default (``None`` for the required ones,
#: which every row gives): the fields a SillyTavern row leaves out.
_ROW_DEFAULTS: dict[str, Any] = {name: None if f.is_required() else f.get_default(call_default_factory=True)
                                 for name, f in PreviewBlock.model_fields.items()}


def _row(b: AssembledBlock, status: str, reason: str) -> dict[str, Any]:
    row: dict[str, Any] = dict(kind=b.kind, role=b.role, source=b.source, tokens=b.tokens, status=status,
                               reason=reason, protected=b.protected, pinned=False, text=b.text, name=b.name,
                               message_index=b.message_index, trace=b.trace)
    if b.manual_excluded:
        row["manual_excluded"] = True
    if b.span is not None:
        row["span"] = b.span
    return row


def in_story_order(sent: list[dict[str, Any]], left_out: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The sent rows with the left-out ones (sorted by message index, examples first) among them.

    So the rows keep story order (issue 31): a left-out chat message goes before the first sent
    block of a later message, else after the last sent message block (or the new-chat marker);
    an example pushed out goes after the last example sent; anything else (or a message with no
    such place) at the end. Left-out rows for the same place keep their order. One pass over
    the sent rows and one over the left-out ones (O(n log n) with the bisection).
    """
    pairs = sorted((b["message_index"], k) for k, b in enumerate(sent) if b.get("message_index") is not None)
    keys = [mi for mi, _ in pairs]
    first_at = [k for _, k in pairs]  # first_at[j]: the first sent position holding an index >= keys[j]
    for j in range(len(first_at) - 2, -1, -1):
        first_at[j] = min(first_at[j], first_at[j + 1])
    anchors = [k for k, b in enumerate(sent) if b.get("message_index") is not None
               or b.get("source") == "prompt:newMainChat"]
    last_message = anchors[-1] if anchors else None
    examples = [k for k, b in enumerate(sent) if b.get("kind") == BlockKind.EXAMPLE.value]
    before: dict[int, list[dict[str, Any]]] = {}
    after: dict[int, list[dict[str, Any]]] = {}
    rest: list[dict[str, Any]] = []
    for row in left_out:
        index = row.get("message_index")
        if index is None:
            at = examples[-1] if examples and row.get("source") == "character:mes_example" else None
            (rest if at is None else after.setdefault(at, [])).append(row)
            continue
        j = bisect.bisect_right(keys, index)  # the first sent message with a later index
        if j < len(first_at):
            before.setdefault(first_at[j], []).append(row)
        elif last_message is not None:
            after.setdefault(last_message, []).append(row)
        else:
            rest.append(row)
    out: list[dict[str, Any]] = []
    for k, b in enumerate(sent):
        out.extend(before.get(k, ()))
        out.append(b)
        out.extend(after.get(k, ()))
    return out + rest


__all__ = ["assemble_sillytavern", "in_story_order", "preview_rows", "sillytavern_budget_error",
           "sillytavern_prompt_tokens"]
