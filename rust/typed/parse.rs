//! Conversions from text, each `None` when the text does not convert: booleans, integers,
//! floats, exact decimals (with Connect's byte forms), binary (base64, hex), timestamps and
//! dates (ISO text or epoch numbers).

use crate::text::days_from_civil;

use super::{Hint, Hints, Unit};

/// `true`, `false`, `1`, `0`.
pub(super) fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "true" | "1" => Some(true),
        "false" | "0" => Some(false),
        _ => None,
    }
}

/// Whether `bytes` start with `-`, and what follows an optional `+` or `-`.
#[inline(always)]
fn split_sign(bytes: &[u8]) -> (bool, &[u8]) {
    match bytes.first() {
        Some(b'-') => (true, &bytes[1..]),
        Some(b'+') => (false, &bytes[1..]),
        _ => (false, bytes),
    }
}

/// An optional sign, then ASCII digits; fits an `i64`. One pass over the bytes (this is
/// the commonest conversion of typed mode; `str::parse` after a separate check of the
/// digits took three times the instructions).
pub(super) fn parse_int(text: &str) -> Option<i64> {
    let (negative, digits) = split_sign(text.as_bytes());
    if digits.is_empty() {
        return None;
    }
    let mut value: u64 = 0;
    for &b in digits {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(digit))?;
    }
    if negative {
        // -2^63 is the one magnitude above i64::MAX that fits.
        (value <= i64::MAX as u64 + 1).then(|| (value as i64).wrapping_neg())
    } else {
        i64::try_from(value).ok()
    }
}

/// A decimal number (`1`, `-1.5`, `.5`, `5.`, `1e-3`), or `NaN`/`Infinity`/`inf` in any
/// case with an optional sign.
pub(super) fn parse_float(text: &str) -> Option<f64> {
    let body = text.strip_prefix(['+', '-']).unwrap_or(text);
    let lower = body.to_ascii_lowercase();
    if matches!(lower.as_str(), "nan" | "inf" | "infinity") {
        let value = if lower == "nan" {
            f64::NAN
        } else {
            f64::INFINITY
        };
        return Some(if text.starts_with('-') { -value } else { value });
    }
    split_number(text)?;
    text.parse().ok()
}

/// A decimal number's parts: negative, integer digits, fraction digits, exponent.
fn split_number(text: &str) -> Option<(bool, &str, &str, i64)> {
    let negative = text.starts_with('-');
    let body = text.strip_prefix(['+', '-']).unwrap_or(text);
    let b = body.as_bytes();
    let digits_from = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    let int_end = digits_from(0);
    let (frac, end) = if b.get(int_end) == Some(&b'.') {
        let end = digits_from(int_end + 1);
        (&body[int_end + 1..end], end)
    } else {
        ("", int_end)
    };
    let int = &body[..int_end];
    if int.len() + frac.len() == 0 {
        return None;
    }
    let exponent = match b.get(end) {
        None => 0,
        Some(b'e' | b'E') => {
            let exp = &body[end + 1..];
            let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if digits.is_empty() || digits.len() > 6 || !digits.bytes().all(|b| b.is_ascii_digit())
            {
                return None;
            }
            exp.parse::<i64>().ok()?
        }
        Some(_) => return None,
    };
    Some((negative, int, frac, exponent))
}

/// Decimal text as the unscaled value at scale `s`, exactly: fraction digits beyond the
/// scale must be zeros, and at most `p` digits may remain. Reads the digits in place (an
/// earlier version joined them into a `String` per value, allocating).
pub(super) fn parse_decimal(text: &str, p: u8, s: i8) -> Option<i128> {
    if let Some(plain) = parse_plain_decimal(text, p, s) {
        return plain;
    }
    let (negative, int, frac, exponent) = split_number(text)?;
    let shift = s as i64 - frac.len() as i64 + exponent;
    // The digits of int and frac as one sequence.
    let (int, frac) = (int.as_bytes(), frac.as_bytes());
    let total = int.len() + frac.len();
    let digit = |i: usize| {
        let b = if i < int.len() {
            int[i]
        } else {
            frac[i - int.len()]
        };
        b - b'0'
    };
    // Digits below the scale are cut, and must be zeros.
    let keep = if shift >= 0 {
        total
    } else {
        let keep = total.saturating_sub(usize::try_from(-shift).unwrap_or(usize::MAX));
        if (keep..total).any(|i| digit(i) != 0) {
            return None;
        }
        keep
    };
    let Some(first) = (0..keep).find(|&i| digit(i) != 0) else {
        return Some(0);
    };
    let zeros = usize::try_from(shift).unwrap_or(0);
    if (keep - first).saturating_add(zeros) > p as usize {
        return None;
    }
    // At most p <= 38 digits: within i128.
    let mut value: i128 = 0;
    for i in first..keep {
        value = value * 10 + i128::from(digit(i));
    }
    for _ in 0..zeros {
        value *= 10;
    }
    Some(if negative { -value } else { value })
}

