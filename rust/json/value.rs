//! Reading the tape: [`Value`] (a position on it), its [`Kind`], strings and keys as sent
//! ([`Str`]), number tokens as their exact text, member lookup (the first of duplicate
//! keys wins) and rendering values as text.

use super::*;

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
    pub(super) parser: &'a Parser,
    pub(super) at: usize,
}

/// A string or key as sent: its text between the quotes, escapes not yet resolved.
#[derive(Debug, Clone, Copy)]
pub struct Str<'a> {
    pub(super) raw: &'a [u8],
    pub(super) escaped: bool,
    /// For a member's key: the hash of its text ([`key_hash`]).
    pub(super) hash: Option<u32>,
}

impl<'a> Value<'a> {
    #[inline(always)]
    pub(super) fn nodes(&self) -> &'a [Node] {
        &self.parser.nodes
    }

    #[inline(always)]
    pub(super) fn src(&self) -> &'a [u8] {
        // SAFETY: `Parser::parse` set these from a `&'a [u8]` and returned this value with
        // lifetime 'a, and the parser cannot parse again while it is borrowed by it.
        unsafe { std::slice::from_raw_parts(self.parser.src, self.parser.src_len) }
    }

    #[inline(always)]
    pub(super) fn node(&self) -> Node {
        self.nodes()[self.at]
    }

    pub(super) fn span(&self) -> &'a [u8] {
        let node = self.node();
        &self.src()[node.start as usize..node.end as usize]
    }

    pub(super) fn at(&self, at: usize) -> Value<'a> {
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

    /// The text of a number or of a string without escapes, exactly as sent (and as
    /// [`Value::render_into`] would append it); `None` for any other value.
    #[inline(always)]
    pub fn verbatim(&self) -> Option<&'a [u8]> {
        matches!(self.node().tag, Tag::Number | Tag::Plain).then(|| self.span())
    }

    /// The value's bytes exactly as sent: an object or an array whole, a string with its
    /// quotes and escapes.
    pub fn raw(&self) -> &'a [u8] {
        self.span()
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

    pub(super) fn find(&self, key: &str, hash: u32) -> Option<Value<'a>> {
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
    pub(super) fn key_before(&self, key: Str<'_>, key_at: usize) -> bool {
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
                crate::text::json_string_into(&head, &mut quoted);
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
    pub(super) object: Value<'a>,
    pub(super) nodes: &'a [Node],
    pub(super) src: &'a [u8],
    pub(super) next: usize,
    pub(super) end: usize,
    /// Later duplicates of a key are left out.
    pub(super) dedup: bool,
    /// One bit per key hash seen (mod 64): a key whose bit is clear is new.
    pub(super) bloom: u64,
    /// Keys so far, for objects too large to compare each key with those before it.
    pub(super) seen: Option<HashSet<Cow<'a, str>>>,
}

impl<'a> Members<'a> {
    /// True when a member before `key_at` has the same key.
    #[inline(always)]
    pub(super) fn repeats(&mut self, key: Str<'a>, key_at: usize) -> bool {
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
pub(super) fn key_str(src: &[u8], node: Node) -> Str<'_> {
    Str {
        raw: &src[node.start as usize..node.end as usize],
        escaped: node.tag == Tag::Escaped,
        hash: Some(node.count),
    }
}

/// See [`Value::items`].
pub struct Items<'a> {
    pub(super) array: Value<'a>,
    pub(super) next: usize,
    pub(super) end: usize,
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
    /// The text of a string or key without escapes, exactly as sent; `None` when it has
    /// escapes.
    #[inline(always)]
    pub fn verbatim(&self) -> Option<&'a [u8]> {
        (!self.escaped).then_some(self.raw)
    }

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
    pub(super) fn same(&self, other: Str<'_>) -> bool {
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
