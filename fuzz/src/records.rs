//! `datahub-tuple` decodes record batches, not bytes: a fuzz input is read as a recipe for
//! one. The first bytes choose the columns (a name from the meta columns and a few data
//! names, so required columns are often there and sometimes twice; an Arrow type from the
//! types the format reads and a few it refuses) and the number of rows; the rest are the
//! cells, strings often from the values the meta columns mean (`I`, `Y`, `-1` …).

use std::sync::Arc;

use arrow_array::types::{Decimal128Type, Decimal256Type};
use arrow_array::*;
use arrow_schema::{DataType, Field, Schema, TimeUnit};

use _native::decoder::{Decoder, Mode};

const NAMES: &[&str] = &[
    "_sequence_id_",
    "_log_file_name_offset_",
    "_operation_type_",
    "_execute_time_",
    "_excute_time_",
    "_before_image_",
    "_after_image_",
    "_source_table_",
    "id",
    "name",
    "v",
    "",
];

const WORDS: &[&str] = &[
    "I",
    "U",
    "D",
    "Y",
    "N",
    "",
    "-1",
    "0",
    "12",
    "1649991726000",
    "shop.users",
    "a.b.c",
    ".",
    "i",
    "é",
    "-0",
    "007",
    "9223372036854775808",
];

/// The bytes of a recipe, read front to back; zeros once they run out.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        let (&first, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        first
    }

    fn u64(&mut self) -> u64 {
        (0..8).fold(0, |acc, _| acc << 8 | u64::from(self.u8()))
    }

    fn bytes(&mut self) -> Vec<u8> {
        let length = (self.u8() % 24) as usize;
        (0..length).map(|_| self.u8()).collect()
    }

    fn text(&mut self) -> String {
        match self.u8() % 4 {
            0 => String::from_utf8_lossy(&self.bytes()).into_owned(),
            _ => WORDS[self.u8() as usize % WORDS.len()].to_string(),
        }
    }

    /// `Some(value)` most of the time, `None` (a null cell) otherwise.
    fn cell<T>(&mut self, value: impl FnOnce(&mut Self) -> T) -> Option<T> {
        (!self.u8().is_multiple_of(6)).then(|| value(self))
    }
}

fn data_type(kind: u8, arg: u8) -> DataType {
    let unit = [
        TimeUnit::Second,
        TimeUnit::Millisecond,
        TimeUnit::Microsecond,
        TimeUnit::Nanosecond,
    ][arg as usize % 4];
    match kind % 24 {
        0..=3 => DataType::Utf8,
        4 => DataType::LargeUtf8,
        5 => DataType::Utf8View,
        6 => DataType::Int8,
        7 => DataType::Int16,
        8 => DataType::Int32,
        9 => DataType::Int64,
        10 => DataType::UInt8,
        11 => DataType::UInt64,
        12 => DataType::Float32,
        13 => DataType::Float64,
        14 => DataType::Boolean,
        15 => DataType::Binary,
        16 => DataType::LargeBinary,
        17 => DataType::FixedSizeBinary(3),
        // Scales from -3 up to the precision (Arrow refuses a larger one).
        18 => {
            let precision = 1 + arg % 38;
            DataType::Decimal128(precision, ((arg / 38) as i8 % 10).min(precision as i8))
        }
        19 => {
            let precision = 1 + arg % 76;
            DataType::Decimal256(precision, ((arg % 13) as i8 - 3).min(precision as i8))
        }
        20 => DataType::Timestamp(unit, (arg & 4 != 0).then(|| "UTC".into())),
        21 => DataType::Date32,
        22 => DataType::Date64,
        _ => [DataType::Null, DataType::Time32(TimeUnit::Second)][arg as usize % 2].clone(),
    }
}

