"""Google Cloud Datastream bucket trees on Spark: read a tree fast, and follow it as files land.

>>> from cdc_decode import spark as cdc_spark
>>> events = cdc_spark.read_datastream(spark, "gs://bucket/prefix/")          # batch
>>> stream = cdc_spark.read_datastream(spark, "gs://bucket/prefix/", streaming=True,
...                                    max_files_per_trigger=1000)          # new files only

Datastream writes many small files (a few KB each) under
``<prefix>/<schema>_<table>/yyyy/mm/dd/hh/mm/``. Reading them with ``binaryFile`` plans one
Spark task per ~32 files (each file costs ``spark.sql.files.openCostInBytes``, 4 MB, against
128 MB per partition) and moves every file's bytes from the JVM to the Python worker. The
``cdc-datastream`` Python data source here lists the tree once (in the planning worker, with
``pyarrow.fs``: local folders, ``gs://``, ``s3://``, ``hdfs://``; ``fsspec`` for other
schemes when installed), cuts the sorted listing into few partitions of many files, and each
task opens its files in the Python worker and decodes them with one
:class:`cdc_decode.Decoder`, returning Arrow batches: the JVM never touches the file bytes.

Its streaming reader (``spark.readStream.format("cdc-datastream")``) admits files in the order
of their time folders; its offset is the sort key of the last file admitted, so a restarted
query resumes after the last committed file, reading no file twice and skipping none that
sorts after it (see :func:`read_datastream` for the one limit: late files).
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .._checks import check_engine, check_mode, check_time_zone
from .._limits import Limits, as_limits
from .._schema import event_schema
from .decoding import is_connect

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import DataFrame

try:  # pyspark 4.0+
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceReader,
        DataSourceStreamReader,
        InputPartition,
    )
except ImportError:  # pragma: no cover (pyspark 3.5: plan="binaryFile" only)

    class _NoDataSources:
        """Stands in for pyspark's data source base classes, which pyspark 3.5 lacks."""

    DataSource = DataSourceReader = DataSourceStreamReader = _NoDataSources  # type: ignore[misc]
    InputPartition = None  # type: ignore[assignment]

__all__ = ["SOURCE", "DatastreamSource", "list_tree", "read_datastream", "register"]

_PLANS = ("auto", "driver", "source", "binaryFile")

SOURCE = "cdc-datastream"
"""The name the data source is registered under: ``spark.read.format("cdc-datastream")``."""

SUFFIXES = {"datastream-avro": (".avro",), "datastream-json": (".jsonl", ".json")}
# A partition holds at most this many files or bytes (the listing is cut in order), and
# read() decodes at most this many files / bytes per Arrow batch.
FILES_PER_PARTITION = 10_000
BYTES_PER_PARTITION = 128 << 20
_BATCH_FILES = 2_000
_BATCH_BYTES = 16 << 20
# plan="driver" ships the file names with the task's function up to this many bytes of
# names (a DataFrame of them past it).
_SHIPPED_NAMES = 4 << 20
# Remote objects fetched at once by one task.
_FETCHERS = 16
# yyyy/mm/dd/hh/mm folders anywhere in a path: the key files are ordered by.
_TIME = re.compile(r"/(\d{4})/(\d{2})/(\d{2})/(\d{2})/(\d{2})/")


# --- listing ------------------------------------------------------------------------------


def sort_key(uri: str) -> str:
    """The order files are read and admitted in: the time of the path's
    ``yyyy/mm/dd/hh/mm/`` folders (``000000000000`` when it has none), then the path."""
    found = _TIME.search(uri)
    when = "".join(found.groups()) if found else "000000000000"
    return f"{when}|{uri}"


def _hidden(name: str) -> bool:
    # As Spark's file listing: names starting with "." or "_" are not data.
    return name.startswith((".", "_"))


