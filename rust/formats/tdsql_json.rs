//! `tdsql-json`: TencentDB for MariaDB / TDSQL subscription binlog JSON, one event per
//! message. Every rule is written down in docs/formats/tdsql-json.md, which the Python
//! fallback follows too. The JSON and field rules are datahub-blob's ([`crate::json`]).
//!
//! As in datahub-blob, a message's fields are read and checked first, then the row is
//! written: only the row images can still fail while writing (an item of the wrong type),
//! and the sink takes a failed message's half-written row back.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::events::{EventBuilder, MapColumn};
use crate::formats::FormatDecoder;
use crate::json::{self, field, Kind, Name, Str, Value};
use crate::limits::Limits;
use crate::render;
use crate::schemas::WireSchema;
use crate::sequence::OrderKey;
use crate::sink::Sink;

/// The format's name.
pub const FORMAT: &str = "tdsql-json";

/// The largest |seconds| whose microseconds fit an i64.
const MAX_SECONDS: i64 = i64::MAX / 1_000_000;

/// Decodes `tdsql-json` messages; holds the `columns` option and the parser's buffers.
#[derive(Debug, Default)]
pub struct TdsqlJson {
    parser: json::Parser,
    /// `db.table` → the names of its positional values.
    columns: HashMap<String, Names>,
    /// `db.table` of the message being decoded (reused).
    table_key: String,
}

/// One table's column names, and the positions past them whose keys a name already took.
#[derive(Debug, Default)]
struct Names {
    names: Vec<String>,
    /// Sorted positions `i >= names.len()` whose key (`"7"`) is one of the names: a value
    /// there is left out, the first key wins (docs/events.md, "Map entries").
    taken: Vec<usize>,
}

impl Names {
    fn new(names: Vec<String>) -> Self {
        // A position's key is its canonical decimal text: "07" or "+7" never match one.
        let canonical = |n: &str| {
            !n.is_empty()
                && n.bytes().all(|b| b.is_ascii_digit())
                && (n == "0" || !n.starts_with('0'))
        };
        let mut taken: Vec<usize> = names
            .iter()
            .filter(|n| canonical(n))
            .filter_map(|n| n.parse().ok())
            .filter(|&i| i >= names.len())
            .collect();
        taken.sort_unstable();
        Self { names, taken }
    }

    /// The key of value `i`: its name, its position, or `None` when a name took that.
    fn key<'a>(&'a self, i: usize, position: &'a mut itoa::Buffer) -> Option<&'a str> {
        match self.names.get(i) {
            Some(name) => Some(name),
            None if self.taken.binary_search(&i).is_ok() => None,
            None => Some(position.format(i)),
        }
    }
}

impl TdsqlJson {
    /// A decoder naming the images of each `db.table` in `columns`.
    /// Messages are held to `limits`.
    pub fn new(columns: Option<HashMap<String, Vec<String>>>, limits: &Limits) -> Result<Self> {
        let columns = columns.unwrap_or_default();
        for (table, names) in &columns {
            let mut seen = std::collections::HashSet::new();
            if let Some(name) = names.iter().find(|n| !seen.insert(n.as_str())) {
                return Err(Error::Columns(format!(
                    "columns['{table}'] names the column '{name}' twice"
                )));
            }
        }
        Ok(Self {
            columns: columns
                .into_iter()
                .map(|(table, names)| (table, Names::new(names)))
                .collect(),
            parser: json::Parser::default().limited(limits),
            ..Self::default()
        })
    }
}

impl FormatDecoder for TdsqlJson {
    fn decode(
        &mut self,
        sink: &mut Sink,
        ordinal: i64,
        value: Bytes,
        _key: Option<&str>,
    ) -> Result<()> {
        let Self {
            parser,
            columns,
            table_key,
        } = self;
        sink.events(ordinal, &value, |rows| {
            let message = parser.parse(&value)?;
            let event = Event::read(message)?;
            let names = match (event.db, event.table) {
                (Some(db), Some(table)) if !columns.is_empty() => {
                    table_key.clear();
                    table_key.push_str(&db.text());
                    table_key.push('.');
                    table_key.push_str(&table.text());
                    columns.get(table_key.as_str())
                }
                _ => None,
            };
            event.write(rows, names)
        })
    }
}

