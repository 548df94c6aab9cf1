//! The Slack fake's history reads: `conversations.history` and `conversations.replies`
//! answered from the messages the fake posted, in the shape Slack documents
//! (<https://api.slack.com/methods/conversations.history>,
//! <https://api.slack.com/methods/conversations.replies>).

use serde_json::{Value, json};

use super::FakeResponse;
use super::chat_state::{Shared, refuse_auth};

const HISTORY: &str = "/api/conversations.history";
const REPLIES: &str = "/api/conversations.replies";
/// Slack's default page size for both methods.
const DEFAULT_LIMIT: usize = 100;
/// Slack's largest page (it answers fewer when asked for more).
const MAX_LIMIT: usize = 1000;

/// Whether `path` is one of the history reads.
pub(super) fn is_read(path: &str) -> bool {
    path == HISTORY || path == REPLIES
}

/// One history read's answer.
pub(super) fn read(
    shared: &Shared,
    path: &str,
    query: &str,
    authorization: Option<&str>,
) -> FakeResponse {
    let mut state = shared.lock();
    state.lookups += 1;
    if authorization != Some(format!("Bearer {}", shared.token).as_str()) {
        return refuse_auth(shared.surface);
    }
    if let Some(answer) = state.lookup_script.pop_front() {
        return answer;
    }
    if state.history_denied {
        let needed = "channels:history,groups:history,mpim:history,im:history";
        return FakeResponse::slack_missing_scope(needed);
    }
    let params = parse_query(query);
    let param = |name: &str| {
        params
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    };
    let Some(channel) = param("channel") else {
        return error("channel_not_found");
    };
    let thread = if path == REPLIES {
        match param("ts") {
            Some(ts) => Some(ts),
            None => return error("thread_not_found"),
        }
    } else {
        None
    };
    let inclusive = matches!(param("inclusive"), Some("true" | "1"));
    let Ok(oldest) = param("oldest").map(micros).transpose() else {
        return error("invalid_arguments");
    };
    let Ok(latest) = param("latest").map(micros).transpose() else {
        return error("invalid_arguments");
    };
    let limit = match param("limit").map(str::parse::<usize>) {
        None => DEFAULT_LIMIT,
        Some(Ok(0)) => DEFAULT_LIMIT,
        Some(Ok(n)) => n.min(MAX_LIMIT),
        Some(Err(_)) => return error("invalid_limit"),
    };
    let with_metadata = matches!(param("include_all_metadata"), Some("true" | "1"));
    let after = |ts: u128| {
        oldest.is_none_or(|o| ts > o || (inclusive && ts == o))
            && latest.is_none_or(|l| ts < l || (inclusive && ts == l))
    };
    let mut matching: Vec<Value> = state
        .received
        .iter()
        .filter(|m| m.target == channel)
        .filter(|m| {
            let thread_ts = m.body.get("thread_ts").and_then(Value::as_str);
            match thread {
                // Thread replies, and the parent itself when the fake posted it.
                Some(parent) => thread_ts == Some(parent) || m.id == parent,
                // The channel's own timeline: replies stay in their threads.
                None => thread_ts.is_none(),
            }
        })
        .filter(|m| micros(&m.id).is_ok_and(after))
        .map(|m| {
            let mut message = json!({
                "type": "message",
                "user": "U0FAKEBOT",
                "bot_id": "B0FAKEBOT",
                "text": m.text,
                "ts": m.id,
            });
            if let Some(thread_ts) = m.body.get("thread_ts") {
                message["thread_ts"] = thread_ts.clone();
            }
            if with_metadata && let Some(metadata) = m.body.get("metadata") {
                message["metadata"] = metadata.clone();
            }
            message
        })
        .collect();
    // A thread's replies hold its streamed messages too (Slack's native streams), with the
    // text they were grown to.
    if let Some(parent) = thread {
        for (stream, _) in &state.stream.streams {
            if stream.thread_ts.as_deref() == Some(parent) && micros(&stream.ts).is_ok_and(after) {
                matching.push(json!({
                    "type": "message",
                    "user": "U0FAKEBOT",
                    "bot_id": "B0FAKEBOT",
                    "text": stream.text,
                    "ts": stream.ts,
                    "thread_ts": parent,
                }));
            }
        }
        matching.sort_by_key(|m| {
            m.get("ts")
                .and_then(Value::as_str)
                .and_then(|ts| micros(ts).ok())
        });
    }
    // History is newest first; replies are oldest first (the parent leads).
    if thread.is_none() {
        matching.reverse();
    }
    let has_more = matching.len() > limit;
    matching.truncate(limit);
    let body = json!({
        "ok": true,
        "messages": matching,
        "has_more": has_more,
        "response_metadata": { "next_cursor": if has_more { "bmV4dF90czox" } else { "" } },
    });
    FakeResponse::raw(200, body.to_string())
}

fn error(code: &str) -> FakeResponse {
    FakeResponse::raw(200, json!({ "ok": false, "error": code }).to_string())
}

/// A Slack `ts` ("seconds.microseconds") in microseconds.
fn micros(ts: &str) -> Result<u128, ()> {
    let (secs, frac) = ts.split_once('.').unwrap_or((ts, ""));
    let secs: u128 = secs.parse().map_err(drop)?;
    let mut digits: String = frac.chars().take(6).collect();
    if !digits.chars().all(|c| c.is_ascii_digit()) {
        return Err(());
    }
    while digits.len() < 6 {
        digits.push('0');
    }
    let frac: u128 = digits.parse().map_err(drop)?;
    Ok(secs.saturating_mul(1_000_000).saturating_add(frac))
}

/// `a=1&b=x%2Cy` as pairs, percent-decoded (`+` is a space, as in a form).
fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(key), decode(value))
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(byte) => {
                        out.push(byte);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
