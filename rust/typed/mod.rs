//! Typed row images (`docs/typed.md`): the text a format renders into `before`/`after`,
//! converted into structs of the table's columns.
//!
//! Every format keeps rendering its values as text; when a [`TypedSpec`] is given, the
//! event builder converts each row's images as the row ends ([`TypedImages::end_row`]),
//! driven by the target type and, where the text alone is ambiguous, a [`Hint`] the format
//! supplies for the message ([`Hints`]). A value that does not convert fails the whole
//! message (one error row naming the column); a column missing from an image is null; an
//! image key that is not a column is ignored. Which columns the `after` image did not
//! carry is kept apart from the nulls it did carry: the `after_absent` column
//! ([`AFTER_ABSENT`]), so a partial image can be applied without overwriting what it
//! left out.
//!
//! `python/cdc_decode/fallback/_typed.py` has the same rules, line for line.
//!
//! The parts: [`spec`] (the schemas typed mode converts to, and routing rows to tables),
//! [`column`] (the struct columns' builders), [`images`] (converting each row's images and
//! `after_absent`), [`parse`] (the conversions from text).

use std::collections::HashMap;

mod column;
mod images;
mod parse;
mod spec;

pub use images::{conversion_error, TypedImages};
pub use spec::{type_name, Table, TypedSpec};

/// The name of typed mode's last column: the names of the schema's fields (in schema order)
/// that a row's `after` image does not carry; empty when it carries every field, null
/// when the row has no `after` image (docs/typed.md).
pub const AFTER_ABSENT: &str = "after_absent";

/// The unit of an epoch number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Millis,
    Micros,
    Nanos,
}

/// How a format says one column's text is to be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hint {
    /// An integer is an epoch time in this unit (Debezium `Timestamp`, `MicroTimestamp`,
    /// `NanoTimestamp`).
    Epoch(Unit),
    /// An integer is days since the epoch (Debezium `Date`).
    Days,
    /// Base64 of a big-endian two's complement unscaled value with this scale (Connect
    /// `Decimal`); text that is not base64 is read as decimal text.
    DecimalBytes(i32),
    /// Debezium's `VariableScaleDecimal`, rendered as `{"scale":2,"value":"BNI="}`: the
    /// scale and the base64 unscaled bytes.
    VariableScaleDecimal,
    /// Binary text is lowercase or uppercase hex (Datastream MySQL BLOB/BINARY).
    Hex,
    /// The text is base64 of UTF-8 text (Tencent DTS sends MySQL `json` as `BYTES`): a
    /// `string` column gets the text itself.
    Base64Text,
    /// An integer is a time of day or a duration in this unit (Debezium `Time`,
    /// `MicroTime`, `NanoTime`): a `string` column gets `[-]HH:MM:SS.fff[fff]`.
    Time(Unit),
}

/// What a format knows about one message's values.
#[derive(Debug, Clone, Default)]
pub struct Hints {
    /// The unit of integers read as timestamps or dates when no column hint says
    /// (otherwise: milliseconds for timestamps, days for dates).
    pub epoch: Option<Unit>,
    /// Binary text is hex, not base64, unless a column hint says.
    pub hex: bool,
    /// Per-column hints, by column name.
    pub columns: HashMap<String, Hint>,
}