/// 10^0 to 10^38.
const POW10: [i128; 39] = {
    let mut table = [1i128; 39];
    let mut i = 1;
    while i < 39 {
        table[i] = table[i - 1] * 10;
        i += 1;
    }
    table
};

/// The value of `body`'s digits and the index of its one point, if it is only digits and
/// at most one point; the caller keeps the digits within `T`.
#[inline(always)]
fn plain_digits<T>(body: &[u8]) -> Option<(T, Option<usize>)>
where
    T: Copy + From<u8> + std::ops::Mul<Output = T> + std::ops::Add<Output = T>,
{
    let mut value = T::from(0);
    let mut point = None;
    for (i, &b) in body.iter().enumerate() {
        let digit = b.wrapping_sub(b'0');
        if digit <= 9 {
            value = value * T::from(10) + T::from(digit);
        } else if b == b'.' && point.is_none() {
            point = Some(i);
        } else {
            return None;
        }
    }
    Some((value, point))
}

/// [`parse_decimal`] of the common text, in one pass: a sign, at most 38 digits and
/// points, no exponent. `None` for any other text, which takes the general path.
#[inline]
pub(super) fn parse_plain_decimal(text: &str, p: u8, s: i8) -> Option<Option<i128>> {
    let (negative, body) = split_sign(text.as_bytes());
    // Up to 19 digits fit a u64, whose arithmetic is a few times cheaper than i128's.
    let (value, point) = match body.len() {
        0..=19 => plain_digits::<u64>(body).map(|(v, point)| (i128::from(v), point))?,
        20..=38 => plain_digits::<i128>(body)?,
        _ => return None,
    };
    if body.len() == usize::from(point.is_some()) {
        return Some(None); // no digit
    }
    let fraction = point.map_or(0, |i| body.len() - i - 1);
    let shift = i64::from(s) - fraction as i64;
    let p = usize::from(p).min(38);
    let value = if shift >= 0 {
        let shift = shift as usize;
        if value == 0 {
            return Some(Some(0));
        }
        if shift > p || value >= POW10[p - shift] {
            return Some(None);
        }
        value * POW10[shift]
    } else {
        // The digits cut below the scale must be zeros: all of them when more are cut
        // than there are.
        let cut = (-shift) as usize;
        if cut > 38 {
            return Some((value == 0).then_some(0));
        }
        if value % POW10[cut] != 0 {
            return Some(None);
        }
        value / POW10[cut]
    };
    if value >= POW10[p] {
        return Some(None);
    }
    Some(Some(if negative { -value } else { value }))
}

/// A decimal, from decimal text or, with [`Hint::DecimalBytes`], from base64 of the
/// unscaled big-endian two's complement value (text that is not base64 is read as text).
pub(super) fn parse_decimal_hinted(text: &str, p: u8, s: i8, hint: Option<&Hint>) -> Option<i128> {
    match hint {
        Some(&Hint::DecimalBytes(scale)) => match parse_base64(text) {
            Some(bytes) => decimal_from_bytes(&bytes, scale, p, s),
            None => parse_decimal(text, p, s),
        },
        Some(Hint::VariableScaleDecimal) => {
            let (scale, bytes) = parse_variable_scale(text)?;
            decimal_from_bytes(&bytes, scale, p, s)
        }
        _ => parse_decimal(text, p, s),
    }
}

