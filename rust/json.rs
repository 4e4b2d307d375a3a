//! Strict JSON for the JSON formats (`datahub-blob`, `tdsql-json`): one reusable parser that
//! checks a message whole and records it as a flat tape of spans into the input. Decoders
//! look fields up on the tape and copy values from the input straight into the Arrow
//! builders: no tree of owned values, and no allocation per message once the tape has
//! grown to the size of the largest message.
//!
//! The rules are those of `docs/formats/datahub-blob.md` ("JSON accepted"), which the
//! Python fallback follows too:
//! - RFC 8259 read strictly: strict UTF-8 (checked once, whole), no byte order mark, JSON
//!   whitespace only, no comments, trailing commas, `NaN` or control characters in strings;
//! - a `\u` escape of a surrogate must be a high-low pair: a lone surrogate is an error,
//!   in every string and key, read or not;
//! - at most [`MAX_DEPTH`] levels of objects and arrays, counted here (the parser is a loop
//!   with an explicit stack: hostile nesting cannot recurse);
//! - number tokens are kept as the exact text sent, never converted;
//! - within an object the first of duplicate keys wins ([`Value::members`] skips the later
//!   ones; [`Value::get`] finds the first).
//!
//! Why our own scanner rather than serde_json, simd-json or sonic-rs: no one of them gives
//! all of the above at once (number tokens without converting, first-wins duplicates,
//! surrogate checks in skipped values, a depth limit of our choosing), and the tape of
//! spans lets a decoder write values without building a document first.
//! `tools/json-choice/README.md` has the measurements.

use std::borrow::Cow;
use std::collections::HashSet;

pub use crate::error::JsonError;
use crate::limits::{grouped, Limits, OverLimit};

/// Most levels of nested objects and arrays a message may have (the top value is level 1),
/// unless [`Parser::limited`] says otherwise.
pub const MAX_DEPTH: usize = 128;

/// Members an object may have before duplicate keys are found with a hash set instead of
/// comparing each key with the ones before it.
const LINEAR_DEDUP: u32 = 32;

/// Values a parser remembers ([`Parser::remembering`]): one per table of a stream, mostly.
const REMEMBERED: usize = 8;

/// The largest value a parser remembers, in bytes.
const MAX_REMEMBERED: usize = 16 << 10;

type Result<T> = std::result::Result<T, JsonError>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    Null,
    False,
    True,
    Number,
    /// A string without escapes: its span is its text.
    Plain,
    /// A string with escapes.
    Escaped,
    Object,
    Array,
    /// An object or array checked but not recorded ([`Parser::skipping`]).
    Skipped,
}

/// One value on the tape. Scalars span their token (a string: the text between its
/// quotes). A container's children follow it on the tape (an object's as key, value,
/// key, value ...); `next` is the index after its last descendant, where its next sibling
/// starts; `count` is its number of members or items.
#[derive(Debug, Clone, Copy)]
struct Node {
    tag: Tag,
    start: u32,
    end: u32,
    next: u32,
    count: u32,
}

/// A JSON parser whose buffers are kept from one message to the next.
#[derive(Debug)]
pub struct Parser {
    nodes: Vec<Node>,
    stack: Vec<Open>,
    skip: &'static [(Name, Name)],
    remember: &'static [Name],
    /// The top-level keys of `skip` and `remember`, one bit per hash (mod 64): a key whose
    /// bit is clear is none of them.
    watch: u64,
    /// Values of the `remember` keys met before, the most recently met first.
    seen: Vec<Seen>,
    /// The id the next value remembered gets ([`Value::remembered`]).
    next_id: u64,
    /// The remembered values on the tape of the message last parsed: `(node, id)`.
    replayed: Vec<(u32, u64)>,
    /// The message last parsed, which the tape spans point into; read only through a
    /// [`Value`], whose lifetime is the message's (see [`Parser::parse`]).
    src: *const u8,
    src_len: usize,
    /// `Limits::max_json_depth` and `Limits::max_items`.
    max_depth: usize,
    max_items: usize,
}

impl Default for Parser {
    fn default() -> Self {
        let limits = Limits::default();
        Self {
            nodes: Vec::new(),
            stack: Vec::new(),
            skip: &[],
            max_depth: limits.max_json_depth,
            max_items: limits.max_items,
            remember: &[],
            watch: 0,
            seen: Vec::new(),
            next_id: 0,
            replayed: Vec::new(),
            src: std::ptr::null(),
            src_len: 0,
        }
    }
}

// SAFETY: the raw pointer is only dereferenced through a `Value<'a>`, which borrows both
// the parser and the message for 'a: no thread can reach the message through a parser
// that has no live `Value`.
unsafe impl Send for Parser {}
// SAFETY: as above; a shared parser gives out nothing that writes.
unsafe impl Sync for Parser {}

/// A value checked once and remembered: its text, and its nodes with spans relative to its
/// start and `next` relative to its first node.
#[derive(Debug, Default)]
struct Seen {
    /// Which of the parser's `remember` keys it was the value of.
    key: usize,
    /// Told apart from every other value this parser remembered, before or after.
    id: u64,
    text: Vec<u8>,
    nodes: Vec<Node>,
}

/// An open container: its node (none while skipping) and whether it is an object.
#[derive(Debug, Clone, Copy)]
struct Open {
    node: u32,
    /// Members or items so far, written to the node when it closes.
    count: u32,
    /// Commas so far (items - 1), counted in skipped containers too, for `max_items`.
    commas: usize,
    object: bool,
}

impl Parser {
    /// A parser that checks but does not record the objects and arrays found at
    /// `top[key][member]` for each `(key, member)` of `skip`: parts of a message the
    /// decoder never reads (DataHub's `schema.dataColumn` column list). They read as
    /// [`Kind::Skipped`].
    pub fn skipping(skip: &'static [(Name, Name)]) -> Self {
        Self {
            skip,
            watch: skip.iter().fold(0, |watch, (top, _)| watch | top.bit()),
            ..Self::default()
        }
    }

    /// This parser with the nesting depth and items per container of `limits`.
    pub fn limited(mut self, limits: &Limits) -> Self {
        self.max_depth = limits.max_json_depth;
        self.max_items = limits.max_items;
        self
    }

    /// The parser, remembering the objects and arrays found at `top[key]` for each key of
    /// `keys`: parts of a message that repeat byte for byte from one message to the next
    /// (DataHub's `schema`, the same in every message of a table). A value equal to one
    /// remembered is not scanned again: its nodes are copied onto the tape. Parsing a text
    /// is deterministic and a JSON object or array ends where its bracket closes, so those
    /// bytes at that depth parse to the same nodes and are accepted the same way; nothing
    /// is accepted that a scan would reject, and the tape is the same.
    pub fn remembering(self, keys: &'static [Name]) -> Self {
        Self {
            remember: keys,
            watch: keys.iter().fold(self.watch, |watch, key| watch | key.bit()),
            ..self
        }
    }

