"""Every code that can appear on a block is documented (issue 9).

Runs the engine over a corpus — the real chats, cards and lorebooks of ``../shared/data`` plus
synthetic chats built to reach every path (sticky and ``@@activate`` lorebook entries, hidden,
excluded, orphaned and incomplete tool groups, examples, memory, interceptors, budgets from
roomy to impossible) — under every built-in strategy, and fails on any block reason or trace
``code`` missing from :data:`engine.reasons.REASON_CODES` (whose table in docs/shifting.md
``tests/engine/test_codes.py`` checks). Before this test ``LOREBOOK_STICKY`` and
``LOREBOOK_DECORATOR_ACTIVATE`` reached blocks without being listed.

Issue 10 item 5 (one vocabulary): every code the engine emits over the corpus — block reasons
and block trace codes, the preview's lorebook trace, the lorebook activation trace under both
rule sets (``sillytavern`` and ``loomscope``) over every book of ``../shared/data`` and a
synthetic book built to reach the not-activated codes, and the lint findings of every book —
is found in the one table, :data:`engine.vocabulary.VOCABULARY`, under its scope.
"""

from __future__ import annotations

import json

import pytest

from engine.lorebook.codes import BLOCK_REASONS
from engine.lorebook.st_hash import entry_hash
from engine.pipeline import default_registries, preview
from engine.reasons import REASON_CODES
from engine.schema import (
    Character,
    Chat,
    ChatMessage,
    ContextSettings,
    MemoryItem,
    MessageMeta,
    Persona,
    PreviewRequest,
    ToolCall,
    ToolFunction,
)
from engine.schema.lorebook import Lorebook
from engine.vocabulary import VOCABULARY

STRATEGIES = ("manual", "truncate", "summarize", "vector-recall", "compact")


def _codes(pv) -> set[str]:
    out = set()
    for b in pv.blocks:
        out.add(b.reason)
        if b.trace and isinstance(b.trace.get("code"), str):
            out.add(b.trace["code"])
    return out


def _record_code(rec) -> str:
    return rec["code"] if isinstance(rec, dict) else rec.code


def _preview_trace_codes(pv) -> set[str]:
    return {_record_code(rec) for rec in pv.lorebook_trace}


def _book() -> Lorebook:
    return Lorebook.model_validate({"name": "book", "entries": [
        {"uid": "s", "keys": ["dragon"], "content": "sticky lore " * 5, "sticky": 3, "position": 0},
        {"uid": "d", "keys": [], "content": "@@activate\nforced lore", "position": 1},
        {"uid": "k", "keys": ["harbor"], "content": "keyed lore " * 30, "position": 4, "depth": 2, "order": 5},
        {"uid": "c", "keys": [], "content": "constant lore", "constant": True, "position": 4, "depth": 1},
        {"uid": "big", "keys": ["harbor"], "content": "budget lore " * 400, "position": 1},
    ]})


def _synthetic_chat() -> Chat:
    def calls(*ids: str) -> list[ToolCall]:
        return [ToolCall(id=i, function=ToolFunction(name="f", arguments="{}")) for i in ids]

    msgs = [ChatMessage(role="system", content="You narrate the harbor.")]
    msgs += [ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"harbor event {i}. " + "wave " * 40)
             for i in range(12)]
    msgs += [
        ChatMessage(role="assistant", content=None, tool_calls=calls("a")),
        ChatMessage(role="tool", tool_call_id="a", content="tool says " + "data " * 60),
        ChatMessage(role="assistant", content="hidden aside", meta=MessageMeta(hidden=True)),
        ChatMessage(role="user", content="excluded aside", meta=MessageMeta(manualExcluded=True)),
        ChatMessage(role="tool", tool_call_id="nobody", content="orphan"),
        ChatMessage(role="assistant", content=None, tool_calls=calls("x1", "x2")),
        ChatMessage(role="tool", tool_call_id="x1", content="half"),
        ChatMessage(role="user", content="a pinned dragon remark", meta=MessageMeta(pinned=True)),
        ChatMessage(role="user", content="what about the dragon at the harbor?"),
    ]
    return Chat(messages=msgs, metadata={
        "note_prompt": "Author's note.",
        # SillyTavern finds a stored effect by the entry's hash (WorldInfoTimedEffects, world-info.js 524)
        "timedWorldInfo": {"sticky": {"book.s": {"hash": entry_hash(_book().entries[0], _book()),
                                                 "start": 2, "end": 99}}}})


