//! The tape: a message checked once and recorded as a flat list of nodes spanning its
//! text, and the [`Parser`] whose buffers (the tape, the open containers, the values it
//! remembers) are kept from one message to the next.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tag {
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
pub(super) struct Node {
    pub(super) tag: Tag,
    pub(super) start: u32,
    pub(super) end: u32,
    pub(super) next: u32,
    pub(super) count: u32,
}

/// A JSON parser whose buffers are kept from one message to the next.
#[derive(Debug)]
pub struct Parser {
    pub(super) nodes: Vec<Node>,
    pub(super) stack: Vec<Open>,
    pub(super) skip: &'static [(Name, Name)],
    pub(super) remember: &'static [Name],
    /// The top-level keys of `skip` and `remember`, one bit per hash (mod 64): a key whose
    /// bit is clear is none of them.
    pub(super) watch: u64,
    /// Values of the `remember` keys met before, the most recently met first.
    pub(super) seen: Vec<Seen>,
    /// The id the next value remembered gets ([`Value::remembered`]).
    pub(super) next_id: u64,
    /// The remembered values on the tape of the message last parsed: `(node, id)`.
    pub(super) replayed: Vec<(u32, u64)>,
    /// The message last parsed, which the tape spans point into; read only through a
    /// [`Value`], whose lifetime is the message's (see [`Parser::parse`]).
    pub(super) src: *const u8,
    pub(super) src_len: usize,
    /// `Limits::max_json_depth` and `Limits::max_items`.
    pub(super) max_depth: usize,
    pub(super) max_items: usize,
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
pub(super) struct Seen {
    /// Which of the parser's `remember` keys it was the value of.
    pub(super) key: usize,
    /// Told apart from every other value this parser remembered, before or after.
    pub(super) id: u64,
    pub(super) text: Vec<u8>,
    pub(super) nodes: Vec<Node>,
}

/// An open container: its node (none while skipping) and whether it is an object.
#[derive(Debug, Clone, Copy)]
pub(super) struct Open {
    pub(super) node: u32,
    /// Members or items so far, written to the node when it closes.
    pub(super) count: u32,
    /// Commas so far (items - 1), counted in skipped containers too, for `max_items`.
    pub(super) commas: usize,
    pub(super) object: bool,
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
