//! The parser's tests: the grammar, limits, lookups and remembered values.

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
    let text =
        br#" { "a" : [1.10, -0, 1E+5, true, null] , "b":{"x":1,"x":2,"y":"\u0041\/"}, "a": 3 } "#;
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
