"""Shared fixtures. ``shared_data`` is the folder of real third-party files (skips when absent)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = (ROOT.parent / "shared" / "data").resolve()


def shared_data_path() -> Path | None:
    """``../shared/data`` beside the project, or ``None`` when it is absent (a user's clone)."""
    env = os.environ.get("LOOMSCOPE_SHARED_DATA")
    path = Path(env) if env else SHARED_DATA
    return path if path.is_dir() else None


@pytest.fixture
def shared_data() -> Path:
    """Path to ``../shared/data``; skips the test when the folder is absent."""
    path = shared_data_path()
    if path is None:
        pytest.skip("../shared/data is absent")
    return path


def st_user_copy(shared: Path, dest: Path, main_api: str = "openai", top: dict[str, object] | None = None,
                 **power_user: object) -> Path:
    """A copy of ``st-user/default-user`` under ``dest`` with ``settings.json``'s ``main_api`` set.

    The shared folder says ``koboldhorde`` (SillyTavern's Text Completion path, issue 26); tests of
    the Chat Completion path import a copy that says ``openai``. ``power_user`` keys are merged into
    ``settings.json``'s ``power_user`` (nested dicts one level deep, e.g. ``instruct={"enabled": True}``);
    ``top`` keys replace top-level ones (``max_context``, ``amount_gen``).
    """
    folder = dest / "default-user"
    shutil.copytree(shared / "st-user" / "default-user", folder)
    settings_file = folder / "settings.json"
    settings = json.loads(settings_file.read_text(encoding="utf-8"))
    settings["main_api"] = main_api
    settings.update(top or {})
    pu = settings.setdefault("power_user", {})
    for key, value in power_user.items():
        pu[key] = {**pu.get(key, {}), **value} if isinstance(value, dict) else value
    settings_file.write_text(json.dumps(settings, indent=4), encoding="utf-8")
    return folder


_LOOPBACK_PREFIXES = ("127.", "::1", "localhost", "0:0:0:0:0:0:0:1")


@pytest.fixture(autouse=True)
def _network_unreachable(monkeypatch):
    """The whole suite runs with the network unreachable: only loopback connections work.

    Anything that tries to download at run time (tiktoken's BPE files, a model hub) fails
    loudly here instead of silently needing the network on a user's machine.
    """
    import socket

    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def _check(address):
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and (host.startswith(_LOOPBACK_PREFIXES) or host.startswith("/")):
            return
        if not isinstance(host, str):
            return
        raise OSError(f"network access blocked in tests: {address!r}")

    def connect(self, address):
        _check(address)
        return real_connect(self, address)

    def connect_ex(self, address):
        _check(address)
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    yield
