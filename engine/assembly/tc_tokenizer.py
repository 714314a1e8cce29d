"""The tokenizer a Text Completion chat counts with, and its :class:`TokenizerProfile` face.

:func:`text_tokenizer_for` returns SillyTavern's Text Completion tokenizer for the setup
(``power_user.tokenizer`` resolved by ``main_api`` and the model name, ``tokenizers.js``;
:mod:`engine.tokenizers.sillytavern_text`); :func:`profile_of` is its
:class:`~engine.tokenizers.TokenizerProfile` for the parts of the pipeline that take one
(generation, recounts). Both are module-level names so that tests can count with a stand-in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..schema.settings import ContextSettings
from ..schema.sillytavern import TextCompletionSetup
from ..tokenizers import TokenizerProfile
from ..tokenizers.sillytavern_text import TextTokenizer, sillytavern_text_tokenizer

if TYPE_CHECKING:
    from ..registries import Registries


def text_tokenizer_for(tc: TextCompletionSetup, settings: ContextSettings, registries: Registries) -> TextTokenizer:
    """The tokenizer SillyTavern's Text Completion path counts ``tc``'s chat with.

    ``settings`` and ``registries`` are not read (SillyTavern's choice depends on the setup only);
    they are taken so that a stand-in can be given the same arguments.

    Raises
    ------
    SettingsError
        ``UNKNOWN_TOKENIZER`` for a ``power_user.tokenizer`` SillyTavern 1.12.6 does not define.
    """
    return sillytavern_text_tokenizer(tc.tokenizer, tc.main_api, tc.model)


def profile_of(tok: TextTokenizer) -> TokenizerProfile:
    """``tok`` as a :class:`TokenizerProfile` (the same counts and cache)."""
    return tok.profile


__all__ = ["profile_of", "text_tokenizer_for"]
