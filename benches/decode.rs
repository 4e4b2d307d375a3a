//! Criterion benchmarks of the Rust decoders, in process, on generated streams.
//!
//! `make bench` generates the streams first (`cdc-decode generate … --out
//! target/bench-data/<format>`); each is a `values.bin` of u32 little-endian length-prefixed
//! messages (0xFFFFFFFF for a null). Set `CDC_BENCH_DATA` to read another folder.

use std::path::PathBuf;
use std::sync::Arc;

use _native::decoder::{Decoder, Mode};
use arrow_array::{Array, ArrayRef, BinaryArray};
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
    let root = std::env::var_os("CDC_BENCH_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target/bench-data"))
        });
    let path = root.join(format).join("values.bin");
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
    eprintln!("{format}: {messages} messages, {rows} events, {bytes} bytes");

    let mut group = c.benchmark_group(format);
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

fn benches(c: &mut Criterion) {
    for format in _native::formats::FORMATS {
        bench_format(c, format);
    }
}

criterion_group!(decode, benches);
criterion_main!(decode);
