"""The Datastream tree race: readers of the same bucket tree on disk, files/s and events/s.

    make bench-datastream                         # Avro and JSON trees, 5,000 and 50,000 files
    .venv/bin/python benches/datastream_tree.py --formats datastream-avro --files 5000
    .venv-spark35/bin/python benches/datastream_tree.py --out docs/datastream-tree-spark35.md

A generated tree of ``shop.order_items`` files (``<table>/yyyy/mm/dd/hh/mm/*.avro`` or
``*.jsonl``, 50 files per minute folder, about ten events per file) is written once per
format and size; every contender reads that same tree from disk and writes typed rows of the
same columns to Spark's ``noop`` sink, on ``local[1]`` with Spark's default file settings:

- ``ours``: ``cdc_spark.read_datastream(spark, path, schema=..., event_columns=...,
  path_column=False)`` (the same seven columns as the others), as ``plan="auto"`` picks:
  on Spark 4 the ``cdc-datastream`` Python data source (files listed once, many files per
  task, read and decoded in the Python worker by the Rust core), on Spark 3.5 (no Python
  data sources) the same listing in the driver and the same reads in ``mapInArrow``;
- ``spark``: what a Spark user writes without us: for Avro the spark-avro reader
  (``spark.read.format("avro")``), for JSON ``spark.read.json`` with the schema given, then
  the format's logic as SQL expressions (op mapping, casts of the payload to the typed
  columns), the same expressions as benches/spark_race.py;
- ``in-process``: no Spark: the files read as ``read_datastream``'s tasks read them (Avro by
  the Rust core's reader, JSON by Python) and ``cdc_decode.decode`` decoding them (typed)
  in one call, the ceiling;
- ``binaryFile``, when named in ``--contenders``: the same call as ours with
  ``plan="binaryFile"`` (Spark reads the files, ``decode`` in ``mapInArrow``), the plan
  before the data source. Not raced by default: its thousands of tasks leave the shared
  JVM slower for the next contender (5,000 Avro files on Spark 3.5: ours 0.32-0.33 s a run
  without it in the rotation, 0.35-0.58 s with it).

Each contender runs ``--warmups`` times (3) on a format's smallest tree first, then
``--runs`` times per tree (3), the contenders taking turns, each run from a collected heap
(the JVM's and the driver's Python's), and the median run is reported: a read of 5,000
small files takes about a third of a second for ours, so one run is at the mercy of the
machine's other work. The page cache holds the tree for every contender alike. Writes
``--out`` (``docs/datastream-tree.md``) with the table. On pyspark 3.5 the spark-avro
contender takes ``spark-avro_2.12`` from ``.jars-spark35/`` (``make spark35-jars``).
"""

from __future__ import annotations

import argparse
import glob
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benches"))

from spark_race import (  # noqa: E402
    COLUMNS,
    DATASTREAM_JSON_FIELDS,
    OUTPUT,
    _cpu,
    _string_struct,
    datastream_json_events,
    read_datastream_avro,
)

FORMATS = ("datastream-avro", "datastream-json")
CONTENDERS = ("ours", "binaryFile", "spark", "in-process")
# binaryFile (the plan before the data source) races only when asked (the docstring says why).
RACED = ("ours", "spark", "in-process")


def ours(spark, path: str, fmt: str, plan: str = "auto"):
    from cdc_decode import spark as cdc_spark

    # Without the path column where the plan allows: the same seven columns as spark-avro.
    return cdc_spark.read_datastream(
        spark, path, format=fmt, schema=COLUMNS, event_columns=OUTPUT, plan=plan,
        **({} if plan == "binaryFile" else {"path_column": False}),
    )  # fmt: skip


def spark_avro(spark, path: str):
    """spark-avro over the tree, then the format's logic (benches/spark_race.py)."""
    return read_datastream_avro(spark, path)