    /// Checks `src` whole and returns its top value.
    pub fn parse<'a>(&'a mut self, src: &'a [u8]) -> Result<Value<'a>> {
        if src.len() >= u32::MAX as usize {
            return Err(JsonError::TooLarge(src.len()));
        }
        // simdutf8: the same checks as `std::str::from_utf8`, several times faster on the
        // mostly-ASCII bytes of JSON.
        if let Err(error) = simdutf8::compat::from_utf8(src) {
            return Err(JsonError::Utf8(error.valid_up_to()));
        }
        self.nodes.clear();
        self.stack.clear();
        self.replayed.clear();
        Scanner {
            src,
            nodes: &mut self.nodes,
            stack: &mut self.stack,
            skip: self.skip,
            max_depth: self.max_depth,
            max_items: self.max_items,
            watch: self.watch,
            under: None,
            skip_next: false,
            skipping: 0,
            remember: self.remember,
            seen: &mut self.seen,
            next_id: &mut self.next_id,
            replayed: &mut self.replayed,
            remember_next: None,
            recording: None,
        }
        .document()?;
        // A value is two words, cheap to pass around: the parser, and a place on its tape.
        self.src = src.as_ptr();
        self.src_len = src.len();
        Ok(Value {
            parser: self,
            at: 0,
        })
    }
}

struct Scanner<'s> {
    src: &'s [u8],
    nodes: &'s mut Vec<Node>,
    stack: &'s mut Vec<Open>,
    skip: &'static [(Name, Name)],
    watch: u64,
    max_depth: usize,
    max_items: usize,
    /// The member to skip within the value of the current top-level key.
    under: Option<&'static Name>,
    /// The value about to start is to be skipped.
    skip_next: bool,
    /// While skipping: the stack depth of the skipped container; else 0.
    skipping: usize,
    remember: &'static [Name],
    seen: &'s mut Vec<Seen>,
    next_id: &'s mut u64,
    replayed: &'s mut Vec<(u32, u64)>,
    /// The value about to start is that of `remember[key]`.
    remember_next: Option<usize>,
    /// The value of `remember[key]` being scanned: `(key, its first node, its start)`.
    recording: Option<(usize, usize, usize)>,
}

#[inline(always)]
fn is_ws(b: u8) -> bool {
    // One comparison for the bytes after which compact JSON mostly stands: `,:]}"`.
    const WS: u64 = 1 << b' ' | 1 << b'\t' | 1 << b'\n' | 1 << b'\r';
    b <= b' ' && WS & (1 << b) != 0
}

const fn splat(b: u8) -> u64 {
    0x0101_0101_0101_0101 * b as u64
}