/// The text a `string` column gets for `text` under a column hint (docs/typed.md): Connect
/// decimals as decimal text, Debezium times as `[-]HH:MM:SS.fff[fff]`, DTS `BYTES` JSON as
/// its text; `Some(None)` keeps `text` as it is; `None` when it does not convert (base64 of
/// bytes that are not UTF-8 text).
pub(super) fn hinted_text(text: &str, hint: &Hint, out: &mut Vec<u8>) -> Option<bool> {
    match *hint {
        Hint::Base64Text => {
            let bytes = parse_base64(text)?;
            out.extend_from_slice(crate::text::utf8(&bytes)?.as_bytes());
        }
        Hint::DecimalBytes(scale) => match (u32::try_from(scale), parse_base64(text)) {
            (Ok(scale), Some(bytes)) if !bytes.is_empty() => {
                crate::text::decimal_bytes_into(&bytes, scale, out)
            }
            _ => return Some(false),
        },
        Hint::VariableScaleDecimal => match parse_variable_scale(text) {
            Some((scale, bytes)) if scale >= 0 && !bytes.is_empty() => {
                crate::text::decimal_bytes_into(&bytes, scale as u32, out)
            }
            _ => return Some(false),
        },
        Hint::Time(unit) => {
            let Some(value) = parse_int(text) else {
                return Some(false);
            };
            match unit {
                Unit::Millis => crate::text::time_into(value, 3, out),
                Unit::Micros => crate::text::time_into(value, 6, out),
                Unit::Nanos => crate::text::time_into(value.div_euclid(1000), 6, out),
            }
        }
        _ => return Some(false),
    }
    Some(true)
}

/// `{"scale":N,"value":"base64"}` (either order, compact JSON as generic mode renders a
/// Connect struct): the scale and the bytes.
pub(super) fn parse_variable_scale(text: &str) -> Option<(i32, Vec<u8>)> {
    let body = text.strip_prefix('{')?.strip_suffix('}')?;
    let (first, second) = body.split_once(',')?;
    let mut scale = None;
    let mut value = None;
    for member in [first, second] {
        let (key, v) = member.split_once(':')?;
        match key {
            "\"scale\"" if scale.is_none() => {
                scale = Some(i32::try_from(parse_int(v)?).ok()?);
            }
            "\"value\"" if value.is_none() => {
                let inner = v.strip_prefix('"')?.strip_suffix('"')?;
                value = Some(parse_base64(inner)?);
            }
            _ => return None,
        }
    }
    Some((scale?, value?))
}

/// A big-endian two's complement unscaled value at `scale`, as a `decimal(p,s)`, exactly.
fn decimal_from_bytes(bytes: &[u8], scale: i32, p: u8, s: i8) -> Option<i128> {
    if bytes.is_empty() || bytes.len() > 16 {
        return None;
    }
    let mut unscaled: i128 = if bytes[0] & 0x80 != 0 { -1 } else { 0 };
    for &b in bytes {
        unscaled = (unscaled << 8) | b as i128;
    }
    let value = rescale(unscaled, scale, s as i32)?;
    (value.unsigned_abs() < 10u128.pow(p as u32)).then_some(value)
}

/// `unscaled` at scale `from` as an unscaled value at scale `to`, exactly.
fn rescale(unscaled: i128, from: i32, to: i32) -> Option<i128> {
    let (from, to) = (i64::from(from), i64::from(to));
    if to >= from {
        let factor = 10i128.checked_pow(u32::try_from(to - from).ok()?)?;
        unscaled.checked_mul(factor)
    } else {
        let power = u32::try_from(from - to).ok()?;
        let Some(factor) = 10i128.checked_pow(power) else {
            return (unscaled == 0).then_some(0);
        };
        (unscaled % factor == 0).then_some(unscaled / factor)
    }
}

/// Standard padded base64.
pub(super) fn parse_base64(text: &str) -> Option<Vec<u8>> {
    base64_simd::STANDARD.decode_to_vec(text.as_bytes()).ok()
}

/// Hex digits, two per byte, either case.
pub(super) fn parse_hex(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    if bytes.len() % 2 != 0 {
        return None;
    }
    let nibble = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    };
    bytes
        .chunks_exact(2)
        .map(|pair| Some(nibble(pair[0])? << 4 | nibble(pair[1])?))
        .collect()
}

