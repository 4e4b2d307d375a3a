//! Scalar values as text, written straight into a column's bytes: charset decoding,
//! base64, floats, decimals, dates, times and timestamps, and JSON strings. The one
//! definition of those texts for every format: the binary formats and typed mode call it
//! directly, and `render/` (the JSON and Avro values of the event columns) on top of
//! it. Their rules are written down in `docs/formats/datahub-tuple.md` ("Rendering values
//! as text") and `docs/formats/datastream-avro.md` ("Values"); the Python engine has the
//! same functions in `python/cdc_decode/fallback/_values.py`.

use std::fmt::Write as _;

use arrow_buffer::i256;
use arrow_schema::TimeUnit;
use encoding_rs::{Encoding, GB18030, WINDOWS_1252};

/// How the bytes of a text value are to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charset {
    /// Strict UTF-8.
    Utf8,
    /// Strict ASCII.
    Ascii,
    /// A single- or multi-byte encoding, decoded with encoding_rs (WHATWG definitions).
    Legacy(&'static Encoding),
    /// Not text: rendered as base64.
    Binary,
}

impl Charset {
    /// The charset a MySQL charset name stands for, matched case-insensitively; `None` for
    /// a name this project does not decode (`docs/formats/tencent-dts.md`).
    pub fn from_name(name: &str) -> Option<Self> {
        // The names MySQL writes, spelled as it writes them, first: this runs per value.
        match name {
            "utf8mb4" | "utf8" | "utf8mb3" | "" => return Some(Self::Utf8),
            "gbk" | "gb18030" | "gb2312" => return Some(Self::Legacy(GB18030)),
            "latin1" => return Some(Self::Legacy(WINDOWS_1252)),
            "ascii" => return Some(Self::Ascii),
            "binary" => return Some(Self::Binary),
            _ => {}
        }
        const UTF8: [&str; 5] = ["", "utf8", "utf8mb3", "utf8mb4", "utf-8"];
        const LATIN1: [&str; 2] = ["latin1", "cp1252"];
        const GB: [&str; 4] = ["gbk", "gb2312", "gb18030", "cp936"];
        const ASCII: [&str; 2] = ["ascii", "us-ascii"];
        let is = |names: &[&str]| names.iter().any(|n| n.eq_ignore_ascii_case(name));
        if is(&UTF8) {
            Some(Self::Utf8)
        } else if is(&LATIN1) {
            // MySQL's latin1 is windows-1252 with the five undefined bytes as C1 controls,
            // which is exactly the WHATWG windows-1252 decoder.
            Some(Self::Legacy(WINDOWS_1252))
        } else if is(&GB) {
            Some(Self::Legacy(GB18030))
        } else if is(&ASCII) {
            Some(Self::Ascii)
        } else if name.eq_ignore_ascii_case("binary") {
            Some(Self::Binary)
        } else {
            None
        }
    }

    /// Whether `bytes` are valid in this charset: [`Charset::decode_into`]'s check, without
    /// the text.
    pub fn is_valid(self, bytes: &[u8]) -> bool {
        match self {
            Self::Utf8 => utf8(bytes).is_some(),
            Self::Ascii => bytes.is_ascii(),
            Self::Legacy(_) if bytes.is_ascii() => true,
            Self::Legacy(encoding) => encoding
                .decode_without_bom_handling_and_without_replacement(bytes)
                .is_some(),
            Self::Binary => true,
        }
    }

    /// Appends `bytes` decoded from this charset to `out` as UTF-8. `false` (and nothing
    /// appended) when the bytes are not valid in the charset.
    pub fn decode_into(self, bytes: &[u8], out: &mut Vec<u8>) -> bool {
        match self {
            Self::Utf8 => {
                let ok = utf8(bytes).is_some();
                if ok {
                    out.extend_from_slice(bytes);
                }
                ok
            }
            Self::Ascii => {
                let ok = bytes.is_ascii();
                if ok {
                    out.extend_from_slice(bytes);
                }
                ok
            }
            // Both legacy encodings here are ASCII-compatible.
            Self::Legacy(_) if bytes.is_ascii() => {
                out.extend_from_slice(bytes);
                true
            }
            Self::Legacy(encoding) => {
                // Straight into the column's bytes: no temporary String.
                let mut decoder = encoding.new_decoder_without_bom_handling();
                let Some(room) = decoder.max_utf8_buffer_length_without_replacement(bytes.len())
                else {
                    return false;
                };
                let start = out.len();
                out.resize(start + room, 0);
                let (result, read, written) =
                    decoder.decode_to_utf8_without_replacement(bytes, &mut out[start..], true);
                let ok =
                    matches!(result, encoding_rs::DecoderResult::InputEmpty) && read == bytes.len();
                out.truncate(if ok { start + written } else { start });
                ok
            }
            Self::Binary => {
                base64_into(bytes, out);
                true
            }
        }
    }
}

