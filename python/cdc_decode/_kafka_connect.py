"""Kafka Connect standalone with the Debezium connectors, on loopback, stopped by its PID.

A real Debezium in front of a real database, for the tests (tests/delta/test_real_source.py),
``make connect`` and docs/streaming.md ("Your own database"): the worker's jars come from
``tools/kafka-connect/pom.xml`` (``make jars-connect`` copies them into ``.jars-connect/``),
the Debezium plugin bundles from ``tools/debezium/pom.xml`` (``make debezium`` unpacks them
into ``.debezium/``). The worker runs as one ``java`` process in a folder of its own, which
holds its configuration, its log and its source offsets (``offsets``): a worker started
again on the same folder goes on from the offsets the connectors stored.

>>> connect = start_connect(".jars-connect", ".debezium", broker.bootstrap,
...                         [postgres_connector("pg", host="127.0.0.1", port=5432,
...                                             user="postgres", database="shop",
...                                             topic_prefix="pg")])
>>> connect.stop()

From a shell (``make connect`` / ``make connect-stop``)::

    python -m cdc_decode._kafka_connect start --bootstrap 127.0.0.1:9092 \\
        --connector my-postgres.properties --state .kafka/connect.json
    python -m cdc_decode._kafka_connect stop --state .kafka/connect.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# The broker module beside this one: as `cdc_decode._kafka_broker` when imported, as
# `_kafka_broker` when run by its path (`make connect`: the standard library only, no build).
_broker = importlib.import_module(f"{__package__ or ''}._kafka_broker".lstrip("."))
_accepts, _java, _log4j = _broker._accepts, _broker._java, _broker._log4j
_stop_pid, free_port = _broker._stop_pid, _broker.free_port

__all__ = [
    "Connect",
    "ConnectError",
    "mariadb_connector",
    "postgres_connector",
    "start_connect",
]

_READY = "Kafka Connect started"

CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
"""Kafka Connect's JSON converter: keys, values (``debezium-json``) and headers."""


class ConnectError(RuntimeError):
    """The worker did not start, or a connector failed (the log's last lines are in the
    message)."""


def _worker_properties(
    directory: Path, bootstrap: str, plugins: Path, port: int, schemas: bool, flush_ms: int
) -> str:
    return "\n".join(
        [
            f"bootstrap.servers={bootstrap}",
            f"key.converter={CONVERTER}",
            f"value.converter={CONVERTER}",
            f"key.converter.schemas.enable={str(schemas).lower()}",
            f"value.converter.schemas.enable={str(schemas).lower()}",
            # Headers as JSON too: Debezium's __debezium.oldkey / __debezium.newkey headers
            # (a key change) then hold the key as the key converter writes it, without the
            # schema ({"id": 3}), instead of SimpleHeaderConverter's Struct{id=3}.
            f"header.converter={CONVERTER}",
            "header.converter.schemas.enable=false",
            f"offset.storage.file.filename={directory / 'offsets'}",
            # Offsets reach the file every flush_ms (and at a clean stop): what a killed
            # worker had not flushed it sends again after its restart (at-least-once).
            f"offset.flush.interval.ms={flush_ms}",
            f"plugin.path={plugins}",
            f"listeners=http://127.0.0.1:{port}",
            "",
        ]
    )


def _properties_text(config: Mapping[str, object]) -> str:
    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace("\n", "\\n")

    return "".join(f"{escape(str(k))}={escape(str(v))}\n" for k, v in config.items())


