//! MongoDB Extended JSON (v1 strict, v2 relaxed and canonical), as the Debezium MongoDB
//! connector writes documents into strings (docs/formats/debezium-json.md, "MongoDB").
//! A type wrapper (`{"$oid": ...}`, `{"$numberLong": ...}`, `{"$date": ...}`, ...) becomes
//! its value's text; anything else renders as [`Value::render_into`] does, with the
//! wrappers inside nested documents and arrays converted too.

use super::{field, Kind, Parser, Value};
use crate::error::Result;
use crate::text;
use arrow_schema::TimeUnit;

/// A row image: names and values as text, first key wins, a null value for SQL null
/// (or a removed field).
pub type Image = Vec<(String, Option<String>)>;

/// The document in `text` (an Extended JSON object) as an image; `path` names the
/// field in errors.
pub fn document(parser: &mut Parser, text: &str, path: &str) -> Result<Image> {
    let value = parser
        .parse(text.as_bytes())
        .map_err(|e| field::error(path, e.to_string()))?;
    let object = object(value, path)?;
    let mut image = Image::with_capacity(object.len());
    for (key, value) in object.members() {
        image.push((key.text().into_owned(), render(value)));
    }
    Ok(image)
}

/// The document in `text` as a parsed object, for a caller that reads its members.
pub fn object<'a>(value: Value<'a>, path: &str) -> Result<Value<'a>> {
    if value.kind() != Kind::Object {
        let problem = format!("expected an object, got {}", value.describe());
        return Err(field::error(path, problem));
    }
    Ok(value)
}

/// A value's text: a wrapper's value, a string's text, a number's token,
/// `true`/`false`, nested documents and arrays as compact JSON; `None` for null.
pub fn render(value: Value<'_>) -> Option<String> {
    if let Some((text, _)) = wrapped(value) {
        return Some(text);
    }
    let mut out = Vec::new();
    match value.kind() {
        Kind::Null => return None,
        Kind::Object | Kind::Array => compact_into(value, &mut out),
        _ => {
            value.render_into(&mut out);
        }
    }
    // SAFETY: rendering appends valid UTF-8 only.
    Some(unsafe { String::from_utf8_unchecked(out) })
}

/// Compact JSON with the wrappers converted: numbers as number tokens where their
/// text is a JSON number, every other wrapper as a JSON string of its text.
pub fn compact_into(value: Value<'_>, out: &mut Vec<u8>) {
    if let Some((text, number)) = wrapped(value) {
        if number {
            out.extend_from_slice(text.as_bytes());
        } else {
            text::json_string_into(&text, out);
        }
        return;
    }
    match value.kind() {
        Kind::Object => {
            out.push(b'{');
            for (n, (key, value)) in value.members().enumerate() {
                if n > 0 {
                    out.push(b',');
                }
                text::json_string_into(&key.text(), out);
                out.push(b':');
                compact_into(value, out);
            }
            out.push(b'}');
        }
        Kind::Array => {
            out.push(b'[');
            for (n, item) in value.items().enumerate() {
                if n > 0 {
                    out.push(b',');
                }
                compact_into(item, out);
            }
            out.push(b']');
        }
        _ => value.compact_into(out),
    }
}

fn string(value: Value<'_>) -> Option<String> {
    value.as_str().map(|s| s.text().into_owned())
}

/// An integer number token (`-?[0-9]+` within i64).
fn integer(value: Value<'_>) -> Option<i64> {
    value.number().and_then(field::parse_i64)
}