/// `bytes` as UTF-8 text, checked: short ASCII strings (names, numbers, charsets) take a
/// cheaper path than `std::str::from_utf8`.
#[inline]
pub fn utf8(bytes: &[u8]) -> Option<&str> {
    if bytes.is_ascii() {
        // SAFETY: ASCII is UTF-8.
        Some(unsafe { std::str::from_utf8_unchecked(bytes) })
    } else {
        std::str::from_utf8(bytes).ok()
    }
}

/// Appends standard padded base64 of `bytes` to `out` (base64-simd: several times the
/// `base64` crate's speed on the 20 to 200 byte values of BLOB columns).
pub fn base64_into(bytes: &[u8], out: &mut Vec<u8>) {
    let encoder = base64_simd::STANDARD;
    let len = encoder.encoded_length(bytes.len());
    out.reserve(len);
    let start = out.len();
    let spare = &mut out.spare_capacity_mut()[..len];
    let written = encoder
        .encode(bytes, base64_simd::Out::from_uninit_slice(spare))
        .len();
    // SAFETY: `encode` initialised the first `written` bytes of the spare capacity.
    unsafe { out.set_len(start + written) };
}

/// A small stack buffer for `std::fmt` output (no allocation).
struct StackText<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> StackText<N> {
    fn new() -> Self {
        Self {
            buf: [0; N],
            len: 0,
        }
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl<const N: usize> std::fmt::Write for StackText<N> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        let room = self.buf.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        room.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Appends `value` as Python's `repr(float)` writes it: the shortest digits that read back
/// to the same `f64`, in Python's layout ([`float_layout`]).
pub fn f64_into(value: f64, out: &mut Vec<u8>) {
    if !value.is_finite() {
        return non_finite_into(value.is_nan(), value < 0.0, out);
    }
    // Ryu: the shortest digits that read back, the closest of them to the value (several
    // times faster than `std::fmt`, which gives the same digits).
    float_layout(ryu::Buffer::new().format_finite(value).as_bytes(), out);
}

/// Appends `value` as the shortest digits that read back to the same **`f32`** (not the
/// digits of the `f64` it widens to: `0.1`, not `0.10000000149011612`), in Python's layout.
pub fn f32_into(value: f32, out: &mut Vec<u8>) {
    if !value.is_finite() {
        return non_finite_into(value.is_nan(), value < 0.0, out);
    }
    float_layout(ryu::Buffer::new().format_finite(value).as_bytes(), out);
}

fn non_finite_into(nan: bool, negative: bool, out: &mut Vec<u8>) {
    out.extend_from_slice(match (nan, negative) {
        (true, _) => b"nan",
        (false, true) => b"-inf",
        (false, false) => b"inf",
    });
}

/// Lays out the digits of a finite float's shortest text (Ryu's, in any of its forms:
/// `12.5`, `0.001`, `1e30`, `-1.5e-7`) as Python's `float.__repr__` does: fixed notation
/// when the decimal point falls within `-4 < k <= 16` digits of the first digit (`0.0001`,
/// `100.0`), else `d.ddde+XX` with at least two exponent digits.
fn float_layout(text: &[u8], out: &mut Vec<u8>) {
    let (negative, text) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let e = text.iter().position(|&b| b == b'e').unwrap_or(text.len());
    let (mantissa, exponent) = text.split_at(e);
    let exponent: i32 = exponent
        .get(1..)
        .and_then(|t| std::str::from_utf8(t).ok())
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    let mut digits = [0u8; 32];
    let mut n = 0;
    let mut point = mantissa.len(); // digits before the decimal point, so far
    for (i, &b) in mantissa.iter().enumerate() {
        if b == b'.' {
            point = i;
        } else if n < digits.len() {
            digits[n] = b;
            n += 1;
        }
    }
    let point = point.min(n) as i32;
    let leading = digits[..n].iter().take_while(|&&d| d == b'0').count();
    let trailing = digits[leading..n]
        .iter()
        .rev()
        .take_while(|&&d| d == b'0')
        .count();
    let digits = &digits[leading..n - trailing];
    if negative {
        out.push(b'-');
    }
    if digits.is_empty() {
        out.extend_from_slice(b"0.0");
        return;
    }
    let point = point - leading as i32 + exponent; // the value is 0.DIGITS × 10^point
    if point <= -4 || point > 16 {
        out.push(digits[0]);
        if digits.len() > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        let power = point - 1;
        out.push(if power < 0 { b'-' } else { b'+' });
        let magnitude = power.unsigned_abs();
        if magnitude < 10 {
            out.push(b'0');
        }
        out.extend_from_slice(itoa::Buffer::new().format(magnitude).as_bytes());
    } else if point <= 0 {
        out.extend_from_slice(b"0.");
        out.resize(out.len() + (-point) as usize, b'0');
        out.extend_from_slice(digits);
    } else if point as usize >= digits.len() {
        out.extend_from_slice(digits);
        out.resize(out.len() + point as usize - digits.len(), b'0');
        out.extend_from_slice(b".0");
    } else {
        let (int, frac) = digits.split_at(point as usize);
        out.extend_from_slice(int);
        out.push(b'.');
        out.extend_from_slice(frac);
    }
}

/// Appends a decimal as plain text with exactly `scale` fraction digits (`12.50`,
/// `-0.05`); a negative scale appends `-scale` zeros (`1200`), and zero is then `0`.
pub fn decimal_into(unscaled: i128, scale: i8, out: &mut Vec<u8>) {
    let mut buffer = itoa::Buffer::new();
    let text = buffer.format(unscaled).as_bytes();
    decimal_text_into(text, scale, out);
}

/// [`decimal_into`] for a 256-bit unscaled value.
pub fn decimal256_into(unscaled: i256, scale: i8, out: &mut Vec<u8>) {
    let mut text = StackText::<96>::new();
    let _ = write!(text, "{unscaled}");
    decimal_text_into(text.bytes(), scale, out);
}

/// `text` is an integer's decimal text (`-` then digits, or `0`).
fn decimal_text_into(text: &[u8], scale: i8, out: &mut Vec<u8>) {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    point_into(negative, digits, i64::from(scale), out);
}

/// Appends a decimal of magnitude `digits` (decimal digits, `0` for zero) and sign
/// `negative` with exactly `scale` fraction digits; a negative scale appends `-scale` zeros
/// (zero stays `0`). The one placing of a decimal point for every format's decimals.
fn point_into(negative: bool, digits: &[u8], scale: i64, out: &mut Vec<u8>) {
    if negative && digits != b"0" {
        out.push(b'-');
    }
    if scale <= 0 {
        out.extend_from_slice(digits);
        if digits != b"0" {
            out.resize(out.len() + scale.unsigned_abs() as usize, b'0');
        }
        return;
    }
    let scale = scale as usize;
    if digits.len() > scale {
        let (int, frac) = digits.split_at(digits.len() - scale);
        out.extend_from_slice(int);
        out.push(b'.');
        out.extend_from_slice(frac);
    } else {
        out.extend_from_slice(b"0.");
        out.resize(out.len() + scale - digits.len(), b'0');
        out.extend_from_slice(digits);
    }
}

/// A big-endian two's complement unscaled value (any length) as plain decimal text with
/// exactly `scale` fraction digits (Avro's `decimal` on `bytes` and `fixed`).
pub fn decimal_bytes_into(bytes: &[u8], scale: u32, out: &mut Vec<u8>) {
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let mut digits = Vec::new();
    if bytes.len() <= 16 {
        let mut v: i128 = if negative { -1 } else { 0 };
        for &b in bytes {
            v = (v << 8) | i128::from(b);
        }
        digits.extend_from_slice(itoa::Buffer::new().format(v.unsigned_abs()).as_bytes());
    } else {
        // Magnitude in base 2^32 limbs, divided down by 10^9.
        let mut magnitude: Vec<u8> = bytes.to_vec();
        if negative {
            for b in magnitude.iter_mut() {
                *b = !*b;
            }
            for b in magnitude.iter_mut().rev() {
                let (v, carry) = b.overflowing_add(1);
                *b = v;
                if !carry {
                    break;
                }
            }
        }
        let mut limbs: Vec<u32> = Vec::new();
        let pad = (4 - magnitude.len() % 4) % 4;
        let mut padded = vec![0u8; pad];
        padded.extend_from_slice(&magnitude);
        for chunk in padded.chunks(4) {
            limbs.push(u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]));
        }
        let mut groups = Vec::new();
        while limbs.iter().any(|&l| l != 0) {
            let mut rem: u64 = 0;
            for limb in limbs.iter_mut() {
                let cur = (rem << 32) | u64::from(*limb);
                *limb = (cur / 1_000_000_000) as u32;
                rem = cur % 1_000_000_000;
            }
            groups.push(rem as u32);
        }
        match groups.split_last() {
            None => digits.push(b'0'),
            Some((top, rest)) => {
                digits.extend_from_slice(itoa::Buffer::new().format(*top).as_bytes());
                for g in rest.iter().rev() {
                    let mut text = Vec::new();
                    padded_into(u64::from(*g), 9, &mut text);
                    digits.extend_from_slice(&text);
                }
            }
        }
    }
    point_into(negative, &digits, i64::from(scale), out);
}

