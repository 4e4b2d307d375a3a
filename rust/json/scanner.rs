//! The scanner: one pass over a message's bytes that checks the JSON grammar, the
//! limits and the escapes, and writes the tape (an explicit stack, no recursion).

use super::*;

pub(super) struct Scanner<'s> {
    pub(super) src: &'s [u8],
    pub(super) nodes: &'s mut Vec<Node>,
    pub(super) stack: &'s mut Vec<Open>,
    pub(super) skip: &'static [(Name, Name)],
    pub(super) watch: u64,
    pub(super) max_depth: usize,
    pub(super) max_items: usize,
    /// The member to skip within the value of the current top-level key.
    pub(super) under: Option<&'static Name>,
    /// The value about to start is to be skipped.
    pub(super) skip_next: bool,
    /// While skipping: the stack depth of the skipped container; else 0.
    pub(super) skipping: usize,
    pub(super) remember: &'static [Name],
    pub(super) seen: &'s mut Vec<Seen>,
    pub(super) next_id: &'s mut u64,
    pub(super) replayed: &'s mut Vec<(u32, u64)>,
    /// The value about to start is that of `remember[key]`.
    pub(super) remember_next: Option<usize>,
    /// The value of `remember[key]` being scanned: `(key, its first node, its start)`.
    pub(super) recording: Option<(usize, usize, usize)>,
}

impl Scanner<'_> {
    pub(super) fn error<T>(&self, what: &'static str, at: usize) -> Result<T> {
        Err(JsonError::Syntax { what, at })
    }

    #[inline(always)]
    pub(super) fn skip_ws(&self, mut pos: usize) -> usize {
        while pos < self.src.len() && is_ws(self.src[pos]) {
            pos += 1;
        }
        pos
    }

    #[inline(always)]
    pub(super) fn push(&mut self, tag: Tag, start: usize, end: usize) {
        self.push_counted(tag, start, end, 0);
    }

    #[inline(always)]
    pub(super) fn push_counted(&mut self, tag: Tag, start: usize, end: usize, count: u32) {
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
    pub(super) fn document(&mut self) -> Result<()> {
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
    pub(super) fn comma(&mut self, object: bool) -> Result<()> {
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
    pub(super) fn scalar(&mut self, start: usize, end: usize, tag: Tag) {
        if let Some(parent) = self.stack.last_mut() {
            parent.count += 1;
        }
        self.push(tag, start, end);
    }

    /// Copies the nodes of the value of `remember[key]` that `src[pos..]` starts with, if
    /// one was remembered: returns the index after it.
    pub(super) fn replay(&mut self, key: usize, pos: usize) -> Option<usize> {
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
    pub(super) fn remember_value(&mut self, key: usize, first: usize, start: usize, end: usize) {
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
    pub(super) fn key(&mut self, pos: usize) -> Result<usize> {
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
    pub(super) fn record_key(&mut self, start: usize, end: usize, escaped: bool) {
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
    pub(super) fn string(&self, pos: usize) -> Result<(usize, bool)> {
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
    pub(super) fn escape(&self, i: usize) -> Result<usize> {
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
    pub(super) fn number(&self, pos: usize) -> Result<usize> {
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
