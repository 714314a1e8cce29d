"""Where the API key comes from. It is never stored in the library, logged, or put in an audit."""

from __future__ import annotations

import os

#: Environment variables read, in order.
KEY_ENV_VARS: tuple[str, ...] = ("LOOMSCOPE_API_KEY", "OPENAI_API_KEY")
#: OS keyring service and user name under which the GUI saves the key.
KEYRING_SERVICE = "loomscope"
KEYRING_USERNAME = "api_key"


def resolve_api_key(*, use_keyring: bool = True) -> str | None:
    """The API key: ``$LOOMSCOPE_API_KEY``, then ``$OPENAI_API_KEY``, then the OS keyring.

    Returns ``None`` when none is set (local servers often need no key). A keyring that is
    missing or locked counts as "no key" (never an error).
    """
    for name in KEY_ENV_VARS:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    if not use_keyring or os.environ.get("LOOMSCOPE_NO_KEYRING"):
        return None
    try:
        import keyring

        value = keyring.get_password(KEYRING_SERVICE, KEYRING_USERNAME)
    except Exception:  # no backend, locked keychain, D-Bus absent
        return None
    return value.strip() if value and value.strip() else None
