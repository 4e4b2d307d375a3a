//! `datahub-tuple`: DataWorks real-time sync to DataHub TUPLE topics. The input is not bytes
//! but record batches of TUPLE records: meta columns (`_sequence_id_`, `_operation_type_`,
//! `_execute_time_`, `_before_image_`, `_after_image_`, `_source_table_`) beside the
//! table's data columns. The rules are `docs/formats/datahub-tuple.md`.
//!
//! Each column is downcast once per batch ([`Layout::new`], which also checks the columns);
//! then every record is checked ([`Layout::head`]) and written as one event, its values
//! rendered straight into the event columns by the shared renderers of [`crate::text`].

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Date64Type, Decimal128Type, Decimal256Type, Decimal32Type, Decimal64Type,
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type,
};
use arrow_array::{
    Array, ArrayRef, BinaryArray, BinaryViewArray, BooleanArray, Date32Array, Date64Array,
    Decimal128Array, Decimal256Array, Decimal32Array, Decimal64Array, FixedSizeBinaryArray,
    Float32Array, Float64Array, Int16Array, Int32Array, Int64Array, Int8Array, LargeBinaryArray,
    LargeStringArray, RecordBatch, StringArray, StringViewArray, UInt16Array, UInt32Array,
    UInt64Array, UInt8Array,
};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, TimeUnit};
use bytes::Bytes;

use crate::error::{Error, Result};
use crate::events::{EventBuilder, MapColumn};
use crate::formats::FormatDecoder;
use crate::schemas::{Dialect, SchemaCache, WireSchema};
use crate::sequence::OrderKey;
use crate::sink::Sink;
use crate::text;

const FORMAT: &str = "datahub-tuple";

const SEQUENCE_ID: &str = "_sequence_id_";
const LOG_FILE_NAME_OFFSET: &str = "_log_file_name_offset_";
const OPERATION_TYPE: &str = "_operation_type_";
const EXECUTE_TIME: &str = "_execute_time_";
const EXCUTE_TIME: &str = "_excute_time_";
const BEFORE_IMAGE: &str = "_before_image_";
const AFTER_IMAGE: &str = "_after_image_";
const SOURCE_TABLE: &str = "_source_table_";

const STRING_TYPES: &str = "expected a string type (string, large_string, string_view)";
const SEQUENCE_TYPES: &str = "expected a string or integer type";
const TIME_TYPES: &str = "expected a string, integer or timestamp type";
const DATA_TYPES: &str = "a TUPLE record holds integers, float32/float64, decimals, strings, \
     binaries, bool, timestamps, dates or nulls; cast the column first";

/// The decoder. Every record is decoded on its own; the schema pass keeps its wire schemas.
#[derive(Debug, Default)]
pub struct DatahubTuple {
    schemas: SchemaCache,
}

/// An Arrow type as pyarrow prints it (`int64`, `decimal128(10, 2)`, `timestamp[us,
/// tz=UTC]`): the source type the schema pass reports for a TUPLE data column.
pub fn arrow_type_text(data_type: &DataType) -> String {
    use DataType as T;
    let unit = |unit: &TimeUnit| match unit {
        TimeUnit::Second => "s",
        TimeUnit::Millisecond => "ms",
        TimeUnit::Microsecond => "us",
        TimeUnit::Nanosecond => "ns",
    };
    match data_type {
        T::Null => "null".into(),
        T::Boolean => "bool".into(),
        T::Int8 => "int8".into(),
        T::Int16 => "int16".into(),
        T::Int32 => "int32".into(),
        T::Int64 => "int64".into(),
        T::UInt8 => "uint8".into(),
        T::UInt16 => "uint16".into(),
        T::UInt32 => "uint32".into(),
        T::UInt64 => "uint64".into(),
        T::Float32 => "float".into(),
        T::Float64 => "double".into(),
        T::Decimal32(p, s) => format!("decimal32({p}, {s})"),
        T::Decimal64(p, s) => format!("decimal64({p}, {s})"),
        T::Decimal128(p, s) => format!("decimal128({p}, {s})"),
        T::Decimal256(p, s) => format!("decimal256({p}, {s})"),
        T::Utf8 => "string".into(),
        T::LargeUtf8 => "large_string".into(),
        T::Utf8View => "string_view".into(),
        T::Binary => "binary".into(),
        T::LargeBinary => "large_binary".into(),
        T::BinaryView => "binary_view".into(),
        T::FixedSizeBinary(n) => format!("fixed_size_binary[{n}]"),
        T::Timestamp(u, Some(zone)) => format!("timestamp[{}, tz={zone}]", unit(u)),
        T::Timestamp(u, None) => format!("timestamp[{}]", unit(u)),
        T::Date32 => "date32[day]".into(),
        T::Date64 => "date64[ms]".into(),
        other => other.to_string(),
    }
}

