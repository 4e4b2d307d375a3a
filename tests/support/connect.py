"""A Spark Connect server of our own, for ``spark-pipelines --remote``.

``spark-pipelines run`` starts a local Connect server on the fixed port 15002 unless it is
given ``--remote``; tests run next to other Spark processes, so they start the server here
on a free loopback port and stop it by its PID.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


@dataclass
class ConnectServer:
    """A running server: its ``sc://`` address, its warehouse folder, its log and its
    process."""

    url: str
    warehouse: Path
    log: Path
    process: subprocess.Popen


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spark_env() -> dict[str, str]:
    """The environment for Spark processes: this interpreter for the Python workers, and
    every address on loopback."""
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env.pop("SPARK_REMOTE", None)
    return env


def bin_dir() -> Path:
    """The folder of ``spark-submit`` and ``spark-pipelines``: the venv's ``bin``."""
    return Path(sys.executable).parent


def start_connect_server(
    workdir: Path, conf: Mapping[str, str], *, timeout: float = 180
) -> ConnectServer:
    """Start ``SparkConnectServer`` (``local[1]``) with the settings ``conf``.

    Args:
        workdir: its warehouse (``workdir/warehouse``) and log (``workdir/connect.log``).
        conf: more Spark settings (``spark.jars``, catalogs, ...).
        timeout: seconds to wait for the server to listen.

    Returns:
        The running server; stop it with :func:`stop_connect_server`.

    Raises:
        RuntimeError: the server ended or did not listen in time (its log's tail included).
    """
    port = free_port()
    warehouse = workdir / "warehouse"
    log = workdir / "connect.log"
    settings = {
        "spark.master": "local[1]",
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "1",
        "spark.default.parallelism": "1",
        "spark.sql.warehouse.dir": str(warehouse),
        **conf,
    }
    command = [str(bin_dir() / "spark-submit"), "--class", SERVER_CLASS]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    command.append("spark-internal")
    with open(log, "wb") as out:
        process = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=spark_env(),
            cwd=workdir,
            start_new_session=True,
        )
    server = ConnectServer(f"sc://127.0.0.1:{port}", warehouse, log, process)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the Connect server ended:\n{_tail(log)}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return server
        time.sleep(0.5)
    stop_connect_server(server)
    raise RuntimeError(f"the Connect server did not listen in {timeout} s:\n{_tail(log)}")


def stop_connect_server(server: ConnectServer, *, timeout: float = 30) -> None:
    """Stop the server's process group (the JVM it started as and its Python workers), by
    its PID."""
    process = server.process
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def connect_server(workdir: Path, conf: Mapping[str, str]) -> Iterator[ConnectServer]:
    """For a fixture: a started server, stopped after the ``yield``."""
    server = start_connect_server(workdir, conf)
    try:
        yield server
    finally:
        stop_connect_server(server)


def _tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
