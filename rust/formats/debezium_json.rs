//! `debezium-json`: Debezium's JSON converter output (with or without the Connect
//! `schema`/`payload` wrapper), and Lindorm's "Debezium Format V2.0". Every rule is written
//! down in docs/formats/debezium-json.md, which the Python fallback follows too; the JSON
//! and field rules are datahub-blob's ([`crate::json`]).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::events::{EventBuilder, MapColumn};
use crate::formats::FormatDecoder;
use crate::json::{self, extended, field, Kind, Name, Str, Value};
use crate::limits::Limits;
use crate::render::{self, Unavailable};
use crate::schemas::{Dialect, SchemaCache, WireSchema};
use crate::sequence::OrderKey;
use crate::sink::Sink;
use crate::typed::{Hint, Hints, Unit};

/// The format's name.
pub const FORMAT: &str = "debezium-json";

/// Debezium's default `unavailable.value.placeholder`.
pub const UNAVAILABLE_VALUE: &str = "__debezium_unavailable_value";

/// The Kafka header that marks the insert half of a key change, holding the old key.
const OLD_KEY: &str = "__debezium.oldkey header";

/// Decodes `debezium-json` messages. Holds no state between messages but the parser's
/// buffers.
#[derive(Debug, Default)]
pub struct DebeziumJson {
    parser: json::Parser,
    /// Parses the JSON held in strings: MongoDB's documents, `vgtid`, `sequence`.
    inner: json::Parser,
    /// Parses the old key of a key change (the `__debezium.oldkey` header).
    header: json::Parser,
    /// The placeholder of values the connector did not read (left out of the images).
    unavailable: Option<Unavailable>,
    /// The schema pass: what it keeps between messages.
    wire: Option<Box<Wire>>,
}

/// The schema pass's memory: the columns of each Connect `schema` seen, by its bytes (a
/// table's `schema` is the same bytes in each of its messages), and the wire schemas.
#[derive(Debug, Default)]
struct Wire {
    connect: HashMap<u64, Vec<Known>>,
    held: usize,
    schemas: SchemaCache,
}

/// A Connect schema's columns and their types ([`connect_columns`]).
type Columns = Arc<[(String, String)]>;

/// A Connect schema's bytes and its columns (none where it describes no table).
type Known = (Vec<u8>, Option<Columns>);

impl DebeziumJson {
    /// A decoder whose messages are held to `limits`, with Debezium's default placeholder;
    /// for the schema pass (`crate::schemas`) when `schema_pass`.
    pub fn new(limits: &Limits, schema_pass: bool) -> Self {
        Self::with_placeholder(limits, schema_pass, UNAVAILABLE_VALUE)
    }

    /// [`DebeziumJson::new`], whose images leave out the values equal to `placeholder` (the
    /// connector's `unavailable.value.placeholder`; an empty text leaves every value in).
    pub fn with_placeholder(limits: &Limits, schema_pass: bool, placeholder: &str) -> Self {
        let parser = if schema_pass {
            // A table's Connect `schema` is the same bytes in each of its messages.
            json::Parser::default().remembering(&REMEMBER)
        } else {
            json::Parser::default()
        };
        Self {
            parser: parser.limited(limits),
            inner: json::Parser::default().limited(limits),
            header: json::Parser::default().limited(limits),
            unavailable: Unavailable::new(placeholder),
            wire: schema_pass.then(Box::default),
        }
    }

    fn decode_message(
        &mut self,
        sink: &mut Sink,
        ordinal: i64,
        value: Bytes,
        key: Option<&str>,
        old_key: Option<&[u8]>,
    ) -> Result<()> {
        let (parser, inner, header) = (&mut self.parser, &mut self.inner, &mut self.header);
        let (unavailable, wire) = (self.unavailable.as_ref(), &mut self.wire);
        sink.events(ordinal, &value, |rows| {
            let message = parser.parse(&value)?;
            if let Some(typed) = rows.typed() {
                if let Some(schema) = message.get_name(&SCHEMA) {
                    typed.hints = connect_hints(schema, message.get_name(&PAYLOAD));
                }
            }
            match Event::read(message, inner)? {
                Some(mut event) => {
                    if let (Some(old_key), "insert") = (old_key, event.op) {
                        event.moved_from(moved_key(header, old_key)?);
                    }
                    if let Some(wire) = wire.as_deref_mut() {
                        let schema = wire.schema(&event, message.get_name(&SCHEMA), key, inner);
                        rows.observe(schema);
                    }
                    event.write(rows, unavailable)
                }
                None => rows.push_bare("tombstone", None),
            }
            Ok(())
        })
    }
}

impl FormatDecoder for DebeziumJson {
    /// `key`: in the schema pass, the Kafka message key (its members name the key
    /// columns); not read otherwise.
    fn decode(
        &mut self,
        sink: &mut Sink,
        ordinal: i64,
        value: Bytes,
        key: Option<&str>,
    ) -> Result<()> {
        self.decode_message(sink, ordinal, value, key, None)
    }

    fn decode_with_old_key(
        &mut self,
        sink: &mut Sink,
        ordinal: i64,
        value: Bytes,
        key: Option<&str>,
        old_key: &[u8],
    ) -> Result<()> {
        self.decode_message(sink, ordinal, value, key, Some(old_key))
    }
}

