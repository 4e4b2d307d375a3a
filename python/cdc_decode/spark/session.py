"""A local SparkSession for demos, notebooks and tests on one machine, with the jars the
pip ``pyspark`` package does not ship: Delta Lake, Apache Iceberg, Spark's Kafka source,
spark-avro.

>>> from cdc_decode import spark as cdc_spark
>>> spark = cdc_spark.local_session("demo", master="local[2]")            # decode only
>>> spark = cdc_spark.local_session("lake", delta=True)                    # + Delta Lake
>>> spark = cdc_spark.local_session("ice", iceberg=True, warehouse="/tmp/lake")  # + Iceberg
>>> spark = cdc_spark.local_session("stream", kafka=True, jars=[".jars"])  # jars from a folder

Each connector comes from the jars given with ``jars=`` when one of them is that connector,
and otherwise from Maven Central through ``spark.jars.packages`` (downloaded by Spark on
the first run into the Ivy cache, ``~/.ivy2``, and reused after). docs/deploy.md, "A local
session", says which versions are chosen and why.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ._plans import CODE_CACHE

__all__ = [
    "ICEBERG_RUNTIMES",
    "IVY_SETTINGS",
    "NEWEST_MAVEN_SPARK",
    "connector_packages",
    "iceberg_package",
    "local_session",
]

IVY_SETTINGS = Path(__file__).with_name("ivysettings.xml")
"""Ivy settings with Maven Central as the only resolver. Spark's default chain looks in the
local Maven repository (``~/.m2``) first, and fails when it finds a connector's pom there
without its jar (common on a machine that ran ``mvn``); this file is used for
``spark.jars.packages`` unless the caller sets ``spark.jars.ivySettings`` or
``spark.jars.repositories`` (a company mirror)."""

NEWEST_MAVEN_SPARK = (4, 2)
"""The newest Spark line whose connectors Maven Central serves (checked 2026-11-25: the
newest ``spark-sql-kafka-0-10_2.13`` and ``spark-avro_2.13`` are 4.2.0; pyspark 4.3.0 is on
PyPI only). A newer pyspark gets this line's connectors, which run on Spark 4.3 (the
tests here run the 4.2.0 Kafka source on pyspark 4.3.0)."""

ICEBERG_RUNTIMES = {(3, 5): "1.12.0", (4, 0): "1.11.0", (4, 1): "1.12.0"}
"""The newest Apache Iceberg release whose Spark runtime (``iceberg-spark-runtime-<line>``)
Maven Central serves, per Spark line (checked 2026-11-27). There is none for Spark 4.2 or
4.3; the 4.1 runtime does not load on them (``SparkView can not implement ...View``)."""

# A jar of the connector is among the given jars when its file name starts so.
_JAR_PREFIXES = {
    "delta": "delta-spark_",
    "iceberg": "iceberg-spark-runtime-",
    "kafka": "spark-sql-kafka-0-10_",
    "avro": "spark-avro_",
}
_DELTA_SQL = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
CODE_CACHE_ENTRIES = 2000
"""The classes :func:`local_session`'s cache of compiled code keeps (Spark's default is
100; a class is about 6 KB of bytecode on average)."""
ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
ICEBERG_CATALOG = "org.apache.iceberg.spark.SparkCatalog"


def local_session(
    app: str = "cdc-decode",
    *,
    master: str = "local[*]",
    delta: bool = False,
    iceberg: bool = False,
    kafka: bool = False,
    avro: bool = False,
    jars: Iterable[str | os.PathLike] = (),
    connector_version: str | None = None,
    catalog: str = "lake",
    warehouse: str | os.PathLike | None = None,
    catalog_uri: str | None = None,
    **config: str,
) -> Any:
    """A local SparkSession whose Python workers run this interpreter, with Delta Lake,
    Apache Iceberg, Spark's Kafka source or spark-avro when asked.

    Spark starts its workers with ``PYSPARK_PYTHON``; when that is not the interpreter
    that has ``cdc_decode`` and ``pyarrow`` installed, every ``mapInArrow`` task fails with
    ``ModuleNotFoundError``. This sets it (unless already set), with UTC as the session
    time zone and the UI off, for demos, tests and notebooks on one machine. One machine
    has few cores, so the shuffles default to 4 partitions (Spark's 200 are for clusters)
    and Delta's snapshot of a table's log to 2 (its 50 cost a new small table seconds of
    tasks); Spark's cache of compiled code keeps :data:`CODE_CACHE_ENTRIES` classes (its
    100 are fewer than one micro-batch's ``apply_changes`` and decoding compile, so each
    batch would compile them again: docs/apply.md, "Cost"); ``**config`` sets others.

    The connectors come from ``jars`` when a given jar is the connector (by its file name:
    ``delta-spark_*``, ``iceberg-spark-runtime-*``, ``spark-sql-kafka-0-10_*``,
    ``spark-avro_*``); otherwise from Maven Central as ``spark.jars.packages``, resolved by
    Spark with its dependencies when the session starts (the first time needs the network;
    then the Ivy cache in ``~/.ivy2`` serves them):

    - ``delta=True``: ``io.delta:delta-spark_<spark line>_<scala>:<delta-spark version>``,
      as ``delta.configure_spark_with_delta_pip`` names it from the installed
      ``delta-spark`` package (Delta 4.4 runs on Spark 4.2, not 4.3), and Delta's SQL
      extension and catalog in any case.
    - ``iceberg=True``: :func:`iceberg_package` (Iceberg's runtime for pyspark's line:
      Spark 3.5, 4.0 and 4.1 have one, 4.2 and 4.3 none), Iceberg's SQL extension, and an
      Iceberg catalog named ``catalog`` (``org.apache.iceberg.spark.SparkCatalog``): a REST
      catalog at ``catalog_uri`` when given, else a Hadoop catalog (tables as folders, no
      server) in ``warehouse`` (by default ``spark-warehouse/<catalog>`` in the working
      folder). Tables are then named ``<catalog>.<namespace>.<table>``.
    - ``kafka=True``: ``org.apache.spark:spark-sql-kafka-0-10_<scala>:<connector_version>``.
    - ``avro=True``: ``org.apache.spark:spark-avro_<scala>:<connector_version>``.

    Spark builds the session once per process: when one is already active, it is returned
    as it is (jars and packages are not added to a running JVM).

    Args:
        app: the application name.
        master: the Spark master, ``local[*]`` by default.
        delta: Delta Lake's jars, SQL extension and catalog.
        iceberg: Apache Iceberg's runtime jar, SQL extension and a catalog.
        kafka: Spark's Kafka source and sink (``format("kafka")``).
        avro: spark-avro (``format("avro")``, ``from_avro``).
        jars: jar files, or folders whose ``*.jar`` files are all taken, for
            ``spark.jars``; a folder without jars is an error (it usually means the step
            that fills it did not run).
        connector_version: the version of the Kafka and Avro connectors from Maven
            Central; by default ``x.y.0`` of pyspark's line ``x.y`` (its connectors run
            on every ``x.y.z``), or of :data:`NEWEST_MAVEN_SPARK` when pyspark is newer.
        catalog: ``iceberg=True``: the Iceberg catalog's name in Spark.
        warehouse: ``iceberg=True``: the Hadoop catalog's folder (or, with
            ``catalog_uri``, the warehouse the REST catalog is asked for).
        catalog_uri: ``iceberg=True``: a REST catalog's URI (``http://host:8181``).
        **config: more Spark settings, with dots written as ``__`` in the names
            (``spark__sql__shuffle__partitions="4"``). ``spark__jars`` and
            ``spark__jars__packages`` are added to, not replaced.

    Returns:
        The ``pyspark.sql.SparkSession`` (log level ERROR).

    Raises:
        FileNotFoundError: a path in ``jars`` does not exist, or is a folder without jars.
        ModuleNotFoundError: ``delta=True`` without Delta's jars given and without the
            ``delta-spark`` package installed.
        ValueError: ``iceberg=True`` on a pyspark line without an Iceberg runtime on
            Maven Central, and none given in ``jars``.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    if iceberg and warehouse is None and catalog_uri is None:
        warehouse = Path("spark-warehouse") / catalog
    settings, packages, delta_package = _settings(
        delta=delta,
        kafka=kafka,
        avro=avro,
        jars=jars,
        version=connector_version,
        config=config,
        iceberg=_iceberg_catalog(catalog, warehouse, catalog_uri) if iceberg else None,
    )
    configure_delta = _configure_delta() if delta_package else None
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config(CODE_CACHE, str(CODE_CACHE_ENTRIES))
    )
    if delta:
        builder = builder.config("spark.databricks.delta.snapshotPartitions", "2")
    for key, value in settings.items():
        builder = builder.config(key, value)
    if configure_delta is not None:
        # Delta's own helper names its jar for the installed delta-spark and pyspark, and
        # sets spark.jars.packages to it and the others.
        builder = configure_delta(builder, extra_packages=packages)
    elif packages:
        builder = builder.config("spark.jars.packages", ",".join(packages))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def connector_packages(
    *, kafka: bool = False, avro: bool = False, version: str | None = None
) -> list[str]:
    """The Maven coordinates of Spark's Kafka and Avro connectors for the installed pyspark.

    >>> connector_packages(kafka=True)          # on pyspark 4.3.0
    ['org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0']

    Args:
        kafka: Spark's Kafka source and sink.
        avro: spark-avro.
        version: the connectors' version; see :func:`local_session` for the default.

    Returns:
        ``group:artifact:version`` strings, for ``spark.jars.packages``.
    """
    if not (kafka or avro):
        return []
    import pyspark

    scala = _scala_binary()
    if version is None:
        line = tuple(int(part) for part in pyspark.__version__.split(".")[:2])
        version = "{}.{}.0".format(*min(line, NEWEST_MAVEN_SPARK))
    names = ["spark-sql-kafka-0-10"] * kafka + ["spark-avro"] * avro
    return [f"org.apache.spark:{name}_{scala}:{version}" for name in names]


