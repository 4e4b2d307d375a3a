//! `tencent-dts`: Tencent Cloud DTS data subscription messages (ProtoBuf `Envelope` →
//! `Entries` → `Entry`), multi-part envelopes included. The rules are
//! `docs/formats/tencent-dts.md`.

use std::collections::HashSet;

use bytes::{Bytes, BytesMut};
use prost::Message;

use crate::decoder::Sink;
use crate::error::{Error, Result};
use crate::events::{EventBuilder, MapColumn};
use crate::formats::FormatDecoder;
use crate::proto::{
    DataType, DmlEvent, DmlType, Entries, Entry, Envelope, Event, Header, KvPair,
    MessageType, SourceType,
};
use crate::sequence::OrderKey;
use crate::text::{base64_into, Charset};

const FORMAT: &str = "tencent-dts";

/// The decoder, holding the multi-part sets still open, per reassembly key.
#[derive(Default)]
pub struct TencentDts {
    // In the order the sets were opened; few keys at a time, so a Vec beats a map.
    open: Vec<OpenSet>,
}

struct OpenSet {
    key: Option<String>,
    total: u32,
    properties: Vec<KvPair>,
    parts: Vec<Part>,
}

/// A buffered part: copies, so the input batch it came in can be released.
struct Part {
    ordinal: i64,
    raw: Bytes,
    data: Bytes,
}

impl Part {
    fn new(ordinal: i64, raw: &Bytes, data: &Bytes) -> Self {
        Self { ordinal, raw: Bytes::copy_from_slice(raw), data: Bytes::copy_from_slice(data) }
    }
}

impl FormatDecoder for TencentDts {
    fn decode(&mut self, sink: &mut Sink, ordinal: i64, value: Bytes, key: Option<&str>) -> Result<()> {
        let envelope = match Envelope::decode(value.clone()) {
            Ok(envelope) => envelope,
            Err(source) => {
                return sink.error(ordinal, &value, Error::Protobuf { message: "Envelope", source })
            }
        };
        if envelope.version != 1 {
            return sink.error(ordinal, &value, Error::EnvelopeVersion(envelope.version));
        }
        let total = envelope.total.max(1);
        let index = envelope.index;
        if index >= total {
            return sink.error(ordinal, &value, Error::PartIndex { index, total });
        }
        if total == 1 {
            return sink.events(ordinal, &value, |rows| {
                write_entries(rows, &envelope.data, &envelope.properties)
            });
        }

        let open = self.open.iter().position(|set| set.key.as_deref() == key);
        if index == 0 {
            if let Some(at) = open {
                let set = self.open.remove(at);
                let reason = format!("got {} of {} parts, then a new set started", set.parts.len(), set.total);
                fail_set(sink, set, &reason)?;
            }
            self.open.push(OpenSet {
                key: key.map(str::to_string),
                total,
                properties: envelope.properties,
                parts: vec![Part::new(ordinal, &value, &envelope.data)],
            });
            return Ok(());
        }
        let Some(at) = open else {
            let error = format!("part {index} of {total} arrived without the parts before it");
            return sink.error(ordinal, &value, Error::Multipart(error));
        };
        let set = &mut self.open[at];
        let next = set.parts.len() as u32;
        if set.total == total && index == next {
            set.parts.push(Part::new(ordinal, &value, &envelope.data));
            if index == total - 1 {
                let set = self.open.remove(at);
                return complete(sink, set);
            }
            return Ok(());
        }
        if set.total == total && index < next && set.parts[index as usize].data == envelope.data {
            let error = format!("duplicate part {index} of {total}");
            return sink.error(ordinal, &value, Error::Multipart(error));
        }
        let set = self.open.remove(at);
        let reason = format!(
            "part {index} of {total} does not follow part {} of {}",
            next - 1,
            set.total
        );
        fail_set(sink, set, &reason)?;
        sink.error(ordinal, &value, Error::Multipart(format!("out-of-order multi-part envelope: {reason}")))
    }

    fn finish(&mut self, sink: &mut Sink) -> Result<()> {
        for set in std::mem::take(&mut self.open) {
            let reason = format!("input ended after {} of {} parts", set.parts.len(), set.total);
            fail_set(sink, set, &reason)?;
        }
        Ok(())
    }