/// The old key of a key change: the `__debezium.oldkey` header's JSON object (the key
/// converter's, Connect's `schema`/`payload` wrapper taken off).
#[inline(never)]
fn moved_key<'h>(parser: &'h mut json::Parser, bytes: &'h [u8]) -> Result<Value<'h>> {
    let value = parser.parse(bytes).map_err(|e| {
        field::error(
            OLD_KEY,
            format!(
                "{e} (give Kafka Connect header.converter=org.apache.kafka.connect.json.JsonConverter)"
            ),
        )
    })?;
    let value = match (value.get_name(&SCHEMA), value.get_name(&PAYLOAD)) {
        (Some(_), Some(payload)) => payload,
        _ => value,
    };
    match field::object(Some(value), OLD_KEY)? {
        Some(key) => Ok(key),
        None => Err(field::error(OLD_KEY, "expected an object, got null".into())),
    }
}

const SCHEMA: Name = Name::new("schema");
/// What the schema pass's parser remembers: the Connect `schema`.
const REMEMBER: [Name; 1] = [SCHEMA];

impl Wire {
    /// The wire schema of a row change: the Connect schema's columns of its `after` (else
    /// `before`) struct with their types, else the images' column names; the key from the
    /// Kafka message key, else Lindorm's HBase `ROW`, else MongoDB's `_id`. `None` for
    /// events without images.
    fn schema(
        &mut self,
        event: &Event<'_>,
        connect: Option<Value<'_>>,
        key: Option<&str>,
        inner: &mut json::Parser,
    ) -> Option<Arc<WireSchema>> {
        if event.before.is_none() && event.after.is_none() {
            return None;
        }
        let columns = connect.and_then(|schema| self.columns(schema));
        let key = key
            .and_then(|key| key_names(key, inner))
            .or_else(|| {
                let lindorm = event
                    .source
                    .is_some_and(|s| s.get("namespace").is_some() && s.get("connector").is_none());
                (lindorm && event.has_column("ROW")).then(|| vec!["ROW".to_string()])
            })
            .or_else(|| {
                // As `primary_key` says it: MongoDB's changes (not its control events).
                let control = matches!(event.op, "begin" | "commit" | "heartbeat" | "ddl");
                (event.mongo && !control).then(|| vec!["_id".to_string()])
            });
        match columns {
            Some(columns) => {
                // By the columns' object: the same bytes of `schema` share it.
                let mut hasher = std::hash::DefaultHasher::new();
                (Arc::as_ptr(&columns) as *const u8 as usize, &key).hash(&mut hasher);
                let same = |held: &WireSchema| held.key == key && held.has_columns(&columns);
                let schema = self.schemas.get(hasher.finish(), same, || {
                    WireSchema::typed(Dialect::Connect, columns.iter().cloned(), key.clone())
                });
                Some(schema)
            }
            None => Some(
                self.schemas
                    .intern(WireSchema::names(event.column_names(), key)),
            ),
        }
    }
}

impl Wire {
    /// [`connect_columns`] of a `schema`, read once per distinct bytes.
    fn columns(&mut self, schema: Value<'_>) -> Option<Columns> {
        let raw = schema.raw();
        let hash = u64::from(crc32fast::hash(raw)) | (raw.len() as u64) << 32;
        if let Some(held) = self.connect.get(&hash) {
            if let Some((_, columns)) = held.iter().find(|(bytes, _)| bytes.as_slice() == raw) {
                return columns.clone();
            }
        }
        if self.held >= 4096 {
            self.connect.clear();
            self.held = 0;
        }
        let columns: Option<Columns> = connect_columns(schema).map(Arc::from);
        self.connect
            .entry(hash)
            .or_default()
            .push((raw.to_vec(), columns.clone()));
        self.held += 1;
        columns
    }
}

/// The Connect schema's columns of the `after` struct (else `before`'s), each as its name
/// and type: the schema type, then the logical name with its parameters (but Debezium's
/// own `__debezium.*` ones): `int64`, `int64 io.debezium.time.MicroTimestamp`, `bytes
/// org.apache.kafka.connect.data.Decimal(scale=2,connect.decimal.precision=10)`. `None`
/// when the schema has no such struct, or a column without a name or a type.
fn connect_columns(schema: Value<'_>) -> Option<Vec<(String, String)>> {
    let text = |v: Option<Value<'_>>| v.and_then(|v| v.as_str()).map(|s| s.text().into_owned());
    let fields = schema.get("fields").filter(|f| f.kind() == Kind::Array)?;
    let image = |name: &str| {
        fields
            .items()
            .find(|f| text(f.get("field")).as_deref() == Some(name))
    };
    let image = image("after").or_else(|| image("before"))?;
    let columns = image.get("fields").filter(|f| f.kind() == Kind::Array)?;
    columns
        .items()
        .map(|column| {
            let name = text(column.get("field"))?;
            let mut spelled = text(column.get("type"))?;
            if let Some(logical) = text(column.get("name")) {
                spelled.push(' ');
                spelled.push_str(&logical);
                let mut params = Vec::new();
                for (key, value) in column.get("parameters").iter().flat_map(|p| p.members()) {
                    let key = key.text();
                    if key.starts_with("__debezium") {
                        continue;
                    }
                    let mut rendered = Vec::new();
                    value.render_into(&mut rendered);
                    params.push(format!("{key}={}", String::from_utf8_lossy(&rendered)));
                }
                if !params.is_empty() {
                    spelled.push_str(&format!("({})", params.join(",")));
                }
            }
            Some((name, spelled))
        })
        .collect()
}