/// Flags (high bit of each byte) the bytes of `w` that are `"`, `\` or a control
/// character: those a string scan must stop at. The classic has-zero-byte test: the
/// lowest flag is exact (a borrow can only add false flags above a true one).
#[inline(always)]
fn special(w: u64) -> u64 {
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
fn special_at(src: &[u8], mut i: usize) -> usize {
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
fn digits_end(src: &[u8], mut i: usize) -> usize {
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
fn eight_digits(w: u64) -> Option<u64> {
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

/// A hash of a key's text, kept on the tape so key comparisons mostly compare two numbers:
/// its length and its first and last eight bytes, mixed.
#[inline(always)]
fn key_hash(text: &[u8]) -> u32 {
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
const fn mix_hash(first: u64, last: u64, n: usize) -> u32 {
    let mixed =
        (first ^ last.rotate_left(29) ^ ((n as u64) << 56)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (mixed >> 32) as u32
}

/// [`key_hash`] at compile time, for [`Name`]s: the same value, in a `const fn`.
const fn const_key_hash(text: &[u8]) -> u32 {
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
    text: &'static str,
    hash: u32,
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
    const fn bit(&self) -> u64 {
        1 << (self.hash % 64)
    }
}

/// The 8 bytes of `bytes` at `at` as a little-endian word.
#[inline(always)]
fn load8(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// `a == b`, without a call to `memcmp` for the short keys JSON objects mostly have.
#[inline(always)]
fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
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

fn hex4(src: &[u8], at: usize) -> Option<u32> {
    let digits = src.get(at..at + 4)?;
    let mut value = 0;
    for &d in digits {
        value = value * 16 + (d as char).to_digit(16)?;
    }
    Some(value)
}

impl Scanner<'_> {
    fn error<T>(&self, what: &'static str, at: usize) -> Result<T> {
        Err(JsonError::Syntax { what, at })
    }

    #[inline(always)]
    fn skip_ws(&self, mut pos: usize) -> usize {
        while pos < self.src.len() && is_ws(self.src[pos]) {
            pos += 1;
        }
        pos
    }

    #[inline(always)]
    fn push(&mut self, tag: Tag, start: usize, end: usize) {
        self.push_counted(tag, start, end, 0);
    }

    #[inline(always)]
    fn push_counted(&mut self, tag: Tag, start: usize, end: usize, count: u32) {
        let next = self.nodes.len() as u32 + 1;
        self.nodes.push(Node {
            tag,
            start: start as u32,
            end: end as u32,
            next,
            count,
        });
    }

    /// The whole text: one value between optional whitespace. A loop over the values in
    /// document order, with the open containers on `stack`.
    fn document(&mut self) -> Result<()> {
        let src = self.src;
        let mut pos = self.skip_ws(0);
        'value: loop {
            // A value starts at `pos`.
            let Some(&b) = src.get(pos) else {
                return self.error("expected a value", pos);
            };
            let skip = std::mem::take(&mut self.skip_next);
            // A remembered value's nodes are copied (and `pos` moved past it); a new one is
            // recorded as it is scanned, and remembered when it closes.
            let replayed = match self.remember_next.take() {
                Some(key) if matches!(b, b'{' | b'[') => match self.replay(key, pos) {
                    Some(end) => {
                        pos = end;
                        true
                    }
                    None => {
                        self.recording = Some((key, self.nodes.len(), pos));
                        false
                    }
                },
                _ => false,
            };
            match b {
                _ if replayed => {}
                b'{' | b'[' => {
                    if self.stack.len() >= self.max_depth {
                        return Err(OverLimit::new(
                            format!("JSON nested more than {} levels deep", self.max_depth),
                            "max_json_depth",
                            self.max_depth,
                        )
                        .into());
                    }
                    let object = b == b'{';
                    let node = if self.skipping > 0 {
                        u32::MAX
                    } else {
                        let tag = match (skip, object) {
                            (true, _) => Tag::Skipped,
                            (false, true) => Tag::Object,
                            (false, false) => Tag::Array,
                        };
                        self.scalar(pos, pos, tag);
                        self.nodes.len() as u32 - 1
                    };
                    self.stack.push(Open {
                        node,
                        count: 0,
                        commas: 0,
                        object,
                    });
                    if skip {
                        self.skipping = self.stack.len();
                    }
                    pos = self.skip_ws(pos + 1);
                    let close = if object { b'}' } else { b']' };
                    if src.get(pos) != Some(&close) {
                        if object {
                            pos = self.key(pos)?;
                        }
                        continue 'value;
                    }
                    // An empty container: closed below like any other.
                }
                b'"' => {
                    let (end, escaped) = self.string(pos)?;
                    if self.skipping == 0 {
                        let tag = if escaped { Tag::Escaped } else { Tag::Plain };
                        self.scalar(pos + 1, end - 1, tag);
                    }
                    pos = end;
                }
                b'-' | b'0'..=b'9' => {
                    let end = self.number(pos)?;
                    if self.skipping == 0 {
                        self.scalar(pos, end, Tag::Number);
                    }
                    pos = end;
                }
                b't' | b'f' | b'n' => {
                    let (word, tag): (&[u8], Tag) = match b {
                        b't' => (b"true", Tag::True),
                        b'f' => (b"false", Tag::False),
                        _ => (b"null", Tag::Null),
                    };
                    if !src[pos..].starts_with(word) {
                        return self.error("expected a value", pos);
                    }
                    if self.skipping == 0 {
                        self.scalar(pos, pos + word.len(), tag);
                    }
                    pos += word.len();
                }
                _ => return self.error("expected a value", pos),
            }
            // After a value: close containers, or go on to the next member or item.
            loop {
                pos = self.skip_ws(pos);
                let Some(&top) = self.stack.last() else {
                    if pos < src.len() {
                        return self.error("extra data after the value", pos);
                    }
                    return Ok(());
                };
                let close = if top.object { b'}' } else { b']' };
                match src.get(pos) {
                    Some(&b',') => {
                        self.comma(top.object)?;
                        pos = self.skip_ws(pos + 1);
                        if top.object {
                            pos = self.key(pos)?;
                        }
                        continue 'value;
                    }
                    Some(&c) if c == close => {
                        if self.skipping == 0 || self.skipping == self.stack.len() {
                            // Recorded, or the skipped container itself.
                            let next = self.nodes.len() as u32;
                            let node = &mut self.nodes[top.node as usize];
                            node.end = pos as u32 + 1;
                            node.next = next;
                            node.count = top.count;
                            self.skipping = 0;
                            if let Some((key, first, start)) = self.recording {
                                if first == top.node as usize {
                                    self.recording = None;
                                    self.remember_value(key, first, start, pos + 1);
                                }
                            }
                        }
                        self.stack.pop();
                        pos += 1;
                    }
                    _ if top.object => return self.error("expected ',' or '}'", pos),
                    _ => return self.error("expected ',' or ']'", pos),
                }
            }
        }
    }

    /// Counts a comma in the open container: one more member or item than `max_items`
    /// allows is an error.
    #[inline(always)]
    fn comma(&mut self, object: bool) -> Result<()> {
        let max_items = self.max_items;
        if let Some(open) = self.stack.last_mut() {
            open.commas += 1;
            if open.commas >= max_items {
                let what = if object {
                    "an object of more than"
                } else {
                    "an array of more than"
                };
                let noun = if object { "members" } else { "items" };
                return Err(OverLimit::new(
                    format!("{what} {} {noun}", grouped(max_items)),
                    "max_items",
                    max_items,
                )
                .into());
            }
        }
        Ok(())
    }

    /// A value or a container (counted as a member or item of the open container).
    #[inline(always)]
    fn scalar(&mut self, start: usize, end: usize, tag: Tag) {
        if let Some(parent) = self.stack.last_mut() {
            parent.count += 1;
        }
        self.push(tag, start, end);
    }

    /// Copies the nodes of the value of `remember[key]` that `src[pos..]` starts with, if
    /// one was remembered: returns the index after it.
    fn replay(&mut self, key: usize, pos: usize) -> Option<usize> {
        let rest = &self.src[pos..];
        let i = self
            .seen
            .iter()
            .position(|seen| seen.key == key && rest.starts_with(&seen.text))?;
        self.seen[..=i].rotate_right(1);
        let seen = &self.seen[0];
        if let Some(parent) = self.stack.last_mut() {
            parent.count += 1;
        }
        let (at, base) = (pos as u32, self.nodes.len() as u32);
        self.replayed.push((base, seen.id));
        self.nodes.extend(seen.nodes.iter().map(|node| Node {
            start: node.start + at,
            end: node.end + at,
            next: node.next + base,
            ..*node
        }));
        Some(pos + seen.text.len())
    }

    /// Remembers the value of `remember[key]` at `start..end`, whose nodes start at `first`,
    /// in place of the one met least recently when [`REMEMBERED`] are.
    #[cold]
    fn remember_value(&mut self, key: usize, first: usize, start: usize, end: usize) {
        if end - start > MAX_REMEMBERED {
            return;
        }
        if self.seen.len() < REMEMBERED {
            self.seen.push(Seen::default());
        }
        self.seen.rotate_right(1);
        let seen = &mut self.seen[0];
        seen.key = key;
        seen.id = *self.next_id;
        *self.next_id += 1;
        self.replayed.push((first as u32, seen.id));
        seen.text.clear();
        seen.text.extend_from_slice(&self.src[start..end]);
        let (at, base) = (start as u32, first as u32);
        seen.nodes.clear();
        seen.nodes
            .extend(self.nodes[first..].iter().map(|node| Node {
                start: node.start - at,
                end: node.end - at,
                next: node.next - base,
                ..*node
            }));
    }

    /// An object key at `pos` and its colon: returns where the value starts.
    #[inline(always)]
    fn key(&mut self, pos: usize) -> Result<usize> {
        if self.src.get(pos) != Some(&b'"') {
            return self.error("expected a string key", pos);
        }
        let (end, escaped) = self.string(pos)?;
        let colon = self.skip_ws(end);
        if self.src.get(colon) != Some(&b':') {
            return self.error("expected ':'", colon);
        }
        if self.skipping == 0 {
            self.record_key(pos + 1, end - 1, escaped);
        }
        Ok(self.skip_ws(colon + 1))
    }

    /// Puts the key `start..end` on the tape, and notes whether its value is to be skipped.
    #[inline(always)]
    fn record_key(&mut self, start: usize, end: usize, escaped: bool) {
        let raw = &self.src[start..end];
        let (tag, hash) = if escaped {
            let mut text = Vec::with_capacity(raw.len());
            unescape_into(raw, &mut text);
            (Tag::Escaped, key_hash(&text))
        } else if let Some(chunk) = self.src.get(start..start + 8).filter(|_| raw.len() < 8) {
            // A short key read as one word from the message, masked to its length.
            let word = load8(chunk, 0) & ((1u64 << (8 * raw.len())) - 1);
            (Tag::Plain, mix_hash(word, 0, raw.len()))
        } else {
            (Tag::Plain, key_hash(raw))
        };
        // A key has no members: its `count` holds the hash of its text.
        self.push_counted(tag, start, end, hash);
        // Skipped and remembered values hang from the top two levels; most keys there are
        // none of those looked for, told by one bit (`remember_next` and `skip_next` are
        // taken by every value, so they are clear here).
        match self.stack.len() {
            1 if self.watch & (1 << (hash % 64)) == 0 => self.under = None,
            1 => {
                let key = Str {
                    raw,
                    escaped: tag == Tag::Escaped,
                    hash: Some(hash),
                };
                self.remember_next = self.remember.iter().position(|name| key.is(name));
                self.under = self
                    .skip
                    .iter()
                    .find(|(top, _)| key.is(top))
                    .map(|(_, member)| member);
            }
            2 => {
                if let Some(member) = self.under {
                    let key = Str {
                        raw,
                        escaped: tag == Tag::Escaped,
                        hash: Some(hash),
                    };
                    self.skip_next = key.is(member);
                }
            }
            _ => {}
        }
    }

    /// The string whose opening quote is at `pos`: returns the index after its closing
    /// quote, and whether it holds an escape. Checks escapes and rejects control
    /// characters. Eight bytes at a time while none of them needs a look.
    #[inline(always)]
    fn string(&self, pos: usize) -> Result<(usize, bool)> {
        let src = self.src;
        let mut i = pos + 1;
        let mut escaped = false;
        loop {
            i = special_at(src, i);
            match src.get(i) {
                None => return self.error("unterminated string", pos),
                Some(b'"') => return Ok((i + 1, escaped)),
                Some(b'\\') => {
                    escaped = true;
                    i = self.escape(i)?;
                }
                Some(_) => return self.error("control character in a string", i),
            }
        }
    }

    /// The escape at `i` (a backslash): returns the index after it.
    #[cold]
    #[inline(never)]
    fn escape(&self, i: usize) -> Result<usize> {
        let src = self.src;
        match src.get(i + 1) {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(i + 2),
            Some(b'u') => {
                let Some(unit) = hex4(src, i + 2) else {
                    return self.error("invalid \\u escape", i);
                };
                match unit {
                    0xD800..=0xDBFF => {
                        let low = (src.get(i + 6..i + 8) == Some(b"\\u"))
                            .then(|| hex4(src, i + 8))
                            .flatten();
                        match low {
                            Some(0xDC00..=0xDFFF) => Ok(i + 12),
                            _ => Err(JsonError::LoneSurrogate(i)),
                        }
                    }
                    0xDC00..=0xDFFF => Err(JsonError::LoneSurrogate(i)),
                    _ => Ok(i + 6),
                }
            }
            _ => self.error("invalid escape", i),
        }
    }

    /// The number token at `pos`: returns the index after it.
    fn number(&self, pos: usize) -> Result<usize> {
        let src = self.src;
        let digit = |i: usize| src.get(i).is_some_and(u8::is_ascii_digit);
        let digits = |i: usize| digits_end(src, i);
        let mut i = pos + usize::from(src[pos] == b'-');
        match src.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => i = digits(i + 1),
            _ => return self.error("invalid number", pos),
        }
        if src.get(i) == Some(&b'.') {
            if !digit(i + 1) {
                return self.error("invalid number", pos);
            }
            i = digits(i + 1);
        }
        if matches!(src.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(src.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if !digit(i) {
                return self.error("invalid number", pos);
            }
            i = digits(i);
        }
        Ok(i)
    }
}

/// What a value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Null,
    Bool(bool),
    Number,
    String,
    Object,
    Array,
    /// An object or array the parser was told to skip: checked, not recorded.
    Skipped,
}

/// One value of a parsed message: a position on the parser's tape.
#[derive(Debug, Clone, Copy)]
pub struct Value<'a> {
    parser: &'a Parser,
    at: usize,
}

/// A string or key as sent: its text between the quotes, escapes not yet resolved.
#[derive(Debug, Clone, Copy)]
pub struct Str<'a> {
    raw: &'a [u8],
    escaped: bool,
    /// For a member's key: the hash of its text ([`key_hash`]).
    hash: Option<u32>,
}

impl<'a> Value<'a> {
    #[inline(always)]
    fn nodes(&self) -> &'a [Node] {
        &self.parser.nodes
    }

    #[inline(always)]
    fn src(&self) -> &'a [u8] {
        // SAFETY: `Parser::parse` set these from a `&'a [u8]` and returned this value with
        // lifetime 'a, and the parser cannot parse again while it is borrowed by it.
        unsafe { std::slice::from_raw_parts(self.parser.src, self.parser.src_len) }
    }

    #[inline(always)]
    fn node(&self) -> Node {
        self.nodes()[self.at]
    }

    fn span(&self) -> &'a [u8] {
        let node = self.node();
        &self.src()[node.start as usize..node.end as usize]
    }

    fn at(&self, at: usize) -> Value<'a> {
        Value { at, ..*self }
    }

    /// What this value is.
    pub fn kind(&self) -> Kind {
        match self.node().tag {
            Tag::Null => Kind::Null,
            Tag::False => Kind::Bool(false),
            Tag::True => Kind::Bool(true),
            Tag::Number => Kind::Number,
            Tag::Plain | Tag::Escaped => Kind::String,
            Tag::Object => Kind::Object,
            Tag::Array => Kind::Array,
            Tag::Skipped => Kind::Skipped,
        }
    }

    /// True for `null`.
    pub fn is_null(&self) -> bool {
        self.node().tag == Tag::Null
    }

    /// The string, for a string value.
    pub fn as_str(&self) -> Option<Str<'a>> {
        let node = self.node();
        match node.tag {
            Tag::Plain | Tag::Escaped => Some(Str {
                raw: self.span(),
                escaped: node.tag == Tag::Escaped,
                hash: None,
            }),
            _ => None,
        }
    }

    /// The token exactly as sent, for a number.
    pub fn number(&self) -> Option<&'a str> {
        (self.node().tag == Tag::Number).then(|| {
            // SAFETY: a number token is ASCII (checked by the scanner).
            unsafe { std::str::from_utf8_unchecked(self.span()) }
        })
    }

    /// Members (objects) or items (arrays); 0 for scalars. Duplicate keys count.
    pub fn len(&self) -> usize {
        self.node().count as usize
    }

    /// True for an empty object or array, and for scalars.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// For a value the parser remembers ([`Parser::remembering`]), its id: the same for
    /// every message in which the parser finds these bytes again, and never given to
    /// another value, even once this one is forgotten. What a decoder derives from the
    /// value alone can be kept under its id rather than derived again.
    #[inline]
    pub fn remembered(&self) -> Option<u64> {
        self.parser
            .replayed
            .iter()
            .find(|&&(node, _)| node as usize == self.at)
            .map(|&(_, id)| id)
    }

    /// The value of the first member named `key`, for an object.
    pub fn get(&self, key: &str) -> Option<Value<'a>> {
        self.find(key, key_hash(key.as_bytes()))
    }

    /// Like [`Value::get`], for a key known at compile time.
    pub fn get_name(&self, name: &Name) -> Option<Value<'a>> {
        self.find(name.text, name.hash)
    }

    fn find(&self, key: &str, hash: u32) -> Option<Value<'a>> {
        if self.node().tag != Tag::Object {
            return None;
        }
        let mut i = self.at + 1;
        let end = self.node().next as usize;
        while i < end {
            if self.nodes()[i].count == hash && self.at(i).as_str()?.eq_str(key) {
                return Some(self.at(i + 1));
            }
            i = self.nodes()[i + 1].next as usize;
        }
        None
    }

    /// An object's members in the order sent, later duplicates of a key left out (the
    /// first one wins). Empty for anything but an object.
    pub fn members(&self) -> Members<'a> {
        let node = self.node();
        let (start, end) = if node.tag == Tag::Object {
            (self.at + 1, node.next as usize)
        } else {
            (0, 0)
        };
        Members {
            object: *self,
            nodes: self.nodes(),
            src: self.src(),
            next: start,
            end,
            dedup: true,
            bloom: 0,
            seen: (node.count > LINEAR_DEDUP).then(HashSet::new),
        }
    }

    /// An object's members in the order sent, later duplicates of a key included: cheaper
    /// than [`Value::members`] for a reader that keeps the first of each key it wants.
    pub fn all_members(&self) -> Members<'a> {
        Members {
            dedup: false,
            ..self.members()
        }
    }

    /// The first member named by each of `names` (by position), and whether the object has
    /// members of other names; all `None` for anything but an object. One pass over the
    /// tape, comparing each key's hash with the names' before any text.
    #[inline]
    pub fn named<const N: usize>(&self, names: &[Name; N]) -> ([Option<Value<'a>>; N], bool) {
        let mut fields = [None; N];
        let mut others = false;
        let (nodes, src) = (self.nodes(), self.src());
        let node = nodes[self.at];
        if node.tag != Tag::Object {
            return (fields, false);
        }
        let mut i = self.at + 1;
        while i < node.next as usize {
            let key = nodes[i];
            let found = names
                .iter()
                .position(|name| name.hash == key.count && key_str(src, key).eq_str(name.text));
            match found {
                Some(n) => {
                    fields[n].get_or_insert(self.at(i + 1));
                }
                None => others = true,
            }
            i = nodes[i + 1].next as usize;
        }
        (fields, others)
    }

    /// Calls `f` with each member of an object, as [`Value::members`] yields them (later
    /// duplicates of a key left out): the same, without an iterator's state, for the loops
    /// that write every member (row images).
    #[inline]
    pub fn for_each_member(&self, mut f: impl FnMut(Str<'a>, Value<'a>)) {
        let (nodes, src) = (self.nodes(), self.src());
        let node = nodes[self.at];
        if node.tag != Tag::Object || node.count > LINEAR_DEDUP {
            self.members().for_each(|(key, value)| f(key, value));
            return;
        }
        // One bit per key hash seen (mod 64): a key whose bit is clear is new.
        let mut bloom = 0u64;
        let mut i = self.at + 1;
        while i < node.next as usize {
            let key = key_str(src, nodes[i]);
            let bit = 1 << (nodes[i].count % 64);
            if bloom & bit == 0 || !self.key_before(key, i) {
                bloom |= bit;
                f(key, self.at(i + 1));
            }
            i = nodes[i + 1].next as usize;
        }
    }

    /// True when this object has a member before the one whose key is at `key_at` with the
    /// same key as `key`.
    fn key_before(&self, key: Str<'_>, key_at: usize) -> bool {
        let nodes = self.nodes();
        let hash = nodes[key_at].count;
        let mut i = self.at + 1;
        while i < key_at {
            if nodes[i].count == hash && key_str(self.src(), nodes[i]).same(key) {
                return true;
            }
            i = nodes[i + 1].next as usize;
        }
        false
    }

    /// An array's items in order. Empty for anything but an array.
    pub fn items(&self) -> Items<'a> {
        let node = self.node();
        let (start, end) = if node.tag == Tag::Array {
            (self.at + 1, node.next as usize)
        } else {
            (0, 0)
        };
        Items {
            array: *self,
            next: start,
            end,
        }
    }

    /// Appends the value as row-image text (docs/formats/datahub-blob.md, "Row images"): a
    /// string's text, a number's token, `true`/`false`, an object or array as compact
    /// JSON. Returns false, appending nothing, for `null`.
    pub fn render_into(&self, out: &mut Vec<u8>) -> bool {
        match self.node().tag {
            Tag::Null => return false,
            Tag::False => out.extend_from_slice(b"false"),
            Tag::True => out.extend_from_slice(b"true"),
            // Mostly short: copied inline rather than by a call to `memcpy`.
            Tag::Number | Tag::Plain | Tag::Skipped => crate::columns::append(out, self.span()),
            Tag::Escaped => unescape_into(self.span(), out),
            Tag::Object | Tag::Array => self.compact_into(out),
        }
        true
    }

    /// Appends the value as compact JSON: no whitespace, first-wins objects, number tokens
    /// as sent, strings escaped as serde_json's `to_string` does. Recursion is bounded by
    /// the parser's depth limit.
    pub fn compact_into(&self, out: &mut Vec<u8>) {
        match self.node().tag {
            Tag::Null => out.extend_from_slice(b"null"),
            Tag::False => out.extend_from_slice(b"false"),
            Tag::True => out.extend_from_slice(b"true"),
            // A skipped value is valid JSON, but as sent, not compacted.
            Tag::Number | Tag::Skipped => out.extend_from_slice(self.span()),
            Tag::Plain | Tag::Escaped => quote_into(self.as_str().expect("a string"), out),
            Tag::Object => {
                out.push(b'{');
                for (n, (key, value)) in self.members().enumerate() {
                    if n > 0 {
                        out.push(b',');
                    }
                    quote_into(key, out);
                    out.push(b':');
                    value.compact_into(out);
                }
                out.push(b'}');
            }
            Tag::Array => {
                out.push(b'[');
                for (n, item) in self.items().enumerate() {
                    if n > 0 {
                        out.push(b',');
                    }
                    item.compact_into(out);
                }
                out.push(b']');
            }
        }
    }

    /// The value as error messages name it: `the number 5`, `the string "x"` (at most 40
    /// characters of either), `null`, `a boolean`, `an object`, `an array`.
    pub fn describe(&self) -> String {
        match self.node().tag {
            Tag::Null => "null".into(),
            Tag::False | Tag::True => "a boolean".into(),
            Tag::Number => {
                let token = self.number().unwrap_or_default();
                format!("the number {}", &token[..token.len().min(40)])
            }
            Tag::Plain | Tag::Escaped => {
                let text = self.as_str().expect("a string").text();
                let head: String = text.chars().take(40).collect();
                let mut quoted = Vec::new();
                quote_text(head.as_bytes(), &mut quoted);
                format!("the string {}", String::from_utf8_lossy(&quoted))
            }
            Tag::Object => "an object".into(),
            Tag::Array => "an array".into(),
            Tag::Skipped => "a value not read".into(),
        }
    }
}

