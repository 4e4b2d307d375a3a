"""Real databases for the tests: PostgreSQL 15 and MariaDB 10.11 on free loopback ports.

Each runs as one server process in a temporary folder, as its own system user (PostgreSQL
refuses to run as root; MariaDB's ``mysql`` user owns its files), and is stopped by its PID.
PostgreSQL comes from the machine image (``/usr/lib/postgresql/15/bin``), MariaDB from
``apt-get install mariadb-server`` (``make real-source`` installs it). They fail, rather
than skip, when missing.

- :func:`start_postgres`: ``wal_level=logical`` (what Debezium's ``pgoutput`` reads), a
  database ``shop``, the superuser ``postgres`` without a password over TCP (``trust``).
- :func:`start_mariadb`: ``binlog_format=ROW`` with ``binlog_row_image`` FULL or MINIMAL,
  a database ``shop`` and a user ``cdc``/``cdc`` with every privilege, from any host.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cdc_decode._kafka_broker import _stop_pid, free_port

POSTGRES_BIN = Path(os.environ.get("CDC_DECODE_POSTGRES_BIN", "/usr/lib/postgresql/15/bin"))
"""PostgreSQL's binaries (the machine image's 15)."""

MARIADB_USER = "cdc"
MARIADB_PASSWORD = "cdc"


class DatabaseError(RuntimeError):
    """A server did not start (its log's last lines are in the message)."""


def _owned_folder(prefix: str, user: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    entry = pwd.getpwnam(user)
    os.chown(folder, entry.pw_uid, entry.pw_gid)
    folder.chmod(0o755)
    return folder


def _as_user(user: str) -> dict:
    """Popen arguments that run a command as ``user`` (the test runs as root)."""
    if os.geteuid() != 0:
        return {}
    entry = pwd.getpwnam(user)
    return {
        "user": entry.pw_uid,
        "group": entry.pw_gid,
        "extra_groups": [],
        "env": {**os.environ, "HOME": str(entry.pw_dir), "USER": user, "LOGNAME": user},
    }


@dataclass
class Server:
    """A running database server.

    Attributes:
        kind: ``postgres`` or ``mariadb``.
        port: its TCP port on 127.0.0.1.
        pid: the server process.
        directory: its folder (data, socket, log), removed by :meth:`stop`.
        log: the server's log file.
    """

    kind: str
    port: int
    pid: int
    directory: Path
    log: Path
    process: subprocess.Popen | None = field(default=None, repr=False, compare=False)
    settings: dict = field(default_factory=dict)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the server by its PID and remove its folder. PostgreSQL gets SIGINT (a fast
        shutdown: SIGTERM's smart one waits for Debezium's replication connection to go)."""
        if self.kind == "postgres":
            try:
                os.kill(self.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
        _stop_pid(self.pid, timeout)
        if self.process is not None:
            self.process.poll()
        shutil.rmtree(self.directory, ignore_errors=True)

    def log_tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def connect(self, database: str = "shop", **options: Any) -> Any:
        """A new client connection (autocommit): psycopg for PostgreSQL, PyMySQL for
        MariaDB."""
        if self.kind == "postgres":
            import psycopg

            return psycopg.connect(
                host="127.0.0.1",
                port=self.port,
                user="postgres",
                dbname=database,
                autocommit=True,
                **options,
            )
        import pymysql

        return pymysql.connect(
            host="127.0.0.1",
            port=self.port,
            user=MARIADB_USER,
            password=MARIADB_PASSWORD,
            database=database,
            autocommit=True,
            **options,
        )


def _wait(server: Server, ready, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if server.process is not None and server.process.poll() is not None:
            tail = server.log_tail()
            server.stop()
            raise DatabaseError(f"{server.kind} exited with {server.process.returncode}:\n{tail}")
        try:
            ready()
            return
        except Exception as exc:  # noqa: BLE001 (not up yet: any client error)
            last = exc
            time.sleep(0.2)
    tail = server.log_tail()
    server.stop()
    raise DatabaseError(f"{server.kind} not ready after {timeout:.0f} s ({last}):\n{tail}")


def start_postgres(*, timeout: float = 60.0, **settings: str) -> Server:
    """Initialise and start a PostgreSQL server (``wal_level=logical``) with a database
    ``shop``; ``settings`` are more server settings (``-c name=value``)."""
    initdb = POSTGRES_BIN / "initdb"
    if not initdb.exists():
        raise DatabaseError(f"no PostgreSQL in {POSTGRES_BIN} (initdb missing)")
    folder = _owned_folder("cdc-postgres-", "postgres")
    data = folder / "data"
    run_as = _as_user("postgres")
    made = subprocess.run(
        [str(initdb), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"]
        + ["--locale=C", "--no-sync"],
        capture_output=True,
        text=True,
        **run_as,
    )
    if made.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise DatabaseError(f"initdb failed:\n{made.stdout}{made.stderr}")
    port = free_port()
    options = {
        "wal_level": "logical",
        "listen_addresses": "127.0.0.1",
        "max_wal_senders": "8",
        "max_replication_slots": "8",
        # A test server: nothing to survive a crash of the machine.
        "fsync": "off",
        "full_page_writes": "off",
        "shared_buffers": "32MB",
        "timezone": "UTC",
        **settings,
    }
    arguments = ["-D", str(data), "-p", str(port), "-k", str(folder)]
    for name, value in options.items():
        arguments += ["-c", f"{name}={value}"]
    log = folder / "postgres.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [str(POSTGRES_BIN / "postgres"), *arguments],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            **run_as,
        )
    server = Server("postgres", port, process.pid, folder, log, process, options)

    def ready() -> None:
        import psycopg

        with psycopg.connect(
            host="127.0.0.1", port=port, user="postgres", dbname="postgres", autocommit=True
        ) as conn:
            conn.execute("CREATE DATABASE shop")

    _wait(server, ready, timeout)
    return server


def _mariadb_binary(name: str) -> str:
    for candidate in (shutil.which(name), f"/usr/sbin/{name}", f"/usr/bin/{name}"):
        if candidate and Path(candidate).exists():
            return candidate
    raise DatabaseError(f"no {name}: run `make real-source` (apt-get install mariadb-server)")


def start_mariadb(*, row_image: str = "FULL", timeout: float = 60.0) -> Server:
    """Initialise and start a MariaDB server (``binlog_format=ROW``, ``binlog_row_image``
    ``row_image``) with a database ``shop`` and the user ``cdc``."""
    mariadbd = _mariadb_binary("mariadbd")
    install = _mariadb_binary("mariadb-install-db")
    folder = _owned_folder("cdc-mariadb-", "mysql")
    data = folder / "data"
    made = subprocess.run(
        [install, "--no-defaults", "--user=mysql", f"--datadir={data}", "--skip-test-db"]
        + ["--auth-root-authentication-method=normal", "--skip-name-resolve"],
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise DatabaseError(f"mariadb-install-db failed:\n{made.stdout}{made.stderr}")
    port = free_port()
    log = folder / "mariadb.log"
    socket = folder / "mariadb.sock"
    options = {
        "binlog_format": "ROW",
        "binlog_row_image": row_image,
        "server_id": "1",
        "port": str(port),
    }
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [mariadbd, "--no-defaults", "--user=mysql", f"--datadir={data}"]
            + [f"--socket={socket}", f"--port={port}", "--bind-address=127.0.0.1"]
            + [f"--log-bin={folder / 'binlog'}", "--binlog-format=ROW"]
            + [f"--binlog-row-image={row_image}", "--server-id=1", "--skip-name-resolve"]
            + [f"--pid-file={folder / 'mariadb.pid'}", f"--log-error={log}"]
            + ["--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M"]
            + ["--innodb-flush-log-at-trx-commit=0", "--sync-binlog=0"]
            + ["--default-time-zone=+00:00", "--character-set-server=utf8mb4"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    server = Server("mariadb", port, process.pid, folder, log, process, options)

    def ready() -> None:
        import pymysql

        if not socket.exists():  # the server makes it when it accepts connections
            raise DatabaseError("no socket yet")
        conn = pymysql.connect(unix_socket=str(socket), user="root", autocommit=True)
        try:
            with conn.cursor() as cursor:
                cursor.execute("CREATE DATABASE IF NOT EXISTS shop")
                for host in ("%", "localhost", "127.0.0.1"):
                    cursor.execute(
                        f"CREATE USER IF NOT EXISTS '{MARIADB_USER}'@'{host}' "
                        f"IDENTIFIED BY '{MARIADB_PASSWORD}'"
                    )
                    cursor.execute(
                        f"GRANT ALL PRIVILEGES ON *.* TO '{MARIADB_USER}'@'{host}' "
                        "WITH GRANT OPTION"
                    )
        finally:
            conn.close()

    _wait(server, ready, timeout)
    return server
