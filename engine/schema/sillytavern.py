"""A chat's SillyTavern setup: what SillyTavern 1.12.x reads to build a Chat Completion request.

That is, what it reads besides the card, the persona and the worlds.

Stored per chat (``chats.setup``, migration 0002) by ``loomscope import DIR`` and read back by
:meth:`engine.storage.Store.build_request`; a :class:`~engine.schema.request.PreviewRequest`
carrying one (``request.sillytavern``) is assembled by
:mod:`engine.assembly.sillytavern` exactly as SillyTavern's ``prepareOpenAIMessages`` would.

Field names and defaults follow SillyTavern 1.12.6: ``oai_settings`` (``public/scripts/openai.js``
``default_settings``), the Prompt Manager (``PromptManager.js`` ``chatCompletionDefaultPrompts``,
``promptManagerDefaultPromptOrder``), ``power_user`` (``power-user.js``), the Author's Note
(``chat_metadata.note_*``, ``authors-note.js``) and the persona
(``power_user.persona_descriptions[avatar]``, ``personas.js``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

#: SillyTavern ``extension_prompt_types`` (``script.js``): where an extension prompt goes.
EXTENSION_PROMPT_NONE, EXTENSION_PROMPT_IN_PROMPT, EXTENSION_PROMPT_IN_CHAT, EXTENSION_PROMPT_BEFORE_PROMPT = -1, 0, 1, 2
#: SillyTavern ``persona_description_positions`` (``power-user.js``).
PERSONA_IN_PROMPT, PERSONA_AFTER_CHAR, PERSONA_TOP_AN, PERSONA_BOTTOM_AN, PERSONA_AT_DEPTH, PERSONA_NONE = 0, 1, 2, 3, 4, 9
#: SillyTavern ``character_names_behavior`` (``openai.js``).
NAMES_NONE, NAMES_DEFAULT, NAMES_COMPLETION, NAMES_CONTENT = -1, 0, 1, 2

LorebookScope = Literal["chat", "character", "global"]


class PromptDefinition(BaseModel):
    """One Prompt Manager prompt (``oai_settings.prompts[]``).

    Markers (``marker: true``: ``chatHistory``, ``dialogueExamples``, ``worldInfoBefore``,
    ``worldInfoAfter``, ``charDescription``, ``charPersonality``, ``scenario``,
    ``personaDescription``) get their content from the chat; the others carry ``content``
    (macros expanded when the prompt is used). ``system_prompt`` is ``False`` for the user's own
    prompts (``None`` when the file does not say, which SillyTavern treats as neither).
    ``injection_position`` 1 (absolute) sends the prompt at ``injection_depth`` messages from the
    end, in ``role`` (without a depth or role it is never sent, as in SillyTavern). Unknown keys
    are kept.
    """

    model_config = ConfigDict(extra="allow")

    identifier: str
    name: str = ""
    role: str | None = None
    content: str | None = None
    system_prompt: bool | None = None
    marker: bool = False
    injection_position: int | None = None
    injection_depth: int | None = None
    forbid_overrides: bool = False


class PromptOrderItem(BaseModel):
    """One line of the Prompt Manager's order: a prompt identifier and whether it is on."""

    model_config = ConfigDict(extra="allow")

    identifier: str
    enabled: bool = True


class AuthorNote(BaseModel):
    """The chat's Author's Note (``chat_metadata.note_*``; defaults from ``authors-note.js``).

    ``position``: 0 after the main prompt block (``IN_PROMPT``), 1 in the chat at ``depth``
    (``IN_CHAT``), 2 before the main prompt (``BEFORE_PROMPT``), -1 off. ``interval``: sent when
    the number of user messages is a multiple of it (1 = always, 0 = never). ``role``: 0 system,
    1 user, 2 assistant (for ``IN_CHAT``). ``depth`` in messages from the end.
    """

    model_config = ConfigDict(extra="forbid")

    prompt: str = ""
    interval: int = 1
    depth: int = 4
    position: int = 1
    role: int = 0
    allow_wi_scan: bool = False


