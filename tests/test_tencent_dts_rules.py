"""Every rule of docs/formats/tencent-dts.md, through the public API, on both engines.

Messages are built by hand with the ``cdc_decode._proto`` classes; each test states the
exact rows it expects. Error rows are compared without their ``error`` text, which the
engines may word differently (docs/events.md).
"""

from __future__ import annotations

import random
import struct
from datetime import datetime, timezone

import pyarrow as pa
import pytest

import cdc_decode
from cdc_decode import _proto as P

FORMAT = "tencent-dts"

# Header.messageType, DMLEvent.dmlEventType and Data.dataType numbers.
BEGIN, COMMIT, DML, DDL, ROLLBACK, HEARTBEAT, CHECKPOINT = range(7)
INSERT, UPDATE, DELETE = range(3)
(NIL, INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64, FLOAT32, FLOAT64, BYTES,
 DECIMAL, STRING, NA) = range(15)  # fmt: skip

MYSQL_META = [("sourceType", "MYSQL"), ("seqId", "1")]
NULL_COLUMNS = [
    "source_op", "source_db", "source_schema", "source_table", "event_time", "capture_time",
    "tx_id", "position", "sequence", "event_id", "primary_key", "before", "after", "ddl",
    "metadata",
]  # fmt: skip


# ---------------------------------------------------------------------------------------
# Message builders


def props(message_field, pairs) -> None:
    for key, value in pairs:
        message_field.add(key=key, value=value)


def data(data_type: int, sv: str = "", bv: bytes = b"", charset: str = "") -> P.Data:
    return P.Data(dataType=data_type, sv=sv, bv=bv, charset=charset)


def text(value: str, charset: str = "utf8") -> P.Data:
    return data(STRING, bv=value.encode("utf-8"), charset=charset)


def entry(message_type: int, *, seq: int = 1, source_type: int = 1, **header) -> P.Entry:
    """An Entry; ``header`` sets Header fields, ``properties`` its KVPairs."""
    item = P.Entry()
    properties = header.pop("properties", ())
    item.header.CopyFrom(
        P.Header(messageType=message_type, seqId=seq, sourceType=source_type, **header)
    )
    props(item.header.properties, properties)
    return item


def dml(
    op: int,
    columns,
    rows,
    *,
    keys=(),
    event_properties=(),
    **header,
) -> P.Entry:
    """A DML Entry. ``rows`` are (old values, new values) or (old, new, properties)."""
    item = entry(DML, **header)
    event = item.event.dmlEvent
    event.dmlEventType = op
    for name in columns:
        event.columns.add(name=name, isKey=name in keys, originalType="int")
    for row in rows:
        change = event.rows.add()
        change.oldColumns.extend(row[0])
        change.newColumns.extend(row[1])
        if len(row) > 2:
            props(change.properties, row[2])
    props(item.event.properties, event_properties)
    return item


def entries_bytes(*items: P.Entry) -> bytes:
    return P.Entries(items=list(items)).SerializeToString()


def envelope(
    *items: P.Entry,
    data: bytes | None = None,
    total: int = 0,
    index: int = 0,
    version: int = 1,
    properties=(),
) -> bytes:
    """A serialized Envelope of ``items`` (or of raw ``data``)."""
    message = P.Envelope(
        version=version,
        total=total,
        index=index,
        data=entries_bytes(*items) if data is None else data,
    )
    props(message.properties, properties)
    return message.SerializeToString()


