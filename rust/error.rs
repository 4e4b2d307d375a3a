//! The one error type. A message-level error becomes an error row (permissive), a counted
//! drop (dropmalformed) or, wrapped in [`Error::Message`], a raised `DecodeError` (failfast).

/// Everything that can go wrong, each with a message a data engineer can act on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bytes that are not the ProtoBuf message they should be.
    #[error("invalid {message}: {source}")]
    Protobuf {
        message: &'static str,
        source: WireError,
    },
    /// Bytes that are not the JSON text a JSON format reads.
    #[error(transparent)]
    Json(#[from] JsonError),
    /// A JSON field of the wrong type or value: `payload.op: expected a string, got the
    /// number 5`.
    #[error("{path}: {problem}")]
    Field { path: String, problem: String },
    /// An Avro file that cannot be read, or whose schema or values do not fit the format.
    #[error("{0}")]
    Avro(String),
    /// A JSON message whose top value is not an object.
    #[error("expected a JSON object, got {0}")]
    NotAnObject(String),
    /// A Tencent DTS `Envelope.version` other than 1.
    #[error("unsupported Envelope version {0}: only version 1 (data is Entries) is defined")]
    EnvelopeVersion(i32),
    /// `Envelope.index >= Envelope.total`.
    #[error("part index {index} is not below total {total}")]
    PartIndex { index: u32, total: u32 },
    /// A part of a multi-part envelope that cannot be joined to a complete set.
    #[error("{0}")]
    Multipart(String),
    /// A `Data.dataType` the schema does not define.
    #[error("unknown DataType {number} for column '{column}'")]
    UnknownDataType { number: i32, column: String },
    /// A message over one of the decoder's [`crate::limits::Limits`].
    #[error(transparent)]
    Limit(#[from] OverLimit),
    /// A `Data.charset` this project does not decode.
    #[error("unsupported charset '{charset}' for column '{column}'")]
    UnsupportedCharset { charset: String, column: String },
    /// Bytes that are not valid text in their declared charset.
    #[error("invalid {charset} text in column '{column}'")]
    InvalidText { charset: String, column: String },
    /// A row image with more values than the event names columns.
    #[error("row {row} has {values} {image} values for {columns} columns")]
    TooManyValues {
        row: usize,
        values: usize,
        image: &'static str,
        columns: usize,
    },
    /// Two columns with one name in one DML event.
    #[error("duplicate column name '{0}'")]
    DuplicateColumn(String),
    /// An error inside one `Entry` of a DTS `Entries`.
    #[error("Entries.items[{index}]: {source}")]
    InEntry { index: usize, source: Box<Error> },
    /// A format name that is not one of `FORMATS`.
    #[error("unknown format '{0}': expected one of {1}")]
    UnknownFormat(String, String),
    /// A mode name that is not permissive, dropmalformed or failfast.
    #[error("unknown mode '{0}': expected permissive, dropmalformed or failfast")]
    UnknownMode(String),
    /// An input array of a type the decoders do not read.
    #[error("values must be binary, large_binary, string or large_string, not {0}")]
    InputType(String),
    /// An option given to a format that does not take it.
    #[error("the {option} option applies to {applies} only, not {format}")]
    Option {
        option: &'static str,
        applies: &'static str,
        format: String,
    },
    /// A limit name that is not a field of [`crate::limits::Limits`].
    #[error(
        "unknown limit '{0}': expected one of max_message_bytes, max_json_depth, \
         max_avro_depth, max_items, max_parts, max_pending_bytes, max_inflate_ratio, \
         inflate_floor_bytes, max_output_ratio, output_floor_bytes"
    )]
    UnknownLimit(String),
    /// Reassembly keys that do not line up with the values.
    #[error("keys must be a string array as long as the values ({values}), got {keys}")]
    Keys { values: usize, keys: String },
    /// Input of the wrong kind: record batches for a format of binary values, or binary
    /// values for a format of records (`datahub-tuple`).
    #[error("{format} decodes {takes}, not {got}")]
    InputKind {
        format: &'static str,
        takes: &'static str,
        got: &'static str,
    },
    /// Columns that do not fit the format: a record batch's required column missing or a
    /// name given twice (checked before any record is decoded), or a `columns` option
    /// naming a column twice.
    #[error("{0}")]
    Columns(String),
    /// A record batch column of an Arrow type the format does not read.
    #[error("column '{column}' has type {data_type}: {expected}")]
    ColumnType {
        column: String,
        data_type: String,
        expected: &'static str,
    },
    /// A TUPLE record whose value in a meta column is not one the column allows
    /// (`_operation_type_` not I/U/D, an image flag not Y/N, image flags that do not fit the
    /// operation).
    #[error("{column}: {problem}")]
    MetaValue {
        column: &'static str,
        problem: String,
    },
    /// A value that should be a signed 64-bit integer and is not (`got` is its description).
    #[error("{column}: expected a 64-bit integer, got {got}")]
    NotAnInteger { column: &'static str, got: String },
    /// A time whose microseconds do not fit an `i64`.
    #[error("{column}: {value} {unit} is out of range")]
    TimeRange {
        column: &'static str,
        value: i64,
        unit: &'static str,
    },
    /// A `schema=`/`tables=` option typed mode cannot convert to.
    #[error("{0}")]
    Schema(String),
    /// Typed mode: an image value that does not convert to its column's type
    /// (`after.price: cannot convert "abc" to decimal(10,2)`).
    #[error("{0}")]
    Convert(String),
    /// A panic inside the decoder: a bug in cdc-decode, caught at the message it happened
    /// on (`docs/hardening.md`, "The panic boundary") so it becomes that message's error.
    #[error("internal error (a bug in cdc-decode, please report it): {0}")]
    Panic(String),
    /// failfast: the first message that did not decode.
    #[error("message {ordinal}: {source}")]
    Message { ordinal: i64, source: Box<Error> },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

// The errors of the shared readers and of the limits live here, below every module that
// raises them, so that `error` depends on no other module of the crate; `wire`, `json` and
// `limits` re-export them under their own names.

/// What is wrong with a message's bytes, and at which byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError {
    /// Byte offset within the message being parsed.
    pub offset: usize,
    /// What went wrong.
    pub what: &'static str,
}

