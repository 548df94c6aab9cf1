//! Reading the calls out of a text tool call's markup, per format. JSON goes to `serde_json`
//! (whose depth limit bounds nesting); the rest is split on the format's own tokens. Nothing
//! recurses on the model's text, and a call count past [`MAX_CALLS`](super::call::MAX_CALLS) is a typed problem.

use serde_json::{Map, Value};

use super::call::{RawCall, TextToolProblem, ident, push_call};
use super::format::TextToolFormat;
use super::python;

/// The calls in `markup` (the text from the marker to the end of the call), read as `format`.
pub(crate) fn parse(format: TextToolFormat, markup: &str) -> Result<Vec<RawCall>, TextToolProblem> {
    use TextToolFormat as F;
    let calls = match format {
        F::Hermes => between(markup, "<tool_call>", "</tool_call>", hermes_body)?,
        F::FunctionTag => between(markup, "<function=", "</function>", function_tag)?,
        F::LlamaPythonTag => python_tag(after(markup, "<|python_tag|>"))?,
        F::Mistral => mistral(markup)?,
        F::DeepSeek => between(
            markup,
            "<｜tool▁call▁begin｜>",
            "<｜tool▁call▁end｜>",
            deepseek,
        )?,
        F::KimiK2 => between(markup, "<|tool_call_begin|>", "<|tool_call_end|>", kimi)?,
        F::Granite => json_calls(after(markup, "<|tool_call|>"))?,
        F::Gemma4 => between(markup, "<|tool_call>", "<tool_call|>", gemma4)?,
        F::Lfm2 => between(
            markup,
            "<|tool_call_start|>",
            "<|tool_call_end|>",
            python::calls,
        )?,
        F::Functools => json_calls(after(markup, "functools"))?,
        F::Functionary => functionary(markup)?,
        F::ToolCode => tool_code(markup)?,
        F::Harmony => vec![harmony(markup)?],
        F::PythonicList => python::calls(markup)?,
        F::BareJson => json_calls(markup)?,
    };
    if calls.is_empty() {
        return Err(TextToolProblem::NoCall);
    }
    Ok(calls)
}

/// `markup` after its first `marker`.
fn after<'a>(markup: &'a str, marker: &str) -> &'a str {
    markup
        .find(marker)
        .map_or(markup, |i| &markup[i + marker.len()..])
}

/// Each body between `open` and `close` (the last may run to the end), read by `body`.
fn between(
    markup: &str,
    open: &str,
    close: &str,
    body: impl Fn(&str) -> Result<Vec<RawCall>, TextToolProblem>,
) -> Result<Vec<RawCall>, TextToolProblem> {
    let mut calls = Vec::new();
    for piece in markup.split(open).skip(1) {
        let inner = piece.split(close).next().unwrap_or(piece);
        for call in body(inner.trim())? {
            push_call(&mut calls, call)?;
        }
    }
    Ok(calls)
}

/// Hermes' JSON body, Qwen3-Coder's `<function=…>` XML body or GLM-4.5's `<arg_key>` body.
fn hermes_body(body: &str) -> Result<Vec<RawCall>, TextToolProblem> {
    if body.starts_with('{') {
        return json_calls(body);
    }
    if let Some(xml) = body.strip_prefix("<function=") {
        return qwen_xml(xml).map(|call| vec![call]);
    }
    glm(body).map(|call| vec![call])
}

/// Qwen3-Coder: `name>` then `<parameter=key>value</parameter>` pairs, `</function>`.
fn qwen_xml(xml: &str) -> Result<RawCall, TextToolProblem> {
    let n = ident(xml);
    if n == 0 || xml.as_bytes().get(n) != Some(&b'>') {
        return Err(TextToolProblem::NoName);
    }
    let mut arguments = Map::new();
    let body = &xml[n + 1..];
    let body = body.split("</function>").next().unwrap_or(body);
    for param in body.split("<parameter=").skip(1) {
        let k = ident(param);
        if k == 0 || param.as_bytes().get(k) != Some(&b'>') {
            return Err(TextToolProblem::ArgumentsNotObject);
        }
        let value = &param[k + 1..];
        let value = value.split("</parameter>").next().unwrap_or(value);
        arguments.insert(param[..k].to_owned(), text_value(value.trim()));
    }
    Ok(RawCall {
        name: xml[..n].to_owned(),
        arguments: Value::Object(arguments),
        id: None,
    })
}