/// Days from 1970-01-01 to a proleptic Gregorian date, the inverse of [`date_into`]
/// (Howard Hinnant's days_from_civil).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Appends the proleptic Gregorian date of `days` since 1970-01-01 as `YYYY-MM-DD`; a year
/// outside 0000-9999 gets a sign and at least four digits (`-0001-12-31`, `+10000-01-01`).
pub fn date_into(days: i64, out: &mut Vec<u8>) {
    // Howard Hinnant's civil_from_days, in i64 (every day an i64 timestamp can reach fits).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    if (0..=9999).contains(&year) {
        digits_into(year as u64, 4, out);
    } else {
        out.push(if year < 0 { b'-' } else { b'+' });
        padded_into(year.unsigned_abs(), 4, out);
    }
    out.push(b'-');
    digits_into(month as u64, 2, out);
    out.push(b'-');
    digits_into(day as u64, 2, out);
}

/// Appends a timestamp as ISO-8601 (`2024-05-01T10:00:00.123456`) with the unit's fraction
/// digits (none, 3, 6, 9), then `Z` when the column has a zone (the value is a UTC instant).
pub fn timestamp_into(value: i64, unit: TimeUnit, zoned: bool, out: &mut Vec<u8>) {
    let (per_second, digits) = match unit {
        TimeUnit::Second => (1, 0),
        TimeUnit::Millisecond => (1_000, 3),
        TimeUnit::Microsecond => (1_000_000, 6),
        TimeUnit::Nanosecond => (1_000_000_000, 9),
    };
    let seconds = value.div_euclid(per_second);
    let fraction = value.rem_euclid(per_second);
    let second_of_day = seconds.rem_euclid(86_400);
    date_into(seconds.div_euclid(86_400), out);
    out.push(b'T');
    digits_into((second_of_day / 3600) as u64, 2, out);
    out.push(b':');
    digits_into((second_of_day / 60 % 60) as u64, 2, out);
    out.push(b':');
    digits_into((second_of_day % 60) as u64, 2, out);
    if digits > 0 {
        out.push(b'.');
        digits_into(fraction as u64, digits, out);
    }
    if zoned {
        out.push(b'Z');
    }
}

