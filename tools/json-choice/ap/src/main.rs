//! The serde_json cases that need `arbitrary_precision` (number tokens kept) and
//! `preserve_order` (document order): those features change serde_json for the whole build,
//! so they live in this binary of their own. Started by `json-choice` through cargo:
//! `bench DATA_DIR` prints timing rows, `matrix` prints strictness cells (TSV);
//! `probe CONFIG INPUT` is one probe in a child process.

#[path = "../../src/common.rs"]
mod common;

use std::borrow::Cow;
use std::fmt;
use std::path::Path;

use common::{Null, Probe, Render, Row, Seen, Sink, MAX_DEPTH};
use serde::de::{self, DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The key serde_json's `arbitrary_precision` uses to hand a number to a visitor (as a
/// one-entry map whose value is the token).
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

// ------------------------------------------------------------------------------------------
// serde_json::Value with arbitrary_precision + preserve_order: numbers are tokens, objects
// keep document order (an IndexMap); a duplicate key keeps the first one's position but the
// LAST one's value.

fn walk_value<'v, S: Sink>(
    v: &'v serde_json::Value,
    depth: usize,
    seen: &mut Seen<'v>,
    sink: &mut S,
) {
    use serde_json::Value;
    match v {
        Value::Null => sink.null(),
        Value::Bool(b) => sink.boolean(*b),
        Value::Number(n) => sink.token(n.as_str()),
        Value::String(s) => sink.text(s),
        Value::Array(a) => {
            if depth > S::MAX_WALK {
                return sink.elided();
            }
            sink.open(true);
            for x in a {
                walk_value(x, depth + 1, seen, sink);
            }
            sink.close(true);
        }
        Value::Object(o) => {
            if depth > S::MAX_WALK {
                return sink.elided();
            }
            sink.open(false);
            let mark = seen.mark();
            for (k, x) in o {
                if seen.first(mark, Cow::Borrowed(k)) {
                    sink.key(k);
                    walk_value(x, depth + 1, seen, sink);
                }
            }
            seen.reset(mark);
            sink.close(false);
        }
    }
}

// ------------------------------------------------------------------------------------------
// The strict visitor: one pass of serde_json (recursion limit off, depth counted here),
// every value visited as it is read: first duplicate wins (a later one is still read, into
// a sink that drops it), numbers as the text arbitrary_precision hands over (it writes an
// exponent's `E` as `e`: not quite the token), strings as `str` (serde_json checks their
// surrogates).

struct Key<'a>(Cow<'a, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

struct Node<'s, 'a, S> {
    depth: usize,
    seen: &'s mut Seen<'a>,
    sink: &'s mut S,
}

impl<'de, S: Sink> DeserializeSeed<'de> for Node<'_, 'de, S> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, S: Sink> Visitor<'de> for Node<'_, 'de, S> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        self.sink.null();
        Ok(())
    }
    fn visit_bool<E>(self, b: bool) -> Result<(), E> {
        self.sink.boolean(b);
        Ok(())
    }
    fn visit_str<E>(self, s: &str) -> Result<(), E> {
        self.sink.text(s);
        Ok(())
    }
    // arbitrary_precision hands integers that fit 64 bits over as u64 / i64 (not `-0`):
    // JSON integers have one spelling (no leading zeros, no `+`), so their decimal text is
    // the token sent.
    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        self.sink.token(itoa::Buffer::new().format(v));
        Ok(())
    }
    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        self.sink.token(itoa::Buffer::new().format(v));
        Ok(())
    }
    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        self.sink.float(v);
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if self.depth > MAX_DEPTH {
            return Err(A::Error::custom(format!(
                "nested deeper than {MAX_DEPTH} levels"
            )));
        }
        self.sink.open(true);
        while seq
            .next_element_seed(Node {
                depth: self.depth + 1,
                seen: &mut *self.seen,
                sink: &mut *self.sink,
            })?
            .is_some()
        {}
        self.sink.close(true);
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mark = self.seen.mark();
        let mut first = true;
        while let Some(Key(k)) = map.next_key::<Key<'de>>()? {
            if first {
                first = false;
                if k == NUMBER_TOKEN {
                    // arbitrary_precision: a number, as the token sent. (An object whose
                    // first key is this string is taken for a number too: a limit of the
                    // feature.)
                    let token: String = map.next_value()?;
                    self.sink.token(&token);
                    return Ok(());
                }
                if self.depth > MAX_DEPTH {
                    return Err(A::Error::custom(format!(
                        "nested deeper than {MAX_DEPTH} levels"
                    )));
                }
                self.sink.open(false);
            }
            if self.seen.first(mark, k) {
                self.sink.key(self.seen.last());
                map.next_value_seed(Node {
                    depth: self.depth + 1,
                    seen: &mut *self.seen,
                    sink: &mut *self.sink,
                })?;
            } else {
                map.next_value_seed(Node {
                    depth: self.depth + 1,
                    seen: &mut *self.seen,
                    sink: &mut Null,
                })?;
            }
        }
        if first {
            if self.depth > MAX_DEPTH {
                return Err(A::Error::custom(format!(
                    "nested deeper than {MAX_DEPTH} levels"
                )));
            }
            self.sink.open(false);
        }
        self.seen.reset(mark);
        self.sink.close(false);
        Ok(())
    }
}

