//! `datahub-blob`: DataWorks real-time sync to DataHub BLOB topics (and its Kafka output),
//! one JSON object per message, one event per message. Every rule is written down in
//! docs/formats/datahub-blob.md, which the Python fallback follows too.
//!
//! A message is parsed whole onto the [`json::Parser`] tape, its fields are read and
//! checked, and only then is the row written: reading can fail, writing cannot, so a bad
//! message leaves nothing behind. Values go from the input to the Arrow builders directly.

use bytes::Bytes;

use crate::decoder::Sink;
use crate::error::{Error, Result};
use crate::events::{EventBuilder, MapColumn};
use crate::formats::FormatDecoder;
use crate::json::{self, field, Kind, Name, Str, Value};
use crate::limits::Limits;
use crate::sequence::OrderKey;

/// The format's name.
pub const FORMAT: &str = "datahub-blob";

/// Decodes `datahub-blob` messages. Holds no state between messages but the parser's
/// buffers.
#[derive(Debug)]
pub struct DatahubBlob {
    parser: json::Parser,
}

impl Default for DatahubBlob {
    fn default() -> Self {
        Self::new(&Limits::default())
    }
}

impl DatahubBlob {
    /// A decoder whose messages are held to `limits`.
    pub fn new(limits: &Limits) -> Self {
        // The column list is a third of a typical message and generic mode never reads
        // it: checked, not recorded. The whole `schema` (column list, keys, source) is the
        // same in every message of a table, half a message: checked once per table.
        Self {
            parser: json::Parser::skipping(&SKIP)
                .remembering(&REMEMBER)
                .limited(limits),
        }
    }
}

impl FormatDecoder for DatahubBlob {
    fn decode(
        &mut self,
        sink: &mut Sink,
        ordinal: i64,
        value: Bytes,
        _key: Option<&str>,
    ) -> Result<()> {
        let parser = &mut self.parser;
        sink.events(ordinal, &value, |rows| {
            let message = parser.parse(&value)?;
            if let Some(typed) = rows.typed() {
                // DataHub DATE values are epoch milliseconds (docs/typed.md).
                typed.hints.epoch = Some(crate::typed::Unit::Millis);
            }
            Event::read(message)?.write(rows);
            Ok(())
        })
    }
}

/// `payload.op` → `op`: `UPDATE_AFTER` is `update` instead when the message has a before
/// image, `INSERT` is `read` for a full-sync row (`sequenceId` -1).
fn op_of(source_op: &str) -> &'static str {
    match source_op {
        "INSERT" => "insert",
        "UPDATE_BEFOR" | "UPDATE_BEFORE" => "update_before",
        "UPDATE_AFTER" => "update_after",
        "DELETE" => "delete",
        "TRANSACTION_BEGIN" => "begin",
        "TRANSACTION_END" | "XACOMMIT" => "commit",
        "XAROLLBACK" => "rollback",
        "CREATE" | "ALTER" | "ERASE" | "QUERY" | "RENAME" | "CINDEX" | "DINDEX" => "ddl",
        "TRUNCATE" => "truncate",
        "MHEARTBEAT" => "heartbeat",
        _ => "other",
    }
}

// The fields read from each object, in one pass over its members; its other members go to
// metadata.
const TOP: [Name; 3] = [
    Name::new("schema"),
    Name::new("payload"),
    Name::new("version"),
];
const SCHEMA: [Name; 3] = [
    Name::new("dataColumn"),
    Name::new("primaryKey"),
    Name::new("source"),
];
const SOURCE: [Name; 5] = [
    Name::new("dbType"),
    Name::new("dbVersion"),
    Name::new("dbName"),
    Name::new("schemaName"),
    Name::new("tableName"),
];
const PAYLOAD: [Name; 6] = [
    Name::new("before"),
    Name::new("after"),
    Name::new("op"),
    Name::new("sequenceId"),
    Name::new("timestamp"),
    Name::new("ddl"),
];
const TIMESTAMP: [Name; 3] = [
    Name::new("eventTime"),
    Name::new("systemTime"),
    Name::new("checkpointTime"),
];
const DDL: [Name; 2] = [Name::new("text"), Name::new("ddlMeta")];
const DATA_COLUMN: Name = Name::new("dataColumn");
/// `schema.dataColumn`, the column list.
const SKIP: [(Name, Name); 1] = [(TOP[0], DATA_COLUMN)];
/// `schema`.
const REMEMBER: [Name; 1] = [TOP[0]];

