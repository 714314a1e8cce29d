"""The SillyTavern rules issue 27 added, on the Text Completion path: prompt strings equal SillyTavern 1.12.6's.

Each case of :mod:`tests.engine.assembly.tc_rules_cases` is written as a SillyTavern user folder,
imported and previewed at the two windows of :mod:`tc_cases` (everything fits / the history is
cut). ``textcompletion_rules_expected.json`` holds the ``prompt`` and ``stop`` SillyTavern's own code
produced for the same inputs: the harness of ``test_textcompletion.py`` (``script.js`` ``Generate``,
dry run, under Node 20 with the 1.12.6 functions verbatim) with the Regex extension's
``extensions/regex/engine.js`` ``getRegexedString`` / ``runRegexScript`` / ``filterString`` /
``getScopedRegex`` and ``utils.js`` ``regexFromString`` in place of the identity stub (applied by
``Generate``'s ``coreChat`` mapping, script.js 3565–3583, and to World Info contents as
``checkWorldInfo`` does, world-info.js 4126–4128), ``getBiasStrings`` (script.js 4714–4746),
``authors-note.js`` ``setFloatingPrompt`` with ``extension_settings.note.chara``, and ``macros.js``
``getLastMessageId`` / ``getLastUserMessage`` / ``getLastCharMessage`` with ``variables.js``
``replaceVariableMacros`` and its variable functions.

Cases: regex scripts (user input, AI output from a minimum depth, World Info with a maximum depth,
``substituteRegex``, the card's own script with trim strings, a Markdown-only and a disabled one
that must not run) with instruct off and ChatML; a Start Reply With carried by the newest user
message (``extra.bias``) with instruct off (it forces ``{{char}}:``) and Llama 3; the card's own
Author's Note before the chat's (Alpaca); World Info contents with variables and last-message macros
(Mistral).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.importers.st_folder import read_st_folder
from engine.pipeline import preview
from engine.storage import open_store
from tests.engine.assembly import tc_rules_cases
from tests.engine.assembly.test_textcompletion import char_tokenizer  # noqa: F401  (the fixture)

EXPECTED = json.loads(Path(__file__).with_name("textcompletion_rules_expected.json").read_text(encoding="utf-8"))


def _preview(tmp_path: Path, case: str, budget: str):
    folder = tc_rules_cases.write_case(tmp_path / "st", case, budget)
    store = open_store(f"sqlite:///{tmp_path / 'lib.db'}", seed=False)
    report = store.imports.st_folder(read_st_folder(folder))
    chat_id = next(r.id for r in report.added if r.kind == "chat")
    return preview(store.chats.build_request(chat_id))


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_prompt_equals_sillytavern(key: str, tmp_path: Path, char_tokenizer) -> None:  # noqa: F811
    """``Generate`` → ``getCombinedPrompt`` and ``getStoppingStrings`` (see the module docstring)."""
    case, budget = key.split("@")
    pv = _preview(tmp_path, case, budget)
    assert pv.api == "text_completion"
    assert pv.prompt == EXPECTED[key]["prompt"]
    assert pv.stop == EXPECTED[key]["stop"]


def _regex_rows(pv) -> dict[str, list[tuple[str, str, str, str]]]:
    return {b.source: [(c["source"], c["script"], c["before"], c["after"]) for c in b.trace["regex"]]
            for b in pv.blocks if b.status == "kept" and b.trace and b.trace.get("regex")}


def test_regex_changes_are_traced_as_on_the_chat_completion_path(tmp_path: Path, char_tokenizer) -> None:  # noqa: F811
    """A block a regex script changed lists it in ``trace["regex"]`` (``regex_trace``, shared):
    messages by ``getRegexedString(mes, USER_INPUT | AI_OUTPUT, {isPrompt, depth})`` (script.js 3565–3583),
    World Info by ``getRegexedString(content, WORLD_INFO, {depth})`` (world-info.js 4126–4128)."""
    pv = _preview(tmp_path / "tc", "plain-regex", "full")
    rows = _regex_rows(pv)
    assert [r[1] for r in rows["message:0"]] == ["rain"]  # the card's own script, allowed for kael.png
    turn0 = "Turn 0: I unfold the map and point at the {}, asking about the bridge."
    assert rows["message:1"] == [("message:1", "road", turn0.format("coast road"), turn0.format("Kael's old road"))]
    assert "message:10" not in rows  # AI output at depth 1 < minDepth 3: the bridge stays
    assert "[bridge]" in pv.prompt and 'The bridge washed out last spring."\nKael:' in pv.prompt
    assert {r[1] for r in rows["context:wiBefore"]} == {"lore tag", "user name"}
    assert "Lore (depth): the tide is rising." in pv.prompt  # at depth 1 > maxDepth 0: not changed
    assert not any(r[1] in ("display only", "off") for rs in rows.values() for r in rs)
    # the same folder over Chat Completion: the same messages changed, by the same scripts, the same way
    folder = tc_rules_cases.write_case(tmp_path / "cc" / "st", "plain-regex", "full", main_api="openai")
    store = open_store(f"sqlite:///{tmp_path / 'cc' / 'lib.db'}", seed=False)
    report = store.imports.st_folder(read_st_folder(folder))
    cc = preview(store.chats.build_request(next(r.id for r in report.added if r.kind == "chat")))
    assert cc.api != "text_completion"
    cc_rows = _regex_rows(cc)
    messages = {k: v for k, v in rows.items() if k.startswith("message:")}
    assert messages == {k: v for k, v in cc_rows.items() if k.startswith("message:")}
    # the caption title (extra.append_title) follows the regexed text on both paths
    title = "\n\n[Kael looks at the map: a coast road]"
    for p in (pv, cc):
        (m3,) = [b for b in p.blocks if b.source == "message:3" and b.status == "kept"]
        assert m3.text.rstrip("\n").endswith("Kael's old road, asking about the bridge." + title)
    tc_lore = {r for k, v in rows.items() for r in v if r[0].startswith("lorebook:")}
    cc_lore = {r for v in cc_rows.values() for r in v if r[0].startswith("lorebook:")}
    assert tc_lore == cc_lore and tc_lore


def test_start_reply_with_is_one_setting_for_both_paths(tmp_path: Path) -> None:
    """``power_user.user_prompt_bias`` is read once, into ``SillyTavernSetup.start_reply_with``, for a Text
    Completion folder too; a setup stored with the older ``text_completion.user_prompt_bias`` reads into it."""
    from engine.schema.sillytavern import SillyTavernSetup

    folder = tc_rules_cases.tc_cases.write_case(tmp_path / "st", "chatml-pinned-bias", "full")
    store = open_store(f"sqlite:///{tmp_path / 'lib.db'}", seed=False)
    report = store.imports.st_folder(read_st_folder(folder))
    setup = store.chats.build_request(next(r.id for r in report.added if r.kind == "chat")).sillytavern
    assert setup is not None and setup.text_completion is not None
    assert setup.start_reply_with == "*He smiles* "
    assert "user_prompt_bias" not in setup.text_completion.model_dump()
    stored = setup.model_dump(mode="json")
    stored["start_reply_with"] = ""
    stored["text_completion"]["user_prompt_bias"] = "*Old* "
    assert SillyTavernSetup.model_validate(stored).start_reply_with == "*Old* "
    stored["start_reply_with"] = "*New* "
    again = SillyTavernSetup.model_validate(stored)
    assert again.start_reply_with == "*New* " and again.text_completion is not None


def test_export_writes_start_reply_with_for_both_paths(tmp_path: Path) -> None:
    """``st_export.settings_document`` writes ``power_user.user_prompt_bias`` from the one setting."""
    from engine.schema.settings import ContextSettings
    from engine.schema.sillytavern import SillyTavernSetup, TextCompletionSetup
    from engine.st_export import settings_document

    for tc in (None, TextCompletionSetup()):
        setup = SillyTavernSetup(start_reply_with="{{char}}:", text_completion=tc)
        doc = settings_document(setup, ContextSettings(), {}, "user.png", [], {})
        assert doc["power_user"]["user_prompt_bias"] == "{{char}}:"


def test_world_info_macros_use_the_text_completion_instruct_values(tmp_path: Path, char_tokenizer) -> None:  # noqa: F811
    """World Info contents go through the one macro engine with ``replaceInstructMacros``' values
    (``evaluateMacros``, macros.js 417–437): no macro is left unknown, none is reported."""
    pv = _preview(tmp_path, "mistral-wi-macros", "full")
    assert "Lore: the ledger reads [INST] |[/INST] ||Write Kael's next reply" in (pv.prompt or "")
    assert not [w for w in pv.warnings if "unknown macro" in w]


def test_lorebook_trace_names_chat_messages_on_both_paths(tmp_path: Path, char_tokenizer) -> None:  # noqa: F811
    """The World Info scan skips hidden messages (``coreChat``); the trace's ``message_index`` is the chat's
    own index on the Text Completion path as on the Chat Completion one (message 6 is hidden, so the
    scanned chat's message 10 is the chat's message 11)."""
    from tests.engine.importers.st_fixture import entry

    def folder(root: Path, main_api: str | None) -> Path:
        user = tc_rules_cases.tc_cases.write_case(root, "plain", "full", main_api=main_api)
        lore = json.loads((user / "worlds" / "Lore.json").read_text(encoding="utf-8"))
        lore["entries"]["20"] = entry(20, ["Turn 10"], "Lore: the map is old.", order=5, position=1)
        (user / "worlds" / "Lore.json").write_text(json.dumps(lore), encoding="utf-8")
        return user

    found = {}
    for api in (None, "openai"):
        store = open_store(f"sqlite:///{tmp_path / f'{api}.db'}", seed=False)
        report = store.imports.st_folder(read_st_folder(folder(tmp_path / f"st-{api}", api)))
        pv = preview(store.chats.build_request(next(r.id for r in report.added if r.kind == "chat")))
        (rec,) = [r for r in pv.lorebook_trace if str(r.uid) == "20" and r.activated]
        found[api] = rec.detail.get("message_index")
    assert found == {None: 11, "openai": 11}