/// GLM-4.5: the name, then `<arg_key>k</arg_key><arg_value>v</arg_value>` pairs.
fn glm(body: &str) -> Result<RawCall, TextToolProblem> {
    let n = ident(body);
    if n == 0 {
        return Err(TextToolProblem::NoName);
    }
    let mut arguments = Map::new();
    for pair in body[n..].split("<arg_key>").skip(1) {
        let (key, rest) = pair
            .split_once("</arg_key>")
            .ok_or(TextToolProblem::ArgumentsNotObject)?;
        let value = rest
            .split_once("<arg_value>")
            .map(|(_, v)| v.split("</arg_value>").next().unwrap_or(v))
            .ok_or(TextToolProblem::ArgumentsNotObject)?;
        arguments.insert(key.trim().to_owned(), text_value(value.trim()));
    }
    Ok(RawCall {
        name: body[..n].to_owned(),
        arguments: Value::Object(arguments),
        id: None,
    })
}

/// An XML-carried value: JSON when it reads as JSON (`3`, `true`, `{…}`), else the text.
fn text_value(value: &str) -> Value {
    serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()))
}

/// `<function=name>{…}`, or Qwen3-Coder's `<function=name><parameter=…>` outside `<tool_call>`.
fn function_tag(body: &str) -> Result<Vec<RawCall>, TextToolProblem> {
    let n = ident(body);
    if body
        .get(n + 1..)
        .is_some_and(|r| r.trim_start().starts_with("<parameter="))
    {
        return qwen_xml(body).map(|call| vec![call]);
    }
    let args = body
        .get(n..)
        .and_then(|r| r.strip_prefix('>'))
        .filter(|_| n > 0)
        .ok_or(TextToolProblem::NoName)?;
    Ok(vec![RawCall {
        name: body[..n].to_owned(),
        arguments: arguments_of(Some(json(args.trim())?))?,
        id: None,
    }])
}

/// After `<|python_tag|>`: JSON call objects (`;`-separated), a Python call list, or a built-in
/// tool's `name.call(query="…")`.
fn python_tag(body: &str) -> Result<Vec<RawCall>, TextToolProblem> {
    let body = body.trim();
    if body.starts_with('{') {
        let mut calls = Vec::new();
        let mut rest = body;
        loop {
            rest = rest.trim_start().trim_start_matches(';').trim_start();
            if rest.is_empty() {
                return Ok(calls);
            }
            let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
            let value = values
                .next()
                .ok_or(TextToolProblem::NotJson)?
                .map_err(|_| TextToolProblem::NotJson)?;
            let used = values.byte_offset();
            push_call(&mut calls, call_from_json(&value, true)?)?;
            rest = &rest[used..];
        }
    }
    python::calls(body)
}

/// `[TOOL_CALLS] [{…}]` (v3) or `[TOOL_CALLS]name[ARGS]{…}` (v11+), repeated.
fn mistral(markup: &str) -> Result<Vec<RawCall>, TextToolProblem> {
    let mut calls = Vec::new();
    for piece in markup.split("[TOOL_CALLS]").skip(1) {
        let piece = piece.trim();
        if piece.starts_with('[') || piece.starts_with('{') {
            for call in json_calls(piece)? {
                push_call(&mut calls, call)?;
            }
            continue;
        }
        let (head, args) = piece.split_once("[ARGS]").ok_or(TextToolProblem::NoName)?;
        let name = head.split("[CALL_ID]").next().unwrap_or(head).trim();
        if name.is_empty() || ident(name) != name.len() {
            return Err(TextToolProblem::NoName);
        }
        push_call(
            &mut calls,
            RawCall {
                name: name.to_owned(),
                arguments: arguments_of(Some(json(args.trim())?))?,
                id: None,
            },
        )?;
    }
    Ok(calls)
}

