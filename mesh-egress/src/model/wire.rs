//! The request and completion types, with serde for the OpenAI chat-completions wire format
//! (which OpenRouter and most gateways speak).

use serde::{Deserialize, Serialize};

/// Who wrote a chat message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The person (or the caller speaking for them).
    User,
    /// The model.
    Assistant,
    /// The result of a tool call.
    Tool,
}

/// One message of a chat request.
///
/// ```
/// use mesh_egress::model::{ChatMessage, Role};
/// let msg = ChatMessage::user("Is the build green?");
/// assert_eq!(msg.role, Role::User);
/// assert_eq!(msg.content.as_deref(), Some("Is the build green?"));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who wrote it.
    pub role: Role,
    /// Its text (absent on an assistant message that only calls tools).
    #[serde(default)]
    pub content: Option<String>,
    /// The tool calls an assistant message made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// On a tool message: which call this is the result of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    fn text(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::text(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::text(Role::User, content)
    }

    /// An assistant message with text only.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::text(Role::Assistant, content)
    }

    /// The result of the tool call `tool_call_id`.
    pub fn tool_result(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            tool_call_id: Some(tool_call_id.into()),
            ..Self::text(Role::Tool, content)
        }
    }
}

/// A tool the model may call (`{"type": "function", "function": {...}}` on the wire).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// Always `function` today.
    #[serde(rename = "type")]
    pub kind: String,
    /// The function's name, description and parameter schema.
    pub function: FunctionDefinition,
}

impl ToolDefinition {
    /// A function tool whose arguments follow the JSON Schema `parameters`.
    pub fn function(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: serde_json::Value,
    ) -> Self {
        Self {
            kind: "function".to_owned(),
            function: FunctionDefinition {
                name: name.into(),
                description: Some(description.into()),
                parameters,
            },
        }
    }
}

/// A function the model may call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionDefinition {
    /// The function's name.
    pub name: String,
    /// What it does, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of its arguments.
    pub parameters: serde_json::Value,
}

/// A tool call the model decided on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id (echoed back in the tool result message).
    pub id: String,
    /// Always `function` today.
    #[serde(rename = "type", default = "function_kind")]
    pub kind: String,
    /// Which function, with which arguments.
    pub function: FunctionCall,
}

fn function_kind() -> String {
    "function".to_owned()
}

impl ToolCall {
    /// A function call with `arguments` as the model wrote them (a JSON text).
    pub fn function(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            kind: function_kind(),
            function: FunctionCall {
                name: name.into(),
                arguments: arguments.into(),
            },
        }
    }

    /// The arguments parsed as JSON, or the parse error.
    ///
    /// # Errors
    ///
    /// The `serde_json::Error` when the arguments are not valid JSON.
    pub fn parsed_arguments(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_str(&self.function.arguments)
    }
}

/// The function and arguments of a [`ToolCall`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// The function's name.
    pub name: String,
    /// The arguments as a JSON text (the wire format carries them as a string).
    pub arguments: String,
}

/// What to ask a model: the conversation so far, the tools it may call and sampling options.
///
/// The model is not part of the request: the [`Router`](super::Router) names it per route, so
/// one request can be sent to the primary and to each fallback.
///
/// ```
/// use mesh_egress::model::{ChatMessage, ChatRequest};
/// let request = ChatRequest::new(vec![
///     ChatMessage::system("You are terse."),
///     ChatMessage::user("Status?"),
/// ])
/// .with_max_tokens(200);
/// assert_eq!(request.messages.len(), 2);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The conversation, oldest first.
    pub messages: Vec<ChatMessage>,
    /// Tools the model may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolDefinition>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// The most tokens the completion may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
}

/// A request that is one user message, nothing else: `router.answer_stream(&turn, "Is it green?")`.
impl From<&str> for ChatRequest {
    fn from(question: &str) -> Self {
        Self::new(vec![ChatMessage::user(question.to_owned())])
    }
}

