"""Plugins: entry-point discovery registers through the same API as built-ins; failures are diagnostics."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import engine.plugins as plugins
from engine.pipeline import default_registries, preview
from engine.schema import Chat, ChatMessage, ContextSettings, PreviewRequest
from engine.shifting import truncate_strategy


def setup_demo(registries):
    """A plugin's setup: one strategy and one interceptor, returning their cleanups."""
    def tag(messages, ctx):
        return messages, [f"saw {len(messages)} messages"]

    return [registries.strategies.register("demo-truncate", truncate_strategy, "a plugin strategy"),
            registries.interceptors.register("demo-tag", tag)]


def broken_setup(registries):
    raise RuntimeError("plugin bug")


def test_entry_point_plugins_register_and_failures_are_reported(monkeypatch):
    eps = [EntryPoint("demo", f"{__name__}:setup_demo", plugins.ENTRY_POINT_GROUP),
           EntryPoint("broken", f"{__name__}:broken_setup", plugins.ENTRY_POINT_GROUP)]
    monkeypatch.setattr(plugins, "entry_points", lambda group: [e for e in eps if e.group == group])
    regs = default_registries(load_plugins=True)
    assert "demo-truncate" in regs.strategies.names()
    assert regs.interceptors.names() == ["demo-tag"]
    assert any("broken" in d and "plugin bug" in d for d in regs.plugin_diagnostics)
    req = PreviewRequest(chat=Chat(messages=[ChatMessage(role="user", content="hi")]),
                         settings=ContextSettings(model="gpt-4o", context_limit=1000, reply_reserve=100,
                                                  strategy="demo-truncate"))
    pv = preview(req, registries=regs)
    assert pv.strategy == "demo-truncate"
    assert any("saw 1 messages" in d for d in pv.diagnostics)


def test_cleanup_unregisters():
    regs = default_registries()
    cleanups = setup_demo(regs)
    for c in cleanups:
        c()
    assert "demo-truncate" not in regs.strategies.names() and regs.interceptors.names() == []