impl FormatDecoder for DatahubTuple {
    fn decode(
        &mut self,
        sink: &mut Sink,
        ordinal: i64,
        value: Bytes,
        _key: Option<&str>,
    ) -> Result<()> {
        // Not reached: `Decoder::decode` refuses binary values for a format of records.
        let error = Error::InputKind {
            format: FORMAT,
            takes: "record batches",
            got: "a binary value",
        };
        sink.error(ordinal, &value, error)
    }

    fn takes_records(&self) -> bool {
        true
    }

    fn decode_records(&mut self, sink: &mut Sink, first: i64, records: &RecordBatch) -> Result<()> {
        let layout = Layout::new(records)?;
        // The schema pass: the data columns and their Arrow types; TUPLE names no key.
        let wire = sink.rows.schema_pass().then(|| {
            let fields = records.schema_ref().fields();
            let columns = layout.data.iter().map(|&i| {
                (
                    fields[i].name().clone(),
                    arrow_type_text(fields[i].data_type()),
                )
            });
            self.schemas
                .intern(WireSchema::typed(Dialect::Arrow, columns, None))
        });
        let mut raw = Vec::new();
        let mut scratch = Vec::new();
        for row in 0..records.num_rows() {
            let ordinal = first + row as i64;
            match layout.head(row) {
                Ok(head) => {
                    let written = sink.try_events(ordinal, |rows| {
                        if let Some(typed) = rows.typed() {
                            // An integer TUPLE TIMESTAMP is epoch microseconds.
                            typed.hints.epoch = Some(crate::typed::Unit::Micros);
                        }
                        rows.observe(wire.clone());
                        layout.write(rows, row, &head);
                        Ok(())
                    });
                    // Only typed mode fails here: a value that does not convert.
                    if let Err(error) = written {
                        raw.clear();
                        layout.raw_json(row, &mut raw, &mut scratch);
                        sink.error(ordinal, &raw, error)?;
                    }
                }
                Err(error) => {
                    raw.clear();
                    layout.raw_json(row, &mut raw, &mut scratch);
                    sink.error(ordinal, &raw, error)?;
                }
            }
        }
        Ok(())
    }

    fn raw_record(&self, record: &RecordBatch) -> Vec<u8> {
        let mut raw = Vec::new();
        if let Ok(layout) = Layout::new(record) {
            layout.raw_json(0, &mut raw, &mut Vec::new());
        }
        raw
    }
}

// ---------------------------------------------------------------------------------------
// Columns
// ---------------------------------------------------------------------------------------