/// One object's members: those named in `names` (by position) and whether it has others.
struct Members<'a, const N: usize> {
    object: Option<Value<'a>>,
    names: &'static [Name; N],
    fields: [Option<Value<'a>>; N],
    others: bool,
}

impl<'a, const N: usize> Members<'a, N> {
    /// Reads `object` (an object or `None`) in one pass, keeping the first of duplicates.
    fn read(object: Option<Value<'a>>, names: &'static [Name; N]) -> Self {
        let (fields, others) = object.map_or(([None; N], false), |o| o.named(names));
        Self {
            object,
            names,
            fields,
            others,
        }
    }

    /// Adds the members not in `names` to `metadata` (not null, first key wins).
    fn others_into(&self, metadata: &mut MapColumn) {
        if !self.others {
            return;
        }
        for (key, value) in self.object.iter().flat_map(|o| o.members()) {
            if value.is_null() || self.names.iter().any(|name| key.is(name)) {
                continue;
            }
            let key = key.text();
            if !metadata.has_key(&key) {
                metadata.entry_with(&key, |out| {
                    value.render_into(out);
                });
            }
        }
    }
}

/// The fields of one message, read and checked.
struct Event<'a> {
    top: Members<'a, 3>,
    schema: Members<'a, 3>,
    source: Members<'a, 5>,
    payload: Members<'a, 6>,
    timestamp: Members<'a, 3>,
    ddl: Members<'a, 2>,
    source_op: Str<'a>,
    source_db: Option<Str<'a>>,
    source_schema: Option<Str<'a>>,
    source_table: Option<Str<'a>>,
    db_type: Option<Str<'a>>,
    db_version: Option<Str<'a>>,
    primary_key: Option<Value<'a>>,
    event_time: Option<i64>,
    capture_time: Option<i64>,
    checkpoint: Option<i64>,
    ddl_text: Option<Str<'a>>,
    ddl_meta: Option<Str<'a>>,
    before: Option<Value<'a>>,
    after: Option<Value<'a>>,
    sequence_id: Option<i64>,
}

/// `payload.before` / `payload.after`: its `dataColumn` object, if any.
fn image<'a>(side: Option<Value<'a>>, path: &str, columns: &str) -> Result<Option<Value<'a>>> {
    let side = field::object(side, path)?;
    field::object(side.and_then(|s| s.get_name(&DATA_COLUMN)), columns)
}

impl<'a> Event<'a> {
    fn read(message: Value<'a>) -> Result<Self> {
        if message.kind() != Kind::Object {
            return Err(Error::NotAnObject(message.describe()));
        }
        let top = Members::read(Some(message), &TOP);
        let [schema, payload, _version] = top.fields;
        let schema = Members::read(field::object(schema, "schema")?, &SCHEMA);
        let payload = field::object(payload, "payload")?
            .ok_or_else(|| field::error("payload", "missing".into()))?;
        let payload = Members::read(Some(payload), &PAYLOAD);
        let [before, after, op, sequence_id, timestamp, ddl] = payload.fields;
        let source_op = field::string(op, "payload.op")?
            .ok_or_else(|| field::error("payload.op", "missing".into()))?;

        let [_columns, keys, source] = schema.fields;
        let source = Members::read(field::object(source, "schema.source")?, &SOURCE);
        let [db_type, db_version, db_name, schema_name, table_name] = source.fields;
        let source_db = field::string(db_name, "schema.source.dbName")?;
        let source_schema = field::string(schema_name, "schema.source.schemaName")?;
        let source_table = field::string(table_name, "schema.source.tableName")?;
        let db_type = field::string(db_type, "schema.source.dbType")?;
        let db_version = field::string(db_version, "schema.source.dbVersion")?;
        let primary_key = field::string_array(keys, "schema.primaryKey")?;

        let timestamp = field::object(timestamp, "payload.timestamp")?;
        let timestamp = Members::read(timestamp, &TIMESTAMP);
        let [event_time, system_time, checkpoint] = timestamp.fields;
        let event_time = field::time(event_time, "payload.timestamp.eventTime")?;
        let capture_time = field::time(system_time, "payload.timestamp.systemTime")?;
        let checkpoint = field::time(checkpoint, "payload.timestamp.checkpointTime")?;

        let ddl = Members::read(field::object(ddl, "payload.ddl")?, &DDL);
        let [ddl_text, ddl_meta] = ddl.fields;
        let ddl_text = field::string(ddl_text, "payload.ddl.text")?;
        let ddl_meta = field::string(ddl_meta, "payload.ddl.ddlMeta")?;

        let before = image(before, "payload.before", "payload.before.dataColumn")?;
        let after = image(after, "payload.after", "payload.after.dataColumn")?;
        let sequence_id = field::integer(sequence_id, "payload.sequenceId")?;

        Ok(Self {
            top,
            schema,
            source,
            payload,
            timestamp,
            ddl,
            source_op,
            source_db,
            source_schema,
            source_table,
            db_type,
            db_version,
            primary_key,
            event_time,
            capture_time,
            checkpoint,
            ddl_text,
            ddl_meta,
            before,
            after,
            sequence_id,
        })
    }

