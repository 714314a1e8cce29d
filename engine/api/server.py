"""Serving the API with uvicorn: loopback checks and a server bound before it runs.

:func:`make_server` binds the listening socket itself (so "address in use" is a clean
``ADDRESS_UNAVAILABLE`` error instead of uvicorn's ``sys.exit``) and returns an
:class:`ApiServer` whose ``run()`` blocks until ``should_exit`` is set (Ctrl+C, SIGTERM, or a test
fixture). ``loomscope serve`` and the API tests use the same function.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING

import uvicorn

from ..errors import LoomscopeError
from ..storage import Store
from .app import LOOPBACK_HOSTS, create_app
from .limits import DEFAULT_MAX_BODY_BYTES

if TYPE_CHECKING:
    from ..registries import Registries

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def is_loopback(host: str) -> bool:
    """``True`` for ``localhost`` and loopback IP literals (``127.0.0.0/8``, ``::1``).

    Other host names are not resolved (a name could resolve anywhere), so they count as remote.
    """
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_host(host: str, *, allow_remote: bool) -> None:
    """Refuse a non-loopback ``host`` unless ``allow_remote``.

    Raises
    ------
    LoomscopeError
        ``REMOTE_HOST_REFUSED`` (the API has no authentication: anyone who can reach the port
        can read every chat's audit).
    """
    if not allow_remote and not is_loopback(host):
        raise LoomscopeError(
            "REMOTE_HOST_REFUSED",
            f"refusing to listen on {host!r}: the API has no authentication; use a loopback address "
            "(127.0.0.1, ::1, localhost) or pass --allow-remote",
            file="--host",
        )


def bind_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (``port`` 0 = any free port), ready for uvicorn.

    Raises
    ------
    LoomscopeError
        ``ADDRESS_UNAVAILABLE`` when the address cannot be resolved or bound (in use, not
        local, permission).
    """
    name = host.strip().strip("[]")
    if not 0 <= port <= 65535:
        raise LoomscopeError("ADDRESS_UNAVAILABLE", f"port {port} is outside 0..65535", file="--port")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            name, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise LoomscopeError("ADDRESS_UNAVAILABLE", f"cannot resolve {host!r}: {exc.strerror or exc}",
                             file="--host") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise LoomscopeError("ADDRESS_UNAVAILABLE",
                             f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                             file="--port" if exc.errno in (98, 48, 10048) else "--host") from None
    sock.set_inheritable(True)
    return sock


@dataclass
class ApiServer:
    """A uvicorn server with its bound socket. ``url`` is ``http://host:port`` (the real port)."""

    server: uvicorn.Server
    sock: socket.socket

    @property
    def host(self) -> str:
        """The address the socket is bound to."""
        return str(self.sock.getsockname()[0])

    @property
    def port(self) -> int:
        """The port the socket is bound to (the real one when 0 was asked for)."""
        return int(self.sock.getsockname()[1])

    @property
    def url(self) -> str:
        """``http://host:port`` (an IPv6 host in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def run(self) -> None:
        """Serve until ``server.should_exit`` is set (blocks; installs signal handlers only on the main thread)."""
        try:
            self.server.run(sockets=[self.sock])
        finally:
            self.sock.close()

    def stop(self) -> None:
        """Ask the server to finish (in-flight requests complete)."""
        self.server.should_exit = True


def make_server(
    store: Store,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    allow_remote: bool = False,
    registries: Registries | None = None,
    log_level: str = "warning",
    max_body_bytes: int | None = None,
) -> ApiServer:
    """Check ``host``, bind it, and build the uvicorn server for :func:`create_app` over ``store``.

    With ``allow_remote`` any ``Host`` header is accepted; otherwise only loopback names and
    ``host`` itself (DNS-rebinding protection). ``max_body_bytes`` bounds request bodies
    (``None``: 16 MiB, :data:`engine.api.limits.DEFAULT_MAX_BODY_BYTES`).

    Raises
    ------
    LoomscopeError
        ``REMOTE_HOST_REFUSED`` (non-loopback ``host`` without ``allow_remote``),
        ``ADDRESS_UNAVAILABLE`` (cannot bind).
    """
    check_host(host, allow_remote=allow_remote)
    allowed = None if allow_remote else (*LOOPBACK_HOSTS, host.strip("[]"))

    app = create_app(store, registries=registries, allowed_hosts=allowed,
                     max_body_bytes=DEFAULT_MAX_BODY_BYTES if max_body_bytes is None else max_body_bytes)
    sock = bind_socket(host, port)
    config = uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="off",
                            server_header=False, proxy_headers=False)
    return ApiServer(uvicorn.Server(config), sock)