    fn pending(&self) -> u64 {
        self.open.iter().map(|set| set.parts.len() as u64).sum()
    }
}

/// Every part of a set that will not complete becomes an error row.
fn fail_set(sink: &mut Sink, set: OpenSet, reason: &str) -> Result<()> {
    let error = format!("incomplete multi-part envelope: {reason}");
    for part in set.parts {
        sink.error(part.ordinal, &part.raw, Error::Multipart(error.clone()))?;
    }
    Ok(())
}

/// A complete set: its events at the last part's place, or an error row for every part.
fn complete(sink: &mut Sink, set: OpenSet) -> Result<()> {
    let mut data = BytesMut::with_capacity(set.parts.iter().map(|p| p.data.len()).sum());
    for part in &set.parts {
        data.extend_from_slice(&part.data);
    }
    let data = data.freeze();
    let last = set.parts.last().map_or(0, |p| p.ordinal);
    match sink.try_events(last, |rows| write_entries(rows, &data, &set.properties)) {
        Ok(()) => Ok(()),
        Err(error) => {
            let error = format!("multi-part envelope of {} parts: {error}", set.total);
            for part in set.parts {
                sink.error(part.ordinal, &part.raw, Error::Multipart(error.clone()))?;
            }
            Ok(())
        }
    }
}

/// The events of one serialized `Entries`.
fn write_entries(rows: &mut EventBuilder, data: &Bytes, envelope: &[KvPair]) -> Result<()> {
    let entries = Entries::decode(data.clone())
        .map_err(|source| Error::Protobuf { message: "Entries (Envelope.data)", source })?;
    for (index, entry) in entries.items.iter().enumerate() {
        write_entry(rows, entry, envelope)
            .map_err(|source| Error::InEntry { index, source: Box::new(source) })?;
    }
    Ok(())
}

fn write_entry(rows: &mut EventBuilder, entry: &Entry, envelope: &[KvPair]) -> Result<()> {
    let default_header;
    let header = match &entry.header {
        Some(header) => header,
        None => {
            default_header = Header::default();
            &default_header
        }
    };
    let default_event;
    let event = match &entry.event {
        Some(event) => event,
        None => {
            default_event = Event::default();
            &default_event
        }
    };
    let context = Context { header, event, envelope };
    match MessageType::try_from(header.message_type) {
        Ok(MessageType::Dml) => {
            let default_dml;
            let dml = match &event.dml_event {
                Some(dml) => dml,
                None => {
                    default_dml = DmlEvent::default();
                    &default_dml
                }
            };
            write_dml(rows, &context, dml)
        }
        Ok(kind) => {
            let op = match kind {
                MessageType::Begin => "begin",
                MessageType::Commit => "commit",
                MessageType::Ddl => "ddl",
                MessageType::Rollback => "rollback",
                MessageType::Heartbeat => "heartbeat",
                MessageType::Checkpoint => "checkpoint",
                MessageType::Dml => unreachable!("handled above"),
            };
            write_control(rows, &context, op, kind.as_str_name());
            Ok(())
        }
        Err(_) => {
            let number = itoa::Buffer::new().format(header.message_type).to_string();
            write_control(rows, &context, "other", &number);
            Ok(())
        }
    }
}

/// What every event of one entry shares.
struct Context<'a> {
    header: &'a Header,
    event: &'a Event,
    envelope: &'a [KvPair],
}

