//! json-choice: which JSON parser for the Rust core (issue 3)?
//!
//! `cargo run --release` measures every case on both message sets, runs the strictness
//! probes, and prints both tables (Markdown) on stdout; progress goes to stderr. The serde_json
//! cases that need `arbitrary_precision` / `preserve_order` run in the second binary
//! (`ap/`), started here through cargo. Modes: `all` (default), `bench`, `matrix`, and the
//! internal `probe CONFIG INPUT` (one strictness probe, in a child process).
//!
//! Data: `$JC_DATA` (default `/tmp/jc`) holds `datahub-blob/values.bin` (made with the
//! project's generator) and `tdsql-json/values.bin` (made with `gen_tdsql.py`); both are
//! made when missing.

mod common;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{first_non_ws, Cell, Null, Probe, Render, Row, Seen, Sink, MAX_DEPTH};
use serde::de::{self, Deserialize, Deserializer as _, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

// ------------------------------------------------------------------------------------------
// serde_json, default configuration: Value (keys sorted in a BTreeMap, the last duplicate
// wins, numbers converted to u64/i64/f64).

fn walk_serde<'v, S: Sink>(
    v: &'v serde_json::Value,
    depth: usize,
    seen: &mut Seen<'v>,
    sink: &mut S,
) {
    use serde_json::Value;
    match v {
        Value::Null => sink.null(),
        Value::Bool(b) => sink.boolean(*b),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                sink.uint(u)
            } else if let Some(i) = n.as_i64() {
                sink.int(i)
            } else {
                sink.float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => sink.text(s),
        Value::Array(a) => {
            if depth > S::MAX_WALK {
                return sink.elided();
            }
            sink.open(true);
            for x in a {
                walk_serde(x, depth + 1, seen, sink);
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
                    walk_serde(x, depth + 1, seen, sink);
                }
            }
            seen.reset(mark);
            sink.close(false);
        }
    }
}

// ------------------------------------------------------------------------------------------
// serde_json, the strict walk with `raw_value` only: each object or array is read with
// serde_json as a sequence of `&RawValue` (skipped, checked for grammar) and each member is
// walked again from its raw text: first duplicate wins, depth counted here, number tokens
// are the raw text, strings read as `str` (which checks surrogates).

