"""What the Iceberg target relies on, checked on both catalogs of the run (a Hadoop catalog
in a folder, a REST catalog server): the session ``local_session(iceberg=True)`` builds,
merge-on-read tables of format v2 (position delete files) and v3 (deletion vectors), a
``MERGE`` with conditional clauses comparing binary sequences into ``map<string, binary>``
columns, a snapshot summary property set per write from a cloned session's settings (how a
commit records its replay marker), the ``MERGE``'s row counts in the summary, ``ADD
COLUMNS``, and the exception a conflicting concurrent commit raises."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.spark

MOR = {f"write.{op}.mode": "merge-on-read" for op in ("merge", "update", "delete")}


def _table(spark, catalog: str, name: str, version: int) -> str:
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.facts")
    table = f"{catalog}.facts.{name}_v{version}"
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    props = ", ".join(f"'{k}' = '{v}'" for k, v in {"format-version": version, **MOR}.items())
    spark.sql(
        f"CREATE TABLE {table} (id bigint, v string, seq binary, seqs map<string, binary>) "
        f"USING iceberg TBLPROPERTIES ({props})"
    )
    spark.sql(
        f"INSERT INTO {table} VALUES (1, 'a', X'01', NULL), (2, 'b', X'05', NULL), "
        "(5, 'e', X'01', NULL)"
    )
    return table


def _clone(spark, **conf: str):
    from pyspark.sql import SparkSession

    session = SparkSession(spark.sparkContext, spark._jsparkSession.cloneSession())
    for key, value in conf.items():
        session.conf.set(key, value)
    return session


@pytest.mark.parametrize("version", [2, 3])
def test_merge_on_read_merge_with_binary_conditions(iceberg_spark, catalog, version):
    spark = iceberg_spark
    table = _table(spark, catalog, "merge", version)
    clone = _clone(spark, **{"spark.sql.iceberg.snapshot-property.cdc_decode.test": "m1"})
    changes = [
        (1, "A", b"\x02", "u"),  # newer: updated
        (2, None, b"\x04", "d"),  # older than \x05: ignored
        (3, "C", b"\x01", "u"),  # new: inserted
        (4, None, b"\x09", "d"),  # a delete of an absent row: nothing
        (5, None, b"\x02", "d"),  # newer: deleted
    ]
    schema = "id bigint, v string, seq binary, op string"
    clone.createDataFrame(changes, schema).createOrReplaceTempView("src")
    clone.sql(
        f"""MERGE INTO {table} t USING src s ON t.id = s.id
        WHEN MATCHED AND s.op = 'd' AND s.seq > t.seq THEN DELETE
        WHEN MATCHED AND s.seq > t.seq THEN UPDATE SET v = s.v, seq = s.seq,
            seqs = map_concat(coalesce(t.seqs, map()), map('v', s.seq))
        WHEN NOT MATCHED AND s.op <> 'd' THEN INSERT (id, v, seq, seqs)
            VALUES (s.id, s.v, s.seq, map('v', s.seq))"""
    )
    # The caller's session caches the table it loaded (the Iceberg catalog's cache-enabled):
    # a write through another session is seen after a refresh.
    spark.catalog.refreshTable(table)
    rows = spark.sql(f"SELECT id, v, seq, seqs FROM {table} ORDER BY id").collect()
    assert [tuple(r) for r in rows] == [
        (1, "A", bytearray(b"\x02"), {"v": bytearray(b"\x02")}),
        (2, "b", bytearray(b"\x05"), None),
        (3, "C", bytearray(b"\x01"), {"v": bytearray(b"\x01")}),
    ]
    summary = spark.sql(
        f"SELECT summary FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1"
    ).first()["summary"]
    # The clone's setting is in its commit's summary; the caller's session has none.
    assert summary["cdc_decode.test"] == "m1"
    assert "spark.sql.iceberg.snapshot-property.cdc_decode.test" not in dict(spark.conf.getAll)
    assert summary["spark.merge-into.num-target-rows-updated"] == "1"
    assert summary["spark.merge-into.num-target-rows-inserted"] == "1"
    assert summary["spark.merge-into.num-target-rows-deleted"] == "1"
    assert summary["added-position-deletes"] == "2"  # no data file rewritten
    deletes = spark.sql(f"SELECT file_format FROM {table}.delete_files").collect()
    assert [r.file_format for r in deletes] == ["PARQUET" if version == 2 else "PUFFIN"]


def test_add_columns_and_table_properties(iceberg_spark, catalog):
    spark = iceberg_spark
    table = _table(spark, catalog, "evolve", 2)
    spark.sql(f"ALTER TABLE {table} ADD COLUMNS (`a b` decimal(20, 3), n int)")
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('cdc_decode.keys' = '[\"id\"]')")
    assert spark.table(table).columns == ["id", "v", "seq", "seqs", "a b", "n"]
    props = {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}
    assert props["cdc_decode.keys"] == '["id"]'
    assert props["write.merge.mode"] == "merge-on-read"
    # Widening (int to bigint) is a metadata change in Iceberg; narrowing is refused.
    spark.sql(f"ALTER TABLE {table} ALTER COLUMN n TYPE bigint")
    assert dict(spark.table(table).dtypes)["n"] == "bigint"
    with pytest.raises(Exception, match="NOT_SUPPORTED_CHANGE_COLUMN"):
        spark.sql(f"ALTER TABLE {table} ALTER COLUMN n TYPE int")


def test_a_merge_planned_before_a_conflicting_commit_fails_validation(iceberg_spark, catalog):
    """Two MERGEs of the same row, the second planned on the snapshot before the first's
    commit: its commit fails validation (``org.apache.iceberg.exceptions.ValidationException``),
    the error a writer retries, and the table holds the first MERGE's value only.

    The second MERGE's session loaded the table before the first MERGE committed, and the
    catalog's table cache (``cache-enabled``, on by default) keeps that snapshot for its
    scan: the conflict happens on every run, not only when two threads' timing makes it."""
    spark = iceberg_spark
    table = _table(spark, catalog, "race", 2)
    first, late = _clone(spark), _clone(spark)
    assert late.table(table).count() == 3  # loaded (and cached) before the first commit
    for session, value in ((first, "x"), (late, "y")):
        session.createDataFrame([(1, value)], "id bigint, v string").createOrReplaceTempView("s")
    merge = f"MERGE INTO {table} t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v"
    first.sql(merge)
    with pytest.raises(Exception) as raised:
        late.sql(merge)
    names = []
    java = getattr(raised.value, "java_exception", None) or getattr(raised.value, "_origin", None)
    while java is not None:
        names.append(java.getClass().getName())
        java = java.getCause()
    assert "org.apache.iceberg.exceptions.ValidationException" in names, (names, raised.value)
    spark.catalog.refreshTable(table)
    values = [r.v for r in spark.sql(f"SELECT v FROM {table} WHERE id = 1").collect()]
    assert values == ["x"]
