"""Provider dialog: validation, persistence in QSettings, the key never stored there."""

from __future__ import annotations

from gui.widgets.provider_dialog import ProviderDialog, load_provider_settings


def test_save_persists_settings_without_the_key(qtbot, qsettings, monkeypatch) -> None:
    monkeypatch.setenv("LOOMSCOPE_NO_KEYRING", "1")
    dialog = ProviderDialog(qsettings, "gpt-4o")
    qtbot.addWidget(dialog)
    dialog.base_url.setText("ftp://nope")
    dialog._on_save()
    assert "http" in dialog.error.text() and dialog.result() == 0
    dialog.base_url.setText("http://127.0.0.1:9999/v1")
    dialog.model.setText("local-model")
    dialog.save_key.setChecked(False)
    dialog.key.setText("sk-secret-value")
    dialog.stream.setChecked(False)
    dialog._on_save()
    assert dialog.result() == ProviderDialog.DialogCode.Accepted
    saved = load_provider_settings(qsettings)
    assert (saved.base_url, saved.model, saved.stream) == ("http://127.0.0.1:9999/v1", "local-model", False)
    qsettings.sync()
    assert all("sk-secret" not in str(qsettings.value(k)) for k in qsettings.allKeys())


def test_extra_fields_are_a_json_object_and_persist(qtbot, qsettings, monkeypatch) -> None:
    monkeypatch.setenv("LOOMSCOPE_NO_KEYRING", "1")
    dialog = ProviderDialog(qsettings, "gpt-4o")
    qtbot.addWidget(dialog)
    dialog.save_key.setChecked(False)
    dialog.extra.setText("[1, 2]")
    dialog._on_save()
    assert "JSON object" in dialog.error.text() and dialog.result() == 0
    dialog.extra.setText('{"temperature": 0.8, "min_p": 0.05}')
    dialog._on_save()
    assert dialog.result() == ProviderDialog.DialogCode.Accepted
    assert load_provider_settings(qsettings).extra_body == {"temperature": 0.8, "min_p": 0.05}
    again = ProviderDialog(qsettings, "gpt-4o")
    qtbot.addWidget(again)
    assert again.extra.text() == '{"temperature": 0.8, "min_p": 0.05}'
