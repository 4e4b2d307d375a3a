//! Shared by both binaries (`src/main.rs` and `ap/src/main.rs`, which includes this file by
//! path): message sets, the sinks a walk writes into, the timing loop, the strictness
//! inputs and the child-process probe protocol.

#![allow(dead_code)]

use std::borrow::Cow;
use std::hash::{DefaultHasher, Hasher};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The nesting limit of docs/formats/datahub-blob.md ("JSON accepted", rule 4).
pub const MAX_DEPTH: usize = 128;

// ------------------------------------------------------------------------------------------
// Message sets

pub struct Set {
    pub name: String,
    pub msgs: Vec<Vec<u8>>,
    pub bytes: usize,
}

/// Reads `values.bin`: per message a u32 little-endian length then the bytes; 0xFFFFFFFF is
/// a null (skipped).
pub fn load(name: &str, path: &Path) -> Set {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut msgs = Vec::new();
    let mut at = 0;
    while at < data.len() {
        let len = u32::from_le_bytes(data[at..at + 4].try_into().unwrap());
        at += 4;
        if len == u32::MAX {
            continue;
        }
        msgs.push(data[at..at + len as usize].to_vec());
        at += len as usize;
    }
    let bytes = msgs.iter().map(Vec::len).sum();
    Set {
        name: name.to_string(),
        msgs,
        bytes,
    }
}

pub fn load_sets(dir: &Path) -> Vec<Set> {
    vec![
        load("datahub-blob", &dir.join("datahub-blob/values.bin")),
        load("tdsql-json", &dir.join("tdsql-json/values.bin")),
    ]
}

// ------------------------------------------------------------------------------------------
// Sinks: what a walk writes every key and value into

/// Receives every key and value of a message, in document order.
pub trait Sink {
    /// Containers deeper than this are not descended into (for rendering hostile inputs).
    const MAX_WALK: usize = usize::MAX;
    fn key(&mut self, k: &str);
    fn text(&mut self, s: &str);
    /// A number as the exact token sent.
    fn token(&mut self, t: &str);
    fn int(&mut self, v: i64);
    fn uint(&mut self, v: u64);
    fn float(&mut self, v: f64);
    fn boolean(&mut self, b: bool);
    fn null(&mut self);
    fn open(&mut self, array: bool);
    fn close(&mut self, array: bool);
    fn elided(&mut self) {}
}

/// What the timed runs use: touches every value (length and first byte) and nothing more,
/// so that the parser's cost is what is compared.
#[derive(Default)]
pub struct Cheap(pub u64);

impl Cheap {
    #[inline(always)]
    fn bytes(&mut self, s: &str) {
        let first = s.as_bytes().first().copied().unwrap_or(0) as u64;
        self.0 = self.0.wrapping_add(s.len() as u64).wrapping_add(first);
    }
}

impl Sink for Cheap {
    #[inline(always)]
    fn key(&mut self, k: &str) {
        self.bytes(k)
    }
    #[inline(always)]
    fn text(&mut self, s: &str) {
        self.bytes(s)
    }
    #[inline(always)]
    fn token(&mut self, t: &str) {
        self.bytes(t)
    }
    #[inline(always)]
    fn int(&mut self, v: i64) {
        self.0 = self.0.wrapping_add(v as u64)
    }
    #[inline(always)]
    fn uint(&mut self, v: u64) {
        self.0 = self.0.wrapping_add(v)
    }
    #[inline(always)]
    fn float(&mut self, v: f64) {
        self.0 = self.0.wrapping_add(v.to_bits())
    }
    #[inline(always)]
    fn boolean(&mut self, b: bool) {
        self.0 = self.0.wrapping_add(b as u64)
    }
    #[inline(always)]
    fn null(&mut self) {
        self.0 = self.0.wrapping_add(1)
    }
    #[inline(always)]
    fn open(&mut self, array: bool) {
        self.0 = self.0.wrapping_add(2 + array as u64)
    }
    #[inline(always)]
    fn close(&mut self, _array: bool) {}
}

