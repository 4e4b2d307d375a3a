//! Decodes a generated `values.bin` a number of times and prints the throughput:
//! `cargo run --release --example decode_file -- FORMAT PATH [REPEAT] [BATCH]`.
//! Handy under `perf stat` / `perf record` when profiling a decoder. With `DECODE_TYPED=1`
//! in the environment, rows are typed to the Spark race's columns of `shop.order_items`
//! (benches/spark_race.py), as the race's native contender decodes them; with
//! `DECODE_TABLES=1` as well, through multi-table mode (`tables=`) with that one table.
//! With `DECODE_SCHEMAS=1`, the schema pass instead (docs/schemas.md).

use std::sync::Arc;
use std::time::Instant;

use _native::decoder::{Decoder, Mode};
use _native::formats::Options;
use _native::typed::TypedSpec;
use arrow_array::{Array, ArrayRef, BinaryArray};
use arrow_schema::{DataType, Field, Schema, TimeUnit};

/// The race's typed columns (`COLUMNS` in benches/spark_race.py).
fn race_spec() -> Arc<TypedSpec> {
    let fields = vec![
        Field::new("order_id", DataType::Int64, true),
        Field::new("line_no", DataType::Int32, true),
        Field::new("sku", DataType::Utf8, true),
        Field::new("qty", DataType::Int32, true),
        Field::new("unit_price", DataType::Decimal128(10, 4), true),
        Field::new("cost", DataType::Int32, true),
        Field::new("weight_g", DataType::Int64, true),
        Field::new("gift_wrap", DataType::Boolean, true),
        Field::new(
            "returned_at",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
    ];
    let schema = Arc::new(Schema::new(fields));
    let spec = if std::env::var_os("DECODE_TABLES").is_some() {
        TypedSpec::tables(vec![("shop.order_items".to_string(), schema)])
    } else {
        TypedSpec::single(&schema)
    };
    Arc::new(spec.expect("a valid spec"))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (format, path) = (&args[1], &args[2]);
    let repeat: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(5);
    let batch: usize = args.get(4).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let bytes = std::fs::read(path).expect("read values.bin");
    let mut values: Vec<Option<&[u8]>> = Vec::new();
    let mut at = 0;
    while at + 4 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        at += 4;
        if len == u32::MAX {
            values.push(None);
        } else {
            values.push(Some(&bytes[at..at + len as usize]));
            at += len as usize;
        }
    }
    let batches: Vec<ArrayRef> = values
        .chunks(batch)
        .map(|c| Arc::new(c.iter().copied().collect::<BinaryArray>()) as ArrayRef)
        .collect();
    // The first pass also faults in the memory the output columns reuse afterwards; it is
    // reported apart, and the steady state is the median of the other passes.
    let mut times = Vec::new();
    let mut rows = 0;
    for _ in 0..repeat.max(2) {
        let start = Instant::now();
        rows = 0;
        let options = Options {
            typed: std::env::var_os("DECODE_TYPED").map(|_| race_spec()),
            schemas: std::env::var_os("DECODE_SCHEMAS").is_some(),
            ..Options::default()
        };
        let mut decoder = Decoder::with_options(format, Mode::Permissive, &options).unwrap();
        for b in &batches {
            rows += decoder.decode(b, None, false).unwrap().batch.num_rows();
        }
        rows += decoder.finish().unwrap().batch.num_rows();
        times.push(start.elapsed().as_secs_f64());
    }
    let first = times.remove(0);
    times.sort_by(f64::total_cmp);
    let secs = times[times.len() / 2];
    let messages = values.len();
    let mb = bytes.len() as f64 / 1e6;
    println!(
        "{format}: {messages} messages, {rows} rows; steady state (median of {} passes): \
         {:.0} messages/s, {:.0} rows/s, {:.1} MB/s; first pass {:.0} rows/s",
        times.len(),
        messages as f64 / secs,
        rows as f64 / secs,
        mb / secs,
        rows as f64 / first,
    );
    let _ = batches.iter().map(|b| b.len()).sum::<usize>();
}
