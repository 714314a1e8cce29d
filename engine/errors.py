"""Errors with stable codes.

Every error the engine raises on purpose is a :class:`LoomscopeError` (or a subclass) carrying
a stable UPPER_SNAKE ``code``. Codes are a public interface (CLI, HTTP API, GUI messages):
extend the list, never rename. ``tests/engine/test_errors.py`` pins the full list.
"""

from __future__ import annotations

import re
from typing import Any

#: Every stable error code, with a one-line meaning. Pinned by a test.
ERROR_CODES: dict[str, str] = {
    # budget / pipeline
    "TOKEN_BUDGET_EXCEEDED": "the protected blocks alone exceed the prompt budget",
    "EMPTY_PROMPT": "the prompt has no messages to send (empty chat, or everything excluded)",
    "INVALID_SETTINGS": "a context setting is out of range or malformed",
    "UNKNOWN_STRATEGY": "no context strategy is registered under that name",
    "UNKNOWN_TOKENIZER": "no tokenizer profile is registered under that name",
    "DUPLICATE_REGISTRATION": "a registry already holds an item under that name",
    "STRATEGY_FAILED": "a context strategy raised or broke the shifting contract",
    # import
    "IMPORT_FILE_NOT_FOUND": "the input file does not exist or cannot be read",
    "IMPORT_EMPTY_FILE": "the input file is empty",
    "IMPORT_TOO_LARGE": "the input exceeds a size limit",
    "IMPORT_INVALID_UTF8": "the input is not valid UTF-8",
    "IMPORT_INVALID_JSON": "the input is not valid JSON (line and column given)",
    "IMPORT_TOO_DEEP": "the JSON is nested deeper than allowed",
    "IMPORT_INVALID_PNG": "the PNG file is truncated or corrupt",
    "IMPORT_NO_CARD_CHUNK": "the PNG has no chara/ccv3 text chunk",
    "IMPORT_BAD_BASE64": "the card chunk is not valid base64",
    "IMPORT_INVALID_CARD": "the character card is malformed",
    "IMPORT_INVALID_LOREBOOK": "the lorebook is malformed",
    "IMPORT_INVALID_CHAT": "the chat is malformed",
    "IMPORT_WRONG_TYPE": "a field has the wrong JSON type (JSON path given)",
    "IMPORT_UNSUPPORTED_SPEC": "the card or lorebook declares an unsupported spec version",
    "IMPORT_UNSUPPORTED_FORMAT": "the file is not a format Loomscope reads",
    "IMPORT_OUTSIDE_FOLDER": "a link leads outside the folder being imported; it was not followed",
    "IMPORT_FORBIDDEN_FILE": "the file is never read (secrets.json, or the open library database itself)",
    "EXPORT_TARGET_EXISTS": "an export would overwrite an existing file (use --force)",
    "EXPORT_TARGET_FOREIGN": "a file the export would replace is not SillyTavern's (not a card, world, chat or settings)",
    "EXPORT_NOT_WRITABLE": "the export folder cannot be written",
    # storage / library
    "CHAT_NOT_FOUND": "no chat with that id in the library",
    "AUDIT_NOT_FOUND": "the chat has no stored audit",
    "CHARACTER_NOT_FOUND": "no character with that id in the library",
    "LOREBOOK_NOT_FOUND": "no lorebook with that id in the library",
    "MESSAGE_NOT_FOUND": "no message with that id in the chat",
    "PERSONA_NOT_FOUND": "no persona with that id in the library",
    "LOREBOOK_ENTRY_NOT_FOUND": "no entry with that uid in the lorebook",
    "STORAGE_ERROR": "the library database could not be read or written",
    # provider
    "PROVIDER_TIMEOUT": "the provider did not answer in time",
    "PROVIDER_RATE_LIMITED": "the provider refused the request for rate limits (HTTP 429)",
    "PROVIDER_AUTHENTICATION": "the provider rejected the API key (HTTP 401/403)",
    "PROVIDER_CONTEXT_LENGTH_EXCEEDED": "the provider reported the prompt too long for the model",
    "PROVIDER_SERVER_ERROR": "the provider failed with a server error (HTTP 5xx)",
    "PROVIDER_NETWORK_ERROR": "the provider could not be reached or dropped the connection",
    "PROVIDER_BAD_RESPONSE": "the provider's answer was not a valid chat completion",
    "PROVIDER_BAD_REQUEST": "the provider rejected the request (HTTP 4xx)",
    "PROVIDER_NO_TEXT_COMPLETION": "the endpoint only speaks Chat Completion: it has no text-completion route "
                                   "(POST /v1/completions) for a Text Completion prompt",
    "CANCELLED": "the generation was cancelled",
    "NO_API_KEY": "no API key was found in the environment or keyring",
    "INVALID_API_KEY": "the API key holds characters no HTTP header can carry (non-ASCII, spaces, CR/LF)",
    # local HTTP API (engine/api, loomscope serve)
    "INVALID_REQUEST": "the HTTP request is malformed (bad JSON, wrong fields or types, disallowed Host)",
    "ROUTE_NOT_FOUND": "no HTTP API route at that path (or not for that method)",
    "INTERNAL_ERROR": "an unexpected error inside Loomscope (a bug; see the server log)",
    "REMOTE_HOST_REFUSED": "serve was asked to listen on a non-loopback address without --allow-remote",
    "ADDRESS_UNAVAILABLE": "the API server could not listen on that host and port",
    "NO_DISPLAY": "the desktop app found no display to open its window on (use --screenshot instead)",
}


