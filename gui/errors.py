"""User-facing messages for the engine's stable error codes.

The GUI never parses ``str(exc)``: it maps :attr:`engine.errors.LoomscopeError.code` (or a
``PreviewError.code``/audit ``error_code``) to a sentence here, and adds the structured
``file``/``place`` fields the error carries (STYLE.md 9, like qutebrowser's ``KnownError``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from engine.errors import ERROR_CODES, LoomscopeError

log = logging.getLogger(__name__)

#: Code → what the writer should read. Codes missing here fall back to ``ERROR_CODES``' text.
USER_MESSAGES: dict[str, str] = {
    "TOKEN_BUDGET_EXCEEDED": (
        "The protected blocks alone do not fit the prompt budget. Unpin messages, shorten the "
        "system prompt, character or persona (the Setup tab edits the prompts and the persona), "
        "lower the reply reserve or raise the context limit (Setup → Model and budget)."
    ),
    "EMPTY_PROMPT": "There is nothing to send: the chat is empty or every message is excluded. "
                    "Write a message or include some history first.",
    "INVALID_SETTINGS": "A context setting is out of range or malformed.",
    "UNKNOWN_STRATEGY": "No context strategy is registered under that name.",
    "UNKNOWN_TOKENIZER": "No tokenizer profile is registered under that name.",
    "DUPLICATE_REGISTRATION": "A plugin tried to register a name that already exists.",
    "STRATEGY_FAILED": "The context strategy failed; the preview fell back to truncation.",
    "IMPORT_FILE_NOT_FOUND": "The file does not exist or cannot be read.",
    "IMPORT_EMPTY_FILE": "The file is empty.",
    "IMPORT_TOO_LARGE": "The file is too large to import.",
    "IMPORT_INVALID_UTF8": "The file is not valid UTF-8 text.",
    "IMPORT_INVALID_JSON": "The file is not valid JSON.",
    "IMPORT_TOO_DEEP": "The JSON is nested too deeply.",
    "IMPORT_INVALID_PNG": "The PNG image is truncated or corrupt.",
    "IMPORT_NO_CARD_CHUNK": "The PNG image carries no character card.",
    "IMPORT_BAD_BASE64": "The character card inside the PNG is not valid base64.",
    "IMPORT_INVALID_CARD": "The character card is malformed.",
    "IMPORT_INVALID_LOREBOOK": "The lorebook is malformed.",
    "IMPORT_INVALID_CHAT": "The chat file is malformed.",
    "IMPORT_WRONG_TYPE": "A field in the file has the wrong type.",
    "IMPORT_UNSUPPORTED_SPEC": "The file declares a card or lorebook version Loomscope does not read.",
    "IMPORT_UNSUPPORTED_FORMAT": "This is not a character card, world/lorebook or chat file.",
    "IMPORT_OUTSIDE_FOLDER": "A link in the folder leads outside it; Loomscope did not follow it.",
    "IMPORT_FORBIDDEN_FILE": "Loomscope never reads this file (API keys, or the open library itself).",
    "CHAT_NOT_FOUND": "That chat is no longer in the library.",
    "AUDIT_NOT_FOUND": "This chat has no stored generation audit yet.",
    "CHARACTER_NOT_FOUND": "That character is no longer in the library.",
    "LOREBOOK_NOT_FOUND": "That lorebook is no longer in the library.",
    "MESSAGE_NOT_FOUND": "That message is no longer in the chat.",
    "PERSONA_NOT_FOUND": "That persona is no longer in the library.",
    "EXPORT_TARGET_EXISTS": "The export would overwrite a file that already exists.",
    "EXPORT_TARGET_FOREIGN": "The export folder holds a file of the same name that is not SillyTavern's.",
    "EXPORT_NOT_WRITABLE": "The export folder cannot be written.",
    "STORAGE_ERROR": "The library database could not be read or written.",
    "INVALID_REQUEST": "The request is malformed.",
    "ROUTE_NOT_FOUND": "The local API has no such route.",
    "ADDRESS_UNAVAILABLE": "The local API could not listen on that address.",
    "REMOTE_HOST_REFUSED": "The local API refuses connections from other machines unless allowed.",
    "PROVIDER_TIMEOUT": "The provider did not answer in time.",
    "PROVIDER_RATE_LIMITED": "The provider is rate-limiting requests; wait and try again.",
    "PROVIDER_AUTHENTICATION": "The provider rejected the API key.",
    "PROVIDER_CONTEXT_LENGTH_EXCEEDED": "The provider says the prompt is too long for the model.",
    "PROVIDER_SERVER_ERROR": "The provider failed with a server error.",
    "PROVIDER_NETWORK_ERROR": "The provider could not be reached.",
    "PROVIDER_BAD_RESPONSE": "The provider's answer was not a valid chat completion.",
    "PROVIDER_BAD_REQUEST": "The provider rejected the request.",
    "PROVIDER_NO_TEXT_COMPLETION": "This endpoint only speaks Chat Completion; a Text Completion prompt needs a "
                                   "server with /v1/completions (llama.cpp, KoboldCpp, TabbyAPI, vLLM, "
                                   "text-generation-webui). Change the base URL in Provider settings.",
    "CANCELLED": "The generation was cancelled.",
    "NO_API_KEY": "No API key was found. Enter one in Provider settings, or set LOOMSCOPE_API_KEY.",
    # GUI-side codes (not engine errors): an unexpected exception is never shown raw.
    "INTERNAL_ERROR": "Something unexpected went wrong; the details are in the log.",
    "INVALID_INPUT": "That value is not valid.",
}


@dataclass(frozen=True)
class UserError:
    """An error ready to show: ``code``, the mapped ``text``, and where (``file``, ``place``)."""

    code: str
    text: str
    file: str | None = None
    place: str | None = None

    def full_text(self) -> str:
        """``text`` followed by the file and place lines when known."""
        lines = [self.text]
        if self.file:
            lines.append(f"File: {self.file}")
        if self.place:
            lines.append(f"Where: {self.place}")
        lines.append(f"Code: {self.code}")
        return "\n".join(lines)


def message_for(code: str) -> str:
    """The user message for a stable ``code`` (falls back to the code table, then a generic text)."""
    if code in USER_MESSAGES:
        return USER_MESSAGES[code]
    if code in ERROR_CODES:
        text = ERROR_CODES[code]
        return text[:1].upper() + text[1:] + "."
    return USER_MESSAGES["INTERNAL_ERROR"]


def user_error(exc: BaseException) -> UserError:
    """Map any exception to a :class:`UserError` by its stable code (never by its text)."""
    if isinstance(exc, LoomscopeError):
        return UserError(exc.code, message_for(exc.code), exc.file, exc.place)
    return UserError("INTERNAL_ERROR", message_for("INTERNAL_ERROR"))


def worker_error(exc: BaseException, what: str) -> UserError:
    """The :class:`UserError` for ``exc`` caught by a worker or an action doing ``what``.

    An engine error (:class:`~engine.errors.LoomscopeError`) maps by its stable code; anything
    else is a bug: it is logged with its traceback (``"<what> failed"``) and the writer reads
    the generic ``INTERNAL_ERROR`` text, never ``str(exc)`` (STYLE.md 9).
    """
    if not isinstance(exc, LoomscopeError):
        log.error("%s failed", what, exc_info=exc)
    return user_error(exc)
