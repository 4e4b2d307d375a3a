//! What every fuzz target checks, and how a fuzz input becomes messages or records.
//!
//! A target asserts, besides not panicking (a panic, an abort or running out of the
//! memory libFuzzer allows is a crash):
//! - in `permissive`, `decode` never fails: every message is accounted for;
//! - `stats()`: `messages` is the number of input values, rows = `events` + `errors`, and
//!   nothing is `pending` after the last call;
//! - a message gives all of its events or exactly one error row, with its raw bytes whole;
//! - formats where one input value is one change give exactly one row per value;
//! - the schema pass over the same messages fails on the messages the decode fails on.
//!
//! The input is split in two `decode` calls, so state carried between calls (multi-part
//! sets) is exercised too.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BinaryArray, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, TimeUnit};

use _native::decoder::{Decoder, Mode, Output, Stats};
use _native::formats::{Options, FORMATS};
use _native::typed::TypedSpec;

pub mod records;

/// Formats where every input value gives exactly one row (its event or its error row).
const ONE_ROW_EACH: &[&str] = &[
    "datahub-blob",
    "tdsql-json",
    "debezium-json",
    "datastream-json",
    "datahub-tuple",
];

/// The messages of a fuzz input, in the format of the generators' `values.bin` so their
/// output seeds the corpora: each a u32 little-endian length then its bytes, `0xFFFFFFFF`
/// a null value (a tombstone). Whatever does not parse (a length past the end) is one last
/// message, so an input without framing is one message.
pub fn split(mut data: &[u8]) -> Vec<Option<&[u8]>> {
    let mut messages = Vec::new();
    while !data.is_empty() {
        let Some((head, rest)) = data.split_first_chunk::<4>() else {
            messages.push(Some(data));
            break;
        };
        let length = u32::from_le_bytes(*head);
        if length == u32::MAX {
            messages.push(None);
            data = rest;
        } else if (length as usize) <= rest.len() {
            let (message, rest) = rest.split_at(length as usize);
            messages.push(Some(message));
            data = rest;
        } else {
            messages.push(Some(data));
            break;
        }
    }
    messages
}

/// Decodes a fuzz input of binary values in `format` and checks the accounting.
pub fn check_values(format: &str, data: &[u8]) {
    check_values_with(format, data, &Options::default());
}

/// The formats of binary values (all but `datahub-tuple`), in the package's order: the
/// typed target's first byte picks one by its place here.
pub fn value_formats() -> impl Iterator<Item = &'static str> {
    FORMATS.iter().copied().filter(|&f| f != "datahub-tuple")
}

/// The column names a typed input declares types for: generated tables' columns of every
/// kind of value (so seeds from the generators convert real values) and TDSQL's positional
/// names. Twenty, not all 62: each executes in a third of the time.
#[rustfmt::skip]
pub const TYPED_NAMES: [&str; 20] = [
    "id", "name", "balance", "score", "birthday", "created_at", "avatar", "order_id",
    "amount", "discount", "placed_at", "line_no", "sku", "unit_price", "gift_wrap",
    "returned_at", "checksum", "0", "1", "4",
];

/// The tables a multi-table typed input routes (three of the generators' five: every struct
/// column is built for every row, so each table more costs executions a second).
pub const TYPED_TABLES: [&str; 3] = ["shop.users", "shop.orders", "shop.order_items"];

/// Bytes before the messages in a typed input: the format byte, then three per name.
pub const TYPED_HEADER: usize = 1 + 3 * TYPED_NAMES.len();

/// The type of a typed input's column: `kind` picks it (0: the column is not declared), `p`
/// and `s` give a decimal's precision (1 to 38) and scale (0 to the precision).
pub fn typed_column(kind: u8, p: u8, s: u8) -> Option<DataType> {
    let precision = 1 + p % 38;
    Some(match kind % 14 {
        0 => return None,
        1 => DataType::Boolean,
        2 => DataType::Int8,
        3 => DataType::Int16,
        4 => DataType::Int32,
        5 => DataType::Int64,
        6 => DataType::Float32,
        7 => DataType::Float64,
        8 => DataType::Utf8,
        9 => DataType::Binary,
        10 => DataType::Date32,
        11 => DataType::Decimal128(precision, (s % (precision + 1)) as i8),
        12 => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        _ => DataType::Timestamp(TimeUnit::Microsecond, None),
    })
}

/// Typed mode: the input's header (`TYPED_HEADER` bytes) picks the format (first byte, low
/// bits), one schema or one per generated table (its high bit), and a type for each of
/// `TYPED_NAMES`; the rest is the messages, as for [`check_values`].
pub fn check_typed(data: &[u8]) {
    let Some((header, messages)) = data.split_at_checked(TYPED_HEADER) else {
        return;
    };
    let at = usize::from(header[0] & 0x7f) % value_formats().count();
    let format = value_formats().nth(at).expect("a format");
    let fields: Vec<Field> = header[1..]
        .chunks_exact(3)
        .zip(TYPED_NAMES)
        .filter_map(|(t, name)| Some(Field::new(name, typed_column(t[0], t[1], t[2])?, true)))
        .collect();
    let columns = fields.len();
    let schema = Arc::new(Schema::new(fields));
    let spec = if header[0] & 0x80 == 0 {
        TypedSpec::single(&schema)
    } else {
        TypedSpec::tables(
            TYPED_TABLES
                .map(|t| (t.to_string(), schema.clone()))
                .to_vec(),
        )
    };
    let spec = match spec {
        Ok(spec) => spec,
        // A schema of no column is refused (it once panicked building the structs).
        Err(e) if columns == 0 => return assert!(e.to_string().contains("no column"), "{e}"),
        Err(e) => panic!("every generated type is supported: {e}"),
    };
    let options = Options {
        typed: Some(Arc::new(spec)),
        ..Options::default()
    };
    check_values_with(format, messages, &options);
}

