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

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float32Array,
    Float64Array, Int16Array, Int32Array, Int64Array, Int8Array, StringArray, StructArray,
    TimestampMicrosecondArray,
};
use arrow_buffer::{BooleanBuffer, NullBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Fields, SchemaRef, TimeUnit};

use crate::columns::{BytesColumn, ListColumn, MapColumn, Validity};
use crate::error::{Error, Result};
use crate::text::days_from_civil;

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

/// The Spark SQL name of a supported type, as error messages and the DDL spell it.
pub fn type_name(data_type: &DataType) -> String {
    match data_type {
        DataType::Boolean => "boolean".into(),
        DataType::Int8 => "tinyint".into(),
        DataType::Int16 => "smallint".into(),
        DataType::Int32 => "int".into(),
        DataType::Int64 => "bigint".into(),
        DataType::Float32 => "float".into(),
        DataType::Float64 => "double".into(),
        DataType::Decimal128(p, s) => format!("decimal({p},{s})"),
        DataType::Utf8 => "string".into(),
        DataType::Binary => "binary".into(),
        DataType::Date32 => "date".into(),
        DataType::Timestamp(TimeUnit::Microsecond, Some(_)) => "timestamp".into(),
        DataType::Timestamp(TimeUnit::Microsecond, None) => "timestamp_ntz".into(),
        other => other.to_string(),
    }
}

const SUPPORTED: &str = "boolean, tinyint, smallint, int, bigint, float, double, \
decimal(p,s) with 1 <= p <= 38 and 0 <= s <= p, string, binary, date, timestamp \
(timestamp[us, tz=UTC]), timestamp_ntz (timestamp[us])";

fn supported(data_type: &DataType) -> bool {
    match data_type {
        DataType::Boolean
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::Float32
        | DataType::Float64
        | DataType::Utf8
        | DataType::Binary
        | DataType::Date32 => true,
        DataType::Decimal128(p, s) => (1..=38).contains(p) && *s >= 0 && (*s as u8) <= *p,
        DataType::Timestamp(TimeUnit::Microsecond, None) => true,
        DataType::Timestamp(TimeUnit::Microsecond, Some(tz)) => tz.as_ref() == "UTC",
        _ => false,
    }
}

/// One table's columns.
#[derive(Debug)]
pub struct Table {
    /// The name a multi-table stream routes by (`db.table`), empty for a single schema.
    pub name: String,
    /// The struct fields of `before` and `after`.
    pub fields: Fields,
    index: HashMap<String, usize>,
}

impl Table {
    /// The field of image key `key`: `guess` first (images usually list the columns in the
    /// table's order, as the schema does), then by hashing the key.
    #[inline(always)]
    fn find(&self, key: &str, guess: usize) -> Option<usize> {
        match self.fields.get(guess) {
            Some(field) if same_name(field.name(), key) => Some(guess),
            _ => self.index.get(key).copied(),
        }
    }

    fn new(name: String, schema: &SchemaRef) -> Result<Self> {
        let mut index = HashMap::new();
        let label = if name.is_empty() {
            "schema".to_string()
        } else {
            format!("tables[{name:?}]")
        };
        if schema.fields().is_empty() {
            // As Python's `as_schema`: structs of no field hold nothing, surely a mistake
            // (and arrow's StructArray::new cannot give them a length).
            return Err(Error::Schema(format!("{label}: no column")));
        }
        for (i, field) in schema.fields().iter().enumerate() {
            if !supported(field.data_type()) {
                return Err(Error::Schema(format!(
                    "{label}: column '{}' has type {}, which typed mode does not convert to; \
                     supported: {SUPPORTED}",
                    field.name(),
                    field.data_type()
                )));
            }
            if index.insert(field.name().clone(), i).is_some() {
                return Err(Error::Schema(format!(
                    "{label}: column '{}' is named twice",
                    field.name()
                )));
            }
        }
        // Every field nullable: a column missing from an image is null.
        let fields: Fields = schema
            .fields()
            .iter()
            .map(|f| Field::new(f.name(), f.data_type().clone(), true))
            .collect();
        Ok(Self {
            name,
            fields,
            index,
        })
    }
}

/// What typed mode converts to: one schema for every row, or one per table.
#[derive(Debug)]
pub struct TypedSpec {
    tables: Vec<Table>,
    multi: bool,
    by_name: HashMap<String, usize>,
}

impl TypedSpec {
    /// `before`/`after` of every row become structs of `schema`'s columns.
    pub fn single(schema: &SchemaRef) -> Result<Self> {
        Ok(Self {
            tables: vec![Table::new(String::new(), schema)?],
            multi: false,
            by_name: HashMap::new(),
        })
    }

    /// Rows of each named table get that table's structs, in columns of their own.
    pub fn tables(tables: Vec<(String, SchemaRef)>) -> Result<Self> {
        if tables.is_empty() {
            return Err(Error::Schema("tables names no table".into()));
        }
        let mut by_name = HashMap::new();
        let mut out = Vec::new();
        for (i, (name, schema)) in tables.into_iter().enumerate() {
            if name.is_empty() || by_name.insert(name.clone(), i).is_some() {
                return Err(Error::Schema(format!(
                    "tables: bad or repeated name {name:?}"
                )));
            }
            out.push(Table::new(name, &schema)?);
        }
        Ok(Self {
            tables: out,
            multi: true,
            by_name,
        })
    }

    /// True for a multi-table spec.
    pub fn is_multi(&self) -> bool {
        self.multi
    }

    /// The table a row belongs to: the first of `db.schema.table`, `db.table`,
    /// `schema.table` and `table` that names one (`key` is a reused buffer).
    fn route(&self, names: [Option<&str>; 3], key: &mut String) -> Option<usize> {
        if !self.multi {
            return Some(0);
        }
        let [db, schema, table] = names;
        let table = table?;
        let candidates = [
            db.zip(schema).map(|(d, s)| [Some(d), Some(s)]),
            db.map(|d| [Some(d), None]),
            schema.map(|s| [Some(s), None]),
            Some([None, None]),
        ];
        candidates.into_iter().flatten().find_map(|prefix| {
            key.clear();
            for part in prefix.into_iter().flatten() {
                key.push_str(part);
                key.push('.');
            }
            key.push_str(table);
            self.by_name.get(key.as_str()).copied()
        })
    }
}

/// A column of fixed-width values and their validity.
#[derive(Debug, Default)]
struct Prim<T> {
    values: Vec<T>,
    valid: Validity,
}

impl<T: Default + Copy> Prim<T> {
    fn reserve(&mut self, rows: usize) {
        self.values.reserve(rows);
    }

    fn push(&mut self, value: Option<T>) {
        if value.is_none() {
            self.valid.null_at(self.values.len());
        }
        self.values.push(value.unwrap_or_default());
    }

    /// Appends `n` placeholders under null struct rows, whose nulls `finish` adds.
    fn push_masked(&mut self, n: usize) {
        self.values.resize(self.values.len() + n, T::default());
    }

    fn truncate(&mut self, rows: usize) {
        self.values.truncate(rows);
        self.valid.truncate(rows);
    }

    /// The values, and their nulls joined with the struct's (`parent`).
    fn finish(self, parent: Option<&NullBuffer>) -> (ScalarBuffer<T>, Option<NullBuffer>)
    where
        T: arrow_buffer::ArrowNativeType,
    {
        let nulls = self.valid.finish(self.values.len());
        let nulls = NullBuffer::union(nulls.as_ref(), parent);
        (ScalarBuffer::from(self.values), nulls)
    }
}