/// See [`Value::members`].
pub struct Members<'a> {
    object: Value<'a>,
    nodes: &'a [Node],
    src: &'a [u8],
    next: usize,
    end: usize,
    /// Later duplicates of a key are left out.
    dedup: bool,
    /// One bit per key hash seen (mod 64): a key whose bit is clear is new.
    bloom: u64,
    /// Keys so far, for objects too large to compare each key with those before it.
    seen: Option<HashSet<Cow<'a, str>>>,
}

impl<'a> Members<'a> {
    /// True when a member before `key_at` has the same key.
    #[inline(always)]
    fn repeats(&mut self, key: Str<'a>, key_at: usize) -> bool {
        if let Some(seen) = &mut self.seen {
            return !seen.insert(key.text());
        }
        let bit = 1 << (self.nodes[key_at].count % 64);
        if self.bloom & bit == 0 {
            self.bloom |= bit;
            return false;
        }
        self.object.key_before(key, key_at)
    }
}

impl<'a> Iterator for Members<'a> {
    type Item = (Str<'a>, Value<'a>);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        while self.next < self.end {
            let at = self.next;
            let (name, value) = (self.nodes[at], self.nodes[at + 1]);
            let key = key_str(self.src, name);
            self.next = value.next as usize;
            let value = self.object.at(at + 1);
            if !self.dedup || !self.repeats(key, at) {
                return Some((key, value));
            }
        }
        None
    }
}