/// The key columns a Kafka message key names: the members of its object (of its `payload`
/// in Connect's wrapper). `None` for a key that is not such an object.
fn key_names(key: &str, inner: &mut json::Parser) -> Option<Vec<String>> {
    let value = inner.parse(key.as_bytes()).ok()?;
    if value.kind() != Kind::Object {
        return None;
    }
    let object = match (value.get_name(&SCHEMA), value.get_name(&PAYLOAD)) {
        (Some(_), Some(payload)) => payload,
        _ => value,
    };
    (object.kind() == Kind::Object).then(|| {
        object
            .members()
            .map(|(k, _)| k.text().into_owned())
            .collect()
    })
}

/// Typed mode's hints from the message's Connect schema: for each column of the
/// `before`/`after` structs, how its logical type is written (docs/typed.md). A `Decimal`
/// is base64 bytes only where the payload sends it as a string: with the converter's
/// `decimal.format=NUMERIC` it is a JSON number, read as decimal text.
fn connect_hints(schema: Value<'_>, payload: Option<Value<'_>>) -> Hints {
    let sent_as_number = |column: &str| {
        let value = |image: &str| payload?.get(image)?.get(column).filter(|v| !v.is_null());
        value("after")
            .or_else(|| value("before"))
            .is_some_and(|v| v.kind() == Kind::Number)
    };
    let mut hints = Hints::default();
    let text = |v: Option<Value<'_>>| v.and_then(|v| v.as_str()).map(|s| s.text().into_owned());
    let Some(fields) = schema.get("fields").filter(|f| f.kind() == Kind::Array) else {
        return hints;
    };
    for image in fields.items() {
        let name = text(image.get("field"));
        if !matches!(name.as_deref(), Some("before" | "after")) {
            continue;
        }
        let Some(columns) = image.get("fields").filter(|f| f.kind() == Kind::Array) else {
            continue;
        };
        for column in columns.items() {
            let (Some(field), Some(logical)) =
                (text(column.get("field")), text(column.get("name")))
            else {
                continue;
            };
            let hint = match logical.as_str() {
                "org.apache.kafka.connect.data.Decimal" => {
                    let scale = column
                        .get("parameters")
                        .and_then(|p| text(p.get("scale")))
                        .and_then(|s| s.parse().ok());
                    match scale {
                        Some(scale) if !sent_as_number(&field) => Hint::DecimalBytes(scale),
                        _ => continue,
                    }
                }
                "io.debezium.data.VariableScaleDecimal" => Hint::VariableScaleDecimal,
                "io.debezium.time.Date" | "org.apache.kafka.connect.data.Date" => Hint::Days,
                "io.debezium.time.Timestamp" | "org.apache.kafka.connect.data.Timestamp" => {
                    Hint::Epoch(Unit::Millis)
                }
                "io.debezium.time.MicroTimestamp" => Hint::Epoch(Unit::Micros),
                "io.debezium.time.NanoTimestamp" => Hint::Epoch(Unit::Nanos),
                "io.debezium.time.Time" | "org.apache.kafka.connect.data.Time" => {
                    Hint::Time(Unit::Millis)
                }
                "io.debezium.time.MicroTime" => Hint::Time(Unit::Micros),
                "io.debezium.time.NanoTime" => Hint::Time(Unit::Nanos),
                _ => continue,
            };
            hints.columns.entry(field).or_insert(hint);
        }
    }
    hints
}
const PAYLOAD: Name = Name::new("payload");

/// The envelope's members read in one pass: the first 12 have a column of their own (the
/// rest go to metadata); MongoDB's last three stand in for missing images (and are kept in
/// metadata too).
const ENVELOPE: [Name; 15] = [
    Name::new("before"),
    Name::new("after"),
    Name::new("source"),
    Name::new("op"),
    Name::new("ts_ms"),
    Name::new("ts_us"),
    Name::new("ts_ns"),
    Name::new("transaction"),
    Name::new("ddl"),
    Name::new("databaseName"),
    Name::new("status"),
    Name::new("id"),
    Name::new("updateDescription"),
    Name::new("patch"),
    Name::new("filter"),
];
/// The envelope's members kept out of metadata.
const COLUMNS: usize = 12;

/// The `source` members read for columns; the first five name the table and stay out of
/// metadata, the others are kept there too.
const SOURCE: [Name; 14] = [
    Name::new("db"),
    Name::new("schema"),
    Name::new("namespace"),
    Name::new("table"),
    Name::new("collection"),
    Name::new("ts_ms"),
    Name::new("ts_us"),
    Name::new("ts_ns"),
    Name::new("file"),
    Name::new("pos"),
    Name::new("row"),
    Name::new("lsn"),
    Name::new("gtid"),
    Name::new("txId"),
];
/// PostgreSQL's `[last commit LSN, LSN]`.
const SEQUENCE: Name = Name::new("sequence");
/// The `source` members of the connectors other than MySQL and PostgreSQL, read in a
/// second pass only for them.
const OTHER: [Name; 9] = [
    Name::new("connector"),
    Name::new("scn"),
    Name::new("commit_scn"),
    Name::new("txSeq"),
    Name::new("commit_lsn"),
    Name::new("change_lsn"),
    Name::new("event_serial_no"),
    Name::new("ord"),
    Name::new("vgtid"),
];
const TRANSACTION: [Name; 5] = [
    Name::new("id"),
    Name::new("total_order"),
    Name::new("data_collection_order"),
    Name::new("transaction_epoch"),
    Name::new("transaction_rank"),
];