/// One struct field's builder.
#[derive(Debug)]
enum Column {
    Bool(Prim<bool>),
    I8(Prim<i8>),
    I16(Prim<i16>),
    I32(Prim<i32>),
    I64(Prim<i64>),
    F32(Prim<f32>),
    F64(Prim<f64>),
    Decimal(Prim<i128>, u8, i8),
    Date(Prim<i32>),
    Timestamp(Prim<i64>),
    Utf8(BytesColumn),
    Binary(BytesColumn),
}

impl Column {
    fn new(data_type: &DataType) -> Self {
        match data_type {
            DataType::Boolean => Self::Bool(Prim::default()),
            DataType::Int8 => Self::I8(Prim::default()),
            DataType::Int16 => Self::I16(Prim::default()),
            DataType::Int32 => Self::I32(Prim::default()),
            DataType::Int64 => Self::I64(Prim::default()),
            DataType::Float32 => Self::F32(Prim::default()),
            DataType::Float64 => Self::F64(Prim::default()),
            DataType::Decimal128(p, s) => Self::Decimal(Prim::default(), *p, *s),
            DataType::Date32 => Self::Date(Prim::default()),
            DataType::Timestamp(..) => Self::Timestamp(Prim::default()),
            DataType::Binary => Self::Binary(BytesColumn::new()),
            // Validated by `Table::new`: what is left is utf8.
            _ => Self::Utf8(BytesColumn::new()),
        }
    }

    fn reserve(&mut self, rows: usize) {
        match self {
            Self::Bool(c) => c.reserve(rows),
            Self::I8(c) => c.reserve(rows),
            Self::I16(c) => c.reserve(rows),
            Self::I32(c) => c.reserve(rows),
            Self::I64(c) => c.reserve(rows),
            Self::F32(c) => c.reserve(rows),
            Self::F64(c) => c.reserve(rows),
            Self::Decimal(c, ..) => c.reserve(rows),
            Self::Date(c) => c.reserve(rows),
            Self::Timestamp(c) => c.reserve(rows),
            Self::Utf8(c) | Self::Binary(c) => c.reserve(rows),
        }
    }

    fn push_null(&mut self) {
        match self {
            Self::Bool(c) => c.push(None),
            Self::I8(c) => c.push(None),
            Self::I16(c) => c.push(None),
            Self::I32(c) => c.push(None),
            Self::I64(c) => c.push(None),
            Self::F32(c) => c.push(None),
            Self::F64(c) => c.push(None),
            Self::Decimal(c, ..) => c.push(None),
            Self::Date(c) => c.push(None),
            Self::Timestamp(c) => c.push(None),
            Self::Utf8(c) | Self::Binary(c) => c.push_null(),
        }
    }

    /// Appends `n` rows under null struct rows: placeholders (an empty string for text),
    /// whose nulls are the struct's, joined in as the column finishes: one bitwise AND per
    /// batch instead of a null recorded per field per row.
    fn push_masked(&mut self, n: usize) {
        match self {
            Self::Bool(c) => c.push_masked(n),
            Self::I8(c) => c.push_masked(n),
            Self::I16(c) => c.push_masked(n),
            Self::I32(c) => c.push_masked(n),
            Self::I64(c) => c.push_masked(n),
            Self::F32(c) => c.push_masked(n),
            Self::F64(c) => c.push_masked(n),
            Self::Decimal(c, ..) => c.push_masked(n),
            Self::Date(c) => c.push_masked(n),
            Self::Timestamp(c) => c.push_masked(n),
            Self::Utf8(c) | Self::Binary(c) => c.push_empty(n),
        }
    }

    /// Converts `text` and appends it; `None` when it does not convert (nothing appended).
    /// Inlined into its two callers (`convert_row`, `TypedImages::image_value`): as a call
    /// it cost DTS 2% more instructions.
    #[inline(always)]
    fn push_text(&mut self, text: &str, hint: Option<&Hint>, hints: &Hints) -> Option<()> {
        match self {
            Self::Bool(c) => c.push(Some(parse_bool(text)?)),
            Self::I8(c) => c.push(Some(i8::try_from(parse_int(text)?).ok()?)),
            Self::I16(c) => c.push(Some(i16::try_from(parse_int(text)?).ok()?)),
            Self::I32(c) => c.push(Some(i32::try_from(parse_int(text)?).ok()?)),
            Self::I64(c) => c.push(Some(parse_int(text)?)),
            // Through f64, as the Python engine reads floats.
            Self::F32(c) => c.push(Some(parse_float(text)? as f32)),
            Self::F64(c) => c.push(Some(parse_float(text)?)),
            Self::Decimal(c, p, s) => c.push(Some(parse_decimal_hinted(text, *p, *s, hint)?)),
            Self::Date(c) => c.push(Some(parse_date(text, hint, hints)?)),
            Self::Timestamp(c) => c.push(Some(parse_timestamp(text, hint, hints)?)),
            Self::Utf8(c) => c.push_str(text),
            Self::Binary(c) => {
                let hex = match hint {
                    Some(Hint::Hex) => true,
                    Some(_) => false,
                    None => hints.hex,
                };
                let bytes = if hex {
                    parse_hex(text)?
                } else {
                    parse_base64(text)?
                };
                c.push_bytes(&bytes);
            }
        }
        Some(())
    }

    fn len(&self) -> usize {
        match self {
            Self::Bool(c) => c.values.len(),
            Self::I8(c) => c.values.len(),
            Self::I16(c) => c.values.len(),
            Self::I32(c) => c.values.len(),
            Self::I64(c) => c.values.len(),
            Self::F32(c) => c.values.len(),
            Self::F64(c) => c.values.len(),
            Self::Decimal(c, ..) => c.values.len(),
            Self::Date(c) => c.values.len(),
            Self::Timestamp(c) => c.values.len(),
            Self::Utf8(c) | Self::Binary(c) => c.len(),
        }
    }

    fn truncate(&mut self, rows: usize) {
        match self {
            Self::Bool(c) => c.truncate(rows),
            Self::I8(c) => c.truncate(rows),
            Self::I16(c) => c.truncate(rows),
            Self::I32(c) => c.truncate(rows),
            Self::I64(c) => c.truncate(rows),
            Self::F32(c) => c.truncate(rows),
            Self::F64(c) => c.truncate(rows),
            Self::Decimal(c, ..) => c.truncate(rows),
            Self::Date(c) => c.truncate(rows),
            Self::Timestamp(c) => c.truncate(rows),
            Self::Utf8(c) | Self::Binary(c) => c.truncate(rows),
        }
    }

    /// The finished array; `parent` is the struct's nulls (see [`Column::push_masked`]).
    fn finish(self, data_type: &DataType, parent: Option<&NullBuffer>) -> ArrayRef {
        match self {
            Self::Bool(c) => {
                let nulls = c.valid.finish(c.values.len());
                let nulls = NullBuffer::union(nulls.as_ref(), parent);
                Arc::new(BooleanArray::new(BooleanBuffer::from(c.values), nulls))
            }
            Self::I8(c) => {
                let (v, n) = c.finish(parent);
                Arc::new(Int8Array::new(v, n))
            }
            Self::I16(c) => {
                let (v, n) = c.finish(parent);
                Arc::new(Int16Array::new(v, n))
            }
            Self::I32(c) => {
                let (v, n) = c.finish(parent);
                Arc::new(Int32Array::new(v, n))
            }
            Self::I64(c) => {
                let (v, n) = c.finish(parent);
                Arc::new(Int64Array::new(v, n))
            }
            Self::F32(c) => {
                let (v, n) = c.finish(parent);
                Arc::new(Float32Array::new(v, n))
            }
            Self::F64(c) => {
                let (v, n) = c.finish(parent);
                Arc::new(Float64Array::new(v, n))
            }
            Self::Decimal(c, p, s) => {
                let (v, n) = c.finish(parent);
                let array = Decimal128Array::new(v, n)
                    .with_precision_and_scale(p, s)
                    .expect("validated precision and scale");
                Arc::new(array)
            }
            Self::Date(c) => {
                let (v, n) = c.finish(parent);
                Arc::new(Date32Array::new(v, n))
            }
            Self::Timestamp(c) => {
                let (v, n) = c.finish(parent);
                let array = TimestampMicrosecondArray::new(v, n);
                match data_type {
                    DataType::Timestamp(_, Some(tz)) => Arc::new(array.with_timezone(tz.clone())),
                    _ => Arc::new(array),
                }
            }
            Self::Utf8(c) => {
                let (offsets, data, nulls) = c.finish_utf8().into_parts();
                let nulls = NullBuffer::union(nulls.as_ref(), parent);
                // SAFETY: the parts of a valid `StringArray`, with more nulls.
                Arc::new(unsafe { StringArray::new_unchecked(offsets, data, nulls) })
            }
            Self::Binary(c) => {
                let (offsets, data, nulls) = c.finish_binary().into_parts();
                let nulls = NullBuffer::union(nulls.as_ref(), parent);
                Arc::new(BinaryArray::new(offsets, data, nulls))
            }
        }
    }
}

