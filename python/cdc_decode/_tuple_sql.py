"""``datahub-tuple`` on Spark as Spark expressions: the decoder's rules
(docs/formats/datahub-tuple.md) written as one ``select``, with no Python worker.

A TUPLE record is already a row of typed columns: decoding it is checks of the meta
columns, a few string and integer operations and, in typed mode, the data columns as they
are. Spark runs that as generated code, faster than any ``mapInArrow`` can move the rows to
Python and back (README, "The Spark race"). :func:`plan` builds it when every output value
is one Spark computes exactly as the decoder does, and says why not otherwise; then
:func:`cdc_decode.spark.decode` uses the decoder in ``mapInArrow``. The tests hold the two
plans to equal rows (tests/test_tuple_sql.py).

What Spark computes exactly here:
- every check of the meta columns and its error text, and the event columns;
- an error row's ``raw`` and the ``metadata`` values, which render columns as text:
  integers, booleans, strings, decimals, binary (base64), dates, timestamps (with a time
  zone), nulls; a float or double column, a ``timestamp_ntz`` or a nested column among
  the records has no exact rendering here, so it keeps the decoder;
- typed images where a column converts without a possible failure: the same type, a wider
  integer, a decimal of the same scale and at least the precision, any renderable column
  into a ``string`` field (its text), a null column. Any other conversion (text to
  numbers, narrowing, epoch integers to timestamps) keeps the decoder, which reports a
  value that does not convert as an error row naming it.
"""

from __future__ import annotations

from typing import Any

# The format's names and messages: one definition, which the Python engine uses too.
from ._tuple_format import (
    AFTER_IMAGE,
    BEFORE_IMAGE,
    EXCUTE_TIME,
    EXECUTE_TIME,
    EXPECTED_FLAGS,
    FORMAT,
    HEADS,
    LOG_FILE_NAME_OFFSET,
    MAX_MS,
    OPERATION_TYPE,
    SEQUENCE_ID,
    SOURCE_TABLE,
)
from ._tuple_format import META_COLUMNS as META
from ._typed import AFTER_ABSENT

_MIN_I64 = -(2**63)
# The order key's second half, 8 bytes: 0 for an update's before row, 1 otherwise.
_HALF = (bytes(8), bytes(7) + b"\x01")
_MICROS_PER_DAY = 86_400_000_000
# Days from 1970-01-01 to 0000-01-01 and to 10000-01-01 (proleptic Gregorian): the
# instants between are the ones the decoder writes with a plain four-digit year.
_FIRST_DAY = -719_528
_END_DAY = 2_932_897
_INTEGERS = ("byte", "short", "integer", "long")
# "INY" (I/U/D, before flag, after flag) -> (op, half): the combinations the format allows.
_HEADS = {"".join(key): (op, half) for key, (op, half, _side) in HEADS.items()}
# The types a meta column may have (the others: string); the decoder refuses the rest.
_META_KINDS = {
    SEQUENCE_ID: ("string", *_INTEGERS),
    LOG_FILE_NAME_OFFSET: ("string", *_INTEGERS),
    EXECUTE_TIME: ("string", "timestamp", *_INTEGERS),
    EXCUTE_TIME: ("string", "timestamp", *_INTEGERS),
}
# Jackson (to_json) writes these control characters' escapes in upper case, Python's json
# and serde_json in lower case; an escape is one where an even run of backslashes (none,
# or escaped backslashes) comes before it.
_UPPER_ESCAPES = ("0B", "0E", "0F", "1A", "1B", "1C", "1D", "1E", "1F")


class NotExact(Exception):
    """The records or options have something Spark does not compute exactly as the
    decoder does: the text says what."""


def _kind(data_type: Any) -> str:
    return data_type.typeName()


def renderable(data_type: Any) -> bool:
    """Whether :func:`text` renders a column of this Spark type as the decoder does."""
    return _kind(data_type) in (
        *_INTEGERS,
        "boolean",
        "string",
        "binary",
        "decimal",
        "date",
        "timestamp",
        "void",
    )