def split(payload: bytes, total: int, properties=()) -> list[bytes]:
    """``payload`` (a serialized Entries) as ``total`` Envelopes, parts of near-equal size."""
    size = -(-len(payload) // total)
    return [
        envelope(
            data=payload[i * size : (i + 1) * size],
            total=total,
            index=i,
            properties=properties if i == 0 else (),
        )
        for i in range(total)
    ]


# ---------------------------------------------------------------------------------------
# Decoding helpers


def rows_of(batch: pa.RecordBatch) -> list[dict]:
    assert batch.schema.equals(cdc_decode.event_schema(), check_metadata=True)
    return batch.to_pylist()


def decode(values, engine: str, **options) -> list[dict]:
    return rows_of(cdc_decode.decode(values, FORMAT, engine=engine, **options))


def one(values, engine: str, **options) -> dict:
    rows = decode(values, engine, **options)
    assert len(rows) == 1, rows
    return rows[0]


def assert_error(row: dict, raw: bytes, *words: str) -> None:
    """``row`` is the error row of ``raw``: every column but format/op/error/raw null."""
    assert row["format"] == FORMAT
    assert row["op"] == "error"
    assert row["raw"] == raw
    assert row["error"]
    for word in words:
        assert word in row["error"], row["error"]
    assert {name: row[name] for name in NULL_COLUMNS} == dict.fromkeys(NULL_COLUMNS)


def seq(seq_id: int, row: int) -> bytes:
    return struct.pack(">QQ", seq_id, row)


def utc(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


# ---------------------------------------------------------------------------------------
# Events


def test_insert_event_columns(engine):
    item = dml(
        INSERT,
        ["id", "name", "price"],
        [([], [data(INT64, "7"), text("Ann"), data(DECIMAL, "1.50")])],
        keys=("id",),
        seq=1042,
        schemaName="shop",
        tableName="orders",
        timestamp=1_700_000_000,
        fileName="mysql-bin.000003",
        position=4711,
        gtid="uuid:17",
    )
    row = one([envelope(item)], engine)
    assert row == {
        "format": FORMAT,
        "op": "insert",
        "source_op": "INSERT",
        "source_db": "shop",
        "source_schema": None,
        "source_table": "orders",
        "event_time": utc(1_700_000_000),
        "capture_time": None,
        "tx_id": "uuid:17",
        "position": "mysql-bin.000003:4711",
        "sequence": seq(1042, 0),
        "event_id": "1042:0",
        "primary_key": ["id"],
        "before": None,
        "after": [("id", "7"), ("name", "Ann"), ("price", "1.50")],
        "ddl": None,
        "metadata": [("sourceType", "MYSQL"), ("seqId", "1042")],
        "error": None,
        "raw": None,
    }


def test_update_and_delete_rows_give_one_event_each(engine):
    update = dml(
        UPDATE,
        ["id", "v"],
        [
            ([data(INT32, "1"), text("a")], [data(INT32, "1"), text("b")]),
            ([data(INT32, "2"), text("c")], [data(INT32, "2"), text("d")]),
        ],
        keys=("id", "v"),
        seq=5,
    )
    delete = dml(DELETE, ["id", "v"], [([data(INT32, "3"), data(NIL)], [])], seq=6)
    rows = decode([envelope(update, delete)], engine)
    assert [(r["op"], r["source_op"], r["event_id"], r["sequence"]) for r in rows] == [
        ("update", "UPDATE", "5:0", seq(5, 0)),
        ("update", "UPDATE", "5:1", seq(5, 1)),
        ("delete", "DELETE", "6:0", seq(6, 0)),
    ]
    assert [(r["before"], r["after"]) for r in rows] == [
        ([("id", "1"), ("v", "a")], [("id", "1"), ("v", "b")]),
        ([("id", "2"), ("v", "c")], [("id", "2"), ("v", "d")]),
        ([("id", "3"), ("v", None)], None),
    ]
    assert [r["primary_key"] for r in rows] == [["id", "v"], ["id", "v"], None]


def test_sequence_is_big_endian_and_orders_bytewise(engine):
    big = 2**64 - 1
    rows = decode([envelope(dml(INSERT, ["a"], [([], [data(INT8, "1")])] * 2, seq=big))], engine)
    assert [r["sequence"] for r in rows] == [
        b"\xff" * 8 + bytes(8),
        b"\xff" * 8 + bytes(7) + b"\x01",
    ]
    assert rows[0]["sequence"] < rows[1]["sequence"]
    assert [r["event_id"] for r in rows] == [f"{big}:0", f"{big}:1"]
    assert [r["metadata"] for r in rows] == [[("sourceType", "MYSQL"), ("seqId", str(big))]] * 2


def test_dml_entry_without_rows_gives_no_events(engine):
    assert decode([envelope(dml(INSERT, ["a"], []))], engine) == []


def test_control_events(engine):
    begin = entry(BEGIN, seq=1)
    begin.event.beginEvent.transactionId = "tx-9"
    begin.event.beginEvent.threadId = -4
    commit = entry(COMMIT, seq=2, gtid="uuid:3")
    commit.event.commitEvent.transactionId = "tx-9"
    ddl = entry(DDL, seq=3, tableName="t")
    ddl.event.ddlEvent.schemaName = "shop"
    ddl.event.ddlEvent.sql = "ALTER TABLE t ADD c INT"
    ddl.event.ddlEvent.executionTime = 12
    rollback = entry(ROLLBACK, seq=4)
    heartbeat = entry(HEARTBEAT, seq=5)
    heartbeat.event.heartbeatEvent.epoch = 1_700_000_001
    checkpoint = entry(CHECKPOINT, seq=6)
    cp = checkpoint.event.checkpointEvent
    cp.syncedGtid, cp.fakeGtid, cp.fileName, cp.position = "uuid:1-9", True, "bin.7", 99
    rows = decode([envelope(begin, commit, ddl, rollback, heartbeat, checkpoint)], engine)
    got = [
        (r["op"], r["source_op"], r["source_db"], r["source_table"], r["tx_id"], r["ddl"])
        for r in rows
    ]
    assert got == [
        ("begin", "BEGIN", None, None, "tx-9", None),
        ("commit", "COMMIT", None, None, "uuid:3", None),
        ("ddl", "DDL", "shop", "t", None, "ALTER TABLE t ADD c INT"),
        ("rollback", "ROLLBACK", None, None, None, None),
        ("heartbeat", "HEARTBEAT", None, None, None, None),
        ("checkpoint", "CHECKPOINT", None, None, None, None),
    ]
    meta = [("sourceType", "MYSQL")]
    assert [r["metadata"] for r in rows] == [
        [*meta, ("seqId", "1"), ("transactionId", "tx-9"), ("threadId", "-4")],
        [*meta, ("seqId", "2"), ("transactionId", "tx-9")],
        [*meta, ("seqId", "3"), ("executionTime", "12")],
        [*meta, ("seqId", "4")],
        [*meta, ("seqId", "5"), ("epoch", "1700000001")],
        [*meta, ("seqId", "6"), ("syncedGtid", "uuid:1-9"), ("fakeGtid", "true"),
         ("fileName", "bin.7"), ("position", "99")],
    ]  # fmt: skip
    for r in rows:
        assert (r["primary_key"], r["before"], r["after"]) == (None, None, None)
        assert r["event_id"] == f"{int(r['metadata'][1][1])}:0"


def test_commit_transaction_id_when_gtid_empty_and_header_db_first(engine):
    commit = entry(COMMIT)
    commit.event.commitEvent.transactionId = "xid-5"
    ddl = entry(DDL, schemaName="header_db")
    ddl.event.ddlEvent.schemaName = "event_db"
    rows = decode([envelope(commit, ddl)], engine)
    assert [(r["tx_id"], r["source_db"]) for r in rows] == [("xid-5", None), (None, "header_db")]
    assert rows[1]["ddl"] is None  # sql is ""


def test_only_the_event_matching_the_message_type_is_read(engine):
    # A BEGIN entry with a DDL event and a DML event with a bad DataType: neither is read.
    item = entry(BEGIN)
    item.event.ddlEvent.sql = "DROP TABLE x"
    item.event.ddlEvent.executionTime = 3
    bad = item.event.dmlEvent
    bad.columns.add(name="a")
    bad.rows.add().newColumns.add(dataType=99)
    row = one([envelope(item)], engine)
    assert (row["op"], row["ddl"], row["metadata"]) == ("begin", None, MYSQL_META)


@pytest.mark.parametrize(
    ("file_name", "position", "expected"),
    [("bin.1", 4, "bin.1:4"), ("bin.1", 0, "bin.1:0"), ("", 4, "4"), ("", 0, None)],
)
def test_position(engine, file_name, position, expected):
    row = one([envelope(entry(HEARTBEAT, fileName=file_name, position=position))], engine)
    assert row["position"] == expected


def test_zero_timestamp_and_empty_strings_are_null(engine):
    row = one([envelope(entry(BEGIN, timestamp=0, schemaName="", tableName="", gtid=""))], engine)
    assert [row[c] for c in ("event_time", "source_db", "source_table", "tx_id")] == [None] * 4


def test_undefined_enum_numbers(engine):
    other = entry(99, seq=3, source_type=9)
    odd_dml = dml(7, ["a"], [([data(INT8, "1")], [data(INT8, "2")])], seq=4)
    rows = decode([envelope(other, odd_dml)], engine)
    assert [(r["op"], r["source_op"]) for r in rows] == [("other", "99"), ("other", "7")]
    assert rows[0]["metadata"] == [("sourceType", "9"), ("seqId", "3")]
    assert (rows[1]["before"], rows[1]["after"]) == ([("a", "1")], [("a", "2")])


def test_metadata_order_and_first_key_wins(engine):
    item = dml(
        INSERT,
        ["a"],
        [
            ([], [data(INT8, "1")], [("row", "r"), ("h", "from row"), ("", "empty key")]),
            ([], [data(INT8, "2")]),
        ],
        event_properties=[("ev", "e"), ("env", "from event"), ("ev", "second")],
        seq=8,
        version=3,
        serverId=-2,
        eventIndex=4,
        isLast=True,
        source_type=3,
        properties=[("h", "header"), ("seqId", "ignored"), ("env", "from header")],
    )
    env_props = [("env", "envelope"), ("z", ""), ("env", "again")]
    rows = decode([envelope(item, properties=env_props)], engine)
    common = [
        ("version", "3"), ("sourceType", "MARIADB"), ("serverId", "-2"), ("seqId", "8"),
        ("eventIndex", "4"), ("isLast", "true"), ("env", "envelope"), ("z", ""),
        ("h", "header"), ("ev", "e"),
    ]  # fmt: skip
    assert rows[0]["metadata"] == [*common, ("row", "r"), ("", "empty key")]
    assert rows[1]["metadata"] == common


# ---------------------------------------------------------------------------------------
# Row images


def test_every_data_type(engine):
    numeric = [INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64, FLOAT32, FLOAT64, DECIMAL]
    names = [f"n{t}" for t in numeric] + ["nil", "na", "bytes", "empty_bytes", "str", "empty"]
    values = [data(t, sv=f"{t}.5") for t in numeric] + [
        data(NIL, sv="x"),
        data(NA, sv="x"),
        data(BYTES, bv=b"\x00\xffab"),
        data(BYTES),
        text("héllo"),
        data(STRING, charset="utf8"),
    ]
    row = one([envelope(dml(INSERT, names, [([], values)]))], engine)
    assert row["after"] == [(f"n{t}", f"{t}.5") for t in numeric] + [
        ("nil", None),
        ("bytes", "AP9hYg=="),
        ("empty_bytes", ""),
        ("str", "héllo"),
        ("empty", ""),
    ]


def test_empty_sv_is_null(engine):
    row = one([envelope(dml(INSERT, ["a", "b"], [([], [data(INT64), data(DECIMAL)])]))], engine)
    assert row["after"] == [("a", None), ("b", None)]


def test_nil_is_null_value_na_is_no_entry(engine):
    item = dml(UPDATE, ["a", "b"], [([data(NIL), data(NA)], [data(NA), data(NIL)])])
    row = one([envelope(item)], engine)
    assert (row["before"], row["after"]) == ([("a", None)], [("b", None)])


def test_all_na_image_is_empty_not_null_and_fewer_values_leave_columns_out(engine):
    item = dml(UPDATE, ["a", "b", "c"], [([data(NA), data(NA)], [data(INT8, "1")])])
    row = one([envelope(item)], engine)
    assert (row["before"], row["after"]) == ([], [("a", "1")])


@pytest.mark.parametrize(
    ("charset", "bv", "expected"),
    [
        ("", "é".encode(), "é"),
        ("utf8", "😀".encode(), "😀"),
        ("UTF8MB4", "😀".encode(), "😀"),
        ("utf8mb3", b"x", "x"),
        ("Utf-8", b"x", "x"),
        ("latin1", b"caf\xe9", "café"),
        ("latin1", b"\x81\x8d\x8f\x90\x9d", "\x81\x8d\x8f\x90\x9d"),
        ("cp1252", b"\x80\x9f", "€Ÿ"),
        ("gbk", "中文".encode("gbk"), "中文"),
        ("GB2312", "中文".encode("gb2312"), "中文"),
        ("gb18030", "😀".encode("gb18030"), "😀"),
        ("cp936", b"\x80", "€"),
        ("gbk", b"\xa6\xd9", "\ufe10"),  # GB18030-2022 mapping (WHATWG)
        ("ascii", b"plain", "plain"),
        ("US-ASCII", b"", ""),
        ("binary", b"\x00\x01\x02", "AAEC"),
        ("gbk", b"", ""),
    ],
)
def test_charsets(engine, charset, bv, expected):
    item = dml(INSERT, ["c"], [([], [data(STRING, bv=bv, charset=charset)])])
    assert one([envelope(item)], engine)["after"] == [("c", expected)]


@pytest.mark.parametrize(
    ("charset", "bv", "word"),
    [
        ("utf8", b"\xff", "c"),
        ("utf8mb4", b"\xed\xa0\x80", "c"),  # a surrogate
        ("gbk", b"\xd6", "c"),
        ("gb18030", b"\x81\x30\x81", "c"),
        ("ascii", b"\xe9", "c"),
        ("big5", b"x", "big5"),
        ("big5", b"", "big5"),
        ("utf16", b"", "utf16"),
    ],
)
def test_bad_text_or_unknown_charset_is_an_error(engine, charset, bv, word):
    item = dml(INSERT, ["c"], [([], [data(STRING, bv=bv, charset=charset)])])
    raw = envelope(item)
    assert_error(one([raw], engine), raw, word)


def test_message_is_all_or_nothing(engine):
    good = dml(INSERT, ["a"], [([], [data(INT8, "1")])], seq=1)
    bad = dml(INSERT, ["price"], [([], [data(INT8, "1")]), ([], [data(99)])], seq=2)
    raw = envelope(good, entry(BEGIN), bad)
    assert_error(one([raw], engine), raw, "99", "price")


def test_too_many_values_is_an_error(engine):
    raw = envelope(dml(UPDATE, ["a", "b"], [([data(INT8, "1")] * 3, [data(INT8, "1")])]))
    assert_error(one([raw], engine), raw)
    raw = envelope(dml(INSERT, ["a"], [([], [data(NA), data(NA)])]))
    assert_error(one([raw], engine), raw)


@pytest.mark.parametrize("rows", [[([], [data(INT8, "1"), data(INT8, "2")])], []])
def test_duplicate_column_names_are_an_error(engine, rows):
    raw = envelope(dml(INSERT, ["a", "a"], rows))
    assert_error(one([raw], engine), raw, "a")


# ---------------------------------------------------------------------------------------
# Envelopes


def test_envelope_version_must_be_1(engine):
    item = dml(INSERT, ["a"], [([], [data(INT8, "1")])])
    for version in (2, 0, -1):
        raw = envelope(item, version=version)
        assert_error(one([raw], engine), raw, str(version))


def test_index_not_below_total_is_an_error(engine):
    raw = envelope(entry(BEGIN), total=3, index=3)
    assert_error(one([raw], engine), raw, "3")
    raw = envelope(entry(BEGIN), total=0, index=1)  # total 0 is read as 1
    assert_error(one([raw], engine), raw, "1")


def test_total_0_and_1_are_single_messages(engine):
    rows = decode([envelope(entry(BEGIN), total=0), envelope(entry(COMMIT), total=1)], engine)
    assert [r["op"] for r in rows] == ["begin", "commit"]


def test_empty_entries_give_no_rows(engine):
    decoder = cdc_decode.Decoder(FORMAT, engine=engine)
    assert decoder.decode([envelope(), envelope(data=b"")]).num_rows == 0
    assert decoder.stats() == {
        "messages": 2, "decoded": 2, "events": 0, "errors": 0, "dropped": 0, "pending": 0,
    }  # fmt: skip


def test_protobuf_errors(engine):
    good = envelope(entry(BEGIN))
    kv_not_utf8 = bytes([0x7A, 0x03, 0x0A, 0x01, 0xFF])  # Envelope.properties key b"\xff"
    bad_entries = envelope(data=b"\x0a\x05\x0a\x03")  # an Entry claiming more than it has
    for raw in (good[:-1], b"\xff\xff", kv_not_utf8, bad_entries, b"\x08\x01\x0f"):
        assert_error(one([raw], engine), raw)


def test_unknown_fields_and_mismatched_wire_types_are_skipped(engine):
    # Field 9 (unknown) as varint and as bytes; field 4 (data) sent as a varint: skipped,
    # as upb does. Inside Entries: an unknown field 5 and Entry.header as a fixed32.
    inner = entries_bytes(entry(BEGIN, seq=3)) + b"\x28\x01" + b"\x0a\x05\x0d\x01\x02\x03\x04"
    raw = envelope(data=inner) + b"\x48\x05\x4a\x01x\x20\x07"
    rows = decode([raw], engine)
    assert [(r["op"], r["event_id"]) for r in rows] == [("begin", "3:0"), ("begin", "0:0")]


def test_unknown_groups_are_skipped_as_upb_skips_them(engine):
    # Found by the differential fuzz target: upb skips a group with its wire reader, which
    # lets field number 0 through inside it; outside a group field 0 is an error.
    group = b"\x33" + b"\x05\0\0\0\0" + b"\x00\x01" + b"\x03\x04" + b"\x34"  # field 6
    inner = entries_bytes(entry(BEGIN, seq=3)) + group
    rows = decode([envelope(data=inner)], engine)
    assert [(r["op"], r["event_id"]) for r in rows] == [("begin", "3:0")]
    for bad in (b"\x05\0\0\0\0", b"\x33\x04\x34", b"\x33\x0e\x34", b"\x33\x08\x01"):
        raw = envelope(data=entries_bytes(entry(BEGIN, seq=3)) + bad)
        assert_error(one([raw], engine), raw)


def test_an_empty_message_is_read_as_upb_reads_it(engine):
    # Found by the differential fuzz target in CI: RollbackEvent has no fields, and upb
    # reads such a message as it skips a group, so field number 0 passes there too.
    def with_rollback(body: bytes) -> bytes:
        header = P.Header(messageType=ROLLBACK, seqId=4, sourceType=1).SerializeToString()
        event = b"\x2a" + bytes([len(body)]) + body  # Event.rollbackEvent, field 5
        item = b"\x0a" + bytes([len(header)]) + header + b"\x12" + bytes([len(event)]) + event
        return envelope(data=b"\x0a" + bytes([len(item)]) + item)

    def upb_reads(body: bytes) -> bool:
        try:
            P.RollbackEvent.FromString(body)
        except Exception:  # noqa: BLE001 - protobuf's DecodeError, whatever its module
            return False
        return True

    passing = [b"\x00\x01", b"\x80\x00\x01", b"\x05\0\0\0\0", b"\x03\x00\x01\x04", b"\x08\x01"]
    failing = [b"\x00", b"\x04", b"\x0e\x01", b"\x0b\x04", b"\x0b\x00\x0c", b"\x0a\x00\x00"]
    assert [upb_reads(body) for body in passing + failing] == [True] * 5 + [False] * 6
    for body in passing:
        assert [r["op"] for r in decode([with_rollback(body)], engine)] == ["rollback"]
    for body in failing:
        raw = with_rollback(body)
        assert_error(one([raw], engine), raw)
    # And a sweep: 2,000 bodies of fields 0, 1 and 16, half with one byte changed, dropped
    # or added, each held to upb's verdict.
    rng = random.Random(5)
    bodies = [fields_with_a_flaw(rng) for _ in range(2000)]
    ops = [r["op"] for r in decode([with_rollback(body) for body in bodies], engine)]
    assert ops == ["rollback" if upb_reads(body) else "error" for body in bodies]
    assert 700 < ops.count("rollback") < 1300  # both verdicts are well represented


def fields_with_a_flaw(rng: random.Random) -> bytes:
    """One to three fields (a tag in one or two bytes, then a value), maybe corrupted."""

    def tag(number: int, wire_type: int, two_bytes: bool) -> bytes:
        value = number << 3 | wire_type
        return bytes([value & 0x7F | 0x80, value >> 7]) if two_bytes else bytes([value])

    values = {0: b"\x01", 1: bytes(8), 2: b"\x01x", 5: bytes(4)}
    out = b""
    for _ in range(rng.randint(1, 3)):
        number, wire_type = rng.choice((0, 0, 1, 16)), rng.choice((0, 1, 2, 3, 5))
        two_bytes = number >= 16 or rng.random() < 0.3
        out += tag(number, wire_type, two_bytes)
        out += tag(number, 4, two_bytes) if wire_type == 3 else values[wire_type]
    if rng.random() < 0.5:
        i = rng.randrange(len(out))
        byte = bytes([rng.choice(b"\x00\x04\x0c\x80\xff")])
        out = rng.choice(
            (out[:i] + byte + out[i + 1 :], out[:i] + out[i + 1 :], out[:i] + byte + out[i:])
        )
    return out


# ---------------------------------------------------------------------------------------
# Inputs, tombstones, ordinals


def test_tombstone_row(engine):
    row = one([None], engine)
    assert row == {**dict.fromkeys(row), "format": FORMAT, "op": "tombstone"}


def test_text_and_large_inputs_read_as_bytes(engine):
    raw = envelope(entry(BEGIN))
    bad = "not dts ☃"
    for values in (
        pa.array([raw, None], pa.large_binary()),
        pa.chunked_array([pa.array([raw]), pa.array([None], pa.binary())]),
    ):
        assert [r["op"] for r in decode(values, engine)] == ["begin", "tombstone"]
    for values in (pa.array([bad], pa.string()), pa.array([bad], pa.large_string()), [bad]):
        assert_error(one(values, engine), bad.encode())


def test_ordinals_across_calls_and_chunks(engine):
    decoder = cdc_decode.Decoder(FORMAT, engine=engine)
    two = envelope(entry(BEGIN), entry(COMMIT))
    batch, ordinals = decoder.decode_indexed([two, b"bad", None])
    assert batch.column("op").to_pylist() == ["begin", "commit", "error", "tombstone"]
    assert ordinals.type == pa.int64()
    assert ordinals.to_pylist() == [0, 0, 1, 2]
    chunked = pa.chunked_array([pa.array([None], pa.binary()), pa.array([two])])
    batch, ordinals = decoder.decode_indexed(chunked)
    assert ordinals.to_pylist() == [3, 4, 4]
    assert decoder.stats() == {
        "messages": 5, "decoded": 4, "events": 6, "errors": 1, "dropped": 0, "pending": 0
    }  # fmt: skip


# ---------------------------------------------------------------------------------------
# Multi-part sets


def payload_of(n: int = 3) -> tuple[bytes, list[tuple[str, str]]]:
    """An Entries of ``n`` inserts, and the event ids it gives."""
    items = [dml(INSERT, ["a"], [([], [text("x" * 40)])], seq=100 + i) for i in range(n)]
    return entries_bytes(*items), [f"{100 + i}:0" for i in range(n)]


def test_multi_part_set_completes_across_two_calls(engine):
    payload, ids = payload_of()
    parts = split(payload, 3, properties=[("p", "first")])
    decoder = cdc_decode.Decoder(FORMAT, engine=engine)
    batch, ordinals = decoder.decode_indexed([parts[0], None, parts[1]])
    assert batch.column("op").to_pylist() == ["tombstone"]
    assert ordinals.to_pylist() == [1]
    assert decoder.stats()["pending"] == 2
    batch, ordinals = decoder.decode_indexed([parts[2]])
    rows = rows_of(batch)
    assert [r["event_id"] for r in rows] == ids
    assert ordinals.to_pylist() == [3, 3, 3]
    assert rows[0]["metadata"] == [("sourceType", "MYSQL"), ("seqId", "100"), ("p", "first")]
    assert decoder.finish().num_rows == 0
    assert decoder.stats() == {
        "messages": 4, "decoded": 4, "events": 4, "errors": 0, "dropped": 0, "pending": 0
    }  # fmt: skip


def test_multi_part_properties_come_from_the_first_part(engine):
    payload, _ = payload_of(1)
    first, second = split(payload, 2, properties=[("p", "first")])
    later = P.Envelope.FromString(second)
    props(later.properties, [("q", "later")])
    rows = decode([first, later.SerializeToString()], engine)
    assert rows[0]["metadata"][-1] == ("p", "first")
    assert ("q", "later") not in rows[0]["metadata"]


def test_part_without_an_open_set_is_an_error(engine):
    payload, _ = payload_of()
    parts = split(payload, 3)
    rows = decode(parts[1:], engine)
    assert len(rows) == 2
    assert_error(rows[0], parts[1])
    assert_error(rows[1], parts[2])


def test_out_of_order_part_fails_the_set(engine):
    payload, ids = payload_of()
    parts = split(payload, 3)
    decoder = cdc_decode.Decoder(FORMAT, engine=engine)
    batch, ordinals = decoder.decode_indexed([parts[0], parts[2], parts[1]])
    rows = rows_of(batch)
    assert ordinals.to_pylist() == [0, 1, 2]
    for row, raw in zip(rows, [parts[0], parts[2], parts[1]], strict=True):
        assert_error(row, raw)
    assert decoder.stats()["pending"] == 0


def test_different_total_fails_the_set(engine):
    payload, _ = payload_of()
    parts = split(payload, 3)
    other = envelope(data=b"", total=4, index=1)
    rows = decode([parts[0], parts[1], other], engine)
    assert len(rows) == 3
    for row, raw in zip(rows, [parts[0], parts[1], other], strict=True):
        assert_error(row, raw)


def test_duplicate_part_is_an_error_and_the_set_stays_open(engine):
    payload, ids = payload_of()
    parts = split(payload, 3)
    decoder = cdc_decode.Decoder(FORMAT, engine=engine)
    batch, ordinals = decoder.decode_indexed([parts[0], parts[1], parts[1], parts[2]])
    rows = rows_of(batch)
    assert_error(rows[0], parts[1], "duplicate")
    assert [r["event_id"] for r in rows[1:]] == ids
    assert ordinals.to_pylist() == [2, 3, 3, 3]
    assert decoder.stats()["errors"] == 1


def test_repeat_with_other_data_fails_the_set(engine):
    payload, _ = payload_of()
    parts = split(payload, 3)
    changed = envelope(data=b"\x0a\x00", total=3, index=1)
    rows = decode([parts[0], parts[1], changed, parts[2]], engine)
    assert len(rows) == 4
    for row, raw in zip(rows, [parts[0], parts[1], changed, parts[2]], strict=True):
        assert_error(row, raw)


def test_new_part_0_supersedes_the_open_set(engine):
    payload, ids = payload_of()
    old = split(payload, 3)
    new = split(payload, 2)
    decoder = cdc_decode.Decoder(FORMAT, engine=engine)
    batch, ordinals = decoder.decode_indexed([old[0], old[1], new[0], new[1]])
    rows = rows_of(batch)
    assert_error(rows[0], old[0], "incomplete")
    assert_error(rows[1], old[1], "incomplete")
    assert [r["event_id"] for r in rows[2:]] == ids
    assert ordinals.to_pylist() == [0, 1, 3, 3, 3]


def test_single_envelope_leaves_the_open_set_alone(engine):
    payload, ids = payload_of()
    parts = split(payload, 2)
    rows = decode([parts[0], envelope(entry(BEGIN, seq=9)), parts[1]], engine)
    assert [r["event_id"] for r in rows] == ["9:0", *ids]


def test_bad_envelope_leaves_the_open_set_alone(engine):
    payload, ids = payload_of()
    parts = split(payload, 2)
    bad = envelope(version=2)
    rows = decode([parts[0], bad, parts[1]], engine)
    assert_error(rows[0], bad)
    assert [r["event_id"] for r in rows[1:]] == ids


def test_tombstone_leaves_the_open_set_alone(engine):
    payload, ids = payload_of()
    parts = split(payload, 2)
    rows = decode([parts[0], None, parts[1]], engine)
    assert [r["op"] for r in rows] == ["tombstone", "insert", "insert", "insert"]


def test_set_that_does_not_decode_gives_an_error_row_per_part(engine):
    payload, _ = payload_of()
    parts = split(payload[:-1], 3)  # the last Entry is cut short
    batch, ordinals = cdc_decode.Decoder(FORMAT, engine=engine).decode_indexed(parts)
    rows = rows_of(batch)
    assert ordinals.to_pylist() == [0, 1, 2]
    for row, raw in zip(rows, parts, strict=True):
        assert_error(row, raw)


def test_set_with_a_bad_value_gives_an_error_row_per_part(engine):
    payload = entries_bytes(
        dml(INSERT, ["a"], [([], [data(INT8, "1")]), ([], [text("é", "koi8r")])])
    )
    parts = split(payload, 2)
    rows = decode(parts, engine)
    assert len(rows) == 2
    for row, raw in zip(rows, parts, strict=True):
        assert_error(row, raw, "koi8r")


def test_sets_are_kept_per_key(engine):
    payload_a, ids_a = payload_of(2)
    payload_b = entries_bytes(entry(BEGIN, seq=7), entry(COMMIT, seq=8))
    a, b = split(payload_a, 2), split(payload_b, 3)
    values = [a[0], b[0], b[1], a[1], b[2]]
    keys = ["topic/0", None, None, "topic/0", None]
    decoder = cdc_decode.Decoder(FORMAT, engine=engine)
    batch, ordinals = decoder.decode_indexed(values, keys=keys)
    assert [r["event_id"] for r in rows_of(batch)] == [*ids_a, "7:0", "8:0"]
    assert ordinals.to_pylist() == [3, 3, 4, 4]
    # A null key and no keys at all are the same default key.
    rows = decode([b[0], b[1], b[2]], engine, keys=pa.array([None, None, None], pa.string()))
    assert [r["event_id"] for r in rows] == ["7:0", "8:0"]
    # Under another key, part 1 finds no set; part 2 then does not follow part 0.
    rows = decode([b[0], b[1], b[2]], engine, keys=[None, "x", None])
    assert len(rows) == 3
    for row, raw in zip(rows, [b[1], b[0], b[2]], strict=True):
        assert_error(row, raw)


def test_incomplete_sets_at_the_end(engine):
    payload, _ = payload_of()
    a, b = split(payload, 3), split(payload, 2)
    # Sets in the order they were opened (b's set reopened last), parts in received order.
    values = [b[0], a[0], a[1], b[0]]
    keys = ["b", "a", "a", "b"]
    decoder = cdc_decode.Decoder(FORMAT, engine=engine)
    batch, ordinals = decoder.decode_indexed(values, keys=keys)
    assert_error(rows_of(batch)[0], b[0], "incomplete")
    assert ordinals.to_pylist() == [0]
    assert decoder.stats()["pending"] == 3
    batch, ordinals = decoder.finish_indexed()
    rows = rows_of(batch)
    assert ordinals.to_pylist() == [1, 2, 3]
    for row, raw in zip(rows, [a[0], a[1], b[0]], strict=True):
        assert_error(row, raw, "incomplete")
    assert decoder.stats() == {
        "messages": 4, "decoded": 0, "events": 0, "errors": 4, "dropped": 0, "pending": 0
    }  # fmt: skip
    assert decoder.finish().num_rows == 0  # the state is cleared
    # One-shot decode() ends the input itself.
    rows = decode(a[:2], engine)
    assert [r["raw"] for r in rows] == a[:2]


# ---------------------------------------------------------------------------------------
# Modes


def test_dropmalformed_counts_what_it_drops(engine):
    payload, ids = payload_of(1)
    parts = split(payload, 2)
    values = [envelope(entry(BEGIN)), b"junk", None, parts[0], parts[1], parts[0]]
    decoder = cdc_decode.Decoder(FORMAT, mode="dropmalformed", engine=engine)
    batch, ordinals = decoder.decode_indexed(values)
    assert batch.column("op").to_pylist() == ["begin", "tombstone", "insert"]
    assert ordinals.to_pylist() == [0, 2, 4]
    assert decoder.finish().num_rows == 0
    assert decoder.stats() == {
        "messages": 6, "decoded": 4, "events": 3, "errors": 2, "dropped": 2, "pending": 0
    }  # fmt: skip


def test_failfast_names_the_message(engine):
    decoder = cdc_decode.Decoder(FORMAT, mode="failfast", engine=engine)
    assert decoder.decode([envelope(entry(BEGIN)), None]).num_rows == 2
    with pytest.raises(cdc_decode.DecodeError, match=r"^message 3: "):
        decoder.decode([envelope(entry(COMMIT)), envelope(version=2)])
    with pytest.raises(cdc_decode.DecodeError, match=r"^message 1: "):
        cdc_decode.decode([None, b"\xff"], FORMAT, mode="failfast", engine=engine)


def test_failfast_on_an_incomplete_set_names_its_first_part(engine):
    payload, _ = payload_of()
    parts = split(payload, 3)
    decoder = cdc_decode.Decoder(FORMAT, mode="failfast", engine=engine)
    assert decoder.decode([None, parts[0], parts[1]]).num_rows == 1
    with pytest.raises(cdc_decode.DecodeError, match=r"^message 1: "):
        decoder.finish()
    with pytest.raises(cdc_decode.DecodeError, match=r"^message 0: "):
        cdc_decode.decode(parts[:2], FORMAT, mode="failfast", engine=engine)
