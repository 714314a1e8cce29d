"""Provider settings: base URL, model, API key (OS keyring or environment), timeout, streaming,
extra request fields (sampler settings).

Base URL, model, timeout, streaming and the extra fields (a JSON object) persist in ``QSettings``. The key is never written to
``QSettings``: it is saved to the OS keyring (service ``loomscope``) when asked, or read from
``LOOMSCOPE_API_KEY`` / ``OPENAI_API_KEY`` (``engine.generation.resolve_api_key``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from engine.generation import resolve_api_key
from engine.providers.keys import KEYRING_SERVICE, lookup_api_key
from engine.providers.keys import KEYRING_USERNAME as KEYRING_USER

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"


@dataclass(frozen=True)
class ProviderSettings:
    """What the dialog edits (the key itself is resolved at generation time)."""

    base_url: str
    model: str
    timeout_s: float
    stream: bool
    #: Further request fields (sampler settings: ``temperature``, ``top_p``, ``min_p``, …) sent with
    #: every generation; they never replace the fields Loomscope sets.
    extra_body: dict[str, Any] = field(default_factory=dict)


def _positive_float(value: object, default: float) -> float:
    """``value`` (a stored setting: a number or its text) as a positive float; ``default`` when it is
    missing, zero or not a number (a hand-edited settings file must not stop the app)."""
    if not isinstance(value, (int, float, str)):
        return default
    try:
        number = float(value)
    except ValueError:
        return default
    return number if math.isfinite(number) and number > 0 else default


def load_provider_settings(settings: QSettings, default_model: str = "gpt-4o",
                           default_base_url: str | None = None) -> ProviderSettings:
    """Provider settings from ``settings`` (with defaults; ``default_base_url`` replaces
    :data:`DEFAULT_BASE_URL` when none is saved, e.g. a Text Completion chat's server URL)."""
    fallback = default_base_url or DEFAULT_BASE_URL
    return ProviderSettings(
        base_url=str(settings.value("provider/base_url", fallback) or fallback),
        model=str(settings.value("provider/model", "") or default_model),
        timeout_s=_positive_float(settings.value("provider/timeout_s", 60.0), 60.0),
        stream=str(settings.value("provider/stream", "true")).lower() in ("1", "true", "yes"),
        extra_body=parse_extra_fields(str(settings.value("provider/extra_body", "") or "")) or {},
    )


def parse_extra_fields(text: str) -> dict[str, Any] | None:
    """The extra request fields typed as a JSON object (``{}`` for nothing); ``None`` when not a JSON object."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def save_provider_settings(settings: QSettings, value: ProviderSettings) -> None:
    """Persist ``value`` (never the key)."""
    settings.setValue("provider/base_url", value.base_url)
    settings.setValue("provider/model", value.model)
    settings.setValue("provider/timeout_s", value.timeout_s)
    settings.setValue("provider/stream", "true" if value.stream else "false")
    settings.setValue("provider/extra_body", json.dumps(value.extra_body) if value.extra_body else "")


def resolve_key() -> str | None:
    """The API key from the environment, then the OS keyring (``None`` when there is none)."""
    return resolve_api_key()


def key_source() -> str:
    """Where a key would come from, in words (for the dialog; ``engine.providers.keys.lookup_api_key``)."""
    return lookup_api_key().description


class ProviderDialog(QDialog):
    """Edit :class:`ProviderSettings`; ``accepted`` saves them (and the key to the keyring if given)."""

    def __init__(self, settings: QSettings, default_model: str, parent: QWidget | None = None,
                 default_base_url: str | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Provider settings")
        self._settings = settings
        current = load_provider_settings(settings, default_model, default_base_url)
        self.base_url = QLineEdit(current.base_url, self)
        self.base_url.setPlaceholderText("https://api.openai.com/v1")
        self.model = QLineEdit(current.model, self)
        self.key = QLineEdit(self)
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText("leave empty to keep the current key")
        self.save_key = QCheckBox("Save the key in the OS keyring", self)
        self.save_key.setChecked(True)
        self.key_info = QLabel(f"Current key: {key_source()}", self)
        self.key_info.setStyleSheet("color: #666;")
        self.timeout = QDoubleSpinBox(self)
        self.timeout.setRange(1, 3600)
        self.timeout.setSuffix(" s")
        self.timeout.setValue(current.timeout_s)
        self.stream = QCheckBox("Stream the reply", self)
        self.stream.setChecked(current.stream)
        self.extra = QLineEdit(json.dumps(current.extra_body) if current.extra_body else "", self)
        self.extra.setPlaceholderText('sampler settings as JSON, e.g. {"temperature": 0.8, "min_p": 0.05}')
        self.extra.setToolTip("Further request fields sent with every generation (never the prompt, messages, "
                              "stop strings, stream or reply limit, which Loomscope sets)")
        self.error = QLabel(self)
        self.error.setStyleSheet("color: #b00020;")
        form = QFormLayout()
        form.addRow("Base URL", self.base_url)
        form.addRow("Model", self.model)
        form.addRow("API key", self.key)
        form.addRow("", self.save_key)
        form.addRow("", self.key_info)
        form.addRow("Timeout", self.timeout)
        form.addRow("", self.stream)
        form.addRow("Extra fields", self.extra)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self._on_save)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(self.error)
        lay.addWidget(buttons)

    def value(self) -> ProviderSettings:
        """The settings as entered."""
        return ProviderSettings(self.base_url.text().strip(), self.model.text().strip(),
                                self.timeout.value(), self.stream.isChecked(),
                                parse_extra_fields(self.extra.text()) or {})

    def _on_save(self) -> None:
        value = self.value()
        if not value.base_url.startswith(("http://", "https://")):
            self.error.setText("The base URL must start with http:// or https://")
            return
        if not value.model:
            self.error.setText("Enter a model name")
            return
        if parse_extra_fields(self.extra.text()) is None:
            self.error.setText('Extra fields must be a JSON object, such as {"temperature": 0.8}')
            return
        key = self.key.text().strip()
        if key and self.save_key.isChecked():
            try:
                import keyring

                keyring.set_password(KEYRING_SERVICE, KEYRING_USER, key)
            except Exception:
                self.error.setText("No OS keyring is available; set LOOMSCOPE_API_KEY instead.")
                return
        save_provider_settings(self._settings, value)
        self.accept()