const MICROS_PER_DAY: i64 = 86_400_000_000;

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// ISO-8601 text: `YYYY-MM-DD`, then optionally `T` or a space and `HH:MM[:SS[.f…]]`
/// (1 to 9 fraction digits, cut to microseconds), then optionally (after an optional
/// space) `Z` or an offset `±HH`, `±HHMM`, `±HH:MM`. Without an offset the text is UTC.
/// Returns microseconds since the epoch and whether an offset (or `Z`) was given: without
/// one the text is a wall clock.
pub(super) fn parse_iso(text: &str) -> Option<(i64, bool)> {
    let b = text.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(range)?;
        if part.iter().all(|c| c.is_ascii_digit()) {
            Some(part.iter().fold(0, |n, &c| n * 10 + (c - b'0') as i64))
        } else {
            None
        }
    };
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let mut micros = days_from_civil(year, month, day) * MICROS_PER_DAY;
    let mut at = 10;
    if matches!(b.get(at), Some(b'T' | b' ')) && b.get(at + 3) == Some(&b':') {
        let (hour, minute) = (num(at + 1..at + 3)?, num(at + 4..at + 6)?);
        at += 6;
        let mut second = 0;
        let mut fraction = 0;
        if b.get(at) == Some(&b':') {
            second = num(at + 1..at + 3)?;
            at += 3;
            if b.get(at) == Some(&b'.') {
                let start = at + 1;
                let mut end = start;
                while end < b.len() && b[end].is_ascii_digit() {
                    end += 1;
                }
                let digits = end - start;
                if digits == 0 || digits > 9 {
                    return None;
                }
                let nanos = num(start..end)? * 10i64.pow(9 - digits as u32);
                fraction = nanos / 1000;
                at = end;
            }
        }
        if hour > 23 || minute > 59 || second > 59 {
            return None;
        }
        micros += ((hour * 60 + minute) * 60 + second) * 1_000_000 + fraction;
    }
    let rest = &b[at..];
    let rest = rest.strip_prefix(b" ").unwrap_or(rest);
    let offset_minutes = match rest {
        [] if at == b.len() => return Some((micros, false)),
        [] => return None,
        [b'Z'] => 0,
        [sign @ (b'+' | b'-'), tail @ ..] => {
            let digits: Vec<u8> = match tail {
                [h1, h2] => vec![*h1, *h2, b'0', b'0'],
                [h1, h2, m1, m2] => vec![*h1, *h2, *m1, *m2],
                [h1, h2, b':', m1, m2] => vec![*h1, *h2, *m1, *m2],
                _ => return None,
            };
            if !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let v = |i: usize| (digits[i] - b'0') as i64;
            let (hours, minutes) = (v(0) * 10 + v(1), v(2) * 10 + v(3));
            if hours > 23 || minutes > 59 {
                return None;
            }
            let total = hours * 60 + minutes;
            if *sign == b'-' {
                -total
            } else {
                total
            }
        }
        _ => return None,
    };
    Some((micros - offset_minutes * 60_000_000, true))
}

/// The first and last microsecond the source's time zone converts within: 0001-01-02 to
/// the end of 9999-12-29, so that a day's offset either way stays inside what both Python's
/// `datetime` (years 1 to 9999) and jiff's timestamps hold: the engines agree on every
/// value, a value outside is one that does not convert.
const ZONE_RANGE: std::ops::RangeInclusive<i64> = -62_135_510_400_000_000..=253_402_127_999_999_999;

/// A wall clock (its microseconds read as UTC) as the instant it is in `zone`: a wall time
/// repeated by a fall back is the earlier instant, one skipped by a spring forward moves
/// forward by the gap (jiff's and java.time's "compatible" rule).
pub(super) fn from_wall(zone: &jiff::tz::TimeZone, wall: i64) -> Option<i64> {
    use jiff::{tz::TimeZone, Timestamp};
    if !ZONE_RANGE.contains(&wall) {
        return None;
    }
    let civil = TimeZone::UTC.to_datetime(Timestamp::from_microsecond(wall).ok()?);
    let instant = zone.to_timestamp(civil).ok()?.as_microsecond();
    ZONE_RANGE.contains(&instant).then_some(instant)
}

