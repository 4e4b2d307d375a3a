//! The builders of `before`/`after` struct columns: one per field type ([`Column`]), and
//! the struct of them ([`StructColumn`]), whose null rows cost one mask per batch.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float32Array, Float64Array,
    Int16Array, Int32Array, Int64Array, Int8Array, StringArray, StructArray,
    TimestampMicrosecondArray,
};
use arrow_buffer::{BooleanBuffer, NullBuffer, ScalarBuffer};
use arrow_schema::{DataType, Fields};

use crate::columns::{BytesColumn, Validity};

use super::parse::{
    hinted_text, parse_base64, parse_bool, parse_date, parse_decimal_hinted, parse_float,
    parse_hex, parse_int, parse_timestamp,
};
use super::{Hint, Hints};

/// A column of fixed-width values and their validity.
#[derive(Debug, Default)]
pub(super) struct Prim<T> {
    values: Vec<T>,
    valid: Validity,
}

impl<T: Default + Copy> Prim<T> {
    pub(super) fn reserve(&mut self, rows: usize) {
        self.values.reserve(rows);
    }

    pub(super) fn push(&mut self, value: Option<T>) {
        if value.is_none() {
            self.valid.null_at(self.values.len());
        }
        self.values.push(value.unwrap_or_default());
    }

    /// Appends `n` placeholders under null struct rows, whose nulls `finish` adds.
    pub(super) fn push_masked(&mut self, n: usize) {
        self.values.resize(self.values.len() + n, T::default());
    }

    pub(super) fn truncate(&mut self, rows: usize) {
        self.values.truncate(rows);
        self.valid.truncate(rows);
    }

    /// The values, and their nulls joined with the struct's (`parent`).
    pub(super) fn finish(self, parent: Option<&NullBuffer>) -> (ScalarBuffer<T>, Option<NullBuffer>)
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
pub(super) enum Column {
    Bool(Prim<bool>),
    I8(Prim<i8>),
    I16(Prim<i16>),
    I32(Prim<i32>),
    I64(Prim<i64>),
    F32(Prim<f32>),
    F64(Prim<f64>),
    Decimal(Prim<i128>, u8, i8),
    Date(Prim<i32>),
    /// A `timestamp` (false) or `timestamp_ntz` (true) column.
    Timestamp(Prim<i64>, bool),
    Utf8(BytesColumn),
    Binary(BytesColumn),
}

impl Column {
    pub(super) fn new(data_type: &DataType) -> Self {
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
            DataType::Timestamp(_, zone) => Self::Timestamp(Prim::default(), zone.is_none()),
            DataType::Binary => Self::Binary(BytesColumn::new()),
            // Validated by `Table::new`: what is left is utf8.
            _ => Self::Utf8(BytesColumn::new()),
        }
    }

    pub(super) fn reserve(&mut self, rows: usize) {
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
            Self::Timestamp(c, _) => c.reserve(rows),
            Self::Utf8(c) | Self::Binary(c) => c.reserve(rows),
        }
    }

    pub(super) fn push_null(&mut self) {
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
            Self::Timestamp(c, _) => c.push(None),
            Self::Utf8(c) | Self::Binary(c) => c.push_null(),
        }
    }

    /// Appends `n` rows under null struct rows: placeholders (an empty string for text),
    /// whose nulls are the struct's, joined in as the column finishes: one bitwise AND per
    /// batch instead of a null recorded per field per row.
    pub(super) fn push_masked(&mut self, n: usize) {
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
            Self::Timestamp(c, _) => c.push_masked(n),
            Self::Utf8(c) | Self::Binary(c) => c.push_empty(n),
        }
    }

    /// Converts `text` and appends it; `None` when it does not convert (nothing appended).
    /// Inlined into its two callers (`convert_row`, `TypedImages::image_value`): as a call
    /// it cost DTS 2% more instructions.
    #[inline(always)]
    pub(super) fn push_text(
        &mut self,
        text: &str,
        hint: Option<&Hint>,
        hints: &Hints,
        zone: Option<&jiff::tz::TimeZone>,
    ) -> Option<()> {
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
            Self::Date(c) => c.push(Some(parse_date(text, hint, hints, zone)?)),
            Self::Timestamp(c, ntz) => {
                c.push(Some(parse_timestamp(text, hint, hints, zone, *ntz)?))
            }
            Self::Utf8(c) => match hint {
                None => c.push_str(text),
                // A string column of a hinted value: its converted text (docs/typed.md).
                Some(hint) => {
                    let mut converted = Vec::new();
                    if hinted_text(text, hint, &mut converted)? {
                        c.push_bytes(&converted);
                    } else {
                        c.push_str(text);
                    }
                }
            },
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

    pub(super) fn len(&self) -> usize {
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
            Self::Timestamp(c, _) => c.values.len(),
            Self::Utf8(c) | Self::Binary(c) => c.len(),
        }
    }

    pub(super) fn truncate(&mut self, rows: usize) {
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
            Self::Timestamp(c, _) => c.truncate(rows),
            Self::Utf8(c) | Self::Binary(c) => c.truncate(rows),
        }
    }

    /// The finished array; `parent` is the struct's nulls (see [`Column::push_masked`]).
    pub(super) fn finish(self, data_type: &DataType, parent: Option<&NullBuffer>) -> ArrayRef {
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
            Self::Timestamp(c, _) => {
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
pub(super) struct StructColumn {
    pub(super) columns: Vec<Column>,
    pub(super) valid: Validity,
    pub(super) rows: usize,
    /// Null rows at the end not yet given to the children ([`StructColumn::settle`]): a
    /// run of absent images (the `before` of inserts) costs one resize per child.
    pub(super) masked: usize,
}

impl StructColumn {
    pub(super) fn new(fields: &Fields) -> Self {
        Self {
            columns: fields.iter().map(|f| Column::new(f.data_type())).collect(),
            valid: Validity::default(),
            rows: 0,
            masked: 0,
        }
    }

    pub(super) fn push_null(&mut self) {
        self.valid.null_at(self.rows);
        self.rows += 1;
        self.masked += 1;
    }

    /// Brings every child to the struct's rows, before a row's fields are pushed to them.
    #[inline]
    pub(super) fn settle(&mut self) {
        if self.masked > 0 {
            for column in &mut self.columns {
                column.push_masked(self.masked);
            }
            self.masked = 0;
        }
    }

    pub(super) fn truncate(&mut self, rows: usize) {
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

    pub(super) fn finish(mut self, fields: &Fields) -> StructArray {
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
