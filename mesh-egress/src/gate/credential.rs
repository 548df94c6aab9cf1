//! Credential shapes: vendor-prefixed API keys, AWS key ids, bot tokens and auth-header values,
//! told apart from documentation placeholders, and recognised even when partly masked.

use std::ops::Range;

use crate::gate::rules::CredShape;

/// The `sk-` sub-prefixes that are part of the vendor prefix, not key material.
const SK_SUBPREFIXES: &[&str] = &[
    "ant-api03-",
    "ant-admin01-",
    "ant-",
    "or-v1-",
    "or-",
    "proj-",
    "svcacct-",
    "admin-",
];

/// Words that make a key-shaped string a placeholder in documentation.
const PLACEHOLDERS: &[&str] = &[
    "your",
    "example",
    "placeholder",
    "redacted",
    "dummy",
    "fake",
    "insert",
    "replace",
    "here",
];

/// Keyboard sequences that only documentation uses (matched case-sensitively).
const SEQUENCES: &[&str] = &["123456", "abcdef", "ABCDEF"];

pub(crate) fn credential(
    text: &str,
    hit: Range<usize>,
    literal: &str,
    shape: CredShape,
) -> Option<Range<usize>> {
    let b = text.as_bytes();
    let clean_before = |at: usize| {
        at == 0 || !(b[at - 1].is_ascii_alphanumeric() || matches!(b[at - 1], b'_' | b'-'))
    };
    match shape {
        CredShape::Prefixed => {
            let matched = &text[hit.clone()];
            let canonical = if literal == "aiza" { "AIza" } else { literal };
            if matched != canonical || !clean_before(hit.start) {
                return None;
            }
            let len = key_body_len(&text[hit.end..]);
            let mut body = &text[hit.end..hit.end + len];
            if literal == "sk-"
                && let Some(sub) = SK_SUBPREFIXES.iter().find(|s| {
                    body.len() > s.len()
                        && body
                            .get(..s.len())
                            .is_some_and(|p| p.eq_ignore_ascii_case(s))
                })
            {
                body = &body[sub.len()..];
            }
            key_material(body).then(|| hit.start..hit.end + len)
        }
        CredShape::AwsKeyId => {
            if &text[hit.clone()] != "AKIA" || !clean_before(hit.start) {
                return None;
            }
            let rest = &b[hit.end..];
            let id = rest.get(..16)?;
            let shaped = id
                .iter()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
                && id.iter().any(u8::is_ascii_digit)
                && !rest.get(16).is_some_and(u8::is_ascii_alphanumeric)
                && !text[hit.end..hit.end + 16].contains("EXAMPLE");
            shaped.then(|| hit.start..hit.end + 16)
        }
        CredShape::Telegram => {
            if &text[hit.start + 1..hit.end] != "AA" {
                return None;
            }
            let digits = b[..hit.start]
                .iter()
                .rev()
                .take_while(|c| c.is_ascii_digit())
                .count();
            let start = hit.start - digits;
            if !(8..=10).contains(&digits) || !clean_before(start) {
                return None;
            }
            let secret = b[hit.start + 1..]
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-'))
                .count();
            (secret >= 30).then(|| start..hit.start + 1 + secret)
        }
        CredShape::Header => {
            let mut at = hit.end;
            let skip_ws = |at: &mut usize| {
                while b.get(*at).is_some_and(|c| *c == b' ' || *c == b'\t') {
                    *at += 1;
                }
            };
            skip_ws(&mut at);
            if literal == "authorization:" {
                for scheme in ["bearer ", "bot ", "basic ", "token "] {
                    if text
                        .get(at..at + scheme.len())
                        .is_some_and(|s| s.eq_ignore_ascii_case(scheme))
                    {
                        at += scheme.len();
                        skip_ws(&mut at);
                        break;
                    }
                }
            }
            let len = key_body_len(&text[at..]);
            // A vendor-prefixed key after the header is its own finding; here, only opaque tokens.
            let body = &text[at..at + len];
            key_material(body).then(|| hit.start..at + len)
        }
    }
}

/// The length of key-shaped text at the start of `s` (letters, digits, `_ - . * + / =`, mask
/// characters), without trailing sentence punctuation.
fn key_body_len(s: &str) -> usize {
    let mut len = 0;
    for (i, c) in s.char_indices() {
        if c.is_ascii_alphanumeric()
            || matches!(c, '_' | '-' | '.' | '*' | '+' | '/' | '=' | '•' | '…')
        {
            len = i + c.len_utf8();
        } else {
            break;
        }
        if len >= 256 {
            break;
        }
    }
    s[..len].trim_end_matches(['.', '-', '_']).len()
}

/// Whether `body` looks like real key material: at least 20 visible characters of mixed kind,
/// or, when partly masked (`***`, `...`, `…`, `•`, `xxxx`), at least 4 visible mixed ones; and
/// no placeholder words.
fn key_material(body: &str) -> bool {
    let mut masked = body.contains("***") || body.contains("...") || body.contains(['…', '•']);
    let mut visible = String::with_capacity(body.len());
    let mut x_run = 0usize;
    for c in body.chars() {
        if c == 'x' || c == 'X' {
            x_run += 1;
            continue;
        }
        if x_run >= 4 {
            masked = true;
        } else {
            visible.extend(std::iter::repeat_n('x', x_run));
        }
        x_run = 0;
        if c.is_ascii_alphanumeric() {
            visible.push(c);
        }
    }
    if x_run >= 4 {
        masked = true;
    } else {
        visible.extend(std::iter::repeat_n('x', x_run));
    }
    let lower = visible.to_ascii_lowercase();
    if PLACEHOLDERS.iter().any(|p| lower.contains(p))
        || SEQUENCES.iter().any(|p| visible.contains(p))
    {
        return false;
    }
    let digit = visible.bytes().any(|c| c.is_ascii_digit());
    let upper = visible.bytes().any(|c| c.is_ascii_uppercase());
    let lower_case = visible.bytes().any(|c| c.is_ascii_lowercase());
    let mixed = (digit && (upper || lower_case)) || (upper && lower_case);
    let needed = if masked { 4 } else { 20 };
    mixed && visible.len() >= needed
}
