"""*Lorebook → Report*: the menu action opens the dialog, which fills a sortable table and a chart."""

from __future__ import annotations

from PySide6.QtCore import Qt

from engine.schema import ChatMessage, Lorebook, LorebookEntry, PreviewRequest
from engine.schema.messages import Chat
from gui.widgets.lorebook_report_dialog import COLUMNS, LorebookReportDialog


def _request() -> PreviewRequest:
    msgs = [ChatMessage(role="assistant", content="Welcome.")]
    for i in range(12):
        msgs.append(ChatMessage(role="user", content="the dragon again" if i % 3 == 0 else "a sword and a shield"))
        msgs.append(ChatMessage(role="assistant", content="Indeed."))
    book = Lorebook(name="Lore", entries=[
        LorebookEntry(uid=1, keys=["dragon"], content="Dragons nest above the bell tower.", comment="Dragons"),
        LorebookEntry(uid=2, keys=["sword"], content="Swords are forged in the lower city by the smiths.",
                      comment="Swords"),
        LorebookEntry(uid=10, keys=["unicorn"], content="Unicorns are a myth.", comment="Unicorns"),
    ])
    return PreviewRequest(chat=Chat(messages=msgs), lorebooks=[book])


def test_dialog_fills_sortable_table_and_chart(qtbot) -> None:
    dialog = LorebookReportDialog(_request())
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.ready, timeout=20000):
        pass
    report = dialog.report
    assert report is not None and len(report.turns) == 13
    assert dialog.model.rowCount() == 3 and dialog.model.columnCount() == len(COLUMNS)
    # sorted by total tokens, largest first: swords fire on 9 turns (8 + the next one), dragons on 4
    assert dialog.column_values(0) == ["Swords", "Dragons", "Unicorns"]  # entries by title first (issue 31)
    assert dialog.column_values(3) == ["9/13", "4/13", "0/13"]
    assert "never appears" in dialog.column_values(10)[2] or "none of its keys" in dialog.column_values(10)[2]
    # numeric sorting of the UID column (10 after 2), both ways
    dialog.table.sortByColumn(2, Qt.SortOrder.AscendingOrder)
    assert dialog.column_values(2) == ["1", "2", "10"]
    dialog.table.sortByColumn(3, Qt.SortOrder.AscendingOrder)
    assert dialog.column_values(0) == ["Unicorns", "Dragons", "Swords"]
    # the chart has one bar per turn and names the turn under the mouse
    assert dialog.chart.values == [t.tokens for t in report.turns]
    assert dialog.chart.turn_at(0) == 1 and dialog.chart.turn_at(12.5 * dialog.chart._step()) == 13
    assert "Lore" in dialog.summary.text() and "13 turns" in dialog.summary.text()


def test_menu_action_opens_the_report(window, qtbot) -> None:
    action = window.lorebook_report_action
    assert action.text() == "&Report…"
    menus = {m.title(): m for m in window.menuBar().findChildren(type(window.menuBar().addMenu("x")))}
    assert action in menus["&Lorebook"].actions()
    dialog = window.show_lorebook_report()
    with qtbot.waitSignal(dialog.ready, timeout=30000):
        pass
    assert dialog.isVisible() and dialog.report is not None
    assert dialog.column_values(0) == ["Dragons"]  # the library chat's book
    dialog.close()


def test_no_chat_open(qtbot) -> None:
    dialog = LorebookReportDialog(None)
    qtbot.addWidget(dialog)
    assert "Open a chat" in dialog.summary.text()