/// `before` or `after` as a struct column.
#[derive(Debug)]
struct StructColumn {
    columns: Vec<Column>,
    valid: Validity,
    rows: usize,
    /// Null rows at the end not yet given to the children ([`StructColumn::settle`]): a
    /// run of absent images (the `before` of inserts) costs one resize per child.
    masked: usize,
}

impl StructColumn {
    fn new(fields: &Fields) -> Self {
        Self {
            columns: fields.iter().map(|f| Column::new(f.data_type())).collect(),
            valid: Validity::default(),
            rows: 0,
            masked: 0,
        }
    }

    fn push_null(&mut self) {
        self.valid.null_at(self.rows);
        self.rows += 1;
        self.masked += 1;
    }

    /// Brings every child to the struct's rows, before a row's fields are pushed to them.
    #[inline]
    fn settle(&mut self) {
        if self.masked > 0 {
            for column in &mut self.columns {
                column.push_masked(self.masked);
            }
            self.masked = 0;
        }
    }

    fn truncate(&mut self, rows: usize) {
        self.settle();
        if rows < self.rows {
            self.valid.truncate(rows);
            self.rows = rows;
        }
        // Children may be a row ahead of the struct: an image converted as it was read
        // (`TypedImages::image_value`) whose row never ended.
        for column in &mut self.columns {
            if column.len() > rows {
                column.truncate(rows);
            }
        }
    }

    fn finish(mut self, fields: &Fields) -> StructArray {
        self.settle();
        let nulls = self.valid.finish(self.rows);
        let arrays = self
            .columns
            .into_iter()
            .zip(fields.iter())
            .map(|(c, f)| c.finish(f.data_type(), nulls.as_ref()))
            .collect();
        StructArray::new(fields.clone(), arrays, nulls)
    }
}

/// The typed images of one batch, built row by row beside the text ones.
#[derive(Debug)]
pub struct TypedImages {
    spec: Arc<TypedSpec>,
    before: Vec<StructColumn>,
    after: Vec<StructColumn>,
    /// Multi-table: the table each row belongs to.
    table: BytesColumn,
    /// The fields each row's `after` image does not carry ([`AFTER_ABSENT`]).
    after_absent: ListColumn,
    /// The current message's hints (reset as each message starts).
    pub hints: Hints,
    /// The first conversion failure of the current message.
    error: Option<String>,
    slots: Vec<Option<usize>>,
    key: String,
    /// Multi-table: the names of the last row routed and its table. Rows come in runs of
    /// one table, and a run skips building and hashing up to four names a row.
    last_route: Option<([Option<String>; 3], Option<usize>)>,
    /// `before` and `after` as converted while they are read ([`Self::open_image`]).
    direct: [DirectImage; 2],
    /// Images of the open row closed by [`Self::close_image`].
    direct_closed: u8,
    /// Bytes of the keys and values converted directly, for [`Self::converted_bytes`].
    converted: usize,
}

/// The state of one image converted as it is read.
#[derive(Debug, Default)]
struct DirectImage {
    /// The fields that have a value in this row (the first entry of a key wins).
    filled: Vec<bool>,
    /// The field after the last one found: images list their columns in order.
    guess: usize,
    /// The failure of the lowest field (its index), as `convert_row` reports it.
    failure: Option<(usize, (String, String, DataType))>,
    /// Whether the image was there ([`TypedImages::close_image`]'s `present`).
    present: bool,
}

impl TypedImages {
    /// Empty builders for `spec`.
    pub fn new(spec: Arc<TypedSpec>) -> Self {
        let before = spec
            .tables
            .iter()
            .map(|t| StructColumn::new(&t.fields))
            .collect();
        let after = spec
            .tables
            .iter()
            .map(|t| StructColumn::new(&t.fields))
            .collect();
        Self {
            spec,
            before,
            after,
            table: BytesColumn::new(),
            after_absent: ListColumn::default(),
            hints: Hints::default(),
            error: None,
            slots: Vec::new(),
            key: String::new(),
            last_route: None,
            direct: Default::default(),
            direct_closed: 0,
            converted: 0,
        }
    }

    /// [`TypedSpec::route`], remembered for the last row's names.
    fn route(&mut self, names: [Option<&str>; 3]) -> Option<usize> {
        if !self.spec.multi {
            return Some(0);
        }
        if let Some((last, table)) = &self.last_route {
            if last.iter().zip(names).all(|(a, b)| a.as_deref() == b) {
                return *table;
            }
        }
        let table = self.spec.route(names, &mut self.key);
        let (last, routed) = self.last_route.get_or_insert_with(Default::default);
        for (slot, name) in last.iter_mut().zip(names) {
            match name {
                Some(name) => {
                    let text = slot.get_or_insert_with(String::new);
                    text.clear();
                    text.push_str(name);
                }
                None => *slot = None,
            }
        }
        *routed = table;
        table
    }

    /// The spec this converts to.
    pub fn spec(&self) -> &Arc<TypedSpec> {
        &self.spec
    }

    /// Pre-sizes the struct columns for about `rows` rows (see
    /// [`crate::events::EventBuilder::reserve_for_input`]).
    pub fn reserve(&mut self, rows: usize) {
        for image in self.before.iter_mut().chain(self.after.iter_mut()) {
            for column in &mut image.columns {
                column.reserve(rows);
            }
        }
    }

    /// A new message starts: no hints, no failure.
    pub fn start_message(&mut self) {
        self.hints = Hints::default();
        self.error = None;
        self.direct_closed = 0;
    }

    /// True when a format may convert the images as it reads them, without writing their
    /// text maps ([`Self::open_image`], [`Self::image_value`], [`Self::close_image`]): with
    /// one schema every row is that table's, and the text images are never output.
    pub fn direct(&self) -> bool {
        !self.spec.multi
    }

    /// Bytes of keys and values converted without a text map, which an output budget
    /// counts as it counts the text maps' (`EventBuilder::output_bytes`).
    pub fn converted_bytes(&self) -> usize {
        self.converted
    }

    /// Starts the open row's `before` (`after` false) or `after` image, to be converted
    /// value by value (only when [`Self::direct`]).
    pub fn open_image(&mut self, after: bool) {
        let fields = self.spec.tables[0].fields.len();
        let image = &mut self.direct[usize::from(after)];
        image.filled.clear();
        image.filled.resize(fields, false);
        image.guess = 0;
        image.failure = None;
        side(&mut self.before[0], &mut self.after[0], after).settle();
    }

