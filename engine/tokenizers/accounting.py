"""Chat-format token accounting, after OpenAI's published rules.

Messages: OpenAI cookbook ``num_tokens_from_messages`` ("How to count tokens with tiktoken"):
every message costs 3 tokens of framing plus the tokens of each of its string values (role,
content, name, ...); a ``name`` costs 1 more; every reply is primed with 3 tokens.

Tool calls (not covered by the cookbook's message function; our documented rule): an
assistant message's ``tool_calls`` add, per call, the tokens of the function name, of the
arguments string, and of the call id when present, plus 3 framing tokens per call. A tool
result's ``tool_call_id`` adds its tokens like any other string value.

Images (``{"type": "image_url", "image_url": {"url", "detail"}}`` content parts): OpenAI's
published vision rule for the gpt-4o / gpt-4-turbo family, as SillyTavern counts them: ``detail:
"low"`` costs 85 tokens; otherwise the image is scaled to fit 2048×2048, then its shorter side to
768 px, and costs 85 + 170 per 512-px tile. The size is read from ``data:`` URLs; for an image
whose size cannot be read offline (a remote URL) the largest cost (8 tiles, 1,445 tokens) is
counted, so a prompt is never sent over budget because of an image.

Other content parts (everything sent is counted; nothing goes over the wire as 0 tokens):

* ``refusal`` parts: their ``refusal`` text.
* ``input_audio`` (``{"input_audio": {"data": <base64>, "format": "wav"|"mp3"}}``): OpenAI
  publishes an audio token rate only for the Realtime API (user audio: 1 token per 100 ms),
  so audio is an *estimate*: :data:`AUDIO_TOKENS_PER_SECOND` per second of audio, the duration
  read from a WAV header, else estimated from the size at :data:`AUDIO_MIN_BYTES_PER_SECOND`
  (a low bitrate, so a long duration: conservative). A prompt with audio is marked
  approximate (see :func:`estimated_parts`) and gets the safety margin.
* ``reasoning`` / ``thinking`` / ``redacted_thinking`` (encrypted reasoning blobs) and ``file``
  parts: every string value in them (text, summary, encrypted content, signature, file data,
  file name, file id) counted as text.
* Any other part type: its JSON text, with a warning (:func:`content_part_warnings`).

Tool schemas: the cookbook's ``num_tokens_for_tools`` (function-definition accounting for
gpt-4o / gpt-4 families): per function 7 (o200k) or 10 (cl100k and others) tokens +
tokens("name:description"); 3 for a non-empty properties object; per property 3 +
tokens("key:type:description") and, for enums, −3 + per item 3 + tokens(item); 12 at the end.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import threading
import wave
from collections.abc import Sequence
from typing import Any

from cachetools import LRUCache

from ..cache import lru
from .parts import TEXT_BLOB_PART_TYPES, part_texts, part_type
from .profiles import TokenizerProfile

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING_TOKENS = 3
TOKENS_PER_TOOL_CALL = 3
#: Vision accounting (OpenAI, gpt-4o family): base cost, cost per 512-px tile, most tiles.
IMAGE_BASE_TOKENS = 85
IMAGE_TILE_TOKENS = 170
IMAGE_MAX_TILES = 8


def _image_size(url: str) -> tuple[int, int] | None:
    """Width and height of a ``data:`` URL image (header only), or ``None``."""
    if not url.startswith("data:") or "," not in url:
        return None
    header, _, payload = url.partition(",")
    if ";base64" not in header:
        return None
    try:
        from PIL import Image

        raw = base64.b64decode(payload, validate=False)
        with Image.open(io.BytesIO(raw)) as im:
            return int(im.width), int(im.height)
    except Exception:  # not an image Pillow reads: count the largest cost
        return None


def image_part_tokens(part: dict[str, Any]) -> int:
    """Tokens of one ``image_url`` content part (OpenAI vision rule, see the module notes)."""
    spec = part.get("image_url")
    if isinstance(spec, str):
        spec = {"url": spec}
    if not isinstance(spec, dict):
        spec = {}
    if spec.get("detail") == "low":
        return IMAGE_BASE_TOKENS
    size = _image_size(str(spec.get("url") or ""))
    if size is None or size[0] <= 0 or size[1] <= 0:
        return IMAGE_BASE_TOKENS + IMAGE_TILE_TOKENS * IMAGE_MAX_TILES
    w, h = float(size[0]), float(size[1])
    scale = min(1.0, 2048 / max(w, h))
    w, h = w * scale, h * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    tiles = max(1, -(-int(w) // 512)) * max(1, -(-int(h) // 512))
    return IMAGE_BASE_TOKENS + IMAGE_TILE_TOKENS * min(tiles, IMAGE_MAX_TILES)


#: Audio estimate (see the module notes): tokens per second of audio, and the bitrate assumed
#: when the duration cannot be read (bytes per second; 8 kbit/s, below any speech codec's usual
#: rate, so the duration and the count are on the high side).
AUDIO_TOKENS_PER_SECOND = 10
AUDIO_MIN_BYTES_PER_SECOND = 1000
#: Part types with a rule of their own.
KNOWN_PART_TYPES = frozenset({"text", "image_url", "input_audio", "refusal"}) | TEXT_BLOB_PART_TYPES


def _audio_seconds(data: str, fmt: str) -> tuple[float, bool]:
    """(duration in seconds, read exactly) of base64 audio ``data``."""
    try:
        raw = base64.b64decode(data.split(",", 1)[-1] if data.startswith("data:") else data, validate=False)
    except (binascii.Error, ValueError):
        raw = data.encode("utf-8", "replace")
    if fmt.lower() == "wav" or raw[:4] == b"RIFF":
        try:
            with wave.open(io.BytesIO(raw)) as w:
                if w.getframerate() > 0:
                    return w.getnframes() / w.getframerate(), True
        except (wave.Error, EOFError, OSError):
            pass
    return len(raw) / AUDIO_MIN_BYTES_PER_SECOND, False


#: Audio parts whose estimate is kept: ``hash(data) -> (tokens, data[:64])`` (the prefix guards a hash clash).
_AUDIO_CACHE: LRUCache[int, tuple[int, str]] = lru(256)
_AUDIO_LOCK = threading.Lock()  # counts run on preview worker threads


def audio_part_tokens(part: dict[str, Any]) -> int:
    """Estimated tokens of one ``input_audio`` part (never 0 for non-empty audio)."""
    spec = part.get("input_audio")
    if not isinstance(spec, dict):
        spec = {}
    data = spec.get("data")
    if not isinstance(data, str) or not data:
        return 0
    key = hash(data)
    with _AUDIO_LOCK:
        hit = _AUDIO_CACHE.get(key)
    if hit is not None and hit[1] == data[:64]:
        return hit[0]
    seconds, _ = _audio_seconds(data, str(spec.get("format") or ""))
    tokens = max(1, -(-int(seconds * 1000) * AUDIO_TOKENS_PER_SECOND // 1000))
    with _AUDIO_LOCK:
        _AUDIO_CACHE[key] = (tokens, data[:64])
    return tokens


def _unknown_part(part: Any) -> bool:
    if isinstance(part, str):
        return False
    if not isinstance(part, dict):
        return True
    kind = part_type(part)
    if kind == "text":
        return not isinstance(part.get("text"), str)
    if kind == "refusal":
        return not isinstance(part.get("refusal"), str)
    return kind not in KNOWN_PART_TYPES


def estimated_parts(message: dict[str, Any]) -> list[str]:
    """Part types in ``message`` counted by estimate (today: ``input_audio``)."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [p["type"] for p in content if isinstance(p, dict) and p.get("type") == "input_audio"]


