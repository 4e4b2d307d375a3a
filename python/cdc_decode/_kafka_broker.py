"""A single-node Apache Kafka broker (KRaft mode, no ZooKeeper, no Docker) on loopback.

For the streaming tests, ``make kafka`` and ``make demo-stream``: the broker's jars come
from ``tools/kafka-broker/pom.xml`` (``make jars-kafka`` copies them into ``.jars-kafka/``),
and it runs as one ``java`` process in a temporary folder, on ports chosen free at start,
listening on 127.0.0.1 only. It is stopped by its PID.

>>> broker = start_broker(".jars-kafka")
>>> broker.bootstrap
'127.0.0.1:40913'
>>> broker.stop()

From a shell (``make kafka`` / ``make kafka-stop``)::

    python -m cdc_decode._kafka_broker start --jars .jars-kafka --state .kafka/broker.json
    python -m cdc_decode._kafka_broker stop --state .kafka/broker.json
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Broker", "BrokerError", "free_port", "start_broker"]

_READY = "Kafka Server started"


class BrokerError(RuntimeError):
    """The broker did not start (its log's last lines are in the message)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _properties(directory: Path, port: int, controller: int) -> str:
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{controller}",
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"log.dirs={directory / 'data'}",
            "num.partitions=1",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "auto.create.topics.enable=true",
            # Small segments and no fsync: a test broker, restarted empty every time.
            "log.segment.bytes=67108864",
            "log.retention.check.interval.ms=600000",
            "",
        ]
    )


def _log4j(log: Path, info: dict[str, str] | None = None) -> str:
    """A log4j 2 configuration: WARN and above into the file ``log`` (the default one prints
    every INFO line of start-up to the console), and INFO of the ``info`` loggers (short
    name -> logger) too."""
    lines = [
        "status = warn",
        "appender.file.type = File",
        "appender.file.name = file",
        f"appender.file.fileName = {log}",
        "appender.file.layout.type = PatternLayout",
        "appender.file.layout.pattern = [%d] %p %m (%c)%n",
        "rootLogger.level = warn",
        "rootLogger.appenderRef.file.ref = file",
    ]
    for name, logger in (info or {}).items():
        lines += [f"logger.{name}.name = {logger}", f"logger.{name}.level = info"]
    return "\n".join([*lines, ""])


@dataclass
class Broker:
    """A running broker.

    Attributes:
        bootstrap: ``host:port`` for clients (``kafka.bootstrap.servers``).
        pid: the ``java`` process.
        directory: its folder (configuration, log, data); removed by :meth:`stop` when
            :func:`start_broker` made it.
    """

    bootstrap: str
    pid: int
    directory: Path
    owns_directory: bool = True
    process: subprocess.Popen | None = field(default=None, repr=False, compare=False)

    def alive(self) -> bool:
        """Whether the process still runs."""
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        try:  # a zombie child of this process counts as gone
            done, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return True
        return done == 0

    def stop(self, timeout: float = 15.0) -> None:
        """Stop the broker by its PID (SIGTERM, then SIGKILL after ``timeout`` seconds) and
        remove its folder when it made it."""
        _stop_pid(self.pid, timeout)
        if self.process is not None:
            self.process.returncode = self.process.poll() or -signal.SIGTERM
        if self.owns_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the broker's log and console output."""
        text = ""
        for name in ("broker.log", "console.log"):
            path = self.directory / name
            if path.exists():
                text += path.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def as_dict(self) -> dict:
        return {
            "bootstrap": self.bootstrap,
            "pid": self.pid,
            "directory": str(self.directory),
            "owns_directory": self.owns_directory,
        }


def _stop_pid(pid: int, timeout: float) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                return
        except ChildProcessError:  # not our child: poll for it to go
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise BrokerError("no java on PATH (the broker needs Java 17+)")
    return java