    /// One entry of an open image: converted into its field's column, as `end_row` would
    /// from the text map (a key that is no field is ignored; a later entry of a key too).
    pub fn image_value(&mut self, after: bool, key: &str, value: Option<&str>) {
        let table = &self.spec.tables[0];
        let image = &mut self.direct[usize::from(after)];
        let Some(at) = table.find(key, image.guess) else {
            return;
        };
        image.guess = at + 1;
        if std::mem::replace(&mut image.filled[at], true) {
            return;
        }
        let column = side(&mut self.before[0], &mut self.after[0], after);
        let target = &mut column.columns[at];
        let Some(text) = value else {
            target.push_null();
            return;
        };
        self.converted += key.len() + text.len();
        let field = &table.fields[at];
        if !convert_value(target, field, text, &self.hints)
            && image.failure.as_ref().is_none_or(|f| at < f.0)
        {
            image.failure = Some((at, failure_of(field, text)));
        }
    }

    /// Ends an open image: a null struct when it had no entry (`present` false), else a
    /// row whose fields without an entry are null.
    pub fn close_image(&mut self, after: bool, present: bool) {
        let image = &mut self.direct[usize::from(after)];
        image.present = present;
        let column = side(&mut self.before[0], &mut self.after[0], after);
        if present {
            for (target, filled) in column.columns.iter_mut().zip(&image.filled) {
                if !filled {
                    target.push_null();
                }
            }
            column.rows += 1;
        } else {
            // Entries of an absent image are not expected; drop any, to keep rows even.
            for target in &mut column.columns {
                if target.len() > column.rows {
                    target.truncate(column.rows);
                }
            }
            column.push_null();
        }
        self.direct_closed += 1;
    }

    /// The first conversion failure since [`Self::start_message`].
    pub fn take_error(&mut self) -> Option<String> {
        self.error.take()
    }

    /// Converts the row that just ended: its `before` and `after` text images, and the
    /// table it belongs to by its source names. Returns true when a table claimed the row
    /// in a multi-table spec (its text images are then no longer needed).
    pub fn end_row(
        &mut self,
        names: [Option<&str>; 3],
        before: &MapColumn,
        after: &MapColumn,
    ) -> bool {
        if self.direct_closed > 0 {
            // Both images converted as they were read: report a failure as below, the
            // before image's first.
            debug_assert_eq!(self.direct_closed, 2, "a format closed one image of two");
            self.direct_closed = 0;
            let after = &self.direct[1];
            let fields = &self.spec.tables[0].fields;
            push_absent(&mut self.after_absent, fields, after.present, |at| {
                after.filled[at]
            });
            for (name, image) in [("before", 0), ("after", 1)] {
                let failure = self.direct[image].failure.take();
                if let (Some((_, (column, text, data_type))), None) = (failure, &self.error) {
                    self.error = Some(conversion_error("", name, &column, &text, &data_type));
                }
            }
            return false;
        }
        let claimed = self.route(names);
        let spec = Arc::clone(&self.spec);
        for t in 0..spec.tables.len() {
            if Some(t) != claimed {
                self.before[t].push_null();
                self.after[t].push_null();
            }
        }
        match claimed {
            Some(t) => {
                let info = &spec.tables[t];
                if spec.multi {
                    self.table.push_str(&info.name);
                }
                for (image, map) in [("before", before), ("after", after)] {
                    let column = side(&mut self.before[t], &mut self.after[t], image == "after");
                    let failure = convert_row(info, map, column, &mut self.slots, &self.hints);
                    if image == "after" {
                        // `slots` holds the after image's entries (a key with a null value
                        // is carried: an explicit null).
                        let slots = &self.slots;
                        let present = map.last_row().is_some();
                        push_absent(&mut self.after_absent, &info.fields, present, |at| {
                            slots[at].is_some()
                        });
                    }
                    if let Some((name, text, data_type)) = failure {
                        if self.error.is_none() {
                            let prefix = if spec.multi {
                                format!("{}: ", info.name)
                            } else {
                                String::new()
                            };
                            self.error =
                                Some(conversion_error(&prefix, image, &name, &text, &data_type));
                        }
                    }
                }
                spec.multi
            }
            None => {
                if spec.multi {
                    self.table.push_null();
                }
                self.after_absent.push_null();
                false
            }
        }
    }

    /// Keeps the first `rows` rows.
    pub fn truncate(&mut self, rows: usize) {
        self.direct_closed = 0;
        for column in self.before.iter_mut().chain(self.after.iter_mut()) {
            column.truncate(rows);
        }
        if self.spec.multi && self.table.len() > rows {
            self.table.truncate(rows);
        }
        if self.after_absent.len() > rows {
            self.after_absent.truncate(rows);
        }
    }

    /// The finished columns, in output order: `[before, after, after_absent]` for a single
    /// schema; `[table, before_0, after_0, before_1, …, after_absent]` for tables.
    pub fn finish(self) -> Vec<(Field, ArrayRef)> {
        let mut out = Vec::new();
        if self.spec.multi {
            out.push((
                Field::new("table", DataType::Utf8, true),
                Arc::new(self.table.finish_utf8()) as ArrayRef,
            ));
        }
        for (i, ((b, a), info)) in self
            .before
            .into_iter()
            .zip(self.after)
            .zip(self.spec.tables.iter())
            .enumerate()
        {
            let suffix = if self.spec.multi {
                format!("_{i}")
            } else {
                String::new()
            };
            for (name, column) in [("before", b), ("after", a)] {
                let array = column.finish(&info.fields);
                let field = Field::new(
                    format!("{name}{suffix}"),
                    DataType::Struct(info.fields.clone()),
                    true,
                );
                out.push((field, Arc::new(array) as ArrayRef));
            }
        }
        let absent = self.after_absent.finish();
        let field = Field::new(AFTER_ABSENT, absent.data_type().clone(), true);
        out.push((field, Arc::new(absent) as ArrayRef));
        out
    }
}

/// Appends one row of [`AFTER_ABSENT`]: null without an image (`present` false), else the
/// names of the fields the image does not carry.
#[inline]
fn push_absent(
    list: &mut ListColumn,
    fields: &Fields,
    present: bool,
    carried: impl Fn(usize) -> bool,
) {
    if !present {
        list.push_null();
        return;
    }
    for (at, field) in fields.iter().enumerate() {
        if !carried(at) {
            list.item(field.name());
        }
    }
    list.close();
}

/// Converts the last row of `map` into one row of `column`; on failure, the first column
/// that did not convert, its text and type (the row is still appended, with that field
/// null, so every child stays as long as the struct).
fn convert_row(
    table: &Table,
    map: &MapColumn,
    column: &mut StructColumn,
    slots: &mut Vec<Option<usize>>,
    hints: &Hints,
) -> Option<(String, String, DataType)> {
    let Some(entries) = map.last_row() else {
        column.push_null();
        return None;
    };
    column.settle();
    slots.clear();
    slots.resize(table.fields.len(), None);
    let mut guess = 0;
    for i in entries.clone() {
        if let Some(at) = table.find(map.key_at(i), guess) {
            guess = at + 1;
            // The first entry of a key wins, as in the text map.
            slots[at].get_or_insert(i);
        }
    }
    let nulls = map.null_values(&entries);
    let mut failure = None;
    for (at, field) in table.fields.iter().enumerate() {
        let target = &mut column.columns[at];
        let Some(text) = slots[at].and_then(|i| map.value_in(i, nulls)) else {
            target.push_null();
            continue;
        };
        if !convert_value(target, field, text, hints) && failure.is_none() {
            failure = Some(failure_of(field, text));
        }
    }
    column.rows += 1;
    failure
}

/// Converts `text` into `target`'s next row, a null when it does not convert (then false).
#[inline(always)]
fn convert_value(target: &mut Column, field: &Field, text: &str, hints: &Hints) -> bool {
    let hint = hints.columns.get(field.name());
    if target.push_text(text, hint, hints).is_some() {
        return true;
    }
    target.push_null();
    false
}

