//! Python-call tool decisions (`[get_weather(city='Paris', days=2)]`, a `tool_code` block's
//! `print(default_api.f(x=1))`, Llama's `brave_search.call(query="x")`) read as calls with JSON
//! arguments.
//!
//! Each keyword value is a Python literal; it is rewritten token by token into JSON text
//! (`'single'` strings, `True`/`False`/`None`, tuples as lists) and handed to `serde_json`,
//! whose own depth limit bounds nesting. Nothing here recurses on the text: brackets are only
//! counted (up to [`MAX_DEPTH`]) to find where a value ends.

use serde_json::{Map, Value};

use super::call::{RawCall, TextToolProblem, ident, push_call};

/// The deepest bracket nesting a literal may have.
const MAX_DEPTH: usize = 64;

/// The calls in `src`: one call, or a `[…]` list of them, separated by commas (and, in a
/// `tool_code` block, by newlines).
pub(crate) fn calls(src: &str) -> Result<Vec<RawCall>, TextToolProblem> {
    let mut lexer = Lexer { s: src, i: 0 };
    lexer.skip_ws();
    let listed = lexer.eat(b'[');
    let mut out = Vec::new();
    loop {
        lexer.skip_ws();
        if lexer.at_end() || (listed && lexer.peek() == Some(b']')) {
            break;
        }
        push_call(&mut out, lexer.call()?)?;
        lexer.skip_ws();
        if !lexer.eat(b',') && !lexer.eat(b';') {
            // One call per line in a block; otherwise the list ends here.
            if lexer.at_end() || lexer.peek() == Some(b']') {
                break;
            }
            if !lexer.took_newline() {
                return Err(TextToolProblem::NotJson);
            }
        }
    }
    if listed && !lexer.eat(b']') {
        return Err(TextToolProblem::NotJson);
    }
    lexer.skip_ws();
    if !lexer.at_end() || out.is_empty() {
        return Err(if out.is_empty() {
            TextToolProblem::NoCall
        } else {
            TextToolProblem::NotJson
        });
    }
    Ok(out)
}

struct Lexer<'a> {
    s: &'a str,
    i: usize,
}

