"""The tokenizer a Text Completion chat counts with, and its :class:`TokenizerProfile` face.

:func:`text_tokenizer_for` returns SillyTavern's Text Completion tokenizer for the setup
(``power_user.tokenizer`` resolved by ``main_api`` and model, ``tokenizers.js``);
:func:`profile_of` wraps it as a :class:`~engine.tokenizers.TokenizerProfile` for the parts of the
pipeline that take one (generation, recounts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..resolve import model_profile_and_limit
from ..schema.settings import ContextSettings
from ..schema.sillytavern import TextCompletionSetup
from ..tokenizers import TokenizerProfile

if TYPE_CHECKING:
    from ..registries import Registries


@dataclass(frozen=True)
class _ProfileTokenizer:
    """A Text Completion tokenizer counted with a registry profile (the chat's model's)."""

    profile: TokenizerProfile
    st_id: int

    @property
    def key(self) -> str:
        return self.profile.name

    @property
    def label(self) -> str:
        return f"{self.profile.name} · {'approximate' if self.profile.approximate else 'exact'}"

    @property
    def approximate(self) -> bool:
        return self.profile.approximate

    @property
    def version(self) -> str:
        return self.profile.version

    def count(self, text: str) -> int:
        return self.profile.count(text) if text else 0

    def prompt_tokens(self, prompt: str) -> int:
        return self.count(prompt)

    def spans(self, text: str) -> list[tuple[int, int]]:
        return list(self.profile.spans(text)) if self.profile.spans is not None else []


def text_tokenizer_for(tc: TextCompletionSetup, settings: ContextSettings, registries: Registries) -> _ProfileTokenizer:
    """The tokenizer SillyTavern's Text Completion path counts ``tc``'s chat with.

    Raises
    ------
    SettingsError
        ``UNKNOWN_TOKENIZER`` for a model without a profile.
    """
    resolved = model_profile_and_limit(settings, registries.tokenizers, sillytavern=True)
    return _ProfileTokenizer(resolved.tokenizer, tc.tokenizer)


def profile_of(tok: _ProfileTokenizer) -> TokenizerProfile:
    """``tok`` as a :class:`TokenizerProfile` (counts, spans; no chat template)."""
    return tok.profile


__all__ = ["profile_of", "text_tokenizer_for"]
