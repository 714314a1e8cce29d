"""ElidedLabel: shortens with "…" when narrow, tooltip with the full text only then."""

from __future__ import annotations

from gui.widgets.elided_label import ElidedLabel

TEXT = "Seraphina - 2023-5-12 @21h 32m 29s 224ms"


def test_elides_when_narrow_and_shows_full_text_as_tooltip(qtbot) -> None:
    label = ElidedLabel(TEXT)
    qtbot.addWidget(label)
    label.resize(80, 20)
    label.show()
    assert label.text() == TEXT
    assert label.is_elided() and label.displayed_text().endswith("…")
    assert label.toolTip() == TEXT
    assert label.minimumSizeHint().width() < 80  # never forces its layout wider
    label.resize(2000, 20)
    assert not label.is_elided() and label.displayed_text() == TEXT
    assert label.toolTip() == ""
    label.setText("")
    assert label.toolTip() == ""


def test_always_tooltip(qtbot) -> None:
    label = ElidedLabel("short", always_tooltip=True)
    qtbot.addWidget(label)
    label.resize(400, 20)
    assert label.toolTip() == "short"