fn column(data_type: &DataType, rows: usize, b: &mut Bytes) -> ArrayRef {
    macro_rules! cells {
        ($f:expr) => {
            (0..rows).map(|_| b.cell($f)).collect::<Vec<_>>()
        };
    }
    match data_type {
        DataType::Utf8 => Arc::new(StringArray::from(cells!(|b| b.text()))),
        DataType::LargeUtf8 => Arc::new(LargeStringArray::from(cells!(|b| b.text()))),
        DataType::Utf8View => Arc::new(StringViewArray::from(cells!(|b| b.text()))),
        DataType::Int8 => Arc::new(Int8Array::from(cells!(|b| b.u8() as i8))),
        DataType::Int16 => Arc::new(Int16Array::from(cells!(|b| b.u64() as i16))),
        DataType::Int32 => Arc::new(Int32Array::from(cells!(|b| b.u64() as i32))),
        DataType::Int64 => Arc::new(Int64Array::from(cells!(|b| b.u64() as i64))),
        DataType::UInt8 => Arc::new(UInt8Array::from(cells!(|b| b.u8()))),
        DataType::UInt64 => Arc::new(UInt64Array::from(cells!(|b| b.u64()))),
        DataType::Float32 => Arc::new(Float32Array::from(cells!(|b| f32::from_bits(
            b.u64() as u32
        )))),
        DataType::Float64 => Arc::new(Float64Array::from(cells!(|b| f64::from_bits(b.u64())))),
        DataType::Boolean => Arc::new(BooleanArray::from(cells!(|b| b.u8() & 1 == 1))),
        DataType::Binary => Arc::new(BinaryArray::from_iter(cells!(|b| b.bytes()))),
        DataType::LargeBinary => Arc::new(LargeBinaryArray::from_iter(cells!(|b| b.bytes()))),
        DataType::FixedSizeBinary(_) => Arc::new(
            FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                cells!(|b| [b.u8(), b.u8(), b.u8()]).into_iter(),
                3,
            )
            .expect("3 bytes each"),
        ),
        DataType::Decimal128(p, s) => Arc::new(
            PrimitiveArray::<Decimal128Type>::from(cells!(
                |b| (b.u64() as i128) << 40 | b.u64() as i128
            ))
            .with_precision_and_scale(*p, *s)
            .expect("a valid precision"),
        ),
        DataType::Decimal256(p, s) => Arc::new(
            PrimitiveArray::<Decimal256Type>::from(cells!(|b| arrow_buffer_i256(b.u64())))
                .with_precision_and_scale(*p, *s)
                .expect("a valid precision"),
        ),
        DataType::Timestamp(unit, zone) => {
            let values = cells!(|b| b.u64() as i64);
            let array: ArrayRef = match unit {
                TimeUnit::Second => Arc::new(TimestampSecondArray::from(values)),
                TimeUnit::Millisecond => Arc::new(TimestampMillisecondArray::from(values)),
                TimeUnit::Microsecond => Arc::new(TimestampMicrosecondArray::from(values)),
                TimeUnit::Nanosecond => Arc::new(TimestampNanosecondArray::from(values)),
            };
            with_zone(array, zone.clone())
        }
        DataType::Date32 => Arc::new(Date32Array::from(cells!(|b| b.u64() as i32))),
        DataType::Date64 => Arc::new(Date64Array::from(cells!(|b| b.u64() as i64))),
        DataType::Time32(_) => Arc::new(Time32SecondArray::from(cells!(|b| b.u8() as i32))),
        _ => Arc::new(NullArray::new(rows)),
    }
}

fn arrow_buffer_i256(v: u64) -> arrow_buffer::i256 {
    arrow_buffer::i256::from_i128(v as i64 as i128 * 1_000_000_007)
}

fn with_zone(array: ArrayRef, zone: Option<Arc<str>>) -> ArrayRef {
    let Some(zone) = zone else { return array };
    macro_rules! zoned {
        ($t:ty) => {
            if let Some(a) = array.as_any().downcast_ref::<$t>() {
                return Arc::new(a.clone().with_timezone(zone));
            }
        };
    }
    zoned!(TimestampSecondArray);
    zoned!(TimestampMillisecondArray);
    zoned!(TimestampMicrosecondArray);
    zoned!(TimestampNanosecondArray);
    array
}

/// The record batch a recipe describes.
pub fn batch(data: &[u8]) -> RecordBatch {
    let mut b = Bytes(data);
    let columns = 1 + (b.u8() % 10) as usize;
    let rows = (b.u8() % 9) as usize;
    let mut fields = Vec::new();
    let mut arrays = Vec::new();
    for _ in 0..columns {
        let name = NAMES[b.u8() as usize % NAMES.len()];
        let (kind, arg) = (b.u8(), b.u8());
        // The meta columns are strings more often than not, as the vendor sends them.
        let data_type = if name.starts_with('_') && kind & 1 == 0 {
            DataType::Utf8
        } else {
            data_type(kind >> 1, arg)
        };
        let array = column(&data_type, rows, &mut b);
        fields.push(Field::new(name, array.data_type().clone(), true));
        arrays.push(array);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).expect("columns of one length")
}

/// Decodes the record batch of a recipe, in two calls, and checks the accounting. A batch
/// whose columns the format refuses fails the call (a `ValueError` / `TypeError` in
/// Python, whatever the mode): then nothing may have been counted.
pub fn check_records(data: &[u8]) {
    let records = batch(data);
    let mut decoder = Decoder::new("datahub-tuple", Mode::Permissive).expect("a known format");
    let cut = records.num_rows() / 2;
    let mut outputs = Vec::new();
    for (start, length, last) in [(0, cut, false), (cut, records.num_rows() - cut, true)] {
        match decoder.decode_records(&records.slice(start, length), last) {
            Ok(out) => outputs.push(out),
            Err(_) => {
                assert_eq!(decoder.stats().messages, 0, "refused columns counted");
                return;
            }
        }
    }
    crate::check_output(
        "datahub-tuple",
        &outputs,
        decoder.stats(),
        records.num_rows(),
        |_| None,
    );
}