def text(name: str, data_type: Any) -> Any:
    """Column ``name``'s values as the decoder renders them to text (docs/events.md, "Row
    images in generic mode"), ``None`` for nulls. ``data_type`` is :func:`renderable`."""
    from pyspark.sql import functions as F

    kind = _kind(data_type)
    column = F.col(_quoted(name))
    if kind == "string":
        return column
    if kind == "void":
        return F.lit(None).cast("string")
    if kind == "binary":
        # Spark's base64 breaks lines every 76 characters; the decoder does not.
        return F.regexp_replace(F.base64(column), "\r\n", "")
    if kind == "date":
        # Spark's own text where the year has four digits; format_string (a
        # java.util.Formatter a row, several times slower) only beyond.
        return F.when(in_years(column, kind), column.cast("string")).when(
            column.isNotNull(), _date_text(column)
        )
    if kind == "timestamp":
        # Integer arithmetic throughout (a double would round far-off instants).
        micros = f"unix_micros({_quoted(name)})"
        of_day = f"pmod({micros}, {_MICROS_PER_DAY})"
        days = F.expr(f"CAST(({micros} - {of_day}) div {_MICROS_PER_DAY} AS int)")
        date = F.date_from_unix_date(days)
        # The time of day as the digits of 1HHMMSSffffff, cut apart: one number turned to
        # text instead of a format_string a row (four times slower in all).
        digits = F.expr(
            f"CAST(1000000000000 + {of_day} div 3600000000 * 10000000000 "
            f"+ {of_day} div 60000000 % 60 * 100000000 + {of_day} div 1000000 % 60 * 1000000 "
            f"+ {of_day} % 1000000 AS string)"
        )
        clock = [digits.substr(2, 2), F.lit(":"), digits.substr(4, 2), F.lit(":")]
        clock += [digits.substr(6, 2), F.lit("."), digits.substr(8, 6), F.lit("Z")]
        return F.when(
            in_years(column, kind), F.concat(date.cast("string"), F.lit("T"), *clock)
        ).when(column.isNotNull(), F.concat(_date_text(date), F.lit("T"), *clock))
    return column.cast("string")  # integers, booleans ("true"), decimals (plain text)


def in_years(column: Any, kind: str) -> Any:
    """Whether a ``date`` or ``timestamp`` value lies in the years 0000 to 9999 (null for
    a null): those the decoder writes with four digits and no sign, and converts back."""
    from pyspark.sql import functions as F

    if kind == "date":
        return F.unix_date(column).between(_FIRST_DAY, _END_DAY - 1)
    first, end = _FIRST_DAY * _MICROS_PER_DAY, _END_DAY * _MICROS_PER_DAY
    return F.unix_micros(column).between(first, end - 1)


def _date_text(date: Any) -> Any:
    """``2024-05-01``; years outside 0000-9999 with a sign and at least four digits."""
    from pyspark.sql import functions as F

    year = F.year(date)
    sign = F.when(year < 0, "-").when(year > 9999, "+").otherwise("")
    return F.format_string("%s%04d-%02d-%02d", sign, F.abs(year), F.month(date), F.dayofmonth(date))


def json_string(value: Any) -> Any:
    """``value`` as a JSON string literal, escaped as the decoder escapes it."""
    from pyspark.sql import functions as F

    # {"v":...}: the value's JSON starts at the sixth character and ends before the last.
    quoted = _lower_escapes(F.to_json(F.struct(value.alias("v"))))
    return quoted.substr(F.lit(6), F.length(quoted) - 6)


def _lower_escapes(json: Any) -> Any:
    from pyspark.sql import functions as F

    for code in _UPPER_ESCAPES:
        json = F.regexp_replace(json, r"(?<!\\)((?:\\\\)*)\\u00" + code, r"$1\\u00" + code.lower())
    return json


def _describe(value: Any) -> Any:
    """An offending value in an error: ``null``, or its first 40 characters as JSON."""
    from pyspark.sql import functions as F

    return F.when(value.isNull(), "null").otherwise(json_string(F.substring(value, 1, 40)))