impl Context<'_> {
    /// The columns from `format` to `event_id`, and `primary_key`'s absence is the caller's.
    fn common(&self, rows: &mut EventBuilder, op: &str, source_op: &str, row: u64, source_db: &str) {
        let h = self.header;
        rows.format.push_str(FORMAT);
        rows.op.push_str(op);
        rows.source_op.push_str(source_op);
        rows.source_db.push_nonempty(Some(source_db));
        rows.source_schema.push_null();
        rows.source_table.push_nonempty(Some(&h.table_name));
        rows.event_time.push((h.timestamp != 0).then(|| i64::from(h.timestamp) * 1_000_000));
        rows.capture_time.push(None);
        let tx_id = if !h.gtid.is_empty() {
            &h.gtid
        } else {
            match MessageType::try_from(h.message_type) {
                Ok(MessageType::Begin) => self.event.begin_event.as_ref().map_or("", |e| &e.transaction_id),
                Ok(MessageType::Commit) => self.event.commit_event.as_ref().map_or("", |e| &e.transaction_id),
                _ => "",
            }
        };
        rows.tx_id.push_nonempty(Some(tx_id));
        if !h.file_name.is_empty() {
            rows.position.push_with(|out| {
                out.extend_from_slice(h.file_name.as_bytes());
                out.push(b':');
                out.extend_from_slice(itoa::Buffer::new().format(h.position).as_bytes());
            });
        } else if h.position != 0 {
            rows.position.push_int(h.position);
        } else {
            rows.position.push_null();
        }
        rows.sequence.push_with(|out| {
            OrderKey(out).u64(h.seq_id).u64(row);
        });
        rows.event_id.push_with(|out| {
            out.extend_from_slice(itoa::Buffer::new().format(h.seq_id).as_bytes());
            out.push(b':');
            out.extend_from_slice(itoa::Buffer::new().format(row).as_bytes());
        });
    }

    /// `metadata`: header fields, the event's own fields, then properties (first key wins).
    fn metadata(&self, map: &mut MapColumn, row_properties: &[KvPair]) {
        let h = self.header;
        if h.version != 0 {
            map.entry_int("version", h.version);
        }
        match SourceType::try_from(h.source_type) {
            Ok(source) => map.entry("sourceType", Some(source.as_str_name())),
            Err(_) => map.entry_int("sourceType", h.source_type),
        }
        if h.server_id != 0 {
            map.entry_int("serverId", h.server_id);
        }
        map.entry_int("seqId", h.seq_id);
        if h.event_index != 0 {
            map.entry_int("eventIndex", h.event_index);
        }
        if h.is_last {
            map.entry("isLast", Some("true"));
        }
        let e = self.event;
        let text = |map: &mut MapColumn, key: &str, value: &str| {
            if !value.is_empty() {
                map.entry(key, Some(value));
            }
        };
        match MessageType::try_from(h.message_type) {
            Ok(MessageType::Begin) => {
                if let Some(begin) = &e.begin_event {
                    text(map, "transactionId", &begin.transaction_id);
                    if begin.thread_id != 0 {
                        map.entry_int("threadId", begin.thread_id);
                    }
                }
            }
            Ok(MessageType::Commit) => {
                if let Some(commit) = &e.commit_event {
                    text(map, "transactionId", &commit.transaction_id);
                }
            }
            Ok(MessageType::Ddl) => {
                if let Some(ddl) = e.ddl_event.as_ref().filter(|d| d.execution_time != 0) {
                    map.entry_int("executionTime", ddl.execution_time);
                }
            }
            Ok(MessageType::Heartbeat) => {
                if let Some(heartbeat) = e.heartbeat_event.as_ref().filter(|h| h.epoch != 0) {
                    map.entry_int("epoch", heartbeat.epoch);
                }
            }
            Ok(MessageType::Checkpoint) => {
                if let Some(checkpoint) = &e.checkpoint_event {
                    text(map, "syncedGtid", &checkpoint.synced_gtid);
                    if checkpoint.fake_gtid {
                        map.entry("fakeGtid", Some("true"));
                    }
                    text(map, "fileName", &checkpoint.file_name);
                    if checkpoint.position != 0 {
                        map.entry_int("position", checkpoint.position);
                    }
                }
            }
            _ => {}
        }
        for properties in [self.envelope, &h.properties, &e.properties, row_properties] {
            for kv in properties {
                map.insert(&kv.key, &kv.value);
            }
        }
        map.close();
    }
}

/// BEGIN, COMMIT, DDL, ROLLBACK, HEARTBEAT, CHECKPOINT, or an undefined message type.
fn write_control(rows: &mut EventBuilder, context: &Context, op: &str, source_op: &str) {
    let ddl = context.event.ddl_event.as_ref().filter(|_| op == "ddl");
    let mut source_db = context.header.schema_name.as_str();
    if source_db.is_empty() {
        source_db = ddl.map_or("", |d| &d.schema_name);
    }
    context.common(rows, op, source_op, 0, source_db);
    rows.primary_key.push_null();
    rows.before.push_null();
    rows.after.push_null();
    rows.ddl.push_nonempty(ddl.map(|d| d.sql.as_str()));
    context.metadata(&mut rows.metadata, &[]);
    rows.error.push_null();
    rows.raw.push_null();
    rows.end_row();
}

