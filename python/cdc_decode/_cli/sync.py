"""``cdc-decode sync``: the streaming whole-database sync as a job (docs/sync.md).

Reads a Kafka topic (or a Datastream bucket tree) with Spark and syncs every table into its
own Delta table with :func:`cdc_decode.spark.sync_stream`, printing one line per
micro-batch. On ``spark-submit`` it uses the session that gives it; ``--master`` starts a
local one (with ``--jars`` for Delta's and Kafka's jars, else from Maven Central). Ctrl-C
(SIGINT) or SIGTERM stops the query cleanly after the running micro-batch.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from typing import Any


def add_parser(commands: Any) -> None:
    from .._schema import FORMATS

    sync = commands.add_parser(
        "sync",
        help="stream every table of a CDC topic into its own Delta table (Spark)",
        description="Start a Spark streaming query that decodes a Kafka topic (or a "
        "Datastream bucket tree) and keeps one Delta table per source table equal to it: "
        "tables created with the wire's types, columns added and widened, each table "
        "exactly once per micro-batch. Prints a line per micro-batch; Ctrl-C stops it.",
    )
    sync.add_argument(
        "--format", required=True, choices=[f for f in FORMATS if f != "datahub-tuple"]
    )
    source = sync.add_mutually_exclusive_group(required=True)
    source.add_argument("--kafka", metavar="HOST:PORT", help="Kafka bootstrap servers")
    source.add_argument("--datastream", metavar="PATH", help="a Datastream bucket tree")
    sync.add_argument("--topic", metavar="T", help="the Kafka topic (with --kafka)")
    sync.add_argument(
        "--target",
        required=True,
        metavar="TEMPLATE",
        help="'/lake/{db}/{table}' or 'bronze.{db}__{table}'",
    )
    sync.add_argument("--checkpoint", required=True, metavar="PATH", help="the query's checkpoint")
    sync.add_argument(
        "--include", action="append", metavar="PATTERN", help="tables to sync (shop.*), repeatable"
    )
    sync.add_argument(
        "--exclude", action="append", metavar="PATTERN", help="tables to leave out, repeatable"
    )
    sync.add_argument("--keys", metavar="JSON", help='key columns: \'{"shop.t": ["id"]}\'')
    sync.add_argument(
        "--schemas", metavar="JSON", help='column types: \'{"shop.t": "id bigint, n string"}\''
    )
    sync.add_argument(
        "--scd2", action="append", metavar="PATTERN", help="tables that also keep a history table"
    )
    sync.add_argument(
        "--properties", metavar="JSON", help='table properties: \'{"shop.*": {"name": "value"}}\''
    )
    sync.add_argument(
        "--cluster-by", metavar="JSON", help='clustering of new tables: \'{"shop.t": ["id"]}\''
    )
    sync.add_argument(
        "--partition-by",
        metavar="JSON",
        help='partitions of new tables: \'{"shop.t": ["region"]}\'',
    )
    sync.add_argument(
        "--metadata-columns",
        metavar="NAMES",
        help="event columns kept in each table as _cdc_meta_<name>: "
        "'op,event_time,position', 'true' (op, event_time, capture_time, position, tx_id) "
        'or JSON by table: \'{"shop.*": ["op"]}\'',
    )
    sync.add_argument(
        "--type-mapping",
        metavar="RULES",
        help="Spark types other than the default mapping's for the columns created: "
        "'tinyint1-to-boolean,unsigned-to-signed', 'to-string', "
        'or JSON by table: \'{"shop.*": ["to-string"]}\'',
    )
    sync.add_argument(
        "--route",
        action="append",
        metavar="PATTERN=TARGET",
        help="tables applied into one table instead of --target's: "
        "'shop_*.orders_*=lake.shop.orders', repeatable",
    )
    sync.add_argument("--route-keys", choices=("per-table", "unique"), default="per-table",
                      help="the routed tables' keys are unique per table (the routed table's "
                      "key adds the source database and table) or across them (unique) "
                      "(default: %(default)s)")  # fmt: skip
    sync.add_argument(
        "--parallelism", type=int, default=4, help="tables applied at once (default: %(default)s)"
    )
    sync.add_argument("--on-error", choices=("raise", "continue"), default="raise",
                      help="a failed table: stop the query (raise) or stop the table and go "
                      "on (continue) (default: %(default)s)")  # fmt: skip
    sync.add_argument("--on-invalid", choices=("raise", "count"), default="raise",
                      help="a table's messages that did not decode: fail the table (raise) or "
                      "apply it without them, counted (count) (default: %(default)s)")  # fmt: skip
    sync.add_argument(
        "--source-time-zone", metavar="ZONE", help="the source's time zone (Asia/Shanghai)"
    )
    sync.add_argument("--trigger", default="10 seconds", metavar="INTERVAL",
                      help="processing-time trigger, or 'once' to read what is there and stop "
                      "(default: %(default)s)")  # fmt: skip
    sync.add_argument("--max-offsets", type=int, metavar="N", help="Kafka maxOffsetsPerTrigger")
    sync.add_argument("--starting-offsets", default="earliest", help="Kafka startingOffsets")
    sync.add_argument("-X", "--option", action="append", default=[], metavar="NAME=VALUE",
                      help="a Kafka source option (kafka.security.protocol=SSL, ...)")  # fmt: skip
    sync.add_argument("--master", help="start a local Spark (local[2]) instead of spark-submit's")
    sync.add_argument("--jars", action="append", default=[], metavar="PATH",
                      help="with --master: jars or folders of jars (Delta, Kafka)")  # fmt: skip


def run(args: Any, say: Any) -> int:
    if args.kafka and not args.topic:
        say("sync: --kafka needs --topic")
        return 2
    for name in ("keys", "schemas", "properties", "cluster_by", "partition_by"):
        text = getattr(args, name)
        try:
            value = json.loads(text) if text else None
        except ValueError as exc:
            say(f"sync: --{name} is not JSON: {exc}")
            return 2
        if value is not None and not isinstance(value, dict):
            say(f'sync: --{name} must be a JSON object ({{"db.table": ...}})')
            return 2
        setattr(args, name, value)
    try:  # an unknown name, Kafka's without Kafka: said before Spark starts
        from ..spark._metadata import checked

        args.metadata_columns = _metadata_columns(args.metadata_columns)
        kafka = ["topic", "partition", "offset"] if args.kafka else []
        checked(args.metadata_columns, kafka)
    except ValueError as exc:
        say(f"sync: --metadata-columns: {exc}")
        return 2
    try:  # an unknown rule: said before Spark starts
        from ..spark._type_mapping import checked as checked_rules

        args.type_mapping = _type_mapping(args.type_mapping)
        checked_rules(args.type_mapping)
    except ValueError as exc:
        say(f"sync: --type-mapping: {exc}")
        return 2
    try:  # a route that is not PATTERN=TARGET: said before Spark starts
        from ..spark.sync import checked_routes

        args.route = _routes(args.route)
        checked_routes(args.route, args.route_keys)
    except ValueError as exc:
        say(f"sync: --route: {exc}")
        return 2
    from pyspark.sql import SparkSession

    from ..spark import sync_stream

    if args.master:
        from ..spark import local_session

        spark = local_session("cdc-decode-sync", master=args.master, delta=True,
                              kafka=bool(args.kafka), jars=args.jars)  # fmt: skip
    else:
        spark = SparkSession.builder.appName("cdc-decode-sync").getOrCreate()
    if args.kafka:
        reader = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", args.kafka)
            .option("subscribe", args.topic)
            .option("startingOffsets", args.starting_offsets)
        )
        if args.max_offsets:
            reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets))
        for item in args.option:
            name, _, value = item.partition("=")
            reader = reader.option(name, value)
        source = reader.load()
    elif args.format == "datastream-avro":  # each .avro file is one message
        source = (
            spark.readStream.format("binaryFile")
            # a file stream needs its schema given: binaryFile's own
            .schema("path string, modificationTime timestamp, length bigint, content binary")
            .option("recursiveFileLookup", "true")
            .option("pathGlobFilter", "*.avro")
            .load(args.datastream)
            .selectExpr("content AS value")
        )
    else:  # JSON lines: each line one message
        source = (
            spark.readStream.format("text")
            .option("recursiveFileLookup", "true")
            .load(args.datastream)
        )
    trigger = {"availableNow": True} if args.trigger == "once" else {"processingTime": args.trigger}

    def progress(result: Any) -> None:
        lag = result.lag()
        print(result.summary() + ("" if lag is None else f", lag {_duration(lag)}"), flush=True)
        for table in result.failed:
            print(f"  {table.name} -> {table.target}: {table.error}", flush=True)
        for table in result.tables.values():
            if table.errors and table.error is None:  # on_invalid="count": applied without
                print(f"  {table.name}: {table.errors} bad messages not applied, e.g. "
                      f"{table.error_sample}", flush=True)  # fmt: skip

    query = sync_stream(
        source,
        args.format,
        args.target,
        checkpoint=args.checkpoint,
        trigger=trigger,
        progress=progress,
        include=args.include,
        exclude=args.exclude,
        keys=args.keys,
        schemas=args.schemas,
        scd2=args.scd2,
        properties=args.properties,
        cluster_by=args.cluster_by,
        partition_by=args.partition_by,
        metadata_columns=args.metadata_columns,
        type_mapping=args.type_mapping,
        routes=args.route,
        route_keys=args.route_keys,
        parallelism=args.parallelism,
        on_error=args.on_error,
        on_invalid=args.on_invalid,
        source_time_zone=args.source_time_zone,
    )
    stopping = threading.Event()

    def stop(signum: int, frame: Any) -> None:
        if not stopping.is_set():
            stopping.set()
            say("sync: stopping after the running micro-batch (again to force)")
            threading.Thread(target=query.stop, daemon=True).start()
        else:
            sys.exit(130)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        query.awaitTermination()
    except Exception as error:  # the query failed (a SyncError, …): say it, exit 1
        say(f"sync: the query stopped: {error}")
        return 1
    return 0


def _metadata_columns(text: str | None) -> Any:
    """``--metadata-columns``: names separated by commas, ``true``, or a JSON object of
    table patterns."""
    if text is None:
        return None
    if text.strip().lower() == "true":
        return True
    if text.lstrip().startswith(("{", "[")):
        return json.loads(text)
    return [name.strip() for name in text.split(",") if name.strip()]


def _type_mapping(text: str | None) -> Any:
    """``--type-mapping``: rules separated by commas, or a JSON object of table patterns."""
    if text is None:
        return None
    if text.lstrip().startswith(("{", "[")):
        return json.loads(text)
    return [name.strip() for name in text.split(",") if name.strip()]


def _routes(given: list[str] | None) -> dict[str, str] | None:
    """``--route PATTERN=TARGET`` (repeatable) as ``sync(routes=)`` takes them."""
    if not given:
        return None
    out: dict[str, str] = {}
    for item in given:
        pattern, equals, target = item.partition("=")
        pattern, target = pattern.strip(), target.strip()
        if not equals or not pattern or not target:
            raise ValueError(f"{item!r} is not PATTERN=TARGET ('shop_*.orders_*=lake.shop.orders')")
        if pattern.lower() in {p.lower() for p in out}:
            raise ValueError(f"{pattern!r} is routed twice")
        out[pattern] = target
    return out


def _duration(seconds: float) -> str:
    """``4.2 s``, ``3.5 min``, ``2.0 h`` or ``12.3 days``."""
    for unit, size in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= 2 * size:
            return f"{seconds / size:,.1f} {unit}"
    return f"{seconds:.1f} s"