/// The key on the tape at `node`, with its hash.
#[inline(always)]
fn key_str(src: &[u8], node: Node) -> Str<'_> {
    Str {
        raw: &src[node.start as usize..node.end as usize],
        escaped: node.tag == Tag::Escaped,
        hash: Some(node.count),
    }
}

/// See [`Value::items`].
pub struct Items<'a> {
    array: Value<'a>,
    next: usize,
    end: usize,
}

impl<'a> Iterator for Items<'a> {
    type Item = Value<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        (self.next < self.end).then(|| {
            let item = self.array.at(self.next);
            self.next = self.array.nodes()[self.next].next as usize;
            item
        })
    }
}

impl<'a> Str<'a> {
    /// The text, escapes resolved (borrowed from the input when it has none).
    pub fn text(&self) -> Cow<'a, str> {
        if !self.escaped {
            // SAFETY: the whole input was checked to be UTF-8, and a string's span starts
            // and ends next to an ASCII quote.
            return Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(self.raw) });
        }
        let mut out = Vec::with_capacity(self.raw.len());
        unescape_into(self.raw, &mut out);
        // SAFETY: unescaping UTF-8 text with checked escapes gives UTF-8.
        Cow::Owned(unsafe { String::from_utf8_unchecked(out) })
    }

    /// Appends the text, escapes resolved.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        if self.escaped {
            unescape_into(self.raw, out);
        } else {
            out.extend_from_slice(self.raw);
        }
    }

    /// True when the text is `other`.
    pub fn eq_str(&self, other: &str) -> bool {
        if self.escaped {
            self.text() == other
        } else {
            bytes_eq(self.raw, other.as_bytes())
        }
    }

    /// True when this is the key `name` (quick for the keys [`Value::members`] yields).
    #[inline(always)]
    pub fn is(&self, name: &Name) -> bool {
        self.hash.is_none_or(|hash| hash == name.hash) && self.eq_str(name.text)
    }

    /// True when both have the same text.
    fn same(&self, other: Str<'_>) -> bool {
        match (self.escaped, other.escaped) {
            (false, false) => bytes_eq(self.raw, other.raw),
            _ => self.text() == other.text(),
        }
    }
}