/// The largest |milliseconds| whose microseconds fit an i64.
const MAX_MS: i64 = i64::MAX / 1000;

/// `ts_ns` / 1000, else `ts_us`, else `ts_ms` × 1000.
fn micros(ns: Option<i64>, us: Option<i64>, ms: Option<i64>, path: &str) -> Result<Option<i64>> {
    Ok(match (ns, us, ms) {
        (Some(ns), _, _) => Some(ns / 1000),
        (None, Some(us), _) => Some(us),
        (None, None, Some(ms)) if (-MAX_MS..=MAX_MS).contains(&ms) => Some(ms * 1000),
        (None, None, Some(ms)) => {
            return Err(field::error(
                &format!("{path}ts_ms"),
                format!("{ms} milliseconds is out of range"),
            ))
        }
        (None, None, None) => None,
    })
}

/// The three `ts_*` members of an object, checked as integers.
fn times(values: [Option<Value<'_>>; 3], path: &str) -> Result<[Option<i64>; 3]> {
    let [ms, us, ns] = values;
    Ok([
        field::integer(ms, &format!("{path}ts_ms"))?,
        field::integer(us, &format!("{path}ts_us"))?,
        field::integer(ns, &format!("{path}ts_ns"))?,
    ])
}

/// A row image as sent: an object, or a string holding a MongoDB Extended JSON document.
enum Image<'a> {
    Json(Value<'a>),
    Owned(extended::Image),
}

/// An image: `before` / `after`, an object, a string (MongoDB) or null.
fn image<'a>(
    value: Option<Value<'a>>,
    path: &str,
    inner: &mut json::Parser,
) -> Result<Option<Image<'a>>> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    if let Some(text) = value.as_str() {
        return mongo_image(text, path, inner).map(Some);
    }
    Ok(field::object(Some(value), path)?.map(Image::Json))
}

/// A MongoDB document in a string, as an image.
#[inline(never)]
fn mongo_image<'a>(text: Str<'_>, path: &str, inner: &mut json::Parser) -> Result<Image<'a>> {
    Ok(Image::Owned(extended::document(inner, &text.text(), path)?))
}

/// Adds `name: null` for each removed field not in the image already.
fn remove_fields(image: &mut extended::Image, names: Option<Value<'_>>) {
    for name in names.iter().flat_map(|n| n.items()) {
        let name = name
            .as_str()
            .map(|s| s.text().into_owned())
            .unwrap_or_default();
        if !image.iter().any(|(key, _)| *key == name) {
            image.push((name, None));
        }
    }
}

/// The partial `after` of a MongoDB update without the full document: from
/// `updateDescription` (updated fields, then removed fields as nulls), else from the older
/// connector's `patch` (`$set` and `$unset`, or a whole replacement document).
#[inline(never)]
fn partial_after(
    update: Option<Value<'_>>,
    patch: Option<Value<'_>>,
    inner: &mut json::Parser,
) -> Result<Option<extended::Image>> {
    if let Some(update) = field::object(update, "updateDescription")? {
        let updated = field::string(
            update.get("updatedFields"),
            "updateDescription.updatedFields",
        )?;
        let removed = field::string_array(
            update.get("removedFields"),
            "updateDescription.removedFields",
        )?;
        let mut image = match updated {
            Some(text) => {
                extended::document(inner, &text.text(), "updateDescription.updatedFields")?
            }
            None => Vec::new(),
        };
        remove_fields(&mut image, removed);
        return Ok(Some(image));
    }
    let Some(patch) = field::string(patch, "patch")? else {
        return Ok(None);
    };
    let text = patch.text();
    let value = inner
        .parse(text.as_bytes())
        .map_err(|e| field::error("patch", e.to_string()))?;
    let document = extended::object(value, "patch")?;
    if !document
        .members()
        .any(|(key, _)| key.text().starts_with('$'))
    {
        let image = document
            .members()
            .map(|(key, value)| (key.text().into_owned(), extended::render(value)))
            .collect();
        return Ok(Some(image));
    }
    let mut image = extended::Image::new();
    if let Some(set) = field::object(document.get("$set"), "patch.$set")? {
        for (key, value) in set.members() {
            image.push((key.text().into_owned(), extended::render(value)));
        }
    }
    if let Some(unset) = field::object(document.get("$unset"), "patch.$unset")? {
        for (key, _) in unset.members() {
            let key = key.text().into_owned();
            if !image.iter().any(|(k, _)| *k == key) {
                image.push((key, None));
            }
        }
    }
    Ok(Some(image))
}

/// Where the change is in the source's log.
enum Log<'a> {
    MySql {
        file: Str<'a>,
        pos: Option<u64>,
        row: Option<u64>,
    },
    Postgres {
        lsn: u64,
        /// The last commit LSN of `source.sequence`, when the connector sends it.
        commit: Option<u64>,
    },
    /// Every other connector: the key, position and id worked out when read.
    Other {
        sequence: Option<Vec<u8>>,
        position: Option<String>,
        event_id: Option<String>,
    },
}

/// A source member that is a string or an integer, as text.
fn text_or_integer(value: Option<Value<'_>>, path: &str) -> Result<Option<String>> {
    match value.and_then(|v| v.as_str()) {
        Some(text) => Ok(Some(text.text().into_owned())),
        None => Ok(field::integer(value, path)?.map(|n| n.to_string())),
    }
}