/// `[-]HH:MM:SS.f…` of `value` units (`digits` 3: ms, 6: µs), hours as many as needed.
pub fn time_into(value: i64, digits: u8, out: &mut Vec<u8>) {
    let per_second: u64 = if digits == 3 { 1_000 } else { 1_000_000 };
    if value < 0 {
        out.push(b'-');
    }
    let v = value.unsigned_abs();
    let seconds = v / per_second;
    padded_into(seconds / 3600, 2, out);
    out.push(b':');
    padded_into(seconds / 60 % 60, 2, out);
    out.push(b':');
    padded_into(seconds % 60, 2, out);
    out.push(b'.');
    padded_into(v % per_second, digits as usize, out);
}

/// An offset in milliseconds as `±HH:MM`, with `:SS` and `.mmm` when not zero.
pub fn offset_into(ms: i64, out: &mut Vec<u8>) {
    out.push(if ms < 0 { b'-' } else { b'+' });
    let v = ms.unsigned_abs();
    let seconds = v / 1000;
    padded_into(seconds / 3600, 2, out);
    out.push(b':');
    padded_into(seconds / 60 % 60, 2, out);
    if v % 60_000 != 0 {
        out.push(b':');
        padded_into(seconds % 60, 2, out);
        if v % 1000 != 0 {
            out.push(b'.');
            padded_into(v % 1000, 3, out);
        }
    }
}