/// Reads `object`'s members named in `names` in one pass, by position (the first of
/// duplicates wins); all `None` for `None`.
#[inline(always)]
pub fn slots<'a, const N: usize>(
    object: Option<Value<'a>>,
    names: &[Name; N],
) -> [Option<Value<'a>>; N] {
    object.map_or([None; N], |object| object.named(names).0)
}

/// Adds a metadata entry, unless the value is null or the key is there already (the first
/// wins).
pub fn add_metadata(map: &mut crate::columns::MapColumn, key: &str, value: Value<'_>) {
    if !value.is_null() && !map.has_key(key) {
        map.entry_with(key, |out| {
            value.render_into(out);
        });
    }
}

/// Writes an object's members (first duplicate wins) as a row image, each value rendered
/// as text ([`Value::render_into`]); a null image for `None`.
pub fn write_image(map: &mut crate::columns::MapColumn, columns: Option<Value<'_>>) {
    let Some(columns) = columns else {
        map.push_null();
        return;
    };
    columns.for_each_member(|name, value| match value.node().tag {
        // Most values: copied as they are, with no call per value.
        Tag::Number | Tag::Plain if !name.escaped => map.entry_utf8(name.raw, value.span()),
        _ => map.entry_rendered(&name.text(), |out| value.render_into(out)),
    });
    map.close();
}

/// A row's `before` and `after` images: their text maps, or in typed mode with one schema
/// their structs, converted straight from the JSON ([`convert_image`]).
pub fn write_images(
    rows: &mut crate::events::EventBuilder,
    before: Option<Value<'_>>,
    after: Option<Value<'_>>,
) {
    match rows.typed().filter(|typed| typed.direct()) {
        Some(typed) => {
            convert_image(typed, false, before);
            convert_image(typed, true, after);
            rows.before.push_null();
            rows.after.push_null();
        }
        None => {
            write_image(&mut rows.before, before);
            write_image(&mut rows.after, after);
        }
    }
}

/// Converts a row image straight into typed mode's columns, entry by entry, with the text
/// [`write_image`] would write for each value, but without writing it
/// ([`crate::typed::TypedImages::direct`]).
pub fn convert_image(
    typed: &mut crate::typed::TypedImages,
    after: bool,
    columns: Option<Value<'_>>,
) {
    let Some(columns) = columns else {
        typed.close_image(after, false);
        return;
    };
    typed.open_image(after);
    let mut rendered = Vec::new();
    columns.for_each_member(|name, value| match value.node().tag {
        Tag::Number | Tag::Plain if !name.escaped => {
            // SAFETY: keys and values are checked UTF-8 (as `MapColumn::entry_utf8` has it).
            let (key, text) = unsafe {
                (
                    std::str::from_utf8_unchecked(name.raw),
                    std::str::from_utf8_unchecked(value.span()),
                )
            };
            typed.image_value(after, key, Some(text));
        }
        _ => {
            rendered.clear();
            let text = value.render_into(&mut rendered).then(|| {
                // SAFETY: `render_into` appends valid UTF-8 (row images are `utf8` maps).
                unsafe { std::str::from_utf8_unchecked(&rendered) }
            });
            typed.image_value(after, &name.text(), text);
        }
    });
    typed.close_image(after, true);
}

/// Appends a string's text to a `utf8` column, or a null.
pub fn push_text(column: &mut crate::columns::BytesColumn, value: Option<Str<'_>>) {
    match value {
        Some(text) => column.push_with(|out| text.write_to(out)),
        None => column.push_null(),
    }
}

