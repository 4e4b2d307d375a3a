"""Decode a Tencent DTS topic with Structured Streaming into Parquet, one folder per
micro-batch; prints the events per op.

Needs Java 17, a Kafka broker and a Python with ``cdc-decode`` and ``pyspark``. Spark's
Kafka source is not in the pip ``pyspark`` package: it comes from Maven Central on the
first run (``spark.jars.packages``, cached in ``~/.ivy2``), or from a folder given with
``--jars``:

    pip install cdc-decode 'pyspark[sql]'
    python kafka_stream.py BOOTSTRAP TOPIC OUT [--jars DIR]

In this repository: ``make kafka`` starts a broker and prints its address, ``make jars``
fetches the connector into ``.jars/``, and ``.venv/bin/python examples/kafka_stream.py
BOOTSTRAP TOPIC OUT --jars .jars`` runs it. The part between the ``README`` marks is the
README's Kafka example; tests/test_streaming.py runs this file against a real broker.
"""

from __future__ import annotations

import argparse

from cdc_decode import spark as cdc_spark


def main(spark, bootstrap: str, topic: str, out: str) -> None:
    """Decode everything on ``topic`` now into ``out/events``, then stop."""
    # --- README ---
    kafka = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")  # DTS sets are keyed by the ShardId header too
        .load()
    )
    # Multi-part sets cut by a micro-batch are held in the checkpoint's state and joined.
    events = cdc_spark.decode_stream(kafka, "tencent-dts")

    def write(batch, batch_id):  # idempotent: a micro-batch run again replaces its folder
        batch.write.mode("overwrite").parquet(f"{out}/events/batch_id={batch_id}")

    query = (
        events.writeStream.option("checkpointLocation", f"{out}/checkpoint")
        .foreachBatch(write)
        .trigger(availableNow=True)  # or processingTime="10 seconds" to keep running
        .start()
    )
    query.awaitTermination()
    # --- README ---


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bootstrap", help="the broker, host:port")
    parser.add_argument("topic")
    parser.add_argument("out", help="a folder: events/ and checkpoint/ go there")
    parser.add_argument("--jars", action="append", default=[], help="a folder of Kafka's jars")
    args = parser.parse_args()
    session = cdc_spark.local_session(
        "kafka-stream",
        master="local[1]",
        kafka=True,
        jars=args.jars,
        spark__sql__shuffle__partitions="2",  # the state operator's partitions
    )
    main(session, args.bootstrap, args.topic, args.out)
    print(session.read.parquet(f"{args.out}/events").groupBy("op").count().collect())