/// One DeepSeek call: `function<｜tool▁sep｜>name\n```json\n{…}\n```` (V3, R1) or
/// `name<｜tool▁sep｜>{…}` (V3.1).
fn deepseek(body: &str) -> Result<Vec<RawCall>, TextToolProblem> {
    let (before, after) = body
        .split_once("<｜tool▁sep｜>")
        .ok_or(TextToolProblem::NoName)?;
    let (name, args) = match after.split_once("```json") {
        Some((name, fenced)) => (name.trim(), fenced.trim().trim_end_matches('`').trim_end()),
        None => (before.trim(), after.trim()),
    };
    if name.is_empty() || ident(name) != name.len() {
        return Err(TextToolProblem::NoName);
    }
    Ok(vec![RawCall {
        name: name.to_owned(),
        arguments: arguments_of(Some(json(args)?))?,
        id: None,
    }])
}

/// One Kimi K2 call: `functions.name:0<|tool_call_argument_begin|>{…}`.
fn kimi(body: &str) -> Result<Vec<RawCall>, TextToolProblem> {
    let (id, args) = body
        .split_once("<|tool_call_argument_begin|>")
        .ok_or(TextToolProblem::NoName)?;
    let id = id.trim();
    let name = id.strip_prefix("functions.").unwrap_or(id);
    let name = name.rsplit_once(':').map_or(name, |(n, _)| n);
    if name.is_empty() || ident(name) != name.len() {
        return Err(TextToolProblem::NoName);
    }
    Ok(vec![RawCall {
        name: name.to_owned(),
        arguments: arguments_of(Some(json(args.trim())?))?,
        id: Some(id.to_owned()),
    }])
}

