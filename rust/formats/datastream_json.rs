//! `datastream-json`: one event of a Google Cloud Datastream JSON file. Every rule is
//! written down in docs/formats/datastream-json.md, which the Python fallback follows too;
//! the JSON and field rules are datahub-blob's ([`crate::json`]).

use std::borrow::Cow;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::events::{EventBuilder, MapColumn};
use crate::formats::datastream::LogPlace;
use crate::formats::FormatDecoder;
use crate::json::{self, field, Kind, Name, Str, Value};
use crate::limits::Limits;
use crate::render;
use crate::schemas::{SchemaCache, WireSchema};
use crate::sink::Sink;

/// The format's name.
pub const FORMAT: &str = "datastream-json";

/// Decodes `datastream-json` lines. Holds no state but the parser's buffers.
#[derive(Debug, Default)]
pub struct DatastreamJson {
    parser: json::Parser,
    /// The schema pass's wire schemas.
    schemas: SchemaCache,
}

impl DatastreamJson {
    /// A decoder whose messages are held to `limits`.
    pub fn new(limits: &Limits) -> Self {
        Self {
            parser: json::Parser::default().limited(limits),
            schemas: SchemaCache::default(),
        }
    }
}

impl FormatDecoder for DatastreamJson {
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
            let event = Event::read(message)?;
            if rows.schema_pass() {
                // The JSON carries the payload's column names and the key, no types.
                if let Some(payload) = event.payload {
                    let names = render::image_names(Some(payload), None);
                    let key = keys(event.primary_key);
                    rows.observe(Some(schemas.intern(WireSchema::names(names, key))));
                }
            }
            event.write(rows);
            Ok(())
        })
    }
}

/// `source_metadata.primary_keys` as names; `None` when absent or empty.
fn keys(primary_key: Option<Value<'_>>) -> Option<Vec<String>> {
    let names: Vec<String> = primary_key?
        .items()
        .filter_map(|key| key.as_str().map(|k| k.text().into_owned()))
        .collect();
    (!names.is_empty()).then_some(names)
}

/// Top-level members: the first five have columns (or feed one) and stay out of metadata;
/// the rest lead the metadata in this order.
const TOP: [Name; 10] = [
    Name::new("uuid"),
    Name::new("read_timestamp"),
    Name::new("source_timestamp"),
    Name::new("source_metadata"),
    Name::new("payload"),
    Name::new("stream_name"),
    Name::new("read_method"),
    Name::new("object"),
    Name::new("schema_key"),
    Name::new("sort_keys"),
];

/// `source_metadata` members: the first eight have columns and stay out of metadata.
const META: [Name; 14] = [
    Name::new("database"),
    Name::new("schema"),
    Name::new("table"),
    Name::new("collection"),
    Name::new("object_name"),
    Name::new("change_type"),
    Name::new("tx_id"),
    Name::new("primary_keys"),
    Name::new("log_file"),
    Name::new("log_position"),
    Name::new("scn"),
    Name::new("rs_id"),
    Name::new("ssn"),
    Name::new("lsn"),
];

const MAX_MS: i64 = i64::MAX / 1000;

/// A time as microseconds: epoch milliseconds, or UTC text.
fn time(value: Option<Value<'_>>, path: &str) -> Result<Option<i64>> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let bad = || {
        field::error(
            path,
            format!(
                "expected epoch milliseconds or UTC text, got {}",
                value.describe()
            ),
        )
    };
    let ms = match (value.number(), value.as_str()) {
        (Some(token), _) => field::parse_i64(token).ok_or_else(bad)?,
        (_, Some(text)) => {
            let text = text.text();
            let digits = text.strip_prefix('-').unwrap_or(&text);
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                field::parse_i64(&text).ok_or_else(bad)?
            } else {
                return utc_text(&text).map(Some).ok_or_else(bad);
            }
        }
        _ => return Err(bad()),
    };
    if !(-MAX_MS..=MAX_MS).contains(&ms) {
        return Err(field::error(
            path,
            format!("{ms} milliseconds is out of range"),
        ));
    }
    Ok(Some(ms * 1000))
}