/// PostgreSQL's `source.sequence`: `["last commit LSN", "LSN"]` as a JSON string; its
/// first LSN (0 when null).
#[inline(never)]
fn last_commit(value: Option<Value<'_>>, inner: &mut json::Parser) -> Result<Option<u64>> {
    const PATH: &str = "source.sequence";
    let Some(text) = field::string(value, PATH)? else {
        return Ok(None);
    };
    let text = text.text();
    let array = inner
        .parse(text.as_bytes())
        .map_err(|e| field::error(PATH, e.to_string()))?;
    if array.kind() != Kind::Array || array.len() != 2 {
        let problem = format!("expected an array of two LSNs, got {}", array.describe());
        return Err(field::error(PATH, problem));
    }
    Ok(Some(
        field::unsigned(array.items().next(), PATH)?.unwrap_or(0),
    ))
}

/// Vitess's `vgtid` when it is comparable: one shard whose GTID set is one server's one
/// interval (`MySQL56/<uuid>:1-68`); `(keyspace, shard, uuid, last transaction)`.
fn vgtid_key(text: &str, inner: &mut json::Parser) -> Option<(String, String, String, u64)> {
    let array = inner.parse(text.as_bytes()).ok()?;
    if array.kind() != Kind::Array || array.len() != 1 {
        return None;
    }
    let shard = array.items().next()?;
    let string = |name: &str| shard.get(name)?.as_str().map(|s| s.text().into_owned());
    let (keyspace, name, gtid) = (string("keyspace")?, string("shard")?, string("gtid")?);
    let set = gtid.split_once('/').map_or(gtid.as_str(), |(_, set)| set);
    let (uuid, interval) = set.split_once(':')?;
    if uuid.is_empty() || interval.contains([':', ',']) {
        return None;
    }
    let last = interval.rsplit_once('-').map_or(interval, |(_, last)| last);
    if !last.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let last = u64::try_from(field::parse_i64(last)?).ok()?;
    Some((keyspace, name, uuid.to_string(), last))
}

struct Event<'a> {
    envelope: Value<'a>,
    source: Option<Value<'a>>,
    op: &'static str,
    source_op: Option<Str<'a>>,
    db: Option<Str<'a>>,
    schema: Option<Str<'a>>,
    table: Option<Str<'a>>,
    event_time: Option<i64>,
    capture_time: Option<i64>,
    tx_id: Option<Str<'a>>,
    tx_text: Option<String>,
    log: Log<'a>,
    mongo: bool,
    before: Option<Image<'a>>,
    after: Option<Image<'a>>,
    ddl: Option<Str<'a>>,
    orders: [Option<i64>; 4],
}