/// Appends exactly `width` decimal digits of `value` (below `10^width`), zero-padded: the
/// fixed-width fields of dates and times, without formatting machinery.
#[inline]
fn digits_into(mut value: u64, width: usize, out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + width, b'0');
    for digit in out[start..].iter_mut().rev() {
        *digit = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

/// Appends `value` in decimal, zero-padded to at least `width` digits.
pub fn padded_into(value: u64, width: usize, out: &mut Vec<u8>) {
    let mut buffer = itoa::Buffer::new();
    let text = buffer.format(value).as_bytes();
    out.resize(out.len() + width.saturating_sub(text.len()), b'0');
    out.extend_from_slice(text);
}

/// Appends `text` as a JSON string, escaped as serde_json's `to_string` and Python's
/// `json.encoder.encode_basestring` escape: `"` and `\`, `\b \f \n \r \t`, other control
/// characters as `\u00XX` (lowercase hex), everything else as itself.
pub fn json_string_into(text: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let bytes = text.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x0c => b"\\f",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f => {
                out.extend_from_slice(&bytes[start..i]);
                let hex = [HEX[(b >> 4) as usize], HEX[(b & 15) as usize]];
                out.extend_from_slice(b"\\u00");
                out.extend_from_slice(&hex);
                start = i + 1;
                continue;
            }
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        out.extend_from_slice(escape);
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(write: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut out = Vec::new();
        write(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn floats_print_as_python_repr() {
        for (value, expected) in [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1.5, "1.5"),
            (100.0, "100.0"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1e16, "1e+16"),
            (1234567890123456.0, "1234567890123456.0"),
            (12345678901234567.0, "1.2345678901234568e+16"),
            (1.5e300, "1.5e+300"),
            (-2.5e-7, "-2.5e-07"),
            (f64::MAX, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
        ] {
            assert_eq!(text(|o| f64_into(value, o)), expected, "{value:?}");
        }
    }

    #[test]
    fn float32_is_its_own_shortest_text() {
        for (value, expected) in [
            (0.1f32, "0.1"),
            (16_777_216.0, "16777216.0"),
            (1e20, "1e+20"),
            (f32::MAX, "3.4028235e+38"),
            (f32::MIN_POSITIVE, "1.1754944e-38"),
            (1e-45, "1e-45"),
            (-3.25, "-3.25"),
        ] {
            assert_eq!(text(|o| f32_into(value, o)), expected, "{value:?}");
        }
    }

    #[test]
    fn float_texts_are_shortest_and_read_back() {
        // Against the standard library's shortest `{:e}` on pseudo-random bit patterns: as
        // many digits, and the value back. (The digits themselves differ on a tie, which std
        // rounds up and Ryu, like Python, to even: 312985.125f32 is `312985.12`.)
        fn digits(text: &str) -> usize {
            let mantissa = text.split('e').next().unwrap_or_default();
            let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
            digits.trim_matches('0').len()
        }
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..100_000 {
            let bits = next();
            let (double, single) = (f64::from_bits(bits), f32::from_bits(bits as u32));
            if double.is_finite() && double != 0.0 {
                let ours = text(|o| f64_into(double, o));
                assert_eq!(ours.parse::<f64>().unwrap(), double, "{bits:#x}");
                assert_eq!(digits(&ours), digits(&format!("{double:e}")), "{bits:#x}");
            }
            if single.is_finite() && single != 0.0 {
                let ours = text(|o| f32_into(single, o));
                assert_eq!(ours.parse::<f32>().unwrap(), single, "{bits:#x}");
                assert_eq!(digits(&ours), digits(&format!("{single:e}")), "{bits:#x}");
            }
        }
        assert_eq!(
            text(|o| f32_into(f32::from_bits(0x4898_d324), o)),
            "312985.12"
        );
    }

    #[test]
    fn decimals_keep_their_scale() {
        for (unscaled, scale, expected) in [
            (1250, 2, "12.50"),
            (-5, 2, "-0.05"),
            (0, 2, "0.00"),
            (0, 0, "0"),
            (42, 0, "42"),
            (12, -2, "1200"),
            (0, -2, "0"),
            (-123_456, 3, "-123.456"),
        ] {
            assert_eq!(text(|o| decimal_into(unscaled, scale, o)), expected);
        }
        let big = i256::from_i128(i128::MIN).wrapping_mul(i256::from_i128(10));
        assert_eq!(
            text(|o| decimal256_into(big, 2, o)),
            "-17014118346046923173168730371588410572.80"
        );
    }

    #[test]
    fn dates_and_timestamps_are_iso() {
        assert_eq!(text(|o| date_into(0, o)), "1970-01-01");
        assert_eq!(text(|o| date_into(19_844, o)), "2024-05-01");
        assert_eq!(text(|o| date_into(-719_529, o)), "-0001-12-31");
        assert_eq!(text(|o| date_into(2_932_897, o)), "+10000-01-01");
        let us = 1_714_557_600_123_456;
        assert_eq!(
            text(|o| timestamp_into(us, TimeUnit::Microsecond, true, o)),
            "2024-05-01T10:00:00.123456Z"
        );
        assert_eq!(
            text(|o| timestamp_into(-1, TimeUnit::Millisecond, false, o)),
            "1969-12-31T23:59:59.999"
        );
        assert_eq!(
            text(|o| timestamp_into(0, TimeUnit::Second, true, o)),
            "1970-01-01T00:00:00Z"
        );
        assert_eq!(
            text(|o| timestamp_into(1, TimeUnit::Nanosecond, true, o)),
            "1970-01-01T00:00:00.000000001Z"
        );
        // Every i64 renders (no overflow at the extremes).
        for unit in [TimeUnit::Second, TimeUnit::Nanosecond] {
            text(|o| timestamp_into(i64::MIN, unit, true, o));
            text(|o| timestamp_into(i64::MAX, unit, true, o));
        }
    }

    #[test]
    fn json_strings_escape_as_serde_json() {
        assert_eq!(
            text(|o| json_string_into("a\"b\\c\n\u{1b}\u{7f}é/\u{8}\u{c}\r\t", o)),
            "\"a\\\"b\\\\c\\n\\u001b\u{7f}é/\\b\\f\\r\\t\""
        );
    }

    fn decode(charset: &str, bytes: &[u8]) -> Option<String> {
        let mut out = Vec::new();
        Charset::from_name(charset)?
            .decode_into(bytes, &mut out)
            .then(|| String::from_utf8(out).unwrap())
    }

    #[test]
    fn charsets() {
        assert_eq!(
            decode("UTF8MB4", "héllo 😀".as_bytes()).as_deref(),
            Some("héllo 😀")
        );
        assert_eq!(decode("utf8", b"\xff"), None);
        assert_eq!(decode("gbk", b"\xd6\xd0\xce\xc4").as_deref(), Some("中文"));
        assert_eq!(decode("gbk", b"\xd6").as_deref(), None);
        assert_eq!(
            decode("latin1", b"caf\xe9\x81").as_deref(),
            Some("café\u{81}")
        );
        assert_eq!(decode("ascii", b"ok").as_deref(), Some("ok"));
        assert_eq!(decode("ascii", b"\xe9"), None);
        assert_eq!(decode("binary", b"\x00\xff").as_deref(), Some("AP8="));
        assert_eq!(decode("big5", b"x"), None);
    }

    #[test]
    fn base64_pads() {
        for (input, expected) in [
            (&b""[..], ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
        ] {
            let mut out = b"x".to_vec();
            base64_into(input, &mut out);
            assert_eq!(out, format!("x{expected}").as_bytes());
        }
    }

    fn decimal(bytes: &[u8], scale: u32) -> String {
        let mut out = Vec::new();
        decimal_bytes_into(bytes, scale, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn big_endian_decimals() {
        assert_eq!(decimal(&[0x01, 0x00], 2), "2.56");
        assert_eq!(decimal(&[0xff], 2), "-0.01");
        assert_eq!(decimal(&[], 0), "0");
        assert_eq!(decimal(&[0x00], 3), "0.000");
        let mut big = vec![0u8; 20];
        big[19] = 5;
        assert_eq!(decimal(&big, 1), "0.5");
        let minus = vec![0xffu8; 20];
        assert_eq!(decimal(&minus, 0), "-1");
        let mut large = vec![0u8; 17];
        large[0] = 1; // 2^128
        assert_eq!(
            decimal(&large, 0),
            "340282366920938463463374607431768211456"
        );
    }

    #[test]
    fn times_and_offsets() {
        let text = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut out = Vec::new();
            f(&mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(
            text(&|o| time_into(29_730_000_000, 6, o)),
            "08:15:30.000000"
        );
        assert_eq!(
            text(&|o| time_into(-3_020_399_000_000, 6, o)),
            "-838:59:59.000000"
        );
        assert_eq!(text(&|o| offset_into(3_600_000, o)), "+01:00");
        assert_eq!(text(&|o| offset_into(-19_800_000, o)), "-05:30");
    }
}