/// A string borrowed from the input when it has no escapes.
struct CowStr<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for CowStr<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CowStr<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(CowStr(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(CowStr(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(CowStr(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

struct RawLevel<'s, 'a, S> {
    depth: usize,
    seen: &'s mut Seen<'a>,
    sink: &'s mut S,
}

impl<'de, S: Sink> Visitor<'de> for RawLevel<'_, 'de, S> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object or an array")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.sink.open(false);
        let mark = self.seen.mark();
        while let Some(CowStr(k)) = map.next_key::<CowStr<'de>>()? {
            let v: &'de RawValue = map.next_value()?;
            if self.seen.first(mark, k) {
                self.sink.key(self.seen.last());
                walk_raw(v.get(), self.depth + 1, self.seen, self.sink)
                    .map_err(A::Error::custom)?;
            } else {
                // A dropped duplicate is still checked (rules 1-4).
                walk_raw(v.get(), self.depth + 1, self.seen, &mut Null)
                    .map_err(A::Error::custom)?;
            }
        }
        self.seen.reset(mark);
        self.sink.close(false);
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.sink.open(true);
        while let Some(v) = seq.next_element::<&'de RawValue>()? {
            walk_raw(v.get(), self.depth + 1, self.seen, self.sink).map_err(A::Error::custom)?;
        }
        self.sink.close(true);
        Ok(())
    }
}

fn walk_raw<'a, S: Sink>(
    raw: &'a str,
    depth: usize,
    seen: &mut Seen<'a>,
    sink: &mut S,
) -> Result<(), String> {
    let err = |e: serde_json::Error| e.to_string();
    match first_non_ws(raw.as_bytes()) {
        Some(open @ (b'{' | b'[')) => {
            if depth > MAX_DEPTH {
                return Err(format!("nested deeper than {MAX_DEPTH} levels"));
            }
            let mut de = serde_json::Deserializer::from_str(raw);
            let level = RawLevel { depth, seen, sink };
            if open == b'{' {
                de.deserialize_map(level).map_err(err)?;
            } else {
                de.deserialize_seq(level).map_err(err)?;
            }
            de.end().map_err(err)
        }
        Some(b'"') => {
            let s: CowStr = serde_json::from_str(raw).map_err(err)?;
            sink.text(&s.0);
            Ok(())
        }
        Some(_) => {
            let v: &RawValue = serde_json::from_str(raw).map_err(err)?;
            match v.get() {
                "true" => sink.boolean(true),
                "false" => sink.boolean(false),
                "null" => sink.null(),
                token => sink.token(token),
            }
            Ok(())
        }
        None => Err("no JSON value".into()),
    }
}

fn serde_strict<S: Sink>(
    m: &[u8],
    seen: &mut Option<Seen<'static>>,
    sink: &mut S,
) -> Result<(), String> {
    let text = std::str::from_utf8(m).map_err(|e| e.to_string())?;
    let mut keys = seen.take().unwrap_or_default().reuse();
    let result = walk_raw(text, 1, &mut keys, sink);
    *seen = Some(keys.reuse());
    result
}

// ------------------------------------------------------------------------------------------
// simd-json: a BorrowedValue (halfbrown map), or the tape. Both parse a mutable copy.

fn walk_simd<'v, S: Sink>(
    v: &'v simd_json::BorrowedValue<'_>,
    depth: usize,
    seen: &mut Seen<'v>,
    sink: &mut S,
) {
    use simd_json::{BorrowedValue as V, StaticNode};
    match v {
        V::Static(n) => static_node(n, sink),
        V::String(s) => sink.text(s),
        V::Array(a) => {
            if depth > S::MAX_WALK {
                return sink.elided();
            }
            sink.open(true);
            for x in a.iter() {
                walk_simd(x, depth + 1, seen, sink);
            }
            sink.close(true);
        }
        V::Object(o) => {
            if depth > S::MAX_WALK {
                return sink.elided();
            }
            sink.open(false);
            let mark = seen.mark();
            for (k, x) in o.iter() {
                if seen.first(mark, Cow::Borrowed(k.as_ref())) {
                    sink.key(k);
                    walk_simd(x, depth + 1, seen, sink);
                }
            }
            seen.reset(mark);
            sink.close(false);
        }
    }
    fn static_node<S: Sink>(n: &StaticNode, sink: &mut S) {
        match n {
            StaticNode::I64(i) => sink.int(*i),
            StaticNode::U64(u) => sink.uint(*u),
            StaticNode::F64(f) => sink.float(*f),
            StaticNode::Bool(b) => sink.boolean(*b),
            StaticNode::Null => sink.null(),
            #[allow(unreachable_patterns)]
            _ => sink.token("?"),
        }
    }
}

/// Walks the value at `i`; returns the index after it.
fn walk_tape<'t, S: Sink>(
    nodes: &[simd_json::Node<'t>],
    i: usize,
    depth: usize,
    seen: &mut Seen<'t>,
    sink: &mut S,
) -> usize {
    use simd_json::{Node, StaticNode};
    match nodes[i] {
        Node::String(s) => {
            sink.text(s);
            i + 1
        }
        Node::Static(n) => {
            match n {
                StaticNode::I64(v) => sink.int(v),
                StaticNode::U64(v) => sink.uint(v),
                StaticNode::F64(v) => sink.float(v),
                StaticNode::Bool(b) => sink.boolean(b),
                StaticNode::Null => sink.null(),
                #[allow(unreachable_patterns)]
                _ => sink.token("?"),
            }
            i + 1
        }
        Node::Array { len, count } => {
            if depth > S::MAX_WALK {
                sink.elided();
                return i + 1 + count;
            }
            sink.open(true);
            let mut j = i + 1;
            for _ in 0..len {
                j = walk_tape(nodes, j, depth + 1, seen, sink);
            }
            sink.close(true);
            j
        }
        Node::Object { len, count } => {
            if depth > S::MAX_WALK {
                sink.elided();
                return i + 1 + count;
            }
            sink.open(false);
            let mark = seen.mark();
            let mut j = i + 1;
            for _ in 0..len {
                let Node::String(k) = nodes[j] else {
                    unreachable!("a key")
                };
                j += 1;
                if seen.first(mark, Cow::Borrowed(k)) {
                    sink.key(k);
                    j = walk_tape(nodes, j, depth + 1, seen, sink);
                } else {
                    j = walk_tape(nodes, j, depth + 1, seen, &mut Null);
                }
            }
            seen.reset(mark);
            sink.close(false);
            j
        }
    }
}