class _Records:
    """The records' columns, sorted into meta and data columns, checked."""

    def __init__(self, fields: list[Any]) -> None:
        self.types = {f.name: f.dataType for f in fields}
        self.nullable = {f.name: f.nullable for f in fields}
        self.names = [f.name for f in fields]
        if len(set(self.names)) != len(self.names):
            raise NotExact("a column name appears twice")  # the decoder reports it
        for name in self.names:
            if not renderable(self.types[name]):
                raise NotExact(
                    f"column {name!r} is {self.types[name].simpleString()}, which Spark does "
                    "not render as text exactly as the decoder"
                )
        self.data = [n for n in self.names if n not in META]
        self.sequence = SEQUENCE_ID if SEQUENCE_ID in self.types else LOG_FILE_NAME_OFFSET
        self.time = next((n for n in (EXECUTE_TIME, EXCUTE_TIME) if n in self.types), None)
        metadata = []
        if SEQUENCE_ID in self.types and LOG_FILE_NAME_OFFSET in self.types:
            metadata.append(LOG_FILE_NAME_OFFSET)
        if EXECUTE_TIME in self.types and EXCUTE_TIME in self.types:
            metadata.append(EXCUTE_TIME)
        self.metadata = sorted(metadata, key=self.names.index)
        for name in META & set(self.types):
            kind = _kind(self.types[name])
            if kind not in _META_KINDS.get(name, ("string",)):
                raise NotExact(f"meta column {name!r} has type {kind}")  # the decoder says


_OP_CODES = {"I": 1, "U": 2, "D": 3}
_FLAG_CODES = {"Y": 1, "N": 2}


def _head_code(head: str) -> int:
    """``"UYN"`` as the number :func:`_head` gives it (212)."""
    return _OP_CODES[head[0]] * 100 + _FLAG_CODES[head[1]] * 10 + _FLAG_CODES[head[2]]


def _head(op: Any, before: Any, after: Any) -> Any:
    """The operation and the two image flags as one number, :func:`_head_code` (0 for
    a value not allowed): comparing small strings with literals, no string built."""
    from pyspark.sql import functions as F

    def code(column: Any, codes: dict[str, int]) -> Any:
        value = F.lit(0)
        for letter, number in reversed(codes.items()):
            value = F.when(column == letter, number).otherwise(value)
        return value

    return code(op, _OP_CODES) * 100 + code(before, _FLAG_CODES) * 10 + code(after, _FLAG_CODES)


def _integer(column: Any, data_type: Any) -> Any:
    """A sequence id or time as a ``bigint`` (null where it is not an integer)."""
    if _kind(data_type) in _INTEGERS:
        return column.cast("long")
    if not hasattr(type(column), "try_cast"):  # pyspark 3.5: the decoder reads the text
        raise NotExact("this pyspark has no Column.try_cast (4.0+) for a text sequence or time")
    return column.try_cast("long")


def _is_integer(column: Any, data_type: Any, value: Any) -> Any:
    """Whether the decoder reads ``column`` as an integer: an integer column's non-null
    values, a string column's ``-?[0-9]+`` within 64 bits (``value``, :func:`_integer`).
    The text Spark prints for the value is compared first: most often it is the text,
    and a comparison is cheaper than the regular expression."""
    from pyspark.sql import functions as F

    if _kind(data_type) in _INTEGERS:
        return column.isNotNull()
    digits = (value.cast("string") == column) | column.rlike(r"^-?[0-9]+\z")
    return F.coalesce(value.isNotNull() & digits, F.lit(False))


def _image(records: _Records, target: Any | None) -> Any:
    """A record's image: its data columns as text (``map``), or typed as ``target``."""
    from pyspark.sql import functions as F

    if target is None:
        parts = []
        for name in records.data:
            parts += [F.lit(name), text(name, records.types[name])]
        return F.create_map(*parts).cast("map<string,string>")
    fields = []
    for field in target.fields:
        value = _converted(records, field)
        if not records.nullable.get(field.name, True):
            value = _nullable(value)  # the typed struct's fields are all nullable
        fields.append(value.alias(field.name))
    return F.struct(*fields)