impl<'a> Event<'a> {
    /// The message's event, or `None` for Connect's tombstone (a null `payload`).
    fn read(message: Value<'a>, inner: &mut json::Parser) -> Result<Option<Self>> {
        if message.kind() != Kind::Object {
            return Err(Error::NotAnObject(message.describe()));
        }
        // The Connect wrapper, with its schema or without (`{"payload": ...}` alone).
        let payload = message.get_name(&PAYLOAD);
        let wrapped = payload.is_some()
            && (message.get_name(&SCHEMA).is_some()
                || message.all_members().all(|(key, _)| key.is(&PAYLOAD)));
        let envelope = match payload {
            Some(payload) if wrapped => match field::object(Some(payload), "payload")? {
                Some(payload) => payload,
                None => return Ok(None),
            },
            _ => message,
        };
        let [before, after, source, op, ts_ms, ts_us, ts_ns, transaction, ddl, database, status, id, update, patch, filter] =
            json::slots(Some(envelope), &ENVELOPE);
        let mut source_op = field::string(op, "op")?;
        let ddl = field::string(ddl, "ddl")?;
        let status = field::string(status, "status")?;
        let source = field::object(source, "source")?;
        let transaction = field::object(transaction, "transaction")?;
        let mut before = image(before, "before", inner)?;
        let mut after = image(after, "after", inner)?;
        let [ms, us, ns] = times([ts_ms, ts_us, ts_ns], "")?;
        let capture_time = micros(ns, us, ms, "")?;

        let [db, schema, namespace, table, collection, s_ms, s_us, s_ns, file, pos, row, lsn, gtid, tx_number] =
            json::slots(source, &SOURCE);
        let [s_ms, s_us, s_ns] = times([s_ms, s_us, s_ns], "source.")?;
        let event_time = micros(s_ns, s_us, s_ms, "source.")?;
        let mut db = field::string(db, "source.db")?;
        let schema = match field::string(schema, "source.schema")? {
            Some(schema) => Some(schema),
            None => field::string(namespace, "source.namespace")?,
        };
        let table = match field::string(table, "source.table")? {
            Some(table) => Some(table),
            None => field::string(collection, "source.collection")?,
        };
        let file = field::string(file, "source.file")?;
        let pos = field::unsigned(pos, "source.pos")?;
        let row = field::unsigned(row, "source.row")?;
        let lsn = field::unsigned(lsn, "source.lsn")?;
        let gtid = field::string(gtid, "source.gtid")?;
        let tx_number = text_or_integer(tx_number, "source.txId")?;
        let [tx, total, collection_order, epoch, rank] = json::slots(transaction, &TRANSACTION);
        let mut tx_id = field::string(tx, "transaction.id")?;
        let total_order = field::integer(total, "transaction.total_order")?;
        let collection_order =
            field::integer(collection_order, "transaction.data_collection_order")?;
        let epoch = field::integer(epoch, "transaction.transaction_epoch")?;
        let rank = field::integer(rank, "transaction.transaction_rank")?;

        let op = if let Some(op) = source_op {
            match &*op.text() {
                "r" => "read",
                "c" => "insert",
                "u" => "update",
                "d" => "delete",
                "t" => "truncate",
                _ => "other",
            }
        } else if ddl.is_some() {
            db = field::string(database, "databaseName")?;
            "ddl"
        } else if let Some(status) = status {
            source_op = Some(status);
            tx_id = field::string(id, "id")?;
            match &*status.text() {
                "BEGIN" => "begin",
                "END" => "commit",
                _ => "other",
            }
        } else if !envelope.is_empty()
            && envelope
                .all_members()
                .all(|(key, _)| ENVELOPE[4..7].iter().any(|name| key.is(name)))
        {
            "heartbeat" // the heartbeat topic: {"ts_ms": ...}
        } else {
            return Err(field::error("op", "missing".into()));
        };
        if tx_id.is_none() {
            tx_id = gtid;
        }
        let nanos = match (s_ns, s_us, s_ms) {
            (Some(ns), _, _) => Some(ns),
            (None, Some(us), _) => us.checked_mul(1000),
            (None, None, Some(ms)) => ms.checked_mul(1_000_000),
            (None, None, None) => None,
        };
        let total = total_order.map(|n| n.max(0) as u64);
        let read = op == "read";
        let mut mongo = false;
        let log = if let Some(file) = file {
            Log::MySql { file, pos, row }
        } else if let Some(lsn) = lsn {
            Log::Postgres {
                lsn,
                commit: last_commit(source.and_then(|s| s.get_name(&SEQUENCE)), inner)?,
            }
        } else {
            Self::other_log(
                source, read, nanos, total, epoch, rank, &tx_number, &mut mongo, inner,
            )?
        };

        // MongoDB without full documents: the partial image of an update, the older
        // connector's `filter` (the document's `_id`) as the image before.
        if after.is_none() && (update.is_some() || patch.is_some()) {
            if let Some(partial) = partial_after(update, patch, inner)? {
                after = Some(Image::Owned(partial));
            }
        }
        if before.is_none() && filter.is_some() {
            if let Some(filter) = field::string(filter, "filter")? {
                before = Some(Image::Owned(extended::document(
                    inner,
                    &filter.text(),
                    "filter",
                )?));
            }
        }
        mongo |= matches!(before, Some(Image::Owned(_))) || matches!(after, Some(Image::Owned(_)));

        Ok(Some(Self {
            envelope,
            source,
            op,
            source_op,
            db,
            schema,
            table,
            event_time,
            capture_time,
            tx_id,
            tx_text: tx_number,
            log,
            mongo,
            before,
            after,
            ddl,
            orders: [total_order, collection_order, epoch, rank],
        }))
    }