/// `YYYY-MM-DD[ T]HH:MM:SS[.f{1,9}][Z]` as microseconds since the epoch.
fn utc_text(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let digits = b.get(range)?;
        digits.iter().try_fold(0i64, |n, &d| {
            d.is_ascii_digit().then(|| n * 10 + (d - b'0') as i64)
        })
    };
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b' ' | b'T') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut rest = &b[19..];
    let mut micros = 0;
    if let Some(fraction) = rest.strip_prefix(b".") {
        let n = fraction.iter().take_while(|d| d.is_ascii_digit()).count();
        if n == 0 || n > 9 {
            return None;
        }
        for i in 0..6 {
            micros = micros * 10
                + fraction
                    .get(i)
                    .filter(|_| i < n)
                    .map_or(0, |d| (d - b'0') as i64);
        }
        rest = &fraction[n..];
    }
    if !(rest.is_empty() || rest == b"Z") {
        return None;
    }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    const DAYS: [i64; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if year < 1 || !(1..=12).contains(&month) {
        return None;
    }
    let month_days = DAYS[month as usize - 1] + i64::from(month == 2 && leap);
    if day < 1 || day > month_days || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let days = crate::text::days_from_civil(year, month, day);
    Some(((days * 24 + hour) * 60 + minute) * 60_000_000 + second * 1_000_000 + micros)
}

struct Event<'a> {
    message: Value<'a>,
    meta: Option<Value<'a>>,
    top: [Option<Value<'a>>; 10],
    op: &'static str,
    change: Option<Str<'a>>,
    db: Option<Str<'a>>,
    schema: Option<Str<'a>>,
    table: Option<Str<'a>>,
    tx_id: Option<Str<'a>>,
    primary_key: Option<Value<'a>>,
    event_time: Option<i64>,
    capture_time: Option<i64>,
    uuid: Option<Str<'a>>,
    payload: Option<Value<'a>>,
    /// The event's source and backfill flag, from `read_method`.
    place: LogPlace<'static>,
    log_file: Option<Cow<'a, str>>,
    log_position: Option<u64>,
    scn: Option<u64>,
    rs_id: Option<Cow<'a, str>>,
    ssn: Option<u64>,
    lsn: Option<Cow<'a, str>>,
    sort_keys: Option<Value<'a>>,
}

impl<'a> Event<'a> {
    fn read(message: Value<'a>) -> Result<Self> {
        if message.kind() != Kind::Object {
            return Err(Error::NotAnObject(message.describe()));
        }
        let top = json::slots(Some(message), &TOP);
        let [uuid, read_ts, source_ts, meta, payload, _, read_method, _, _, sort_keys] = top;
        let read_method = field::string(read_method, "read_method")?;
        let uuid = field::string(uuid, "uuid")?;
        let capture_time = time(read_ts, "read_timestamp")?;
        let event_time = time(source_ts, "source_timestamp")?;
        let meta = field::object(meta, "source_metadata")?;
        let payload = field::object(payload, "payload")?;
        let [database, schema, table, collection, object_name, change, tx_id, keys, log_file, log_position, scn, rs_id, ssn, lsn] =
            json::slots(meta, &META);
        let change = field::string(change, "source_metadata.change_type")?;
        let db = field::string(database, "source_metadata.database")?;
        let schema = field::string(schema, "source_metadata.schema")?;
        let mut table = field::string(table, "source_metadata.table")?;
        if table.is_none() {
            table = field::string(collection, "source_metadata.collection")?;
        }
        if table.is_none() {
            table = field::string(object_name, "source_metadata.object_name")?;
        }
        let tx_id = field::string(tx_id, "source_metadata.tx_id")?;
        let primary_key = field::string_array(keys, "source_metadata.primary_keys")?;
        let log_file = field::string(log_file, "source_metadata.log_file")?;
        let log_position = field::unsigned(log_position, "source_metadata.log_position")?;
        let scn = field::unsigned(scn, "source_metadata.scn")?;
        let rs_id = field::string(rs_id, "source_metadata.rs_id")?;
        let ssn = field::unsigned(ssn, "source_metadata.ssn")?;
        let lsn = field::string(lsn, "source_metadata.lsn")?;

        let method = read_method.map(|m| m.text()).unwrap_or_default();
        let place = LogPlace::new(&method);
        let op = place.op(change.map(|c| c.text()).as_deref());
        let text = |s: Option<Str<'a>>| s.map(|s| s.text());
        Ok(Self {
            message,
            meta,
            top,
            op,
            change,
            db,
            schema,
            table,
            tx_id,
            primary_key,
            event_time,
            capture_time,
            uuid,
            payload,
            place,
            log_file: text(log_file),
            log_position,
            scn,
            rs_id: text(rs_id),
            ssn,
            lsn: text(lsn),
            sort_keys,
        })
    }

