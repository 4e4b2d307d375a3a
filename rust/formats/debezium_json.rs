//! `debezium-json`: Debezium's JSON converter output (with or without the Connect
//! `schema`/`payload` wrapper), and Lindorm's "Debezium Format V2.0". Every rule is written
//! down in docs/formats/debezium-json.md, which the Python fallback follows too; the JSON
//! and field rules are datahub-blob's ([`crate::json`]).

use bytes::Bytes;

use crate::decoder::Sink;
use crate::error::{Error, Result};
use crate::events::{EventBuilder, MapColumn};
use crate::formats::FormatDecoder;
use crate::json::{self, field, Kind, Name, Str, Value};
use crate::limits::Limits;
use crate::sequence::OrderKey;
use crate::typed::{Hint, Hints, Unit};

/// The format's name.
pub const FORMAT: &str = "debezium-json";

/// Decodes `debezium-json` messages. Holds no state between messages but the parser's
/// buffers.
#[derive(Debug, Default)]
pub struct DebeziumJson {
    parser: json::Parser,
}

impl DebeziumJson {
    /// A decoder whose messages are held to `limits`.
    pub fn new(limits: &Limits) -> Self {
        Self {
            parser: json::Parser::default().limited(limits),
        }
    }
}

impl FormatDecoder for DebeziumJson {
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
                if let Some(schema) = message.get_name(&SCHEMA) {
                    typed.hints = connect_hints(schema, message.get_name(&PAYLOAD));
                }
            }
            match Event::read(message)? {
                Some(event) => event.write(rows),
                None => rows.push_bare("tombstone", None),
            }
            Ok(())
        })
    }
}

const SCHEMA: Name = Name::new("schema");

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
                _ => continue,
            };
            hints.columns.entry(field).or_insert(hint);
        }
    }
    hints
}
const PAYLOAD: Name = Name::new("payload");

/// The envelope's members with a column of their own (the rest go to metadata).
const ENVELOPE: [Name; 12] = [
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
];

/// The `source` members read for columns; the first five name the table and stay out of
/// metadata, the others are kept there too.
const SOURCE: [Name; 13] = [
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
];
const TX_ID: Name = Name::new("txId");
const TRANSACTION: [Name; 3] = [
    Name::new("id"),
    Name::new("total_order"),
    Name::new("data_collection_order"),
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

/// An image: `before` / `after`, an object or null.
fn image<'a>(value: Option<Value<'a>>, path: &str) -> Result<Option<Value<'a>>> {
    field::object(value, path)
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
    },
    Time {
        nanos: Option<i64>,
    },
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
    tx_number: Option<i64>,
    log: Log<'a>,
    before: Option<Value<'a>>,
    after: Option<Value<'a>>,
    ddl: Option<Str<'a>>,
    total_order: Option<i64>,
    collection_order: Option<i64>,
}

impl<'a> Event<'a> {
    /// The message's event, or `None` for Connect's tombstone (a null `payload`).
    fn read(message: Value<'a>) -> Result<Option<Self>> {
        if message.kind() != Kind::Object {
            return Err(Error::NotAnObject(message.describe()));
        }
        let envelope = match (message.get_name(&SCHEMA), message.get_name(&PAYLOAD)) {
            (Some(_), Some(payload)) => match field::object(Some(payload), "payload")? {
                Some(payload) => payload,
                None => return Ok(None),
            },
            _ => message,
        };
        let [before, after, source, op, ts_ms, ts_us, ts_ns, transaction, ddl, database, status, id] =
            json::slots(Some(envelope), &ENVELOPE);
        let mut source_op = field::string(op, "op")?;
        let ddl = field::string(ddl, "ddl")?;
        let status = field::string(status, "status")?;
        let source = field::object(source, "source")?;
        let transaction = field::object(transaction, "transaction")?;
        let before = image(before, "before")?;
        let after = image(after, "after")?;
        let [ms, us, ns] = times([ts_ms, ts_us, ts_ns], "")?;
        let capture_time = micros(ns, us, ms, "")?;

        let [db, schema, namespace, table, collection, s_ms, s_us, s_ns, file, pos, row, lsn, gtid] =
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
        let tx_number = field::integer(source.and_then(|s| s.get_name(&TX_ID)), "source.txId")?;
        let [tx, total, collection_order] = json::slots(transaction, &TRANSACTION);
        let mut tx_id = field::string(tx, "transaction.id")?;
        let total_order = field::integer(total, "transaction.total_order")?;
        let collection_order =
            field::integer(collection_order, "transaction.data_collection_order")?;

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
        let log = match (file, lsn) {
            (Some(file), _) => Log::MySql { file, pos, row },
            (None, Some(lsn)) => Log::Postgres { lsn },
            (None, None) => Log::Time {
                nanos: match (s_ns, s_us, s_ms) {
                    (Some(ns), _, _) => Some(ns),
                    (None, Some(us), _) => us.checked_mul(1000),
                    (None, None, Some(ms)) => ms.checked_mul(1_000_000),
                    (None, None, None) => None,
                },
            },
        };
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
            tx_number,
            log,
            before,
            after,
            ddl,
            total_order,
            collection_order,
        }))
    }

    fn write(&self, rows: &mut EventBuilder) {
        rows.op.push_str(self.op);
        json::push_text(&mut rows.source_op, self.source_op);
        json::push_text(&mut rows.source_db, self.db);
        json::push_text(&mut rows.source_schema, self.schema);
        json::push_text(&mut rows.source_table, self.table);
        rows.event_time.push(self.event_time);
        rows.capture_time.push(self.capture_time);
        match (self.tx_id, self.tx_number) {
            (Some(tx), _) => json::push_text(&mut rows.tx_id, Some(tx)),
            (None, Some(number)) => rows.tx_id.push_str(itoa::Buffer::new().format(number)),
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
            Log::Postgres { lsn } => {
                let text = itoa::Buffer::new().format(*lsn).to_string();
                rows.position.push_str(&text);
                rows.sequence.push_with(|out| {
                    OrderKey(out).u64(*lsn);
                });
                if read {
                    rows.event_id.push_null();
                } else {
                    rows.event_id.push_str(&text);
                }
            }
            Log::Time { nanos } => {
                rows.position.push_null();
                match nanos {
                    Some(nanos) => rows.sequence.push_with(|out| {
                        OrderKey(out).i64(*nanos);
                    }),
                    None => rows.sequence.push_null(),
                }
                rows.event_id.push_null();
            }
        }
        rows.primary_key.push_null();
        json::write_images(rows, self.before, self.after);
        json::push_text(&mut rows.ddl, self.ddl);
        self.write_metadata(&mut rows.metadata);
        rows.error.push_null();
        rows.raw.push_null();
        rows.end_row();
    }

    fn write_metadata(&self, map: &mut MapColumn) {
        for (key, value) in self.source.iter().flat_map(|s| s.members()) {
            if !SOURCE[..5].iter().any(|name| key.is(name)) {
                json::add_metadata(map, &key.text(), value);
            }
        }
        for (name, value) in [
            ("total_order", self.total_order),
            ("data_collection_order", self.collection_order),
        ] {
            if let Some(value) = value {
                if !map.has_key(name) {
                    map.entry_int(name, value);
                }
            }
        }
        for (key, value) in self.envelope.members() {
            if !ENVELOPE.iter().any(|name| key.is(name)) {
                json::add_metadata(map, &key.text(), value);
            }
        }
        map.close_or_null();
    }
}
