"""Custom item roles live in one module, with unique numbers (issue 10 item 5)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt

import gui.roles as roles

GUI = Path(__file__).resolve().parents[2] / "gui"


def test_role_numbers_are_unique_user_roles():
    found = {name: value for name, value in vars(roles).items() if name.endswith("_ROLE")}
    assert len(found) >= 10
    assert len(set(found.values())) == len(found), found
    assert all(value >= int(Qt.ItemDataRole.UserRole) for value in found.values())


def test_no_other_module_defines_a_user_role():
    offenders = [str(p.relative_to(GUI)) for p in GUI.rglob("*.py")
                 if p.name != "roles.py" and "UserRole" in p.read_text(encoding="utf-8")]
    assert not offenders, offenders
