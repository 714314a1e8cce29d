"""A client for OpenAI-compatible text-completion endpoints: ``POST {base}/v1/completions``.

SillyTavern's Text Completion path builds one prompt string (SPEC §9.1); llama.cpp server,
KoboldCpp, TabbyAPI, vLLM and text-generation-webui all serve it on the OpenAI "Create
completion" route (OpenAI API reference, legacy Completions): the body carries ``model``,
``prompt`` (the string), ``max_tokens`` (the reply length), ``stop`` (the stop strings) and
``stream``; a non-streamed answer is a JSON object with ``choices[0].text``; a streamed answer is
Server-Sent Events, each ``data:`` chunk with ``choices[0].text`` pieces, ending with
``data: [DONE]``.

An endpoint without that route (HTTP 404 / 405 / 501, or an error saying the model or server
serves only chat completions) fails with ``PROVIDER_NO_TEXT_COMPLETION``
(:func:`engine.providers.errors.error_for_text_status`). Threading, cancel, timeouts and the
other error codes are :class:`~engine.providers.openai_compat.OpenAICompatClient`'s.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import httpx

from ..errors import ProviderError
from .errors import error_for_text_status
from .openai_compat import OpenAICompatClient, ProviderReply, _bad, _int_usage, _StreamState, first_choice
from .params import REPLY_LIMIT_FIELDS

#: Fields of a chat-completions body that a text-completion body never carries.
CHAT_ONLY_FIELDS: tuple[str, ...] = ("messages", "tools", "tool_choice", "max_completion_tokens")


def text_completions_url(base_url: str) -> str:
    """The text-completion route for ``base_url``: ``…/v1/completions``.

    ``http://h:5001`` and ``http://h:5001/`` → ``http://h:5001/v1/completions`` (SillyTavern's
    server URLs for KoboldCpp, llama.cpp and TabbyAPI have no ``/v1``); ``http://h/v1`` →
    ``http://h/v1/completions``; a URL already ending in ``/completions`` is kept, and one ending
    in ``/chat/completions`` is pointed at the text route beside it.
    """
    base = base_url.strip().rstrip("/")
    if base.endswith("/chat/completions"):
        return base[: -len("/chat/completions")] + "/completions"
    if base.endswith("/completions"):
        return base
    if base.rsplit("/", 1)[-1] in ("v1", "openai"):  # an OpenAI-style API root
        return f"{base}/completions"
    return f"{base}/v1/completions"


def _choice_text(choice: dict[str, Any]) -> str:
    """``choices[i].text`` (servers that answer in chat shape: ``message`` / ``delta`` ``content``)."""
    text = choice.get("text")
    if text is None:
        inner = choice.get("delta") or choice.get("message") or {}
        text = inner.get("content") if isinstance(inner, dict) else None
    if text is None:
        return ""
    if not isinstance(text, str):
        raise _bad("the provider's completion text is not text")
    return text


def parse_text_completion(doc: object) -> ProviderReply:
    """Read a non-streamed text completion (``choices[0].text``). Raises ``PROVIDER_BAD_RESPONSE``."""
    choice = first_choice(doc)
    assert isinstance(doc, dict)
    finish = choice.get("finish_reason")
    return ProviderReply(content=_choice_text(choice), finish_reason=str(finish) if finish is not None else None,
                         usage=_int_usage(doc.get("usage")))


class _TextStreamState(_StreamState):
    """Accumulates streamed ``choices[0].text`` pieces into one reply (chunks read as chat ones are)."""

    def _apply(self, choice: dict[str, Any]) -> str:
        piece = _choice_text(choice)
        self.parts.append(piece)
        return piece


def text_request_body(model: str, prompt: str, *, stop: list[str], max_tokens: int | None, stream: bool,
                      extra_body: dict[str, Any] | None) -> dict[str, Any]:
    """The text-completion body.

    ``extra_body`` (sampler settings: ``temperature``, ``top_p``, …) goes under the fixed fields
    and never replaces ``model``, ``prompt``, ``stream``, ``stop`` or the reply length; chat-only
    fields in it (``messages``, ``tools``, ``max_completion_tokens``) are dropped. ``max_tokens``
    ``None`` (or ≤ 0) sends no reply limit; an empty ``stop`` sends no ``stop`` field.
    """
    extra = {k: v for k, v in (extra_body or {}).items() if k not in CHAT_ONLY_FIELDS}
    if max_tokens is not None:
        for key in REPLY_LIMIT_FIELDS:
            extra.pop(key, None)
    extra.pop("stop", None)
    body: dict[str, Any] = {**extra, "model": model, "prompt": prompt, "stream": stream}
    if max_tokens is not None and max_tokens > 0:
        body["max_tokens"] = max_tokens
    if stop:
        body["stop"] = list(stop)
    return body


class TextCompletionsClient(OpenAICompatClient):
    """One OpenAI-compatible text-completion endpoint.

    Parameters as :class:`~engine.providers.openai_compat.ChatCompletionsClient`; ``base_url``
    may be an API root with or without ``/v1`` (see :func:`text_completions_url`).
    """

    @staticmethod
    def route_url(base_url: str) -> str:
        """``…/v1/completions`` (:func:`text_completions_url`)."""
        return text_completions_url(base_url)

    def _parse(self, doc: object) -> ProviderReply:
        return parse_text_completion(doc)

    def _stream_state(self) -> _StreamState:
        return _TextStreamState()

    def _status_error(self, status: int, raw: bytes, headers: httpx.Headers) -> ProviderError:
        return error_for_text_status(status, raw, headers)

    def complete(
        self,
        model: str,
        prompt: str,
        *,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        stream: bool = True,
        extra_body: dict[str, Any] | None = None,
        on_delta: Callable[[str, str], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> ProviderReply:
        """Send one text-completion request and return the reply (``ProviderReply.content``).

        Parameters
        ----------
        model:
            The ``model`` field (local servers mostly ignore it).
        prompt:
            The exact prompt string (``ContextPreview.prompt``), sent unchanged.
        stop:
            Stop strings (``ContextPreview.stop``).
        max_tokens:
            The reply length in tokens (``ContextPreview.reply_reserve``, SillyTavern ``amount_gen``).
        stream, extra_body, on_delta, cancel:
            As :meth:`ChatCompletionsClient.complete`.

        Raises
        ------
        ProviderError
            ``PROVIDER_NO_TEXT_COMPLETION`` (the endpoint serves only chat completions), or any
            code of :meth:`ChatCompletionsClient.complete`.
        """
        body = text_request_body(model, prompt, stop=list(stop or []), max_tokens=max_tokens, stream=stream,
                                 extra_body=extra_body)
        return self._run(body, stream, on_delta, cancel)