#: SillyTavern 1.12.6 ``chatCompletionDefaultPrompts.prompts`` (``PromptManager.js``).
DEFAULT_PROMPTS: tuple[dict[str, Any], ...] = (
    {"name": "Main Prompt", "system_prompt": True, "role": "system",
     "content": "Write {{char}}'s next reply in a fictional chat between {{charIfNotGroup}} and {{user}}.",
     "identifier": "main"},
    {"name": "Auxiliary Prompt", "system_prompt": True, "role": "system", "content": "", "identifier": "nsfw"},
    {"identifier": "dialogueExamples", "name": "Chat Examples", "system_prompt": True, "marker": True},
    {"name": "Post-History Instructions", "system_prompt": True, "role": "system", "content": "",
     "identifier": "jailbreak"},
    {"identifier": "chatHistory", "name": "Chat History", "system_prompt": True, "marker": True},
    {"identifier": "worldInfoAfter", "name": "World Info (after)", "system_prompt": True, "marker": True},
    {"identifier": "worldInfoBefore", "name": "World Info (before)", "system_prompt": True, "marker": True},
    {"identifier": "enhanceDefinitions", "role": "system", "name": "Enhance Definitions",
     "content": "If you have more knowledge of {{char}}, add to the character's lore and personality to "
                "enhance them but keep the Character Sheet's definitions absolute.",
     "system_prompt": True, "marker": False},
    {"identifier": "charDescription", "name": "Char Description", "system_prompt": True, "marker": True},
    {"identifier": "charPersonality", "name": "Char Personality", "system_prompt": True, "marker": True},
    {"identifier": "scenario", "name": "Scenario", "system_prompt": True, "marker": True},
    {"identifier": "personaDescription", "name": "Persona Description", "system_prompt": True, "marker": True},
)

#: SillyTavern 1.12.6 ``promptManagerDefaultPromptOrder`` (``PromptManager.js``).
DEFAULT_PROMPT_ORDER: tuple[tuple[str, bool], ...] = (
    ("main", True), ("worldInfoBefore", True), ("personaDescription", True), ("charDescription", True),
    ("charPersonality", True), ("scenario", True), ("enhanceDefinitions", False), ("nsfw", True),
    ("worldInfoAfter", True), ("dialogueExamples", True), ("chatHistory", True), ("jailbreak", True),
)

#: The ``prompt_order`` id SillyTavern 1.12.6 uses for every character (``openai.js``
#: ``setupChatCompletionPromptManager``: strategy ``global``, ``dummyId: 100001``).
GLOBAL_PROMPT_ORDER_ID = 100001


def default_prompts() -> list[PromptDefinition]:
    """A fresh copy of SillyTavern's default Prompt Manager prompts."""
    return [PromptDefinition.model_validate(p) for p in DEFAULT_PROMPTS]


def default_prompt_order() -> list[PromptOrderItem]:
    """A fresh copy of SillyTavern's default prompt order."""
    return [PromptOrderItem(identifier=i, enabled=e) for i, e in DEFAULT_PROMPT_ORDER]


class RegexScript(BaseModel):
    """One script of SillyTavern's Regex extension (``extensions/regex``), in its own field names.

    ``placement``: 1 user input, 2 AI output, 3 slash commands, 5 World Info (``regex_placement``;
    0 is the old Markdown display). ``minDepth`` / ``maxDepth``: message depths the script is
    limited to (``None`` or negative: no limit). ``substituteRegex``: macros in ``findRegex``
    first. Unknown keys are kept.
    """

    model_config = ConfigDict(extra="allow")

    id: str = ""
    scriptName: str = ""
    findRegex: str = ""
    replaceString: str = ""
    trimStrings: list[str] = Field(default_factory=list)
    placement: list[int] = Field(default_factory=list)
    disabled: bool = False
    markdownOnly: bool = False
    promptOnly: bool = False
    runOnEdit: bool = False
    substituteRegex: bool | int = False
    minDepth: int | float | None = None
    maxDepth: int | float | None = None


class CharacterNote(BaseModel):
    """The character's own Author's Note (``extension_settings.note.chara[]``, authors-note.js).

    ``position`` (``chara_note_position``): 0 replaces the chat's note, 1 goes before it, 2
    after it; only with ``use_chara``.
    """

    model_config = ConfigDict(extra="forbid")

    prompt: str = ""
    use_chara: bool = False
    position: int = 0