def _filesystem(path: str) -> tuple[Any, str, str]:
    """``(filesystem, path in it, URI prefix)``: ``None`` as the filesystem for local paths."""
    if "://" not in path and not path.startswith("file:"):
        return None, os.path.abspath(path), "file:"
    scheme = path.split(":", 1)[0]
    if scheme == "file":
        local = re.sub(r"^file:(//)?", "", path)
        return None, os.path.abspath(local or "/"), "file:"
    import pyarrow.fs as pafs

    uri = re.sub(r"^s3[an]://", "s3://", path)
    try:
        fs, inner = pafs.FileSystem.from_uri(uri)
        return fs, inner, uri.split("://", 1)[0] + "://"
    except pa_errors() + (ValueError,) as exc:
        try:
            import fsspec
        except ImportError:
            raise ValueError(
                f"cannot list {path!r}: pyarrow.fs does not know {scheme}:// ({exc}) and "
                "fsspec is not installed"
            ) from None
        fs = pafs.PyFileSystem(pafs.FSSpecHandler(fsspec.filesystem(scheme)))
        return fs, path.split("://", 1)[1], scheme + "://"


def pa_errors() -> tuple[type[BaseException], ...]:
    import pyarrow as pa

    return (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError)


def list_tree(path: str, format: str = "datastream-avro") -> list[tuple[str, int]]:
    """Every file of ``format`` under ``path``, as ``(uri, size)`` in :func:`sort_key` order.

    Args:
        path: a folder (listed recursively), a file, or a local glob (``*``, ``?``, ``[``);
            local (``/data``, ``file:/data``) or a URI ``pyarrow.fs`` opens (``gs://``,
            ``s3://``, ``s3a://``, ``hdfs://``), or one ``fsspec`` opens when installed.
        format: ``datastream-avro`` (``*.avro`` files) or ``datastream-json``
            (``*.jsonl``, ``*.json``).

    Returns:
        The files, local ones as ``file:/abs/path`` (as Spark names them); names starting
        with ``.`` or ``_`` and folders so named are skipped.
    """
    suffixes = SUFFIXES[format]
    fs, inner, prefix = _filesystem(path)
    found: list[tuple[str, int]] = []
    if fs is None:
        import glob

        roots = sorted(glob.glob(inner)) if glob.has_magic(inner) else [inner]
        for root in roots:
            if os.path.isfile(root):
                found.append((prefix + root, os.path.getsize(root)))
                continue
            if not os.path.isdir(root):
                raise FileNotFoundError(f"no such folder or file: {root}")
            # fwalk: each size is read relative to its folder (a third faster than a
            # stat of the whole path, on a tree of thousands of files).
            for folder, dirs, names, fd in os.fwalk(root):
                dirs[:] = [d for d in dirs if not _hidden(d)]
                for name in names:
                    if name.endswith(suffixes) and not _hidden(name):
                        size = os.stat(name, dir_fd=fd).st_size
                        found.append((prefix + os.path.join(folder, name), size))
    else:
        import pyarrow.fs as pafs

        info = fs.get_file_info(inner)
        if info.type == pafs.FileType.File:
            infos = [info]
        elif info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(f"no such folder or file: {path}")
        else:
            infos = fs.get_file_info(pafs.FileSelector(inner, recursive=True))
        for item in infos:
            if item.type != pafs.FileType.File or not item.path.endswith(suffixes):
                continue
            relative = item.path[len(inner) :] if item.path.startswith(inner) else item.path
            if any(_hidden(part) for part in relative.split("/") if part):
                continue
            found.append((prefix + item.path.lstrip("/") if prefix != "file:" else item.path,
                          item.size or 0))  # fmt: skip
    found.sort(key=lambda f: sort_key(f[0]))
    return found