def content_part_warnings(messages: Sequence[dict[str, Any]]) -> list[str]:
    """Warnings for content parts Loomscope counts by estimate or does not know.

    One line per message and kind: unknown part types (counted as their JSON text) and audio
    (an estimate; the prompt is then approximate). ``messages`` index as sent.
    """
    out: list[str] = []
    for i, m in enumerate(messages):
        content = m.get("content")
        if not isinstance(content, list):
            continue
        unknown = [p for p in content if _unknown_part(p)]
        if unknown:
            kinds = sorted({str(p.get("type")) if isinstance(p, dict) else type(p).__name__ for p in unknown})
            out.append(f"message {i} ({m.get('role')}): content part type {', '.join(map(repr, kinds))} "
                       "is not one Loomscope knows; it is sent as written and counted as its JSON text")
        audio = [p for p in content if isinstance(p, dict) and p.get("type") == "input_audio"]
        if audio:
            tokens = sum(audio_part_tokens(p) for p in audio)
            out.append(f"message {i} ({m.get('role')}): {len(audio)} audio part(s) counted by estimate as "
                       f"{tokens} tokens ({AUDIO_TOKENS_PER_SECOND} per second of audio); counts are approximate")
    return out


def message_texts(message: dict[str, Any]) -> list[str]:
    """The string pieces of a provider message that are tokenized (role, content, name, ...)."""
    pieces: list[str] = [str(message.get("role", ""))]
    content = message.get("content")
    if isinstance(content, str):
        pieces.append(content)
    elif isinstance(content, list):
        for part in content:
            pieces.extend(part_texts(part))
    if message.get("name"):
        pieces.append(str(message["name"]))
    if message.get("tool_call_id"):
        pieces.append(str(message["tool_call_id"]))
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        pieces.append(str(fn.get("name", "")))
        args = fn.get("arguments", "")
        pieces.append(args if isinstance(args, str) else json.dumps(args, ensure_ascii=False))
        if call.get("id"):
            pieces.append(str(call["id"]))
    # Legacy function calling: {"function_call": {"name", "arguments"}}
    fc = message.get("function_call")
    if isinstance(fc, dict):
        pieces.append(str(fc.get("name", "")))
        args = fc.get("arguments", "")
        pieces.append(args if isinstance(args, str) else json.dumps(args, ensure_ascii=False))
    return pieces