/// One column's values, downcast once per batch, by Arrow type.
enum Cells<'a> {
    Null,
    Bool(&'a BooleanArray),
    Int8(&'a Int8Array),
    Int16(&'a Int16Array),
    Int32(&'a Int32Array),
    Int64(&'a Int64Array),
    UInt8(&'a UInt8Array),
    UInt16(&'a UInt16Array),
    UInt32(&'a UInt32Array),
    UInt64(&'a UInt64Array),
    Float32(&'a Float32Array),
    Float64(&'a Float64Array),
    Decimal32(&'a Decimal32Array, i8),
    Decimal64(&'a Decimal64Array, i8),
    Decimal128(&'a Decimal128Array, i8),
    Decimal256(&'a Decimal256Array, i8),
    Utf8(&'a StringArray),
    LargeUtf8(&'a LargeStringArray),
    Utf8View(&'a StringViewArray),
    Binary(&'a BinaryArray),
    LargeBinary(&'a LargeBinaryArray),
    BinaryView(&'a BinaryViewArray),
    FixedBinary(&'a FixedSizeBinaryArray),
    Timestamp {
        values: &'a [i64],
        unit: TimeUnit,
        zoned: bool,
    },
    Date32(&'a Date32Array),
    Date64(&'a Date64Array),
}

impl<'a> Cells<'a> {
    /// The cells of `array`, or `None` for a type a TUPLE column cannot arrive as.
    fn new(array: &'a ArrayRef) -> Option<Self> {
        use DataType as T;
        Some(match array.data_type() {
            T::Null => Self::Null,
            T::Boolean => Self::Bool(array.as_boolean_opt()?),
            T::Int8 => Self::Int8(array.as_primitive_opt::<Int8Type>()?),
            T::Int16 => Self::Int16(array.as_primitive_opt::<Int16Type>()?),
            T::Int32 => Self::Int32(array.as_primitive_opt::<Int32Type>()?),
            T::Int64 => Self::Int64(array.as_primitive_opt::<Int64Type>()?),
            T::UInt8 => Self::UInt8(array.as_primitive_opt::<UInt8Type>()?),
            T::UInt16 => Self::UInt16(array.as_primitive_opt::<UInt16Type>()?),
            T::UInt32 => Self::UInt32(array.as_primitive_opt::<UInt32Type>()?),
            T::UInt64 => Self::UInt64(array.as_primitive_opt::<UInt64Type>()?),
            T::Float32 => Self::Float32(array.as_primitive_opt::<Float32Type>()?),
            T::Float64 => Self::Float64(array.as_primitive_opt::<Float64Type>()?),
            T::Decimal32(_, s) => Self::Decimal32(array.as_primitive_opt::<Decimal32Type>()?, *s),
            T::Decimal64(_, s) => Self::Decimal64(array.as_primitive_opt::<Decimal64Type>()?, *s),
            T::Decimal128(_, s) => {
                Self::Decimal128(array.as_primitive_opt::<Decimal128Type>()?, *s)
            }
            T::Decimal256(_, s) => {
                Self::Decimal256(array.as_primitive_opt::<Decimal256Type>()?, *s)
            }
            T::Utf8 => Self::Utf8(array.as_string_opt::<i32>()?),
            T::LargeUtf8 => Self::LargeUtf8(array.as_string_opt::<i64>()?),
            T::Utf8View => Self::Utf8View(array.as_string_view_opt()?),
            T::Binary => Self::Binary(array.as_binary_opt::<i32>()?),
            T::LargeBinary => Self::LargeBinary(array.as_binary_opt::<i64>()?),
            T::BinaryView => Self::BinaryView(array.as_binary_view_opt()?),
            T::FixedSizeBinary(_) => Self::FixedBinary(array.as_fixed_size_binary_opt()?),
            T::Timestamp(unit, zone) => {
                let values = match unit {
                    TimeUnit::Second => array.as_primitive_opt::<TimestampSecondType>()?.values(),
                    TimeUnit::Millisecond => array
                        .as_primitive_opt::<TimestampMillisecondType>()?
                        .values(),
                    TimeUnit::Microsecond => array
                        .as_primitive_opt::<TimestampMicrosecondType>()?
                        .values(),
                    TimeUnit::Nanosecond => array
                        .as_primitive_opt::<TimestampNanosecondType>()?
                        .values(),
                };
                Self::Timestamp {
                    values,
                    unit: *unit,
                    zoned: zone.is_some(),
                }
            }
            T::Date32 => Self::Date32(array.as_primitive_opt::<Date32Type>()?),
            T::Date64 => Self::Date64(array.as_primitive_opt::<Date64Type>()?),
            _ => return None,
        })
    }

    /// Appends the text of a non-null value (docs: "Rendering values as text").
    #[inline]
    fn render(&self, row: usize, out: &mut Vec<u8>) {
        fn int(value: impl itoa::Integer, out: &mut Vec<u8>) {
            out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
        }
        match self {
            Self::Null => {}
            Self::Bool(a) => out.extend_from_slice(if a.value(row) { b"true" } else { b"false" }),
            Self::Int8(a) => int(a.value(row), out),
            Self::Int16(a) => int(a.value(row), out),
            Self::Int32(a) => int(a.value(row), out),
            Self::Int64(a) => int(a.value(row), out),
            Self::UInt8(a) => int(a.value(row), out),
            Self::UInt16(a) => int(a.value(row), out),
            Self::UInt32(a) => int(a.value(row), out),
            Self::UInt64(a) => int(a.value(row), out),
            Self::Float32(a) => text::f32_into(a.value(row), out),
            Self::Float64(a) => text::f64_into(a.value(row), out),
            Self::Decimal32(a, s) => text::decimal_into(a.value(row).into(), *s, out),
            Self::Decimal64(a, s) => text::decimal_into(a.value(row).into(), *s, out),
            Self::Decimal128(a, s) => text::decimal_into(a.value(row), *s, out),
            Self::Decimal256(a, s) => text::decimal256_into(a.value(row), *s, out),
            Self::Utf8(a) => out.extend_from_slice(a.value(row).as_bytes()),
            Self::LargeUtf8(a) => out.extend_from_slice(a.value(row).as_bytes()),
            Self::Utf8View(a) => out.extend_from_slice(a.value(row).as_bytes()),
            Self::Binary(a) => text::base64_into(a.value(row), out),
            Self::LargeBinary(a) => text::base64_into(a.value(row), out),
            Self::BinaryView(a) => text::base64_into(a.value(row), out),
            Self::FixedBinary(a) => text::base64_into(a.value(row), out),
            Self::Timestamp {
                values,
                unit,
                zoned,
            } => text::timestamp_into(values[row], *unit, *zoned, out),
            Self::Date32(a) => text::date_into(a.value(row).into(), out),
            Self::Date64(a) => text::date_into(a.value(row).div_euclid(86_400_000), out),
        }
    }

    fn is_string(&self) -> bool {
        matches!(self, Self::Utf8(_) | Self::LargeUtf8(_) | Self::Utf8View(_))
    }

    fn is_integer(&self) -> bool {
        matches!(
            self,
            Self::Int8(_)
                | Self::Int16(_)
                | Self::Int32(_)
                | Self::Int64(_)
                | Self::UInt8(_)
                | Self::UInt16(_)
                | Self::UInt32(_)
                | Self::UInt64(_)
        )
    }

    /// A string column's value (not null).
    fn str(&self, row: usize) -> Option<&'a str> {
        match self {
            Self::Utf8(a) => Some(a.value(row)),
            Self::LargeUtf8(a) => Some(a.value(row)),
            Self::Utf8View(a) => Some(a.value(row)),
            _ => None,
        }
    }

    /// An integer column's value (not null), widened.
    fn integer(&self, row: usize) -> Option<i128> {
        Some(match self {
            Self::Int8(a) => a.value(row).into(),
            Self::Int16(a) => a.value(row).into(),
            Self::Int32(a) => a.value(row).into(),
            Self::Int64(a) => a.value(row).into(),
            Self::UInt8(a) => a.value(row).into(),
            Self::UInt16(a) => a.value(row).into(),
            Self::UInt32(a) => a.value(row).into(),
            Self::UInt64(a) => a.value(row).into(),
            _ => return None,
        })
    }
}

/// A column of the batch: its name, cells and validity.
struct Column<'a> {
    name: &'a str,
    cells: Cells<'a>,
    nulls: Option<NullBuffer>,
}

impl<'a> Column<'a> {
    #[inline]
    fn is_null(&self, row: usize) -> bool {
        self.nulls.as_ref().is_some_and(|n| n.is_null(row))
    }

    /// A string column's value, `None` for a null.
    fn text(&self, row: usize) -> Option<&'a str> {
        if self.is_null(row) {
            None
        } else {
            self.cells.str(row)
        }
    }
}

/// What a meta column's name makes of it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Meta {
    Sequence,
    OldSequence,
    Operation,
    Time,
    OldTime,
    Before,
    After,
    Table,
}

impl Meta {
    fn of(name: &str) -> Option<Self> {
        Some(match name {
            SEQUENCE_ID => Self::Sequence,
            LOG_FILE_NAME_OFFSET => Self::OldSequence,
            OPERATION_TYPE => Self::Operation,
            EXECUTE_TIME => Self::Time,
            EXCUTE_TIME => Self::OldTime,
            BEFORE_IMAGE => Self::Before,
            AFTER_IMAGE => Self::After,
            SOURCE_TABLE => Self::Table,
            _ => return None,
        })
    }

    /// `None` when `cells` is a type this meta column accepts, else what it expects.
    fn refuses(self, cells: &Cells) -> Option<&'static str> {
        match self {
            Self::Sequence | Self::OldSequence => {
                (!cells.is_string() && !cells.is_integer()).then_some(SEQUENCE_TYPES)
            }
            Self::Time | Self::OldTime => {
                let ok = cells.is_string()
                    || cells.is_integer()
                    || matches!(cells, Cells::Timestamp { .. });
                (!ok).then_some(TIME_TYPES)
            }
            Self::Operation | Self::Before | Self::After | Self::Table => {
                (!cells.is_string()).then_some(STRING_TYPES)
            }
        }
    }
}

/// Where everything is in one batch, checked.
struct Layout<'a> {
    /// Every column, in the batch's order (an error row's `raw` holds them all).
    columns: Vec<Column<'a>>,
    /// The data columns, in order: the image.
    data: Vec<usize>,
    sequence: (usize, &'static str),
    operation: usize,
    before: usize,
    after: usize,
    time: Option<(usize, &'static str)>,
    table: Option<usize>,
    /// The meta column of a pair that is not read: `metadata`.
    metadata: Vec<usize>,
}

/// What a record's meta columns say, once checked.
struct Head<'a> {
    op: &'static str,
    source_op: &'a str,
    sequence_id: i64,
    half: u64,
    before_image: bool,
    event_time: Option<i64>,
}

impl<'a> Layout<'a> {
    /// Checks the batch's columns (docs: "Whole-call errors"), in this order: a name twice,
    /// then each column's type in column order, then the required meta columns.
    fn new(records: &'a RecordBatch) -> Result<Self> {
        let schema = records.schema_ref();
        let fields = schema.fields();
        for (i, field) in fields.iter().enumerate() {
            if fields[..i].iter().any(|f| f.name() == field.name()) {
                return Err(Error::Columns(format!(
                    "{FORMAT}: column '{}' appears twice in the records",
                    field.name()
                )));
            }
        }
        let mut columns = Vec::with_capacity(fields.len());
        let mut metas = Vec::new();
        let mut data = Vec::new();
        for (i, (field, array)) in fields.iter().zip(records.columns()).enumerate() {
            let name = field.name().as_str();
            let refused = |expected| Error::ColumnType {
                column: name.to_string(),
                data_type: array.data_type().to_string(),
                expected,
            };
            let meta = Meta::of(name);
            let cells = Cells::new(array).ok_or_else(|| {
                refused(match meta {
                    Some(Meta::Sequence | Meta::OldSequence) => SEQUENCE_TYPES,
                    Some(Meta::Time | Meta::OldTime) => TIME_TYPES,
                    Some(_) => STRING_TYPES,
                    None => DATA_TYPES,
                })
            })?;
            match meta {
                Some(meta) => {
                    if let Some(expected) = meta.refuses(&cells) {
                        return Err(refused(expected));
                    }
                    metas.push((meta, i));
                }
                None => data.push(i),
            }
            columns.push(Column {
                name,
                cells,
                nulls: array.logical_nulls(),
            });
        }
        let find = |meta: Meta| metas.iter().find(|(m, _)| *m == meta).map(|&(_, i)| i);
        let missing = |what: &str| {
            let names: Vec<&str> = fields.iter().map(|f| f.name().as_str()).collect();
            Error::Columns(format!(
                "{FORMAT}: the records have no {what} column (columns: {})",
                names.join(", ")
            ))
        };
        let mut metadata = Vec::new();
        let sequence = match (find(Meta::Sequence), find(Meta::OldSequence)) {
            (Some(i), old) => {
                metadata.extend(old);
                (i, SEQUENCE_ID)
            }
            (None, Some(i)) => (i, LOG_FILE_NAME_OFFSET),
            (None, None) => return Err(missing("_sequence_id_ (or _log_file_name_offset_)")),
        };
        let operation = find(Meta::Operation).ok_or_else(|| missing(OPERATION_TYPE))?;
        let before = find(Meta::Before).ok_or_else(|| missing(BEFORE_IMAGE))?;
        let after = find(Meta::After).ok_or_else(|| missing(AFTER_IMAGE))?;
        let time = match (find(Meta::Time), find(Meta::OldTime)) {
            (Some(i), old) => {
                metadata.extend(old);
                Some((i, EXECUTE_TIME))
            }
            (None, Some(i)) => Some((i, EXCUTE_TIME)),
            (None, None) => None,
        };
        metadata.sort_unstable();
        Ok(Self {
            columns,
            data,
            sequence,
            operation,
            before,
            after,
            time,
            table: find(Meta::Table),
            metadata,
        })
    }

    /// Checks one record's meta columns (docs: "Per-record errors", in that order).
    fn head(&self, row: usize) -> Result<Head<'a>> {
        let columns = &self.columns;
        let operation = columns[self.operation].text(row);
        let op = match operation {
            Some("I") => 'I',
            Some("U") => 'U',
            Some("D") => 'D',
            other => {
                return Err(Error::MetaValue {
                    column: OPERATION_TYPE,
                    problem: format!("expected I, U or D, got {}", describe(other)),
                })
            }
        };
        let flag = |index: usize, column: &'static str| match columns[index].text(row) {
            Some("Y") => Ok(true),
            Some("N") => Ok(false),
            other => Err(Error::MetaValue {
                column,
                problem: format!("expected Y or N, got {}", describe(other)),
            }),
        };
        let before = flag(self.before, BEFORE_IMAGE)?;
        let after = flag(self.after, AFTER_IMAGE)?;
        let expected = match (op, before, after) {
            ('I', false, true) | ('D', true, false) | ('U', true, false) | ('U', false, true) => "",
            ('I', ..) => "expected N/Y (an insert is an after image)",
            ('D', ..) => "expected Y/N (a delete is a before image)",
            _ => "expected Y/N (before image) or N/Y (after image)",
        };
        if !expected.is_empty() {
            let yn = |flag: bool| if flag { 'Y' } else { 'N' };
            return Err(Error::MetaValue {
                column: OPERATION_TYPE,
                problem: format!(
                    "{op} with {BEFORE_IMAGE} {} and {AFTER_IMAGE} {}: {expected}",
                    yn(before),
                    yn(after)
                ),
            });
        }
        let sequence_id = self.sequence_id(row)?;
        let event_time = self.event_time(row)?;
        let (op, half) = match (op, before) {
            ('I', _) if sequence_id == -1 => ("read", 1),
            ('I', _) => ("insert", 1),
            ('D', _) => ("delete", 1),
            (_, true) => ("update_before", 0),
            (_, false) => ("update_after", 1),
        };
        Ok(Head {
            op,
            source_op: operation.unwrap_or_default(),
            sequence_id,
            half,
            before_image: before,
            event_time,
        })
    }

    fn sequence_id(&self, row: usize) -> Result<i64> {
        let (index, name) = self.sequence;
        let column = &self.columns[index];
        let not_an_integer = |got: String| Error::NotAnInteger { column: name, got };
        if column.is_null(row) {
            return Err(not_an_integer("null".to_string()));
        }
        if let Some(text) = column.cells.str(row) {
            return parse_integer(text).ok_or_else(|| not_an_integer(describe(Some(text))));
        }
        let value = column.cells.integer(row).unwrap_or_default();
        i64::try_from(value).map_err(|_| not_an_integer(format!("the number {value}")))
    }

    /// `event_time` in microseconds, from `_execute_time_` (epoch ms, or a timestamp).
    fn event_time(&self, row: usize) -> Result<Option<i64>> {
        let Some((index, name)) = self.time else {
            return Ok(None);
        };
        let column = &self.columns[index];
        if column.is_null(row) {
            return Ok(None);
        }
        let out_of_range = |value: i64, unit: &'static str| Error::TimeRange {
            column: name,
            value,
            unit,
        };
        let ms = match &column.cells {
            Cells::Timestamp { values, unit, .. } => {
                let value = values[row];
                return match unit {
                    TimeUnit::Second => value
                        .checked_mul(1_000_000)
                        .map(Some)
                        .ok_or_else(|| out_of_range(value, "seconds")),
                    TimeUnit::Millisecond => value
                        .checked_mul(1_000)
                        .map(Some)
                        .ok_or_else(|| out_of_range(value, "milliseconds")),
                    TimeUnit::Microsecond => Ok(Some(value)),
                    TimeUnit::Nanosecond => Ok(Some(value.div_euclid(1_000))),
                };
            }
            cells => match cells.str(row) {
                Some(text) => parse_integer(text).ok_or_else(|| Error::NotAnInteger {
                    column: name,
                    got: describe(Some(text)),
                })?,
                None => {
                    let value = cells.integer(row).unwrap_or_default();
                    i64::try_from(value).map_err(|_| Error::NotAnInteger {
                        column: name,
                        got: format!("the number {value}"),
                    })?
                }
            },
        };
        if ms == -1 {
            return Ok(None); // a full-sync row: no time
        }
        ms.checked_mul(1_000)
            .map(Some)
            .ok_or_else(|| out_of_range(ms, "milliseconds"))
    }

    /// Writes the one event of a checked record.
    fn write(&self, rows: &mut EventBuilder, row: usize, head: &Head) {
        rows.op.push_str(head.op);
        rows.source_op.push_str(head.source_op);
        let table = self.table.and_then(|i| self.columns[i].text(row));
        let (db, table) = match table.map(|t| t.split_once('.')) {
            Some(Some((db, table))) => (Some(db), Some(table)),
            Some(None) => (None, table),
            None => (None, None),
        };
        rows.source_db.push_nonempty(db);
        rows.source_schema.push_null();
        rows.source_table.push_nonempty(table);
        rows.event_time.push(head.event_time);
        rows.capture_time.push(None);
        rows.tx_id.push_null();
        let id = head.sequence_id;
        if id >= 0 {
            rows.position
                .push_with(|out| out.extend_from_slice(itoa::Buffer::new().format(id).as_bytes()));
        } else {
            rows.position.push_null();
        }
        rows.sequence.push_with(|out| {
            OrderKey(out).i64(id).u64(head.half);
        });
        if id != -1 {
            rows.event_id.push_with(|out| {
                out.extend_from_slice(itoa::Buffer::new().format(id).as_bytes());
                out.push(b':');
                out.push(b'0' + head.half as u8);
            });
        } else {
            rows.event_id.push_null();
        }
        rows.primary_key.push_null();
        if rows.schema_pass() {
            rows.end_schema_row();
            return;
        }
        if head.before_image {
            self.image(&mut rows.before, row);
            rows.after.push_null();
        } else {
            rows.before.push_null();
            self.image(&mut rows.after, row);
        }
        rows.ddl.push_null();
        let mut entries = 0;
        for &i in &self.metadata {
            let column = &self.columns[i];
            if !column.is_null(row) {
                rows.metadata
                    .entry_with(column.name, |out| column.cells.render(row, out));
                entries += 1;
            }
        }
        if entries == 0 {
            rows.metadata.push_null();
        } else {
            rows.metadata.close();
        }
        rows.error.push_null();
        rows.raw.push_null();
        rows.end_row();
    }

    /// The data columns of one record as map entries.
    #[inline]
    fn image(&self, map: &mut MapColumn, row: usize) {
        for &i in &self.data {
            let column = &self.columns[i];
            if column.is_null(row) {
                map.entry(column.name, None);
            } else {
                map.entry_with(column.name, |out| column.cells.render(row, out));
            }
        }
        map.close();
    }

    /// An error row's `raw`: the record as a compact JSON object of column → text.
    fn raw_json(&self, row: usize, out: &mut Vec<u8>, scratch: &mut Vec<u8>) {
        out.push(b'{');
        for (i, column) in self.columns.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            text::json_string_into(column.name, out);
            out.push(b':');
            if column.is_null(row) {
                out.extend_from_slice(b"null");
            } else {
                scratch.clear();
                column.cells.render(row, scratch);
                // Rendered text is UTF-8 by construction (checked strings, digits, base64).
                text::json_string_into(std::str::from_utf8(scratch).unwrap_or_default(), out);
            }
        }
        out.push(b'}');
    }
}

/// A meta value as an error message shows it: `null`, or a JSON string of at most 40
/// characters.
fn describe(value: Option<&str>) -> String {
    match value {
        None => "null".to_string(),
        Some(text) => {
            let end = text.char_indices().nth(40).map_or(text.len(), |(i, _)| i);
            let mut out = Vec::new();
            text::json_string_into(&text[..end], &mut out);
            String::from_utf8(out).unwrap_or_default()
        }
    }
}

/// `-?[0-9]+` (leading zeros allowed) within the signed 64-bit range, as `datahub-blob`
/// reads its integers.
fn parse_integer(text: &str) -> Option<i64> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let significant = digits.trim_start_matches('0');
    if significant.len() > 19 {
        return None;
    }
    let magnitude: i128 = if significant.is_empty() {
        0
    } else {
        significant.parse().ok()?
    };
    i64::try_from(if negative { -magnitude } else { magnitude }).ok()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{MapArray, StringArray};
    use arrow_schema::{Field, Schema};

    use super::*;
    use crate::decoder::{Decoder, Mode};

    fn strings(values: &[Option<&str>]) -> ArrayRef {
        Arc::new(StringArray::from(values.to_vec()))
    }

    /// The seed's four records (an insert, an update's two halves, a delete), with an
    /// `id` column and a float32 column.
    fn seed_records() -> RecordBatch {
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("id", Arc::new(Int64Array::from(vec![1, 1, 1, 1]))),
            (
                "price",
                Arc::new(Float32Array::from(vec![
                    Some(0.1),
                    Some(0.1),
                    Some(2.5),
                    None,
                ])),
            ),
            (
                "_sequence_id_",
                strings(&[
                    Some("1649991610688000000"),
                    Some("1649991610688000001"),
                    Some("1649991610688000001"),
                    Some("1649991610688000002"),
                ]),
            ),
            (
                "_operation_type_",
                strings(&[Some("I"), Some("U"), Some("U"), Some("D")]),
            ),
            (
                "_excute_time_",
                Arc::new(Int64Array::from(vec![
                    1_649_991_726_000,
                    1_649_991_756_000,
                    1_649_991_756_000,
                    1_649_991_774_000,
                ])),
            ),
            (
                "_before_image_",
                strings(&[Some("N"), Some("Y"), Some("N"), Some("Y")]),
            ),
            (
                "_after_image_",
                strings(&[Some("Y"), Some("N"), Some("Y"), Some("N")]),
            ),
            ("_source_table_", strings(&[Some("shop.t"); 4])),
        ];
        let fields: Vec<Field> = columns
            .iter()
            .map(|(name, array)| Field::new(*name, array.data_type().clone(), true))
            .collect();
        let arrays = columns.into_iter().map(|(_, a)| a).collect();
        RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).unwrap()
    }

    fn image(map: &MapArray, row: usize) -> Option<Vec<(String, Option<String>)>> {
        if map.is_null(row) {
            return None;
        }
        let entries = map.value(row);
        let keys = entries.column(0).as_string::<i32>();
        let values = entries.column(1).as_string::<i32>();
        Some(
            (0..entries.len())
                .map(|i| {
                    let value = values.is_valid(i).then(|| values.value(i).to_string());
                    (keys.value(i).to_string(), value)
                })
                .collect(),
        )
    }

    #[test]
    fn the_seed_records_decode_to_four_events() {
        let mut decoder = Decoder::new(FORMAT, Mode::Permissive).unwrap();
        let out = decoder.decode_records(&seed_records(), true).unwrap();
        let batch = out.batch;
        assert_eq!(out.ordinals, vec![0, 1, 2, 3]);
        let text = |name: &str| -> Vec<Option<String>> {
            let column = batch.column_by_name(name).unwrap().as_string::<i32>();
            column.iter().map(|v| v.map(str::to_string)).collect()
        };
        let some = |v: &[&str]| v.iter().map(|s| Some(s.to_string())).collect::<Vec<_>>();
        assert_eq!(
            text("op"),
            some(&["insert", "update_before", "update_after", "delete"])
        );
        assert_eq!(text("source_op"), some(&["I", "U", "U", "D"]));
        assert_eq!(text("source_db"), some(&["shop"; 4]));
        assert_eq!(text("source_table"), some(&["t"; 4]));
        assert_eq!(
            text("event_id"),
            some(&[
                "1649991610688000000:1",
                "1649991610688000001:0",
                "1649991610688000001:1",
                "1649991610688000002:1",
            ])
        );
        let sequence = batch.column_by_name("sequence").unwrap().as_binary::<i32>();
        let keys: Vec<&[u8]> = sequence.iter().map(Option::unwrap).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        let time = batch
            .column_by_name("event_time")
            .unwrap()
            .as_primitive::<TimestampMicrosecondType>();
        assert_eq!(time.value(0), 1_649_991_726_000_000);
        let before = batch.column_by_name("before").unwrap().as_map();
        let after = batch.column_by_name("after").unwrap().as_map();
        let entry = |k: &str, v: Option<&str>| (k.to_string(), v.map(str::to_string));
        assert_eq!(image(before, 0), None);
        assert_eq!(
            image(after, 0),
            Some(vec![entry("id", Some("1")), entry("price", Some("0.1"))])
        );
        assert_eq!(
            image(before, 3),
            Some(vec![entry("id", Some("1")), entry("price", None)])
        );
        assert_eq!(image(after, 2).unwrap()[1], entry("price", Some("2.5")));
        assert_eq!(batch.column_by_name("metadata").unwrap().null_count(), 4);
    }

    #[test]
    fn a_bad_record_is_one_error_row_with_the_record_as_json() {
        let records = seed_records();
        let mut columns = records.columns().to_vec();
        columns[3] = strings(&[Some("I"), Some("X"), Some("U"), None]);
        let records = RecordBatch::try_new(records.schema(), columns).unwrap();
        let mut decoder = Decoder::new(FORMAT, Mode::Permissive).unwrap();
        let batch = decoder.decode_records(&records, true).unwrap().batch;
        let op = batch.column_by_name("op").unwrap().as_string::<i32>();
        assert_eq!(op.value(1), "error");
        assert_eq!(op.value(3), "error");
        let error = batch.column_by_name("error").unwrap().as_string::<i32>();
        assert_eq!(
            error.value(1),
            "_operation_type_: expected I, U or D, got \"X\""
        );
        let raw = batch.column_by_name("raw").unwrap().as_binary::<i32>();
        assert_eq!(
            std::str::from_utf8(raw.value(1)).unwrap(),
            "{\"id\":\"1\",\"price\":\"0.1\",\"_sequence_id_\":\"1649991610688000001\",\
             \"_operation_type_\":\"X\",\"_excute_time_\":\"1649991756000\",\
             \"_before_image_\":\"Y\",\"_after_image_\":\"N\",\"_source_table_\":\"shop.t\"}"
        );
        assert_eq!(decoder.stats().errors, 2);
        assert_eq!(decoder.stats().messages, 4);
    }

    #[test]
    fn columns_are_checked_before_any_record() {
        let records = seed_records();
        let without = records.project(&[0, 1, 2, 4, 5, 6]).unwrap();
        let mut decoder = Decoder::new(FORMAT, Mode::FailFast).unwrap();
        let error = decoder.decode_records(&without, false).unwrap_err();
        assert!(matches!(error, Error::Columns(_)), "{error}");
        assert!(error.to_string().contains("_operation_type_"));
        assert_eq!(decoder.stats().messages, 0);

        let lists =
            arrow_array::ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
                Some(vec![Some(1)]);
                4
            ]);
        let mut columns = records.columns().to_vec();
        columns[0] = Arc::new(lists);
        let mut fields: Vec<Field> = records
            .schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields[0] = Field::new("id", columns[0].data_type().clone(), true);
        let records = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
        let error = decoder.decode_records(&records, false).unwrap_err();
        assert!(matches!(error, Error::ColumnType { ref column, .. } if column == "id"));
    }

    #[test]
    fn integers_follow_the_blob_rule() {
        assert_eq!(parse_integer("0001"), Some(1));
        assert_eq!(parse_integer("-0"), Some(0));
        assert_eq!(parse_integer("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_integer("9223372036854775808"), None);
        assert_eq!(parse_integer("00000000000000000000000042"), Some(42));
        for bad in ["", "-", "+1", "1.0", "1e3", " 1", "١"] {
            assert_eq!(parse_integer(bad), None, "{bad:?}");
        }
    }
}