/// A request that is one user message, nothing else.
impl From<String> for ChatRequest {
    fn from(question: String) -> Self {
        Self::new(vec![ChatMessage::user(question)])
    }
}

impl ChatRequest {
    /// A request with `messages` and nothing else.
    pub fn new(messages: Vec<ChatMessage>) -> Self {
        Self {
            messages,
            ..Self::default()
        }
    }

    /// Offers `tools` to the model.
    pub fn with_tools(mut self, tools: Vec<ToolDefinition>) -> Self {
        self.tools = tools;
        self
    }

    /// Sets the sampling temperature.
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Caps the completion's length.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }
}

/// What a model answered: text, tool calls, or both.
///
/// ```
/// use mesh_egress::model::Completion;
/// let done = Completion::text("gpt-test", "All green.");
/// assert!(!done.is_empty());
/// assert!(Completion::text("gpt-test", "  ").is_empty());
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// The model that answered, as the provider reported it.
    pub model: String,
    /// The text of the answer, if any.
    pub content: Option<String>,
    /// The tool calls the model decided on.
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// Why generation stopped (`stop`, `length`, `tool_calls`, ...), if reported.
    #[serde(default)]
    pub finish_reason: Option<String>,
}

impl Completion {
    /// A text-only completion from `model`.
    pub fn text(model: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            content: Some(content.into()),
            tool_calls: Vec::new(),
            finish_reason: Some("stop".to_owned()),
        }
    }

    /// A completion from `model` that only calls tools.
    pub fn tool_calls(model: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        Self {
            model: model.into(),
            content: None,
            tool_calls,
            finish_reason: Some("tool_calls".to_owned()),
        }
    }

    /// Whether the completion holds nothing usable: no text (or only whitespace) and no tool
    /// call. Such a completion is a retryable failure.
    pub fn is_empty(&self) -> bool {
        self.tool_calls.is_empty() && !self.has_text()
    }

    /// Whether the completion has text that is not only whitespace.
    pub(crate) fn has_text(&self) -> bool {
        self.content
            .as_deref()
            .is_some_and(|c| !c.chars().all(char::is_whitespace))
    }
}

/// The one place an unusable completion becomes a failure: a finish reason that reports one (a
/// refusal or filter, a cut by the output limit: [`finish`](super::finish)), else no text and no
/// tool call, a retryable `empty_completion` (used by the Router and the HTTP connector alike).
pub(crate) fn usable(
    result: Result<Completion, super::ModelError>,
) -> Result<Completion, super::ModelError> {
    match result {
        Ok(completion) => {
            let empty = completion.is_empty();
            if let Some(error) = super::finish::failure(completion.finish_reason.as_deref(), empty)
            {
                return Err(error);
            }
            if empty {
                return Err(super::ModelError::empty_completion());
            }
            Ok(completion)
        }
        other => other,
    }
}

#[cfg(any(feature = "http", test))]
/// The body of a chat-completions request on the wire: the request plus the model asked.
#[derive(Serialize)]
pub(crate) struct WireRequest<'a> {
    pub(crate) model: &'a str,
    #[serde(flatten)]
    pub(crate) request: &'a ChatRequest,
}

#[cfg(any(feature = "http", test))]
/// The body of a chat-completions response on the wire (the fields we read). Only the first
/// of `choices` is built: the rest are skipped as they are parsed, so a provider (or a
/// hostile proxy) sending thousands of choices costs parsing time, not memory.
#[derive(Deserialize)]
pub(crate) struct WireResponse {
    #[serde(default)]
    pub(crate) model: Option<String>,
    #[serde(default, rename = "choices", deserialize_with = "first_choice")]
    pub(crate) choice: Option<WireChoice>,
}

#[cfg(any(feature = "http", test))]
fn first_choice<'de, D>(deserializer: D) -> Result<Option<WireChoice>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct First;
    impl<'de> serde::de::Visitor<'de> for First {
        type Value = Option<WireChoice>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list of choices")
        }

        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let first = seq.next_element::<WireChoice>()?;
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Ok(first)
        }
    }
    deserializer.deserialize_any(First)
}