fn op_of(source_op: &str) -> &'static str {
    match source_op {
        "insert" => "insert",
        "update" => "update",
        "delete" => "delete",
        "gtid" => "begin",
        "xid" => "commit",
        "query" => "ddl",
        _ => "other",
    }
}

// The fields with a column of their own, in one pass over the members; every other field
// goes to metadata. `filename` and `orgoffset` make `position` and stay in metadata too.
const FIELDS: [Name; 12] = [
    Name::new("eventtypestr"),
    Name::new("db"),
    Name::new("table"),
    Name::new("begintime"),
    Name::new("gtid"),
    Name::new("event_index"),
    Name::new("sub_event_index"),
    Name::new("where"),
    Name::new("field"),
    Name::new("sql"),
    Name::new("filename"),
    Name::new("orgoffset"),
];
/// How many of [`FIELDS`] stay out of metadata.
const OWN_COLUMN: usize = 10;

/// The fields of one message, read and checked.
struct Event<'a> {
    message: Value<'a>,
    others: bool,
    source_op: Str<'a>,
    db: Option<Str<'a>>,
    table: Option<Str<'a>>,
    begin_micros: Option<i64>,
    gtid: Option<Str<'a>>,
    event_index: Option<u64>,
    sub_index: Option<u64>,
    before: Option<Value<'a>>,
    after: Option<Value<'a>>,
    sql: Option<Str<'a>>,
    filename: Option<Str<'a>>,
    offset: Option<i64>,
}

/// `where` / `field`: an array, `None` when null/absent or empty.
fn image<'a>(value: Option<Value<'a>>, path: &str) -> Result<Option<Value<'a>>> {
    match value.filter(|v| !v.is_null()) {
        None => Ok(None),
        Some(v) if v.kind() == Kind::Array => Ok((!v.is_empty()).then_some(v)),
        Some(v) => Err(field::error(
            path,
            format!("expected an array, got {}", v.describe()),
        )),
    }
}

impl<'a> Event<'a> {
    fn read(message: Value<'a>) -> Result<Self> {
        if message.kind() != Kind::Object {
            return Err(Error::NotAnObject(message.describe()));
        }
        let mut fields = [None; 12];
        let mut others = false;
        for (key, value) in message.all_members() {
            match FIELDS.iter().position(|name| key.is(name)) {
                Some(i) => {
                    fields[i].get_or_insert(value);
                    others |= i >= OWN_COLUMN;
                }
                None => others = true,
            }
        }
        let [source_op, db, table, begintime, gtid, event_index, sub_index, before, after, sql, filename, offset] =
            fields;
        let source_op = field::string(source_op, "eventtypestr")?
            .ok_or_else(|| field::error("eventtypestr", "missing".into()))?;
        let begin_micros = match field::integer(begintime, "begintime")? {
            Some(s) if !(-MAX_SECONDS..=MAX_SECONDS).contains(&s) => {
                let problem = format!("{s} seconds is out of range");
                return Err(field::error("begintime", problem));
            }
            seconds => seconds.map(|s| s * 1_000_000),
        };
        Ok(Self {
            message,
            others,
            source_op,
            db: field::string(db, "db")?,
            table: field::string(table, "table")?,
            begin_micros,
            gtid: field::string(gtid, "gtid")?,
            event_index: field::unsigned(event_index, "event_index")?,
            sub_index: field::unsigned(sub_index, "sub_event_index")?,
            before: image(before, "where")?,
            after: image(after, "field")?,
            sql: field::string(sql, "sql")?,
            filename: field::string(filename, "filename")?,
            offset: field::integer(offset, "orgoffset")?,
        })
    }

