//! Escapes: resolving a string's escapes, and quoting a string as serde_json does (with
//! [`crate::text::json_string_into`], the one JSON string writer).

use super::*;

/// Appends the text of string content `raw` (checked by the scanner), escapes resolved.
pub(super) fn unescape_into(raw: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while i < raw.len() {
        let Some(n) = raw[i..].iter().position(|&b| b == b'\\') else {
            out.extend_from_slice(&raw[i..]);
            return;
        };
        out.extend_from_slice(&raw[i..i + n]);
        i += n;
        let (c, len) = escape_at(raw, i);
        let mut utf8 = [0; 4];
        out.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
        i += len;
    }
}

/// The character of the (checked) escape at `raw[i]` and the escape's length.
pub(super) fn escape_at(raw: &[u8], i: usize) -> (char, usize) {
    let simple = |c| (c, 2);
    match raw[i + 1] {
        b'b' => simple('\u{8}'),
        b'f' => simple('\u{c}'),
        b'n' => simple('\n'),
        b'r' => simple('\r'),
        b't' => simple('\t'),
        b'u' => {
            let unit = hex4(raw, i + 2).unwrap_or(0xFFFD);
            if (0xD800..0xDC00).contains(&unit) {
                let low = hex4(raw, i + 8).unwrap_or(0xDC00);
                let c = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                (char::from_u32(c).unwrap_or('\u{FFFD}'), 12)
            } else {
                (char::from_u32(unit).unwrap_or('\u{FFFD}'), 6)
            }
        }
        other => simple(other as char),
    }
}

/// Appends `s` as a quoted JSON string with exactly serde_json's escapes: `\"`, `\\`,
/// `\b \f \n \r \t`, other control characters as `\u00xx` (lowercase hex), everything else
/// as itself.
pub(super) fn quote_into(s: Str<'_>, out: &mut Vec<u8>) {
    if !s.escaped {
        // Unescaped string content has no quote, backslash or control character.
        out.push(b'"');
        out.extend_from_slice(s.raw);
        out.push(b'"');
    } else {
        crate::text::json_string_into(&s.text(), out);
    }
}