/// A hash of everything a walk produced (untimed): walks that produce the same keys, values
/// and order agree.
pub struct Digest(DefaultHasher);

impl Default for Digest {
    fn default() -> Self {
        Digest(DefaultHasher::new())
    }
}

impl Digest {
    pub fn finish(&self) -> u64 {
        self.0.finish()
    }
    fn tagged(&mut self, tag: u8, bytes: &[u8]) {
        self.0.write_u8(tag);
        self.0.write_usize(bytes.len());
        self.0.write(bytes);
    }
}

impl Sink for Digest {
    fn key(&mut self, k: &str) {
        self.tagged(b'k', k.as_bytes())
    }
    fn text(&mut self, s: &str) {
        self.tagged(b's', s.as_bytes())
    }
    fn token(&mut self, t: &str) {
        self.tagged(b'n', t.as_bytes())
    }
    fn int(&mut self, v: i64) {
        self.tagged(b'i', &v.to_le_bytes())
    }
    fn uint(&mut self, v: u64) {
        self.tagged(b'u', &v.to_le_bytes())
    }
    fn float(&mut self, v: f64) {
        self.tagged(b'f', &v.to_bits().to_le_bytes())
    }
    fn boolean(&mut self, b: bool) {
        self.tagged(b'b', &[b as u8])
    }
    fn null(&mut self) {
        self.tagged(b'z', &[])
    }
    fn open(&mut self, array: bool) {
        self.tagged(if array { b'[' } else { b'{' }, &[])
    }
    fn close(&mut self, array: bool) {
        self.tagged(if array { b']' } else { b'}' }, &[])
    }
}

/// Renders what a parser produced (at most 4 levels are shown; deeper ones as `…`) as compact JSON-like text for the strictness table:
/// numbers as the exact token when the library kept it, else as converted (`1.1`,
/// `100000.0`); non-ASCII and control characters as `\u{..}`; long strings and tokens
/// shortened to their head and their length.
#[derive(Default)]
pub struct Render {
    pub out: String,
    first: Vec<bool>,
    after_key: bool,
}

impl Render {
    fn hidden(&self) -> bool {
        self.first.len() > 4
    }
    fn pre(&mut self) {
        if self.after_key {
            self.after_key = false;
            return;
        }
        if let Some(first) = self.first.last_mut() {
            if !*first {
                self.out.push(',');
            }
            *first = false;
        }
    }
    fn quoted(&mut self, s: &str) {
        self.out.push('"');
        self.plain(s);
        self.out.push('"');
    }
    fn plain(&mut self, s: &str) {
        // from_utf8_lossy over the bytes: a library that let invalid UTF-8 into a `&str`
        // shows it here as U+FFFD instead of breaking the renderer.
        if std::str::from_utf8(s.as_bytes()).is_err() {
            self.out.push_str("(NOT UTF-8:)");
        }
        let lossy = String::from_utf8_lossy(s.as_bytes());
        let count = lossy.chars().count();
        let shown: String = if count > 24 {
            lossy.chars().take(8).collect()
        } else {
            lossy.to_string()
        };
        for c in shown.chars() {
            match c {
                '"' => self.out.push_str("\\\""),
                '\\' => self.out.push_str("\\\\"),
                ' '..='~' => self.out.push(c),
                _ => self.out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            }
        }
        if count > 24 {
            self.out.push_str(&format!("…({count} chars)"));
        }
    }
}