/// An instant as its wall clock in `zone` (microseconds read as UTC).
pub(super) fn to_wall(zone: &jiff::tz::TimeZone, instant: i64) -> Option<i64> {
    if !ZONE_RANGE.contains(&instant) {
        return None;
    }
    let offset = zone.to_offset(jiff::Timestamp::from_microsecond(instant).ok()?);
    let wall = instant + i64::from(offset.seconds()) * 1_000_000;
    ZONE_RANGE.contains(&wall).then_some(wall)
}

/// A value's microseconds, and whether they are a wall clock (an offset-less text, or a
/// Debezium `Timestamp`/`MicroTimestamp`/`NanoTimestamp` column's epoch number) rather
/// than an instant.
fn moment(text: &str, hint: Option<&Hint>, hints: &Hints) -> Option<(i64, bool)> {
    if let Some(value) = parse_int(text) {
        let (unit, wall) = match hint {
            Some(Hint::Epoch(unit)) => (*unit, true),
            _ => (hints.epoch.unwrap_or(Unit::Millis), false),
        };
        return Some((epoch_micros(value, unit)?, wall));
    }
    let (micros, offset) = parse_iso(text)?;
    Some((micros, !offset))
}

/// An integer text in `unit` as microseconds (nanoseconds floored).
fn epoch_micros(value: i64, unit: Unit) -> Option<i64> {
    match unit {
        Unit::Millis => value.checked_mul(1000),
        Unit::Micros => Some(value),
        Unit::Nanos => Some(value.div_euclid(1000)),
    }
}

/// A timestamp (µs since the epoch, UTC): an integer is epoch time in the column hint's
/// unit, else the message's, else milliseconds; other text is ISO-8601 ([`parse_iso`]).
/// With the source's time zone, a wall clock becomes the instant it is there (`ntz`
/// false), an instant its wall clock there (`ntz` true, a `timestamp_ntz` column).
pub(super) fn parse_timestamp(
    text: &str,
    hint: Option<&Hint>,
    hints: &Hints,
    zone: Option<&jiff::tz::TimeZone>,
    ntz: bool,
) -> Option<i64> {
    let (micros, wall) = moment(text, hint, hints)?;
    match zone {
        Some(zone) if wall && !ntz => from_wall(zone, micros),
        Some(zone) if !wall && ntz => to_wall(zone, micros),
        _ => Some(micros),
    }
}