/// One event per `RowChange`.
fn write_dml(rows: &mut EventBuilder, context: &Context, dml: &DmlEvent) -> Result<()> {
    let (op, source_op) = match DmlType::try_from(dml.dml_event_type) {
        Ok(DmlType::Insert) => ("insert", "INSERT"),
        Ok(DmlType::Update) => ("update", "UPDATE"),
        Ok(DmlType::Delete) => ("delete", "DELETE"),
        Err(_) => ("other", ""),
    };
    let number;
    let source_op = if source_op.is_empty() {
        number = itoa::Buffer::new().format(dml.dml_event_type).to_string();
        number.as_str()
    } else {
        source_op
    };
    let names: Vec<&str> = dml.columns.iter().map(|c| c.name.as_str()).collect();
    check_unique(&names)?;
    let has_key = dml.columns.iter().any(|c| c.is_key);
    for (index, row) in dml.rows.iter().enumerate() {
        context.common(rows, op, source_op, index as u64, &context.header.schema_name);
        if has_key {
            for column in dml.columns.iter().filter(|c| c.is_key) {
                rows.primary_key.item(&column.name);
            }
            rows.primary_key.close();
        } else {
            rows.primary_key.push_null();
        }
        write_image(&mut rows.before, &names, &row.old_columns, index, "old")?;
        write_image(&mut rows.after, &names, &row.new_columns, index, "new")?;
        rows.ddl.push_null();
        context.metadata(&mut rows.metadata, &row.properties);
        rows.error.push_null();
        rows.raw.push_null();
        rows.end_row();
    }
    Ok(())
}

fn check_unique(names: &[&str]) -> Result<()> {
    let duplicate = if names.len() <= 16 {
        names.iter().enumerate().find(|(i, n)| names[..*i].contains(n)).map(|(_, n)| *n)
    } else {
        let mut seen = HashSet::with_capacity(names.len());
        names.iter().find(|n| !seen.insert(**n)).copied()
    };
    match duplicate {
        Some(name) => Err(Error::DuplicateColumn(name.to_string())),
        None => Ok(()),
    }
}

/// One row image into a map: named by the event's columns, NA left out, NIL a null value.
fn write_image(
    map: &mut MapColumn,
    names: &[&str],
    values: &[crate::proto::Data],
    row: usize,
    image: &'static str,
) -> Result<()> {
    if values.is_empty() {
        map.push_null();
        return Ok(());
    }
    if values.len() > names.len() {
        return Err(Error::TooManyValues { row, values: values.len(), image, columns: names.len() });
    }
    for (data, name) in values.iter().zip(names) {
        write_value(map, name, data)?;
    }
    map.close();
    Ok(())
}

fn write_value(map: &mut MapColumn, name: &str, data: &crate::proto::Data) -> Result<()> {
    use DataType::*;
    match DataType::try_from(data.data_type) {
        Ok(Nil) => map.entry(name, None),
        Ok(Na) => {}
        Ok(Int8 | Int16 | Int32 | Int64 | Uint8 | Uint16 | Uint32 | Uint64 | Float32 | Float64
        | Decimal) => map.entry(name, (!data.sv.is_empty()).then_some(data.sv.as_str())),
        Ok(Bytes) => map.entry_with(name, |out| base64_into(&data.bv, out)),
        Ok(String) => {
            let charset = Charset::from_name(&data.charset).ok_or_else(|| {
                Error::UnsupportedCharset { charset: data.charset.clone(), column: name.to_string() }
            })?;
            let mut ok = true;
            map.entry_with(name, |out| ok = charset.decode_into(&data.bv, out));
            if !ok {
                let charset = if data.charset.is_empty() { "utf8" } else { &data.charset };
                return Err(Error::InvalidText { charset: charset.to_string(), column: name.to_string() });
            }
        }
        Err(_) => {
            return Err(Error::UnknownDataType { number: data.data_type, column: name.to_string() })
        }
    }
    Ok(())
}