def _read_properties(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")) or "=" not in line:
            continue
        key, value = line.split("=", 1)
        out[key.strip()] = value.strip()
    return out


@dataclass
class Connect:
    """A running Kafka Connect standalone worker.

    Attributes:
        url: its REST address (``http://127.0.0.1:<port>``).
        pid: the ``java`` process.
        directory: its folder (configuration, log, offsets).
        connectors: the connector configurations it was started with.
    """

    url: str
    pid: int
    directory: Path
    connectors: list[dict] = field(default_factory=list)
    owns_directory: bool = True
    process: subprocess.Popen | None = field(default=None, repr=False, compare=False)

    def alive(self) -> bool:
        """Whether the process still runs."""
        if self.process is not None:
            return self.process.poll() is None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def stop(self, timeout: float = 30.0, *, remove: bool | None = None) -> None:
        """Stop the worker by its PID (SIGTERM: the connectors commit their offsets; SIGKILL
        after ``timeout`` seconds). Its folder is removed when :func:`start_connect` made it,
        unless ``remove=False`` (to start it again on the same offsets)."""
        _stop_pid(self.pid, timeout)
        if self.process is not None:
            self.process.poll()
        if self.owns_directory if remove is None else remove:
            shutil.rmtree(self.directory, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL the worker (no offset commit, no clean shutdown); its folder stays."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        if self.process is not None:
            self.process.wait(30)

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the worker's log and console output."""
        text = ""
        for name in ("connect.log", "console.log"):
            path = self.directory / name
            if path.exists():
                text += path.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def status(self, name: str) -> dict:
        """The connector's status from the REST API (``GET /connectors/<name>/status``)."""
        with urllib.request.urlopen(f"{self.url}/connectors/{name}/status", timeout=5) as r:
            return json.load(r)

    def add(self, config: Mapping[str, object]) -> None:
        """Start one more connector on the running worker (``PUT
        /connectors/<name>/config``); :meth:`wait_running` waits for it."""
        name = str(config["name"])
        body = json.dumps({k: str(v) for k, v in config.items()}).encode()
        request = urllib.request.Request(
            f"{self.url}/connectors/{name}/config",
            data=body,
            method="PUT",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
        self.connectors.append(dict(config))

    def wait_running(self, name: str, timeout: float = 120.0) -> None:
        """Wait until the connector and its task run.

        Raises:
            ConnectError: the worker exited, the connector or its task failed (with its
                trace), or it was not running after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            if not self.alive():
                raise ConnectError(f"Kafka Connect exited:\n{self.log_tail()}")
            try:
                last = self.status(name)
            except (urllib.error.URLError, OSError, ValueError) as exc:
                last = exc
                time.sleep(0.3)
                continue
            states = [last["connector"]["state"]] + [t["state"] for t in last.get("tasks", [])]
            if "FAILED" in states:
                traces = [t.get("trace", "") for t in last.get("tasks", [])]
                trace = last["connector"].get("trace") or "\n".join(traces)
                raise ConnectError(f"connector {name} failed:\n{trace}")
            if len(states) > 1 and all(s == "RUNNING" for s in states):
                return
            time.sleep(0.3)
        raise ConnectError(
            f"connector {name} not running after {timeout:.0f} s ({last}):\n{self.log_tail()}"
        )

    def as_dict(self) -> dict:
        return {
            "url": self.url,
            "pid": self.pid,
            "directory": str(self.directory),
            "owns_directory": self.owns_directory,
        }


def start_connect(
    jars: str | os.PathLike,
    plugins: str | os.PathLike,
    bootstrap: str,
    connectors: Sequence[Mapping[str, object]],
    *,
    directory: str | os.PathLike | None = None,
    schemas: bool = True,
    offset_flush_ms: int = 1000,
    timeout: float = 120.0,
    heap: str = "512m",
    wait: bool = True,
) -> Connect:
    """Start Kafka Connect standalone with ``connectors`` and wait until its REST API serves
    and (``wait``) every connector and its task run.

    Args:
        jars: the worker's jars (``.jars-connect``, ``make jars-connect``).
        plugins: the folder of unpacked connector plugins (``.debezium``, ``make
            debezium``), Connect's ``plugin.path``.
        bootstrap: the Kafka broker (``host:port``).
        connectors: one configuration per connector (:func:`postgres_connector`,
            :func:`mariadb_connector`, or your own: ``name`` and ``connector.class`` at
            least). A connector may override the worker's converters
            (``value.converter.schemas.enable``).
        directory: the worker's folder. Given an existing one (a worker stopped or killed
            before), the worker goes on from the source offsets stored there. A new
            temporary folder (removed again by :meth:`Connect.stop`) when not given.
        schemas: the worker's JSON converters write the Connect ``schema``/``payload``
            wrapper (``schemas.enable``); typed decoding reads Debezium's logical types
            (decimals, timestamps) from it.
        offset_flush_ms: how often the source offsets are stored (and confirmed to
            PostgreSQL's replication slot); what a killed worker had not stored it sends
            again after a restart.
        timeout: seconds to wait for the REST API, and for each connector.
        heap: the JVM's maximum heap.
        wait: wait for the connectors too (:meth:`Connect.wait_running`); ``False``: back
            when the REST API serves.

    Returns:
        The running :class:`Connect`.

    Raises:
        ConnectError: no jars or plugins, the worker did not get ready in time, or a
            connector failed or did not run in time (the worker is stopped then, its folder
            kept when given, and the message holds its log's last lines or the trace).
    """
    jars = Path(jars).resolve()
    plugins = Path(plugins).resolve()
    if not any(jars.glob("connect-runtime-*.jar")):
        raise ConnectError(f"no Kafka Connect jars in {jars}: run `make jars-connect`")
    if not any(plugins.glob("debezium-connector-*")):
        raise ConnectError(f"no Debezium plugins in {plugins}: run `make debezium`")
    owns = directory is None
    folder = Path(tempfile.mkdtemp(prefix="cdc-connect-")) if owns else Path(directory).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    worker = folder / "worker.properties"
    worker.write_text(
        _worker_properties(folder, bootstrap, plugins, port, schemas, offset_flush_ms)
    )
    # The start-up line, and what the connectors say about their snapshot and streaming,
    # for a failed test's log tail.
    loggers = {"connect": "org.apache.kafka.connect.runtime.Connect", "debezium": "io.debezium"}
    (folder / "log4j2.properties").write_text(_log4j(folder / "connect.log", loggers))
    files = []
    for config in connectors:
        path = folder / f"{config['name']}.properties"
        path.write_text(_properties_text(config))
        files.append(str(path))
    # Start from an empty log each time: the tail shows this run.
    (folder / "connect.log").unlink(missing_ok=True)
    with open(folder / "console.log", "wb") as console:
        process = subprocess.Popen(
            [_java(), f"-Xmx{heap}", "-Xms64m", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]
            + [f"-Dlog4j2.configurationFile={folder / 'log4j2.properties'}"]
            + ["-cp", f"{jars}/*", "org.apache.kafka.connect.cli.ConnectStandalone"]
            + [str(worker), *files],
            stdout=console,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=folder,
            start_new_session=True,
        )
    connect = Connect(
        f"http://127.0.0.1:{port}",
        process.pid,
        folder,
        [dict(c) for c in connectors],
        owns,
        process,
    )
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            tail = connect.log_tail()
            connect.stop(remove=owns)
            raise ConnectError(f"Kafka Connect exited with {process.returncode}:\n{tail}")
        log = folder / "connect.log"
        if log.exists() and _READY in log.read_text(errors="replace") and _accepts(port):
            break
        if time.monotonic() > deadline:
            tail = connect.log_tail()
            connect.stop(remove=owns)
            raise ConnectError(f"Kafka Connect was not ready after {timeout:.0f} s:\n{tail}")
        time.sleep(0.2)
    try:
        for config in connectors if wait else ():
            connect.wait_running(str(config["name"]), timeout)
    except BaseException:
        connect.stop(remove=owns)
        raise
    return connect


def _common(name: str, topic_prefix: str, heartbeat_ms: int, options: Mapping[str, object]) -> dict:
    config = {
        "name": name,
        "tasks.max": "1",
        "topic.prefix": topic_prefix,
        # The transaction metadata topic (<prefix>.transaction): BEGIN/END with event counts,
        # and a `transaction` block on every change.
        "provide.transaction.metadata": "true",
        # Debezium skips TRUNCATE by default (skipped.operations=t): a table emptied in the
        # source would stay full downstream without a trace. Send it (op "t").
        "skipped.operations": "none",
        # Deletes are followed by a Kafka tombstone (null value) for log compaction.
        "tombstones.on.delete": "true",
        "decimal.handling.mode": "precise",
    }
    if heartbeat_ms:
        config["heartbeat.interval.ms"] = str(heartbeat_ms)
    config.update({k: str(v) for k, v in options.items()})
    return config


def postgres_connector(
    name: str,
    *,
    host: str,
    port: int,
    user: str,
    database: str,
    topic_prefix: str,
    password: str = "",
    slot: str | None = None,
    heartbeat_ms: int = 0,
    **options: object,
) -> dict:
    """A Debezium PostgreSQL connector configuration (``pgoutput``, no server plugin to
    install), with the settings docs/formats/debezium-json.md recommends.

    Args:
        name: the connector's name (also the replication slot's and publication's unless
            ``slot`` is given: one slot per connector).
        host, port, user, password, database: where to connect; the user needs the
            ``REPLICATION`` attribute (or to own the tables) and the server
            ``wal_level=logical``.
        topic_prefix: topics are ``<prefix>.<schema>.<table>``.
        slot: the replication slot's name.
        heartbeat_ms: a heartbeat every so many milliseconds (0: none), on
            ``__debezium-heartbeat.<prefix>``.
        **options: any other connector setting, with dots as in Debezium's docs passed as
            a dict (``**{"decimal.handling.mode": "string"}``).
    """
    slot = slot or name.replace("-", "_")
    config = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": host,
        "database.port": str(port),
        "database.user": user,
        "database.password": password,
        "database.dbname": database,
        "plugin.name": "pgoutput",
        "slot.name": slot,
        "publication.name": slot,
        "publication.autocreate.mode": "all_tables",
    }
    config.update(_common(name, topic_prefix, heartbeat_ms, options))
    return config


def mariadb_connector(
    name: str,
    *,
    host: str,
    port: int,
    user: str,
    password: str,
    topic_prefix: str,
    history_file: str | os.PathLike,
    server_id: int = 5401,
    databases: Sequence[str] | None = None,
    heartbeat_ms: int = 0,
    **options: object,
) -> dict:
    """A Debezium MySQL connector (2.6.2) configuration for MariaDB 10.11
    (``connector.adapter=mariadb``: MariaDB's GTID events start its transactions, so a
    restart resumes exactly), with the settings docs/formats/debezium-json.md recommends;
    the server needs ``log_bin``, ``binlog_format=ROW`` and a ``server_id``.

    Args:
        name: the connector's name.
        host, port, user, password: where to connect; the user needs ``SELECT, RELOAD,
            SHOW DATABASES, REPLICATION SLAVE, REPLICATION CLIENT`` (granted for the host
            it connects from: anonymous users shadow ``'%'``).
        topic_prefix: topics are ``<prefix>.<database>.<table>``.
        history_file: where the connector keeps its schema history (the tables' DDL it
            replays at a restart). A file, not the usual Kafka topic: its Kafka schema
            history calls ``KafkaConsumer.poll(long)``, which Kafka 4's clients (the
            worker's) no longer have, so a restarted task failed with ``NoSuchMethodError``.
        server_id: the connector's replication client id (unique among the server's
            replicas).
        databases: the databases to capture (all when not given).
        heartbeat_ms: a heartbeat every so many milliseconds (0: none).
        **options: any other connector setting.
    """
    config = {
        "connector.class": "io.debezium.connector.mysql.MySqlConnector",
        "connector.adapter": "mariadb",
        "database.hostname": host,
        "database.port": str(port),
        "database.user": user,
        "database.password": password,
        "database.server.id": str(server_id),
        "database.ssl.mode": "disabled",
        "snapshot.fetch.size": "1000",
        "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
        "schema.history.internal.file.filename": str(history_file),
        # Unsigned BIGINT above 2^63-1 would arrive wrapped (18446744073709551615 as -1)
        # under the default `long`; `precise` sends a decimal(20,0).
        "bigint.unsigned.handling.mode": "precise",
    }
    if databases:
        config["database.include.list"] = ",".join(databases)
    config.update(_common(name, topic_prefix, heartbeat_ms, options))
    return config


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cdc_decode._kafka_connect",
        description="Start or stop Kafka Connect standalone with Debezium on loopback.",
    )
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--jars", default=".jars-connect", help="the worker's jars")
    parser.add_argument("--plugins", default=".debezium", help="the Debezium plugins")
    parser.add_argument("--bootstrap", help="the Kafka broker (start)")
    parser.add_argument(
        "--connector", action="append", default=[], help="a connector's .properties (start)"
    )
    parser.add_argument(
        "--no-schemas", action="store_true", help="JSON without the schema/payload wrapper"
    )
    parser.add_argument(
        "--state", default=".kafka/connect.json", help="where start writes the worker's PID"
    )
    args = parser.parse_args(argv)
    state = Path(args.state)
    if args.action == "start":
        if not args.bootstrap or not args.connector:
            parser.error("start needs --bootstrap and at least one --connector")
        if state.exists():
            old = json.loads(state.read_text())
            if Connect(old["url"], old["pid"], Path(old["directory"])).alive():
                print(f"Kafka Connect already runs at {old['url']} (pid {old['pid']})")
                return 0
        configs = [_read_properties(Path(p)) for p in args.connector]
        state.parent.mkdir(parents=True, exist_ok=True)
        # The folder keeps the offsets: a restart goes on where the connectors were.
        connect = start_connect(
            args.jars,
            args.plugins,
            args.bootstrap,
            configs,
            directory=state.parent / "connect",
            schemas=not args.no_schemas,
            wait=False,
        )
        state.write_text(json.dumps(connect.as_dict()) + "\n")
        for config in configs:
            connect.wait_running(config["name"])
            print(f"connector {config['name']} running")
        print(f"Kafka Connect at {connect.url} (pid {connect.pid}, folder {connect.directory})")
        print("stop it with `make connect-stop`")
        return 0
    if not state.exists():
        print("no Kafka Connect started (no state file)")
        return 0
    old = json.loads(state.read_text())
    _stop_pid(old["pid"], 30.0)
    state.unlink()
    print(
        f"stopped Kafka Connect at {old['url']} (pid {old['pid']}); offsets kept in "
        f"{old['directory']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(_main())