def _converted(records: _Records, field: Any) -> Any:
    from pyspark.sql import functions as F

    name, target = field.name, field.dataType
    if name not in records.data:
        return F.lit(None).cast(target)
    source = records.types[name]
    column = F.col(_quoted(name))
    kind, want = _kind(source), _kind(target)
    if kind == "void":
        return F.lit(None).cast(target)
    if source == target:
        return column
    if kind in _INTEGERS and want in _INTEGERS and _INTEGERS.index(kind) < _INTEGERS.index(want):
        return column.cast(target)
    if (
        kind == want == "decimal"
        and source.scale == target.scale
        and source.precision <= target.precision
    ):
        return column.cast(target)
    if want == "string":
        return text(name, source)
    raise NotExact(
        f"column {name!r}: {source.simpleString()} to {target.simpleString()} converts in the "
        "decoder, which may refuse a value"
    )


def _conversion_checks(records: _Records, images: Any, side: Any) -> list[tuple[Any, Any]]:
    """The typed conversions that can fail although the types are equal: the decoder reads
    a timestamp or date back from its text, ISO-8601 with a four-digit year, so one outside
    the years 0000-9999 (its text signed) does not convert."""
    from pyspark.sql import functions as F

    checks = []
    for field in images.fields:
        name, target = field.name, field.dataType
        if name in records.data and records.types[name] == target:
            if _kind(target) in ("timestamp", "date"):
                shown = text(name, target)
                checks.append(
                    (
                        ~in_years(F.col(_quoted(name)), _kind(target)),
                        F.concat(
                            side,
                            F.lit(f".{name}: cannot convert "),
                            json_string(shown),
                            F.lit(f" to {_kind(target)}"),
                        ),
                    )
                )
    return checks


def _nullable(value: Any) -> Any:
    """``value``, typed nullable. A cast does not relax a column's nullability; a
    condition Spark cannot fold (always true here) does, at the cost of an int compare."""
    from pyspark.sql import functions as F

    return F.when(F.spark_partition_id() >= 0, value)