fn strict<S: Sink>(m: &[u8], seen: &mut Option<Seen<'static>>, sink: &mut S) -> Result<(), String> {
    let text = std::str::from_utf8(m).map_err(|e| e.to_string())?;
    let mut keys = seen.take().unwrap_or_default().reuse();
    let result = (|| {
        let mut de = serde_json::Deserializer::from_str(text);
        de.disable_recursion_limit();
        Node {
            depth: 1,
            seen: &mut keys,
            sink,
        }
        .deserialize(&mut de)
        .and_then(|()| de.end())
        .map_err(|e| e.to_string())
    })();
    *seen = Some(keys.reuse());
    result
}

fn value<S: Sink>(m: &[u8], seen: &mut Option<Seen<'static>>, sink: &mut S) -> Result<(), String> {
    let v: serde_json::Value = serde_json::from_slice(m).map_err(|e| e.to_string())?;
    let mut keys = seen.take().unwrap_or_default().reuse();
    walk_value(&v, 1, &mut keys, sink);
    *seen = Some(keys.reuse());
    Ok(())
}

fn configs() -> Vec<(&'static str, Probe)> {
    vec![
        (
            "serde_json Value (arbitrary_precision, preserve_order)",
            |m| {
                let mut r = Render::default();
                value(m, &mut None, &mut r)?;
                Ok(r.out)
            },
        ),
        (
            "serde_json strict visitor (arbitrary_precision, unbounded_depth)",
            |m| {
                let mut r = Render::default();
                strict(m, &mut None, &mut r)?;
                Ok(r.out)
            },
        ),
    ]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("probe") => common::probe_child(&configs(), &args[2], &args[3]),
        Some("probe-big") => common::probe_child_big_stack(&configs(), &args[2], &args[3]),
        Some("matrix") => {
            let exe = std::env::current_exe().expect("exe");
            for cell in common::probe_all(&exe, &configs()) {
                println!("{}", cell.to_tsv());
            }
        }
        Some("bench") => {
            let sets = common::load_sets(Path::new(&args[2]));
            let mut rows: Vec<Row> = Vec::new();
            let none = || Option::<Seen<'static>>::None;
            case!(
                rows,
                sets,
                "serde_json Value (arbitrary_precision, preserve_order) + walk",
                none(),
                |m, sink, st| { value(m, st, sink) }
            );
            case!(
                rows,
                sets,
                "serde_json strict visitor (arbitrary_precision, unbounded_depth)",
                none(),
                |m, sink, st| { strict(m, st, sink) }
            );
            for row in rows {
                println!("{}", row.to_tsv());
            }
        }
        _ => panic!("modes: bench DATA_DIR, matrix, probe CONFIG INPUT"),
    }
}