/// What a conversion failure reports: the column, its text and its type.
#[cold]
fn failure_of(field: &Field, text: &str) -> (String, String, DataType) {
    (
        field.name().clone(),
        text.to_string(),
        field.data_type().clone(),
    )
}

/// The `before` (`after` false) or `after` struct of a table.
fn side<'a>(
    before: &'a mut StructColumn,
    after: &'a mut StructColumn,
    is_after: bool,
) -> &'a mut StructColumn {
    if is_after {
        after
    } else {
        before
    }
}

/// `a == b` for column names, inline: most are 3 to 16 bytes, compared as two overlapping
/// words, where a call to `memcmp` per image entry was 5% of the typed DTS decode.
#[inline(always)]
fn same_name(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], i: usize| u64::from_le_bytes(s[i..i + 8].try_into().unwrap());
    let half = |s: &[u8], i: usize| u32::from_le_bytes(s[i..i + 4].try_into().unwrap());
    match n {
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        4..=7 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        0..=3 => (0..n).all(|i| a[i] == b[i]),
        _ => a == b,
    }
}

/// The error text of a value that does not convert: `after.price: cannot convert "abc"
/// to decimal(10,2)` (the value quoted as JSON, cut at 64 characters).
pub fn conversion_error(
    prefix: &str,
    image: &str,
    column: &str,
    text: &str,
    data_type: &DataType,
) -> String {
    let shown: String = text.chars().take(64).collect();
    let mut quoted = Vec::new();
    crate::text::json_string_into(&shown, &mut quoted);
    let quoted = String::from_utf8(quoted).unwrap_or_default();
    let more = if shown.len() < text.len() { "…" } else { "" };
    format!(
        "{prefix}{image}.{column}: cannot convert {quoted}{more} to {}",
        type_name(data_type)
    )
}

// ---------------------------------------------------------------------------------------
// Conversions from text. Each returns `None` when the text does not convert.
// ---------------------------------------------------------------------------------------

/// `true`, `false`, `1`, `0`.
fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "true" | "1" => Some(true),
        "false" | "0" => Some(false),
        _ => None,
    }
}

/// Whether `bytes` start with `-`, and what follows an optional `+` or `-`.
#[inline(always)]
fn split_sign(bytes: &[u8]) -> (bool, &[u8]) {
    match bytes.first() {
        Some(b'-') => (true, &bytes[1..]),
        Some(b'+') => (false, &bytes[1..]),
        _ => (false, bytes),
    }
}

/// An optional sign, then ASCII digits; fits an `i64`. One pass over the bytes (this is
/// the commonest conversion of typed mode; `str::parse` after a separate check of the
/// digits took three times the instructions).
fn parse_int(text: &str) -> Option<i64> {
    let (negative, digits) = split_sign(text.as_bytes());
    if digits.is_empty() {
        return None;
    }
    let mut value: u64 = 0;
    for &b in digits {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(digit))?;
    }
    if negative {
        // -2^63 is the one magnitude above i64::MAX that fits.
        (value <= i64::MAX as u64 + 1).then(|| (value as i64).wrapping_neg())
    } else {
        i64::try_from(value).ok()
    }
}

/// A decimal number (`1`, `-1.5`, `.5`, `5.`, `1e-3`), or `NaN`/`Infinity`/`inf` in any
/// case with an optional sign.
fn parse_float(text: &str) -> Option<f64> {
    let body = text.strip_prefix(['+', '-']).unwrap_or(text);
    let lower = body.to_ascii_lowercase();
    if matches!(lower.as_str(), "nan" | "inf" | "infinity") {
        let value = if lower == "nan" {
            f64::NAN
        } else {
            f64::INFINITY
        };
        return Some(if text.starts_with('-') { -value } else { value });
    }
    split_number(text)?;
    text.parse().ok()
}

/// A decimal number's parts: negative, integer digits, fraction digits, exponent.
fn split_number(text: &str) -> Option<(bool, &str, &str, i64)> {
    let negative = text.starts_with('-');
    let body = text.strip_prefix(['+', '-']).unwrap_or(text);
    let b = body.as_bytes();
    let digits_from = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    let int_end = digits_from(0);
    let (frac, end) = if b.get(int_end) == Some(&b'.') {
        let end = digits_from(int_end + 1);
        (&body[int_end + 1..end], end)
    } else {
        ("", int_end)
    };
    let int = &body[..int_end];
    if int.len() + frac.len() == 0 {
        return None;
    }
    let exponent = match b.get(end) {
        None => 0,
        Some(b'e' | b'E') => {
            let exp = &body[end + 1..];
            let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if digits.is_empty() || digits.len() > 6 || !digits.bytes().all(|b| b.is_ascii_digit())
            {
                return None;
            }
            exp.parse::<i64>().ok()?
        }
        Some(_) => return None,
    };
    Some((negative, int, frac, exponent))
}

/// Decimal text as the unscaled value at scale `s`, exactly: fraction digits beyond the
/// scale must be zeros, and at most `p` digits may remain. Reads the digits in place (an
/// earlier version joined them into a `String` per value, allocating).
fn parse_decimal(text: &str, p: u8, s: i8) -> Option<i128> {
    if let Some(plain) = parse_plain_decimal(text, p, s) {
        return plain;
    }
    let (negative, int, frac, exponent) = split_number(text)?;
    let shift = s as i64 - frac.len() as i64 + exponent;
    // The digits of int and frac as one sequence.
    let (int, frac) = (int.as_bytes(), frac.as_bytes());
    let total = int.len() + frac.len();
    let digit = |i: usize| {
        let b = if i < int.len() {
            int[i]
        } else {
            frac[i - int.len()]
        };
        b - b'0'
    };
    // Digits below the scale are cut, and must be zeros.
    let keep = if shift >= 0 {
        total
    } else {
        let keep = total.saturating_sub(usize::try_from(-shift).unwrap_or(usize::MAX));
        if (keep..total).any(|i| digit(i) != 0) {
            return None;
        }
        keep
    };
    let Some(first) = (0..keep).find(|&i| digit(i) != 0) else {
        return Some(0);
    };
    let zeros = usize::try_from(shift).unwrap_or(0);
    if (keep - first).saturating_add(zeros) > p as usize {
        return None;
    }
    // At most p <= 38 digits: within i128.
    let mut value: i128 = 0;
    for i in first..keep {
        value = value * 10 + i128::from(digit(i));
    }
    for _ in 0..zeros {
        value *= 10;
    }
    Some(if negative { -value } else { value })
}

/// 10^0 to 10^38.
const POW10: [i128; 39] = {
    let mut table = [1i128; 39];
    let mut i = 1;
    while i < 39 {
        table[i] = table[i - 1] * 10;
        i += 1;
    }
    table
};

/// The value of `body`'s digits and the index of its one point, if it is only digits and
/// at most one point; the caller keeps the digits within `T`.
#[inline(always)]
fn plain_digits<T>(body: &[u8]) -> Option<(T, Option<usize>)>
where
    T: Copy + From<u8> + std::ops::Mul<Output = T> + std::ops::Add<Output = T>,
{
    let mut value = T::from(0);
    let mut point = None;
    for (i, &b) in body.iter().enumerate() {
        let digit = b.wrapping_sub(b'0');
        if digit <= 9 {
            value = value * T::from(10) + T::from(digit);
        } else if b == b'.' && point.is_none() {
            point = Some(i);
        } else {
            return None;
        }
    }
    Some((value, point))
}