/// simd-json's depth setting that accepts 128 levels and rejects 129 (checked by the probes).
const SIMD_MAX_DEPTH: usize = 128;

struct SimdState {
    copy: Vec<u8>,
    buffers: simd_json::Buffers,
    seen: Option<Seen<'static>>,
}

impl SimdState {
    fn new(max_depth: usize) -> Self {
        SimdState {
            copy: Vec::new(),
            buffers: simd_json::Buffers::with_max_depth(4096, max_depth),
            seen: None,
        }
    }
}

fn simd_value<S: Sink>(m: &[u8], st: &mut SimdState, sink: &mut S) -> Result<(), String> {
    st.copy.clear();
    st.copy.extend_from_slice(m);
    let v = simd_json::to_borrowed_value_with_buffers(&mut st.copy, &mut st.buffers)
        .map_err(|e| e.to_string())?;
    let mut seen = st.seen.take().unwrap_or_default().reuse();
    walk_simd(&v, 1, &mut seen, sink);
    st.seen = Some(seen.reuse());
    Ok(())
}

fn simd_tape<S: Sink>(m: &[u8], st: &mut SimdState, sink: &mut S) -> Result<(), String> {
    st.copy.clear();
    st.copy.extend_from_slice(m);
    let tape = simd_json::to_tape_with_buffers(&mut st.copy, &mut st.buffers)
        .map_err(|e| e.to_string())?;
    let mut seen = st.seen.take().unwrap_or_default().reuse();
    walk_tape(&tape.0, 0, 1, &mut seen, sink);
    st.seen = Some(seen.reuse());
    Ok(())
}

// ------------------------------------------------------------------------------------------
// sonic-rs: Value (numbers converted, or kept as raw tokens with `use_rawnumber`), and the
// lazy API walked whole.

fn walk_sonic<'v, S: Sink>(
    v: &'v sonic_rs::Value,
    depth: usize,
    seen: &mut Seen<'v>,
    sink: &mut S,
) {
    use sonic_rs::{JsonContainerTrait, JsonType, JsonValueTrait};
    match v.get_type() {
        JsonType::Null => sink.null(),
        JsonType::Boolean => sink.boolean(v.as_bool().unwrap_or_default()),
        JsonType::Number => {
            if let Some(raw) = v.as_raw_number() {
                sink.token(raw.as_str())
            } else if let Some(u) = v.as_u64() {
                sink.uint(u)
            } else if let Some(i) = v.as_i64() {
                sink.int(i)
            } else {
                sink.float(v.as_f64().unwrap_or(f64::NAN))
            }
        }
        JsonType::String => sink.text(v.as_str().unwrap_or_default()),
        JsonType::Array => {
            if depth > S::MAX_WALK {
                return sink.elided();
            }
            sink.open(true);
            for x in v.as_array().expect("an array").iter() {
                walk_sonic(x, depth + 1, seen, sink);
            }
            sink.close(true);
        }
        JsonType::Object => {
            if depth > S::MAX_WALK {
                return sink.elided();
            }
            sink.open(false);
            let mark = seen.mark();
            for (k, x) in v.as_object().expect("an object").iter() {
                if seen.first(mark, Cow::Borrowed(k)) {
                    sink.key(k);
                    walk_sonic(x, depth + 1, seen, sink);
                }
            }
            seen.reset(mark);
            sink.close(false);
        }
    }
}

