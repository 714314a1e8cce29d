"""Run a command against a throwaway PostgreSQL server (``make test-postgres``).

Usage::

    python tests/throwaway_postgres.py -- COMMAND [ARG...]

Starts a private PostgreSQL cluster from the installed server binaries (Debian's ``postgresql``
package puts them in ``/usr/lib/postgresql/<major>/bin``; ``$PG_BINDIR`` overrides), in a new
temporary directory, listening on 127.0.0.1 on a free port with its unix socket inside that
directory; creates the database ``loomscope_test``; runs COMMAND with
``LOOMSCOPE_TEST_DB=postgresql+psycopg://postgres@127.0.0.1:<port>/loomscope_test`` in its
environment; then stops the server and deletes the directory, whatever COMMAND did (also on
SIGTERM/SIGINT). The exit status is COMMAND's, or 2 when the server could not be started.

PostgreSQL refuses to run as root, so when this script runs as root (a CI container) the
server runs as the ``postgres`` system user (created by Debian's package) or, failing that, a
``loomscope-pg`` system user this script creates; ``subprocess``'s ``user=``/``group=`` switch to it.
Durability is switched off (``fsync=off``): the cluster is thrown away anyway.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DB_NAME = "loomscope_test"
START_TIMEOUT_S = 60
FALLBACK_USER = "loomscope-pg"


def find_bindir() -> Path:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres`` (newest Debian major first)."""
    env = os.environ.get("PG_BINDIR", "").strip()
    candidates = [Path(env)] if env else []
    debian = Path("/usr/lib/postgresql")
    if debian.is_dir():
        majors = sorted((p for p in debian.iterdir() if p.name.isdigit()), key=lambda p: int(p.name), reverse=True)
        candidates += [p / "bin" for p in majors]
    which = shutil.which("initdb")
    if which:
        candidates.append(Path(which).resolve().parent)
    for c in candidates:
        if (c / "initdb").is_file() and (c / "pg_ctl").is_file():
            return c
    raise SystemExit("throwaway_postgres: no PostgreSQL server binaries found (install Debian's "
                     "'postgresql' package, or set PG_BINDIR to the folder holding initdb and pg_ctl)")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_account() -> pwd.struct_passwd | None:
    """The account the server runs as: ``None`` (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", FALLBACK_USER):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", FALLBACK_USER],
                   check=True, stdin=subprocess.DEVNULL)
    return pwd.getpwnam(FALLBACK_USER)


class ThrowawayPostgres:
    """A private cluster in a temporary directory; ``url`` is valid between ``start`` and ``stop``."""

    def __init__(self) -> None:
        self.bindir = find_bindir()
        self.account = server_account()
        self.port = free_port()
        # a short path: unix socket paths are limited to ~100 bytes
        self.root = Path(tempfile.mkdtemp(prefix="lspg-", dir="/tmp" if Path("/tmp").is_dir() else None))
        self.data = self.root / "data"
        self.sock = self.root / "sock"
        self.log = self.root / "server.log"
        self.started = False

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{DB_NAME}"

    def _run(self, *argv: str, timeout: float = START_TIMEOUT_S) -> None:
        kwargs: dict = {}
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.update(LC_ALL="C", LANG="C")
        if self.account is not None:
            kwargs.update(user=self.account.pw_uid, group=self.account.pw_gid, extra_groups=[])
            env.update(HOME=str(self.root), USER=self.account.pw_name, LOGNAME=self.account.pw_name)
        proc = subprocess.run([str(self.bindir / argv[0]), *argv[1:]], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                              cwd=self.root, timeout=timeout, **kwargs)
        if proc.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{argv[0]} failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{log}")

    def start(self) -> None:
        self.sock.mkdir()
        if self.account is not None:
            for p in (self.root, self.sock):
                os.chown(p, self.account.pw_uid, self.account.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--no-locale", "--no-sync")
        options = (f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=100")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", str(START_TIMEOUT_S),
                  "-o", options, "start")
        self.started = True
        self._create_database()

    def _create_database(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", DB_NAME,
                          timeout=30)
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def stop(self) -> None:
        try:
            if self.started:
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", "30", "stop", timeout=60)
                self.started = False
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def main(argv: list[str]) -> int:
    """Start the server, run ``argv`` (after ``--``) with ``LOOMSCOPE_TEST_DB`` set, stop the server."""
    if "--" in argv:
        argv = argv[argv.index("--") + 1:]
    if not argv:
        sys.stderr.write(__doc__ or "")
        return 2
    pg = ThrowawayPostgres()

    def _stop_on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    old = {s: signal.signal(s, _stop_on_signal) for s in (signal.SIGTERM, signal.SIGHUP)}
    child: subprocess.Popen | None = None
    try:
        try:
            pg.start()
        except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
            sys.stderr.write(f"throwaway_postgres: cannot start PostgreSQL from {pg.bindir}: {exc}\n")
            return 2
        sys.stderr.write(f"throwaway_postgres: PostgreSQL ({pg.bindir}) on 127.0.0.1:{pg.port}, "
                         f"LOOMSCOPE_TEST_DB={pg.url}\n")
        env = dict(os.environ, LOOMSCOPE_TEST_DB=pg.url)
        child = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL)
        return child.wait()
    except KeyboardInterrupt:
        if child is not None and child.poll() is None:
            child.terminate()
            try:
                child.wait(30)
            except subprocess.TimeoutExpired:
                child.kill()
        return 130
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        pg.stop()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