/// [`parse_decimal`] of the common text, in one pass: a sign, at most 38 digits and
/// points, no exponent. `None` for any other text, which takes the general path.
#[inline]
fn parse_plain_decimal(text: &str, p: u8, s: i8) -> Option<Option<i128>> {
    let (negative, body) = split_sign(text.as_bytes());
    // Up to 19 digits fit a u64, whose arithmetic is a few times cheaper than i128's.
    let (value, point) = match body.len() {
        0..=19 => plain_digits::<u64>(body).map(|(v, point)| (i128::from(v), point))?,
        20..=38 => plain_digits::<i128>(body)?,
        _ => return None,
    };
    if body.len() == usize::from(point.is_some()) {
        return Some(None); // no digit
    }
    let fraction = point.map_or(0, |i| body.len() - i - 1);
    let shift = i64::from(s) - fraction as i64;
    let p = usize::from(p).min(38);
    let value = if shift >= 0 {
        let shift = shift as usize;
        if value == 0 {
            return Some(Some(0));
        }
        if shift > p || value >= POW10[p - shift] {
            return Some(None);
        }
        value * POW10[shift]
    } else {
        // The digits cut below the scale must be zeros: all of them when more are cut
        // than there are.
        let cut = (-shift) as usize;
        if cut > 38 {
            return Some((value == 0).then_some(0));
        }
        if value % POW10[cut] != 0 {
            return Some(None);
        }
        value / POW10[cut]
    };
    if value >= POW10[p] {
        return Some(None);
    }
    Some(Some(if negative { -value } else { value }))
}

/// A decimal, from decimal text or, with [`Hint::DecimalBytes`], from base64 of the
/// unscaled big-endian two's complement value (text that is not base64 is read as text).
fn parse_decimal_hinted(text: &str, p: u8, s: i8, hint: Option<&Hint>) -> Option<i128> {
    match hint {
        Some(&Hint::DecimalBytes(scale)) => match parse_base64(text) {
            Some(bytes) => decimal_from_bytes(&bytes, scale, p, s),
            None => parse_decimal(text, p, s),
        },
        Some(Hint::VariableScaleDecimal) => {
            let (scale, bytes) = parse_variable_scale(text)?;
            decimal_from_bytes(&bytes, scale, p, s)
        }
        _ => parse_decimal(text, p, s),
    }
}

/// `{"scale":N,"value":"base64"}` (either order, compact JSON as generic mode renders a
/// Connect struct): the scale and the bytes.
fn parse_variable_scale(text: &str) -> Option<(i32, Vec<u8>)> {
    let body = text.strip_prefix('{')?.strip_suffix('}')?;
    let (first, second) = body.split_once(',')?;
    let mut scale = None;
    let mut value = None;
    for member in [first, second] {
        let (key, v) = member.split_once(':')?;
        match key {
            "\"scale\"" if scale.is_none() => {
                scale = Some(i32::try_from(parse_int(v)?).ok()?);
            }
            "\"value\"" if value.is_none() => {
                let inner = v.strip_prefix('"')?.strip_suffix('"')?;
                value = Some(parse_base64(inner)?);
            }
            _ => return None,
        }
    }
    Some((scale?, value?))
}

/// A big-endian two's complement unscaled value at `scale`, as a `decimal(p,s)`, exactly.
fn decimal_from_bytes(bytes: &[u8], scale: i32, p: u8, s: i8) -> Option<i128> {
    if bytes.is_empty() || bytes.len() > 16 {
        return None;
    }
    let mut unscaled: i128 = if bytes[0] & 0x80 != 0 { -1 } else { 0 };
    for &b in bytes {
        unscaled = (unscaled << 8) | b as i128;
    }
    let value = rescale(unscaled, scale, s as i32)?;
    (value.unsigned_abs() < 10u128.pow(p as u32)).then_some(value)
}

/// `unscaled` at scale `from` as an unscaled value at scale `to`, exactly.
fn rescale(unscaled: i128, from: i32, to: i32) -> Option<i128> {
    let (from, to) = (i64::from(from), i64::from(to));
    if to >= from {
        let factor = 10i128.checked_pow(u32::try_from(to - from).ok()?)?;
        unscaled.checked_mul(factor)
    } else {
        let power = u32::try_from(from - to).ok()?;
        let Some(factor) = 10i128.checked_pow(power) else {
            return (unscaled == 0).then_some(0);
        };
        (unscaled % factor == 0).then_some(unscaled / factor)
    }
}

/// Standard padded base64.
fn parse_base64(text: &str) -> Option<Vec<u8>> {
    base64_simd::STANDARD.decode_to_vec(text.as_bytes()).ok()
}

/// Hex digits, two per byte, either case.
fn parse_hex(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    if bytes.len() % 2 != 0 {
        return None;
    }
    let nibble = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    };
    bytes
        .chunks_exact(2)
        .map(|pair| Some(nibble(pair[0])? << 4 | nibble(pair[1])?))
        .collect()
}

const MICROS_PER_DAY: i64 = 86_400_000_000;

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// ISO-8601 text: `YYYY-MM-DD`, then optionally `T` or a space and `HH:MM[:SS[.f…]]`
/// (1 to 9 fraction digits, cut to microseconds), then optionally (after an optional
/// space) `Z` or an offset `±HH`, `±HHMM`, `±HH:MM`. Without an offset the text is UTC.
/// Returns microseconds since the epoch and whether a time of day was given.
fn parse_iso(text: &str) -> Option<(i64, bool)> {
    let b = text.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(range)?;
        if part.iter().all(|c| c.is_ascii_digit()) {
            Some(part.iter().fold(0, |n, &c| n * 10 + (c - b'0') as i64))
        } else {
            None
        }
    };
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let mut micros = days_from_civil(year, month, day) * MICROS_PER_DAY;
    let mut at = 10;
    let mut has_time = false;
    if matches!(b.get(at), Some(b'T' | b' ')) && b.get(at + 3) == Some(&b':') {
        let (hour, minute) = (num(at + 1..at + 3)?, num(at + 4..at + 6)?);
        at += 6;
        let mut second = 0;
        let mut fraction = 0;
        if b.get(at) == Some(&b':') {
            second = num(at + 1..at + 3)?;
            at += 3;
            if b.get(at) == Some(&b'.') {
                let start = at + 1;
                let mut end = start;
                while end < b.len() && b[end].is_ascii_digit() {
                    end += 1;
                }
                let digits = end - start;
                if digits == 0 || digits > 9 {
                    return None;
                }
                let nanos = num(start..end)? * 10i64.pow(9 - digits as u32);
                fraction = nanos / 1000;
                at = end;
            }
        }
        if hour > 23 || minute > 59 || second > 59 {
            return None;
        }
        micros += ((hour * 60 + minute) * 60 + second) * 1_000_000 + fraction;
        has_time = true;
    }
    let rest = &b[at..];
    let rest = rest.strip_prefix(b" ").unwrap_or(rest);
    let offset_minutes = match rest {
        [] if at == b.len() => 0,
        [] => return None,
        [b'Z'] => 0,
        [sign @ (b'+' | b'-'), tail @ ..] => {
            let digits: Vec<u8> = match tail {
                [h1, h2] => vec![*h1, *h2, b'0', b'0'],
                [h1, h2, m1, m2] => vec![*h1, *h2, *m1, *m2],
                [h1, h2, b':', m1, m2] => vec![*h1, *h2, *m1, *m2],
                _ => return None,
            };
            if !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let v = |i: usize| (digits[i] - b'0') as i64;
            let (hours, minutes) = (v(0) * 10 + v(1), v(2) * 10 + v(3));
            if hours > 23 || minutes > 59 {
                return None;
            }
            let total = hours * 60 + minutes;
            if *sign == b'-' {
                -total
            } else {
                total
            }
        }
        _ => return None,
    };
    Some((micros - offset_minutes * 60_000_000, has_time))
}

/// An integer text in `unit` as microseconds (nanoseconds floored).
fn epoch_micros(value: i64, unit: Unit) -> Option<i64> {
    match unit {
        Unit::Millis => value.checked_mul(1000),
        Unit::Micros => Some(value),
        Unit::Nanos => Some(value.div_euclid(1000)),
    }
}

