//! A follow-up's typed input as the store keeps it: the handler's own input type, serialized
//! with what the person had seen and said, and read back as that type (rows stored before
//! typed input too).
//!
//! A task made with [`FollowUpTask::typed`] stores an envelope,
//! `{"input": <the handler's input>, "delivered": "...", "said": "..."}` (`delivered` and
//! `said` left out when empty). Anything else in the input column is a row stored before it
//! (by [`FollowUpTask::new`], or by an older release): its whole value is the handler's input,
//! and what the person said is read the way those rows put it (the value itself when it is a
//! string, else its `"prompt"` string), so such a row is still served.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::FollowUpTask;
use crate::reply::Mode;

/// The keys of the envelope, the only ones it may have.
const KEYS: [&str; 3] = ["input", "delivered", "said"];

/// The stored envelope (see the [module docs](self)).
#[derive(Serialize, Deserialize)]
struct Envelope<T> {
    input: T,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    delivered: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    said: Option<String>,
}

/// The stored input's envelope, when it is one.
fn envelope(input: &Value) -> Option<&serde_json::Map<String, Value>> {
    let object = input.as_object()?;
    (object.contains_key("input") && object.keys().all(|key| KEYS.contains(&key.as_str())))
        .then_some(object)
}

impl FollowUpTask {
    /// A task for the handler registered as `handler` whose input is `input`, of the type the
    /// handler declares: a worker re-runs that handler with `input` read back as its type
    /// ([`input_as`](Self::input_as)).
    ///
    /// The input column then holds `{"input": <input>, "delivered": "...", "said": "..."}`
    /// (`delivered` and `said` left out when empty). Any other value there is a row stored
    /// before typed input (by [`new`](Self::new), or an older release): its whole value is the
    /// handler's input, and what the person said is read the way those rows put it (the value
    /// itself when it is a string, else its `"prompt"` string), so such a row is still served.
    ///
    /// ```
    /// use mesh_egress::degrade::Mode;
    /// use mesh_egress::store::FollowUpTask;
    ///
    /// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    /// struct Question { text: String }
    ///
    /// let task = FollowUpTask::typed("answer", &Question { text: "Is it green?".into() }, Mode::Interactive)?
    ///     .with_said("is it green??");
    /// assert_eq!(task.input_as::<Question>()?, Question { text: "Is it green?".into() });
    /// assert_eq!(task.said(), Some("is it green??"));
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// When `input` cannot be serialized (a map with non-string keys, say).
    pub fn typed<I: Serialize>(
        handler: impl Into<String>,
        input: &I,
        mode: Mode,
    ) -> Result<Self, serde_json::Error> {
        let envelope = Envelope {
            input,
            delivered: String::new(),
            said: None,
        };
        Ok(Self::new(handler, serde_json::to_value(envelope)?, mode))
    }

    /// Records the Markdown the person had already seen when the promise was made (a
    /// stream's delivered prefix), so the follow-up delivers only what follows it. No effect
    /// on a task not made with [`typed`](Self::typed).
    pub fn with_delivered(mut self, delivered: &str) -> Self {
        self.set("delivered", delivered);
        self
    }

    /// Records what the person said (the follow-up turn's input, which its gate reads). No
    /// effect on a task not made with [`typed`](Self::typed).
    pub fn with_said(mut self, said: &str) -> Self {
        self.set("said", said);
        self
    }

    fn set(&mut self, key: &str, text: &str) {
        if text.is_empty() || envelope(&self.input).is_none() {
            return;
        }
        if let Some(object) = self.input.as_object_mut() {
            object.insert(key.to_owned(), Value::String(text.to_owned()));
        }
    }

    /// The handler's input, read back as its type `I`: the envelope's input, or the whole
    /// stored value of a row stored before typed input (see [`typed`](Self::typed)), so a
    /// type with the fields those rows had (`{"prompt": ..}`, say) reads them too.
    ///
    /// # Errors
    ///
    /// When the stored input does not fit `I` (the handler's input type changed since).
    pub fn input_as<I: DeserializeOwned>(&self) -> Result<I, serde_json::Error> {
        match envelope(&self.input).and_then(|object| object.get("input")) {
            Some(input) => I::deserialize(input),
            None => I::deserialize(&self.input),
        }
    }