def iceberg_package(spark_version: str | None = None) -> str:
    """The Maven coordinates of Apache Iceberg's Spark runtime for a pyspark version.

    >>> iceberg_package("4.1.4")
    'org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0'

    Args:
        spark_version: pyspark's version; by default the installed one's.

    Raises:
        ValueError: no Iceberg runtime for that Spark line (:data:`ICEBERG_RUNTIMES`).
    """
    if spark_version is None:
        import pyspark

        spark_version = pyspark.__version__
    line = tuple(int(part) for part in spark_version.split(".")[:2])
    if line not in ICEBERG_RUNTIMES:
        lines = ", ".join("{}.{}".format(*k) for k in sorted(ICEBERG_RUNTIMES))
        raise ValueError(
            f"Apache Iceberg has no Spark runtime for pyspark {spark_version} (Maven Central "
            f"serves runtimes for Spark {lines}): install pyspark 4.1 (`make venv-spark41` "
            "in this repository), or give the runtime jar of your Spark with jars="
        )
    scala = "2.12" if line < (4, 0) else "2.13"
    name = "iceberg-spark-runtime-{}.{}".format(*line)
    return f"org.apache.iceberg:{name}_{scala}:{ICEBERG_RUNTIMES[line]}"


def _iceberg_catalog(
    name: str, warehouse: str | os.PathLike | None, uri: str | None
) -> dict[str, str]:
    """The Spark settings of an Iceberg catalog named ``name``."""
    prefix = f"spark.sql.catalog.{name}"
    settings = {prefix: ICEBERG_CATALOG}
    if uri is not None:
        settings[f"{prefix}.type"] = "rest"
        settings[f"{prefix}.uri"] = uri
    else:
        settings[f"{prefix}.type"] = "hadoop"
    if warehouse is not None:
        # Hadoop catalogs want a location; a plain folder is taken as a local path.
        text = str(warehouse)
        settings[f"{prefix}.warehouse"] = text if "://" in text else str(Path(text).resolve())
    return settings