fn sonic_value<S: Sink>(
    m: &[u8],
    raw_numbers: bool,
    seen: &mut Option<Seen<'static>>,
    sink: &mut S,
) -> Result<(), String> {
    let v: sonic_rs::Value = if raw_numbers {
        // UTF-8 checked here: `Deserializer::from_slice` does not reject invalid UTF-8 (the
        // function `from_slice` does), see the README.
        let text = std::str::from_utf8(m).map_err(|e| e.to_string())?;
        let mut de = sonic_rs::Deserializer::from_str(text).use_rawnumber();
        let v = de.deserialize().map_err(|e| e.to_string())?;
        de.end().map_err(|e| e.to_string())?;
        v
    } else {
        sonic_rs::from_slice(m).map_err(|e| e.to_string())?
    };
    let mut keys = seen.take().unwrap_or_default().reuse();
    walk_sonic(&v, 1, &mut keys, sink);
    *seen = Some(keys.reuse());
    Ok(())
}

fn walk_lazy<'a, S: Sink>(
    v: sonic_rs::LazyValue<'a>,
    depth: usize,
    seen: &mut Seen<'a>,
    sink: &mut S,
) -> Result<(), String> {
    use sonic_rs::{JsonType, JsonValueTrait};
    match v.get_type() {
        JsonType::Null => sink.null(),
        JsonType::Boolean => sink.boolean(v.as_raw_str() == "true"),
        JsonType::Number => sink.token(v.as_raw_str()),
        JsonType::String => sink.text(v.as_str().ok_or("a string that does not decode")?),
        JsonType::Array => {
            if depth > MAX_DEPTH {
                return Err(format!("nested deeper than {MAX_DEPTH} levels"));
            }
            sink.open(true);
            for x in v.into_array_iter().expect("an array") {
                walk_lazy(x.map_err(|e| e.to_string())?, depth + 1, seen, sink)?;
            }
            sink.close(true);
        }
        JsonType::Object => {
            if depth > MAX_DEPTH {
                return Err(format!("nested deeper than {MAX_DEPTH} levels"));
            }
            lazy_members(v.into_object_iter().expect("an object"), depth, seen, sink)?;
        }
    }
    Ok(())
}

fn lazy_members<'a, S: Sink>(
    iter: sonic_rs::ObjectJsonIter<'a>,
    depth: usize,
    seen: &mut Seen<'a>,
    sink: &mut S,
) -> Result<(), String> {
    sink.open(false);
    let mark = seen.mark();
    for entry in iter {
        let (k, x) = entry.map_err(|e| e.to_string())?;
        if seen.first(mark, k) {
            sink.key(seen.last());
            walk_lazy(x, depth + 1, seen, sink)?;
        } else {
            walk_lazy(x, depth + 1, seen, &mut Null)?;
        }
    }
    seen.reset(mark);
    sink.close(false);
    Ok(())
}

/// The top level through the checking iterators (`to_object_iter` / `to_array_iter`, which
/// validate what they skip), the levels below through `into_object_iter` /
/// `into_array_iter` of the values they returned.
fn sonic_lazy<S: Sink>(
    m: &[u8],
    seen: &mut Option<Seen<'static>>,
    sink: &mut S,
) -> Result<(), String> {
    let mut keys = seen.take().unwrap_or_default().reuse();
    let result = (|| match first_non_ws(m) {
        Some(b'{') => lazy_members(sonic_rs::to_object_iter(m), 1, &mut keys, sink),
        Some(b'[') => {
            sink.open(true);
            for x in sonic_rs::to_array_iter(m) {
                walk_lazy(x.map_err(|e| e.to_string())?, 2, &mut keys, sink)?;
            }
            sink.close(true);
            Ok(())
        }
        _ => {
            let v = sonic_rs::get(m, &[] as &[&str]).map_err(|e| e.to_string())?;
            walk_lazy(v, 1, &mut keys, sink)
        }
    })();
    *seen = Some(keys.reuse());
    result
}