def spark_json(spark, path: str):
    """spark.read.json with the schema given, then the format's logic."""
    schema = f"{DATASTREAM_JSON_FIELDS}, payload {_string_struct()}"
    j = spark.read.schema(schema).option("recursiveFileLookup", "true").json(path)
    return datastream_json_events(j)


def in_process(path: str, fmt: str) -> int:
    """Every file read as ``read_datastream``'s tasks read it (Avro by the Rust core's
    reader, JSON by Python, split into lines) and decoded in one call; returns the rows."""
    import cdc_decode
    from cdc_decode._native import read_local_files
    from cdc_decode.spark.datastream import list_tree

    files = [uri[len("file:") :] for uri, _ in list_tree(path, fmt)]
    if fmt == "datastream-avro":
        values, _ = read_local_files(files, 1 << 62)
        return cdc_decode.decode(values, fmt, schema=COLUMNS).num_rows
    lines: list[bytes] = []
    for name in files:
        with open(name, "rb") as f:
            lines.extend(f.read().splitlines())
    return cdc_decode.decode(lines, fmt, schema=COLUMNS).num_rows


class CpuMeter:
    """CPU seconds used by this process and every process below it (the Spark JVM, the
    Python workers, the planning processes) while it runs, from /proc: the machine this
    runs on may be shared, so CPU time is reported beside wall time.

    A thread samples each process's own user + system time every 100 ms; a process's
    CPU is its last sample minus its first (0 for one that started during the run), so a
    process that exits or leaves the tree keeps what was sampled (at most 100 ms lost)."""

    def __init__(self) -> None:
        import threading

        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.tick = os.sysconf("SC_CLK_TCK")
        self._stop = threading.Event()
        self._new = False
        self.sample()
        self._new = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def sample(self) -> None:
        parents: dict[int, int] = {}
        times: dict[int, float] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry)] = int(fields[1])
            times[int(entry)] = (int(fields[11]) + int(fields[12])) / self.tick
        me = os.getpid()
        for pid, cpu in times.items():
            p = pid
            while p > 1 and p != me:
                p = parents.get(p, 0)
            if p != me:
                continue
            self.first.setdefault(pid, 0.0 if self._new else cpu)
            self.last[pid] = cpu

    def _run(self) -> None:
        import threading

        self.tid = threading.get_native_id()
        while not self._stop.wait(0.1):
            self.sample()
        with open(f"/proc/self/task/{self.tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        self.own = (int(fields[11]) + int(fields[12])) / self.tick

    def stop(self) -> float:
        """Stops sampling; the CPU seconds used since the meter started (less the
        sampling thread's own)."""
        self._stop.set()
        self.thread.join()
        self.sample()
        return sum(self.last[pid] - self.first[pid] for pid in self.last) - self.own


def run(spark, contender: str, fmt: str, path: str) -> tuple[float, float]:
    """One read of the tree by ``contender`` into the noop sink: (wall, CPU) seconds.

    Every run starts from a collected heap, the JVM's and the driver's Python's, so one
    contender's garbage (``binaryFile``'s 5,000 tasks, the in-process decode's arrays) is
    not collected in the next one's time."""
    import gc

    gc.collect()
    spark.sparkContext._jvm.System.gc()
    meter = CpuMeter()
    start = time.perf_counter()
    if contender == "in-process":
        in_process(path, fmt)
        return time.perf_counter() - start, meter.stop()
    if contender == "ours":
        frame = ours(spark, path, fmt)
    elif contender == "binaryFile":
        frame = ours(spark, path, fmt, plan="binaryFile")
    elif fmt == "datastream-avro":
        frame = spark_avro(spark, path)
    else:
        frame = spark_json(spark, path)
    frame.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start, meter.stop()


def session():
    import pyspark

    from cdc_decode.spark import local_session

    folder, make = (
        (".jars", "jars") if pyspark.__version__ >= "4" else (".jars-spark35", "spark35-jars")
    )
    jars = sorted(glob.glob(str(ROOT / folder / "*.jar")))
    if not any(Path(j).name.startswith("spark-avro") for j in jars):
        sys.exit(f"no spark-avro in {folder}/: run `make {make}` (for the Avro contender)")
    return local_session(
        "cdc-decode-tree-race",
        master="local[1]",
        spark__jars=",".join(jars),
        spark__driver__memory="8g",  # spark-avro ran out of 4g on 50,000 files after the warm-ups
    )


def table(rows: list[tuple[str, int, str, int, float, float]], runs: int) -> str:
    import pyspark

    lines = [
        f"Spark {pyspark.__version__}, local[1], {platform.machine()} ({_cpu()}), Python "
        f"{platform.python_version()}, {os.cpu_count()} cores; the median of {runs} runs "
        "per tree (the contenders taking turns) after a warm-up, noop sink, typed rows. "
        "Wall: elapsed seconds; CPU: CPU seconds of the driver, the JVM and the Python "
        "workers together, in the median run.",
        "",
        "| tree | files | contender | wall s | files/s | events/s | CPU s | files/CPU s "
        "| ours vs it (wall) | (CPU) |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    ours = {(f, n): (w, c) for f, n, k, _, w, c in rows if k == "ours"}
    for fmt, files, contender, events, wall, cpu in rows:
        ratio = ["", ""]
        if contender != "ours" and (fmt, files) in ours:
            ratio = [f"{x / o:.1f}x" for x, o in zip((wall, cpu), ours[fmt, files], strict=True)]
        lines.append(
            f"| `{fmt}` | {files:,} | {contender} | {wall:.2f} | {files / wall:,.0f} | "
            f"{events / wall:,.0f} | {cpu:.2f} | {files / max(cpu, 1e-9):,.0f} | "
            f"{ratio[0]} | {ratio[1]} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--formats", nargs="*", default=list(FORMATS), choices=FORMATS)
    parser.add_argument("--files", nargs="*", type=int, default=[5000, 50000])
    parser.add_argument(
        "--contenders",
        nargs="*",
        default=list(RACED),
        choices=CONTENDERS,
        help="default: ours, spark, in-process (binaryFile when named)",
    )
    parser.add_argument(
        "--binaryfile-max",
        type=int,
        default=5000,
        help="race the binaryFile plan on trees of at most this many files (it is slow)",
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per tree; the median counts")
    parser.add_argument(
        "--warmups",
        type=int,
        default=3,
        help="untimed runs of each contender on a format's smallest tree first (the JVM "
        "compiles a plan's code only after a few runs of it)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="write the table here (.md)")
    args = parser.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from cdc_decode.generate.tree import write_tree

    spark = session()
    rows = []
    (ROOT / "target").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=str(ROOT / "target"), prefix="tree-race-") as tmp:
        for fmt in args.formats:
            for i, files in enumerate(sorted(args.files)):
                path = str(Path(tmp) / f"{fmt}-{files}")
                tree = write_tree(fmt, path, files=files, seed=args.seed)
                racing = [
                    c for c in args.contenders
                    if not (c == "binaryFile" and files > args.binaryfile_max)
                ]  # fmt: skip
                if i == 0:
                    for _ in range(args.warmups):
                        for contender in racing:
                            run(spark, contender, fmt, path)
                timed: dict[str, list[tuple[float, float]]] = {c: [] for c in racing}
                for _ in range(args.runs):
                    for contender in racing:
                        wall, cpu = run(spark, contender, fmt, path)
                        timed[contender].append((wall, cpu))
                        print(
                            f"{fmt:16} {files:>7,} files {contender:11} {wall:7.2f} s "
                            f"{files / wall:>9,.0f} files/s {tree.events / wall:>10,.0f} "
                            f"events/s  CPU {cpu:7.2f} s",
                            flush=True,
                        )
                for contender in racing:
                    wall, cpu = sorted(timed[contender])[len(timed[contender]) // 2]
                    rows.append((fmt, files, contender, tree.events, wall, cpu))
    spark.stop()
    print()
    print(table(rows, args.runs))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table(rows, args.runs) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
