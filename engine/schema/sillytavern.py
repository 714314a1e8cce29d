"""A chat's SillyTavern setup: what SillyTavern 1.12.x reads to build a Chat Completion request.

That is, what it reads besides the card, the persona and the worlds.

Stored per chat (``chats.setup``, migration 0002) by ``loomscope import DIR`` and read back by
:meth:`engine.storage.Store.chats.build_request`; a :class:`~engine.schema.request.PreviewRequest`
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

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .character import Character

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


# --- Text Completion (issue 26) ---------------------------------------------------------------

#: SillyTavern ``names_behavior_types`` (``instruct-mode.js``): whether instruct mode writes
#: ``Name: `` before a message's text.
InstructNamesBehavior = Literal["none", "force", "always"]
INSTRUCT_NAMES_NONE: InstructNamesBehavior = "none"
INSTRUCT_NAMES_FORCE: InstructNamesBehavior = "force"
INSTRUCT_NAMES_ALWAYS: InstructNamesBehavior = "always"

#: SillyTavern 1.12.6 ``defaultStoryString`` (``power-user.js``).
DEFAULT_STORY_STRING = (
    "{{#if system}}{{system}}\n{{/if}}{{#if description}}{{description}}\n{{/if}}"
    "{{#if personality}}{{char}}'s personality: {{personality}}\n{{/if}}"
    "{{#if scenario}}Scenario: {{scenario}}\n{{/if}}{{#if persona}}{{persona}}\n{{/if}}"
)
#: SillyTavern 1.12.6 ``defaultExampleSeparator`` / ``defaultChatStart`` (``power-user.js``).
DEFAULT_EXAMPLE_SEPARATOR = "***"
DEFAULT_CHAT_START = "***"
#: SillyTavern ``tokenizers.BEST_MATCH`` (``tokenizers.js``), ``power_user.tokenizer``'s default.
TOKENIZER_BEST_MATCH = 99


class InstructTemplate(BaseModel):
    """SillyTavern's instruct mode settings (``power_user.instruct``, ``instruct-mode.js``).

    Field names and defaults are 1.12.6's ``power_user.instruct`` defaults, completed by
    ``migrateInstructModeSettings`` (``first_input_sequence``, ``last_input_sequence``,
    ``skip_examples``, ``names_force_groups``). ``preset`` is the selected preset's name (a preset
    file's ``name``); ``enabled`` only means something for the live settings. Sequences may hold
    macros (``{{char}}``, ``{{user}}``, ``{{name}}``) expanded when ``macro`` is on.
    ``separator_sequence`` is the deprecated name of ``output_suffix`` (migrated on import).
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    preset: str = "Alpaca"
    input_sequence: str = "### Instruction:"
    input_suffix: str = ""
    output_sequence: str = "### Response:"
    output_suffix: str = ""
    system_sequence: str = ""
    system_suffix: str = ""
    last_system_sequence: str = ""
    first_input_sequence: str = ""
    last_input_sequence: str = ""
    first_output_sequence: str = ""
    last_output_sequence: str = ""
    system_sequence_prefix: str = ""
    system_sequence_suffix: str = ""
    stop_sequence: str = ""
    wrap: bool = True
    macro: bool = True
    names_behavior: InstructNamesBehavior = INSTRUCT_NAMES_FORCE
    activation_regex: str = ""
    bind_to_context: bool = False
    user_alignment_message: str = ""
    system_same_as_user: bool = False
    skip_examples: bool = False
    names_force_groups: bool = True
    separator_sequence: str = ""


class ContextTemplate(BaseModel):
    r"""SillyTavern's context template (``power_user.context``, ``power-user.js``).

    ``story_string`` is a Handlebars template (``renderStoryString``: ``{{#if}}`` blocks over
    ``system``, ``description``, ``personality``, ``scenario``, ``persona``, ``wiBefore``,
    ``wiAfter``, ``loreBefore``, ``loreAfter``, ``mesExamples``, ``mesExamplesRaw``, ``char``,
    ``user``, then SillyTavern's macros). ``example_separator`` heads each example dialogue,
    ``chat_start`` precedes the history. ``use_stop_strings`` adds both as stop strings,
    ``names_as_stop_strings`` adds ``\nName:`` ones. The last three fields are carried by
    context *preset files* only (SillyTavern applies them to the global ``power_user``
    switches of the same names when a preset is selected); ``None`` = not in the file.
    """

    model_config = ConfigDict(extra="forbid")

    preset: str = "Default"
    story_string: str = DEFAULT_STORY_STRING
    chat_start: str = DEFAULT_CHAT_START
    example_separator: str = DEFAULT_EXAMPLE_SEPARATOR
    use_stop_strings: bool = True
    allow_jailbreak: bool = False
    names_as_stop_strings: bool = True
    always_force_name2: bool | None = None
    trim_sentences: bool | None = None
    single_line: bool | None = None