impl Lexer<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.i).copied()
    }

    fn at_end(&self) -> bool {
        self.i >= self.s.len()
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.i += 1;
        }
    }

    /// Whether the whitespace just skipped held a newline.
    fn took_newline(&self) -> bool {
        self.s[..self.i]
            .bytes()
            .rev()
            .take_while(u8::is_ascii_whitespace)
            .any(|b| b == b'\n')
    }

    fn name(&mut self) -> &str {
        let start = self.i;
        let n = ident(&self.s[start..]);
        self.i += n;
        &self.s[start..start + n]
    }

    /// `name(key=value, …)`, a `print(…)` around it, `default_api.` or `.call` around the name.
    fn call(&mut self) -> Result<RawCall, TextToolProblem> {
        let name = self.name().to_owned();
        self.skip_ws();
        if name.is_empty() || !self.eat(b'(') {
            return Err(TextToolProblem::NoName);
        }
        if name == "print" {
            self.skip_ws();
            let inner = self.call()?;
            self.skip_ws();
            return if self.eat(b')') {
                Ok(inner)
            } else {
                Err(TextToolProblem::NotJson)
            };
        }
        let name = name
            .strip_prefix("default_api.")
            .or_else(|| name.strip_suffix(".call"))
            .unwrap_or(&name)
            .to_owned();
        let mut arguments = Map::new();
        loop {
            self.skip_ws();
            if self.eat(b')') {
                break;
            }
            let key = self.name().to_owned();
            self.skip_ws();
            if key.is_empty() || !self.eat(b'=') {
                // A positional argument: the format asks for keywords.
                return Err(TextToolProblem::ArgumentsNotObject);
            }
            let value = self.literal()?;
            arguments.insert(key, value);
            self.skip_ws();
            if self.eat(b')') {
                break;
            }
            if !self.eat(b',') {
                return Err(TextToolProblem::NotJson);
            }
        }
        Ok(RawCall {
            name,
            arguments: Value::Object(arguments),
            id: None,
        })
    }

    /// One Python literal, up to the `,` or `)` that ends it at depth 0, as JSON.
    fn literal(&mut self) -> Result<Value, TextToolProblem> {
        let mut json = String::new();
        let mut depth = 0usize;
        loop {
            self.skip_ws();
            let Some(b) = self.peek() else {
                return Err(TextToolProblem::NotJson);
            };
            match b {
                b',' | b')' if depth == 0 => break,
                b'[' | b'(' | b'{' => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Err(TextToolProblem::NotJson);
                    }
                    json.push(if b == b'{' { '{' } else { '[' });
                    self.i += 1;
                }
                b']' | b')' | b'}' => {
                    depth = depth.checked_sub(1).ok_or(TextToolProblem::NotJson)?;
                    json.push(if b == b'}' { '}' } else { ']' });
                    self.i += 1;
                }
                b',' | b':' => {
                    json.push(char::from(b));
                    self.i += 1;
                }
                b'\'' | b'"' => json.push_str(&self.string(b)?),
                _ => {
                    let start = self.i;
                    let n = self.s[start..]
                        .bytes()
                        .take_while(|c| {
                            c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-' | b'+')
                        })
                        .count();
                    if n == 0 {
                        return Err(TextToolProblem::NotJson);
                    }
                    self.i += n;
                    match &self.s[start..start + n] {
                        "True" => json.push_str("true"),
                        "False" => json.push_str("false"),
                        "None" => json.push_str("null"),
                        number if number.starts_with(|c: char| c.is_ascii_digit() || c == '-') => {
                            json.push_str(number);
                        }
                        // A name, a call: not a literal.
                        _ => return Err(TextToolProblem::NotJson),
                    }
                }
            }
        }
        // A trailing comma inside a Python list is legal; in JSON it is not.
        let json = json.replace(",]", "]").replace(",}", "}");
        serde_json::from_str(&json).map_err(|_| TextToolProblem::NotJson)
    }

    /// A quoted string (either quote), escapes resolved, as a JSON string.
    fn string(&mut self, quote: u8) -> Result<String, TextToolProblem> {
        self.i += 1;
        let mut value = String::new();
        let mut chars = self.s[self.i..].char_indices();
        while let Some((at, c)) = chars.next() {
            match c {
                '\\' => {
                    let (_, escaped) = chars.next().ok_or(TextToolProblem::NotJson)?;
                    value.push(match escaped {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        'u' => {
                            let hex: String = chars.by_ref().take(4).map(|(_, h)| h).collect();
                            u32::from_str_radix(&hex, 16)
                                .ok()
                                .and_then(char::from_u32)
                                .ok_or(TextToolProblem::NotJson)?
                        }
                        other => other,
                    });
                }
                c if c == char::from(quote) => {
                    self.i += at + 1;
                    return serde_json::to_string(&value).map_err(|_| TextToolProblem::NotJson);
                }
                c => value.push(c),
            }
        }
        Err(TextToolProblem::NotJson)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(src: &str) -> (String, Value) {
        let mut calls = calls(src).expect("parses");
        assert_eq!(calls.len(), 1, "{src}");
        let call = calls.remove(0);
        (call.name, call.arguments)
    }

    #[test]
    fn a_call_list_becomes_calls_with_json_arguments() {
        let calls = calls(
            "[get_weather(city='San Francisco', metric=\"celsius\"), get_weather(city='Seattle', days=2, exact=True, extra=None)]",
        )
        .expect("parses");
        assert_eq!(calls.len(), 2);
        assert_eq!(
            calls[0].arguments,
            serde_json::json!({"city": "San Francisco", "metric": "celsius"})
        );
        assert_eq!(
            calls[1].arguments,
            serde_json::json!({"city": "Seattle", "days": 2, "exact": true, "extra": null})
        );
    }

    #[test]
    fn wrappers_around_the_name_are_the_formats_not_the_functions() {
        assert_eq!(
            one("print(default_api.get_stock(ticker='AAPL'))").0,
            "get_stock"
        );
        assert_eq!(
            one("brave_search.call(query=\"weather\")").0,
            "brave_search"
        );
        let (_, args) = one("f(xs=[1, 2, (3, 4),], d={'k': 'v'}, s='it\\'s')");
        assert_eq!(
            args,
            serde_json::json!({"xs": [1, 2, [3, 4]], "d": {"k": "v"}, "s": "it's"})
        );
    }

    #[test]
    fn what_is_not_a_keyword_call_of_literals_is_a_typed_problem() {
        assert_eq!(
            calls("f(1, 2)").err(),
            Some(TextToolProblem::ArgumentsNotObject)
        );
        assert_eq!(calls("f(x=y)").err(), Some(TextToolProblem::NotJson));
        assert_eq!(calls("f(x='open").err(), Some(TextToolProblem::NotJson));
        assert_eq!(calls("[]").err(), Some(TextToolProblem::NoCall));
        let deep = format!("f(x={}{})", "[".repeat(100), "]".repeat(100));
        assert_eq!(calls(&deep).err(), Some(TextToolProblem::NotJson));
    }

    #[test]
    fn a_block_may_hold_one_call_per_line() {
        let calls = calls("f(a=1)\ng(b='x')\n").expect("parses");
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[1].name, "g");
    }
}
