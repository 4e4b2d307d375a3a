//! Typed access to the fields of a message, with the field types of
//! docs/formats/datahub-blob.md ("Field types"): `null` and absent are the same, and a value
//! of the wrong type is an [`Error::Field`] naming the field.

use super::{Kind, Str, Tag, Value};
use crate::error::{Error, Result};

/// The largest |milliseconds| whose microseconds fit an i64.
const MAX_MS: i64 = i64::MAX / 1000;

/// An error naming the field at `path`.
pub fn error(path: &str, problem: String) -> Error {
    Error::Field {
        path: path.to_string(),
        problem,
    }
}

#[inline(always)]
fn present(value: Option<Value<'_>>) -> Option<Value<'_>> {
    value.filter(|v| !v.is_null())
}

/// The error for a field of the wrong type: out of line, so that the checks that pass
/// (all of them, nearly always) are a few instructions where they are made.
#[cold]
#[inline(never)]
fn expected(path: &str, what: &str, got: Value<'_>) -> Error {
    error(path, format!("expected {what}, got {}", got.describe()))
}

/// An object, or `None` for null/absent.
#[inline]
pub fn object<'a>(value: Option<Value<'a>>, path: &str) -> Result<Option<Value<'a>>> {
    match present(value) {
        None => Ok(None),
        Some(v) if v.kind() == Kind::Object => Ok(Some(v)),
        Some(v) => Err(expected(path, "an object", v)),
    }
}

/// A string, or `None` for null/absent.
#[inline]
pub fn string<'a>(value: Option<Value<'a>>, path: &str) -> Result<Option<Str<'a>>> {
    match present(value) {
        None => Ok(None),
        Some(v) => match v.as_str() {
            Some(s) => Ok(Some(s)),
            None => Err(expected(path, "a string", v)),
        },
    }
}

/// A non-negative integer (a log position), or `None` for null/absent.
pub fn unsigned(value: Option<Value<'_>>, path: &str) -> Result<Option<u64>> {
    match integer(value, path)? {
        Some(n) if n < 0 => Err(error(
            path,
            format!(
                "expected a non-negative integer, got {}",
                value.map_or_else(String::new, |v| v.describe())
            ),
        )),
        n => Ok(n.map(|n| n as u64)),
    }
}

/// An array of strings (key column names); `None` when null/absent or empty.
pub fn string_array<'a>(value: Option<Value<'a>>, path: &str) -> Result<Option<Value<'a>>> {
    let Some(items) = present(value) else {
        return Ok(None);
    };
    if items.kind() != Kind::Array {
        let problem = format!("expected an array, got {}", items.describe());
        return Err(error(path, problem));
    }
    for (i, item) in items.items().enumerate() {
        match item.kind() {
            Kind::String => {}
            Kind::Null => return Err(error(path, "expected strings, got null".into())),
            _ => {
                let problem = format!("expected a string, got {}", item.describe());
                return Err(error(&format!("{path}[{i}]"), problem));
            }
        }
    }
    Ok((!items.is_empty()).then_some(items))
}

/// A 64-bit integer sent as a number token or a string matching `-?[0-9]+`, or `None`
/// for null/absent.
#[inline(always)]
pub fn integer(value: Option<Value<'_>>, path: &str) -> Result<Option<i64>> {
    let Some(v) = present(value) else {
        return Ok(None);
    };
    let parsed = match v.node().tag {
        // A number token, or a string without escapes: its span is its text.
        Tag::Number | Tag::Plain => parse_digits(v.span()),
        Tag::Escaped => v.as_str().and_then(|s| parse_i64(&s.text())),
        _ => None,
    };
    match parsed {
        Some(n) => Ok(Some(n)),
        None => Err(expected(path, "a 64-bit integer", v)),
    }
}

/// Epoch milliseconds as microseconds; `-1` (and null/absent) is `None`.
#[inline(always)]
pub fn time(value: Option<Value<'_>>, path: &str) -> Result<Option<i64>> {
    match integer(value, path)? {
        None | Some(-1) => Ok(None),
        Some(ms) if (-MAX_MS..=MAX_MS).contains(&ms) => Ok(Some(ms * 1000)),
        Some(ms) => Err(out_of_range(path, ms)),
    }
}

#[cold]
#[inline(never)]
fn out_of_range(path: &str, ms: i64) -> Error {
    error(path, format!("{ms} milliseconds is out of range"))
}

/// `-?[0-9]+` (leading zeros allowed) within i64.
pub fn parse_i64(text: &str) -> Option<i64> {
    parse_digits(text.as_bytes())
}

/// [`parse_i64`] of bytes.
#[inline]
fn parse_digits(text: &[u8]) -> Option<i64> {
    /// 10^n for the digits left after the whole groups of eight.
    const POWERS: [u64; 8] = [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000];
    let (negative, digits) = match text {
        [b'-', rest @ ..] => (true, rest),
        all => (false, all),
    };
    let n = digits.len();
    if n == 0 {
        return None;
    }
    if n > 19 {
        return parse_long(negative, digits);
    }
    // Up to 19 digits fit a u64; eight at a time while eight are left.
    let mut value: u64 = 0;
    let mut rest = digits;
    while let Some(chunk) = rest.get(..8) {
        value = value * 100_000_000 + super::eight_digits(super::load8(chunk, 0))?;
        rest = &rest[8..];
    }
    let r = rest.len();
    if r > 0 && n >= 8 {
        // The last r digits as eight: the 8 bytes that end with them, the 8 - r bytes
        // before them (read already) replaced by '0's.
        let zeros = (1u64 << (8 * (8 - r))) - 1;
        let word = super::load8(digits, n - 8) & !zeros | super::splat(b'0') & zeros;
        value = value * POWERS[r] + super::eight_digits(word)?;
    } else {
        for &b in rest {
            let digit = b.wrapping_sub(b'0');
            if digit > 9 {
                return None;
            }
            value = value * 10 + digit as u64;
        }
    }
    if negative {
        // -2^63 is i64::MIN, which has no positive counterpart.
        (value <= 1 << 63).then(|| (value as i64).wrapping_neg())
    } else {
        i64::try_from(value).ok()
    }
}

/// [`parse_i64`] of more than 19 digits (leading zeros), checked at every digit.
#[cold]
fn parse_long(negative: bool, digits: &[u8]) -> Option<i64> {
    // Accumulated negative: i64::MIN has no positive counterpart.
    let mut value: i64 = 0;
    for &b in digits {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value = value.checked_mul(10)?.checked_sub(digit as i64)?;
    }
    if negative {
        Some(value)
    } else {
        value.checked_neg()
    }
}