class SystemPromptPreset(BaseModel):
    """SillyTavern 1.12.6's system prompt (``power_user.sysprompt``, ``sysprompt.js``).

    ``name`` is the selected preset (a ``sysprompt/*.json`` file's ``name``); ``content`` may
    hold macros. With ``enabled`` off the Text Completion story string gets no ``{{system}}``.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    name: str = "Neutral - Chat"
    content: str = "Write {{char}}'s next reply in a fictional chat between {{char}} and {{user}}."


class TextCompletionSetup(BaseModel):
    r"""What SillyTavern 1.12.6's Text Completion path reads beyond the Chat Completion setup.

    Present (``SillyTavernSetup.text_completion``) when the folder's ``main_api`` is not
    ``openai``: the chat is then sent as ONE prompt string built by ``script.js`` ``Generate``'s
    non-OpenAI branch and ``instruct-mode.js`` (:mod:`engine.assembly.textcompletion`).
    Switches shared with Chat Completion (``collapse_newlines``, ``pin_examples``,
    ``strip_examples``, ``prefer_character_prompt``, ``prefer_character_jailbreak``, the persona
    and the Author's Note) stay on :class:`SillyTavernSetup`.

    Attributes
    ----------
    main_api:
        ``settings.json`` ``main_api``: ``kobold``, ``koboldhorde``, ``textgenerationwebui``,
        ``novel``.
    instruct, context, sysprompt:
        The live ``power_user.instruct`` / ``power_user.context`` / ``power_user.sysprompt``
        (what SillyTavern builds with; the preset name is only a label).
    tokenizer:
        ``power_user.tokenizer``: a ``tokenizers.js`` ``tokenizers`` id (99 best match).
    token_padding:
        ``power_user.token_padding``: tokens added to each whole-prompt count
        (``getTokenCountAsync(text, padding)``), a margin for the history cut.
    max_context, amount_gen:
        ``settings.json`` ``max_context`` (context size, tokens) and ``amount_gen`` (reply
        length, tokens); the history fills ``max_context - amount_gen``.
    textgen_type, server_url, model:
        ``textgenerationwebui_settings.type`` (``ooba``, ``koboldcpp``, ``llamacpp``,
        ``tabby``, ``vllm``, ``ollama``, ...), the server URL for that type
        (``server_urls[type]``, or ``api_server`` for ``kobold``) and the model name when the
        settings name one.
    custom_stopping_strings, custom_stopping_strings_macro:
        ``power_user.custom_stopping_strings`` (a JSON array as text, as SillyTavern keeps it)
        and whether macros are expanded in them.
    always_force_name2, trim_sentences, single_line:
        ``power_user`` switches: end a plain prompt with ``{{char}}:``; trim the reply to whole
        sentences; stop at the first newline (adds ``"\n"`` as a stop string). The "Start Reply
        With" text (``power_user.user_prompt_bias``) is :attr:`SillyTavernSetup.start_reply_with`,
        read by both paths; a setup stored with the older ``user_prompt_bias`` key here is read
        into it (:meth:`SillyTavernSetup._start_reply_with_moved`).
    horde_auto_adjust_context:
        ``horde_settings.auto_adjust_context_length`` (Kobold Horde: SillyTavern shrinks the window
        to the chosen workers' limit, which is not known offline).
    instruct_presets, context_presets, sysprompt_presets:
        The folder's ``instruct/``, ``context/`` and ``sysprompt/`` presets, for switching
        (empty when the folder has none).
    """

    model_config = ConfigDict(extra="forbid")

    main_api: str = "textgenerationwebui"
    instruct: InstructTemplate = Field(default_factory=InstructTemplate)
    context: ContextTemplate = Field(default_factory=ContextTemplate)
    sysprompt: SystemPromptPreset = Field(default_factory=SystemPromptPreset)
    tokenizer: int = TOKENIZER_BEST_MATCH
    token_padding: int = 64
    max_context: int = 2048
    amount_gen: int = 80
    textgen_type: str = "ooba"
    server_url: str = ""
    model: str | None = None
    custom_stopping_strings: str = ""
    custom_stopping_strings_macro: bool = True
    always_force_name2: bool = False
    trim_sentences: bool = False
    single_line: bool = False
    horde_auto_adjust_context: bool = False
    instruct_presets: list[InstructTemplate] = Field(default_factory=list)
    context_presets: list[ContextTemplate] = Field(default_factory=list)
    sysprompt_presets: list[SystemPromptPreset] = Field(default_factory=list)


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


class GroupMember(BaseModel):
    """One member of a SillyTavern group (``groups/<id>.json`` ``members[]``), as imported.

    Attributes
    ----------
    avatar:
        The member's card file name in ``characters/`` (what ``group.members`` holds).
    key:
        The card's path in the folder (``characters/<avatar>``), ``None`` when the card is missing
        (SillyTavern then skips the member everywhere, ``characters.find`` failing).
    name:
        The card's name (``""`` when missing).
    worlds:
        The names of the member's character worlds (``getCharacterLore``: ``extensions.world`` and
        the ``charLore`` extra books), used when the member speaks.
    talkativeness:
        ``data.extensions.talkativeness`` (``activateNaturalOrder``'s roll), 0.5 by default.
    tags, regex_allowed, note:
        The member's ``tag_map`` tags, whether its own regex scripts may run
        (``character_allowed_regex``) and its Author's Note (``extension_settings.note.chara``);
        they replace the chat's ``character_tags`` / ``character_regex_allowed`` / ``character_note``
        when it speaks.
    character:
        In a request only (filled by :meth:`engine.storage.Store.chats.build_request`, never stored): the
        member's card as the library holds it; ``None`` when missing.
    """

    model_config = ConfigDict(extra="forbid")

    avatar: str
    key: str | None = None
    name: str = ""
    worlds: list[str] = Field(default_factory=list)
    talkativeness: float = 0.5
    tags: list[str] = Field(default_factory=list)
    regex_allowed: bool = False
    note: CharacterNote | None = None
    character: Character | None = None


class GroupSetup(BaseModel):
    """A SillyTavern group chat's group (``groups/<id>.json``; ``public/scripts/group-chats.js``).

    Attributes
    ----------
    id, name:
        The group's ``id`` and ``name``.
    members:
        Every member in list order (``group.members``), missing cards included.
    disabled_members:
        Avatars of the muted members (``group.disabled_members``).
    activation_strategy:
        ``group_activation_strategy``: 0 natural order, 1 list order (SillyTavern 1.12.6 has no
        other); any other value activates nobody in SillyTavern.
    generation_mode:
        ``group_generation_mode``: 0 swap character cards, 1 join them, 2 join them including muted
        members (``getGroupCharacterCards``).
    join_prefix, join_suffix:
        ``generation_mode_join_prefix`` / ``_suffix`` (``<FIELDNAME>`` is the field's label).
    allow_self_responses:
        ``group.allow_self_responses`` (natural order may pick the last speaker again).
    instruct_wrap:
        ``power_user.instruct.wrap`` (``settings.json``): a newline between a joined field and its
        prefix / suffix (``getGroupCharacterCards``).
    speaker:
        In a request only: the name (or avatar) of the member to preview the prompt for; ``None``
        picks the member SillyTavern's strategy would (:func:`engine.assembly.st_group.next_speaker`).
    """

    model_config = ConfigDict(extra="forbid")

    id: str = ""
    name: str = ""
    members: list[GroupMember] = Field(default_factory=list)
    disabled_members: list[str] = Field(default_factory=list)
    activation_strategy: int = 0
    generation_mode: int = 0
    join_prefix: str = ""
    join_suffix: str = ""
    allow_self_responses: bool = False
    instruct_wrap: bool = True
    speaker: str | None = None


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
    text_completion:
        SillyTavern's Text Completion setup when the folder's ``main_api`` is a Text Completion
        backend (the chat is then one prompt string); ``None`` = Chat Completion.
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
    group:
        The group of a group chat (``groups/*.json``), ``None`` for a 1-on-1 chat.
    """

    @model_validator(mode="before")
    @classmethod
    def _start_reply_with_moved(cls, data: Any) -> Any:
        """Read a setup stored before the two paths shared Start Reply With.

        Such a setup holds it as ``text_completion.user_prompt_bias``; it becomes
        ``start_reply_with`` (when that is empty) and the old key is dropped.
        """
        if not isinstance(data, dict):
            return data
        tc = data.get("text_completion")
        if not isinstance(tc, dict) or "user_prompt_bias" not in tc:
            return data
        tc = dict(tc)
        old = tc.pop("user_prompt_bias")
        data = {**data, "text_completion": tc}
        if isinstance(old, str) and old and not data.get("start_reply_with"):
            data["start_reply_with"] = old
        return data

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
    text_completion: TextCompletionSetup | None = None

    # ---- issue 27 (keep new fields at the end; issue 26 added text_completion above) ----
    character_avatar: str = ""
    character_tags: list[str] = Field(default_factory=list)
    tag_names: dict[str, str] = Field(default_factory=dict)
    start_reply_with: str = ""
    regex_scripts: list[RegexScript] = Field(default_factory=list)
    regex_disabled: bool = False
    character_regex_allowed: bool = False
    character_note: CharacterNote | None = None
    global_variables: dict[str, Any] = Field(default_factory=dict)
    group: GroupSetup | None = None  # issue 27 item 7 (group chats)