impl std::error::Error for WireError {}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at byte {}", self.what, self.offset)
    }
}

/// Why bytes are not a JSON text this module accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonError {
    /// Bytes that are not UTF-8.
    #[error("invalid UTF-8 at byte {0}")]
    Utf8(usize),
    /// Not JSON.
    #[error("invalid JSON: {what} at byte {at}")]
    Syntax { what: &'static str, at: usize },
    /// A `\uD800`-`\uDFFF` escape that is not half of a high-low pair.
    #[error("invalid JSON: a \\u escape is a lone surrogate at byte {0}")]
    LoneSurrogate(usize),
    /// More levels of nesting, or more members or items in one object or array, than the
    /// parser's [`crate::limits::Limits`] allow.
    #[error(transparent)]
    Limit(#[from] OverLimit),
    /// A message the tape's 32-bit offsets cannot address.
    #[error("a JSON message of {0} bytes is too large (at most 4 GiB)")]
    TooLarge(usize),
}

/// Where a limit is set, for the error text: the Python API's keyword.
const HOW: &str = "(Decoder(limits=cdc_decode.Limits(...)))";

/// A limit a message went over: `message is 80,000,000 bytes, over max_message_bytes =
/// 64 MiB (Decoder(limits=cdc_decode.Limits(...)))`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}, over {name} = {} {HOW}", show(*.value, .name))]
pub struct OverLimit {
    /// What the message has or claims: `message is 80,000,000 bytes`.
    pub what: String,
    /// The limit's field name in [`crate::limits::Limits`].
    pub name: &'static str,
    /// The limit's value.
    pub value: usize,
}

impl OverLimit {
    /// The error for `what` over the limit `name` of `value`.
    pub fn new(what: impl Into<String>, name: &'static str, value: usize) -> Self {
        Self {
            what: what.into(),
            name,
            value,
        }
    }
}

/// A limit's value as the docs write it: bytes in KiB/MiB/GiB when whole, else grouped
/// digits.
pub(crate) fn show(value: usize, name: &str) -> String {
    if name.ends_with("_bytes") {
        for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
            if value >= 1 << shift && value % (1 << shift) == 0 {
                return format!("{} {unit}", grouped(value >> shift));
            }
        }
    }
    grouped(value)
}

/// `80000000` as `80,000,000`.
pub fn grouped(value: usize) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}
