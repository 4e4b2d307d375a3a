"""A Spark standalone cluster on this machine: a master and two workers, each its own JVM
process started from pyspark's own jars, listening on 127.0.0.1 at ports chosen free now.

>>> with StandaloneCluster(workers=2, work=tmp_path) as cluster:
...     cluster.url                          # spark://127.0.0.1:PORT
>>> env = packed_env(wheel, tmp_path)        # a venv of the wheel and pyarrow, packed

The executors the workers start run the Python of a packed venv shipped with the job, as
Spark's docs recommend for clusters (``spark.archives=env.tar#environment``,
``spark.pyspark.python=./environment/bin/python``): nothing of the driver's venv is seen
there. Every process is stopped by its PID (its process group, which holds the executors a
worker started) when the block ends.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spark_home() -> Path:
    """The pyspark package folder: its ``jars/`` and ``bin/`` are a Spark distribution."""
    import pyspark

    return Path(pyspark.__file__).parent


class StandaloneCluster:
    """A standalone master and ``workers`` workers (``cores`` each), started on enter.

    Args:
        workers: how many worker processes.
        work: a folder for the logs and the workers' application folders.
        cores: cores each worker offers (one executor each, with the defaults).
        memory: memory each worker offers.
    """

    def __init__(self, *, workers: int, work: Path, cores: int = 1, memory: str = "1g") -> None:
        self.workers = workers
        self.work = Path(work)
        self.cores = cores
        self.memory = memory
        self.port = free_port()
        self.ui_port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen] = []

    def _start(self, name: str, cls: str, *args: str) -> subprocess.Popen:
        env = {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(self.work / "logs"),
            "SPARK_NO_DAEMONIZE": "1",
        }
        log = open(self.work / f"{name}.log", "wb")  # noqa: SIM115 (kept open for the JVM)
        process = subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), cls, *args],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: the worker and its executors
        )
        log.close()
        self.processes.append(process)
        return process

    def state(self) -> dict:
        """The master's view (its web UI's JSON): workers, applications."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
            return json.load(r)

    def __enter__(self) -> StandaloneCluster:
        self.work.mkdir(parents=True, exist_ok=True)
        try:
            self._start(
                "master",
                "org.apache.spark.deploy.master.Master",
                "--host", "127.0.0.1",
                "--port", str(self.port),
                "--webui-port", str(self.ui_port),
            )  # fmt: skip
            for i in range(self.workers):
                folder = self.work / f"worker-{i}"
                folder.mkdir(exist_ok=True)
                self._start(
                    f"worker-{i}",
                    "org.apache.spark.deploy.worker.Worker",
                    "--host", "127.0.0.1",
                    "--port", str(free_port()),
                    "--webui-port", str(free_port()),
                    "--cores", str(self.cores),
                    "--memory", self.memory,
                    "--work-dir", str(folder),
                    self.url,
                )  # fmt: skip
            self._wait_for_workers(timeout=90)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_for_workers(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"a Spark process exited early: {self.logs()}")
            try:
                alive = self.state().get("aliveworkers", 0)
            except OSError:
                alive = 0
            if alive == self.workers:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{alive} of {self.workers} workers registered: {self.logs()}")
            time.sleep(0.5)

    def logs(self) -> str:
        """The tails of the processes' logs, for an error message."""
        parts = []
        for log in sorted(self.work.glob("*.log")):
            parts.append(f"--- {log.name}\n" + log.read_text(errors="replace")[-3000:])
        return "\n".join(parts)

    def stop(self) -> None:
        """Workers first (their executors with them), then the master; each by its PID."""
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in reversed(self.processes):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        self.processes.clear()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def packed_env(wheel: Path, work: Path, *, requirements: list[str]) -> tuple[Path, Path]:
    """A venv holding only ``wheel`` and ``requirements`` (pyarrow), and it packed with
    venv-pack (``.tar.gz``) for ``spark.archives``.

    The venv is made from this interpreter's base Python, whose standard library its
    ``bin/python`` (a copy) uses from where it is installed: every process on this machine
    can run it, as on a cluster whose nodes share an image.

    Returns:
        The venv folder and the tar.
    """
    venv = work / "executor-env"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            str(wheel),
            *requirements,
        ],
        check=True,
    )
    # .tar.gz, as Spark's docs have it: Spark unpacks a plain .tar itself, dropping the
    # files' modes (bin/python is then not executable) and refusing bin/python's symlink
    # to the base interpreter; a .tar.gz it unpacks with Hadoop's FileUtil, which keeps both.
    tar = work / "executor-env.tar.gz"
    subprocess.run(
        [str(Path(sys.executable).parent / "venv-pack"), "-p", str(venv), "-o", str(tar),
         "--compress-level", "1", "-q"],
        check=True,
    )  # fmt: skip
    return venv, tar