    fn write(&self, rows: &mut EventBuilder, names: Option<&Names>) -> Result<()> {
        let source_op = self.source_op.text();
        rows.op.push_str(op_of(&source_op));
        rows.source_op.push_str(&source_op);
        render::push_text(&mut rows.source_db, self.db);
        rows.source_schema.push_null();
        render::push_text(&mut rows.source_table, self.table);
        rows.event_time.push(self.begin_micros);
        rows.capture_time.push(None);
        render::push_text(&mut rows.tx_id, self.gtid);
        match (self.filename, self.offset) {
            (Some(file), Some(offset)) => rows.position.push_with(|out| {
                file.write_to(out);
                out.push(b':');
                out.extend_from_slice(itoa::Buffer::new().format(offset).as_bytes());
            }),
            _ => rows.position.push_null(),
        }
        match (self.gtid, self.event_index) {
            (Some(gtid), Some(index)) => {
                let gtid = gtid.text();
                match gtid_number(&gtid) {
                    Some(number) => rows.sequence.push_with(|out| {
                        OrderKey(out)
                            .u64(number)
                            .u64(index)
                            .u64(self.sub_index.unwrap_or(0));
                    }),
                    None => rows.sequence.push_null(),
                }
                rows.event_id.push_with(|out| {
                    let mut number = itoa::Buffer::new();
                    out.extend_from_slice(gtid.as_bytes());
                    out.push(b':');
                    out.extend_from_slice(number.format(index).as_bytes());
                    if let Some(sub) = self.sub_index {
                        out.push(b':');
                        out.extend_from_slice(number.format(sub).as_bytes());
                    }
                });
            }
            _ => {
                rows.sequence.push_null();
                rows.event_id.push_null();
            }
        }
        rows.primary_key.push_null();
        if rows.schema_pass() {
            // The images' keys (positions, or the names of `columns=`), checked as the
            // images would be; the wire carries no types and no key.
            if self.before.is_some() || self.after.is_some() {
                let mut keys = image_keys(self.before, "where", names)?;
                for key in image_keys(self.after, "field", names)? {
                    if !keys.contains(&key) {
                        keys.push(key);
                    }
                }
                rows.observe(Some(Arc::new(WireSchema::names(keys, None))));
            }
            rows.before.push_null();
            rows.after.push_null();
            render::push_text(&mut rows.ddl, self.sql);
            rows.metadata.push_null();
        } else {
            write_image(&mut rows.before, self.before, "where", names)?;
            write_image(&mut rows.after, self.after, "field", names)?;
            render::push_text(&mut rows.ddl, self.sql);
            self.write_metadata(&mut rows.metadata);
        }
        rows.error.push_null();
        rows.raw.push_null();
        rows.end_row();
        Ok(())
    }

    fn write_metadata(&self, map: &mut MapColumn) {
        if self.others {
            for (key, value) in self.message.members() {
                if value.is_null() || FIELDS[..OWN_COLUMN].iter().any(|name| key.is(name)) {
                    continue;
                }
                map.entry_with(&key.text(), |out| {
                    value.render_into(out);
                });
            }
        }
        map.close_or_null();
    }
}

/// The transaction number of a MySQL (`uuid:N`) or MariaDB (`domain-server-N`) GTID.
fn gtid_number(gtid: &str) -> Option<u64> {
    let tail = match gtid.rfind(':') {
        Some(at) => &gtid[at + 1..],
        None => gtid.rsplit('-').next().unwrap_or(""),
    };
    if tail.is_empty() || !tail.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    tail.parse().ok()
}

/// The keys a row image has ([`write_image`]'s, with its checks), for the schema pass.
fn image_keys(items: Option<Value<'_>>, path: &str, names: Option<&Names>) -> Result<Vec<String>> {
    let Some(items) = items else {
        return Ok(Vec::new());
    };
    let mut keys = Vec::new();
    let mut position = itoa::Buffer::new();
    for (i, item) in items.items().enumerate() {
        if !matches!(item.kind(), Kind::String | Kind::Number | Kind::Null) {
            let problem = format!("expected a string, got {}", item.describe());
            return Err(field::error(&format!("{path}[{i}]"), problem));
        }
        let key = match names {
            Some(names) => names.key(i, &mut position),
            None => Some(position.format(i)),
        };
        if let Some(key) = key {
            keys.push(key.to_string());
        }
    }
    Ok(keys)
}