/// A type wrapper's text, and whether it is a JSON number; `None` for anything else.
pub fn wrapped(value: Value<'_>) -> Option<(String, bool)> {
    if value.kind() != Kind::Object {
        return None;
    }
    let mut members = value.members();
    let (key, inner) = members.next()?;
    let second = members.next();
    if members.next().is_some() {
        return None;
    }
    let key = key.text();
    match (&*key, second) {
        ("$oid", None) => string(inner).map(|s| (s, false)),
        ("$numberInt" | "$numberLong" | "$numberDouble" | "$numberDecimal", None) => string(inner)
            .map(|s| {
                let number = is_json_number(&s);
                (s, number)
            }),
        ("$date", None) => date(inner).map(|s| (s, false)),
        ("$binary", None) => {
            // v2: {"$binary": {"base64": ..., "subType": ...}}
            if inner.kind() != Kind::Object || inner.members().count() != 2 {
                return None;
            }
            let base64 = string(inner.get("base64")?)?;
            string(inner.get("subType")?)?;
            Some((base64, false))
        }
        // v1: {"$binary": ..., "$type": ...}, in either order.
        ("$binary", Some((other, kind))) if other.eq_str("$type") => {
            string(kind)?;
            string(inner).map(|s| (s, false))
        }
        ("$type", Some((other, data))) if other.eq_str("$binary") => {
            string(inner)?;
            string(data).map(|s| (s, false))
        }
        ("$timestamp", None) => {
            if inner.kind() != Kind::Object || inner.members().count() != 2 {
                return None;
            }
            let t = integer(inner.get("t")?).filter(|t| *t >= 0)?;
            let i = integer(inner.get("i")?).filter(|i| *i >= 0)?;
            Some((format!("{t}:{i}"), false))
        }
        _ => None,
    }
}

/// `$date`'s value: epoch milliseconds (a number token or `{"$numberLong": ...}`) or
/// ISO-8601 text, as `YYYY-MM-DDTHH:MM:SS.mmmZ`; ISO text that does not read as a
/// time passes as sent.
fn date(value: Value<'_>) -> Option<String> {
    let ms = match value.kind() {
        Kind::Number => integer(value)?,
        Kind::String => {
            let text = string(value)?;
            match iso_millis(&text) {
                Some(ms) => ms,
                None => return Some(text),
            }
        }
        Kind::Object => {
            let mut members = value.members();
            let (key, inner) = members.next()?;
            if members.next().is_some() || !key.eq_str("$numberLong") {
                return None;
            }
            field::parse_i64(&string(inner)?)?
        }
        _ => return None,
    };
    let mut out = Vec::new();
    text::timestamp_into(ms, TimeUnit::Millisecond, true, &mut out);
    // SAFETY: ASCII.
    Some(unsafe { String::from_utf8_unchecked(out) })
}

/// `YYYY-MM-DDTHH:MM:SS[.f{1,9}](Z|±HH:MM|±HHMM)` as epoch milliseconds (the fraction
/// truncated), for a real date and time; `None` otherwise.
pub fn iso_millis(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(range)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
    };
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (year, month, day) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (hour, minute, second) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days_in = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if day < 1 || day > days_in || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let mut at = 19;
    let mut millis = 0;
    if b[at] == b'.' {
        let start = at + 1;
        let mut end = start;
        while end < b.len() && b[end].is_ascii_digit() {
            end += 1;
        }
        if end == start || end - start > 9 {
            return None;
        }
        for (n, d) in b[start..end.min(start + 3)].iter().enumerate() {
            millis += i64::from(d - b'0') * [100, 10, 1][n];
        }
        at = end;
    }
    let offset = match &b[at..] {
        [b'Z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] | [sign @ (b'+' | b'-'), h1, h2, m1, m2] => {
            let parts = [*h1, *h2, *m1, *m2];
            if !parts.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let [h1, h2, m1, m2] = parts.map(|d| i64::from(d - b'0'));
            let (h, m) = (h1 * 10 + h2, m1 * 10 + m2);
            if h > 23 || m > 59 {
                return None;
            }
            if *sign == b'+' {
                h * 60 + m
            } else {
                -(h * 60 + m)
            }
        }
        _ => return None,
    };
    let days = text::days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset * 60;
    Some(seconds * 1000 + millis)
}

/// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`: text that is a JSON number.
pub fn is_json_number(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = usize::from(b.first() == Some(&b'-'));
    let run = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            run(&mut i);
        }
        _ => return false,
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        if run(&mut i) == 0 {
            return false;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if run(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

#[cfg(test)]
mod tests {
    use super::{document, is_json_number, iso_millis};
    use crate::json::Parser;

    #[test]
    fn iso_times_read_as_milliseconds() {
        assert_eq!(iso_millis("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            iso_millis("2026-07-03T17:59:45.729Z"),
            Some(1_783_101_585_729)
        );
        assert_eq!(
            iso_millis("2026-07-03T19:59:45.7291+02:00"),
            Some(1_783_101_585_729)
        );
        assert_eq!(
            iso_millis("2026-07-03T17:29:45.729-0030"),
            Some(1_783_101_585_729)
        );
        assert_eq!(iso_millis("1969-12-31T23:59:59.999Z"), Some(-1));
        for bad in [
            "2026-02-29T00:00:00Z",
            "2026-07-03T17:59:45",
            "2026-07-03T24:00:00Z",
            "2026-07-03T17:59:45.Z",
            "2026-07-03T17:59:45.1234567890Z",
            "2026-07-03 17:59:45Z",
            "2026-07-03T17:59:45+2:00",
        ] {
            assert_eq!(iso_millis(bad), None, "{bad}");
        }
    }

    #[test]
    fn json_numbers() {
        for good in ["0", "-0", "12", "1.5", "-1.5e+10", "1E3"] {
            assert!(is_json_number(good), "{good}");
        }
        for bad in ["", "-", "01", "1.", ".5", "1e", "NaN", "Infinity", "1 "] {
            assert!(!is_json_number(bad), "{bad}");
        }
    }

    #[test]
    fn documents_in_every_mode_give_one_image() {
        let mut parser = Parser::default();
        let mut image = |text: &str| document(&mut parser, text, "after").unwrap();
        let strict = image(
            r#"{"_id": {"$oid": "5e1"}, "n": 5, "d": {"$date": 1783101585729},
                    "b": {"$binary": "AQID", "$type": "00"}, "x": {"a": [1, {"$numberLong": "2"}]}}"#,
        );
        let canonical = image(
            r#"{"_id": {"$oid": "5e1"}, "n": {"$numberInt": "5"},
                    "d": {"$date": {"$numberLong": "1783101585729"}},
                    "b": {"$binary": {"base64": "AQID", "subType": "00"}},
                    "x": {"a": [{"$numberInt": "1"}, 2]}}"#,
        );
        let relaxed = image(
            r#"{"_id": {"$oid": "5e1"}, "n": 5, "d": {"$date": "2026-07-03T17:59:45.729Z"},
                    "b": {"$binary": {"base64": "AQID", "subType": "00"}}, "x": {"a": [1, 2]}}"#,
        );
        assert_eq!(strict, canonical);
        assert_eq!(strict, relaxed);
        let text = |v: &str| Some(v.to_string());
        assert_eq!(
            strict,
            vec![
                ("_id".to_string(), text("5e1")),
                ("n".to_string(), text("5")),
                ("d".to_string(), text("2026-07-03T17:59:45.729Z")),
                ("b".to_string(), text("AQID")),
                ("x".to_string(), text(r#"{"a":[1,2]}"#)),
            ]
        );
        let odd = image(r#"{"t": {"$timestamp": {"t": 7, "i": 2}}, "r": {"$oid": 1}, "z": null}"#);
        assert_eq!(odd[0].1.as_deref(), Some("7:2"));
        assert_eq!(odd[1].1.as_deref(), Some(r#"{"$oid":1}"#));
        assert_eq!(odd[2].1, None);
        assert!(document(&mut parser, "[1]", "after").is_err());
        assert!(document(&mut parser, "{", "after").is_err());
    }
}