// ------------------------------------------------------------------------------------------
// Ours: cdc-decode's rust/json/ (a tape of spans; `members` skips later duplicates).

fn walk_ours<S: Sink>(v: _native::json::Value<'_>, sink: &mut S) {
    use _native::json::Kind;
    match v.kind() {
        Kind::Null => sink.null(),
        Kind::Bool(b) => sink.boolean(b),
        Kind::Number => sink.token(v.number().expect("a number")),
        Kind::String => sink.text(&v.as_str().expect("a string").text()),
        Kind::Array => {
            sink.open(true);
            for x in v.items() {
                walk_ours(x, sink);
            }
            sink.close(true);
        }
        Kind::Object => {
            sink.open(false);
            for (k, x) in v.members() {
                sink.key(&k.text());
                walk_ours(x, sink);
            }
            sink.close(false);
        }
        // `Kind::Skipped`: only with `Parser::skipping`, which this walk does not use.
        #[allow(unreachable_patterns)]
        _ => sink.elided(),
    }
}

fn ours<S: Sink>(m: &[u8], parser: &mut _native::json::Parser, sink: &mut S) -> Result<(), String> {
    let v = parser.parse(m).map_err(|e| e.to_string())?;
    walk_ours(v, sink);
    Ok(())
}

// ------------------------------------------------------------------------------------------
// The timed cases

fn bench(sets: &[common::Set]) -> Vec<Row> {
    let mut rows = Vec::new();
    let none = || Option::<Seen<'static>>::None;
    case!(
        rows,
        sets,
        "serde_json Value (default) + walk",
        none(),
        |m, sink, st| {
            let v: serde_json::Value = serde_json::from_slice(m).map_err(|e| e.to_string())?;
            let mut keys = st.take().unwrap_or_default().reuse();
            walk_serde(&v, 1, &mut keys, sink);
            *st = Some(keys.reuse());
            Ok(())
        }
    );
    case!(
        rows,
        sets,
        "serde_json IgnoredAny (validation only)",
        (),
        |m, sink, st| {
            serde_json::from_slice::<de::IgnoredAny>(m).map_err(|e| e.to_string())?;
            sink.null();
            Ok(())
        }
    );
    case!(
        rows,
        sets,
        "serde_json strict walk (raw_value: RawValue per level)",
        none(),
        |m, sink, st| { serde_strict(m, st, sink) }
    );
    case!(
        rows,
        sets,
        "simd-json to_borrowed_value (copy) + walk",
        (Vec::<u8>::new(), none()),
        |m, sink, st| {
            st.0.clear();
            st.0.extend_from_slice(m);
            let v = simd_json::to_borrowed_value(&mut st.0).map_err(|e| e.to_string())?;
            let mut keys = st.1.take().unwrap_or_default().reuse();
            walk_simd(&v, 1, &mut keys, sink);
            st.1 = Some(keys.reuse());
            Ok(())
        }
    );
    case!(
        rows,
        sets,
        "simd-json to_borrowed_value_with_buffers (copy) + walk",
        SimdState::new(SIMD_MAX_DEPTH),
        |m, sink, st| { simd_value(m, st, sink) }
    );
    case!(
        rows,
        sets,
        "simd-json to_tape_with_buffers (copy) + walk",
        SimdState::new(SIMD_MAX_DEPTH),
        |m, sink, st| { simd_tape(m, st, sink) }
    );
    case!(
        rows,
        sets,
        "sonic-rs from_slice::<Value> + walk",
        none(),
        |m, sink, st| { sonic_value(m, false, st, sink) }
    );
    case!(
        rows,
        sets,
        "sonic-rs Value, use_rawnumber + walk",
        none(),
        |m, sink, st| { sonic_value(m, true, st, sink) }
    );
    case!(
        rows,
        sets,
        "sonic-rs IgnoredAny (validation only)",
        (),
        |m, sink, st| {
            sonic_rs::from_slice::<de::IgnoredAny>(m).map_err(|e| e.to_string())?;
            sink.null();
            Ok(())
        }
    );
    case!(
        rows,
        sets,
        "sonic-rs lazy walk (to_object_iter, every field)",
        none(),
        |m, sink, st| { sonic_lazy(m, st, sink) }
    );
    case!(
        rows,
        sets,
        "cdc-decode json::Parser::parse (validation only)",
        _native::json::Parser::default(),
        |m, sink, st| {
            st.parse(m).map_err(|e| e.to_string())?;
            sink.null();
            Ok(())
        }
    );
    case!(
        rows,
        sets,
        "cdc-decode json::Parser::parse + walk",
        _native::json::Parser::default(),
        |m, sink, st| { ours(m, st, sink) }
    );
    rows
}

