//! Criterion benchmarks of the Rust decoders, in process, on generated streams.
//!
//! `make bench` generates the streams first (`cdc-decode generate … --out
//! target/bench-data/<format>`); each is a `values.bin` of u32 little-endian length-prefixed
//! messages (0xFFFFFFFF for a null). Set `CDC_BENCH_DATA` to read another folder.
//! `datastream-avro` is also decoded from `datastream-avro-500/`: files of up to 500
//! events of one table (a "message" is a whole Avro file).
//!
//! `datahub-tuple` decodes record batches, not messages: its bench builds a batch of
//! TUPLE records here (an order-items-like table of every common DataHub type, plus the
//! meta columns) rather than reading a file.

use std::path::PathBuf;
use std::sync::Arc;

use _native::decoder::{Decoder, Mode};
use arrow_array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Decimal128Array, Float32Array, Float64Array,
    Int16Array, Int32Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn read_values(path: &PathBuf) -> Option<BinaryArray> {
    let bytes = std::fs::read(path).ok()?;
    let mut values = Vec::new();
    let mut at = 0;
    while at + 4 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().ok()?);
        at += 4;
        if len == u32::MAX {
            values.push(None);
            continue;
        }
        let end = at + len as usize;
        values.push(Some(bytes.get(at..end)?.to_vec()));
        at = end;
    }
    Some(values.iter().map(|v| v.as_deref()).collect())
}

fn bench_format(c: &mut Criterion, format: &str) {
    bench_stream(c, format, format);
}

/// The stream generated into `target/bench-data/<folder>`, decoded as `format`.
fn bench_stream(c: &mut Criterion, format: &str, folder: &str) {
    let root = std::env::var_os("CDC_BENCH_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target/bench-data"))
        });
    let path = root.join(folder).join("values.bin");
    let Some(values) = read_values(&path) else {
        eprintln!(
            "skipping {format}: no {} (run `make bench`)",
            path.display()
        );
        return;
    };
    let bytes: usize = values.value_data().len();
    let messages = values.len();
    let values: ArrayRef = Arc::new(values);
    let rows = Decoder::new(format, Mode::Permissive)
        .unwrap()
        .decode(&values, None, true)
        .unwrap();
    let rows = rows.batch.num_rows();
    eprintln!("{folder}: {messages} messages, {rows} events, {bytes} bytes");

    let mut group = c.benchmark_group(folder);
    group.sample_size(20);
    for (unit, amount) in [("messages", messages), ("rows", rows), ("bytes", bytes)] {
        group.throughput(if unit == "bytes" {
            Throughput::Bytes(amount as u64)
        } else {
            Throughput::Elements(amount as u64)
        });
        group.bench_function(unit, |b| {
            b.iter(|| {
                let mut decoder = Decoder::new(format, Mode::Permissive).unwrap();
                decoder.decode(&values, None, true).unwrap()
            })
        });
    }
    group.finish();
}

/// `rows` TUPLE records: 9 data columns (bigint, smallint, text, int, decimal(10,4),
/// float, double, boolean, timestamp) and the meta columns, as DataWorks writes them.
fn tuple_records(rows: usize) -> RecordBatch {
    let n = rows as i64;
    let ops = ["I", "U", "U", "D"];
    let before = ["N", "Y", "N", "Y"];
    let after = ["Y", "N", "Y", "N"];
    let columns: Vec<(&str, ArrayRef)> = vec![
        (
            "order_id",
            Arc::new(Int64Array::from_iter_values(500_000..500_000 + n)),
        ),
        (
            "line_no",
            Arc::new(Int16Array::from_iter_values((0..n).map(|i| (i % 5) as i16))),
        ),
        (
            "sku",
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("SKU-{:07}", i * 7919 % 10_000_000)),
            )),
        ),
        (
            "qty",
            Arc::new(Int32Array::from_iter_values(
                (0..n).map(|i| (i % 1000) as i32),
            )),
        ),
        (
            "unit_price",
            Arc::new(
                Decimal128Array::from_iter_values(
                    (0..n).map(|i| i128::from(i) * 12_345 % 99_999_999),
                )
                .with_precision_and_scale(10, 4)
                .unwrap(),
            ),
        ),
        (
            "weight",
            Arc::new(Float32Array::from_iter_values(
                (0..n).map(|i| (i % 5000) as f32 / 100.0),
            )),
        ),
        (
            "ratio",
            Arc::new(Float64Array::from_iter_values(
                (0..n).map(|i| (i % 1_000_000) as f64 / 1e6),
            )),
        ),
        (
            "gift_wrap",
            Arc::new(BooleanArray::from_iter((0..n).map(|i| Some(i % 3 == 0)))),
        ),
        (
            "placed_at",
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(
                    (0..n).map(|i| 1_714_557_600_000_000 + i * 1_234_567),
                )
                .with_timezone("UTC"),
            ),
        ),
        (
            "_sequence_id_",
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| (1_714_557_600_000_000_000 + i / 2).to_string()),
            )),
        ),
        (
            "_operation_type_",
            Arc::new(StringArray::from_iter_values((0..rows).map(|i| ops[i % 4]))),
        ),
        (
            "_execute_time_",
            Arc::new(Int64Array::from_iter_values(
                (0..n).map(|i| 1_714_557_600_000 + i),
            )),
        ),
        (
            "_before_image_",
            Arc::new(StringArray::from_iter_values(
                (0..rows).map(|i| before[i % 4]),
            )),
        ),
        (
            "_after_image_",
            Arc::new(StringArray::from_iter_values(
                (0..rows).map(|i| after[i % 4]),
            )),
        ),
        (
            "_source_table_",
            Arc::new(StringArray::from_iter_values(
                (0..rows).map(|_| "shop.order_items"),
            )),
        ),
    ];
    RecordBatch::try_from_iter(columns).unwrap()
}

fn bench_tuple(c: &mut Criterion) {
    let records = tuple_records(20_000);
    let mut group = c.benchmark_group("datahub-tuple");
    group.sample_size(20);
    group.throughput(Throughput::Elements(records.num_rows() as u64));
    group.bench_function("rows", |b| {
        b.iter(|| {
            let mut decoder = Decoder::new("datahub-tuple", Mode::Permissive).unwrap();
            decoder.decode_records(&records, true).unwrap()
        })
    });
    group.finish();
}

fn benches(c: &mut Criterion) {
    for format in _native::formats::FORMATS {
        if *format == "datahub-tuple" {
            bench_tuple(c);
        } else {
            bench_format(c, format);
        }
    }
    // Datastream Avro files as a busy table fills them: one table, up to 500 events each.
    bench_stream(c, "datastream-avro", "datastream-avro-500");
}

criterion_group!(decode, benches);
criterion_main!(decode);
