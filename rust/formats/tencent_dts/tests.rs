//! Tests of `tencent-dts`: events, multi-part sets, cached column lists, mutated messages.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BinaryArray, StringArray};
use prost::Message;

use crate::decoder::{Decoder, Mode};
use crate::proto::{self, Data, DmlEvent, Entries, Entry, Envelope, Event, Header, RowChange};

fn message(rows: usize) -> Vec<u8> {
    let column = |name: &str, key: bool| proto::Column {
        name: name.into(),
        is_key: key,
        ..Default::default()
    };
    let value = |i: usize| Data {
        data_type: proto::DataType::Int64 as i32,
        sv: i.to_string(),
        ..Default::default()
    };
    let text = Data {
        data_type: proto::DataType::String as i32,
        charset: "gbk".into(),
        bv: vec![0xd6, 0xd0, 0xce, 0xc4].into(),
        ..Default::default()
    };
    let entry = Entry {
        header: Some(Header {
            version: 1,
            message_type: proto::MessageType::Dml as i32,
            file_name: "mysql-bin.000001".into(),
            position: 4,
            schema_name: "shop".into(),
            table_name: "t".into(),
            seq_id: 7,
            ..Default::default()
        }),
        event: Some(Event {
            dml_event: Some(DmlEvent {
                dml_event_type: proto::DmlType::Insert as i32,
                columns: vec![column("id", true), column("name", false)],
                rows: (0..rows)
                    .map(|i| RowChange {
                        new_columns: vec![value(i), text.clone()],
                        ..Default::default()
                    })
                    .collect(),
            }),
            ..Default::default()
        }),
    };
    let data = Entries { items: vec![entry] }.encode_to_vec();
    Envelope {
        version: 1,
        total: 1,
        data: data.into(),
        ..Default::default()
    }
    .encode_to_vec()
}

fn decode(values: &[Option<Vec<u8>>], keys: Option<Vec<Option<&str>>>) -> arrow_array::RecordBatch {
    let array: ArrayRef = Arc::new(values.iter().map(|v| v.as_deref()).collect::<BinaryArray>());
    let keys = keys.map(StringArray::from);
    let mut decoder = Decoder::new("tencent-dts", Mode::Permissive).unwrap();
    decoder.decode(&array, keys.as_ref(), true).unwrap().batch
}

fn ops(batch: &arrow_array::RecordBatch) -> Vec<String> {
    let ops = batch.column_by_name("op").unwrap();
    let ops = ops.as_any().downcast_ref::<StringArray>().unwrap();
    ops.iter().map(|o| o.unwrap().to_string()).collect()
}

#[test]
fn a_dml_entry_gives_one_event_per_row() {
    let batch = decode(&[Some(message(3))], None);
    assert_eq!(ops(&batch), ["insert", "insert", "insert"]);
    assert_eq!(batch.column_by_name("error").unwrap().null_count(), 3);
}

#[test]
fn a_set_split_over_parts_joins_and_a_broken_one_gives_error_rows() {
    let whole = Envelope::decode(&message(2)[..]).unwrap().data;
    let part = |index: u32, bytes: &[u8]| {
        let data = bytes.to_vec().into();
        Some(
            Envelope {
                version: 1,
                total: 2,
                index,
                data,
                ..Default::default()
            }
            .encode_to_vec(),
        )
    };
    let (a, b) = whole.split_at(whole.len() / 2);
    assert_eq!(
        ops(&decode(&[part(0, a), part(1, b)], None)),
        ["insert", "insert"]
    );
    // Interleaved keys still join; a part without its set is an error row.
    let batch = decode(
        &[part(0, a), part(0, a), part(1, b)],
        Some(vec![Some("p0"), Some("p1"), Some("p1")]),
    );
    assert_eq!(ops(&batch), ["insert", "insert", "error"]);
    assert_eq!(ops(&decode(&[part(1, b)], None)), ["error"]);
}

fn with_columns(names: &[&str]) -> Vec<u8> {
    let mut envelope = Envelope::decode(&message(1)[..]).unwrap();
    let mut entries = Entries::decode(&envelope.data[..]).unwrap();
    let dml = entries.items[0]
        .event
        .as_mut()
        .unwrap()
        .dml_event
        .as_mut()
        .unwrap();
    dml.columns = names
        .iter()
        .map(|n| proto::Column {
            name: n.to_string(),
            ..Default::default()
        })
        .collect();
    envelope.data = entries.encode_to_vec().into();
    envelope.encode_to_vec()
}

/// Column lists are cached by their bytes across messages; a hit must give the same
/// names, and a list with a duplicate name must fail every time.
#[test]
fn cached_column_lists_give_the_same_events_and_errors() {
    let good = with_columns(&["", "name"]);
    let bad = with_columns(&["a", "a"]);
    let batch = decode(
        &[Some(good.clone()), Some(bad.clone()), Some(good), Some(bad)],
        None,
    );
    assert_eq!(ops(&batch), ["insert", "error", "insert", "error"]);
    let after = batch.column_by_name("after").unwrap();
    let after = after
        .as_any()
        .downcast_ref::<arrow_array::MapArray>()
        .unwrap();
    for row in [0, 2] {
        let keys = after.value(row).column(0).clone();
        let keys = keys.as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(keys.iter().flatten().collect::<Vec<_>>(), ["", "name"]);
    }
}

/// Every mutation of a valid message gives its events or exactly one error row, and no
/// panic (a small deterministic fuzz; the fuzz targets of the hardening issue go further).
#[test]
fn mutated_messages_never_panic() {
    let base = message(4);
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..5_000 {
        let mut bytes = base.clone();
        match next() % 4 {
            0 => bytes.truncate((next() as usize) % bytes.len()),
            1 => {
                for _ in 0..1 + next() % 4 {
                    let at = (next() as usize) % bytes.len();
                    bytes[at] ^= 1 << (next() % 8);
                }
            }
            2 => {
                let at = (next() as usize) % bytes.len();
                bytes[at] = next() as u8;
            }
            _ => {
                let at = (next() as usize) % (bytes.len() + 1);
                let junk: Vec<u8> = (0..1 + next() % 8).map(|_| next() as u8).collect();
                bytes.splice(at..at, junk);
            }
        }
        let batch = decode(&[Some(bytes.clone())], None);
        let ops = ops(&batch);
        assert!(
            ops == ["error"]
                || (!ops.is_empty() && !ops.contains(&"error".to_string()))
                || ops.is_empty(),
            "{ops:?} for {bytes:?}"
        );
    }
}
