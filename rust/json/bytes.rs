//! Byte scanning a word at a time: whitespace, the bytes a string scan stops at, runs of
//! digits, and short comparisons without `memcmp`.

#[inline(always)]
pub(super) fn is_ws(b: u8) -> bool {
    // One comparison for the bytes after which compact JSON mostly stands: `,:]}"`.
    const WS: u64 = 1 << b' ' | 1 << b'\t' | 1 << b'\n' | 1 << b'\r';
    b <= b' ' && WS & (1 << b) != 0
}

pub(super) const fn splat(b: u8) -> u64 {
    0x0101_0101_0101_0101 * b as u64
}

/// Flags (high bit of each byte) the bytes of `w` that are `"`, `\` or a control
/// character: those a string scan must stop at. The classic has-zero-byte test: the
/// lowest flag is exact (a borrow can only add false flags above a true one).
#[inline(always)]
pub(super) fn special(w: u64) -> u64 {
    let lo = splat(0x01);
    let hi = splat(0x80);
    let zero = |v: u64| v.wrapping_sub(lo) & !v & hi;
    let quote = zero(w ^ splat(b'"'));
    let backslash = zero(w ^ splat(b'\\'));
    let control = w.wrapping_sub(splat(0x20)) & !w & hi;
    quote | backslash | control
}

/// The index of the first byte at or after `i` that is `"`, `\` or a control character
/// (or the end): sixteen bytes at a time with SSE2 (every x86-64 has it), else eight.
#[inline(always)]
pub(super) fn special_at(src: &[u8], mut i: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    while let Some(chunk) = src.get(i..i + 16) {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of x86-64; the load reads the 16 bytes of `chunk`.
        let mask = unsafe {
            let v = _mm_loadu_si128(chunk.as_ptr().cast());
            let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
            let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
            let limit = _mm_set1_epi8(0x1F);
            let control = _mm_cmpeq_epi8(_mm_max_epu8(v, limit), limit);
            _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control))
        };
        if mask != 0 {
            return i + mask.trailing_zeros() as usize;
        }
        i += 16;
    }
    while let Some(chunk) = src.get(i..i + 8) {
        let mask = special(load8(chunk, 0));
        if mask != 0 {
            // The lowest flagged byte is always a true one.
            return i + (mask.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < src.len() && !matches!(src[i], b'"' | b'\\' | 0..=0x1F) {
        i += 1;
    }
    i
}

/// The index of the first byte at or after `i` that is not an ASCII digit: eight bytes at a
/// time (the long digit runs of epoch times and sequence ids).
#[inline(always)]
pub(super) fn digits_end(src: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = src.get(i..i + 8) {
        let w = load8(chunk, 0);
        // A byte is a digit when its high nibble is 3 and adding 6 keeps it 3. A carry out
        // of a byte only starts at a non-digit, so the lowest flag is exact.
        let high = splat(0xF0);
        let not_digit =
            ((w & high) ^ splat(0x30)) | ((w.wrapping_add(splat(0x06)) & high) ^ splat(0x30));
        if not_digit != 0 {
            return i + (not_digit.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while src.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    i
}

/// The value of eight ASCII digits read as a little-endian word (the first digit in the
/// lowest byte), or `None` when one of them is not a digit.
#[inline(always)]
pub(super) fn eight_digits(w: u64) -> Option<u64> {
    // As in `digits_end`: a byte is a digit when its high nibble is 3 and adding 6 keeps it 3.
    let high = splat(0xF0);
    if ((w & high) ^ splat(0x30)) | ((w.wrapping_add(splat(0x06)) & high) ^ splat(0x30)) != 0 {
        return None;
    }
    // Pairs, then fours, then all eight: each step joins neighbours as high * 10^k + low.
    let v = w - splat(b'0');
    let v = (v * 10 + (v >> 8)) & 0x00FF_00FF_00FF_00FF;
    let v = (v * 100 + (v >> 16)) & 0x0000_FFFF_0000_FFFF;
    Some((v * 10_000 + (v >> 32)) & 0xFFFF_FFFF)
}

/// The 8 bytes of `bytes` at `at` as a little-endian word.
#[inline(always)]
pub(super) fn load8(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// `a == b`, without a call to `memcmp` for the short keys JSON objects mostly have.
#[inline(always)]
pub(super) fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let load4 = |bytes: &[u8], at: usize| {
        let mut word = [0; 4];
        word.copy_from_slice(&bytes[at..at + 4]);
        u32::from_le_bytes(word)
    };
    match n {
        0..=3 => a.iter().zip(b).all(|(x, y)| x == y),
        4..=7 => load4(a, 0) == load4(b, 0) && load4(a, n - 4) == load4(b, n - 4),
        8..=16 => load8(a, 0) == load8(b, 0) && load8(a, n - 8) == load8(b, n - 8),
        _ => a == b,
    }
}

pub(super) fn hex4(src: &[u8], at: usize) -> Option<u32> {
    let digits = src.get(at..at + 4)?;
    let mut value = 0;
    for &d in digits {
        value = value * 16 + (d as char).to_digit(16)?;
    }
    Some(value)
}