/// A row image: each array item as a SQL literal, keyed by the table's names or position.
fn write_image(
    map: &mut MapColumn,
    items: Option<Value<'_>>,
    path: &str,
    names: Option<&Names>,
) -> Result<()> {
    let Some(items) = items else {
        map.push_null();
        return Ok(());
    };
    let mut position = itoa::Buffer::new();
    for (i, item) in items.items().enumerate() {
        let kind = item.kind();
        if !matches!(kind, Kind::String | Kind::Number | Kind::Null) {
            let problem = format!("expected a string, got {}", item.describe());
            return Err(field::error(&format!("{path}[{i}]"), problem));
        }
        let key = match names {
            Some(names) => names.key(i, &mut position),
            None => Some(position.format(i)),
        };
        // None: a name took this position's key; the item was checked, it is not written.
        let Some(key) = key else { continue };
        match kind {
            Kind::String => {
                let text = item.as_str().map(|s| s.text()).unwrap_or_default();
                match literal(&text) {
                    Some(value) => {
                        map.entry_with(key, |out| out.extend_from_slice(value.as_bytes()))
                    }
                    None => map.entry(key, None),
                }
            }
            Kind::Number => map.entry(key, item.number()),
            _ => map.entry(key, None),
        }
    }
    map.close();
    Ok(())
}