// ------------------------------------------------------------------------------------------
// The strictness probes

fn render(f: impl FnOnce(&mut Render) -> Result<(), String>) -> Result<String, String> {
    let mut r = Render::default();
    f(&mut r)?;
    Ok(r.out)
}

fn configs() -> Vec<(&'static str, Probe)> {
    vec![
        ("serde_json Value (default)", |m| {
            let v: serde_json::Value = serde_json::from_slice(m).map_err(|e| e.to_string())?;
            render(|r| {
                walk_serde(&v, 1, &mut Seen::default(), r);
                Ok(())
            })
        }),
        ("serde_json IgnoredAny (default)", |m| {
            serde_json::from_slice::<de::IgnoredAny>(m).map_err(|e| e.to_string())?;
            Ok("(accepted)".into())
        }),
        ("serde_json strict walk (raw_value)", |m| {
            render(|r| serde_strict(m, &mut None, r))
        }),
        ("simd-json BorrowedValue (default)", |m| {
            let mut copy = m.to_vec();
            let v = simd_json::to_borrowed_value(&mut copy).map_err(|e| e.to_string())?;
            render(|r| {
                walk_simd(&v, 1, &mut Seen::default(), r);
                Ok(())
            })
        }),
        ("simd-json tape, max_depth 128", |m| {
            render(|r| simd_tape(m, &mut SimdState::new(SIMD_MAX_DEPTH), r))
        }),
        ("sonic-rs Value (default)", |m| {
            render(|r| sonic_value(m, false, &mut None, r))
        }),
        ("sonic-rs Value, use_rawnumber", |m| {
            render(|r| sonic_value(m, true, &mut None, r))
        }),
        (
            "sonic-rs Deserializer::from_slice(..).use_rawnumber(), no UTF-8 pre-check",
            |m| {
                let mut de = sonic_rs::Deserializer::from_slice(m).use_rawnumber();
                let v: sonic_rs::Value = de.deserialize().map_err(|e| e.to_string())?;
                de.end().map_err(|e| e.to_string())?;
                render(|r| {
                    walk_sonic(&v, 1, &mut Seen::default(), r);
                    Ok(())
                })
            },
        ),
        ("sonic-rs to_object_iter, values skipped (lazy)", |m| {
            // What the checking iterator validates in the values it only skips over.
            render(|r| {
                use sonic_rs::JsonValueTrait;
                if first_non_ws(m) == Some(b'[') {
                    r.open(true);
                    for x in sonic_rs::to_array_iter(m) {
                        let x = x.map_err(|e| e.to_string())?;
                        let _ = x.get_type();
                        r.token("_");
                    }
                    r.close(true);
                } else {
                    r.open(false);
                    for e in sonic_rs::to_object_iter(m) {
                        let (k, _) = e.map_err(|e| e.to_string())?;
                        r.key(&k);
                        r.token("_");
                    }
                    r.close(false);
                }
                Ok(())
            })
        }),
        ("sonic-rs lazy walk", |m| {
            render(|r| sonic_lazy(m, &mut None, r))
        }),
        ("cdc-decode json::Parser", |m| {
            render(|r| ours(m, &mut _native::json::Parser::default(), r))
        }),
    ]
}

// ------------------------------------------------------------------------------------------
// Driver

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn data_dir() -> PathBuf {
    std::env::var_os("JC_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/tmp/jc".into())
}