def message_overhead(message: dict[str, Any]) -> int:
    """Framing tokens of one message: 3, +1 for a name, +3 per tool call, plus its images and audio."""
    n = TOKENS_PER_MESSAGE
    content = message.get("content")
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                continue
            kind = part_type(part)
            if kind == "image_url":
                n += image_part_tokens(part)
            elif kind == "input_audio":
                n += audio_part_tokens(part)
    if message.get("name"):
        n += TOKENS_PER_NAME
    n += TOKENS_PER_TOOL_CALL * len(message.get("tool_calls") or [])
    if isinstance(message.get("function_call"), dict):
        n += TOKENS_PER_TOOL_CALL
    return n


def count_messages_tokens(profile: TokenizerProfile, messages: Sequence[dict[str, Any]]) -> list[int]:
    """Per-message token counts (framing included), in one batched tokenizer call.

    Returns a list parallel to ``messages``; the reply priming (3 tokens) is not included
    in any element: add :data:`REPLY_PRIMING_TOKENS` once per request. A profile with a chat
    template (``profile.chat``) counts the messages as that template encodes them together
    (see :mod:`.templates`); its unowned tokens are in :func:`.chat.prompt_count`.
    """
    if profile.chat is not None:
        return profile.chat.count_prompt(profile.count_many, list(messages)).messages
    all_pieces: list[str] = []
    spans: list[tuple[int, int]] = []
    for m in messages:
        pieces = message_texts(m)
        spans.append((len(all_pieces), len(all_pieces) + len(pieces)))
        all_pieces.extend(pieces)
    counts = profile.count_many(all_pieces)
    return [sum(counts[a:b]) + message_overhead(m) for m, (a, b) in zip(messages, spans)]


def num_tokens_from_messages(profile: TokenizerProfile, messages: Sequence[dict[str, Any]],
                             tools: Sequence[dict[str, Any]] | None = None) -> int:
    """Total prompt tokens of a chat-completions request: messages + tools + reply priming.

    For a profile with a chat template: the template's exact prompt length.
    """
    if profile.chat is not None:
        return profile.chat.count_prompt(profile.count_many, list(messages), list(tools) if tools else None).total
    total = sum(count_messages_tokens(profile, messages)) + REPLY_PRIMING_TOKENS
    if tools:
        total += count_tools_tokens(profile, tools)
    return total


def count_tools_tokens(profile: TokenizerProfile, tools: Sequence[dict[str, Any]]) -> int:
    """Tokens of tool/function definitions sent with a request (cookbook ``num_tokens_for_tools``).

    For a profile with a chat template: the template's tool section.
    """
    if not tools:
        return 0
    if profile.chat is not None:
        return profile.chat.count_prompt(profile.count_many, [], list(tools)).tools
    func_init = 7 if profile.name == "o200k_base" else 10
    prop_init, prop_key, enum_init, enum_item, func_end = 3, 3, -3, 3, 12
    total = 0
    for tool in tools:
        fn = tool.get("function", tool) if isinstance(tool, dict) else {}
        if not isinstance(fn, dict):
            continue
        total += func_init
        desc = str(fn.get("description") or "")
        if desc.endswith("."):
            desc = desc[:-1]
        total += profile.count(f"{fn.get('name', '')}:{desc}")
        params = fn.get("parameters") or {}
        props = params.get("properties") if isinstance(params, dict) else None
        if isinstance(props, dict) and props:
            total += prop_init
            for key, spec in props.items():
                spec = spec if isinstance(spec, dict) else {}
                total += prop_key
                if isinstance(spec.get("enum"), list):
                    total += enum_init
                    for item in spec["enum"]:
                        total += enum_item + profile.count(str(item))
                p_desc = str(spec.get("description") or "")
                if p_desc.endswith("."):
                    p_desc = p_desc[:-1]
                p_type = spec.get("type", "")
                if isinstance(p_type, list):
                    p_type = "|".join(map(str, p_type))
                total += profile.count(f"{key}:{p_type}:{p_desc}")
    return total + func_end