impl Sink for Render {
    /// DOM walks stop here (the parser has checked everything already); the strict walkers
    /// ignore it, they must see every level.
    const MAX_WALK: usize = 1000;
    fn key(&mut self, k: &str) {
        if self.hidden() {
            return;
        }
        self.pre();
        self.quoted(k);
        self.out.push(':');
        self.after_key = true;
    }
    fn text(&mut self, s: &str) {
        if self.hidden() {
            return;
        }
        self.pre();
        self.quoted(s);
    }
    fn token(&mut self, t: &str) {
        if self.hidden() {
            return;
        }
        self.pre();
        self.plain(t);
    }
    fn int(&mut self, v: i64) {
        self.token(&v.to_string());
    }
    fn uint(&mut self, v: u64) {
        self.token(&v.to_string());
    }
    fn float(&mut self, v: f64) {
        self.token(&format!("{v:?}"));
    }
    fn boolean(&mut self, b: bool) {
        self.token(if b { "true" } else { "false" });
    }
    fn null(&mut self) {
        self.token("null");
    }
    fn open(&mut self, array: bool) {
        if self.hidden() {
            self.first.push(true);
            return;
        }
        self.pre();
        self.first.push(true);
        if self.hidden() {
            self.out.push('…');
        } else {
            self.out.push(if array { '[' } else { '{' });
        }
    }
    fn close(&mut self, array: bool) {
        let was_hidden = self.hidden();
        self.first.pop();
        if !was_hidden {
            self.out.push(if array { ']' } else { '}' });
        }
    }
    fn elided(&mut self) {
        if !self.hidden() {
            self.out.push('…');
        }
    }
}

/// Swallows everything (the walk of a dropped duplicate, which must still be checked).
#[derive(Default)]
pub struct Null;

impl Sink for Null {
    fn key(&mut self, _: &str) {}
    fn text(&mut self, _: &str) {}
    fn token(&mut self, _: &str) {}
    fn int(&mut self, _: i64) {}
    fn uint(&mut self, _: u64) {}
    fn float(&mut self, _: f64) {}
    fn boolean(&mut self, _: bool) {}
    fn null(&mut self) {}
    fn open(&mut self, _: bool) {}
    fn close(&mut self, _: bool) {}
}

/// The keys seen in the objects being walked, one stack for all levels (no allocation per
/// object once it has grown): `mark` at an object's start, `first` per key, `reset` at its
/// end. Duplicates are found by comparing with the keys before (objects here are small).
#[derive(Default)]
pub struct Seen<'a> {
    keys: Vec<Cow<'a, str>>,
}

impl<'a> Seen<'a> {
    #[inline(always)]
    pub fn mark(&self) -> usize {
        self.keys.len()
    }
    /// True the first time `key` is met since `mark` (it is then remembered).
    #[inline(always)]
    pub fn first(&mut self, mark: usize, key: Cow<'a, str>) -> bool {
        if self.keys[mark..].iter().any(|k| *k == key) {
            return false;
        }
        self.keys.push(key);
        true
    }
    #[inline(always)]
    pub fn reset(&mut self, mark: usize) {
        self.keys.truncate(mark);
    }
    /// The key `first` remembered last.
    #[inline(always)]
    pub fn last(&self) -> &str {
        self.keys.last().expect("a key")
    }
    /// The same buffer, empty, for keys of another lifetime (the next message): no
    /// allocation (an in-place collect of an empty vector of the same layout).
    pub fn reuse<'b>(mut self) -> Seen<'b> {
        self.keys.clear();
        Seen {
            keys: self.keys.into_iter().map(|_| unreachable!()).collect(),
        }
    }
}

/// Position of the first byte that is not JSON whitespace.
pub fn first_non_ws(b: &[u8]) -> Option<u8> {
    b.iter()
        .copied()
        .find(|c| !matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
}

// ------------------------------------------------------------------------------------------
// Timing

/// One timed case on one message set.
pub struct Row {
    pub case: String,
    pub set: String,
    pub msgs: usize,
    pub bytes: usize,
    pub best: Duration,
    pub digest: u64,
    /// Messages rejected (should be none: every message of both sets is valid JSON).
    pub rejected: usize,
    pub first_error: String,
}

impl Row {
    pub fn msgs_per_s(&self) -> f64 {
        self.msgs as f64 / self.best.as_secs_f64()
    }
    pub fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.best.as_secs_f64()
    }
    pub fn to_tsv(&self) -> String {
        format!(
            "{}\t{}\t{}\t{}\t{}\t{:016x}\t{}\t{}",
            self.case,
            self.set,
            self.msgs,
            self.bytes,
            self.best.as_nanos(),
            self.digest,
            self.rejected,
            self.first_error.replace(['\t', '\n'], " ")
        )
    }
    pub fn from_tsv(line: &str) -> Option<Row> {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() != 8 {
            return None;
        }
        Some(Row {
            case: f[0].into(),
            set: f[1].into(),
            msgs: f[2].parse().ok()?,
            bytes: f[3].parse().ok()?,
            best: Duration::from_nanos(f[4].parse().ok()?),
            digest: u64::from_str_radix(f[5], 16).ok()?,
            rejected: f[6].parse().ok()?,
            first_error: f[7].into(),
        })
    }
}