/// One Gemma 4 call: `call:name{key:<|"|>text<|"|>,n:3}`. Its bare keys and `<|"|>` strings
/// are rewritten into JSON.
fn gemma4(body: &str) -> Result<Vec<RawCall>, TextToolProblem> {
    let body = body.strip_prefix("call:").ok_or(TextToolProblem::NoName)?;
    let n = ident(body);
    if n == 0 {
        return Err(TextToolProblem::NoName);
    }
    const QUOTE: &str = "<|\"|>";
    let mut out = String::new();
    let mut rest = &body[n..];
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix(QUOTE) {
            let (text, tail) = after.split_once(QUOTE).ok_or(TextToolProblem::NotJson)?;
            out.push_str(&serde_json::to_string(text).map_err(|_| TextToolProblem::NotJson)?);
            rest = tail;
        } else if let k @ 1.. = ident(rest)
            && rest[k..].trim_start().starts_with(':')
        {
            out.push_str(&serde_json::to_string(&rest[..k]).map_err(|_| TextToolProblem::NotJson)?);
            rest = &rest[k..];
        } else {
            let c = rest.chars().next().unwrap_or_default();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    Ok(vec![RawCall {
        name: body[..n].to_owned(),
        arguments: arguments_of(Some(json(out.trim())?))?,
        id: None,
    }])
}

/// Functionary v3.2: `>>>name\n{…}` segments; `>>>all` carries text, not a call.
fn functionary(markup: &str) -> Result<Vec<RawCall>, TextToolProblem> {
    let mut calls = Vec::new();
    for segment in markup.split(">>>").skip(1) {
        let (name, args) = segment.split_once('\n').ok_or(TextToolProblem::NoName)?;
        let name = name.trim();
        if name == "all" {
            continue;
        }
        if name.is_empty() || ident(name) != name.len() {
            return Err(TextToolProblem::NoName);
        }
        push_call(
            &mut calls,
            RawCall {
                name: name.to_owned(),
                arguments: arguments_of(Some(json(args.trim())?))?,
                id: None,
            },
        )?;
    }
    Ok(calls)
}

/// A `` ```tool_code `` block: Python calls, one per line.
fn tool_code(markup: &str) -> Result<Vec<RawCall>, TextToolProblem> {
    let body = markup.split_once('\n').map_or("", |(_, b)| b);
    let body = body.trim_end().trim_end_matches('`');
    python::calls(body)
}

/// gpt-oss: `to=functions.name …<|message|>{…}<|call|>`.
fn harmony(markup: &str) -> Result<RawCall, TextToolProblem> {
    let rest = after(markup, "to=functions.");
    let n = ident(rest);
    if n == 0 {
        return Err(TextToolProblem::NoName);
    }
    let args = match rest.split_once("<|message|>") {
        Some((_, body)) => body,
        None => rest.find('{').map_or("", |i| &rest[i..]),
    };
    let args = args.split("<|call|>").next().unwrap_or(args);
    Ok(RawCall {
        name: rest[..n].to_owned(),
        arguments: arguments_of(Some(json(args.trim())?))?,
        id: None,
    })
}

fn json(text: &str) -> Result<Value, TextToolProblem> {
    serde_json::from_str(text).map_err(|_| TextToolProblem::NotJson)
}

/// One call object or a list of them.
fn json_calls(text: &str) -> Result<Vec<RawCall>, TextToolProblem> {
    match json(text.trim())? {
        Value::Array(items) => {
            let mut calls = Vec::new();
            for item in &items {
                push_call(&mut calls, call_from_json(item, true)?)?;
            }
            Ok(calls)
        }
        value => Ok(vec![call_from_json(&value, true)?]),
    }
}

/// A call object: `{"name", "arguments"|"parameters"}` (with `"type": "function"` and `"id"`
/// allowed), or the OpenAI `{"type": "function", "function": {…}}` shape. Missing arguments
/// read as none when `lenient` (inside a format's markup, a call without arguments is a call).
fn call_from_json(value: &Value, lenient: bool) -> Result<RawCall, TextToolProblem> {
    let object = value.as_object().ok_or(TextToolProblem::NoName)?;
    let id = object.get("id").and_then(Value::as_str).map(str::to_owned);
    if let Some(function) = object.get("function").and_then(Value::as_object) {
        let mut inner = call_from_json(&Value::Object(function.clone()), lenient)?;
        inner.id = id;
        return Ok(inner);
    }
    let name = object
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty() && ident(n) == n.len() && n.len() <= 64)
        .ok_or(TextToolProblem::NoName)?;
    let args = object.get("arguments").or_else(|| object.get("parameters"));
    if args.is_none() && !lenient {
        return Err(TextToolProblem::ArgumentsNotObject);
    }
    Ok(RawCall {
        name: name.to_owned(),
        arguments: arguments_of(args.cloned())?,
        id,
    })
}

/// The arguments as one object: an object, a JSON text of one (some models encode them twice),
/// or nothing at all (`{}`).
fn arguments_of(args: Option<Value>) -> Result<Value, TextToolProblem> {
    match args {
        None | Some(Value::Null) => Ok(Value::Object(Map::new())),
        Some(Value::Object(map)) => Ok(Value::Object(map)),
        Some(Value::String(text)) => match serde_json::from_str(&text) {
            Ok(Value::Object(map)) => Ok(Value::Object(map)),
            _ => Err(TextToolProblem::ArgumentsNotObject),
        },
        Some(_) => Err(TextToolProblem::ArgumentsNotObject),
    }
}