def _requests(shared_data):
    card = Character(name="Mira", description="A harbor pilot.", mes_example="<START>\n{{user}}: hi\n{{char}}: hello",
                     post_history_instructions="Stay in character.")
    memory = [MemoryItem(id="m1", content="The harbor froze last winter. " * 10, priority=1),
              MemoryItem(id="m2", content="A summary of old events.", kind="summary", priority=2)]
    yield "synthetic", PreviewRequest(chat=_synthetic_chat(), character=card, lorebooks=[_book()], memory=memory,
                                      system_prompt="Main prompt.")
    # a persona, and the same book attached twice (its second copy is traced LOREBOOK_DUPLICATE_BOOK)
    yield "synthetic + persona, book twice", PreviewRequest(
        chat=_synthetic_chat(), character=card, persona=Persona(name="Wren", description="A courier at the harbor."),
        lorebooks=[_book(), _book()])
    if shared_data is None:
        return
    from engine.importers import load_character, load_chats, load_lorebook_or_card_book

    books = [load_lorebook_or_card_book(p) for p in sorted((shared_data / "lorebooks").iterdir())
             if p.suffix in (".json", ".lorebook")]
    seraphina = load_character(shared_data / "cards" / "default_Seraphina.png")
    for path in sorted((shared_data / "chats").iterdir()):
        for k, chat in enumerate(load_chats(path)[:3]):
            card = seraphina if "Seraphina" in path.name else None
            yield f"{path.name}#{k}", PreviewRequest(chat=chat, character=card)
    st_chat = load_chats(shared_data / "chats" / "Seraphina - 2023-5-12 @21h 32m 29s 224ms.jsonl")[0]
    for book in books:
        yield f"Seraphina + {book.name}", PreviewRequest(chat=st_chat, character=seraphina, lorebooks=[book])
        yield f"synthetic + {book.name}", PreviewRequest(chat=_synthetic_chat(), lorebooks=[book, _book()])


@pytest.fixture(scope="module")
def corpus_codes():
    from tests.conftest import shared_data_path

    regs = default_registries()

    def tag(messages, ctx):  # an interceptor that adds one message and drops another
        out = [m for m in messages if "excluded aside" not in str(m.get("content"))]
        return [*out[:-1], {"role": "system", "content": "interceptor note"}, out[-1]], ["tagged"]

    regs.interceptors.register("tag", tag)
    seen: dict[str, str] = {}
    trace_seen: dict[str, str] = {}
    for name, request in _requests(shared_data_path()):
        for strategy in STRATEGIES:
            for limit in (600, 2500, 8000, 200_000):
                settings = ContextSettings(model="gpt-4o", context_limit=limit, reply_reserve=100, strategy=strategy)
                pv = preview(request.model_copy(update={"settings": settings}), registries=regs)
                for code in _codes(pv):
                    seen.setdefault(code, f"{name} / {strategy} / {limit}")
                for code in _preview_trace_codes(pv):
                    trace_seen.setdefault(code, f"{name} / {strategy} / {limit}")
                if name == "synthetic":  # the same without the interceptor
                    pv = preview(request.model_copy(update={"settings": settings}))
                    for code in _codes(pv):
                        seen.setdefault(code, f"{name} / {strategy} / {limit} (no interceptor)")
        # a budget the protected blocks alone exceed
        tight = ContextSettings(model="gpt-4o", context_limit=120, reply_reserve=10)
        for code in _codes(preview(request.model_copy(update={"settings": tight}))):
            seen.setdefault(code, f"{name} / over budget")
    _CORPUS_TRACE.update(trace_seen)
    return seen


#: Lorebook trace codes of the previews the block corpus ran (filled by ``corpus_codes``).
_CORPUS_TRACE: dict[str, str] = {}


def test_every_code_on_a_block_is_documented(corpus_codes):
    unlisted = {c: where for c, where in corpus_codes.items() if c not in REASON_CODES}
    assert not unlisted, f"codes on blocks missing from REASON_CODES / the table in docs/shifting.md: {json.dumps(unlisted)}"


def test_the_corpus_reaches_the_codes_that_leaked(corpus_codes):
    # the corpus is only evidence if it reaches the paths: these must all have been seen
    expected = {"LOREBOOK_STICKY", "LOREBOOK_DECORATOR_ACTIVATE", "LOREBOOK_KEY_MATCH", "LOREBOOK_CONSTANT",
                "LOREBOOK_MATCHED", "LOREBOOK_BUDGET", "TOOL_PAIR_INCOMPLETE", "TOOL_RESULT_ORPHANED", "HIDDEN",
                "MANUAL_EXCLUDED", "PINNED", "CURRENT_INPUT", "SUMMARIZED", "SUMMARY", "MEMORY",
                "EXAMPLES_PUSHED_OUT", "HISTORY_OLDEST_FIRST", "TOOL_GROUP_DROPPED", "OVER_BUDGET_PROTECTED",
                "INTERCEPTOR_ADDED", "INTERCEPTOR_REMOVED", "INSTRUCTION", "CHARACTER", "SYSTEM_PROMPT", "PERSONA", "LOW_RELEVANCE"}
    from tests.conftest import shared_data_path

    if shared_data_path() is None:  # a clone without ../shared/data: only the real chats drop a whole tool group or overflow protected
        expected -= {"TOOL_GROUP_DROPPED", "OVER_BUDGET_PROTECTED"}
    assert expected <= set(corpus_codes), sorted(expected - set(corpus_codes))