class SillyTavernSetup(BaseModel):
    """Everything beyond card, persona and worlds that SillyTavern's Chat Completion path reads.

    Attributes
    ----------
    user_name:
        ``name1``: the persona's name (``power_user.personas[avatar]``, else the settings'
        ``username``); ``{{user}}`` and the names behaviour use it.
    persona_position, persona_depth, persona_role:
        Where the persona description goes (``persona_description_positions``: 0 in the
        prompt, 2/3 top/bottom of the Author's Note, 4 at ``persona_depth`` in
        ``persona_role`` (0 system, 1 user, 2 assistant), 9 nowhere).
    prompts, prompt_order:
        The Prompt Manager's prompts and the active order (SillyTavern's default order when the
        folder's ``prompt_order`` has none for the active character, as ``sanitizeServiceSettings``
        does).
    author_note:
        The chat's Author's Note.
    new_chat_prompt, new_group_chat_prompt, new_example_chat_prompt, wi_format,
    scenario_format, personality_format, group_nudge_prompt, impersonation_prompt, send_if_empty:
        ``oai_settings`` texts (``wi_format``: ``{0}`` is replaced by the World Info text).
    names_behavior:
        ``character_names_behavior``: -1 none, 0 default (prefix ``Name: `` to messages written
        under another persona's name), 1 ``name`` field, 2 always prefix.
    wrap_in_quotes, squash_system_messages, pin_examples, strip_examples,
    prefer_character_prompt, prefer_character_jailbreak, collapse_newlines:
        The ``oai_settings`` / ``power_user`` switches of the same names.
    lorebook_scopes:
        In a request: one scope per ``request.lorebooks`` entry (``chat``, ``character``,
        ``global``), which orders the books as ``getSortedEntries`` does. Not stored: the
        library keeps the scope on each chat–lorebook link.
    source:
        Where the chat came from: ``{"folder", "user", "chat_file", "character_file"}``
        (informational; never read back from disk).
    character_avatar, character_tags, tag_names:
        The card's file name in ``characters/`` (``characters[chid].avatar``; World Info character
        filters compare its stem, ``getCharaFilename``), its tag ids (``settings.json``
        ``tag_map[avatar]``; tag filters compare them) and every tag's name by id (``tags``).
    start_reply_with:
        ``power_user.user_prompt_bias`` (Start Reply With), used when no message carries a bias
        (``getBiasStrings``).
    regex_scripts, regex_disabled, character_regex_allowed:
        The Regex extension: the global scripts (``extension_settings.regex``), whether the
        extension is disabled (``disabledExtensions``), and whether the card's own scripts
        (``data.extensions.regex_scripts``) may run (``character_allowed_regex``).
    character_note:
        The card's own Author's Note (``extension_settings.note.chara``), or ``None``.
    global_variables:
        ``extension_settings.variables.global`` (``{{getglobalvar::…}}``).
    """

    model_config = ConfigDict(extra="forbid")

    user_name: str = "User"
    persona_position: int = PERSONA_IN_PROMPT
    persona_depth: int = 2
    persona_role: int = 0
    prompts: list[PromptDefinition] = Field(default_factory=default_prompts)
    prompt_order: list[PromptOrderItem] = Field(default_factory=default_prompt_order)
    author_note: AuthorNote = Field(default_factory=AuthorNote)
    new_chat_prompt: str = "[Start a new Chat]"
    new_group_chat_prompt: str = "[Start a new group chat. Group members: {{group}}]"
    new_example_chat_prompt: str = "[Example Chat]"
    wi_format: str = "{0}"
    scenario_format: str = "[Circumstances and context of the dialogue: {{scenario}}]"
    personality_format: str = "[{{char}}'s personality: {{personality}}]"
    group_nudge_prompt: str = "[Write the next reply only as {{char}}.]"
    impersonation_prompt: str = ""
    send_if_empty: str = ""
    names_behavior: int = NAMES_DEFAULT
    wrap_in_quotes: bool = False
    squash_system_messages: bool = False
    pin_examples: bool = False
    strip_examples: bool = False
    prefer_character_prompt: bool = True
    prefer_character_jailbreak: bool = True
    collapse_newlines: bool = False
    lorebook_scopes: list[LorebookScope] = Field(default_factory=list)
    source: dict[str, Any] = Field(default_factory=dict)

    # ---- issue 27 (keep new fields at the end; issue 26 adds its own after these) ----
    character_avatar: str = ""
    character_tags: list[str] = Field(default_factory=list)
    tag_names: dict[str, str] = Field(default_factory=dict)
    start_reply_with: str = ""
    regex_scripts: list[RegexScript] = Field(default_factory=list)
    regex_disabled: bool = False
    character_regex_allowed: bool = False
    character_note: CharacterNote | None = None
    global_variables: dict[str, Any] = Field(default_factory=dict)
