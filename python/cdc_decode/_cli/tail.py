"""``cdc-decode tail``: read a live Kafka topic and print its events as they come.

Needs ``confluent-kafka`` (the ``cli`` extra). Every partition of the topic is read by one
consumer with no group offsets committed; one decoder joins Tencent DTS multi-part sets
per ``topic/partition/ShardId``, across polls. Ctrl-C (SIGINT) or SIGTERM stops it and
prints the counts; sets still open then are counted as ``pending``, not as errors.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable

from .inputs import Chunk, InputError

POLL_SECONDS = 0.5
BATCH = 1000


def add_parser(commands, input_options, print_options) -> None:
    tail = commands.add_parser(
        "tail",
        help="decode a live Kafka topic as it goes; Ctrl-C prints the counts",
        description="Read every partition of a Kafka topic and print its events as they "
        "arrive (a table, or --json lines). Starts at the end of each partition unless told "
        "otherwise. Ctrl-C prints the counts.",
    )
    tail.add_argument("--bootstrap", required=True, metavar="HOST:PORT", help="a Kafka broker")
    tail.add_argument("--topic", required=True, metavar="T", help="the topic")
    start = tail.add_mutually_exclusive_group()
    start.add_argument(
        "--from-beginning", action="store_true", help="start at each partition's first record"
    )
    start.add_argument(
        "--offset", type=int, metavar="N", help="start at offset N of every partition"
    )
    start.add_argument(
        "--last", type=int, metavar="N", help="start N records before each partition's end"
    )
    tail.add_argument(
        "--exit",
        action="store_true",
        help="stop when every partition is read to its end (as kcat -e), instead of waiting",
    )
    print_options(tail)
    tail.add_argument(
        "--property",
        "-X",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a librdkafka consumer property (security.protocol=SSL, ...), repeatable",
    )
    input_options(tail)


def _client_log():
    """librdkafka's log as a Python logger that says each distinct line once on stderr
    (an unreachable broker is otherwise the same line twenty times a second)."""
    import logging

    class Once(logging.Handler):
        def __init__(self) -> None:
            super().__init__()
            self.seen: set[str] = set()

        def emit(self, record: logging.LogRecord) -> None:
            text = record.getMessage()
            if text not in self.seen:
                self.seen.add(text)
                print(f"cdc-decode: kafka: {text}", file=sys.stderr, flush=True)

    logger = logging.getLogger("cdc_decode.tail.kafka")
    logger.propagate = False
    if not logger.handlers:
        logger.addHandler(Once())
    return logger


def _consumer(args):
    from .run import UsageError

    try:
        from confluent_kafka import Consumer
    except ImportError as exc:
        raise UsageError("tail needs confluent-kafka: pip install 'cdc-decode[cli]'") from exc
    config = {
        "bootstrap.servers": args.bootstrap,
        "group.id": f"cdc-decode-tail-{os.getpid()}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
    }
    config["logger"] = _client_log()
    for item in args.property:
        name, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"-X {item!r}: expected NAME=VALUE")
        config[name] = value
    try:
        return Consumer(config)
    except Exception as exc:  # KafkaException: a bad property
        raise UsageError(f"cannot make a Kafka consumer: {exc}") from exc


def _assign(consumer, args) -> list:
    """Assign every partition of the topic at the asked start; returns them."""
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

    from .run import UsageError

    try:
        metadata = consumer.list_topics(args.topic, timeout=15)
    except Exception as exc:
        raise UsageError(f"cannot reach {args.bootstrap}: {exc}") from exc
    topic = metadata.topics.get(args.topic)
    if topic is None or topic.error is not None or not topic.partitions:
        why = topic.error if topic is not None and topic.error is not None else "no partitions"
        raise UsageError(f"topic {args.topic!r}: {why}")
    assignment = []
    for partition in sorted(topic.partitions):
        tp = TopicPartition(args.topic, partition)
        if args.from_beginning:
            tp.offset = OFFSET_BEGINNING
        elif args.offset is not None:
            tp.offset = args.offset
        elif args.last is not None:
            low, high = consumer.get_watermark_offsets(tp, timeout=15)
            tp.offset = max(low, high - args.last)
        else:
            tp.offset = OFFSET_END
        assignment.append(tp)
    consumer.assign(assignment)
    return assignment


def _chunk(messages, topic: str, at_end: set[int]) -> Chunk:
    """Polled records as a chunk of values; broker errors as input errors."""
    from confluent_kafka import KafkaError

    chunk = Chunk(values=[], keys=[], offsets=[])
    for message in messages:
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                at_end.add(message.partition())
                continue
            chunk.errors.append(InputError(f"{topic}/{message.partition()}", str(error)))
            continue
        partition = message.partition()
        at_end.discard(partition)
        stream = f"{message.topic()}/{partition}"
        key = stream
        for name, value in message.headers() or ():
            if name == "ShardId" and value is not None:
                key = f"{stream}/{value.decode('utf-8', 'backslashreplace')}"
                break
        value = message.value()
        chunk.values.append(value)
        chunk.wheres.append(f"{stream}@{message.offset()}")
        chunk.keys.append(key)
        chunk.offsets.append((stream, message.offset()))
        chunk.bytes_read += 0 if value is None else len(value)
    return chunk


def _continuation(value: bytes | None) -> bool:
    """Whether a DTS value is a later part (index > 0) of a multi-part set."""
    if value is None:
        return False
    from .. import _proto as pb

    try:
        envelope = pb.Envelope.FromString(value)
    except Exception:  # not an Envelope: the decoder reports it
        return False
    return envelope.total > 1 and envelope.index > 0


def _skip_leading_parts(chunk: Chunk, begun: set[str], skipped: list[str]) -> Chunk:
    """A DTS partition read from an offset inside a multi-part set starts with the set's
    later parts, whose first part is before the start: they cannot be joined, so they are
    left out (and listed in ``skipped``) rather than reported as broken sets."""
    keep = []
    rows = zip(chunk.values, chunk.wheres, chunk.keys, strict=True)
    for i, (value, where, key) in enumerate(rows):
        if key not in begun:
            if _continuation(value):
                skipped.append(where)
                continue
            begun.add(key)
        keep.append(i)
    if len(keep) == len(chunk.values):
        return chunk
    return Chunk(
        values=[chunk.values[i] for i in keep],
        wheres=[chunk.wheres[i] for i in keep],
        keys=[chunk.keys[i] for i in keep],
        offsets=chunk.offsets,
        errors=chunk.errors,
        bytes_read=chunk.bytes_read,
    )


def run(args, *, say: Callable[[str], None]) -> int:
    """Run ``tail`` until Ctrl-C (or, with ``--exit``, the end of every partition)."""
    from .output import JsonSink, TableSink, stdout
    from .run import Pipeline, as_columns, as_table_map, count, guess_format, schema_text

    consumer = _consumer(args)
    stop = []

    def on_signal(signum, frame):  # checked between polls: no half-decoded batch
        stop.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    started = time.perf_counter()
    pipeline = None
    sink = None
    ops: Counter[str] = Counter()
    pending: list[Chunk] = []
    begun: set[str] = set()
    skipped: list[str] = []

    def feed(chunk: Chunk) -> None:
        if pipeline.format == "tencent-dts":
            chunk = _skip_leading_parts(chunk, begun, skipped)
        pipeline.feed(chunk)

    try:
        assignment = _assign(consumer, args)
        say(
            f"reading {args.topic} ({len(assignment)} partitions) from {args.bootstrap}; "
            "Ctrl-C stops"
        )
        at_end: set[int] = set()
        fmt = args.format
        while not stop:
            messages = consumer.consume(num_messages=BATCH, timeout=POLL_SECONDS)
            chunk = _chunk(messages, args.topic, at_end)
            if pipeline is None:
                pending.append(chunk)
                values = [v for c in pending for v in c.values if v is not None]
                if fmt == "auto" and values:
                    fmt, why = guess_format(values, engine=args.engine)
                    say(f"--format auto: {fmt} ({why})")
                if fmt != "auto":
                    pipeline = Pipeline(
                        fmt,
                        engine=args.engine,
                        schema=schema_text(args.schema),
                        tables=as_table_map(args.tables) or None,
                        columns=as_columns(args.columns) or None,
                    )
                    options = {"errors_only": args.errors, "tables": pipeline.tables}
                    if args.json:
                        sink = JsonSink(stdout(), **options)
                    else:
                        sink = TableSink(stdout(), wide=args.wide, **options)
                    pipeline.on_rows.append(sink.events)
                    pipeline.on_rows.append(
                        lambda batch, ordinals, wheres: ops.update(batch.column("op").to_pylist())
                    )
                    pipeline.on_input_error.append(sink.input_error)
                    for held in pending:
                        feed(held)
                    pending = []
            else:
                feed(chunk)
            if sink is not None:
                sink.close()  # flush: a reader sees each event as it is decoded
            if args.exit and len(at_end) == len(assignment):
                break
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        consumer.close()
    seconds = time.perf_counter() - started
    if pipeline is None:
        counters = dict.fromkeys(
            ("messages", "decoded", "events", "errors", "pending", "input_errors"), 0
        )
        counters["messages"] = sum(len(c) for c in pending)
        counters["input_errors"] = sum(len(c.errors) for c in pending)
    else:
        counters = pipeline.stats()
    errors = counters["errors"] + counters["input_errors"]
    by_op = ", ".join(f"{op} {n:,}" for op, n in ops.most_common())
    if skipped:
        say(
            f"left out {len(skipped)} later parts of DTS multi-part sets begun before the "
            f"start offset ({', '.join(skipped[:5])}{', …' if len(skipped) > 5 else ''})"
        )
    print(
        f"\n{'stopped' if stop else 'end of topic'}: {count(counters['messages'], 'message')} "
        f"({fmt}): {count(counters['events'], 'event')}, {count(errors, 'error')}, "
        f"{counters['pending']:,} pending in {seconds:.1f} s"
        + (f"\nby op: {by_op}" if by_op else ""),
        file=sys.stderr,
        flush=True,
    )
    return 1 if errors else 0