fn run(cmd: &mut Command) {
    eprintln!("$ {cmd:?}");
    let status = cmd.status().expect("spawn");
    assert!(status.success(), "{cmd:?} failed: {status}");
}

/// Makes the two message sets when they are missing.
fn ensure_data(dir: &Path) {
    let repo = manifest_dir().join("../..");
    if !dir.join("datahub-blob/values.bin").exists() {
        run(Command::new(repo.join(".venv/bin/cdc-decode"))
            .args([
                "generate",
                "datahub-blob",
                "--messages",
                "20000",
                "--seed",
                "1",
                "--out",
            ])
            .arg(dir.join("datahub-blob")));
    }
    if !dir.join("tdsql-json/values.bin").exists() {
        run(Command::new("python3")
            .arg(manifest_dir().join("gen_tdsql.py"))
            .args(["--messages", "20000", "--seed", "1", "--out"])
            .arg(dir.join("tdsql-json")));
    }
}

/// Runs the `ap/` binary through cargo (release) and returns its stdout lines.
fn run_ap(args: &[&str]) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "run",
        "--release",
        "--quiet",
        "-p",
        "json-choice-ap",
        "--manifest-path",
    ])
    .arg(manifest_dir().join("Cargo.toml"))
    .arg("--")
    .args(args)
    .stderr(Stdio::inherit());
    eprintln!("$ {cmd:?}");
    let out = cmd.output().expect("cargo run -p json-choice-ap");
    assert!(
        out.status.success(),
        "json-choice-ap failed: {}",
        out.status
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(String::from)
        .collect()
}

fn versions() -> String {
    let lock = std::fs::read_to_string(manifest_dir().join("Cargo.lock")).unwrap_or_default();
    let mut found = Vec::new();
    let mut name = "";
    for line in lock.lines() {
        if let Some(n) = line.strip_prefix("name = ") {
            name = n.trim_matches('"');
        } else if let Some(v) = line.strip_prefix("version = ") {
            if [
                "serde_json",
                "simd-json",
                "sonic-rs",
                "cdc-decode",
                "mimalloc",
            ]
            .contains(&name)
            {
                found.push(format!("{name} {}", v.trim_matches('"')));
            }
        }
    }
    found.join(", ")
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let rustc = Command::new("rustc")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    format!(
        "{cpu}, {} logical CPUs visible, one thread used; {rustc}; release profile (thin LTO, 1 codegen unit); allocator mimalloc",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)
    )
}

fn print_bench(rows: &[Row]) {
    let mut by_case: BTreeMap<usize, (&str, Vec<&Row>)> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    for r in rows {
        if !order.contains(&r.case.as_str()) {
            order.push(&r.case);
        }
        let i = order.iter().position(|c| *c == r.case).unwrap();
        by_case.entry(i).or_insert((&r.case, Vec::new())).1.push(r);
    }
    let sets: Vec<String> = {
        let mut s: Vec<String> = Vec::new();
        for r in rows {
            if !s.contains(&r.set) {
                s.push(r.set.clone());
            }
        }
        s
    };
    let first = |set: &str| rows.iter().find(|r| r.set == set).unwrap();
    println!("Message sets:");
    for s in &sets {
        let r = first(s);
        println!(
            "- {s}: {} messages, {} bytes ({:.0} B/message)",
            r.msgs,
            r.bytes,
            r.bytes as f64 / r.msgs as f64
        );
    }
    println!();
    let mut header = "| case |".to_string();
    let mut rule = "| --- |".to_string();
    for s in &sets {
        header += &format!(" {s} msg/s | {s} MB/s |");
        rule += " ---: | ---: |";
    }
    println!("{header}\n{rule}");
    for (_, (case, rs)) in by_case {
        let mut line = format!("| {case} |");
        for s in &sets {
            match rs.iter().find(|r| &r.set == s) {
                Some(r) if r.rejected == 0 => {
                    line += &format!(" {} | {:.1} |", thousands(r.msgs_per_s()), r.mb_per_s())
                }
                Some(r) => line += &format!(" {} rejected | ({}) |", r.rejected, r.first_error),
                None => line += " | |",
            }
        }
        println!("{line}");
    }
    println!();
    println!("Walks that produced the same keys, values and order (digest over every message):");
    for s in &sets {
        let mut groups: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
        for r in rows.iter().filter(|r| &r.set == s && r.rejected == 0) {
            groups.entry(r.digest).or_default().push(&r.case);
        }
        for (d, cases) in groups.iter().filter(|(_, c)| c.len() > 1) {
            println!("- {s} {d:016x}: {}", cases.join("; "));
        }
    }
    println!();
}

