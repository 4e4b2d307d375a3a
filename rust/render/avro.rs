//! Avro values as event text (docs/formats/datastream-avro.md, "Values"): each value read
//! from its datum with [`crate::avro`]'s cursor and written straight into a column's bytes,
//! scalars by [`crate::text`]'s renderers (the ones every format uses), records and arrays
//! as compact JSON. Used by `datastream-avro`.

use arrow_schema::TimeUnit;

use crate::avro::{self, array_items, branch, deeper, Cursor, Logical, Node, Schema, Shape};
use crate::error::{Error, Result};
use crate::limits::{grouped, OverLimit};
use crate::text;

/// PostgreSQL's `infinity` and `-infinity` as the JDBC driver writes timestamps.
const INFINITY: i64 = 9_223_372_036_825_200_000;
const NEG_INFINITY: i64 = -9_223_372_036_832_400_000;

thread_local! {
    /// The output limit of the file being read, and the `max_output_ratio` it comes from
    /// (set for each file before its records are read): one value's text (an array's
    /// compact JSON, whose items may repeat long field names or enum symbols) may not pass
    /// it either.
    static TEXT_LIMIT: std::cell::Cell<(usize, usize)> =
        const { std::cell::Cell::new((usize::MAX, 0)) };
}

/// The error of a file whose events (or one value's text) pass `limit`.
pub fn over_output(limit: usize, ratio: usize) -> Error {
    OverLimit::new(
        format!(
            "the file's events take more than {} bytes (max_output_ratio times its size, or \
             output_floor_bytes if more)",
            grouped(limit)
        ),
        "max_output_ratio",
        ratio,
    )
    .into()
}

/// Fails once `out`, an array's text so far, passes the file's output limit.
pub fn within_limit(out: &[u8]) -> Result<()> {
    let (limit, ratio) = TEXT_LIMIT.get();
    if out.len() > limit {
        return Err(over_output(limit, ratio));
    }
    Ok(())
}

/// Sets the output limit of the file about to be read, and the `max_output_ratio` it comes
/// from ([`within_limit`] checks against it).
pub fn limit_text(limit: usize, ratio: usize) {
    TEXT_LIMIT.set((limit, ratio));
}

