"""Decode a Tencent DTS topic with Structured Streaming into Parquet, one folder per
micro-batch.

    .venv/bin/python examples/kafka_stream.py BOOTSTRAP TOPIC OUT

(``make kafka`` starts a broker and prints its address; ``make jars`` fetches Spark's Kafka
connector into ``.jars/``.) The part between the ``README`` marks is the README's Kafka
example; tests/test_streaming.py runs it against a real broker.
"""

from __future__ import annotations

import sys
from pathlib import Path

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
    bootstrap, topic, out = sys.argv[1:4]
    jars = sorted((Path(__file__).resolve().parent.parent / ".jars").glob("*.jar"))
    session = cdc_spark.local_session(
        "kafka-stream",
        master="local[1]",
        spark__jars=",".join(map(str, jars)),
        spark__sql__shuffle__partitions="2",  # the state operator's partitions
    )
    main(session, bootstrap, topic, out)
    print(session.read.parquet(f"{out}/events").groupBy("op").count().collect())