/// A date (days since the epoch): an integer is days, or epoch time in the column's or
/// the message's unit when one is given; other text is ISO-8601. Either way the instant
/// must fall on a UTC midnight (with the source's time zone, an instant must fall on a
/// midnight there): a time of day is an error, not cut.
pub(super) fn parse_date(
    text: &str,
    hint: Option<&Hint>,
    hints: &Hints,
    zone: Option<&jiff::tz::TimeZone>,
) -> Option<i32> {
    let micros = if let Some(value) = parse_int(text) {
        let unit = match hint {
            Some(Hint::Epoch(unit)) => Some(*unit),
            Some(Hint::Days) => None,
            _ => hints.epoch,
        };
        match unit {
            None => value.checked_mul(MICROS_PER_DAY)?,
            Some(unit) => {
                let micros = epoch_micros(value, unit)?;
                // The message's epoch numbers are instants; a column's are wall clocks.
                match zone {
                    Some(zone) if !matches!(hint, Some(Hint::Epoch(_))) => to_wall(zone, micros)?,
                    _ => micros,
                }
            }
        }
    } else {
        let (micros, offset) = parse_iso(text)?;
        match zone {
            Some(zone) if offset => to_wall(zone, micros)?,
            _ => micros,
        }
    };
    if micros.rem_euclid(MICROS_PER_DAY) != 0 {
        return None;
    }
    i32::try_from(micros.div_euclid(MICROS_PER_DAY)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(text: &str) -> Option<i64> {
        parse_timestamp(text, None, &Hints::default(), None, false)
    }

    #[test]
    fn integers_are_range_checked() {
        assert_eq!(parse_int("-42"), Some(-42));
        assert_eq!(parse_int("+7"), Some(7));
        assert_eq!(parse_int("9223372036854775808"), None);
        assert_eq!(parse_int("1.0"), None);
        assert_eq!(parse_int(" 1"), None);
        assert_eq!(parse_int(""), None);
        assert!(i8::try_from(parse_int("128").unwrap()).is_err());
    }

    /// The string-based readers these replaced (`str::parse`, digits joined into a
    /// `String`), kept as the reference the in-place ones must agree with.
    mod reference {
        pub fn parse_int(text: &str) -> Option<i64> {
            let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            text.parse().ok()
        }

        fn split_number(text: &str) -> Option<(bool, &str, &str, i64)> {
            let negative = text.starts_with('-');
            let body = text.strip_prefix(['+', '-']).unwrap_or(text);
            let (mantissa, exponent) = match body.find(['e', 'E']) {
                Some(at) => {
                    let exp = &body[at + 1..];
                    let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
                    if digits.is_empty()
                        || digits.len() > 6
                        || !digits.bytes().all(|b| b.is_ascii_digit())
                    {
                        return None;
                    }
                    (&body[..at], exp.parse::<i64>().ok()?)
                }
                None => (body, 0),
            };
            let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
            let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
            if int.len() + frac.len() == 0 || !all_digits(int) || !all_digits(frac) {
                return None;
            }
            Some((negative, int, frac, exponent))
        }

        pub fn parse_decimal(text: &str, p: u8, s: i8) -> Option<i128> {
            let (negative, int, frac, exponent) = split_number(text)?;
            let shift = s as i64 - frac.len() as i64 + exponent;
            let mut digits: String = [int, frac].concat();
            if shift >= 0 {
                if digits.bytes().all(|b| b == b'0') {
                    return Some(0);
                }
                digits.extend(std::iter::repeat_n('0', shift as usize));
            } else {
                let cut = (-shift) as usize;
                let keep = digits.len().saturating_sub(cut);
                if !digits.as_bytes()[keep..].iter().all(|&b| b == b'0') {
                    return None;
                }
                digits.truncate(keep);
            }
            let significant = digits.trim_start_matches('0');
            if significant.len() > p as usize {
                return None;
            }
            let value: i128 = if significant.is_empty() {
                0
            } else {
                significant.parse().ok()?
            };
            Some(if negative { -value } else { value })
        }
    }

    /// Every text built from a grammar of signs, digits, dots and exponents (and some
    /// that break it) reads the same as with the reference readers.
    #[test]
    fn in_place_number_readers_match_the_reference() {
        let signs = ["", "-", "+", "+-", " "];
        let ints = [
            "",
            "0",
            "00",
            "7",
            "0012",
            "123456789",
            "9223372036854775807",
            "9223372036854775808",
            "18446744073709551616",
            "99999999999999999999999999999999999999",
            "100000000000000000000000000000000000000",
            "1x",
        ];
        let fracs = [
            "",
            ".",
            ".0",
            ".5",
            ".050",
            ".123456789",
            ".00000000000000000000001",
            ".5.5",
        ];
        let exps = [
            "", "e", "e0", "E+2", "e-3", "e+", "e999999", "e-999999", "e1234567", "e2x",
        ];
        let mut texts = Vec::new();
        for sign in signs {
            for int in ints {
                for frac in fracs {
                    for exp in exps {
                        texts.push(format!("{sign}{int}{frac}{exp}"));
                    }
                }
            }
        }
        texts.extend(["", "-", ".", "e5", "١٢", "NaN", "--1", "1 "].map(String::from));
        let mut checked = 0;
        for text in &texts {
            assert_eq!(parse_int(text), reference::parse_int(text), "{text:?}");
            for (p, s) in [
                (10, 2),
                (38, 0),
                (38, 10),
                (20, 0),
                (5, 5),
                (1, 0),
                (18, -2),
            ] {
                assert_eq!(
                    parse_decimal(text, p, s),
                    reference::parse_decimal(text, p, s),
                    "{text:?} as decimal({p},{s})"
                );
                checked += 1;
            }
        }
        assert!(checked > 20_000, "{checked}");
    }

    #[test]
    fn floats_and_booleans() {
        assert_eq!(parse_float("1.100000"), Some(1.1));
        assert_eq!(parse_float("-.5e1"), Some(-5.0));
        assert_eq!(parse_float("-Infinity"), Some(f64::NEG_INFINITY));
        assert!(parse_float("NaN").unwrap().is_nan());
        assert_eq!(parse_float("1_0"), None);
        assert_eq!(parse_float("abc"), None);
        assert_eq!(parse_bool("1"), Some(true));
        assert_eq!(parse_bool("false"), Some(false));
        assert_eq!(parse_bool("yes"), None);
    }

    #[test]
    fn decimals_are_exact() {
        assert_eq!(parse_decimal("12.5", 10, 2), Some(1250));
        assert_eq!(parse_decimal("-0.05", 10, 2), Some(-5));
        assert_eq!(parse_decimal("12.500", 10, 2), Some(1250));
        assert_eq!(parse_decimal("12.505", 10, 2), None);
        assert_eq!(parse_decimal("1.5E+2", 10, 2), Some(15000));
        assert_eq!(parse_decimal("123456789", 10, 2), None);
        assert_eq!(parse_decimal("12345678", 10, 2), Some(1_234_567_800));
        assert_eq!(
            parse_decimal("18446744073709551615", 20, 0),
            Some(18446744073709551615)
        );
        assert_eq!(parse_decimal("abc", 10, 2), None);
        // 1234.5 with scale 1 is 12345 = 0x3039.
        let hint = Hint::DecimalBytes(1);
        assert_eq!(
            parse_decimal_hinted("MDk=", 10, 2, Some(&hint)),
            Some(123450)
        );
        // -1 as one byte 0xff.
        assert_eq!(parse_decimal_hinted("/w==", 10, 1, Some(&hint)), Some(-1));
        assert_eq!(parse_decimal_hinted("MDk=", 10, 0, Some(&hint)), None);
        let variable = Hint::VariableScaleDecimal;
        let text = r#"{"scale":1,"value":"MDk="}"#;
        assert_eq!(
            parse_decimal_hinted(text, 10, 2, Some(&variable)),
            Some(123450)
        );
        let text = r#"{"value":"MDk=","scale":3}"#;
        assert_eq!(
            parse_decimal_hinted(text, 10, 3, Some(&variable)),
            Some(12345)
        );
        assert_eq!(parse_decimal_hinted("12.5", 10, 2, Some(&variable)), None);
    }

    #[test]
    fn binary_text() {
        assert_eq!(parse_base64("3q2+7w=="), Some(vec![0xde, 0xad, 0xbe, 0xef]));
        assert_eq!(parse_base64("3q2+7w"), None);
        assert_eq!(parse_hex("DEadbeef"), Some(vec![0xde, 0xad, 0xbe, 0xef]));
        assert_eq!(parse_hex("abc"), None);
    }

    #[test]
    fn timestamps() {
        let t = 1_621_236_162_000_000;
        assert_eq!(ts("2021-05-17 07:22:42 +00:00"), Some(t));
        assert_eq!(ts("2021-05-17T07:22:42Z"), Some(t));
        assert_eq!(ts("2021-05-17T15:22:42+08:00"), Some(t));
        assert_eq!(ts("2021-05-17T15:22:42+0800"), Some(t));
        assert_eq!(ts("2021-05-17 07:22:42"), Some(t));
        assert_eq!(ts("1621236162000"), Some(t));
        assert_eq!(
            ts("2024-05-01T10:00:00.123456789Z"),
            Some(1_714_557_600_123_456)
        );
        assert_eq!(ts("1969-12-31T23:59:59.5Z"), Some(-500_000));
        assert_eq!(ts("2021-02-29 00:00:00"), None);
        assert_eq!(ts("2021-05-17 24:00:00"), None);
        assert_eq!(ts("yesterday"), None);
        let micros = Hints {
            epoch: Some(Unit::Micros),
            ..Hints::default()
        };
        assert_eq!(parse_timestamp("5", None, &micros, None, false), Some(5));
        let nanos = Hint::Epoch(Unit::Nanos);
        assert_eq!(
            parse_timestamp("-1", Some(&nanos), &micros, None, false),
            Some(-1)
        );
    }

    #[test]
    fn hinted_texts() {
        let text = |t: &str, hint: Hint| {
            let mut out = Vec::new();
            match hinted_text(t, &hint, &mut out) {
                Some(true) => Some(String::from_utf8(out).unwrap()),
                Some(false) => Some(format!("as is: {t}")),
                None => None,
            }
        };
        assert_eq!(
            text("MDk=", Hint::DecimalBytes(2)).as_deref(),
            Some("123.45")
        );
        assert_eq!(
            text(r#"{"value":"BNI=","scale":2}"#, Hint::VariableScaleDecimal).as_deref(),
            Some("12.34")
        );
        assert_eq!(
            text("-3600000001", Hint::Time(Unit::Micros)).as_deref(),
            Some("-01:00:00.000001")
        );
        assert_eq!(
            text("45296789", Hint::Time(Unit::Millis)).as_deref(),
            Some("12:34:56.789")
        );
        assert_eq!(text("e30=", Hint::Base64Text).as_deref(), Some("{}"));
        assert_eq!(text("//4=", Hint::Base64Text), None);
        assert_eq!(
            text("12.5", Hint::DecimalBytes(2)).as_deref(),
            Some("as is: 12.5")
        );
        assert_eq!(
            text("soon", Hint::Time(Unit::Micros)).as_deref(),
            Some("as is: soon")
        );
    }

    /// America/New_York's 2024 changes: the skipped 02:30 moves forward by the gap, the
    /// repeated 01:30 is the earlier instant; instants show as the wall clock.
    #[test]
    fn wall_clocks_across_daylight_saving() {
        let zone = jiff::tz::TimeZone::get("America/New_York").unwrap();
        let micros = |text: &str| parse_iso(text).unwrap().0;
        let at = |wall: &str| from_wall(&zone, micros(wall));
        assert_eq!(
            at("2024-03-10T02:30:00"),
            Some(micros("2024-03-10T07:30:00Z"))
        );
        assert_eq!(
            at("2024-03-10T01:59:59"),
            Some(micros("2024-03-10T06:59:59Z"))
        );
        assert_eq!(
            at("2024-11-03T01:30:00"),
            Some(micros("2024-11-03T05:30:00Z"))
        );
        assert_eq!(
            at("2024-11-03T02:00:00"),
            Some(micros("2024-11-03T07:00:00Z"))
        );
        assert_eq!(
            to_wall(&zone, micros("2024-11-03T06:30:00Z")),
            Some(micros("2024-11-03T01:30:00"))
        );
        // Outside 0001-01-02 .. 9999-12-29: no conversion, in either engine.
        assert_eq!(at("0001-01-01T12:00:00"), None);
        assert_eq!(at("9999-12-31T12:00:00"), None);
        let hints = Hints::default();
        assert_eq!(
            parse_timestamp("2024-03-10 02:30:00", None, &hints, Some(&zone), true),
            Some(micros("2024-03-10T02:30:00"))
        );
        assert_eq!(
            parse_date(
                "1714492800000",
                None,
                &Hints {
                    epoch: Some(Unit::Millis),
                    ..hints
                },
                Some(&jiff::tz::TimeZone::get("Asia/Shanghai").unwrap())
            ),
            Some(19844)
        );
    }

    #[test]
    fn dates() {
        let none = Hints::default();
        assert_eq!(parse_date("2024-05-01", None, &none, None), Some(19844));
        assert_eq!(
            parse_date("2024-05-01T00:00:00Z", None, &none, None),
            Some(19844)
        );
        assert_eq!(parse_date("2024-05-01T00:00:01Z", None, &none, None), None);
        assert_eq!(parse_date("19844", None, &none, None), Some(19844));
        let ms = Hints {
            epoch: Some(Unit::Millis),
            ..Hints::default()
        };
        assert_eq!(parse_date("1714521600000", None, &ms, None), Some(19844));
        assert_eq!(parse_date("1714521600001", None, &ms, None), None);
        assert_eq!(
            parse_date("19844", Some(&Hint::Days), &ms, None),
            Some(19844)
        );
    }
}
