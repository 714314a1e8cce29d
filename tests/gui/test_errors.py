"""Every stable engine error code maps to a user message; exceptions are mapped by code only."""

from __future__ import annotations

from engine.errors import ERROR_CODES, LoomscopeError, LoomscopeImportError
from gui.errors import USER_MESSAGES, message_for, user_error, worker_error


def test_every_engine_code_has_a_message() -> None:
    # codes added later fall back to the engine's own one-line meaning, never the generic text
    for code in set(ERROR_CODES) - {"INTERNAL_ERROR"}:
        assert message_for(code) and message_for(code) != USER_MESSAGES["INTERNAL_ERROR"]
    assert message_for("NO_SUCH_CODE_EVER") == USER_MESSAGES["INTERNAL_ERROR"]


def test_mapping_uses_the_code_and_structured_fields_not_the_text() -> None:
    exc = LoomscopeImportError("IMPORT_INVALID_JSON", "Expecting ',' delimiter: internal detail",
                               file="/tmp/x.json", place="line 3, column 7")
    err = user_error(exc)
    assert err.code == "IMPORT_INVALID_JSON"
    assert "internal detail" not in err.text
    assert err.file == "/tmp/x.json" and err.place == "line 3, column 7"
    assert "line 3, column 7" in err.full_text()
    assert user_error(ValueError("boom")).code == "INTERNAL_ERROR"
    assert user_error(LoomscopeError("CANCELLED", "x")).text == USER_MESSAGES["CANCELLED"]


def test_worker_error_logs_only_bugs_and_never_shows_their_text(caplog) -> None:
    with caplog.at_level("ERROR", logger="gui.errors"):
        err = worker_error(ValueError("secret internals"), "lorebook report")
    assert err.code == "INTERNAL_ERROR" and "secret internals" not in err.full_text()
    assert "lorebook report failed" in caplog.text and caplog.records[-1].exc_info is not None
    caplog.clear()
    with caplog.at_level("ERROR", logger="gui.errors"):
        err = worker_error(LoomscopeError("CANCELLED", "x"), "generation")
    assert (err.code, err.text) == ("CANCELLED", USER_MESSAGES["CANCELLED"]) and not caplog.records