fn check_values_with(format: &str, data: &[u8], options: &Options) {
    let messages = split(data);
    let values: ArrayRef = Arc::new(BinaryArray::from(messages.clone()));
    let mut decoder =
        Decoder::with_options(format, Mode::Permissive, options).expect("a known format");
    let cut = messages.len() / 2;
    let mut outputs = Vec::new();
    for (start, length, last) in [(0, cut, false), (cut, messages.len() - cut, true)] {
        let out = decoder.decode(&values.slice(start, length), None, last);
        outputs.push(out.unwrap_or_else(|e| panic!("permissive decode failed: {e}")));
    }
    let raws: Vec<Option<&[u8]>> = messages;
    check_output(format, &outputs, decoder.stats(), raws.len(), |ordinal| {
        raws[ordinal].map(<[u8]>::to_vec)
    });
    if options.typed.is_none() {
        check_schema_pass(format, &values, &outputs);
    }
}

/// The schema pass over the same messages (docs/schemas.md), in the same two calls: every
/// message accounted for, and its error rows are the decode's, but for a decode's output
/// limit (the pass writes no images).
fn check_schema_pass(format: &str, values: &ArrayRef, decoded: &[Output]) {
    let options = Options {
        schemas: true,
        ..Options::default()
    };
    let mut reader =
        Decoder::with_options(format, Mode::Permissive, &options).expect("a known format");
    let cut = values.len() / 2;
    let mut errors = Vec::new();
    for (start, length, last) in [(0, cut, false), (cut, values.len() - cut, true)] {
        let out = reader.decode(&values.slice(start, length), None, last);
        let out = out.unwrap_or_else(|e| panic!("permissive schema pass failed: {e}"));
        let text = strings(&out.batch, "error");
        errors.extend(
            (0..text.len())
                .filter(|&r| text.is_valid(r))
                .map(|r| out.ordinals[r]),
        );
    }
    let stats = reader.stats();
    assert_eq!(stats.messages, values.len() as u64, "{stats:?}");
    assert_eq!(stats.pending, 0, "{stats:?}");
    let mut expected = Vec::new();
    for out in decoded {
        let text = strings(&out.batch, "error");
        for row in (0..text.len()).filter(|&r| text.is_valid(r)) {
            if !text.value(row).contains("max_output_ratio") {
                expected.push(out.ordinals[row]);
            }
        }
    }
    errors.sort_unstable();
    expected.sort_unstable();
    assert!(
        expected.iter().all(|o| errors.binary_search(o).is_ok()),
        "decode errors {expected:?}, schema pass errors {errors:?}"
    );
}

/// Checks the rows and stats of one decoder's calls over `inputs` messages; `raw(ordinal)`
/// is what an error row of that message must keep.
pub fn check_output(
    format: &str,
    outputs: &[Output],
    stats: Stats,
    inputs: usize,
    raw: impl Fn(usize) -> Option<Vec<u8>>,
) {
    assert_eq!(stats.messages, inputs as u64, "{stats:?}");
    assert_eq!(stats.pending, 0, "{stats:?}");
    assert_eq!(stats.dropped, 0, "{stats:?}");
    // Per ordinal: (event rows, error rows).
    let mut rows: HashMap<i64, (u64, u64)> = HashMap::new();
    let mut total = 0u64;
    for out in outputs {
        let batch = &out.batch;
        assert_eq!(batch.num_rows(), out.ordinals.len());
        total += batch.num_rows() as u64;
        let errors = strings(batch, "error");
        let raws = batch.column_by_name("raw").expect("a raw column");
        let raws = raws.as_any().downcast_ref::<BinaryArray>().expect("binary");
        for (row, &ordinal) in out.ordinals.iter().enumerate() {
            assert!((0..inputs as i64).contains(&ordinal), "ordinal {ordinal}");
            let counts = rows.entry(ordinal).or_default();
            if errors.is_valid(row) {
                counts.1 += 1;
                assert!(raws.is_valid(row), "an error row without raw");
                if let Some(expected) = raw(ordinal as usize) {
                    assert_eq!(raws.value(row), &expected[..], "raw of message {ordinal}");
                }
            } else {
                counts.0 += 1;
                assert!(raws.is_null(row), "an event with raw");
            }
        }
    }
    assert_eq!(total, stats.events + stats.errors, "{stats:?}");
    let errors: u64 = rows.values().map(|c| c.1).sum();
    assert_eq!(errors, stats.errors, "{stats:?}");
    for (ordinal, (events, errors)) in &rows {
        assert!(
            *errors == 0 || (*errors == 1 && *events == 0),
            "message {ordinal}: {events} events and {errors} error rows"
        );
    }
    if ONE_ROW_EACH.contains(&format) {
        assert_eq!(rows.len(), inputs, "a message without a row");
        assert_eq!(total, inputs as u64, "a message with several rows");
    }
}

fn strings<'a>(batch: &'a RecordBatch, name: &str) -> &'a StringArray {
    let column = batch.column_by_name(name).expect("the column");
    column.as_any().downcast_ref().expect("a string column")
}
