//! Value rendering shared by the formats: charset decoding and base64, written straight into
//! a column's bytes.

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