/// A case: parses one message and walks it into the sink; returns the sink's value.
pub type Timed<'c> = Box<dyn FnMut(&[u8], &mut Cheap) -> Result<(), String> + 'c>;
pub type Digested<'c> = Box<dyn FnMut(&[u8], &mut Digest) -> Result<(), String> + 'c>;

/// Warm-up (one pass, which also counts rejections), then timed passes over the whole set:
/// at least 5 and until 2 s have passed (at most 40); the best pass counts. Single thread.
pub fn measure(case: &str, set: &Set, timed: &mut Timed, digested: &mut Digested) -> Row {
    let mut rejected = 0;
    let mut first_error = String::new();
    let mut digest = Digest::default();
    for m in &set.msgs {
        if let Err(e) = digested(m, &mut digest) {
            if rejected == 0 {
                first_error = e;
            }
            rejected += 1;
        }
    }
    let mut best = Duration::MAX;
    let started = Instant::now();
    let mut rounds = 0;
    while rounds < 5 || (started.elapsed() < Duration::from_secs(2) && rounds < 40) {
        let mut sink = Cheap::default();
        let t = Instant::now();
        for m in &set.msgs {
            let _ = std::hint::black_box(timed(std::hint::black_box(m), &mut sink));
        }
        let took = t.elapsed();
        std::hint::black_box(sink.0);
        best = best.min(took);
        rounds += 1;
    }
    let row = Row {
        case: case.into(),
        set: set.name.clone(),
        msgs: set.msgs.len(),
        bytes: set.bytes,
        best,
        digest: digest.finish(),
        rejected,
        first_error,
    };
    eprintln!(
        "  {:<62} {:<13} {:>10.0} msg/s {:>8.1} MB/s  ({} rounds{})",
        row.case,
        row.set,
        row.msgs_per_s(),
        row.mb_per_s(),
        rounds,
        if rejected > 0 {
            format!(", {rejected} REJECTED: {}", row.first_error)
        } else {
            String::new()
        }
    );
    row
}

/// A case written once over a generic sink, for both the timed and the digest runs; each
/// run gets its own state (`$init`: buffers, parsers), reused from message to message.
#[macro_export]
macro_rules! case {
    ($rows:expr, $sets:expr, $name:expr, $init:expr, |$m:ident, $sink:ident, $st:ident| $body:expr) => {{
        for set in $sets.iter() {
            let mut s1 = $init;
            let mut s2 = $init;
            let mut timed: $crate::common::Timed = Box::new(move |$m, $sink| {
                #[allow(unused_variables)]
                let $st = &mut s1;
                #[allow(unused_braces)]
                let result: Result<(), String> = $body;
                result
            });
            let mut digested: $crate::common::Digested = Box::new(move |$m, $sink| {
                #[allow(unused_variables)]
                let $st = &mut s2;
                #[allow(unused_braces)]
                let result: Result<(), String> = $body;
                result
            });
            $rows.push($crate::common::measure(
                $name,
                set,
                &mut timed,
                &mut digested,
            ));
        }
    }};
}

// ------------------------------------------------------------------------------------------
// Strictness inputs

pub struct Input {
    pub id: &'static str,
    pub label: &'static str,
    pub bytes: Vec<u8>,
}

fn nested(levels: usize) -> Vec<u8> {
    let mut v = vec![b'['; levels];
    v.extend(std::iter::repeat_n(b']', levels));
    v
}