def _settings(
    *,
    delta: bool,
    kafka: bool,
    avro: bool,
    jars: Iterable[str | os.PathLike],
    version: str | None,
    config: dict[str, str],
    iceberg: dict[str, str] | None = None,
) -> tuple[dict[str, str], list[str], bool]:
    """What :func:`local_session` sets: the Spark settings, the packages to resolve besides
    Delta's, and whether Delta's jar comes from Maven Central. ``iceberg``: the Iceberg
    catalog's settings, when Iceberg is wanted."""
    settings = {key.replace("__", "."): value for key, value in config.items()}
    files = _jar_files(jars)
    if files:
        settings["spark.jars"] = ",".join(filter(None, [settings.get("spark.jars"), *files]))
    names = [Path(f).name for f in files]
    given = {c for c, prefix in _JAR_PREFIXES.items() if any(n.startswith(prefix) for n in names)}
    connectors = connector_packages(
        kafka=kafka and "kafka" not in given,
        avro=avro and "avro" not in given,
        version=version,
    )
    if iceberg is not None and "iceberg" not in given:
        connectors.append(iceberg_package())
    packages = [*filter(None, [settings.pop("spark.jars.packages", None)]), *connectors]
    delta_package = delta and "delta" not in given
    if (connectors or delta_package) and not (
        {"spark.jars.ivySettings", "spark.jars.repositories"} & settings.keys()
    ):
        settings["spark.jars.ivySettings"] = str(IVY_SETTINGS)
    if delta:
        for key, value in _DELTA_SQL.items():
            settings.setdefault(key, value)
    if iceberg is not None:
        extensions = settings.get("spark.sql.extensions")
        settings["spark.sql.extensions"] = ",".join(filter(None, [extensions, ICEBERG_EXTENSIONS]))
        for key, value in iceberg.items():
            settings.setdefault(key, value)

    return settings, packages, delta_package


def _configure_delta() -> Any:
    """``delta.configure_spark_with_delta_pip``, or a clear error without delta-spark."""
    try:
        from delta import configure_spark_with_delta_pip
    except ImportError as error:  # no delta-spark (or another `delta` on the path)
        raise ModuleNotFoundError(
            "delta=True needs the delta-spark package (pip install delta-spark; Delta 4.4 "
            "runs on pyspark 4.2) or Delta's jars given with jars=",
            name="delta",
        ) from error
    return configure_spark_with_delta_pip


def _scala_binary() -> str:
    """The Scala line of pyspark's own jars (``2.13`` for Spark 4, ``2.12`` for 3.5)."""
    import pyspark

    for jar in (Path(pyspark.__file__).parent / "jars").glob("scala-library-*.jar"):
        return ".".join(jar.stem.removeprefix("scala-library-").split(".")[:2])
    return "2.13"


def _jar_files(paths: Iterable[str | os.PathLike]) -> list[str]:
    """Every jar of ``paths`` (files as given, folders' ``*.jar`` sorted), absolute."""
    files = []
    for path in map(Path, paths):
        if path.is_dir():
            found = sorted(path.glob("*.jar"))
            if not found:
                raise FileNotFoundError(f"no jars in {path}")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"no such jar or folder of jars: {path}")
    return [str(f.resolve()) for f in files]
