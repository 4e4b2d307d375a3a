//! Object keys: the hash kept on the tape for each key, and [`Name`], a key a decoder looks
//! for with its hash computed at compile time.

use super::*;

/// A hash of a key's text, kept on the tape so key comparisons mostly compare two numbers:
/// its length and its first and last eight bytes, mixed.
#[inline(always)]
pub(super) fn key_hash(text: &[u8]) -> u32 {
    let n = text.len();
    let (first, last) = if n >= 8 {
        (load8(text, 0), load8(text, n - 8))
    } else {
        let mut word = 0u64;
        for (i, &b) in text.iter().enumerate() {
            word |= (b as u64) << (8 * i);
        }
        (word, 0)
    };
    mix_hash(first, last, n)
}

/// The hash of a key of `n` bytes from its first and last eight (zero-padded) bytes.
#[inline(always)]
pub(super) const fn mix_hash(first: u64, last: u64, n: usize) -> u32 {
    let mixed =
        (first ^ last.rotate_left(29) ^ ((n as u64) << 56)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (mixed >> 32) as u32
}

/// [`key_hash`] at compile time, for [`Name`]s: the same value, in a `const fn`.
pub(super) const fn const_key_hash(text: &[u8]) -> u32 {
    const fn word(text: &[u8], at: usize, len: usize) -> u64 {
        let mut word = 0u64;
        let mut i = 0;
        while i < len {
            word |= (text[at + i] as u64) << (8 * i);
            i += 1;
        }
        word
    }
    let n = text.len();
    let (first, last) = if n >= 8 {
        (word(text, 0, 8), word(text, n - 8, 8))
    } else {
        (word(text, 0, n), 0)
    };
    mix_hash(first, last, n)
}

/// A key a decoder looks for, with its hash computed at compile time: comparing it with a
/// member's key mostly compares two numbers.
#[derive(Debug, Clone, Copy)]
pub struct Name {
    pub(super) text: &'static str,
    pub(super) hash: u32,
}

impl Name {
    /// The key `text`.
    pub const fn new(text: &'static str) -> Self {
        Self {
            text,
            hash: const_key_hash(text.as_bytes()),
        }
    }

    /// The key's text.
    pub fn text(&self) -> &'static str {
        self.text
    }

    /// The key's bit in a 64-bit filter of hashes.
    pub(super) const fn bit(&self) -> u64 {
        1 << (self.hash % 64)
    }
}