    /// The Markdown the person had already seen when the promise was made (empty when the
    /// promise came before any of the answer, and for rows stored before typed input).
    pub fn delivered(&self) -> &str {
        envelope(&self.input)
            .and_then(|object| object.get("delivered"))
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The input a route re-run for this task reads: the envelope's input, or for a row stored
    /// before typed input its whole value, with the row's own `system_prompt` and `gate`
    /// columns (where those rows kept them) as keys of that name when the value is an object
    /// that has none, so a route's input type reads them as any other field.
    pub(crate) fn route_input(&self) -> Value {
        if let Some(input) = envelope(&self.input).and_then(|object| object.get("input")) {
            return input.clone();
        }
        let mut input = self.input.clone();
        if let Value::Object(object) = &mut input {
            if let Some(prompt) = &self.system_prompt {
                object
                    .entry("system_prompt")
                    .or_insert_with(|| Value::String(prompt.clone()));
            }
            if let Some(gate) = &self.gate {
                object.entry("gate").or_insert_with(|| gate.clone());
            }
        }
        input
    }

    /// What the person said in the turn that made the promise, if it was recorded. In a row
    /// stored before typed input: the input itself when it is a string, else its `"prompt"`
    /// string (how those rows carried it).
    pub fn said(&self) -> Option<&str> {
        match envelope(&self.input) {
            Some(object) => object.get("said").and_then(Value::as_str),
            None => match &self.input {
                Value::String(text) => Some(text),
                other => other.get("prompt").and_then(Value::as_str),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Asked {
        prompt: String,
        #[serde(default)]
        system_prompt: Option<String>,
    }

    #[test]
    fn a_typed_input_round_trips_with_what_was_seen_and_said() {
        let asked = Asked {
            prompt: "Is the deploy done?".into(),
            system_prompt: Some("Be brief.".into()),
        };
        let task = FollowUpTask::typed("ask", &asked, Mode::Proactive)
            .unwrap()
            .with_delivered("The build passed.")
            .with_said("is the deploy done");
        assert_eq!(task.input_as::<Asked>().unwrap(), asked);
        assert_eq!(task.delivered(), "The build passed.");
        assert_eq!(task.said(), Some("is the deploy done"));
        assert_eq!(
            task.input,
            json!({
                "input": {"prompt": "Is the deploy done?", "system_prompt": "Be brief."},
                "delivered": "The build passed.",
                "said": "is the deploy done",
            })
        );
    }

    #[test]
    fn a_row_stored_with_a_prompt_key_reads_as_the_typed_input() {
        let old = FollowUpTask::new(
            "turn-example.answer",
            json!({"prompt": "Is the deploy done?", "delivered": "kept by the old handler"}),
            Mode::Interactive,
        );
        let asked: Asked = old.input_as().unwrap();
        assert_eq!(asked.prompt, "Is the deploy done?");
        assert_eq!(old.said(), Some("Is the deploy done?"));
        // The old rows' "delivered" was their handler's own business, not the store's.
        assert_eq!(old.delivered(), "");
    }

    #[test]
    fn an_old_rows_system_prompt_and_gate_columns_are_part_of_its_route_input() {
        let old = FollowUpTask::new(
            "turn-example.answer",
            json!({"prompt": "Is the deploy done?"}),
            Mode::Interactive,
        )
        .with_system_prompt("Be brief.")
        .with_gate(json!({"judge_model": "judge"}));
        assert_eq!(
            old.route_input(),
            json!({"prompt": "Is the deploy done?", "system_prompt": "Be brief.", "gate": {"judge_model": "judge"}})
        );
        // A key the row's input has already wins; a typed row's input is its own.
        let kept = FollowUpTask::new("a", json!({"system_prompt": "mine"}), Mode::Interactive)
            .with_system_prompt("column");
        assert_eq!(kept.route_input(), json!({"system_prompt": "mine"}));
        let typed = FollowUpTask::typed("a", &json!({"prompt": "p"}), Mode::Interactive)
            .unwrap()
            .with_system_prompt("column");
        assert_eq!(typed.route_input(), json!({"prompt": "p"}));
    }

    #[test]
    fn a_string_row_is_what_the_person_said() {
        let old = FollowUpTask::new("echo", json!("hello"), Mode::Interactive);
        assert_eq!(old.input_as::<String>().unwrap(), "hello");
        assert_eq!(old.said(), Some("hello"));
    }

    #[test]
    fn an_input_that_no_longer_fits_its_type_is_an_error() {
        let task = FollowUpTask::typed("ask", &json!({"text": 1}), Mode::Interactive).unwrap();
        assert!(task.input_as::<Asked>().is_err());
    }

    #[test]
    fn the_envelope_marks_are_ignored_on_an_untyped_task() {
        let task = FollowUpTask::new("echo", json!({"prompt": "hi"}), Mode::Interactive)
            .with_said("other")
            .with_delivered("shown");
        assert_eq!(task.input, json!({"prompt": "hi"}));
    }
}