    /// Writes the event's row. Cannot fail: everything was checked by [`Event::read`].
    fn write(&self, rows: &mut EventBuilder) {
        let source_op = self.source_op.text();
        let half: u64 = match &*source_op {
            "UPDATE_BEFOR" | "UPDATE_BEFORE" => 0,
            _ => 1,
        };
        let op = match op_of(&source_op) {
            "update_after" if self.before.is_some() => "update",
            "insert" if self.sequence_id == Some(-1) => "read",
            op => op,
        };
        rows.op.push_str(op);
        rows.source_op.push_str(&source_op);
        json::push_text(&mut rows.source_db, self.source_db);
        json::push_text(&mut rows.source_schema, self.source_schema);
        json::push_text(&mut rows.source_table, self.source_table);
        rows.event_time.push(self.event_time);
        rows.capture_time.push(self.capture_time);
        rows.tx_id.push_null();
        match self.sequence_id {
            Some(id) => {
                // Formatted once for `position` and `event_id`.
                let mut digits = itoa::Buffer::new();
                let digits = digits.format(id);
                if id >= 0 {
                    rows.position.push_str(digits);
                } else {
                    rows.position.push_null();
                }
                rows.sequence.push_with(|out| {
                    OrderKey(out).i64(id).u64(half);
                });
                if id == -1 {
                    rows.event_id.push_null();
                } else {
                    rows.event_id.push_with(|out| {
                        out.extend_from_slice(digits.as_bytes());
                        out.push(b':');
                        out.push(b'0' + half as u8);
                    });
                }
            }
            None => {
                rows.position.push_null();
                rows.sequence.push_null();
                rows.event_id.push_null();
            }
        }
        match self.primary_key {
            Some(keys) => {
                for key in keys.items() {
                    if let Some(key) = key.as_str() {
                        rows.primary_key.item(&key.text());
                    }
                }
                rows.primary_key.close();
            }
            None => rows.primary_key.push_null(),
        }
        json::write_image(&mut rows.before, self.before);
        json::write_image(&mut rows.after, self.after);
        json::push_text(&mut rows.ddl, self.ddl_text);
        self.write_metadata(&mut rows.metadata);
        rows.error.push_null();
        rows.raw.push_null();
        rows.end_row();
    }

    fn write_metadata(&self, map: &mut MapColumn) {
        if let Some(version) = self.top.fields[2].filter(|v| !v.is_null()) {
            map.entry_with("version", |out| {
                version.render_into(out);
            });
        }
        for (key, value) in [("dbType", self.db_type), ("dbVersion", self.db_version)] {
            if let Some(value) = value {
                map.entry_with(key, |out| value.write_to(out));
            }
        }
        if let Some(micros) = self.checkpoint {
            map.entry_int("checkpointTime", micros / 1000);
        }
        if let Some(meta) = self.ddl_meta {
            map.entry_with("ddlMeta", |out| meta.write_to(out));
        }
        self.top.others_into(map);
        self.schema.others_into(map);
        self.source.others_into(map);
        self.payload.others_into(map);
        self.timestamp.others_into(map);
        self.ddl.others_into(map);
        map.close_or_null();
    }
}