/// A TDSQL SQL literal as generic text (docs: "Row images"); `None` for `'##isnull##'`.
fn literal(text: &str) -> Option<std::borrow::Cow<'_, str>> {
    use std::borrow::Cow;
    if text == "'##isnull##'" {
        return None;
    }
    let bytes = text.as_bytes();
    if bytes.len() >= 2 && bytes[0] == b'\'' && bytes[bytes.len() - 1] == b'\'' {
        let inner = &text[1..text.len() - 1];
        if !inner.contains('\\') && !inner.contains("''") {
            return Some(Cow::Borrowed(inner));
        }
        let mut out = String::with_capacity(inner.len());
        let mut chars = inner.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.peek().copied() {
                    Some(next) => {
                        let replaced = match next {
                            '\\' => Some('\\'),
                            '\'' => Some('\''),
                            '"' => Some('"'),
                            'n' => Some('\n'),
                            'r' => Some('\r'),
                            't' => Some('\t'),
                            '0' => Some('\0'),
                            _ => None,
                        };
                        chars.next();
                        match replaced {
                            Some(r) => out.push(r),
                            None => {
                                out.push('\\');
                                out.push(next);
                            }
                        }
                    }
                    None => out.push('\\'),
                },
                '\'' if chars.peek() == Some(&'\'') => {
                    chars.next();
                    out.push('\'');
                }
                other => out.push(other),
            }
        }
        return Some(Cow::Owned(out));
    }
    if let Some(digits) = text.strip_prefix('-') {
        // `-50800 (18446744073709500816)`: the signed value with its unsigned form.
        if let Some((number, rest)) = digits.split_once(" (") {
            let unsigned = rest.strip_suffix(')').unwrap_or("");
            let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
            if all_digits(number) && all_digits(unsigned) {
                return Some(Cow::Borrowed(&text[..number.len() + 1]));
            }
        }
    }
    Some(Cow::Borrowed(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals() {
        let cases = [
            ("'name1'", Some("name1")),
            ("'##isnull##'", None),
            ("'it\\'s'", Some("it's")),
            ("'it''s'", Some("it's")),
            ("'a\\\\b'", Some("a\\b")),
            ("'a\\nb'", Some("a\nb")),
            ("'a\\qb'", Some("a\\qb")),
            ("'ends\\'", Some("ends\\")),
            ("''", Some("")),
            ("'", Some("'")),
            ("-50800 (18446744073709500816)", Some("-50800")),
            ("-50800 (x)", Some("-50800 (x)")),
            ("12", Some("12")),
        ];
        for (text, want) in cases {
            assert_eq!(literal(text).as_deref(), want, "{text}");
        }
    }

    #[test]
    fn a_name_takes_a_later_positions_key() {
        let names = |list: &[&str]| Names::new(list.iter().map(|n| n.to_string()).collect());
        let keys = |names: &Names| {
            let mut position = itoa::Buffer::new();
            (0..5)
                .map(|i| names.key(i, &mut position).map(str::to_owned))
                .collect::<Vec<_>>()
        };
        let key = |k: &str| Some(k.to_owned());
        assert_eq!(
            keys(&names(&["2", "x", "4"])),
            [key("2"), key("x"), key("4"), key("3"), None]
        );
        assert_eq!(
            keys(&names(&["04", "+3", "0"])),
            [key("04"), key("+3"), key("0"), key("3"), key("4")]
        );
    }

    /// A generated-shape message with named images (a name taking a later position's
    /// key among them), truncated at every byte and with every bit of each byte flipped in
    /// turn: one row each, never a panic, and the same row from the native decoder twice.
    #[test]
    fn truncated_and_flipped_messages_give_one_row_each() {
        use std::sync::Arc;

        use arrow_array::{Array, ArrayRef, BinaryArray, StringArray};

        use crate::decoder::{Decoder, Mode};
        use crate::formats::Options;

        let message: &[u8] = br#"{"logtype":"mysqlbinlog","eventtype":30,"eventtypestr":"insert","db":"shop","table":"users","localip":"10.0.12.7","localport":8810,"begintime":1714550400,"gtid":"0-1234567-42","event_index":"2","sub_event_index":1,"where":[],"field":["7","'O\\'Brien'","'it''s'","-5 (18446744073709551611)","'##isnull##'","'\u5c71\u7530'"],"prefix":"tdsql","filename":"mysql-bin.000003","serverid":1234567,"orgoffset":4711,"gtid_flag2":"0","gtid_commitid":"1014"}"#;
        let columns = [(
            "shop.users".to_string(),
            vec!["id".into(), "name".into(), "4".into()],
        )];
        let options = Options {
            columns: Some(columns.into_iter().collect()),
            ..Options::default()
        };
        let mut decoder = Decoder::with_options(FORMAT, Mode::Permissive, &options).unwrap();
        let whole: ArrayRef = Arc::new(BinaryArray::from(vec![Some(message)]));
        let out = decoder.decode(&whole, None, false).unwrap();
        let error = out.batch.column_by_name("error").unwrap();
        let error = error.as_any().downcast_ref::<StringArray>().unwrap();
        assert!(
            error.is_null(0),
            "the message itself decodes: {}",
            error.value(0)
        );

        let mut mutants: Vec<Vec<u8>> = (0..message.len()).map(|n| message[..n].to_vec()).collect();
        for at in 0..message.len() {
            for bit in 0..8 {
                let mut bytes = message.to_vec();
                bytes[at] ^= 1 << bit;
                mutants.push(bytes);
            }
        }
        for bytes in &mutants {
            let values: ArrayRef = Arc::new(BinaryArray::from(vec![Some(&bytes[..])]));
            let first = decoder.decode(&values, None, false).unwrap().batch;
            let again = decoder.decode(&values, None, false).unwrap().batch;
            assert_eq!(first.num_rows(), 1, "{:?}", String::from_utf8_lossy(bytes));
            assert_eq!(
                first, again,
                "buffers reused across messages change nothing"
            );
            let op = first.column_by_name("op").unwrap();
            let op = op.as_any().downcast_ref::<StringArray>().unwrap().value(0);
            let error = first.column_by_name("error").unwrap();
            assert_eq!(op == "error", error.is_valid(0));
        }
        assert!(decoder.stats().errors > mutants.len() as u64);
    }

    #[test]
    fn gtid_numbers() {
        assert_eq!(
            gtid_number("35be190b-d019-11e7-ab7a-a0423f32c225:469"),
            Some(469)
        );
        assert_eq!(gtid_number("0-2670193178-726233561"), Some(726233561));
        assert_eq!(gtid_number("abc"), None);
        assert_eq!(gtid_number("a:"), None);
        assert_eq!(gtid_number("a:99999999999999999999"), None);
    }
}