/// A timestamp (µs since the epoch, UTC): an integer is epoch time in the column hint's
/// unit, else the message's, else milliseconds; other text is ISO-8601 ([`parse_iso`]).
fn parse_timestamp(text: &str, hint: Option<&Hint>, hints: &Hints) -> Option<i64> {
    if let Some(value) = parse_int(text) {
        let unit = match hint {
            Some(Hint::Epoch(unit)) => *unit,
            _ => hints.epoch.unwrap_or(Unit::Millis),
        };
        return epoch_micros(value, unit);
    }
    parse_iso(text).map(|(micros, _)| micros)
}

/// A date (days since the epoch): an integer is days, or epoch time in the column's or
/// the message's unit when one is given; other text is ISO-8601. Either way the instant
/// must fall on a UTC midnight: a time of day is an error, not cut.
fn parse_date(text: &str, hint: Option<&Hint>, hints: &Hints) -> Option<i32> {
    let micros = if let Some(value) = parse_int(text) {
        let unit = match hint {
            Some(Hint::Epoch(unit)) => Some(*unit),
            Some(Hint::Days) => None,
            _ => hints.epoch,
        };
        match unit {
            None => value.checked_mul(MICROS_PER_DAY)?,
            Some(unit) => epoch_micros(value, unit)?,
        }
    } else {
        parse_iso(text)?.0
    };
    if micros.rem_euclid(MICROS_PER_DAY) != 0 {
        return None;
    }
    i32::try_from(micros.div_euclid(MICROS_PER_DAY)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(text: &str) -> Option<i64> {
        parse_timestamp(text, None, &Hints::default())
    }

    #[test]
    fn integers_are_range_checked() {
        assert_eq!(parse_int("-42"), Some(-42));
        assert_eq!(parse_int("+7"), Some(7));
        assert_eq!(parse_int("9223372036854775808"), None);
        assert_eq!(parse_int("1.0"), None);
        assert_eq!(parse_int(" 1"), None);
        assert_eq!(parse_int(""), None);
        assert!(i8::try_from(parse_int("128").unwrap()).is_err());
    }

    /// The string-based readers these replaced (`str::parse`, digits joined into a
    /// `String`), kept as the reference the in-place ones must agree with.
    mod reference {
        pub fn parse_int(text: &str) -> Option<i64> {
            let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            text.parse().ok()
        }

        fn split_number(text: &str) -> Option<(bool, &str, &str, i64)> {
            let negative = text.starts_with('-');
            let body = text.strip_prefix(['+', '-']).unwrap_or(text);
            let (mantissa, exponent) = match body.find(['e', 'E']) {
                Some(at) => {
                    let exp = &body[at + 1..];
                    let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
                    if digits.is_empty()
                        || digits.len() > 6
                        || !digits.bytes().all(|b| b.is_ascii_digit())
                    {
                        return None;
                    }
                    (&body[..at], exp.parse::<i64>().ok()?)
                }
                None => (body, 0),
            };
            let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
            let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
            if int.len() + frac.len() == 0 || !all_digits(int) || !all_digits(frac) {
                return None;
            }
            Some((negative, int, frac, exponent))
        }

        pub fn parse_decimal(text: &str, p: u8, s: i8) -> Option<i128> {
            let (negative, int, frac, exponent) = split_number(text)?;
            let shift = s as i64 - frac.len() as i64 + exponent;
            let mut digits: String = [int, frac].concat();
            if shift >= 0 {
                if digits.bytes().all(|b| b == b'0') {
                    return Some(0);
                }
                digits.extend(std::iter::repeat_n('0', shift as usize));
            } else {
                let cut = (-shift) as usize;
                let keep = digits.len().saturating_sub(cut);
                if !digits.as_bytes()[keep..].iter().all(|&b| b == b'0') {
                    return None;
                }
                digits.truncate(keep);
            }
            let significant = digits.trim_start_matches('0');
            if significant.len() > p as usize {
                return None;
            }
            let value: i128 = if significant.is_empty() {
                0
            } else {
                significant.parse().ok()?
            };
            Some(if negative { -value } else { value })
        }
    }

    /// Every text built from a grammar of signs, digits, dots and exponents (and some
    /// that break it) reads the same as with the reference readers.
    #[test]
    fn in_place_number_readers_match_the_reference() {
        let signs = ["", "-", "+", "+-", " "];
        let ints = [
            "",
            "0",
            "00",
            "7",
            "0012",
            "123456789",
            "9223372036854775807",
            "9223372036854775808",
            "18446744073709551616",
            "99999999999999999999999999999999999999",
            "100000000000000000000000000000000000000",
            "1x",
        ];
        let fracs = [
            "",
            ".",
            ".0",
            ".5",
            ".050",
            ".123456789",
            ".00000000000000000000001",
            ".5.5",
        ];
        let exps = [
            "", "e", "e0", "E+2", "e-3", "e+", "e999999", "e-999999", "e1234567", "e2x",
        ];
        let mut texts = Vec::new();
        for sign in signs {
            for int in ints {
                for frac in fracs {
                    for exp in exps {
                        texts.push(format!("{sign}{int}{frac}{exp}"));
                    }
                }
            }
        }
        texts.extend(["", "-", ".", "e5", "١٢", "NaN", "--1", "1 "].map(String::from));
        let mut checked = 0;
        for text in &texts {
            assert_eq!(parse_int(text), reference::parse_int(text), "{text:?}");
            for (p, s) in [
                (10, 2),
                (38, 0),
                (38, 10),
                (20, 0),
                (5, 5),
                (1, 0),
                (18, -2),
            ] {
                assert_eq!(
                    parse_decimal(text, p, s),
                    reference::parse_decimal(text, p, s),
                    "{text:?} as decimal({p},{s})"
                );
                checked += 1;
            }
        }
        assert!(checked > 20_000, "{checked}");
    }

    #[test]
    fn names_compare_as_strings_do() {
        let names: Vec<String> = (0..=20)
            .map(|n| "abcdefghijklmnopqrstu"[..n].to_string())
            .collect();
        for a in &names {
            for b in &names {
                assert_eq!(same_name(a, b), a == b, "{a:?} {b:?}");
                // The same length, one byte different, anywhere.
                for i in 0..b.len() {
                    let mut c = b.clone().into_bytes();
                    c[i] = b'_';
                    let c = String::from_utf8(c).unwrap();
                    assert_eq!(same_name(a, &c), *a == c, "{a:?} {c:?}");
                }
            }
        }
    }

    #[test]
    fn floats_and_booleans() {
        assert_eq!(parse_float("1.100000"), Some(1.1));
        assert_eq!(parse_float("-.5e1"), Some(-5.0));
        assert_eq!(parse_float("-Infinity"), Some(f64::NEG_INFINITY));
        assert!(parse_float("NaN").unwrap().is_nan());
        assert_eq!(parse_float("1_0"), None);
        assert_eq!(parse_float("abc"), None);
        assert_eq!(parse_bool("1"), Some(true));
        assert_eq!(parse_bool("false"), Some(false));
        assert_eq!(parse_bool("yes"), None);
    }

    #[test]
    fn decimals_are_exact() {
        assert_eq!(parse_decimal("12.5", 10, 2), Some(1250));
        assert_eq!(parse_decimal("-0.05", 10, 2), Some(-5));
        assert_eq!(parse_decimal("12.500", 10, 2), Some(1250));
        assert_eq!(parse_decimal("12.505", 10, 2), None);
        assert_eq!(parse_decimal("1.5E+2", 10, 2), Some(15000));
        assert_eq!(parse_decimal("123456789", 10, 2), None);
        assert_eq!(parse_decimal("12345678", 10, 2), Some(1_234_567_800));
        assert_eq!(
            parse_decimal("18446744073709551615", 20, 0),
            Some(18446744073709551615)
        );
        assert_eq!(parse_decimal("abc", 10, 2), None);
        // 1234.5 with scale 1 is 12345 = 0x3039.
        let hint = Hint::DecimalBytes(1);
        assert_eq!(
            parse_decimal_hinted("MDk=", 10, 2, Some(&hint)),
            Some(123450)
        );
        // -1 as one byte 0xff.
        assert_eq!(parse_decimal_hinted("/w==", 10, 1, Some(&hint)), Some(-1));
        assert_eq!(parse_decimal_hinted("MDk=", 10, 0, Some(&hint)), None);
        let variable = Hint::VariableScaleDecimal;
        let text = r#"{"scale":1,"value":"MDk="}"#;
        assert_eq!(
            parse_decimal_hinted(text, 10, 2, Some(&variable)),
            Some(123450)
        );
        let text = r#"{"value":"MDk=","scale":3}"#;
        assert_eq!(
            parse_decimal_hinted(text, 10, 3, Some(&variable)),
            Some(12345)
        );
        assert_eq!(parse_decimal_hinted("12.5", 10, 2, Some(&variable)), None);
    }

    #[test]
    fn binary_text() {
        assert_eq!(parse_base64("3q2+7w=="), Some(vec![0xde, 0xad, 0xbe, 0xef]));
        assert_eq!(parse_base64("3q2+7w"), None);
        assert_eq!(parse_hex("DEadbeef"), Some(vec![0xde, 0xad, 0xbe, 0xef]));
        assert_eq!(parse_hex("abc"), None);
    }

    #[test]
    fn timestamps() {
        let t = 1_621_236_162_000_000;
        assert_eq!(ts("2021-05-17 07:22:42 +00:00"), Some(t));
        assert_eq!(ts("2021-05-17T07:22:42Z"), Some(t));
        assert_eq!(ts("2021-05-17T15:22:42+08:00"), Some(t));
        assert_eq!(ts("2021-05-17T15:22:42+0800"), Some(t));
        assert_eq!(ts("2021-05-17 07:22:42"), Some(t));
        assert_eq!(ts("1621236162000"), Some(t));
        assert_eq!(
            ts("2024-05-01T10:00:00.123456789Z"),
            Some(1_714_557_600_123_456)
        );
        assert_eq!(ts("1969-12-31T23:59:59.5Z"), Some(-500_000));
        assert_eq!(ts("2021-02-29 00:00:00"), None);
        assert_eq!(ts("2021-05-17 24:00:00"), None);
        assert_eq!(ts("yesterday"), None);
        let micros = Hints {
            epoch: Some(Unit::Micros),
            ..Hints::default()
        };
        assert_eq!(parse_timestamp("5", None, &micros), Some(5));
        let nanos = Hint::Epoch(Unit::Nanos);
        assert_eq!(parse_timestamp("-1", Some(&nanos), &micros), Some(-1));
    }

    #[test]
    fn dates() {
        let none = Hints::default();
        assert_eq!(parse_date("2024-05-01", None, &none), Some(19844));
        assert_eq!(parse_date("2024-05-01T00:00:00Z", None, &none), Some(19844));
        assert_eq!(parse_date("2024-05-01T00:00:01Z", None, &none), None);
        assert_eq!(parse_date("19844", None, &none), Some(19844));
        let ms = Hints {
            epoch: Some(Unit::Millis),
            ..Hints::default()
        };
        assert_eq!(parse_date("1714521600000", None, &ms), Some(19844));
        assert_eq!(parse_date("1714521600001", None, &ms), None);
        assert_eq!(parse_date("19844", Some(&Hint::Days), &ms), Some(19844));
    }

    #[test]
    fn schemas_with_unsupported_types_are_refused() {
        use arrow_schema::Schema;
        let schema = Arc::new(Schema::new(vec![Field::new("u", DataType::UInt64, true)]));
        let error = TypedSpec::single(&schema).unwrap_err().to_string();
        assert!(error.contains("column 'u' has type UInt64"), "{error}");
    }

    /// Found by the typed fuzz target: a schema of no column reached arrow's
    /// `StructArray::new`, which panics on structs without fields.
    #[test]
    fn schemas_without_columns_are_refused() {
        use arrow_schema::Schema;
        let empty = Arc::new(Schema::empty());
        let error = TypedSpec::single(&empty).unwrap_err().to_string();
        assert!(error.contains("schema: no column"), "{error}");
        let error = TypedSpec::tables(vec![("shop.orders".into(), empty)]).unwrap_err();
        assert!(error.to_string().contains("no column"), "{error}");
    }

    /// Through the decoder: a message whose value does not convert is one error row and
    /// leaves no typed row behind; rows are routed to their table's structs.
    #[test]
    fn decoder_converts_routes_and_takes_back_failed_messages() {
        use crate::decoder::{Decoder, Mode};
        use crate::formats::Options;
        use arrow_array::{Array, BinaryArray, StringArray};
        use arrow_schema::Schema;

        let schema = |fields: Vec<Field>| Arc::new(Schema::new(fields));
        let orders = schema(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("price", DataType::Decimal128(10, 2), true),
        ]);
        let users = schema(vec![Field::new("uid", DataType::Int32, true)]);
        let spec = TypedSpec::tables(vec![("d.t".into(), orders), ("u".into(), users)]).unwrap();
        let options = Options {
            typed: Some(Arc::new(spec)),
            ..Options::default()
        };
        let mut decoder =
            Decoder::with_options("debezium-json", Mode::Permissive, &options).unwrap();
        let messages: Vec<Option<&[u8]>> = vec![
            Some(br#"{"op":"c","after":{"id":1,"price":"9.99"},"source":{"db":"d","table":"t"}}"#),
            Some(br#"{"op":"c","after":{"id":2,"price":"x"},"source":{"db":"d","table":"t"}}"#),
            Some(br#"{"op":"c","after":{"uid":7},"source":{"db":"d","table":"u"}}"#),
            Some(br#"{"op":"c","after":{"z":1},"source":{"db":"d","table":"z"}}"#),
            None,
        ];
        let values: arrow_array::ArrayRef = Arc::new(BinaryArray::from(messages));
        let batch = decoder.decode(&values, None, true).unwrap().batch;
        let names: Vec<_> = batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(
            names[19..],
            [
                "table",
                "before_0",
                "after_0",
                "before_1",
                "after_1",
                "after_absent"
            ]
        );
        let column = |name: &str| batch.column_by_name(name).unwrap().clone();
        let table = column("table");
        let table = table.as_any().downcast_ref::<StringArray>().unwrap();
        let tables: Vec<_> = table.iter().collect();
        assert_eq!(tables, [Some("d.t"), None, Some("u"), None, None]);
        let error = column("error");
        let error = error.as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(
            error.value(1),
            "d.t: after.price: cannot convert \"x\" to decimal(10,2)"
        );
        let after = column("after_0");
        let after = after.as_any().downcast_ref::<StructArray>().unwrap();
        assert_eq!(after.len(), 5);
        assert_eq!(after.null_count(), 4);
        let price = after
            .column(1)
            .as_any()
            .downcast_ref::<Decimal128Array>()
            .unwrap();
        assert_eq!(price.value(0), 999);
        let after_1 = column("after_1");
        assert_eq!(after_1.null_count(), 4);
        // The generic map keeps only the row no table claims.
        let generic = column("after");
        assert!(generic.is_null(0) && generic.is_null(2) && generic.is_valid(3));
    }

    #[test]
    fn errors_name_the_column() {
        let message = conversion_error("", "after", "price", "abc", &DataType::Decimal128(10, 2));
        assert_eq!(
            message,
            "after.price: cannot convert \"abc\" to decimal(10,2)"
        );
    }
}