#[cfg(any(feature = "http", test))]
#[derive(Deserialize)]
pub(crate) struct WireChoice {
    pub(crate) message: WireMessage,
    #[serde(default)]
    pub(crate) finish_reason: Option<String>,
}

#[cfg(any(feature = "http", test))]
#[derive(Deserialize)]
pub(crate) struct WireMessage {
    #[serde(default)]
    pub(crate) content: Option<String>,
    #[serde(default)]
    pub(crate) tool_calls: Option<Vec<ToolCall>>,
}

#[cfg(any(feature = "http", test))]
impl WireResponse {
    /// The first choice as a [`Completion`]; `fallback_model` names it when the provider did not.
    pub(crate) fn into_completion(self, fallback_model: &str) -> Completion {
        let model = self.model.unwrap_or_else(|| fallback_model.to_owned());
        match self.choice {
            Some(choice) => Completion {
                model,
                content: choice.message.content,
                tool_calls: choice.message.tool_calls.unwrap_or_default(),
                finish_reason: choice.finish_reason,
            },
            None => Completion {
                model,
                content: None,
                tool_calls: Vec::new(),
                finish_reason: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn a_completion_is_empty_exactly_when_its_trimmed_text_is(text in "[ \t\n\u{a0}\u{3000}a.]{0,8}") {
            let completion = Completion::text("m", text.clone());
            proptest::prop_assert_eq!(completion.is_empty(), text.trim().is_empty());
        }
    }

    #[test]
    fn a_request_serialises_in_the_chat_completions_shape() {
        let request = ChatRequest::new(vec![ChatMessage::user("hi")]).with_tools(vec![
            ToolDefinition::function(
                "lookup",
                "find a ticket",
                serde_json::json!({"type": "object"}),
            ),
        ]);
        let wire = serde_json::to_value(WireRequest {
            model: "m",
            request: &request,
        })
        .expect("serialises");
        assert_eq!(
            wire,
            serde_json::json!({
                "model": "m",
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"type": "function", "function": {
                    "name": "lookup", "description": "find a ticket", "parameters": {"type": "object"}
                }}]
            })
        );
    }

    #[test]
    fn a_response_with_tool_calls_decodes_into_a_completion() {
        let body = r#"{"id":"x","model":"m-2024","choices":[{"index":0,"finish_reason":"tool_calls",
            "message":{"role":"assistant","content":null,"tool_calls":[
              {"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"id\":7}"}}]}}]}"#;
        let completion = serde_json::from_str::<WireResponse>(body)
            .expect("decodes")
            .into_completion("m");
        assert_eq!(completion.model, "m-2024");
        assert_eq!(completion.tool_calls[0].function.name, "lookup");
        assert_eq!(
            completion.tool_calls[0].parsed_arguments().expect("json"),
            serde_json::json!({"id": 7})
        );
        assert!(!completion.is_empty());
    }

    #[test]
    fn only_the_first_choice_is_built_and_null_choices_read_as_none() {
        let extra = format!(
            r#"{{"choices":[{{"message":{{"content":"first"}}}},{}]}}"#,
            vec![r#"{"message":{"content":"more"}}"#; 1000].join(",")
        );
        let completion = serde_json::from_str::<WireResponse>(&extra)
            .expect("decodes")
            .into_completion("m");
        assert_eq!(completion.content.as_deref(), Some("first"));
        let none = serde_json::from_str::<WireResponse>(r#"{"choices":null}"#).expect("decodes");
        assert!(none.into_completion("m").is_empty());
    }

    #[test]
    fn a_response_without_choices_is_an_empty_completion() {
        let completion = serde_json::from_str::<WireResponse>(r#"{"choices":[]}"#)
            .expect("decodes")
            .into_completion("m");
        assert!(completion.is_empty());
        assert_eq!(completion.model, "m");
    }
}
