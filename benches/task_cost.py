"""What one Spark task of ``cdc_spark.decode`` costs besides decoding: the fixed cost per task.

    .venv/bin/python benches/task_cost.py            # 20 and 200 one-row partitions

A DataFrame of one Datastream Avro file per partition (cached) is written to the ``noop``
sink through a ``mapInArrow`` that returns its input (``passthrough``: Spark's own cost of
a Python task), through one that returns no rows in the event schema (Spark's handling of
that wide output type), through ``decode`` (generic images) and through ``decode`` typed. The fixed
cost per task is the difference between ``--many`` and ``--few`` partitions divided by the
extra tasks, in wall and in CPU seconds (the driver, the JVM and the Python workers). Then,
in this process, what our part of a task costs: unpickling the function Spark sends and
running it on a one-row batch (decoder construction, decode, the output batch).
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benches"))

from datastream_tree import CpuMeter  # noqa: E402
from spark_race import COLUMNS  # noqa: E402


def frames(spark, value: bytes, partitions: int):
    from cdc_decode import spark as cdc_spark

    df = (
        spark.sparkContext.parallelize([(value,)] * partitions, partitions)
        .toDF("content binary")
        .cache()
    )
    df.count()
    import pyarrow as pa

    from cdc_decode import event_schema

    events = event_schema()

    def schema_only(batches):
        for _ in batches:
            pass
        yield pa.RecordBatch.from_pylist([], schema=events)

    return df, {
        "passthrough": df.mapInArrow(lambda batches: batches, df.schema),
        # The event schema's output, no decoder: what Spark's handling of it costs a task.
        "event schema, no rows": df.mapInArrow(schema_only, cdc_spark.spark_event_schema()),
        "decode": cdc_spark.decode(df, "datastream-avro", value_col="content", keep=[]),
        "decode typed": cdc_spark.decode(
            df, "datastream-avro", value_col="content", keep=[], schema=COLUMNS
        ),
    }


def timed(frame, rounds: int) -> tuple[float, float]:
    """Best (wall, CPU) seconds of ``rounds`` noop writes after a warm-up."""
    frame.write.format("noop").mode("overwrite").save()
    best = (float("inf"), float("inf"))
    for _ in range(rounds):
        meter = CpuMeter()
        start = time.perf_counter()
        frame.write.format("noop").mode("overwrite").save()
        best = min(best, (time.perf_counter() - start, meter.stop()))
    return best


def in_process(value: bytes, rounds: int = 300) -> dict[str, float]:
    """Milliseconds of CPU for our part of one task, in this process."""
    import pyarrow as pa
    from pyspark import cloudpickle

    from cdc_decode._limits import as_limits
    from cdc_decode.spark.decoding import _partition_decoder, _Typed

    batch = pa.RecordBatch.from_pydict({"content": pa.array([value], pa.binary())})
    out = {}
    for label, schema in (("generic", None), ("typed", COLUMNS)):
        fn = _partition_decoder(
            "datastream-avro", mode="permissive", engine="native", value_col="content",
            keep=[], has_topic=False, has_headers=False, schema=_Typed(schema, None).schema,
            limits=as_limits(None),
        )  # fmt: skip
        blob = cloudpickle.dumps(fn)
        start = time.process_time()
        for _ in range(rounds):
            list(pickle.loads(blob)(iter([batch])))
        out[label] = (time.process_time() - start) / rounds * 1e3
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--few", type=int, default=20)
    parser.add_argument("--many", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from cdc_decode.generate import generate
    from cdc_decode.spark import local_session

    value = next(v for v in generate("datastream-avro", messages=20, seed=1).values if v)
    spark = local_session("cdc-decode-task-cost", master="local[1]")
    results: dict[str, dict[int, tuple[float, float]]] = {}
    for partitions in (args.few, args.many):
        df, contenders = frames(spark, value, partitions)
        for name, frame in contenders.items():
            results.setdefault(name, {})[partitions] = timed(frame, args.rounds)
        df.unpersist()
    spark.stop()
    extra = args.many - args.few
    print(f"fixed cost per task, from {args.few} and {args.many} one-row partitions, local[1]:")
    print("| plan | wall ms/task | CPU ms/task |")
    print("|---|---:|---:|")
    for name, by in results.items():
        wall = (by[args.many][0] - by[args.few][0]) / extra * 1e3
        cpu = (by[args.many][1] - by[args.few][1]) / extra * 1e3
        print(f"| {name} | {wall:.1f} | {cpu:.1f} |")
    ours = in_process(value)
    print(
        "our part of a task, in process (unpickle the function, build the decoder, decode "
        f"one file, build the output): generic {ours['generic']:.2f} ms, typed "
        f"{ours['typed']:.2f} ms of CPU"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