def _interpreted(value: Any) -> Any:
    """``value``, evaluated by Spark's interpreter instead of its generated code.

    The text of an error and its raw record are long expressions (JSON escaping, every
    column's rendering); generated inline, they make the method that decodes every row
    longer than the JVM compiles (8,000 bytes of bytecode), and all rows then run
    interpreted bytecode, several times slower. A higher-order function is evaluated by
    the interpreter (Spark does not generate code for its lambda): the method keeps one
    call, made only for error rows."""
    from pyspark.sql import functions as F

    return F.transform(F.array(F.lit(0)), lambda _: value)[0]


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def plan(
    df: Any,
    records: list[str],
    keep: list[str],
    mode: str,
    images: Any | None,
    event_fields: list[Any],
) -> Any:
    """The decoded DataFrame as Spark expressions.

    Args:
        df: the TUPLE records (and the kept columns).
        records: the columns that are the records, in order.
        keep: the kept columns, put first.
        mode: ``permissive`` or ``dropmalformed``.
        images: typed mode's ``before``/``after`` struct type; ``None``: generic images.
        event_fields: the Spark fields of the event columns to return, in order.

    Raises:
        NotExact: what the decoder must do instead (a column type, a conversion, the mode).
    """
    from pyspark.sql import functions as F

    if mode not in ("permissive", "dropmalformed"):
        raise NotExact(f"mode {mode!r} raises the decoder's DecodeError")
    by_name = {f.name: f for f in df.schema.fields}
    r = _Records([by_name[n] for n in records])
    if images is None and not r.data:
        raise NotExact("the records have no data column")

    def col(name: str) -> Any:
        return F.col(_quoted(name))

    # Values used many times are computed once, in a projection of their own (Spark keeps
    # it: collapsing it would repeat them), and referred to by name after it.
    op, before_flag, after_flag = col(OPERATION_TYPE), col(BEFORE_IMAGE), col(AFTER_IMAGE)
    integer_time = r.time is not None and _kind(r.types[r.time]) != "timestamp"
    df = df.select(
        *[col(k) for k in keep],
        *[col(n) for n in r.names],
        _head(op, before_flag, after_flag).alias("__cdc_head"),
        _integer(col(r.sequence), r.types[r.sequence]).alias("__cdc_sequence"),
        *([_integer(col(r.time), r.types[r.time]).alias("__cdc_ms")] if integer_time else []),
        *([F.instr(col(SOURCE_TABLE), ".").alias("__cdc_dot")] if SOURCE_TABLE in r.types else []),
    )
    head, sequence = col("__cdc_head"), col("__cdc_sequence")
    sequence_ok = _is_integer(col(r.sequence), r.types[r.sequence], sequence)

    combination = F.concat(
        F.lit("_operation_type_: "),
        op,
        F.lit(" with _before_image_ "),
        before_flag,
        F.lit(" and _after_image_ "),
        after_flag,
        F.lit(": "),
        F.when(op == "I", EXPECTED_FLAGS["I"])
        .when(op == "D", EXPECTED_FLAGS["D"])
        .otherwise(EXPECTED_FLAGS["U"]),
    )
    # (condition, error): the decoder's checks in its order; the first that holds wins.
    checks = [
        (
            op.isNull() | ~op.isin("I", "U", "D"),
            F.concat(F.lit("_operation_type_: expected I, U or D, got "), _describe(op)),
        ),
        (
            before_flag.isNull() | ~before_flag.isin("Y", "N"),
            F.concat(F.lit("_before_image_: expected Y or N, got "), _describe(before_flag)),
        ),
        (
            after_flag.isNull() | ~after_flag.isin("Y", "N"),
            F.concat(F.lit("_after_image_: expected Y or N, got "), _describe(after_flag)),
        ),
        (~head.isin(*map(_head_code, _HEADS)), combination),
        (
            ~sequence_ok,
            F.concat(
                F.lit(f"{r.sequence}: expected a 64-bit integer, got "),
                _describe(col(r.sequence).cast("string")),
            ),
        ),
    ]

    if r.time is None:
        event_time = F.lit(None).cast("timestamp")
    elif _kind(r.types[r.time]) == "timestamp":
        event_time = col(r.time)
    else:
        ms = col("__cdc_ms")
        ms_ok = _is_integer(col(r.time), r.types[r.time], ms)
        present = col(r.time).isNotNull()
        in_range = ms.between(-MAX_MS, MAX_MS)
        not_integer = F.concat(
            F.lit(f"{r.time}: expected a 64-bit integer, got "),
            _describe(col(r.time).cast("string")),
        )
        out_of_range = F.concat(
            F.lit(f"{r.time}: "), ms.cast("string"), F.lit(" milliseconds is out of range")
        )
        if _kind(r.types[r.time]) in _INTEGERS:
            # Every value present is an integer: no check of the text (Spark would keep
            # one that is never true, a compare a row).
            checks.append((present & ~in_range, out_of_range))
            valid = present & in_range
        else:
            checks += [(present & ~ms_ok, not_integer), (present & ~in_range, out_of_range)]
            valid = present & ms_ok & in_range
        event_time = F.when(valid & (ms != -1), F.timestamp_micros(ms * 1000))

    before_side = head.isin(_head_code("DYN"), _head_code("UYN"))
    if images is not None:
        checks += _conversion_checks(r, images, F.when(before_side, "before").otherwise("after"))

    # Which check failed (0: none) is all the rows that decode compute; the message of
    # an error row is built apart, interpreted (see _interpreted).
    check = F.when(checks[0][0], 1)
    message = F.when(F.col("`__cdc_check`") == 1, checks[0][1])
    for i, (condition, text_) in enumerate(checks[1:], 2):
        check = check.when(condition, i)
        message = message.when(F.col("`__cdc_check`") == i, text_)
    check = check.otherwise(0)

    kind = F.when(head == _head_code("INY"), F.when(sequence == -1, "read").otherwise("insert"))
    for key, (name, _half) in _HEADS.items():
        if key != "INY":
            kind = kind.when(head == _head_code(key), name)
    half = F.when(head == _head_code("UYN"), 0).otherwise(1)

    if SOURCE_TABLE in r.types:
        # "db.table": db before the first dot, table after it, each null when empty; a
        # name without a dot is the table's.
        name, dot = col(SOURCE_TABLE), col("__cdc_dot")
        db = F.when(dot > 1, name.substr(F.lit(1), dot - 1))
        table = F.when(dot == 0, F.nullif(name, F.lit(""))).when(
            dot < F.length(name), name.substr(dot + 1, F.lit(2**31 - 1))
        )
    else:
        db = table = F.lit(None).cast("string")

    if r.metadata:
        entries = F.filter(
            F.array(
                *[
                    F.struct(F.lit(n).alias("key"), text(n, r.types[n]).alias("value"))
                    for n in r.metadata
                ]
            ),
            lambda entry: entry["value"].isNotNull(),
        )
        metadata = F.when(F.size(entries) > 0, F.map_from_entries(entries))
    else:
        metadata = F.lit(None)

    image = _image(r, images)
    sequence_text = sequence.cast("string")
    # The order key's first half: the id with its sign bit flipped, as 16 hex digits. With
    # the bit set (ids from 0 up) hex() gives all 16; lpad, which counts characters and
    # copies, is left to the others (it was half the key's cost).
    flipped = F.hex(sequence.bitwiseXOR(F.lit(_MIN_I64)))
    flipped = F.when(sequence >= 0, flipped).otherwise(F.lpad(flipped, 16, "0"))
    # The event columns of a row that decodes (format, op, error and raw: below).
    values = {
        "source_op": op,
        "source_db": db,
        "source_schema": F.lit(None),
        "source_table": table,
        "event_time": event_time,
        "capture_time": F.lit(None),
        "tx_id": F.lit(None),
        "position": F.when(sequence >= 0, sequence_text),
        "sequence": F.concat(
            F.unhex(flipped), F.when(half == 0, F.lit(_HALF[0])).otherwise(F.lit(_HALF[1]))
        ),
        "event_id": F.when(sequence != -1, F.concat(sequence_text, F.lit(":"), half)),
        "primary_key": F.lit(None),
        "before": F.when(before_side, image),
        "after": F.when(~before_side, image),
        "ddl": F.lit(None),
        "metadata": metadata,
    }
    if images is not None:
        # Typed: the schema's columns the records do not have are absent from every image.
        absent = [F.lit(f.name) for f in images.fields if f.name not in r.data]
        values[AFTER_ABSENT] = F.when(~before_side, F.array(*absent).cast("array<string>"))
    raw = _lower_escapes(
        F.to_json(
            F.struct(*[text(n, r.types[n]).alias(n) for n in r.names]),
            {"ignoreNullFields": "false"},
        )
    ).cast("binary")

    failed = F.col("`__cdc_check`") != 0
    out = []
    for field in event_fields:
        if field.name == "op":
            value = F.when(failed, "error").otherwise(F.coalesce(kind, F.lit("error")))
        elif field.name == "format":
            value = _nullable(F.lit(FORMAT))  # as the event schema has it
        elif field.name == "error":
            value = F.when(failed, _interpreted(message))
        elif field.name == "raw":
            value = F.when(failed, _interpreted(raw))
        else:
            value = F.when(~failed, values[field.name])
        if field.name not in ("before", "after"):  # their structs are already of the type
            value = value.cast(field.dataType)
        out.append(value.alias(field.name))
    decoded = df.select("*", check.alias("__cdc_check"))
    if mode == "dropmalformed":
        decoded = decoded.where(~failed)
    return decoded.select(*[col(k) for k in keep], *out)