/// Whether a whole reply's JSON value is a function call (or a non-empty list of them): only
/// the keys a call object has, a name that is an identifier, and arguments present.
pub(crate) fn is_bare_call(value: &Value) -> bool {
    const KEYS: [&str; 5] = ["name", "arguments", "parameters", "type", "id"];
    let one = |v: &Value| -> bool {
        let Some(object) = v.as_object() else {
            return false;
        };
        if object.get("type").is_some_and(|t| t != "function") {
            return false;
        }
        if let Some(function) = object.get("function") {
            return object
                .keys()
                .all(|k| matches!(k.as_str(), "type" | "id" | "function"))
                && call_from_json(function, false).is_ok();
        }
        object.keys().all(|k| KEYS.contains(&k.as_str())) && call_from_json(v, false).is_ok()
    };
    match value {
        Value::Array(items) => !items.is_empty() && items.iter().all(one),
        other => one(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TextToolFormat as F;

    fn names_and_args(format: TextToolFormat, markup: &str) -> Vec<(String, Value)> {
        parse(format, markup)
            .unwrap_or_else(|e| panic!("{markup}: {e}"))
            .into_iter()
            .map(|c| (c.name, c.arguments))
            .collect()
    }

    #[test]
    fn every_format_reads_to_the_same_call() {
        let want = vec![(
            "get_weather".to_owned(),
            serde_json::json!({"city": "Paris"}),
        )];
        for (format, markup) in [
            (
                F::Hermes,
                "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
            ),
            (
                F::Hermes,
                "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
            ),
            (
                F::Hermes,
                "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>",
            ),
            (
                F::FunctionTag,
                "<function=get_weather>{\"city\": \"Paris\"}</function>",
            ),
            (
                F::LlamaPythonTag,
                "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
            ),
            (
                F::Mistral,
                "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]",
            ),
            (
                F::Mistral,
                "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}",
            ),
            (
                F::DeepSeek,
                "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
            ),
            (
                F::DeepSeek,
                "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
            ),
            (
                F::KimiK2,
                "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_calls_section_end|>",
            ),
            (
                F::Granite,
                "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]",
            ),
            (
                F::Gemma4,
                "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>",
            ),
            (
                F::Lfm2,
                "<|tool_call_start|>[get_weather(city=\"Paris\")]<|tool_call_end|>",
            ),
            (
                F::Functools,
                "functools[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]",
            ),
            (F::Functionary, ">>>get_weather\n{\"city\": \"Paris\"}"),
            (F::ToolCode, "```tool_code\nget_weather(city='Paris')\n```"),
            (
                F::Harmony,
                "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
            ),
            (F::PythonicList, "[get_weather(city='Paris')]"),
            (
                F::BareJson,
                "{\"type\": \"function\", \"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
            ),
            (
                F::BareJson,
                "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}}",
            ),
        ] {
            assert_eq!(names_and_args(format, markup), want, "{format}: {markup}");
        }
    }

    #[test]
    fn broken_markup_is_a_typed_problem() {
        assert_eq!(
            parse(
                F::Hermes,
                "<tool_call>{\"name\": \"f\", \"arguments\": {oops}}</tool_call>"
            ),
            Err(TextToolProblem::NotJson)
        );
        assert_eq!(
            parse(F::Mistral, "[TOOL_CALLS]f[ARGS][1, 2]"),
            Err(TextToolProblem::ArgumentsNotObject)
        );
        assert_eq!(
            parse(
                F::LlamaPythonTag,
                "<|python_tag|>import os\nprint(os.getcwd())"
            ),
            Err(TextToolProblem::NoName)
        );
        let many = format!("functools[{}]", vec!["{\"name\": \"f\"}"; 200].join(","));
        assert_eq!(
            parse(F::Functools, &many),
            Err(TextToolProblem::TooManyCalls)
        );
    }

    #[test]
    fn only_a_call_shaped_object_is_a_bare_call() {
        for (text, expected) in [
            (r#"{"name": "f", "parameters": {}}"#, true),
            (r#"[{"name": "f", "arguments": {"a": 1}}]"#, true),
            (r#"{"name": "f"}"#, false),
            (r#"{"name": "f", "parameters": {}, "email": "x"}"#, false),
            (r#"{"name": "Alice Smith", "parameters": {}}"#, false),
            (r#"{"type": "error", "name": "f", "parameters": {}}"#, false),
            (r#"[]"#, false),
        ] {
            let value: Value = serde_json::from_str(text).expect("json");
            assert_eq!(is_bare_call(&value), expected, "{text}");
        }
    }
}
