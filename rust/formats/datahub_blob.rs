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
use crate::json::{self, field, Kind, Str, Value};
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
        // The column list is a third of a typical message and generic mode never reads
        // it: checked, not recorded.
        Self {
            parser: json::Parser::skipping(&[("schema", "dataColumn")]),
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

// Fields that have a column (or are read for one); an object's other fields go to metadata.
const TOP_KNOWN: &[&str] = &["schema", "payload", "version"];
const SCHEMA_KNOWN: &[&str] = &["dataColumn", "primaryKey", "source"];
const SOURCE_KNOWN: &[&str] = &["dbType", "dbVersion", "dbName", "schemaName", "tableName"];
const PAYLOAD_KNOWN: &[&str] = &["before", "after", "op", "sequenceId", "timestamp", "ddl"];
const TIMESTAMP_KNOWN: &[&str] = &["eventTime", "systemTime", "checkpointTime"];
const DDL_KNOWN: &[&str] = &["text", "ddlMeta"];

/// The fields of one message, read and checked.
struct Event<'a> {
    message: Value<'a>,
    schema: Option<Value<'a>>,
    source: Option<Value<'a>>,
    payload: Value<'a>,
    timestamp: Option<Value<'a>>,
    ddl: Option<Value<'a>>,
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

fn get<'a>(object: Option<Value<'a>>, key: &str) -> Option<Value<'a>> {
    object.and_then(|o| o.get(key))
}

/// `payload.before` / `payload.after`: its `dataColumn` object, if any.
fn image<'a>(side: Option<Value<'a>>, path: &str, columns: &str) -> Result<Option<Value<'a>>> {
    let side = field::object(side, path)?;
    field::object(get(side, "dataColumn"), columns)
}

impl<'a> Event<'a> {
    fn read(message: Value<'a>) -> Result<Self> {
        if message.kind() != Kind::Object {
            return Err(Error::NotAnObject(message.describe()));
        }
        let top = Some(message);
        let schema = field::object(get(top, "schema"), "schema")?;
        let payload = field::object(get(top, "payload"), "payload")?
            .ok_or_else(|| field::error("payload", "missing".into()))?;
        let source_op = field::string(payload.get("op"), "payload.op")?
            .ok_or_else(|| field::error("payload.op", "missing".into()))?;

        let source = field::object(get(schema, "source"), "schema.source")?;
        let source_db = field::string(get(source, "dbName"), "schema.source.dbName")?;
        let source_schema = field::string(get(source, "schemaName"), "schema.source.schemaName")?;
        let source_table = field::string(get(source, "tableName"), "schema.source.tableName")?;
        let db_type = field::string(get(source, "dbType"), "schema.source.dbType")?;
        let db_version = field::string(get(source, "dbVersion"), "schema.source.dbVersion")?;

        let primary_key = match get(schema, "primaryKey").filter(|v| !v.is_null()) {
            None => None,
            Some(keys) if keys.kind() == Kind::Array => {
                for (i, key) in keys.items().enumerate() {
                    match key.kind() {
                        Kind::String => {}
                        Kind::Null => {
                            return Err(field::error(
                                "schema.primaryKey",
                                "expected strings, got null".into(),
                            ))
                        }
                        _ => {
                            return Err(field::error(
                                &format!("schema.primaryKey[{i}]"),
                                format!("expected a string, got {}", key.describe()),
                            ))
                        }
                    }
                }
                (!keys.is_empty()).then_some(keys)
            }
            Some(other) => {
                return Err(field::error(
                    "schema.primaryKey",
                    format!("expected an array, got {}", other.describe()),
                ))
            }
        };

        let timestamp = field::object(payload.get("timestamp"), "payload.timestamp")?;
        let event_time = field::time(get(timestamp, "eventTime"), "payload.timestamp.eventTime")?;
        let capture_time =
            field::time(get(timestamp, "systemTime"), "payload.timestamp.systemTime")?;
        let checkpoint = field::time(
            get(timestamp, "checkpointTime"),
            "payload.timestamp.checkpointTime",
        )?;

        let ddl = field::object(payload.get("ddl"), "payload.ddl")?;
        let ddl_text = field::string(get(ddl, "text"), "payload.ddl.text")?;
        let ddl_meta = field::string(get(ddl, "ddlMeta"), "payload.ddl.ddlMeta")?;

        let before = image(
            payload.get("before"),
            "payload.before",
            "payload.before.dataColumn",
        )?;
        let after = image(
            payload.get("after"),
            "payload.after",
            "payload.after.dataColumn",
        )?;
        let sequence_id = field::integer(payload.get("sequenceId"), "payload.sequenceId")?;

        Ok(Self {
            message,
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
        push_text(&mut rows.source_db, self.source_db);
        push_text(&mut rows.source_schema, self.source_schema);
        push_text(&mut rows.source_table, self.source_table);
        rows.event_time.push(self.event_time);
        rows.capture_time.push(self.capture_time);
        rows.tx_id.push_null();
        match self.sequence_id {
            Some(id) => {
                if id >= 0 {
                    rows.position.push_str(itoa::Buffer::new().format(id));
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
                        out.extend_from_slice(itoa::Buffer::new().format(id).as_bytes());
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
        write_image(&mut rows.before, self.before);
        write_image(&mut rows.after, self.after);
        push_text(&mut rows.ddl, self.ddl_text);
        self.write_metadata(&mut rows.metadata);
        rows.error.push_null();
        rows.raw.push_null();
        rows.end_row();
    }

    fn write_metadata(&self, map: &mut MapColumn) {
        if let Some(version) = self.message.get("version").filter(|v| !v.is_null()) {
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
        for (object, known) in [
            (Some(self.message), TOP_KNOWN),
            (self.schema, SCHEMA_KNOWN),
            (self.source, SOURCE_KNOWN),
            (Some(self.payload), PAYLOAD_KNOWN),
            (self.timestamp, TIMESTAMP_KNOWN),
            (self.ddl, DDL_KNOWN),
        ] {
            let Some(object) = object else { continue };
            for (key, value) in object.members() {
                if value.is_null() {
                    continue;
                }
                if known.iter().any(|k| key.eq_str(k)) {
                    continue;
                }
                let key = key.text();
                if map.has_key(&key) {
                    continue;
                }
                map.entry_with(&key, |out| {
                    value.render_into(out);
                });
            }
        }
        if map.is_open_empty() {
            map.push_null();
        } else {
            map.close();
        }
    }
}

fn push_text(column: &mut crate::events::BytesColumn, value: Option<Str<'_>>) {
    match value {
        Some(text) => column.push_with(|out| text.write_to(out)),
        None => column.push_null(),
    }
}

/// A row image: each `dataColumn` member (first duplicate wins) rendered as text.
fn write_image(map: &mut MapColumn, columns: Option<Value<'_>>) {
    let Some(columns) = columns else {
        map.push_null();
        return;
    };
    for (name, value) in columns.members() {
        map.entry_rendered(&name.text(), |out| value.render_into(out));
    }
    map.close();
}