    /// The column names of the images, `before`'s then those only `after` has.
    fn column_names(&self) -> Vec<String> {
        let json = |image: &Option<Image<'a>>| match image {
            Some(Image::Json(value)) => Some(*value),
            _ => None,
        };
        let mut names = render::image_names(json(&self.before), json(&self.after));
        for image in [&self.before, &self.after] {
            if let Some(Image::Owned(entries)) = image {
                for (key, _) in entries {
                    if !names.iter().any(|n| n == key) {
                        names.push(key.clone());
                    }
                }
            }
        }
        names
    }

    /// Whether an image has a column of this name.
    fn has_column(&self, name: &str) -> bool {
        [&self.before, &self.after].iter().any(|image| match image {
            Some(Image::Json(value)) => value.get(name).is_some(),
            Some(Image::Owned(entries)) => entries.iter().any(|(k, _)| k == name),
            None => false,
        })
    }

    /// Where the change is for the connectors other than MySQL and PostgreSQL (the
    /// `sequence` table in docs/formats/debezium-json.md).
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn other_log(
        source: Option<Value<'a>>,
        read: bool,
        nanos: Option<i64>,
        total: Option<u64>,
        epoch: Option<i64>,
        rank: Option<i64>,
        tx_number: &Option<String>,
        mongo: &mut bool,
        inner: &mut json::Parser,
    ) -> Result<Log<'a>> {
        let [connector, scn, commit_scn, tx_seq, commit_lsn, change_lsn, serial, ord, vgtid] =
            json::slots(source, &OTHER);
        let connector = field::string(connector, "source.connector")?;
        let is_connector = |name: &str| connector.is_some_and(|c| c.eq_str(name));
        let present = |v: Option<Value<'_>>| v.is_some_and(|v| !v.is_null());
        Ok(if present(scn) || present(commit_scn) {
            // Oracle: commit SCN, transaction, SCN, order in the transaction.
            let scn = field::unsigned(scn, "source.scn")?;
            let commit = field::unsigned(commit_scn, "source.commit_scn")?;
            let tx_seq = field::unsigned(tx_seq, "source.txSeq")?;
            let order = tx_seq.or(total);
            let commit_or = commit.or(scn).unwrap_or(0);
            let mut key = Vec::with_capacity(40);
            OrderKey(&mut key)
                .u64(commit_or)
                .str(tx_number.as_deref().unwrap_or("").as_bytes())
                .u64(scn.unwrap_or(0))
                .u64(order.unwrap_or(0));
            Log::Other {
                sequence: Some(key),
                position: scn.map(|n| n.to_string()),
                event_id: match (read, order) {
                    (false, Some(order)) => {
                        Some(format!("{commit_or}:{}:{order}", scn.unwrap_or(0)))
                    }
                    _ => None,
                },
            }
        } else if present(commit_lsn) || present(change_lsn) {
            if is_connector("informix") {
                // Informix: decimal LSNs.
                let commit = field::unsigned(commit_lsn, "source.commit_lsn")?;
                let change = field::unsigned(change_lsn, "source.change_lsn")?;
                let mut key = Vec::with_capacity(16);
                OrderKey(&mut key)
                    .u64(commit.unwrap_or(0))
                    .u64(change.unwrap_or(0));
                Log::Other {
                    sequence: Some(key),
                    position: change.or(commit).map(|n| n.to_string()),
                    event_id: match (read, change) {
                        (false, Some(change)) => Some(format!("{}:{change}", commit.unwrap_or(0))),
                        _ => None,
                    },
                }
            } else {
                // SQL Server and Db2: fixed-width hex LSN text, compared as text.
                let commit = field::string(commit_lsn, "source.commit_lsn")?.map(|s| s.text());
                let change = field::string(change_lsn, "source.change_lsn")?.map(|s| s.text());
                let serial = field::unsigned(serial, "source.event_serial_no")?;
                let mut key = Vec::with_capacity(64);
                OrderKey(&mut key)
                    .str(commit.as_deref().unwrap_or("").as_bytes())
                    .str(change.as_deref().unwrap_or("").as_bytes())
                    .u64(serial.unwrap_or(0));
                let event_id = match (read, &change) {
                    (false, Some(change)) => {
                        let mut id = format!("{}:{change}", commit.as_deref().unwrap_or(""));
                        if let Some(serial) = serial {
                            id.push_str(&format!(":{serial}"));
                        }
                        Some(id)
                    }
                    _ => None,
                };
                Log::Other {
                    sequence: Some(key),
                    position: change.or(commit).map(|s| s.into_owned()),
                    event_id,
                }
            }
        } else if let Some(vgtid) = field::string(vgtid, "source.vgtid")? {
            // Vitess: the ordered transaction metadata, else a one-shard VGTID.
            let text = vgtid.text();
            let mut key = Vec::with_capacity(48);
            let sequence = match (epoch, rank) {
                (Some(epoch), Some(rank)) => {
                    OrderKey(&mut key)
                        .i64(epoch)
                        .i64(rank)
                        .u64(total.unwrap_or(0));
                    Some(key)
                }
                _ => match vgtid_key(&text, inner) {
                    Some((keyspace, shard, uuid, last)) => {
                        OrderKey(&mut key)
                            .str(keyspace.as_bytes())
                            .str(shard.as_bytes())
                            .str(uuid.as_bytes())
                            .u64(last)
                            .u64(total.unwrap_or(0));
                        Some(key)
                    }
                    None => time_key(nanos, total),
                },
            };
            Log::Other {
                sequence,
                position: Some(text.into_owned()),
                event_id: None,
            }
        } else if present(ord) || is_connector("mongodb") {
            // MongoDB: the oplog time (seconds, ordinal), then the order in the transaction.
            *mongo = true;
            let ord = field::unsigned(ord, "source.ord")?.unwrap_or(0);
            let sequence = nanos.map(|nanos| {
                let mut key = Vec::with_capacity(24);
                OrderKey(&mut key)
                    .i64(nanos)
                    .u64(ord)
                    .u64(total.unwrap_or(0));
                key
            });
            let position = nanos.map(|nanos| format!("{}:{ord}", nanos.div_euclid(1_000_000_000)));
            let event_id = match (&position, read) {
                (Some(position), false) => Some(match total {
                    Some(total) => format!("{position}:{total}"),
                    None => position.clone(),
                }),
                _ => None,
            };
            Log::Other {
                sequence,
                position,
                event_id,
            }
        } else {
            Log::Other {
                sequence: time_key(nanos, total),
                position: None,
                event_id: None,
            }
        })
    }

    /// The insert half of a key change (its message came with the old key): an `update`
    /// from the old key (`before`, the key columns) to this row (`after`).
    fn moved_from(&mut self, old_key: Value<'a>) {
        self.op = "update";
        self.before = Some(Image::Json(old_key));
    }

    fn write(&self, rows: &mut EventBuilder, unavailable: Option<&Unavailable>) {
        rows.op.push_str(self.op);
        render::push_text(&mut rows.source_op, self.source_op);
        render::push_text(&mut rows.source_db, self.db);
        render::push_text(&mut rows.source_schema, self.schema);
        render::push_text(&mut rows.source_table, self.table);
        rows.event_time.push(self.event_time);
        rows.capture_time.push(self.capture_time);
        match (self.tx_id, &self.tx_text) {
            (Some(tx), _) => render::push_text(&mut rows.tx_id, Some(tx)),
            (None, Some(text)) => rows.tx_id.push_str(text),
            (None, None) => rows.tx_id.push_null(),
        }
        let read = self.op == "read";
        match &self.log {
            Log::MySql { file, pos, row } => {
                match pos {
                    Some(pos) => rows.position.push_with(|out| {
                        file.write_to(out);
                        out.push(b':');
                        out.extend_from_slice(itoa::Buffer::new().format(*pos).as_bytes());
                    }),
                    None => rows.position.push_null(),
                }
                let text = file.text();
                let (pos, row) = (pos.unwrap_or(0), row.unwrap_or(0));
                rows.sequence.push_with(|out| {
                    OrderKey(out).str(text.as_bytes()).u64(pos).u64(row);
                });
                if read {
                    rows.event_id.push_null();
                } else {
                    rows.event_id.push_with(|out| {
                        let mut number = itoa::Buffer::new();
                        out.extend_from_slice(text.as_bytes());
                        out.push(b':');
                        out.extend_from_slice(number.format(pos).as_bytes());
                        out.push(b':');
                        out.extend_from_slice(number.format(row).as_bytes());
                    });
                }
            }
            Log::Postgres { lsn, commit } => {
                let text = itoa::Buffer::new().format(*lsn).to_string();
                rows.position.push_str(&text);
                rows.sequence.push_with(|out| {
                    let mut key = OrderKey(out);
                    if let Some(commit) = commit {
                        key.u64(*commit);
                    }
                    key.u64(*lsn);
                });
                if read {
                    rows.event_id.push_null();
                } else {
                    rows.event_id.push_str(&text);
                }
            }
            Log::Other {
                sequence,
                position,
                event_id,
            } => {
                match sequence {
                    Some(key) => rows.sequence.push_bytes(key),
                    None => rows.sequence.push_null(),
                }
                rows.position.push_nonempty(position.as_deref());
                match event_id {
                    Some(id) => rows.event_id.push_str(id),
                    None => rows.event_id.push_null(),
                }
            }
        }
        if self.mongo && !matches!(self.op, "begin" | "commit" | "heartbeat" | "ddl") {
            rows.primary_key.item("_id");
            rows.primary_key.close();
        } else {
            rows.primary_key.push_null();
        }
        match (&self.before, &self.after) {
            _ if rows.schema_pass() => {
                rows.before.push_null();
                rows.after.push_null();
            }
            (None | Some(Image::Json(_)), None | Some(Image::Json(_))) => {
                let json = |image: &Option<Image<'a>>| match image {
                    Some(Image::Json(value)) => Some(*value),
                    _ => None,
                };
                render::write_images_except(
                    rows,
                    json(&self.before),
                    json(&self.after),
                    unavailable,
                );
            }
            (before, after) => write_images(rows, before, after, unavailable),
        }
        render::push_text(&mut rows.ddl, self.ddl);
        if rows.schema_pass() {
            rows.metadata.push_null();
        } else {
            self.write_metadata(&mut rows.metadata);
        }
        rows.error.push_null();
        rows.raw.push_null();
        rows.end_row();
    }

    fn write_metadata(&self, map: &mut MapColumn) {
        for (key, value) in self.source.iter().flat_map(|s| s.members()) {
            if !SOURCE[..5].iter().any(|name| key.is(name)) {
                render::add_metadata(map, &key.text(), value);
            }
        }
        for (name, value) in TRANSACTION[1..].iter().zip(self.orders) {
            if let Some(value) = value {
                if !map.has_key(name.text()) {
                    map.entry_int(name.text(), value);
                }
            }
        }
        for (key, value) in self.envelope.members() {
            if !ENVELOPE[..COLUMNS].iter().any(|name| key.is(name)) {
                render::add_metadata(map, &key.text(), value);
            }
        }
        map.close_or_null();
    }
}