fn thousands(v: f64) -> String {
    let s = format!("{:.0}", v);
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn short(cell: &Cell) -> String {
    match cell.status.as_str() {
        "ok" => {
            let mut d: String = cell.detail.chars().take(30).collect();
            if d.len() < cell.detail.len() {
                d.push('…');
            }
            format!("✓ `{}`", d.replace('|', "\\|").replace('`', "'"))
        }
        "err" => "✗".into(),
        _ => format!("💥 {}", cell.detail),
    }
}

fn print_matrix(cells: &[Cell]) {
    let mut configs: Vec<&str> = Vec::new();
    for c in cells {
        if !configs.contains(&c.config.as_str()) {
            configs.push(&c.config);
        }
    }
    println!(
        "Strictness: ✓ accepted (what the walk produced), ✗ rejected (error below), 💥 crashed.\n"
    );
    // Inputs as rows, configurations as columns.
    let mut header = "| input |".to_string();
    let mut rule = "| --- |".to_string();
    for (i, c) in configs.iter().enumerate() {
        header += &format!(" {} |", letter(i));
        rule += " --- |";
        let _ = c;
    }
    println!("{header}\n{rule}");
    for input in common::inputs() {
        let mut line = format!("| {} |", input.label.replace('|', "\\|"));
        for config in &configs {
            let cell = cells
                .iter()
                .find(|c| c.config == *config && c.input == input.id);
            line += &format!(" {} |", cell.map(short).unwrap_or_default());
        }
        println!("{line}");
    }
    println!();
    for (i, c) in configs.iter().enumerate() {
        println!("- {}: {c}", letter(i));
    }
    println!("\nDetails (every cell):\n");
    for config in &configs {
        println!("{config}:");
        for c in cells.iter().filter(|c| c.config == *config) {
            println!("  {:<10} {:<5} {}", c.input, c.status, c.detail);
        }
    }
}

fn letter(i: usize) -> char {
    (b'A' + i as u8) as char
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("all");
    match mode {
        "probe" => return common::probe_child(&configs(), &args[2], &args[3]),
        "probe-big" => return common::probe_child_big_stack(&configs(), &args[2], &args[3]),
        "all" | "bench" | "matrix" => {}
        other => panic!("unknown mode {other} (all, bench, matrix)"),
    }
    // serde_json's features are unified over what one cargo invocation builds: building
    // this package together with `ap/` (`--workspace`) would give it arbitrary_precision.
    let one_ten = serde_json::from_str::<serde_json::Value>("1.10")
        .expect("1.10")
        .to_string();
    assert_eq!(
        one_ten, "1.1",
        "serde_json built with arbitrary_precision: build this package alone (no --workspace)"
    );
    println!("Machine: {}\n\nLibraries: {}\n", machine(), versions());
    if mode != "matrix" {
        let dir = data_dir();
        ensure_data(&dir);
        let sets = common::load_sets(&dir);
        eprintln!("timing (best pass of >= 5, >= 2 s per case and set):");
        let mut rows = bench(&sets);
        for line in run_ap(&["bench", dir.to_str().unwrap()]) {
            rows.extend(Row::from_tsv(&line));
        }
        print_bench(&rows);
    }
    if mode != "bench" {
        eprintln!("strictness probes (one child process each)...");
        let exe = std::env::current_exe().expect("exe");
        let mut cells = common::probe_all(&exe, &configs());
        for line in run_ap(&["matrix"]) {
            cells.extend(Cell::from_tsv(&line));
        }
        print_matrix(&cells);
    }
}
