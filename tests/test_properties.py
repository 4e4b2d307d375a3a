"""Property tests: random valid DTS messages, and mutations of them (truncation, bit flips,
dropped parts, swapped byte ranges, tags of the wrong wire type), give equal batches on
both engines.

The example count is `CDC_HYPOTHESIS_EXAMPLES` (300 by default, what `make test` runs); the
hardening work runs it with 100,000.
"""

from __future__ import annotations

from compare import assert_same_events
from conftest import PROPERTY_SETTINGS as SETTINGS
from hypothesis import given
from hypothesis import strategies as st

import cdc_decode
from cdc_decode import _proto as pb

CHARSETS = ["utf8mb4", "utf8", "UTF8MB4", "", "gbk", "gb18030", "latin1", "ascii", "binary", "big5"]
TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)


# Every strategy is built once, at import: hypothesis validates a new strategy object
# (walking everything it reaches) on its first draw, which cost more than the rest of an
# example when the strategies were built inside the composites.
DATA_KINDS = st.sampled_from(["number", "string", "bytes", "nil", "na", "odd"])
NUMBER_TYPES = st.integers(1, 12).filter(lambda t: t != 11)
NUMBER_TEXT = st.sampled_from(["", "0", "-1", "3.14", "1e9"])
CHARSET = st.sampled_from(CHARSETS)
SHORT_BYTES = st.binary(max_size=8)
BYTES = st.binary(max_size=20)
ODD_TYPES = st.integers(-3, 40)


@st.composite
def data_values(draw):
    kind = draw(DATA_KINDS)
    if kind == "number":
        return pb.Data(dataType=draw(NUMBER_TYPES), sv=draw(NUMBER_TEXT))
    if kind == "string":
        charset = draw(CHARSET)
        text = draw(TEXT)
        if charset.lower() in ("gbk", "gb18030"):
            raw = text.encode("gb18030", "ignore")
        elif charset.lower() == "latin1":
            raw = text.encode("cp1252", "ignore")
        elif draw(st.booleans()):
            raw = draw(SHORT_BYTES)  # maybe not valid in the charset
        else:
            raw = text.encode()
        return pb.Data(dataType=13, charset=charset, bv=raw)
    if kind == "bytes":
        return pb.Data(dataType=11, bv=draw(BYTES))
    if kind == "nil":
        return pb.Data(dataType=0)
    if kind == "na":
        return pb.Data(dataType=14)
    return pb.Data(dataType=draw(ODD_TYPES), sv="x", bv=b"y")


DATA = data_values()
SMALL = st.integers(0, 3)
U32 = st.integers(0, 2**32 - 1)
U64 = st.integers(0, 2**64 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
FILE_NAMES = st.sampled_from(["", "mysql-bin.000001"])
GTIDS = st.sampled_from(["", "3E11FA47-71CA-11E1-9E33-C80AA9429562:23"])
PROPERTIES = st.lists(st.tuples(TEXT, TEXT), max_size=3)
NAMES = st.lists(st.sampled_from(["id", "name", "v", "", "名"]), max_size=5)
# A row's images have up to one value more than there are columns.
IMAGES = [st.lists(DATA, max_size=n + 1) for n in range(6)]


@st.composite
def entries(draw):
    items = []
    for _ in range(draw(SMALL)):
        message_type = draw(st.integers(0, 8))
        header = pb.Header(
            version=draw(st.integers(0, 2)),
            sourceType=draw(st.integers(0, 5)),
            messageType=message_type,
            timestamp=draw(U32),
            serverId=draw(I64),
            fileName=draw(FILE_NAMES),
            position=draw(U64),
            gtid=draw(GTIDS),
            schemaName=draw(TEXT),
            tableName=draw(TEXT),
            seqId=draw(U64),
            eventIndex=draw(SMALL),
            isLast=draw(st.booleans()),
            properties=[pb.KVPair(key=k, value=v) for k, v in draw(PROPERTIES)],
        )
        names = draw(NAMES)
        columns = [pb.Column(name=n, isKey=draw(st.booleans())) for n in names]
        rows = [
            pb.RowChange(
                oldColumns=draw(IMAGES[len(names)]),
                newColumns=draw(IMAGES[len(names)]),
            )
            for _ in range(draw(SMALL))
        ]
        event = pb.Event(
            dmlEvent=pb.DMLEvent(dmlEventType=draw(st.integers(0, 4)), columns=columns, rows=rows),
            beginEvent=pb.BeginEvent(transactionId=draw(TEXT), threadId=draw(st.integers(0, 9))),
            ddlEvent=pb.DDLEvent(schemaName=draw(TEXT), sql=draw(TEXT)),
            checkpointEvent=pb.CheckpointEvent(
                syncedGtid=draw(TEXT), position=draw(st.integers(0, 9))
            ),
        )
        items.append(pb.Entry(header=header, event=event))
    return pb.Entries(items=items).SerializeToString()


ENTRIES = entries()
VERSIONS = st.sampled_from([1, 1, 1, 2])
MUTATIONS = st.sampled_from(
    ["none", "none", "none", "none", "truncate", "flip", "drop", "swap", "retype"]
)


@st.composite
def streams(draw):
    """Kafka values: envelopes of random Entries, some split into parts, some mutated."""
    values = []
    for _ in range(draw(st.integers(1, 6))):
        data = draw(ENTRIES)
        parts = draw(st.integers(1, 3))
        size = max(1, -(-len(data) // parts))
        chunks = [data[i : i + size] for i in range(0, len(data), size)] or [b""]
        for index, chunk in enumerate(chunks):
            value = pb.Envelope(
                version=draw(VERSIONS),
                total=len(chunks),
                index=index,
                data=chunk,
            ).SerializeToString()
            mutation = draw(MUTATIONS)
            if mutation == "truncate" and value:
                value = value[: draw(st.integers(0, len(value) - 1))]
            elif mutation == "flip" and value:
                at = draw(st.integers(0, len(value) - 1))
                value = (
                    value[:at]
                    + bytes([value[at] ^ (1 << draw(st.integers(0, 7)))])
                    + value[at + 1 :]
                )
            elif mutation == "swap" and len(value) > 2:
                # Two byte ranges trade places: fields swapped, or tags and values mixed.
                at = draw(st.integers(0, len(value) - 2))
                size = draw(st.integers(1, max(1, (len(value) - at) // 2)))
                a, b = value[at : at + size], value[at + size : at + 2 * size]
                value = value[:at] + b + a + value[at + 2 * size :]
            elif mutation == "retype" and value:
                # A byte read as a tag gets another wire type: a field of the wrong type.
                at = draw(st.integers(0, len(value) - 1))
                wire = draw(st.integers(0, 7))
                value = value[:at] + bytes([value[at] & ~7 | wire]) + value[at + 1 :]
            elif mutation == "drop":
                continue
            values.append(value)
    return values


@SETTINGS
@given(streams())
def test_engines_agree_on_random_streams(values):
    native = cdc_decode.Decoder("tencent-dts", engine="native")
    python = cdc_decode.Decoder("tencent-dts", engine="python")
    cut = len(values) // 2
    for part in (values[:cut], values[cut:]):
        a, a_ordinals = native.decode_indexed(part)
        b, b_ordinals = python.decode_indexed(part)
        assert_same_events(a, b)
        assert a_ordinals.equals(b_ordinals)
    a, _ = native.finish_indexed()
    b, _ = python.finish_indexed()
    assert_same_events(a, b)
    assert native.stats() == python.stats()