def test_every_lorebook_block_reason_is_documented():
    # the activation's block reasons, including ones no corpus chat happens to reach
    assert set(BLOCK_REASONS) | set(BLOCK_REASONS.values()) <= set(REASON_CODES)


# ---------------------------------------------------------------- one vocabulary (issue 10 item 5)
def _trace_book() -> Lorebook:
    """Entries built to reach the not-activated trace codes (one code per entry, roughly)."""
    return Lorebook.model_validate({"name": "trace", "entries": [
        {"uid": "nm", "keys": ["zeppelin"], "content": "never matched"},
        {"uid": "off", "keys": ["harbor"], "content": "disabled", "disable": True},
        {"uid": "nokeys", "keys": [], "content": "no keys"},
        {"uid": "sec", "keys": ["harbor"], "secondary_keys": ["zeppelin"], "content": "secondary fails"},
        {"uid": "p0", "keys": ["harbor"], "content": "probability", "probability": 0, "use_probability": True},
        {"uid": "late", "keys": ["harbor"], "content": "delayed", "delay": 999},
        {"uid": "rec", "keys": ["harbor"], "content": "waits for recursion", "delay_until_recursion": 1},
        {"uid": "g1", "keys": ["harbor"], "content": "group one", "group": "g", "order": 200},
        {"uid": "g2", "keys": ["harbor"], "content": "group two", "group": "g", "order": 10},
        {"uid": "bad", "keys": ["/([a-/"], "content": "invalid regex"},
        {"uid": "empty", "keys": ["harbor"], "content": ""},
        {"uid": "sup", "keys": ["harbor"], "content": "@@dont_activate\nsuppressed"},
        {"uid": "cool", "keys": ["harbor"], "content": "cooling", "cooldown": 5},
        {"uid": "inner", "keys": ["lighthouse"], "content": "only in other entries", "exclude_recursion": True},
        {"uid": "outer", "keys": ["harbor"], "content": "the lighthouse keeper"},
        {"uid": "cf", "keys": ["harbor"], "content": "only for Zed", "characterFilter": {"names": ["Zed"]}},
        {"uid": "trig", "keys": ["harbor"], "content": "only on swipes", "triggers": ["swipe"]},
    ]})


def _lint_book() -> Lorebook:
    """Entries built to reach the lint codes no real book shows (numbers out of range, bad regexes, ...)."""
    return Lorebook.model_validate({"name": "lint", "scan_depth": -1, "entries": [
        {"uid": 1, "keys": ["harbor", "harbor"], "content": "key listed twice"},
        {"uid": 2, "keys": ["harbor"], "content": "negative", "depth": -2, "scan_depth": -1},
        {"uid": 3, "keys": ["harbor"], "content": "a typo", "probability": 150},
        {"uid": 4, "keys": ["/(a+)+b/"], "content": "backtracks"},
        {"uid": 5, "keys": ["an"], "content": "inside common words", "match_whole_words": False},
        {"uid": 6, "keys": ["harbor"], "secondary_keys": ["harbor"], "selective_logic": 2,
         "content": "never: NOT_ANY repeats the primary key"},
    ]})


@pytest.fixture(scope="module")
def activation_codes(corpus_codes):
    """Trace codes of ``engine.lorebook.activate`` under both rule sets (and without recursion) over every book, with the
    lorebook traces of the previews ``corpus_codes`` ran."""
    from engine.lorebook import activate
    from engine.schema import WorldInfoSettings
    from engine.tokenizers import default_tokenizer_registry
    from tests.conftest import shared_data_path

    count = default_tokenizer_registry().get("o200k_base").count
    books = [_book(), _trace_book()]
    shared = shared_data_path()
    chats = [_synthetic_chat()]
    if shared is not None:
        from engine.importers import load_chats, load_lorebook_or_card_book

        books += [load_lorebook_or_card_book(p) for p in sorted((shared / "lorebooks").iterdir())
                  if p.suffix in (".json", ".lorebook")]
        chats.append(load_chats(shared / "chats" / "Seraphina - 2023-5-12 @21h 32m 29s 224ms.jsonl")[0])
    chat_metadata = {"timedWorldInfo": {"cooldown": {"trace.cool": {"start": 0, "end": 999}}}}
    seen: dict[str, str] = dict(_CORPUS_TRACE)
    for rules, recursive in (("sillytavern", True), ("loomscope", True), ("sillytavern", False)):
        settings = WorldInfoSettings(rules=rules, recursive=recursive)
        for k, chat in enumerate(chats):
            for group in ([b] for b in books):
                for limit in (2_000, 200_000):
                    result = activate(group, chat.messages, settings, count_tokens=count, context_limit=limit,
                                      chat_metadata=chat_metadata)
                    for rec in result.trace:
                        seen.setdefault(rec.code, f"{rules} {recursive=} / chat {k} / {group[0].name} / {limit}")
            # every book at once: duplicate books, the shared budget
            result = activate(books + books[-1:], chat.messages, settings, count_tokens=count, context_limit=4_000,
                              chat_metadata=chat_metadata)
            for rec in result.trace:
                seen.setdefault(rec.code, f"{rules} {recursive=} / chat {k} / all books")
    return seen