def plan_partitions(
    files: Sequence[tuple[str, int]],
    *,
    min_partitions: int = 1,
    files_per_partition: int = FILES_PER_PARTITION,
    bytes_per_partition: int = BYTES_PER_PARTITION,
) -> list[list[str]]:
    """The sorted listing cut in order into partitions: at least ``min_partitions`` (as
    the files allow), none over ``files_per_partition`` files or (past its first file)
    ``bytes_per_partition`` bytes, all about the same size."""
    if not files:
        return []
    total = sum(size for _, size in files)
    count = max(
        min_partitions,
        -(-len(files) // max(1, files_per_partition)),
        -(-total // max(1, bytes_per_partition)),
    )
    count = min(count, len(files))
    step = -(-len(files) // count)
    return [[uri for uri, _ in files[i : i + step]] for i in range(0, len(files), step)]


# --- reading (in the Python worker) -------------------------------------------------------


def _opener(uri: str) -> Any:
    """A function reading a whole file of this URI's filesystem."""
    if uri.startswith("file:"):

        def read_local(u: str) -> bytes:
            with open(re.sub(r"^file:(//)?", "", u), "rb") as f:
                return f.read()

        return read_local
    fs, _, prefix = _filesystem(uri)

    def read_remote(u: str) -> bytes:
        with fs.open_input_stream(u[len(prefix) :]) as f:
            return f.read()

    return read_remote


def _chunks(uris: Sequence[str], avro: bool) -> Iterator[tuple[pa.Array, pa.Array]]:
    """The files' values in chunks of at most ``_BATCH_FILES`` files (ten times as many for
    JSON) or about ``_BATCH_BYTES``: (the values, each value's file as its index in
    ``uris``). An Avro file is one value, a JSON file one value per line. Local Avro files
    are read by the Rust core (``read_local_files``) where it is built."""
    import pyarrow as pa

    reader = _local_reader(uris[0]) if avro else None
    if reader is not None:
        done = 0
        while done < len(uris):
            values, files = reader(list(uris[done : done + _BATCH_FILES]), _BATCH_BYTES)
            yield values, pa.array(range(done, done + files), pa.int32())
            done += files
        return
    chunk: list[bytes] = []
    owners: list[int] = []
    size = 0
    for index, data in enumerate(_contents(uris, _opener(uris[0]))):
        if avro:
            chunk.append(data)
            owners.append(index)
        else:
            lines = data.splitlines()
            chunk.extend(lines)
            owners.extend([index] * len(lines))
        size += len(data)
        if len(chunk) >= _BATCH_FILES * (1 if avro else 10) or size >= _BATCH_BYTES:
            yield pa.array(chunk, pa.binary()), pa.array(owners, pa.int32())
            chunk, owners, size = [], [], 0
    if chunk:
        yield pa.array(chunk, pa.binary()), pa.array(owners, pa.int32())


def _local_reader(uri: str) -> Any:
    """The Rust core's reader of local files, for a ``file:`` URI when the core is built:
    a function of (paths as URIs, byte budget) -> (values, files read)."""
    if not uri.startswith("file:"):
        return None
    try:
        from .._native import read_local_files
    except ImportError:  # the pure-Python package
        return None
    prefix = re.compile(r"^file:(//)?")

    def read(uris: list[str], max_bytes: int) -> tuple[pa.Array, int]:
        return read_local_files([prefix.sub("", u) for u in uris], max_bytes)

    return read


def _contents(uris: Sequence[str], read: Any) -> Iterator[bytes]:
    """The files' bytes in order: local files one after the other (the page cache answers
    in microseconds), remote objects fetched ``_FETCHERS`` at a time (each costs a round
    trip of milliseconds; pyarrow's filesystems release the GIL while they wait)."""
    if uris[0].startswith("file:"):
        yield from map(read, uris)
        return
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(_FETCHERS) as pool:
        pending: deque = deque()
        for uri in uris:
            pending.append(pool.submit(read, uri))
            if len(pending) >= 4 * _FETCHERS:
                yield pending.popleft().result()
        for future in pending:
            yield future.result()


def read_files(
    uris: Sequence[str],
    format: str,
    *,
    mode: str = "permissive",
    engine: str = "native",
    schema: Any = None,
    limits: Limits | None = None,
    event_columns: Sequence[str] | None = None,
    decoder: Any = None,
    with_path: bool = True,
    source_time_zone: str | None = None,
) -> Iterator[pa.RecordBatch]:
    """Reads and decodes files with one decoder: batches of ``path`` then the event columns.

    Avro files are one value each (all of a file's events, or one error row naming it);
    JSON files are split into lines (``\\n``, ``\\r\\n`` or ``\\r``), one value each, as
    ``spark.read.text`` splits them.
    """
    import pyarrow as pa

    import cdc_decode

    if decoder is None:
        decoder = cdc_decode.Decoder(format, mode=mode, engine=engine, schema=schema,
                                     limits=limits, source_time_zone=source_time_zone)  # fmt: skip
    if not uris:
        return
    names = pa.array(uris, pa.string())
    start = 0  # the decoder's ordinal of the chunk's first value

    def decoded(values: pa.Array, owners: pa.Array) -> Iterator[pa.RecordBatch]:
        nonlocal start
        try:
            events, ordinals = decoder.decode_indexed(values)
        except cdc_decode.DecodeError as exc:  # failfast: name the file too
            found = re.match(r"message (\d+)", str(exc))
            if found is None or not 0 <= int(found.group(1)) - start < len(owners):
                raise
            where = uris[owners[int(found.group(1)) - start].as_py()]
            raise cdc_decode.DecodeError(f"{where}: {exc}") from exc
        if events.num_rows:
            import pyarrow.compute as pc

            owner = owners.take(pc.subtract(ordinals, start))
            paths = names.take(owner) if with_path else None
            yield _with_path(paths, events, event_columns)
        start += len(values)

    for values, owners in _chunks(uris, format == "datastream-avro"):
        yield from decoded(values, owners)
    events, _ = decoder.finish_indexed()
    if events.num_rows:  # no multi-part sets in Datastream files; nothing is held back
        raise RuntimeError("cdc_decode: the Datastream decoder held rows back")


def _with_path(
    paths: pa.Array | None, events: pa.RecordBatch, event_columns: Sequence[str] | None
) -> pa.RecordBatch:
    import pyarrow as pa

    if event_columns is not None:
        events = events.select(list(event_columns))
    if paths is None:
        return events
    return pa.RecordBatch.from_arrays(
        [paths, *events.columns], schema=pa.schema([pa.field("path", pa.string()), *events.schema])
    )


# --- the data source ----------------------------------------------------------------------


class _Options:
    """The source's string options, checked (in whichever process reads them)."""

    def __init__(self, options: dict[str, str]) -> None:
        from .._typed import as_schema, typed_event_schema

        get = {k.lower(): v for k, v in options.items()}.get
        self.path = get("path")
        if not self.path:
            raise ValueError(f"{SOURCE}: give the tree's path: .load(path) or .option('path', ...)")
        self.format = get("format", "datastream-avro")
        if self.format not in SUFFIXES:
            raise ValueError(
                f"{SOURCE} reads datastream-avro or datastream-json, not {self.format!r}"
            )
        self.mode = get("mode", "permissive")
        check_mode(self.mode)
        self.engine = get("engine", "native")
        check_engine(self.engine)
        schema = get("schema")
        arrow = get("arrowschema")
        if arrow:
            import pyarrow as pa

            self.schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(arrow)))
        else:
            self.schema = as_schema(schema) if schema else None
        self.event_schema = (
            event_schema() if self.schema is None else typed_event_schema(self.schema)
        )
        self.source_time_zone = get("sourcetimezone")
        check_time_zone(self.source_time_zone, self.schema is not None)
        columns = get("eventcolumns")
        self.event_columns = [c.strip() for c in columns.split(",")] if columns else None
        if self.event_columns is not None:
            unknown = [c for c in self.event_columns if c not in self.event_schema.names]
            if unknown:
                raise ValueError(f"eventColumns: {', '.join(map(repr, unknown))} not event columns")
        limits = get("limits")
        self.limits = as_limits(Limits(**json.loads(limits)) if limits else None)
        self.min_partitions = int(get("minpartitions", "1"))
        self.files_per_partition = int(get("filesperpartition", str(FILES_PER_PARTITION)))
        self.bytes_per_partition = int(get("bytesperpartition", str(BYTES_PER_PARTITION)))
        max_files = get("maxfilespertrigger")
        self.max_files_per_trigger = int(max_files) if max_files else None
        self.with_path = get("pathcolumn", "true").lower() != "false"
        if self.max_files_per_trigger is not None and self.max_files_per_trigger < 1:
            raise ValueError("maxFilesPerTrigger must be at least 1")

    def spark_schema(self) -> Any:
        from pyspark.sql.pandas.types import from_arrow_schema
        from pyspark.sql.types import StringType, StructField, StructType

        events = from_arrow_schema(self.event_schema, prefer_timestamp_ntz=True)
        fields = list(events.fields)
        if self.event_columns is not None:
            by_name = {f.name: f for f in fields}
            fields = [by_name[n] for n in self.event_columns]
        path = [StructField("path", StringType(), True)] if self.with_path else []
        return StructType([*path, *fields])

    def read(self, uris: Sequence[str]) -> Iterator[pa.RecordBatch]:
        return read_files(
            uris,
            self.format,
            mode=self.mode,
            engine=self.engine,
            schema=self.schema,
            limits=self.limits,
            event_columns=self.event_columns,
            with_path=self.with_path,
            source_time_zone=self.source_time_zone,
        )

    def partitions(self, files: Sequence[tuple[str, int]]) -> list[InputPartition]:
        planned = plan_partitions(
            files,
            min_partitions=self.min_partitions,
            files_per_partition=self.files_per_partition,
            bytes_per_partition=self.bytes_per_partition,
        )
        return [InputPartition(uris) for uris in planned]


class DatastreamSource(DataSource):
    """``spark.read.format("cdc-datastream")`` / ``spark.readStream.format(...)``: a
    Datastream tree's files decoded in the Python worker (register it first with
    :func:`register`; :func:`read_datastream` does).

    Options (strings): ``path`` (or ``.load(path)``), ``format`` (``datastream-avro``, the
    default, or ``datastream-json``), ``mode``, ``engine``, ``schema`` (typed mode: a Spark
    DDL string), ``eventColumns`` (comma-separated), ``limits`` (JSON of
    :class:`cdc_decode.Limits` fields), ``minPartitions`` (default 1),
    ``filesPerPartition`` (10,000), ``bytesPerPartition`` (128 MiB), ``pathColumn``
    (``false``: no ``path`` column), and for streams ``maxFilesPerTrigger``.
    """

    @classmethod
    def name(cls) -> str:
        return SOURCE

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self._options = _Options(dict(options))

    def schema(self) -> Any:
        return self._options.spark_schema()

    def reader(self, schema: Any) -> DataSourceReader:
        return _TreeReader(self._options)

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return _TreeStreamReader(self._options)


class _TreeReader(DataSourceReader):
    def __init__(self, options: _Options) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        return self.options.partitions(list_tree(self.options.path, self.options.format))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self.options.read(partition.value)


try:  # pyspark 4.2+: Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow as _AvailableNow
except ImportError:  # pragma: no cover

    class _AvailableNow:  # type: ignore[no-redef]
        """Stands in for ``SupportsTriggerAvailableNow`` before pyspark 4.2 (a base class
        of its own, so the stream reader's bases stay distinct on pyspark 3.5 too)."""


class _TreeStreamReader(DataSourceStreamReader, _AvailableNow):
    """Offsets are ``{"key": sort key of the last file admitted}`` (``""``: none yet)."""

    def __init__(self, options: _Options) -> None:
        self.options = options
        self.until: str | None = None  # Trigger.AvailableNow: the last key to admit

    def _new(self, after: str, upto: str | None = None) -> list[tuple[str, int, str]]:
        files = [(u, s, sort_key(u)) for u, s in list_tree(self.options.path, self.options.format)]
        return [f for f in files if f[2] > after and (upto is None or f[2] <= upto)]

    def initialOffset(self) -> dict:
        return {"key": ""}

    def getDefaultReadLimit(self) -> Any:
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxFiles

        if self.options.max_files_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxFiles(self.options.max_files_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        files = self._new("")
        self.until = files[-1][2] if files else ""

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        after = (start or {}).get("key", "")
        files = self._new(after, self.until)
        most = getattr(limit, "max_files", None) or getattr(limit, "maxFiles", None)
        if most is not None:
            files = files[: int(most)]
        return {"key": files[-1][2]} if files else {"key": after}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        files = self._new(start.get("key", ""), end["key"])
        return self.options.partitions([(u, s) for u, s, _ in files])

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self.options.read(partition.value)

    def commit(self, end: dict) -> None:
        pass


def register(spark: Any) -> None:
    """Registers the ``cdc-datastream`` data source with this SparkSession."""
    spark.dataSource.register(DatastreamSource)


def read_datastream(
    spark: Any,
    path: str,
    *,
    format: str = "datastream-avro",
    mode: str = "permissive",
    engine: str = "native",
    limits: Limits | None = None,
    accounting: Any = None,
    schema: Any = None,
    event_columns: Sequence[str] | None = None,
    streaming: bool = False,
    max_files_per_trigger: int | None = None,
    plan: str = "auto",
    min_partitions: int | None = None,
    path_column: bool = True,
    source_time_zone: str | None = None,
) -> DataFrame:
    """Read Google Cloud Datastream output as users find it: a tree of files under
    ``path`` (``gs://bucket/prefix/schema_table/yyyy/mm/dd/hh/mm/``, or any folder above
    it), every file below read.

    **Plan** (``plan="source"``, what ``"auto"`` picks): the ``cdc-datastream`` Python data
    source lists the tree once when the query is planned, sorts the files by their
    ``yyyy/mm/dd/hh/mm`` folders, cuts the listing into ``max(min_partitions, files /
    10,000, bytes / 128 MiB)`` partitions of consecutive files, and each Spark task reads
    its files in the Python worker and decodes them with one decoder, returning Arrow
    batches (the JVM never reads the files). ``plan="driver"`` (what ``"auto"`` picks with
    ``accounting=`` or on pyspark before 4.0) lists the tree here, when this function is
    called, and decodes the same partitions of files in ``mapInArrow`` (as fast, measured).
    ``plan="binaryFile"`` (what ``"auto"`` picks for a path neither ``pyarrow.fs`` nor
    ``fsspec`` opens) reads the files with ``spark.read.format("binaryFile")`` (Avro) or
    ``spark.read.text`` (JSON) and decodes them with :func:`decode`: many more, smaller
    tasks.

    ``datastream-avro`` reads each ``*.avro`` file whole (one value: all of its events, or
    one error row); ``datastream-json`` reads every line of each ``*.jsonl`` / ``*.json``
    file (one event each). Names starting with ``.`` or ``_`` are skipped, as Spark does.

    **Streaming** (``streaming=True``): new files only, in the order of their time folders
    (then their paths); at most ``max_files_per_trigger`` files per micro-batch. The offset
    is the sort key of the last file admitted, kept in the query's checkpoint, so a
    restarted query reads every file after it exactly once. Limit: a file that appears
    after a file sorting after it was admitted (a late file in an older minute folder) is
    not read; Datastream makes a file visible when it closes it, so give a query that
    must see those the listing of a closed folder range instead, or re-read the folder.

    Limits: local paths must be the same on every executor (as for any Spark file source);
    the listing is one process's, at planning time, so a tree of millions of files costs
    that listing per query (and per micro-batch when streaming).

    Args:
        spark: the SparkSession.
        path: a folder (read recursively), a file or a local glob; local or a URI
            (``gs://``, ``s3://``/``s3a://``, ``hdfs://``, or any ``fsspec`` scheme).
        format: ``"datastream-avro"`` (the default) or ``"datastream-json"``.
        mode: as :func:`decode`.
        engine: as :func:`decode`.
        limits: as :func:`decode`; ``max_message_bytes`` bounds an Avro file's size.
        accounting: as :func:`decode` (not with ``plan="source"``).
        schema: typed mode, as :func:`decode` (docs/typed.md): the table's columns.
        event_columns: as :func:`decode`: the event columns to return.
        streaming: a streaming DataFrame of the files that land (``plan="source"`` only).
        max_files_per_trigger: streaming: at most this many files per micro-batch.
        plan: ``"auto"``, ``"source"``, ``"driver"`` or ``"binaryFile"`` (above).
        min_partitions: at least this many partitions (as the files allow); default
            ``spark.sparkContext.defaultParallelism``.
        path_column: ``False`` leaves the ``path`` column out (``plan="source"``): each
            row's file name is then not copied into the rows Spark makes.
        source_time_zone: typed mode, as :func:`decode`: the source's time zone.

    Returns:
        The change events, with ``path`` (the file each came from, ``file:/...`` for local
        files) before the event columns unless ``path_column=False``.
    """
    from .decoding import DecodeAccounting, decode

    if format not in SUFFIXES:
        raise ValueError(
            f"read_datastream reads datastream-avro or datastream-json, not {format!r}"
        )
    if plan not in _PLANS:
        raise ValueError(f"unknown plan {plan!r}: expected one of {', '.join(_PLANS)}")
    if accounting is not None and not isinstance(accounting, DecodeAccounting):
        raise TypeError(
            f"accounting must be a cdc_spark.DecodeAccounting, not {type(accounting).__name__}"
        )
    if plan == "auto":
        try:
            _filesystem(path)
        except ValueError:  # neither pyarrow.fs nor fsspec lists it: Spark's readers do
            plan = "binaryFile"
        else:
            plan = "driver" if accounting is not None or InputPartition is None else "source"
            if accounting is not None and is_connect(spark):
                # Spark Connect has no accumulators: the accounting is observed on
                # ``decode``'s output, which the binaryFile plan goes through.
                plan = "binaryFile"
    if plan == "binaryFile":
        if not path_column:
            raise ValueError("path_column=False is not for plan='binaryFile'")
        if streaming:
            raise ValueError("streaming=True reads with plan='source'")
        return _read_binary_file(
            spark, path, format, decode, mode=mode, engine=engine, limits=limits,
            accounting=accounting, schema=schema, event_columns=event_columns,
            source_time_zone=source_time_zone,
        )  # fmt: skip
    if accounting is not None and plan == "source":
        raise ValueError("accounting= needs plan='driver' or 'binaryFile' (not the data source)")
    options = {"format": format, "mode": mode, "engine": engine}
    if schema is not None:
        from .._typed import as_schema

        options["arrowSchema"] = base64.b64encode(
            as_schema(schema).serialize().to_pybytes()
        ).decode()
    if event_columns is not None:
        if isinstance(event_columns, str | bytes):
            raise TypeError('event_columns must be a list of names such as ["op", "after"]')
        options["eventColumns"] = ",".join(event_columns)
    if limits is not None:
        import dataclasses

        options["limits"] = json.dumps(dataclasses.asdict(as_limits(limits)))
    if source_time_zone is not None:
        options["sourceTimeZone"] = source_time_zone
    if max_files_per_trigger is not None:
        options["maxFilesPerTrigger"] = str(max_files_per_trigger)
    if min_partitions is None:
        min_partitions = _default_parallelism(spark)
    options["minPartitions"] = str(min_partitions)
    if not path_column:
        options["pathColumn"] = "false"
    checked = _Options({**options, "path": path})  # the driver's check: fail here, not in a task
    if plan == "driver":
        if streaming:
            raise ValueError("streaming=True reads with plan='source'")
        return _read_listed(spark, checked, accounting)
    register(spark)
    reader = spark.readStream if streaming else spark.read
    return reader.format(SOURCE).schema(checked.spark_schema()).options(**options).load(path)


def _read_listed(spark: Any, options: _Options, accounting: Any) -> DataFrame:
    """``plan="driver"``: the tree listed here, one row of file names per partition, and a
    ``mapInArrow`` that reads and decodes each row's files."""
    files = list_tree(options.path, options.format)
    groups = plan_partitions(
        files,
        min_partitions=options.min_partitions,
        files_per_partition=options.files_per_partition,
        bytes_per_partition=options.bytes_per_partition,
    )
    schema = options.spark_schema()
    if not groups:
        return spark.createDataFrame([], schema)
    shipped: list[list[str]] | None = None  # the groups, when they travel with the function
    if is_connect(spark):
        if accounting is not None:
            raise ValueError(
                "accounting= on Spark Connect needs plan='binaryFile' (what plan='auto' picks)"
            )
        # No SparkContext on Connect: a round-robin repartition puts one row in each.
        rows = spark.createDataFrame([(g,) for g in groups], "files array<string>")
        lists = rows.repartition(len(groups))
    elif sum(len(uri) for group in groups for uri in group) <= _SHIPPED_NAMES:
        # The names travel with the function, each partition one number: half the
        # planning of a DataFrame of the names (fewer calls into the JVM).
        lists = spark.range(0, len(groups), 1, len(groups))
        shipped = groups
    else:
        lists = spark.sparkContext.parallelize([(g,) for g in groups], len(groups))
        lists = lists.toDF("files array<string>")
    reporter = None if accounting is None else accounting._reporter()

    def read_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import cdc_decode

        decoder = cdc_decode.Decoder(
            options.format, mode=options.mode, engine=options.engine, schema=options.schema,
            limits=options.limits, source_time_zone=options.source_time_zone,
        )  # fmt: skip
        try:
            for batch in batches:
                column = batch.column(0).to_pylist()
                for uris in column if shipped is None else (shipped[i] for i in column):
                    yield from read_files(
                        uris, options.format, event_columns=options.event_columns,
                        decoder=decoder, with_path=options.with_path,
                    )  # fmt: skip
        finally:
            if reporter is not None:
                reporter.report(decoder.stats())

    return lists.mapInArrow(read_partition, schema)


def _default_parallelism(spark: Any) -> int:
    """``spark.sparkContext.defaultParallelism``; on Spark Connect (no SparkContext) the
    ``spark.default.parallelism`` setting, else this machine's cores."""
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    value = spark.conf.get("spark.default.parallelism", None)
    return int(value) if value else (os.cpu_count() or 1)


def _read_binary_file(spark, path, format, decode, **options) -> DataFrame:
    """The plan over Spark's own file readers: ``binaryFile`` for Avro, ``text`` for JSON."""
    from pyspark.sql import functions as F

    reader = spark.read.option("recursiveFileLookup", "true")
    if format == "datastream-avro":
        files = reader.format("binaryFile").option("pathGlobFilter", "*.avro").load(path)
        return decode(files, format, value_col="content", keep=["path"], **options)
    lines = reader.option("pathGlobFilter", "*.{jsonl,json}").text(path)
    # As the data source names local files (file:/a/b, not file:///a/b).
    lines = lines.withColumn("path", F.regexp_replace(F.input_file_name(), "^file://", "file:"))
    return decode(lines, format, keep=["path"], **options)
