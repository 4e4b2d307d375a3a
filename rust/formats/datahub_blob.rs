//! `datahub-blob`: DataWorks real-time sync to DataHub BLOB topics (and its Kafka output),
//! one JSON object per message, one event per message. Every rule is written down in
//! docs/formats/datahub-blob.md, which the Python fallback follows too.
//!
//! A message is parsed whole onto the [`json::Parser`] tape, its fields are read and
//! checked, and only then is the row written: reading can fail, writing cannot, so a bad
//! message leaves nothing behind. Values go from the input to the Arrow builders directly.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::events::{EventBuilder, MapColumn};
use crate::formats::FormatDecoder;
use crate::json::{self, field, Kind, Name, Str, Value};
use crate::limits::Limits;
use crate::render;
use crate::schemas::{Dialect, SchemaCache, WireSchema};
use crate::sequence::OrderKey;
use crate::sink::Sink;

/// The format's name.
pub const FORMAT: &str = "datahub-blob";

/// Decodes `datahub-blob` messages. Holds no state between messages but the parser's
/// buffers and what it read from the `schema`s the parser remembers.
#[derive(Debug)]
pub struct DatahubBlob {
    parser: json::Parser,
    schemas: Schemas,
}

impl Default for DatahubBlob {
    fn default() -> Self {
        Self::new(&Limits::default(), false)
    }
}