class LoomscopeError(Exception):
    """Base error with a stable ``code`` and structured context.

    Parameters
    ----------
    code:
        One of :data:`ERROR_CODES`.
    message:
        Human-readable explanation (never parsed by callers; map ``code`` instead).
    file:
        The input file or argument the error is about, when there is one.
    place:
        Where inside it (``"line 3, column 7"``, a JSON path such as ``$.data.tags``, a block id).
    details:
        Extra structured fields (e.g. ``{"protected_tokens": 105, "budget": 50}``).
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        file: str | None = None,
        place: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"unknown error code {code!r}")
        self.code = code
        self.message = clip_values(message)
        self.file = file
        self.place = clip_values(place) if place is not None else None
        self.details = dict(details or {})
        super().__init__(self.describe())

    def describe(self) -> str:
        """One line: ``<file>: <place>: <message>`` with the parts that are known."""
        parts = [p for p in (self.file, self.place) if p]
        parts.append(self.message)
        return ": ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form ``{"code", "message", "file", "place", "details"}``."""
        return {
            "code": self.code,
            "message": self.message,
            "file": self.file,
            "place": self.place,
            "details": self.details,
        }


#: Characters of one value an error message quotes (issue 25: a 100 KB bad value was quoted whole).
MAX_QUOTED_CHARS = 120
# a quoted value ('…' or "…", escapes allowed) or a run without spaces (or slashes: paths stay whole), longer
# than the limit
_MORE = "{%d,}" % (MAX_QUOTED_CHARS + 1)  # noqa: UP031 - a regex quantifier, braces and all
_LONG_VALUE = re.compile(rf"""'(?:[^'\\]|\\.){_MORE}'|"(?:[^"\\]|\\.){_MORE}"|[^\s'"/]{_MORE}""", re.DOTALL)


def _clip(match: re.Match[str]) -> str:
    text = match.group()
    quote = text[0] if text[0] in "'\"" else ""
    body = text[1:-1] if quote else text
    return f"{quote}{body[:MAX_QUOTED_CHARS - 20]}…{quote} ({len(body):,} characters)"


def clip_values(text: str) -> str:
    """``text`` with each quoted value (or run without spaces and slashes) over :data:`MAX_QUOTED_CHARS` characters cut short.

    The cut value keeps its first characters and says how long it was: ``'xxxx…' (100,000 characters)``.
    """
    if len(text) <= MAX_QUOTED_CHARS:
        return text
    return _LONG_VALUE.sub(_clip, text)


class ImportError_(LoomscopeError):
    """Malformed or unsupported input file; ``code`` starts with ``IMPORT_``."""


# Public alias with a clearer name (``ImportError`` would shadow the builtin).
LoomscopeImportError = ImportError_


class SettingsError(LoomscopeError):
    """Invalid settings or registry use (``INVALID_SETTINGS``, ``UNKNOWN_*``, ``DUPLICATE_REGISTRATION``)."""


class NotFoundError(LoomscopeError):
    """A library object does not exist (``*_NOT_FOUND``)."""


class StorageError(LoomscopeError):
    """The database could not be read or written (``STORAGE_ERROR``)."""


class ProviderError(LoomscopeError):
    """A normalized provider failure (``PROVIDER_*``, ``CANCELLED``, ``NO_API_KEY``).

    Never carries the upstream response body or the API key.
    """