def start_broker(
    jars: str | os.PathLike,
    *,
    directory: str | os.PathLike | None = None,
    timeout: float = 60.0,
    heap: str = "384m",
) -> Broker:
    """Start a KRaft single-node broker on free loopback ports and wait until it serves.

    Args:
        jars: the folder of the broker's jars (``.jars-kafka``, made by ``make jars-kafka``).
        directory: where its configuration, log and data go; a new temporary folder
            (removed again by :meth:`Broker.stop`) when not given.
        timeout: seconds to wait for it to be ready.
        heap: the JVM's maximum heap.

    Returns:
        The running :class:`Broker`.

    Raises:
        BrokerError: no jars, no Java, or the broker did not get ready in time (it is
            stopped then, and the message holds its log's last lines).
    """
    jars = Path(jars).resolve()
    if not any(jars.glob("kafka_2.13-*.jar")):
        raise BrokerError(f"no Kafka broker jars in {jars}: run `make jars-kafka`")
    owns = directory is None
    folder = Path(tempfile.mkdtemp(prefix="cdc-kafka-")) if owns else Path(directory).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    port, controller = free_port(), free_port()
    while controller == port:
        controller = free_port()
    config = folder / "server.properties"
    config.write_text(_properties(folder, port, controller))
    # The one INFO line that says the broker is up.
    log4j = _log4j(folder / "broker.log", {"server": "kafka.server.KafkaRaftServer"})
    (folder / "log4j2.properties").write_text(log4j)
    java = _java()
    classpath = f"{jars}/*"
    log_config = f"-Dlog4j2.configurationFile={folder / 'log4j2.properties'}"
    # A cluster id starting with "-" reads as an option to the storage tool (Kafka's own
    # Uuid.randomUuid() never makes one): draw again.
    cluster = "-"
    while cluster.startswith("-"):
        cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    formatted = subprocess.run(
        [java, "-Xmx128m", log_config, "-cp", classpath, "kafka.tools.StorageTool", "format"]
        + ["-t", cluster, "-c", str(config)],
        capture_output=True,
        text=True,
    )
    if formatted.returncode != 0:
        if owns:
            shutil.rmtree(folder, ignore_errors=True)
        raise BrokerError(f"kafka-storage format failed:\n{formatted.stdout}{formatted.stderr}")
    with open(folder / "console.log", "wb") as console:
        process = subprocess.Popen(
            [java, f"-Xmx{heap}", "-Xms64m", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]
            + [log_config, "-cp", classpath, "kafka.Kafka", str(config)],
            stdout=console,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=folder,
            start_new_session=True,
        )
    broker = Broker(f"127.0.0.1:{port}", process.pid, folder, owns, process)
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            tail = broker.log_tail()
            broker.stop()
            raise BrokerError(f"the broker exited with {process.returncode}:\n{tail}")
        log = folder / "broker.log"
        if log.exists() and _READY in log.read_text(errors="replace") and _accepts(port):
            return broker
        if time.monotonic() > deadline:
            tail = broker.log_tail()
            broker.stop()
            raise BrokerError(f"the broker was not ready after {timeout:.0f} s:\n{tail}")
        time.sleep(0.1)


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cdc_decode._kafka_broker",
        description="Start or stop a single-node Kafka broker on loopback (KRaft).",
    )
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--jars", default=".jars-kafka", help="the broker's jars")
    parser.add_argument(
        "--state", default=".kafka/broker.json", help="where start writes the broker's PID"
    )
    args = parser.parse_args(argv)
    state = Path(args.state)
    if args.action == "start":
        if state.exists():
            old = json.loads(state.read_text())
            if Broker(old["bootstrap"], old["pid"], Path(old["directory"])).alive():
                print(f"a broker already runs at {old['bootstrap']} (pid {old['pid']})")
                return 0
        state.parent.mkdir(parents=True, exist_ok=True)
        folder = state.parent / "broker"
        shutil.rmtree(folder, ignore_errors=True)  # a stopped broker's data: start empty
        broker = start_broker(args.jars, directory=folder)
        state.write_text(json.dumps(broker.as_dict()) + "\n")
        print(f"Kafka broker at {broker.bootstrap} (pid {broker.pid}, folder {broker.directory})")
        print("stop it with `make kafka-stop`")
        return 0
    if not state.exists():
        print("no broker started (no state file)")
        return 0
    old = json.loads(state.read_text())
    _stop_pid(old["pid"], 15.0)
    shutil.rmtree(old["directory"], ignore_errors=True)
    state.unlink()
    print(f"stopped the broker at {old['bootstrap']} (pid {old['pid']})")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