impl DatahubBlob {
    /// A decoder whose messages are held to `limits`; for the schema pass (`crate::schemas`)
    /// when `schema_pass`.
    pub fn new(limits: &Limits, schema_pass: bool) -> Self {
        // The column list is a third of a typical message and generic mode never reads
        // it: checked, not recorded (the schema pass reads it). The whole `schema` (column
        // list, keys, source) is the same in every message of a table, half a message:
        // checked once per table.
        Self {
            parser: json::Parser::skipping(&SKIP)
                .remembering(&REMEMBER)
                .limited(limits),
            schemas: Schemas {
                wire: schema_pass.then(|| Wire {
                    schemas: SchemaCache::default(),
                    parser: json::Parser::default().limited(limits),
                }),
                ..Schemas::default()
            },
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
        let (parser, schemas) = (&mut self.parser, &mut self.schemas);
        sink.events(ordinal, &value, |rows| {
            let message = parser.parse(&value)?;
            if let Some(typed) = rows.typed() {
                // DataHub DATE values are epoch milliseconds (docs/typed.md).
                typed.hints.epoch = Some(crate::typed::Unit::Millis);
            }
            Event::read(message, schemas)?.write(rows);
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

    /// Whether a member of the object is one of its others: not in `names`, not null.
    #[inline(always)]
    fn is_other(&self, key: &Str<'_>, value: &Value<'_>) -> bool {
        !value.is_null() && !self.names.iter().any(|name| key.is(name))
    }

    /// Appends the others (see [`Members::is_other`]; the first of duplicates), rendered,
    /// to `out`.
    fn others(&self, out: &mut Vec<(String, String)>) {
        if !self.others {
            return;
        }
        for (key, value) in self.object.iter().flat_map(|o| o.members()) {
            if !self.is_other(&key, &value) {
                continue;
            }
            let mut rendered = Vec::new();
            value.render_into(&mut rendered);
            // Rendered from checked UTF-8: compact JSON, or a string's text unescaped.
            let rendered = String::from_utf8_lossy(&rendered).into_owned();
            out.push((key.text().into_owned(), rendered));
        }
    }

    /// Adds the others (see [`Members::is_other`]) to `metadata` (first key wins).
    fn others_into(&self, metadata: &mut MapColumn) {
        if !self.others {
            return;
        }
        for (key, value) in self.object.iter().flat_map(|o| o.members()) {
            if !self.is_other(&key, &value) {
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

/// What a message's `schema` says (but its column list, which generic mode never reads),
/// owned: read once per `schema` the parser remembers, rather than from the copied nodes
/// of every message of the table.
#[derive(Debug, Default)]
struct SchemaFields {
    /// The [`Value::remembered`] id of the `schema` these were read from.
    id: Option<u64>,
    /// When these were last used, to forget the least recently used first.
    used: u64,
    db: Option<String>,
    schema: Option<String>,
    table: Option<String>,
    db_type: Option<String>,
    db_version: Option<String>,
    /// `None` when null, absent or empty.
    primary_key: Option<Vec<String>>,
    /// The members of `schema` and `schema.source` not read above (not null, first of
    /// duplicates), in order, rendered: metadata unless a key before them is the same.
    others: Vec<(String, String)>,
    /// The schema pass: the columns and types of `dataColumn`, the key of `primaryKey`;
    /// `None` when `dataColumn` is not a list of `{"name", "type"}` strings.
    wire: Option<Arc<WireSchema>>,
}

/// The fields of a message without a `schema`.
static NO_SCHEMA: SchemaFields = SchemaFields {
    id: None,
    used: 0,
    db: None,
    schema: None,
    table: None,
    db_type: None,
    db_version: None,
    primary_key: None,
    others: Vec::new(),
    wire: None,
};

/// What was read from each of the last [`Schemas::KEPT`] `schema`s the parser remembered,
/// by their ids: a table's `schema` is the same bytes in every one of its messages.
#[derive(Debug, Default)]
struct Schemas {
    kept: Vec<SchemaFields>,
    /// The fields of a `schema` the parser does not remember (over its size limit).
    other: SchemaFields,
    /// Counts lookups, for [`SchemaFields::used`].
    clock: u64,
    /// The schema pass: its wire schemas.
    wire: Option<Wire>,
}

/// The schema pass's memory: the wire schemas by their `dataColumn`'s bytes, and a parser
/// for a column list not seen before (the message's parser checks it without recording
/// it, as in a decode).
#[derive(Debug)]
struct Wire {
    schemas: SchemaCache,
    parser: json::Parser,
}

impl Schemas {
    /// As many as the parser remembers: one per table of a stream, mostly.
    const KEPT: usize = 8;

    /// The fields of `schema` (an object, or `None`): those read before from the same
    /// remembered value, else read now and kept under its id. A `schema` with an error is
    /// read again in each message, and its error returned each time.
    #[inline]
    fn read<'s>(&'s mut self, schema: Option<Value<'_>>) -> Result<&'s SchemaFields> {
        let Some(schema) = schema else {
            return Ok(&NO_SCHEMA);
        };
        self.clock += 1;
        let id = schema.remembered();
        let kept = match self
            .kept
            .iter()
            .position(|fields| id.is_some() && fields.id == id)
        {
            Some(at) => at,
            None => return self.read_new(schema, id),
        };
        let fields = &mut self.kept[kept];
        fields.used = self.clock;
        Ok(fields)
    }

    /// [`Schemas::read`] of a `schema` not read before.
    #[cold]
    #[inline(never)]
    fn read_new<'s>(&'s mut self, schema: Value<'_>, id: Option<u64>) -> Result<&'s SchemaFields> {
        let fields = SchemaFields {
            id,
            used: self.clock,
            ..SchemaFields::read(schema, self.wire.as_mut())?
        };
        if id.is_none() {
            self.other = fields;
            return Ok(&self.other);
        }
        let at = if self.kept.len() < Self::KEPT {
            self.kept.push(fields);
            self.kept.len() - 1
        } else {
            // Full: in place of the least recently used.
            let (at, _) = self
                .kept
                .iter()
                .enumerate()
                .min_by_key(|(_, fields)| fields.used)
                .unwrap_or((0, &NO_SCHEMA));
            self.kept[at] = fields;
            at
        };
        Ok(&self.kept[at])
    }
}

impl SchemaFields {
    /// Reads and checks the `schema` object (its column list aside, but in the schema pass,
    /// given its schemas).
    fn read(schema: Value<'_>, wire: Option<&mut Wire>) -> Result<Self> {
        let schema = Members::read(Some(schema), &SCHEMA);
        let [columns, keys, source] = schema.fields;
        let source = Members::read(field::object(source, "schema.source")?, &SOURCE);
        let [db_type, db_version, db_name, schema_name, table_name] = source.fields;
        let text = |value: Option<Str<'_>>| value.map(|s| s.text().into_owned());
        let db = text(field::string(db_name, "schema.source.dbName")?);
        let source_schema = text(field::string(schema_name, "schema.source.schemaName")?);
        let table = text(field::string(table_name, "schema.source.tableName")?);
        let db_type = text(field::string(db_type, "schema.source.dbType")?);
        let db_version = text(field::string(db_version, "schema.source.dbVersion")?);
        let primary_key = field::string_array(keys, "schema.primaryKey")?.map(|keys| {
            keys.items()
                .filter_map(|key| key.as_str())
                .map(|key| key.text().into_owned())
                .collect()
        });
        let mut others = Vec::new();
        schema.others(&mut others);
        source.others(&mut others);
        let wire = wire.and_then(|cache| wire_schema(cache, columns?, &primary_key));
        Ok(Self {
            id: None,
            used: 0,
            db,
            schema: source_schema,
            table,
            db_type,
            db_version,
            primary_key,
            others,
            wire,
        })
    }
}

/// The schema pass: `schema.dataColumn` (an array of objects whose `name` and `type` are
/// strings, else `None`) and the key, as a wire schema; by the column list's bytes, read
/// once per distinct list.
fn wire_schema(
    wire: &mut Wire,
    columns: Value<'_>,
    key: &Option<Vec<String>>,
) -> Option<Arc<WireSchema>> {
    use std::hash::{Hash, Hasher};
    // The column list is checked, not recorded ([`SKIP`]): its bytes name it.
    if !matches!(columns.kind(), Kind::Skipped | Kind::Array) {
        return None;
    }
    let mut hasher = std::hash::DefaultHasher::new();
    key.hash(&mut hasher);
    let Wire { schemas, parser } = wire;
    schemas.by_bytes(hasher.finish(), columns.raw(), || {
        let columns = parser.parse(columns.raw()).ok()?;
        if columns.kind() != Kind::Array {
            return None;
        }
        let pairs: Vec<(String, String)> = columns
            .items()
            .map(|c| {
                let text = |name: &str| Some(c.get(name)?.as_str()?.text().into_owned());
                Some((text("name")?, text("type")?))
            })
            .collect::<Option<_>>()?;
        Some(WireSchema::typed(Dialect::Datahub, pairs, key.clone()))
    })
}

/// The fields of one message, read and checked.
struct Event<'a> {
    top: Members<'a, 3>,
    schema: &'a SchemaFields,
    payload: Members<'a, 6>,
    timestamp: Members<'a, 3>,
    ddl: Members<'a, 2>,
    source_op: Str<'a>,
    event_time: Option<i64>,
    capture_time: Option<i64>,
    checkpoint: Option<i64>,
    /// `payload.timestamp.checkpointTime` as sent.
    checkpoint_sent: Option<Value<'a>>,
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
    fn read(message: Value<'a>, schemas: &'a mut Schemas) -> Result<Self> {
        if message.kind() != Kind::Object {
            return Err(Error::NotAnObject(message.describe()));
        }
        let top = Members::read(Some(message), &TOP);
        let [schema, payload, _version] = top.fields;
        let schema = field::object(schema, "schema")?;
        let payload = field::object(payload, "payload")?
            .ok_or_else(|| field::error("payload", "missing".into()))?;
        let payload = Members::read(Some(payload), &PAYLOAD);
        let [before, after, op, sequence_id, timestamp, ddl] = payload.fields;
        let source_op = field::string(op, "payload.op")?
            .ok_or_else(|| field::error("payload.op", "missing".into()))?;

        let schema = schemas.read(schema)?;

        let timestamp = field::object(timestamp, "payload.timestamp")?;
        let timestamp = Members::read(timestamp, &TIMESTAMP);
        let [event_time, system_time, checkpoint_sent] = timestamp.fields;
        let event_time = field::time(event_time, "payload.timestamp.eventTime")?;
        let capture_time = field::time(system_time, "payload.timestamp.systemTime")?;
        let checkpoint = field::time(checkpoint_sent, "payload.timestamp.checkpointTime")?;

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
            payload,
            timestamp,
            ddl,
            source_op,
            event_time,
            capture_time,
            checkpoint,
            checkpoint_sent,
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
        let schema = self.schema;
        for (column, text) in [
            (&mut rows.source_db, &schema.db),
            (&mut rows.source_schema, &schema.schema),
            (&mut rows.source_table, &schema.table),
        ] {
            match text {
                Some(text) => column.push_str(text),
                None => column.push_null(),
            }
        }
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
        match &schema.primary_key {
            Some(keys) => {
                for key in keys {
                    rows.primary_key.item(key);
                }
                rows.primary_key.close();
            }
            None => rows.primary_key.push_null(),
        }
        render::write_images(rows, self.before, self.after);
        render::push_text(&mut rows.ddl, self.ddl_text);
        if rows.schema_pass() {
            rows.metadata.push_null();
            if self.before.is_some() || self.after.is_some() {
                match &schema.wire {
                    Some(wire) => {
                        rows.observe(Some(Arc::clone(wire)));
                        // A `LONG` column of MySQL's `bigint unsigned` holds values no
                        // `bigint` does: the schema widens to what they need.
                        for image in [self.before, self.after].into_iter().flatten() {
                            rows.observe_values(image.members().map(|(name, value)| {
                                let text = match value.as_str() {
                                    Some(text) => Some(text.text()),
                                    None => value.number().map(Cow::Borrowed),
                                };
                                (name.text(), text)
                            }));
                        }
                    }
                    None => rows.observe(Some(Arc::new(WireSchema::names(
                        render::image_names(self.before, self.after),
                        schema.primary_key.clone(),
                    )))),
                }
            }
        } else {
            self.write_metadata(&mut rows.metadata);
        }
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
        let schema = self.schema;
        for (key, value) in [
            ("dbType", &schema.db_type),
            ("dbVersion", &schema.db_version),
        ] {
            if let Some(value) = value {
                map.entry(key, Some(value));
            }
        }
        if let Some(micros) = self.checkpoint {
            // A number token read as an integer is the integer's decimal text (JSON has no
            // leading zeros), but for "-0": copied rather than formatted again.
            match self.checkpoint_sent.and_then(|v| v.number()) {
                Some(token) if token != "-0" => map.entry("checkpointTime", Some(token)),
                _ => map.entry_int("checkpointTime", micros / 1000),
            }
        }
        if let Some(meta) = self.ddl_meta {
            map.entry_with("ddlMeta", |out| meta.write_to(out));
        }
        self.top.others_into(map);
        for (key, value) in &schema.others {
            map.insert(key, value);
        }
        self.payload.others_into(map);
        self.timestamp.others_into(map);
        self.ddl.others_into(map);
        map.close_or_null();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Array, ArrayRef, BinaryArray, RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema};

    use crate::decoder::{Decoder, Mode};
    use crate::formats::Options;
    use crate::typed::TypedSpec;

    /// A message whose `schema` is `schema` (JSON text) or absent.
    fn message(schema: Option<&str>, id: i64) -> String {
        let schema = schema.map_or(String::new(), |s| format!(r#""schema":{s},"#));
        format!(
            r#"{{{schema}"payload":{{"after":{{"dataColumn":{{"id":{id},"d":"{id}"}}}},"op":"INSERT","sequenceId":"{id}","timestamp":{{"eventTime":1714550400000}}}},"version":"0.0.1"}}"#
        )
    }

    /// A `schema` for table `t{table}` with key `key`, the source's members before `extra`.
    fn schema(table: usize, key: &str, extra: &str) -> String {
        format!(
            r#"{{"dataColumn":[{{"name":"id","type":"LONG"}},{{"name":"d","type":"DATETIME"}}],"primaryKey":["{key}"],"note":{{"n":{table}}},"source":{{"dbType":"MySQL","dbName":"shop","tableName":"t{table}","region":"r{table}"{extra}}}}}"#
        )
    }

    /// One message per call: by a decoder that keeps what it read from each remembered
    /// `schema`, and by a new decoder for each message, which reads every one afresh.
    fn decode_each(options: &Options, messages: &[String]) -> Vec<(RecordBatch, RecordBatch)> {
        let new = || Decoder::with_options("datahub-blob", Mode::Permissive, options).unwrap();
        let mut kept = new();
        messages
            .iter()
            .map(|m| {
                let values: ArrayRef = Arc::new(BinaryArray::from(vec![Some(m.as_bytes())]));
                let a = kept.decode(&values, None, false).unwrap().batch;
                let b = new().decode(&values, None, true).unwrap().batch;
                (a, b)
            })
            .collect()
    }

    fn text_of(batch: &RecordBatch, column: &str) -> Option<String> {
        let column = batch.column_by_name(column).unwrap();
        let column = column.as_any().downcast_ref::<StringArray>().unwrap();
        column.is_valid(0).then(|| column.value(0).to_string())
    }

    /// Ten tables take turns (more than the parser remembers, so values are forgotten and
    /// their places reused), a table's `schema` changes mid-stream (an ALTER), and some
    /// `schema`s are wrong, absent, repeated or escaped: every row is the row a decoder
    /// that never saw the stream before writes.
    #[test]
    fn schemas_read_once_give_the_rows_read_every_time() {
        let mut messages = Vec::new();
        for round in 0..3 {
            for table in 0..10 {
                messages.push(message(
                    Some(&schema(table, "id", "")),
                    round * 10 + table as i64,
                ));
            }
            // Table 0 altered: a new key; then back to its first schema.
            messages.push(message(Some(&schema(0, "d", "")), 100 + round));
            messages.push(message(Some(&schema(0, "id", "")), 200 + round));
        }
        let bad = schema(3, "id", r#","dbVersion":5"#);
        let escaped = schema(4, "\\u0069d", r#","schemaName":"s\"1","region":"again""#);
        let duplicated = format!(
            r#"{},"schema":{}"#,
            schema(5, "id", ""),
            schema(6, "id", "")
        );
        for _ in 0..2 {
            for schema in [Some(bad.as_str()), Some(&escaped), Some(&duplicated)] {
                messages.push(message(schema, 7));
            }
            for schema in [
                None,
                Some("null"),
                Some("{}"),
                Some("[1]"),
                Some(r#"{"x":1}"#),
            ] {
                messages.push(message(schema, 8));
            }
            // The payload missing, with a good schema: an error, then the schema is read.
            messages.push(format!(r#"{{"schema":{}}}"#, schema(1, "id", "")));
            messages.push(message(Some(&schema(1, "id", "")), 9));
        }
        let rows = decode_each(&Options::default(), &messages);
        for (i, (kept, fresh)) in rows.iter().enumerate() {
            assert_eq!(kept, fresh, "message {i}: {}", messages[i]);
        }
        let (first, _) = &rows[0];
        assert_eq!(text_of(first, "source_table").as_deref(), Some("t0"));
        let (altered, _) = &rows[10];
        let keys = altered.column_by_name("primary_key").unwrap();
        assert_eq!(format!("{keys:?}").matches("\"d\"").count(), 1);
        let error = |at: usize| text_of(&rows[at].0, "error").unwrap_or_default();
        assert!(
            error(36).contains("schema.source.dbVersion"),
            "{}",
            error(36)
        );
        assert!(
            error(46).contains("schema.source.dbVersion"),
            "{}",
            error(46)
        );
        assert!(error(42).contains("schema"), "{}", error(42));
        assert_eq!(text_of(&rows[38].0, "source_table").as_deref(), Some("t5"));
        let metadata = format!("{:?}", rows[37].0.column_by_name("metadata").unwrap());
        assert!(
            metadata.contains("\"r4\"") && !metadata.contains("again"),
            "{metadata}"
        );
    }

    /// `checkpointTime` in metadata is the integer's decimal text however it was sent.
    #[test]
    fn checkpoint_time_is_the_integer_text() {
        use arrow_array::MapArray;
        let mut decoder = Decoder::new("datahub-blob", Mode::Permissive).unwrap();
        for (sent, expected) in [
            ("1714550400000", Some("1714550400000")),
            ("-0", Some("0")),
            ("0", Some("0")),
            ("-25", Some("-25")),
            (r#""0017""#, Some("17")),
            (r#""-0""#, Some("0")),
            ("-1", None),
            ("null", None),
        ] {
            let text = format!(
                r#"{{"payload":{{"op":"INSERT","timestamp":{{"checkpointTime":{sent}}}}}}}"#
            );
            let values: ArrayRef = Arc::new(BinaryArray::from(vec![Some(text.as_bytes())]));
            let batch = decoder.decode(&values, None, false).unwrap().batch;
            assert_eq!(text_of(&batch, "error"), None, "{sent}");
            let metadata = batch.column_by_name("metadata").unwrap();
            let metadata = metadata.as_any().downcast_ref::<MapArray>().unwrap();
            let found = metadata.is_valid(0).then(|| {
                let entries = metadata.value(0);
                let keys = entries
                    .column(0)
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .unwrap();
                let values = entries
                    .column(1)
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .unwrap();
                (0..keys.len())
                    .find(|&i| keys.value(i) == "checkpointTime")
                    .map(|i| values.value(i).to_string())
            });
            assert_eq!(found.flatten().as_deref(), expected, "{sent}");
        }
    }

    /// Typed mode routes each row by the `schema`'s source, read once per table: the same
    /// typed rows as a decoder that reads it afresh, across an ALTER and forgotten values.
    #[test]
    fn typed_rows_follow_the_schemas_read_once() {
        let table = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("d", DataType::Int64, true),
        ]));
        let tables = (0..10)
            .map(|t| (format!("shop.t{t}"), table.clone()))
            .collect();
        let options = Options {
            typed: Some(Arc::new(TypedSpec::tables(tables).unwrap())),
            ..Options::default()
        };
        let mut messages = Vec::new();
        for round in 0..2 {
            for table in (0..10).chain([0, 9]) {
                messages.push(message(
                    Some(&schema(table, "id", "")),
                    round * 10 + table as i64,
                ));
            }
            messages.push(message(Some(&schema(2, "d", "")), 50 + round));
        }
        for (i, (kept, fresh)) in decode_each(&options, &messages).iter().enumerate() {
            assert_eq!(kept, fresh, "message {i}");
            assert!(text_of(kept, "error").is_none(), "message {i}");
            let table = kept.column_by_name("table").unwrap();
            assert_eq!(table.null_count(), 0, "message {i}");
        }
    }
}