/// Appends a value's text (docs/formats/datastream-avro.md, "Values"); false (and nothing
/// appended) for null. `depth` counts the records and arrays around the value.
pub fn text_value(
    schema: &Schema,
    cur: &mut Cursor,
    node: usize,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<bool> {
    match schema.node(node) {
        Node::Null => return Ok(false),
        Node::Boolean => {
            let b = cur.byte()?;
            out.extend_from_slice(if b != 0 { b"true" } else { b"false" });
        }
        Node::Integer { logical, .. } => {
            let v = cur.long()?;
            integer_text(v, *logical, out);
        }
        Node::Float => {
            let b = cur.take(4)?;
            text::f32_into(f32::from_le_bytes([b[0], b[1], b[2], b[3]]), out);
        }
        Node::Double => {
            let b = cur.take(8)?;
            let bits: [u8; 8] = b.try_into().expect("8 bytes");
            text::f64_into(f64::from_le_bytes(bits), out);
        }
        Node::Bytes(logical) => {
            let b = cur.bytes()?;
            bytes_text(b, *logical, out);
        }
        Node::Fixed { size, logical } => {
            let b = cur.take(*size)?;
            bytes_text(b, *logical, out);
        }
        Node::String => {
            let at = cur.position();
            let b = cur.bytes()?;
            let s = text::utf8(b)
                .ok_or_else(|| Error::Avro(format!("a string at byte {at} is not UTF-8")))?;
            out.extend_from_slice(s.as_bytes());
        }
        Node::Enum(symbols) => {
            let at = cur.position();
            let i = cur.long()?;
            let symbol = usize::try_from(i)
                .ok()
                .and_then(|i| symbols.get(i))
                .ok_or_else(|| Error::Avro(format!("enum index {i} at byte {at}")))?;
            out.extend_from_slice(symbol.as_bytes());
        }
        Node::Array(_) => json_value(schema, cur, node, out, depth)?,
        Node::Union(_) => {
            let b = branch(schema, cur, node)?;
            return text_value(schema, cur, b, out, depth);
        }
        Node::Record { shape, fields, .. } => {
            let depth = deeper(schema, depth, cur.position())?;
            return match shape {
                Shape::Plain => {
                    json_record(schema, cur, fields, out, depth)?;
                    Ok(true)
                }
                Shape::PgArray { nested, element } => {
                    pg_array(schema, cur, fields, *nested, *element, out, depth, false)
                }
                Shape::Varchar { value } => {
                    let start = out.len();
                    let mut kept = None;
                    for (i, f) in fields.iter().enumerate() {
                        let at = out.len();
                        let present = text_value(schema, cur, f.node, out, depth)?;
                        if i == *value {
                            kept = Some((at..out.len(), present));
                        }
                    }
                    let (span, present) = kept.expect("varchar has its value field");
                    keep_only(out, start, span);
                    Ok(present)
                }
                _ => {
                    shaped(schema, cur, fields, *shape, out, depth)?;
                    Ok(true)
                }
            };
        }
    }
    Ok(true)
}

/// Reads the fields of a unified date/time record and appends its text.
fn shaped(
    schema: &Schema,
    cur: &mut Cursor,
    fields: &[avro::Field],
    shape: Shape,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<()> {
    let mut values = vec![0i64; fields.len()];
    let start = out.len();
    for (i, f) in fields.iter().enumerate() {
        if matches!(schema.node(f.node), Node::Integer { .. }) && used(shape, i) {
            values[i] = cur.long()?;
        } else {
            text_value(schema, cur, f.node, out, depth)?;
            out.truncate(start);
        }
    }
    match shape {
        Shape::Datetime { date, time } => {
            text::date_into(values[date], out);
            out.push(b'T');
            text::time_into(values[time], 6, out);
        }
        Shape::TimestampTz { timestamp, offset } => {
            let ts = values[timestamp];
            if ts == INFINITY || ts == NEG_INFINITY {
                out.extend_from_slice(if ts == INFINITY {
                    b"infinity"
                } else {
                    b"-infinity"
                });
                return Ok(());
            }
            let off = values[offset];
            let wall = off
                .checked_mul(1000)
                .and_then(|o| ts.checked_add(o))
                .ok_or_else(|| Error::Avro(format!("timestampTz {ts} {off} is out of range")))?;
            text::timestamp_into(wall, TimeUnit::Microsecond, false, out);
            text::offset_into(off, out);
        }
        Shape::TimeTz { time, offset } => {
            text::time_into(values[time], 6, out);
            text::offset_into(values[offset], out);
        }
        Shape::Interval {
            months,
            hours,
            micros,
        } => {
            let m = values[micros];
            out.push(b'P');
            out.extend_from_slice(itoa::Buffer::new().format(values[months]).as_bytes());
            out.extend_from_slice(b"MT");
            out.extend_from_slice(itoa::Buffer::new().format(values[hours]).as_bytes());
            out.push(b'H');
            if m < 0 {
                out.push(b'-');
            }
            let m = m.unsigned_abs();
            out.extend_from_slice(itoa::Buffer::new().format(m / 1_000_000).as_bytes());
            out.push(b'.');
            text::padded_into(m % 1_000_000, 6, out);
            out.push(b'S');
        }
        _ => unreachable!("the plain shapes are rendered elsewhere"),
    }
    Ok(())
}

fn used(shape: Shape, i: usize) -> bool {
    match shape {
        Shape::Datetime { date, time } => i == date || i == time,
        Shape::TimestampTz { timestamp, offset } => i == timestamp || i == offset,
        Shape::TimeTz { time, offset } => i == time || i == offset,
        Shape::Interval {
            months,
            hours,
            micros,
        } => i == months || i == hours || i == micros,
        _ => false,
    }
}

/// A PostgreSQL array level: the JSON array of `nestedArray` when it is not null, else the
/// `elementValue` (as text at the top, as a JSON value inside an array).
#[allow(clippy::too_many_arguments)]
fn pg_array(
    schema: &Schema,
    cur: &mut Cursor,
    fields: &[avro::Field],
    nested: usize,
    element: usize,
    out: &mut Vec<u8>,
    depth: usize,
    json: bool,
) -> Result<bool> {
    let start = out.len();
    let mut nested_span = start..start;
    let mut element_span = None;
    for (i, f) in fields.iter().enumerate() {
        let at = out.len();
        if i == nested {
            json_value(schema, cur, f.node, out, depth)?;
            nested_span = at..out.len();
        } else if i == element {
            let present = if json {
                json_value(schema, cur, f.node, out, depth)?;
                true
            } else {
                text_value(schema, cur, f.node, out, depth)?
            };
            element_span = Some((at..out.len(), present));
        }
    }
    let (span, present) = if out[nested_span.clone()] != *b"null" {
        (nested_span, true)
    } else {
        element_span.expect("both fields read")
    };
    keep_only(out, start, span);
    Ok(present)
}

/// Appends a value as compact JSON (docs/formats/datastream-avro.md, "Values").
pub fn json_value(
    schema: &Schema,
    cur: &mut Cursor,
    node: usize,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<()> {
    match schema.node(node) {
        Node::Null => out.extend_from_slice(b"null"),
        Node::Boolean => {
            let b = cur.byte()?;
            out.extend_from_slice(if b != 0 { b"true" } else { b"false" });
        }
        Node::Integer {
            logical: Logical::None,
            ..
        } => {
            let v = cur.long()?;
            out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
        }
        Node::Float | Node::Double => {
            let start = out.len();
            text_value(schema, cur, node, out, depth)?;
            if matches!(&out[start..], b"nan" | b"inf" | b"-inf") {
                out.insert(start, b'"');
                out.push(b'"');
            }
        }
        Node::Array(items) => {
            let items = *items;
            let depth = deeper(schema, depth, cur.position())?;
            json_array(cur, out, |cur, out| {
                json_value(schema, cur, items, out, depth)?;
                within_limit(out)
            })?;
        }
        Node::Union(_) => {
            let b = branch(schema, cur, node)?;
            json_value(schema, cur, b, out, depth)?;
        }
        Node::Record { shape, fields, .. } => match shape {
            Shape::Plain => {
                let depth = deeper(schema, depth, cur.position())?;
                json_record(schema, cur, fields, out, depth)?;
            }
            Shape::PgArray { nested, element } => {
                let depth = deeper(schema, depth, cur.position())?;
                pg_array(schema, cur, fields, *nested, *element, out, depth, true)?;
            }
            Shape::Varchar { value } => {
                let depth = deeper(schema, depth, cur.position())?;
                let start = out.len();
                let mut kept = start..start;
                for (i, f) in fields.iter().enumerate() {
                    let at = out.len();
                    json_value(schema, cur, f.node, out, depth)?;
                    if i == *value {
                        kept = at..out.len();
                    }
                }
                keep_only(out, start, kept);
            }
            _ => string_of(schema, cur, node, out, depth)?,
        },
        // Strings, enums, logical integers, bytes and fixed: their text as a JSON string.
        _ => string_of(schema, cur, node, out, depth)?,
    }
    Ok(())
}

/// Appends an array's items as a JSON array, each written by `item`.
pub fn json_array(
    cur: &mut Cursor,
    out: &mut Vec<u8>,
    mut item: impl FnMut(&mut Cursor, &mut Vec<u8>) -> Result<()>,
) -> Result<()> {
    out.push(b'[');
    let mut first = true;
    array_items(cur, |cur| {
        if !first {
            out.push(b',');
        }
        first = false;
        item(cur, out)
    })?;
    out.push(b']');
    Ok(())
}

/// Keeps only `span` of the text appended to `out` since `start`.
fn keep_only(out: &mut Vec<u8>, start: usize, span: std::ops::Range<usize>) {
    let len = span.len();
    out.copy_within(span, start);
    out.truncate(start + len);
}

/// Appends a value's text ([`text_value`]) as a JSON string.
fn string_of(
    schema: &Schema,
    cur: &mut Cursor,
    node: usize,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<()> {
    let mut rendered = Vec::new();
    text_value(schema, cur, node, &mut rendered, depth)?;
    text::json_string_into(text::utf8(&rendered).unwrap_or_default(), out);
    Ok(())
}

fn json_record(
    schema: &Schema,
    cur: &mut Cursor,
    fields: &[avro::Field],
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<()> {
    out.push(b'{');
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        text::json_string_into(&f.name, out);
        out.push(b':');
        json_value(schema, cur, f.node, out, depth)?;
    }
    out.push(b'}');
    Ok(())
}

fn integer_text(v: i64, logical: Logical, out: &mut Vec<u8>) {
    match logical {
        Logical::Date => text::date_into(v, out),
        Logical::Time { digits } => text::time_into(v, digits, out),
        Logical::Timestamp { digits, zoned } => {
            if v == INFINITY {
                out.extend_from_slice(b"infinity");
            } else if v == NEG_INFINITY {
                out.extend_from_slice(b"-infinity");
            } else {
                let unit = match digits {
                    3 => TimeUnit::Millisecond,
                    6 => TimeUnit::Microsecond,
                    _ => TimeUnit::Nanosecond,
                };
                text::timestamp_into(v, unit, zoned, out);
            }
        }
        _ => out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes()),
    }
}

fn bytes_text(b: &[u8], logical: Logical, out: &mut Vec<u8>) {
    match logical {
        Logical::Decimal { scale } => text::decimal_bytes_into(b, scale, out),
        _ => text::base64_into(b, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_infinity_is_a_word() {
        let mut out = Vec::new();
        let zoned = Logical::Timestamp {
            digits: 6,
            zoned: true,
        };
        integer_text(INFINITY, zoned, &mut out);
        out.push(b' ');
        integer_text(NEG_INFINITY, zoned, &mut out);
        assert_eq!(out, b"infinity -infinity");
    }
}