/// Appends the text of string content `raw` (checked by the scanner), escapes resolved.
fn unescape_into(raw: &[u8], out: &mut Vec<u8>) {
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
fn escape_at(raw: &[u8], i: usize) -> (char, usize) {
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
fn quote_into(s: Str<'_>, out: &mut Vec<u8>) {
    if !s.escaped {
        // Unescaped string content has no quote, backslash or control character.
        out.push(b'"');
        out.extend_from_slice(s.raw);
        out.push(b'"');
    } else {
        let mut text = Vec::with_capacity(s.raw.len());
        unescape_into(s.raw, &mut text);
        quote_text(&text, out);
    }
}

/// Appends UTF-8 `text` as a quoted JSON string (escapes as [`quote_into`]).
fn quote_text(text: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    for &b in text {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0C => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0..=0x1F => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(b >> 4) as usize]);
                out.push(HEX[(b & 15) as usize]);
            }
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

/// Typed access to the fields of a message, with the field types of
/// docs/formats/datahub-blob.md ("Field types"): `null` and absent are the same, and a value
/// of the wrong type is an [`Error::Field`] naming the field.
pub mod field {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEMA: Name = Name::new("schema");
    const SKIP_COLUMNS: [(Name, Name); 1] = [(SCHEMA, Name::new("dataColumn"))];

    fn parse(text: &[u8]) -> Result<String> {
        let mut parser = Parser::default();
        let value = parser.parse(text)?;
        let mut out = Vec::new();
        value.compact_into(&mut out);
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn compact_keeps_tokens_and_first_keys() {
        let text = br#" { "a" : [1.10, -0, 1E+5, true, null] , "b":{"x":1,"x":2,"y":"\u0041\/"}, "a": 3 } "#;
        assert_eq!(
            parse(text).unwrap(),
            r#"{"a":[1.10,-0,1E+5,true,null],"b":{"x":1,"y":"A/"}}"#
        );
        assert_eq!(parse(br#""\u001b\n\"""#).unwrap(), r#""\u001b\n\"""#);
        assert_eq!(parse(br#"{"\u0061":1,"a":2}"#).unwrap(), r#"{"a":1}"#);
        assert_eq!(
            parse("\"😀\\ud83d\\ude00\"".as_bytes()).unwrap(),
            "\"😀😀\""
        );
    }

    #[test]
    fn rejects_what_rfc_8259_rejects() {
        for bad in [
            &b""[..],
            b" ",
            b"[1,]",
            b"{\"a\":1,}",
            b"01",
            b"1.",
            b"-",
            b"1e",
            b".5",
            b"NaN",
            b"[Infinity]",
            b"'a'",
            b"{a:1}",
            b"[1] 2",
            b"\"a\tb\"",
            b"\"\\x\"",
            b"\"\\u12\"",
            b"\xEF\xBB\xBF{}",
            b"{\"a\" 1}",
            b"[1 2]",
            b"tru",
            b"/* */ 1",
            b"\"abc",
        ] {
            assert!(
                parse(bad).is_err(),
                "accepted {:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn surrogates_utf8_and_depth() {
        assert_eq!(
            parse(br#"{"a":"ok","skipped":"\ud800"}"#),
            Err(JsonError::LoneSurrogate(21))
        );
        assert!(matches!(
            parse(br#""\udc00""#),
            Err(JsonError::LoneSurrogate(_))
        ));
        assert!(matches!(
            parse(br#""\ud800\ud800\udc00""#),
            Err(JsonError::LoneSurrogate(_))
        ));
        assert_eq!(parse(b"\"a\xff\""), Err(JsonError::Utf8(2)));
        assert_eq!(parse(b"\"\xed\xa0\x80\""), Err(JsonError::Utf8(1)));
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(parse(deep(128).as_bytes()).is_ok());
        let too_deep = Err(JsonError::Limit(OverLimit::new(
            "JSON nested more than 128 levels deep",
            "max_json_depth",
            128,
        )));
        assert_eq!(parse(deep(129).as_bytes()), too_deep);
        assert_eq!(parse(deep(1_000_000).as_bytes()), too_deep);
        assert_eq!(parse(br#""[[[[""#).unwrap(), r#""[[[[""#);
    }

    #[test]
    fn lookup_render_and_describe() {
        let mut parser = Parser::default();
        let text = br#"{"op":"INSERT","op":"x","n":12.50,"s":"a\"b","o":{"k":[1]},"z":null}"#;
        let top = parser.parse(text).unwrap();
        assert!(top.get("op").unwrap().as_str().unwrap().eq_str("INSERT"));
        assert_eq!(top.get("n").unwrap().number(), Some("12.50"));
        assert!(top.get("missing").is_none());
        assert_eq!(top.members().count(), 5);
        assert_eq!(top.len(), 6);
        let render = |v: Value| {
            let mut out = Vec::new();
            v.render_into(&mut out)
                .then(|| String::from_utf8(out).unwrap())
        };
        assert_eq!(render(top.get("s").unwrap()).unwrap(), "a\"b");
        assert_eq!(render(top.get("o").unwrap()).unwrap(), r#"{"k":[1]}"#);
        assert_eq!(render(top.get("z").unwrap()), None);
        assert_eq!(top.get("s").unwrap().describe(), r#"the string "a\"b""#);
        assert_eq!(top.get("o").unwrap().describe(), "an object");
    }

    #[test]
    fn skipped_values_are_checked_not_recorded() {
        let mut parser = Parser::skipping(&SKIP_COLUMNS);
        let text = br#"{"schema":{"dataColumn":[{"name":"a","type":"LONG"},[[]]],"x":[1]},"dataColumn":{"y":2}}"#;
        let top = parser.parse(text).unwrap();
        let schema = top.get("schema").unwrap();
        assert_eq!(schema.get("dataColumn").unwrap().kind(), Kind::Skipped);
        assert_eq!(schema.get("x").unwrap().items().count(), 1);
        assert_eq!(top.get("dataColumn").unwrap().kind(), Kind::Object);
        let mut out = Vec::new();
        top.compact_into(&mut out);
        assert_eq!(&out[..], &text[..]);
        for bad in [
            &br#"{"schema":{"dataColumn":[{"a":"\ud800"}]}}"#[..],
            br#"{"schema":{"dataColumn":[1,]}}"#,
            br#"{"schema":{"dataColumn":{"a" 1}}}"#,
        ] {
            assert!(parser.parse(bad).is_err());
        }
        let deep = format!(
            r#"{{"schema":{{"dataColumn":{}{}}}}}"#,
            "[".repeat(126),
            "]".repeat(126)
        );
        assert!(parser.parse(deep.as_bytes()).is_ok());
        let deeper = deep.replacen('[', "[[", 1).replacen(']', "]]", 1);
        assert_eq!(
            parser.parse(deeper.as_bytes()).err().map(|e| e.to_string()),
            Some(
                "JSON nested more than 128 levels deep, over max_json_depth = 128 \
                 (Decoder(limits=cdc_decode.Limits(...)))"
                    .to_string()
            )
        );
    }

    #[test]
    fn depth_and_items_follow_the_limits() {
        let limits = Limits {
            max_json_depth: 3,
            max_items: 4,
            ..Limits::default()
        };
        let mut parser = Parser::default().limited(&limits);
        assert!(parser.parse(b"[[[]]]").is_ok());
        assert!(parser.parse(b"[[[[]]]]").is_err());
        assert!(parser.parse(br#"[1,2,3,4]"#).is_ok());
        assert!(parser.parse(br#"{"a":1,"b":2,"c":3,"d":4}"#).is_ok());
        let over = parser.parse(br#"[1,2,3,4,5]"#).unwrap_err().to_string();
        assert!(over.starts_with("an array of more than 4 items, over max_items = 4 "));
        assert!(parser.parse(br#"{"a":1,"b":2,"c":3,"d":4,"a":5}"#).is_err());
        // Skipped containers count too, and commas in strings do not.
        const SKIP_S_D: [(Name, Name); 1] = [(Name::new("s"), Name::new("d"))];
        let mut skipping = Parser::skipping(&SKIP_S_D).limited(&limits);
        assert!(skipping.parse(br#"{"s":{"d":[1,2,3,4,5]}}"#).is_err());
        assert!(skipping.parse(br#"{"s":{"d":[",,,,,,"]}}"#).is_ok());
    }

    #[test]
    fn remembered_values_parse_as_scanned_ones() {
        // Messages whose `schema` repeats, moves, changes, or is followed by bad bytes: a
        // parser that remembers gives the same tape (compacted) and the same errors as one
        // that scans every message.
        let messages: &[&[u8]] = &[
            br#"{"schema":{"dataColumn":[{"n":"a"}],"k":["id"]},"p":1}"#,
            br#"{"p":2,"schema":{"dataColumn":[{"n":"a"}],"k":["id"]}}"#,
            br#"{"schema":{"dataColumn":[{"n":"a"}],"k":["id"]}  ,"p":[3]}"#,
            br#"{"schema":{"dataColumn":[{"n":"a"}],"k":["id"]},"p":}"#,
            br#"{"schema":{"dataColumn":[{"n":"a"}],"k":["id"]}}x"#,
            br#"{"schema":{"dataColumn":[{"n":"a"}],"k":["id"]]}"#,
            br#"{"schema":{"dataColumn":[{"n":"b"}],"k":["id"]},"p":4}"#,
            br#"{"schema":{"dataColumn":[{"n":"a"}],"k":["id"]},"schema":5}"#,
            br#"{"x":{"schema":{"dataColumn":[{"n":"a"}],"k":["id"]}}}"#,
            br#"[{"schema":{"dataColumn":[{"n":"a"}],"k":["id"]}}]"#,
            br#"{"sch\u0065ma":{"dataColumn":[{"n":"a"}],"k":["id"]}}"#,
            br#"{"schema":{"dataColumn":[{"n":"a"}],"k":["id"],"z":"\ud800"}}"#,
            br#"{"schema":{"dataColumn":[{"n":"a"}],"k":["id"]},"p":5}"#,
        ];
        let mut remembering = Parser::skipping(&SKIP_COLUMNS).remembering(&[SCHEMA]);
        for round in 0..2 {
            for (i, &text) in messages.iter().enumerate() {
                let mut fresh = Parser::skipping(&SKIP_COLUMNS);
                // The result, and the whole tape when there is one.
                let read = |parser: &mut Parser| {
                    let result = parser.parse(text).map(|v| {
                        let mut out = Vec::new();
                        v.compact_into(&mut out);
                        (out, v.get("schema").map(|s| (s.len(), s.describe())))
                    });
                    let tape = result.is_ok().then(|| format!("{:?}", parser.nodes));
                    (result, tape)
                };
                let expected = read(&mut fresh);
                assert_eq!(
                    read(&mut remembering),
                    expected,
                    "round {round}, message {i}"
                );
            }
        }
        assert!(!remembering.seen.is_empty());
        assert!(remembering.seen.len() <= REMEMBERED);
    }

    #[test]
    fn remembered_values_keep_their_ids_until_forgotten() {
        let mut parser = Parser::skipping(&SKIP_COLUMNS).remembering(&[SCHEMA]);
        let mut id = |text: String| {
            let top = parser.parse(text.as_bytes()).unwrap();
            let schemas: Vec<_> = top
                .all_members()
                .filter(|(key, _)| key.is(&SCHEMA))
                .map(|(_, value)| value.remembered())
                .collect();
            (schemas, top.get("p").and_then(|p| p.remembered()))
        };
        let table = |n: usize| format!(r#"{{"dataColumn":[],"t":{n}}}"#);
        let first = id(format!(r#"{{"schema":{},"p":{}}}"#, table(0), table(0)));
        let Some(zero) = first.0[0] else {
            panic!("not remembered: {first:?}")
        };
        // Only the values of `remember` keys; the same bytes, the same id, wherever they are.
        assert_eq!(first.1, None);
        assert_eq!(
            id(format!(r#"{{"p":1, "schema":{}}}"#, table(0))).0,
            [Some(zero)]
        );
        // A changed value is another; scalars and values too large are not remembered.
        let one = id(format!(r#"{{"schema":{}}}"#, table(1))).0[0].unwrap();
        assert_ne!(one, zero);
        assert_eq!(id(r#"{"schema":"x"}"#.into()).0, [None]);
        let large = format!(r#"{{"dataColumn":["{}"]}}"#, "x".repeat(MAX_REMEMBERED));
        assert_eq!(id(format!(r#"{{"schema":{large}}}"#)).0, [None]);
        // Later duplicates are remembered apart (a decoder reads the first).
        let both = id(format!(
            r#"{{"schema":{},"schema":{}}}"#,
            table(1),
            table(0)
        ))
        .0;
        assert_eq!(both, [Some(one), Some(zero)]);
        // Past REMEMBERED values the least recently met is forgotten: met again, it is
        // a new value with a new id, and no id is ever given twice.
        let mut ids: Vec<u64> = vec![zero, one];
        for n in 2..REMEMBERED + 2 {
            ids.push(id(format!(r#"{{"schema":{}}}"#, table(n))).0[0].unwrap());
        }
        let again = id(format!(r#"{{"schema":{}}}"#, table(0))).0[0].unwrap();
        assert!(!ids.contains(&again), "{again} in {ids:?}");
        let last = id(format!(r#"{{"schema":{}}}"#, table(REMEMBERED + 1))).0[0];
        assert_eq!(last, ids.last().copied());
    }

    #[test]
    fn short_texts_compare_as_slices_do() {
        let text = b"abcdefghijklmnopqrstuvwxyz";
        for n in 0..=text.len() {
            let a = &text[..n];
            let copy = a.to_vec(); // equal text at another address
            assert!(bytes_eq(a, &copy));
            assert!(n == 0 || !bytes_eq(a, &text[..n - 1]));
            for at in 0..n {
                let mut b = a.to_vec();
                b[at] ^= 1;
                assert!(!bytes_eq(a, &b), "{n} bytes, differing at {at}");
            }
        }
    }

    #[test]
    fn integers_parse_as_i128_does_within_i64() {
        let reference = |text: &str| {
            let digits = text.strip_prefix('-').unwrap_or(text);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            text.parse::<i128>()
                .ok()
                .and_then(|n| i64::try_from(n).ok())
        };
        let mut texts: Vec<String> = [
            "",
            "-",
            "+1",
            "0",
            "-0",
            "7",
            "12345678",
            "123456789",
            "1234567a",
            "12345678a",
            "a2345678",
            "1234567890123456",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "18446744073709551615",
            "99999999999999999999",
            "0000000000000000000000042",
            "-000000000000000000009",
            "1714550400000000001",
            "1 ",
            "--1",
            "1-",
            "1.5",
            "1e3",
            "١",
        ]
        .map(String::from)
        .to_vec();
        for n in 1..=20 {
            texts.push("9".repeat(n));
            texts.push(format!("-{}", "9".repeat(n)));
            texts.push(format!("{}/", "1".repeat(n)));
            texts.push(format!("{}:", "1".repeat(n)));
        }
        for text in texts {
            assert_eq!(field::parse_i64(&text), reference(&text), "{text:?}");
        }
    }

    #[test]
    fn names_hash_as_keys_do() {
        for text in [
            "",
            "a",
            "op",
            "sequenceId",
            "checkpointTime",
            "dataColumn",
            "1234567",
        ] {
            assert_eq!(Name::new(text).hash, key_hash(text.as_bytes()), "{text}");
        }
        let mut parser = Parser::default();
        let top = parser.parse(br#"{"\u006fp":1,"op":2,"x":3}"#).unwrap();
        const OP: Name = Name::new("op");
        let ops: Vec<_> = top.members().filter(|(k, _)| k.is(&OP)).collect();
        assert_eq!(ops.len(), 1);
        assert_eq!(ops[0].1.number(), Some("1"));
        assert_eq!(top.get_name(&OP).unwrap().number(), Some("1"));
    }

    #[test]
    fn many_duplicate_keys_use_a_set() {
        let mut text = String::from("{");
        for i in 0..1000 {
            text.push_str(&format!("\"k{}\":{},", i % 100, i));
        }
        text.push_str("\"end\":0}");
        let mut parser = Parser::default();
        let top = parser.parse(text.as_bytes()).unwrap();
        let members: Vec<_> = top.members().collect();
        assert_eq!(members.len(), 101);
        assert_eq!(members[5].1.number(), Some("5"));
    }
}

/// MongoDB Extended JSON (v1 strict, v2 relaxed and canonical), as the Debezium MongoDB
/// connector writes documents into strings (docs/formats/debezium-json.md, "MongoDB").
/// A type wrapper (`{"$oid": ...}`, `{"$numberLong": ...}`, `{"$date": ...}`, ...) becomes
/// its value's text; anything else renders as [`Value::render_into`] does, with the
/// wrappers inside nested documents and arrays converted too.
pub mod extended {
    use super::{field, quote_text, Kind, Parser, Value};
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
                quote_text(text.as_bytes(), out);
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
                    quote_text(key.text().as_bytes(), out);
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
            ("$numberInt" | "$numberLong" | "$numberDouble" | "$numberDecimal", None) => {
                string(inner).map(|s| {
                    let number = is_json_number(&s);
                    (s, number)
                })
            }
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
            [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2]
            | [sign @ (b'+' | b'-'), h1, h2, m1, m2] => {
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
            let odd =
                image(r#"{"t": {"$timestamp": {"t": 7, "i": 2}}, "r": {"$oid": 1}, "z": null}"#);
            assert_eq!(odd[0].1.as_deref(), Some("7:2"));
            assert_eq!(odd[1].1.as_deref(), Some(r#"{"$oid":1}"#));
            assert_eq!(odd[2].1, None);
            assert!(document(&mut parser, "[1]", "after").is_err());
            assert!(document(&mut parser, "{", "after").is_err());
        }
    }
}