@pytest.fixture(scope="module")
def lint_codes():
    from engine.lorebook import lint_lorebook
    from engine.tokenizers import default_tokenizer_registry
    from tests.conftest import shared_data_path

    count = default_tokenizer_registry().get("o200k_base").count
    books = [_book(), _trace_book(), _lint_book()]
    shared = shared_data_path()
    if shared is not None:
        from engine.importers import load_lorebook_or_card_book

        books += [load_lorebook_or_card_book(p) for p in sorted((shared / "lorebooks").iterdir())
                  if p.suffix in (".json", ".lorebook")]
    seen: dict[str, str] = {}
    for book in books:
        for limit in (600, 200_000):
            for finding in lint_lorebook(book, context_limit=limit, count_tokens=count):
                seen.setdefault(finding.code, f"{book.name} / {limit}")
    return seen


def test_every_emitted_code_is_in_the_one_table(corpus_codes, activation_codes, lint_codes):
    missing = {scope: {c: where for c, where in found.items()
                       if c not in VOCABULARY or scope not in VOCABULARY[c].scopes}
               for scope, found in (("block", corpus_codes), ("trace", activation_codes), ("lint", lint_codes))}
    assert not any(missing.values()), f"emitted codes missing from engine.vocabulary: {json.dumps(missing)}"


def test_the_activation_corpus_reaches_the_trace_codes(activation_codes, lint_codes):
    # evidence, not decoration: the corpus must reach most of the trace paths under both rule sets
    expected = {"LOREBOOK_NOT_MATCHED", "LOREBOOK_KEY_MATCH", "LOREBOOK_CONSTANT", "LOREBOOK_STICKY",
                "LOREBOOK_DECORATOR_ACTIVATE", "LOREBOOK_DISABLED", "LOREBOOK_NO_KEYS", "LOREBOOK_SECONDARY_FAILED",
                "LOREBOOK_PROBABILITY", "LOREBOOK_DELAY", "LOREBOOK_GROUP_LOST", "LOREBOOK_EMPTY",
                "LOREBOOK_DECORATOR_SUPPRESS", "LOREBOOK_BUDGET", "LOREBOOK_COOLDOWN", "LOREBOOK_FILTERED_CHARACTER",
                "LOREBOOK_FILTERED_TRIGGER", "LOREBOOK_DUPLICATE_BOOK", "LOREBOOK_DELAY_UNTIL_RECURSION",
                "LOREBOOK_EXCLUDED_FROM_RECURSION", "LOREBOOK_INVALID_KEY"}
    assert expected <= set(activation_codes), sorted(expected - set(activation_codes))
    lint_expected = {"LINT_NO_KEYS", "LINT_INVALID_REGEX", "LINT_DISABLED", "LINT_EMPTY_CONTENT",
                     "LINT_DUPLICATE_KEY_IN_ENTRY", "LINT_NEGATIVE_NUMBER", "LINT_NEGATIVE_SCAN_DEPTH",
                     "LINT_PROBABILITY_RANGE", "LINT_CATASTROPHIC_REGEX", "LINT_COMMON_SUBSTRING",
                     "LINT_SECONDARY_CONTRADICTION"}
    assert lint_expected <= set(lint_codes), sorted(lint_expected - set(lint_codes))


def test_the_views_are_the_one_table():
    from engine.lorebook.codes import TRACE_CODES
    from engine.lorebook.lint import LINT_CODES

    assert {c: (t.category, t.meaning) for c, t in VOCABULARY.items() if "block" in t.scopes} == REASON_CODES
    assert set(TRACE_CODES) == {c for c, t in VOCABULARY.items() if "trace" in t.scopes}
    assert set(LINT_CODES) == {c for c, t in VOCABULARY.items() if "lint" in t.scopes}
    assert all(t.words and t.meaning and not t.words[0].isupper() for t in VOCABULARY.values())