    fn write(&self, rows: &mut EventBuilder) {
        if let Some(typed) = rows.typed() {
            // Datastream sends MySQL BLOB/BINARY values as hex text (docs/typed.md).
            let method = self.top[6].and_then(|v| v.as_str());
            typed.hints.hex = method.is_some_and(|m| m.text().starts_with("mysql"));
        }
        rows.op.push_str(self.op);
        render::push_text(&mut rows.source_op, self.change);
        render::push_text(&mut rows.source_db, self.db);
        render::push_text(&mut rows.source_schema, self.schema);
        render::push_text(&mut rows.source_table, self.table);
        rows.event_time.push(self.event_time);
        rows.capture_time.push(self.capture_time);
        render::push_text(&mut rows.tx_id, self.tx_id);
        let mut place = LogPlace {
            event_time: self.event_time,
            log_file: self.log_file.as_deref(),
            log_position: self.log_position,
            scn: self.scn,
            rs_id: self.rs_id.as_deref(),
            ssn: self.ssn,
            lsn: self.lsn.as_deref(),
            sort_numbers: None,
            ..self.place
        };
        let numbers = place
            .takes_sort_keys()
            .then(|| sort_key_numbers(self.sort_keys))
            .flatten();
        place.sort_numbers = numbers.as_deref();
        place.write_position(&mut rows.position);
        place.write_sequence(&mut rows.sequence, &mut Vec::new());
        render::push_text(&mut rows.event_id, self.uuid);
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
        let before_side = matches!(self.op, "delete" | "update_before");
        let (before, after) = if before_side {
            (self.payload, None)
        } else {
            (None, self.payload)
        };
        render::write_images(rows, before, after);
        rows.ddl.push_null();
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
        for (i, name) in TOP.iter().enumerate().skip(5) {
            if let Some(value) = self.top[i].filter(|v| !v.is_null()) {
                map.entry_with(name.text(), |out| {
                    value.render_into(out);
                });
            }
        }
        for (key, value) in self.meta.iter().flat_map(|m| m.members()) {
            if !META[..8].iter().any(|name| key.is(name)) {
                render::add_metadata(map, &key.text(), value);
            }
        }
        for (key, value) in self.message.members() {
            if !TOP[..5].iter().any(|name| key.is(name)) {
                render::add_metadata(map, &key.text(), value);
            }
        }
        map.close_or_null();
    }
}

/// `sort_keys` as integers when it is a non-empty array of non-negative number tokens.
fn sort_key_numbers(sort_keys: Option<Value<'_>>) -> Option<Vec<u64>> {
    let keys = sort_keys.filter(|k| k.kind() == Kind::Array && !k.is_empty())?;
    keys.items()
        .map(|k| {
            let n = field::parse_i64(k.number()?)?;
            u64::try_from(n).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::utc_text;

    #[test]
    fn utc_texts() {
        assert_eq!(utc_text("1970-01-01 00:00:00"), Some(0));
        assert_eq!(
            utc_text("2021-12-25T05:42:04.408Z"),
            Some(1_640_410_924_408_000)
        );
        assert_eq!(
            utc_text("2021-12-25 05:42:04.408123999"),
            Some(1_640_410_924_408_123)
        );
        assert_eq!(utc_text("2024-02-29 00:00:00"), Some(1_709_164_800_000_000));
        assert_eq!(utc_text("1969-12-31 23:59:59.5"), Some(-500_000));
        for bad in [
            "2023-02-29 00:00:00",
            "2021-13-01 00:00:00",
            "2021-12-25 24:00:00",
            "2021-12-25 05:42:04.",
            "2021-12-25 05:42:04+08:00",
            "2021-12-25",
            "2021-12-25 05:42:04.1234567890",
        ] {
            assert_eq!(utc_text(bad), None, "{bad}");
        }
    }
}
