"""``public_endpoint``: the provider URL as stored in audits, for any URL a user types."""

from __future__ import annotations

import pytest

from engine.providers import public_endpoint


@pytest.mark.parametrize(("url", "shown"), [
    ("http://[::1]:8000/v1", "http://[::1]:8000/v1"),
    ("http://user:pw@[2001:db8::1]/v1?key=secret", "http://[2001:db8::1]/v1"),
    ("https://user:sk-123@api.example.com/v1/?api-key=sk-123#x", "https://api.example.com/v1"),
    ("http://localhost:99999/v1", "<invalid url>"),
    ("http://localhost:port/v1", "<invalid url>"),
])
def test_public_endpoint_never_raises_and_hides_credentials(url: str, shown: str) -> None:
    assert public_endpoint(url) == shown


def test_generate_with_an_out_of_range_port_is_a_provider_failure_not_a_crash(tmp_path) -> None:
    from engine.generation import ProviderConfig, generate
    from engine.schema import Chat, ChatMessage, ContextSettings, PreviewRequest

    request = PreviewRequest(chat=Chat(messages=[ChatMessage(role="user", content="hi")]),
                             settings=ContextSettings(model="gpt-4o"))
    result = generate(request, ProviderConfig("http://localhost:99999/v1", "gpt-4o", "sk-x", timeout_s=2),
                      chat_id="c1")
    assert result.audit.status == "failed" and result.audit.error_code.startswith("PROVIDER_")
    assert result.audit.provider == "<invalid url>"
