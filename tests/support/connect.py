"""A Spark Connect server: its own JVM (``SparkConnectServer`` from pyspark's jars, master
``local[1]``) listening on 127.0.0.1 at a port chosen free now, stopped by its PID.

>>> with ConnectServer(work=tmp_path) as server:
...     spark = SparkSession.builder.remote(server.url).getOrCreate()

Its Python workers run this interpreter (``PYSPARK_PYTHON``), which has ``cdc_decode``.
``spark-pipelines run`` starts a server on the fixed port 15002 unless given ``--remote``,
so the pipeline tests start one here too (:func:`connect_server`).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from support.cluster import free_port, spark_home


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


class ConnectServer:
    """A Spark Connect server, started on enter and stopped on exit.

    Args:
        work: a folder for its log and its warehouse (``work/warehouse``).
        master: the server's Spark master.
        conf: more Spark settings (``spark.jars``, catalogs, ...).
    """

    def __init__(
        self, *, work: Path, master: str = "local[1]", conf: Mapping[str, str] | None = None
    ) -> None:
        self.work = Path(work)
        self.master = master
        self.conf = dict(conf or {})
        self.warehouse = self.work / "warehouse"
        self.port = free_port()
        self.url = f"sc://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> ConnectServer:
        self.work.mkdir(parents=True, exist_ok=True)
        env = {**spark_env(), "SPARK_HOME": str(spark_home())}
        settings = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.warehouse.dir": str(self.warehouse),
            **self.conf,
        }
        conf = [arg for key, value in settings.items() for arg in ("--conf", f"{key}={value}")]
        self.log = self.work / "connect-server.log"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [
                    str(spark_home() / "bin" / "spark-submit"),
                    "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
                    "--name", "cdc-decode-connect-test",
                    "--master", self.master,
                    "--driver-memory", "1g",
                    *conf,
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        try:
            self._wait(timeout=120)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the Connect server exited: {self.tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"the Connect server did not listen: {self.tail()}")
            time.sleep(0.5)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        """SIGTERM to the server's process group (its PID), SIGKILL if it lingers."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def __exit__(self, *exc: object) -> None:
        self.stop()


def connect_server(work: Path, conf: Mapping[str, str]) -> Iterator[ConnectServer]:
    """For a fixture: a server with the settings ``conf``, stopped after the ``yield``."""
    with ConnectServer(work=work, conf=conf) as server:
        yield server