pub fn inputs() -> Vec<Input> {
    let mut big = b"{\"v\":1".to_vec();
    big.extend(std::iter::repeat_n(b'2', 3999));
    big.push(b'}');
    let i = |id, label, bytes: &[u8]| Input {
        id,
        label,
        bytes: bytes.to_vec(),
    };
    vec![
        i(
            "hi-sur",
            r#"lone high surrogate `{"v":"\ud800"}`"#,
            br#"{"v":"\ud800"}"#,
        ),
        i(
            "lo-sur",
            r#"lone low surrogate `{"v":"\udc00"}`"#,
            br#"{"v":"\udc00"}"#,
        ),
        i(
            "pair",
            r#"valid pair `{"v":"\ud83d\ude00"}` (control)"#,
            br#"{"v":"\ud83d\ude00"}"#,
        ),
        i(
            "ign-sur",
            r#"lone surrogate in a field not read `{"read":1,"x":{"y":["a\udc00"]}}`"#,
            br#"{"read":1,"x":{"y":["a\udc00"]}}"#,
        ),
        Input {
            id: "nest128",
            label: "128 nested arrays `[[…]]`",
            bytes: nested(128),
        },
        Input {
            id: "nest129",
            label: "129 nested arrays",
            bytes: nested(129),
        },
        Input {
            id: "nest100k",
            label: "100,000 nested arrays",
            bytes: nested(100_000),
        },
        i(
            "dup",
            r#"duplicate keys `{"a":1,"a":2}`"#,
            br#"{"a":1,"a":2}"#,
        ),
        i(
            "dup-esc",
            r#"duplicate spelled with an escape `{"a":1,"\u0061":2}`"#,
            br#"{"a":1,"\u0061":2}"#,
        ),
        i(
            "dup-sur",
            r#"lone surrogate in a dropped duplicate `{"a":1,"a":"\udc00"}`"#,
            br#"{"a":1,"a":"\udc00"}"#,
        ),
        i(
            "dup-deep",
            r#"nested duplicates `{"o":{"a":"x","b":1,"a":"y"}}`"#,
            br#"{"o":{"a":"x","b":1,"a":"y"}}"#,
        ),
        Input {
            id: "bigint",
            label: "4,000-digit integer `{\"v\":1222…2}`",
            bytes: big,
        },
        i(
            "tokens",
            "number tokens `{\"v\":[1.10,1E+5,-0]}`",
            br#"{"v":[1.10,1E+5,-0]}"#,
        ),
        i(
            "bad-utf8",
            "invalid UTF-8 in a string (0xFF)",
            b"{\"v\":\"a\xffb\"}",
        ),
        i(
            "overlong",
            "overlong UTF-8 (C0 AF for `/`)",
            b"{\"v\":\"\xc0\xaf\"}",
        ),
        i(
            "enc-sur",
            "UTF-8-encoded surrogate (ED A0 80)",
            b"{\"v\":\"\xed\xa0\x80\"}",
        ),
        i(
            "bom",
            "UTF-8 BOM before `{\"v\":1}`",
            b"\xef\xbb\xbf{\"v\":1}",
        ),
        i("nan", "`{\"v\":NaN}`", br#"{"v":NaN}"#),
        i(
            "comma-arr",
            "trailing comma `{\"v\":[1,]}`",
            br#"{"v":[1,]}"#,
        ),
        i("comma-obj", "trailing comma `{\"v\":1,}`", br#"{"v":1,}"#),
        i(
            "ctl",
            "raw control character U+0001 in a string",
            b"{\"v\":\"a\x01b\"}",
        ),
        i("tab", "raw TAB in a string", b"{\"v\":\"a\tb\"}"),
        i("garbage", "trailing garbage `{\"v\":1}x`", br#"{"v":1}x"#),
        i("two", "two values `{\"v\":1}{}`", br#"{"v":1}{}"#),
    ]
}

// ------------------------------------------------------------------------------------------
// Probes: each input is fed to each configuration in a child process

/// What one configuration did with one input.
pub struct Cell {
    pub config: String,
    pub input: String,
    /// "ok", "err" or "crash".
    pub status: String,
    pub detail: String,
}

impl Cell {
    pub fn to_tsv(&self) -> String {
        format!(
            "{}\t{}\t{}\t{}",
            self.config,
            self.input,
            self.status,
            self.detail.replace(['\t', '\n'], " ")
        )
    }
    pub fn from_tsv(line: &str) -> Option<Cell> {
        let f: Vec<&str> = line.splitn(4, '\t').collect();
        (f.len() == 4).then(|| Cell {
            config: f[0].into(),
            input: f[1].into(),
            status: f[2].into(),
            detail: f[3].into(),
        })
    }
}

/// A configuration under test: parses (and walks) one input, returns the rendering.
pub type Probe = fn(&[u8]) -> Result<String, String>;

/// In the child (`probe CONFIG INPUT`): runs the probe on the main thread (its usual stack)
/// and prints `ok\tRENDER` or `err\tMESSAGE`.
pub fn probe_child(configs: &[(&str, Probe)], config: &str, input: &str) {
    let probe = configs
        .iter()
        .find(|(n, _)| *n == config)
        .expect("config")
        .1;
    let bytes = inputs()
        .into_iter()
        .find(|i| i.id == input)
        .expect("input")
        .bytes;
    match probe(&bytes) {
        Ok(render) => println!("ok\t{render}"),
        Err(e) => println!("err\t{}", e.replace(['\t', '\n'], " ")),
    }
}

/// In the child (`probe-big CONFIG INPUT`): the same on a thread with a 1 GiB stack.
pub fn probe_child_big_stack(configs: &[(&str, Probe)], config: &str, input: &str) {
    let (config, input) = (config.to_string(), input.to_string());
    let configs: Vec<(String, Probe)> = configs.iter().map(|(n, p)| (n.to_string(), *p)).collect();
    std::thread::Builder::new()
        .stack_size(1 << 30)
        .spawn(move || {
            let configs: Vec<(&str, Probe)> =
                configs.iter().map(|(n, p)| (n.as_str(), *p)).collect();
            probe_child(&configs, &config, &input)
        })
        .expect("thread")
        .join()
        .expect("probe");
}

fn run_child(exe: &Path, mode: &str, config: &str, input: &str) -> (String, String) {
    use std::os::unix::process::ExitStatusExt;
    let out = Command::new(exe)
        .args([mode, config, input])
        .output()
        .expect("child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if let Some((s, d)) = stdout.trim_end().split_once('\t') {
        (s.to_string(), d.to_string())
    } else if stderr.contains("overflowed its stack") {
        (
            "crash".into(),
            format!(
                "stack overflow (signal {})",
                out.status.signal().unwrap_or(0)
            ),
        )
    } else if let Some(sig) = out.status.signal() {
        ("crash".into(), format!("killed by signal {sig}"))
    } else {
        let last = stderr
            .lines()
            .find(|l| l.contains("panicked"))
            .unwrap_or("");
        (
            "crash".into(),
            format!("exit {:?} {last}", out.status.code()),
        )
    }
}

/// In the parent: every configuration on every input, each in a child process of `exe`
/// (main thread, the usual 8 MiB stack). A crash is run again on a 1 GiB stack, and the
/// detail says what happened then.
pub fn probe_all(exe: &Path, configs: &[(&str, Probe)]) -> Vec<Cell> {
    let mut cells = Vec::new();
    for (config, _) in configs {
        for input in inputs() {
            let (status, mut detail) = run_child(exe, "probe", config, input.id);
            if status == "crash" {
                let (s, d) = run_child(exe, "probe-big", config, input.id);
                detail = format!("{detail}; on a 1 GiB stack: {s} {d}");
            }
            cells.push(Cell {
                config: config.to_string(),
                input: input.id.to_string(),
                status,
                detail,
            });
        }
    }
    cells
}