/// The source time in nanoseconds, then the order in the transaction where sent.
fn time_key(nanos: Option<i64>, total: Option<u64>) -> Option<Vec<u8>> {
    let nanos = nanos?;
    let mut key = Vec::with_capacity(16);
    let mut order = OrderKey(&mut key);
    order.i64(nanos);
    if let Some(total) = total {
        order.u64(total);
    }
    Some(key)
}

/// Both images where one or both came from MongoDB's Extended JSON: text maps, or typed
/// mode's structs converted from the same text.
fn write_images(
    rows: &mut EventBuilder,
    before: &Option<Image<'_>>,
    after: &Option<Image<'_>>,
    unavailable: Option<&Unavailable>,
) {
    match rows.typed().filter(|typed| typed.direct()) {
        Some(typed) => {
            for (is_after, image) in [(false, before), (true, after)] {
                match image {
                    None => typed.close_image(is_after, false),
                    Some(Image::Json(value)) => {
                        render::convert_image_except(typed, is_after, Some(*value), unavailable)
                    }
                    Some(Image::Owned(entries)) => {
                        typed.open_image(is_after);
                        for (key, value) in entries {
                            typed.image_value(is_after, key, value.as_deref());
                        }
                        typed.close_image(is_after, true);
                    }
                }
            }
            rows.before.push_null();
            rows.after.push_null();
        }
        None => {
            for (map, image) in [(&mut rows.before, before), (&mut rows.after, after)] {
                match image {
                    None => map.push_null(),
                    Some(Image::Json(value)) => {
                        render::write_image_except(map, Some(*value), unavailable)
                    }
                    Some(Image::Owned(entries)) => {
                        for (key, value) in entries {
                            map.entry(key, value.as_deref());
                        }
                        map.close();
                    }
                }
            }
        }
    }
}
