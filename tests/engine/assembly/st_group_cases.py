"""Expected next-speaker prompts of the group chat fixture (tests/engine/importers/st_group_fixture.py).

``messages``: the Chat Completion request SillyTavern 1.12.6 builds, from its own ``Generate`` (dry run,
``main_api`` openai → ``prepareOpenAIMessages`` → ``populateChatCompletion`` / ``populateChatHistory``,
``PromptManager``, ``ChatCompletion``), with the group selected and the speaker as ``this_chid`` as
``generateGroupWrapper`` sets it (``group-chats.js`` ``getGroupCharacterCards`` / ``getGroupDepthPrompts``
loaded verbatim), run under Node outside the repository. World Info was given as its activated entries
(Kael's ``HeroLore`` "sword" entry when Kael speaks, none for Mira: ``getCharacterLore`` reads the
speaker's worlds only). ``st_speaker``: the first member ``activateNaturalOrder`` / ``activateListOrder``
returns for the chat (talkativeness rolls never succeeding).
"""

from __future__ import annotations

from typing import Any

#: case -> group file overrides, extra chat lines, speaker asked for, the speaker SillyTavern picks, messages.
CASES: dict[str, dict[str, Any]] = {
    'natural_swap_kael': {   'extra': [],
        'group': {},
        'messages': [   {'content': 'You are Kael. Reply to Alex.', 'role': 'system'},
                        {'content': "[World: HeroLore: Kael's sword is named Ember.]", 'role': 'system'},
                        {'content': "Alex is a young cartographer from Kael's past.", 'role': 'system'},
                        {'content': 'Kael is a wandering swordsman who owes Alex a debt.', 'role': 'system'},
                        {'content': "[Kael's personality: wry, loyal]", 'role': 'system'},
                        {   'content': '[Circumstances and context of the dialogue: A storm drives Kael and Alex '
                                       'into the harbor.]',
                            'role': 'system'},
                        {'content': 'Write two short paragraphs.', 'role': 'system'},
                        {'content': '[Example Chat]', 'role': 'system'},
                        {'content': 'Alex: Where to?', 'name': 'example_user', 'role': 'system'},
                        {   'content': 'Kael: Wherever the wind is kind.',
                            'name': 'example_assistant',
                            'role': 'system'},
                        {'content': '[Start a new group chat. Group members: Kael, Mira]', 'role': 'system'},
                        {   'content': 'Kael: *Kael shakes rain from his cloak.* Evening, Alex.',
                            'role': 'assistant'},
                        {'content': 'Mira: *Mira taps the chart.*', 'role': 'assistant'},
                        {   'content': 'Where is your sword, Kael? Mira says the ship sails at dawn.',
                            'role': 'user'},
                        {'content': '[Write the next reply only as Kael.]', 'role': 'system'},
                        {'content': 'Stay in character as Kael.', 'role': 'system'}],
        'speaker': 'Kael',
        'st_speaker': 'Kael'},
    'natural_swap_mira': {   'extra': [],
        'group': {},
        'messages': [   {'content': 'You are Mira. Reply to Alex.', 'role': 'system'},
                        {'content': "Alex is a young cartographer from Mira's past.", 'role': 'system'},
                        {'content': "Mira is the Gull's navigator; she distrusts Alex.", 'role': 'system'},
                        {'content': "[Mira's personality: sharp, curious]", 'role': 'system'},
                        {   'content': '[Circumstances and context of the dialogue: Mira studies the charts by '
                                       'lamplight.]',
                            'role': 'system'},
                        {'content': 'Write two short paragraphs.', 'role': 'system'},
                        {'content': '[Example Chat]', 'role': 'system'},
                        {'content': 'Alex: Which way?', 'name': 'example_user', 'role': 'system'},
                        {'content': 'Mira: North, by the stars.', 'name': 'example_assistant', 'role': 'system'},
                        {'content': '[Start a new group chat. Group members: Kael, Mira]', 'role': 'system'},
                        {   'content': 'Kael: *Mira shakes rain from his cloak.* Evening, Alex.',
                            'role': 'assistant'},
                        {'content': 'Mira: *Mira taps the chart.*', 'role': 'assistant'},
                        {'content': 'Mira speaks in short sentences.', 'role': 'system'},
                        {   'content': 'Where is your sword, Kael? Mira says the ship sails at dawn.',
                            'role': 'user'},
                        {'content': '[Write the next reply only as Mira.]', 'role': 'system'},
                        {'content': 'Stay in character as Mira.', 'role': 'system'}],
        'speaker': 'Mira',
        'st_speaker': 'Kael'},
    'join_mira': {   'extra': [],
        'group': {   'generation_mode': 1,
                     'generation_mode_join_prefix': '[<FIELDNAME> of {{char}}]',
                     'generation_mode_join_suffix': '[end of {{char}}]'},
        'messages': [   {'content': 'You are Mira. Reply to Alex.', 'role': 'system'},
                        {'content': "Alex is a young cartographer from Mira's past.", 'role': 'system'},
                        {   'content': '[Description of Kael]\n'
                                       'Kael is a wandering swordsman who owes Alex a debt.\n'
                                       '[end of Kael]\n'
                                       '[Description of Mira]\n'
                                       "Mira is the Gull's navigator; she distrusts Alex.\n"
                                       '[end of Mira]',
                            'role': 'system'},
                        {   'content': "[Mira's personality: [Personality of Kael]\n"
                                       'wry, loyal\n'
                                       '[end of Kael]\n'
                                       '[Personality of Mira]\n'
                                       'sharp, curious\n'
                                       '[end of Mira]]',
                            'role': 'system'},
                        {   'content': '[Circumstances and context of the dialogue: [Scenario of Kael]\n'
                                       'A storm drives Kael and Alex into the harbor.\n'
                                       '[end of Kael]\n'
                                       '[Scenario of Mira]\n'
                                       'Mira studies the charts by lamplight.\n'
                                       '[end of Mira]]',
                            'role': 'system'},
                        {'content': 'Write two short paragraphs.', 'role': 'system'},
                        {'content': '[Example Chat]', 'role': 'system'},
                        {   'content': 'Alex: Where to?\n'
                                       'Kael: Wherever the wind is kind.\n'
                                       '[end of Kael]\n'
                                       '[Example Messages of Mira]',
                            'name': 'example_user',
                            'role': 'system'},
                        {'content': '[Example Chat]', 'role': 'system'},
                        {'content': 'Alex: Which way?', 'name': 'example_user', 'role': 'system'},
                        {   'content': 'Mira: North, by the stars.\n[end of Mira]',
                            'name': 'example_assistant',
                            'role': 'system'},
                        {'content': '[Start a new group chat. Group members: Kael, Mira]', 'role': 'system'},
                        {   'content': 'Kael: *Mira shakes rain from his cloak.* Evening, Alex.',
                            'role': 'assistant'},
                        {'content': 'Mira: *Mira taps the chart.*', 'role': 'assistant'},
                        {'content': 'Mira speaks in short sentences.', 'role': 'system'},
                        {   'content': 'Where is your sword, Kael? Mira says the ship sails at dawn.',
                            'role': 'user'},
                        {'content': '[Write the next reply only as Mira.]', 'role': 'system'},
                        {'content': 'Stay in character as Mira.', 'role': 'system'}],
        'speaker': 'Mira',
        'st_speaker': 'Kael'},
    'join_kael_muted_mira': {   'extra': [],
        'group': {'activation_strategy': 1, 'disabled_members': ['hero.png'], 'generation_mode': 1},
        'messages': [   {'content': 'You are Mira. Reply to Alex.', 'role': 'system'},
                        {'content': "Alex is a young cartographer from Mira's past.", 'role': 'system'},
                        {'content': "Mira is the Gull's navigator; she distrusts Alex.", 'role': 'system'},
                        {'content': "[Mira's personality: sharp, curious]", 'role': 'system'},
                        {   'content': '[Circumstances and context of the dialogue: Mira studies the charts by '
                                       'lamplight.]',
                            'role': 'system'},
                        {'content': 'Write two short paragraphs.', 'role': 'system'},
                        {'content': '[Example Chat]', 'role': 'system'},
                        {'content': 'Alex: Which way?', 'name': 'example_user', 'role': 'system'},
                        {'content': 'Mira: North, by the stars.', 'name': 'example_assistant', 'role': 'system'},
                        {'content': '[Start a new group chat. Group members: Kael, Mira]', 'role': 'system'},
                        {   'content': 'Kael: *Mira shakes rain from his cloak.* Evening, Alex.',
                            'role': 'assistant'},
                        {'content': 'Mira: *Mira taps the chart.*', 'role': 'assistant'},
                        {'content': 'Mira speaks in short sentences.', 'role': 'system'},
                        {   'content': 'Where is your sword, Kael? Mira says the ship sails at dawn.',
                            'role': 'user'},
                        {'content': '[Write the next reply only as Mira.]', 'role': 'system'},
                        {'content': 'Stay in character as Mira.', 'role': 'system'}],
        'speaker': 'Mira',
        'st_speaker': 'Mira'},
    'join_disabled_too_mira': {   'extra': [],
        'group': {'activation_strategy': 1, 'disabled_members': ['hero.png'], 'generation_mode': 2},
        'messages': [   {'content': 'You are Mira. Reply to Alex.', 'role': 'system'},
                        {'content': "Alex is a young cartographer from Mira's past.", 'role': 'system'},
                        {   'content': 'Kael is a wandering swordsman who owes Alex a debt.\n'
                                       "Mira is the Gull's navigator; she distrusts Alex.",
                            'role': 'system'},
                        {'content': "[Mira's personality: wry, loyal\nsharp, curious]", 'role': 'system'},
                        {   'content': '[Circumstances and context of the dialogue: A storm drives Kael and Alex '
                                       'into the harbor.\n'
                                       'Mira studies the charts by lamplight.]',
                            'role': 'system'},
                        {'content': 'Write two short paragraphs.', 'role': 'system'},
                        {'content': '[Example Chat]', 'role': 'system'},
                        {   'content': 'Alex: Where to?\nKael: Wherever the wind is kind.',
                            'name': 'example_user',
                            'role': 'system'},
                        {'content': '[Example Chat]', 'role': 'system'},
                        {'content': 'Alex: Which way?', 'name': 'example_user', 'role': 'system'},
                        {'content': 'Mira: North, by the stars.', 'name': 'example_assistant', 'role': 'system'},
                        {'content': '[Start a new group chat. Group members: Kael, Mira]', 'role': 'system'},
                        {   'content': 'Kael: *Mira shakes rain from his cloak.* Evening, Alex.',
                            'role': 'assistant'},
                        {'content': 'Mira: *Mira taps the chart.*', 'role': 'assistant'},
                        {'content': 'Mira speaks in short sentences.', 'role': 'system'},
                        {   'content': 'Where is your sword, Kael? Mira says the ship sails at dawn.',
                            'role': 'user'},
                        {'content': '[Write the next reply only as Mira.]', 'role': 'system'},
                        {'content': 'Stay in character as Mira.', 'role': 'system'}],
        'speaker': 'Mira',
        'st_speaker': 'Mira'},
    'natural_last_is_kael': {   'extra': [   {   'extra': {},
                         'is_system': False,
                         'is_user': False,
                         'mes': 'Ask Kael or Mira, not me.',
                         'name': 'Kael',
                         'send_date': 'x'}],
        'group': {},
        'messages': [   {'content': 'You are Mira. Reply to Alex.', 'role': 'system'},
                        {'content': "Alex is a young cartographer from Mira's past.", 'role': 'system'},
                        {'content': "Mira is the Gull's navigator; she distrusts Alex.", 'role': 'system'},
                        {'content': "[Mira's personality: sharp, curious]", 'role': 'system'},
                        {   'content': '[Circumstances and context of the dialogue: Mira studies the charts by '
                                       'lamplight.]',
                            'role': 'system'},
                        {'content': 'Write two short paragraphs.', 'role': 'system'},
                        {'content': '[Example Chat]', 'role': 'system'},
                        {'content': 'Alex: Which way?', 'name': 'example_user', 'role': 'system'},
                        {'content': 'Mira: North, by the stars.', 'name': 'example_assistant', 'role': 'system'},
                        {'content': '[Start a new group chat. Group members: Kael, Mira]', 'role': 'system'},
                        {   'content': 'Kael: *Mira shakes rain from his cloak.* Evening, Alex.',
                            'role': 'assistant'},
                        {'content': 'Mira: *Mira taps the chart.*', 'role': 'assistant'},
                        {   'content': 'Where is your sword, Kael? Mira says the ship sails at dawn.',
                            'role': 'user'},
                        {'content': 'Mira speaks in short sentences.', 'role': 'system'},
                        {'content': 'Kael: Ask Kael or Mira, not me.', 'role': 'assistant'},
                        {'content': '[Write the next reply only as Mira.]', 'role': 'system'},
                        {'content': 'Stay in character as Mira.', 'role': 'system'}],
        'speaker': 'Mira',
        'st_speaker': 'Mira'},
}
