//! [`TextToolFormat`]: the name of each text protocol Layer A recognises, the one value the
//! marker check (`markers.rs`), the readers (`parse.rs`, `python.rs`) and the head check
//! (`head.rs`) all speak, so none of them imports another for it.

/// A text protocol in which a model family writes its tool decision into the message text,
/// as it does when it is served without that family's tool parser (the raw output reaches
/// `content` instead of `tool_calls`). Layer A recognises these (see
/// [`text_tool_format`](crate::model::text_tool_format)).
///
/// The formats, each from its family's own documentation or chat template, or the reference
/// parser of the servers that deploy it:
///
/// | format | shape | source |
/// |---|---|---|
/// | [`Hermes`](Self::Hermes) | `<tool_call>{"name": …, "arguments": …}</tool_call>` | NousResearch/Hermes-Function-Calling `README.md`; the Hermes 2 Pro model card; Qwen 2.5 uses it (QwenLM/Qwen3 discussion #1098: "use hermes as --tool-call-parser"); vLLM `tool_parsers/hermes_tool_parser.py` |
/// | Qwen3-Coder body | `<tool_call><function=f><parameter=k>v</parameter></function></tool_call>` | vLLM `tool_parsers/qwen3coder_tool_parser.py` |
/// | GLM-4.5 body | `<tool_call>f<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>` | the GLM-4.5 tool prompt (LLaMA-Factory `data/tool_utils.py`, `GLM4_MOE_TOOL_PROMPT`); vLLM `tool_parsers/glm4_moe_tool_parser.py` |
/// | [`LlamaPythonTag`](Self::LlamaPythonTag) | `<\|python_tag\|>brave_search.call(query="…")`, or a JSON call | meta-llama/llama-models `models/llama3_1/api/tool_utils.py` and `models/llama3_2/text_prompt_format.md` ("the response starts with `<\|python_tag\|>`") |
/// | [`FunctionTag`](Self::FunctionTag) | `<function=f>{…}</function>` | meta-llama/llama-models `models/llama3_1/api/tool_utils.py` (custom tools); MeetKai/functionary v3.1 (llama.cpp `docs/function-calling.md`) |
/// | [`Mistral`](Self::Mistral) | `[TOOL_CALLS] [{…}]`, `[TOOL_CALLS]f[ARGS]{…}` | mistralai/mistral-common (tokenizer v3 and later); vLLM `tool_parsers/mistral_tool_parser.py` ("Mistral emits tool calls in the `[TOOL_CALLS]name[ARGS]{...}` format") |
/// | [`DeepSeek`](Self::DeepSeek) | `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f` + a ```` ```json ```` block (V3, R1); `…begin｜>f<｜tool▁sep｜>{…}` (V3.1) | the DeepSeek-V3 chat template; vLLM `tool_parsers/deepseekv3_tool_parser.py` and `deepseekv31_tool_parser.py` |
/// | [`KimiK2`](Self::KimiK2) | `<\|tool_calls_section_begin\|><\|tool_call_begin\|>functions.f:0<\|tool_call_argument_begin\|>{…}<\|tool_call_end\|>` | MoonshotAI/Kimi-K2 `docs/tool_call_guidance.md`; vLLM `tool_parsers/kimi_k2_tool_parser.py` |
/// | [`Granite`](Self::Granite) | `<\|tool_call\|>[{"name": …, "arguments": …}]` | vLLM `tool_parsers/granite_tool_parser.py` ("for granite 3.0, the token `<\|tool_call\|>`") |
/// | [`Gemma4`](Self::Gemma4) | `<\|tool_call>call:f{k:<\|"\|>v<\|"\|>}<tool_call\|>` | Google's Gemma 4 function-calling docs (ai.google.dev `gemma/docs/capabilities/text/function-calling-gemma4`); vLLM `tool_parsers/gemma4_tool_parser.py` |
/// | [`Lfm2`](Self::Lfm2) | `<\|tool_call_start\|>[f(k="v")]<\|tool_call_end\|>` | vLLM `tool_parsers/lfm2_tool_parser.py` |
/// | [`Functools`](Self::Functools) | `functools[{…}]` | FireFunction v2 (llama.cpp `docs/function-calling.md`); Phi-4-mini (vLLM `tool_parsers/phi4mini_tool_parser.py`) |
/// | [`Functionary`](Self::Functionary) | the reply opens with `>>>f` then `{…}` on the next line (or with `>>>all` text, then a `>>>f` line) | MeetKai/functionary `functionary/prompt_template/llama3_prompt_template_v3.py` (`function_separator = ">>>"`) |
/// | [`ToolCode`](Self::ToolCode) | a `` ```tool_code `` block holding `f(k=v)` | Google's Gemma docs ("Gemma will generate a code wrapped with ```` ```tool_code ````", ai.google.dev `gemma/docs/meme-generator`) |
/// | [`Harmony`](Self::Harmony) | `<\|channel\|>commentary to=functions.f <\|constrain\|>json<\|message\|>{…}<\|call\|>` | the gpt-oss harmony response format (openai/harmony); vLLM `tool_parsers/openai_tool_parser.py` |
/// | [`PythonicList`](Self::PythonicList) | the whole reply is `[f(k=v), g()]` | meta-llama/llama-models `models/llama3_2/text_prompt_format.md` (zero-shot function calling); Google's Gemma function-calling docs (ai.google.dev `gemma/docs/capabilities/function-calling`) |
/// | [`BareJson`](Self::BareJson) | the whole reply is `{"name": …, "parameters": …}` (or `"arguments"`, `"type": "function"`, the OpenAI `{"function": {…}}` shape, a list of them) | meta-llama/llama-models `models/llama3_1/api/tool_utils.py` (`{"type": "function", "name": …, "parameters": …}`); the Gemma docs' JSON variant; Ollama's Llama 3.2 template |
///
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TextToolFormat {
    /// Hermes 2 Pro / Hermes 3 and Qwen 2.5 / Qwen 3: `<tool_call>{"name": …, "arguments":
    /// …}</tool_call>`; also Qwen3-Coder's `<tool_call><function=…><parameter=…>` body and
    /// GLM-4.5's `<tool_call>name<arg_key>…</arg_key><arg_value>…</arg_value>` body.
    Hermes,
    /// Llama 3.1–3.3: `<|python_tag|>` before a built-in call (`brave_search.call(query=…)`), a
    /// JSON call, or code.
    LlamaPythonTag,
    /// Llama 3.1 custom tools and Functionary v3.1: `<function=name>{…}</function>`.
    FunctionTag,
    /// Mistral: `[TOOL_CALLS] [{"name": …, "arguments": …}]` (tokenizer v3) or
    /// `[TOOL_CALLS]name[ARGS]{…}` (v11 and later).
    Mistral,
    /// DeepSeek V3 / R1 / V3.1: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>…<｜tool▁sep｜>…`.
    DeepSeek,
    /// Kimi K2: `<|tool_calls_section_begin|><|tool_call_begin|>functions.name:0
    /// <|tool_call_argument_begin|>{…}<|tool_call_end|>`.
    KimiK2,
    /// IBM Granite 3.0: `<|tool_call|>[{"name": …, "arguments": …}]`.
    Granite,
    /// Gemma 4: `<|tool_call>call:name{key:<|"|>value<|"|>}<tool_call|>`.
    Gemma4,
    /// LFM2: `<|tool_call_start|>[name(key="value")]<|tool_call_end|>`.
    Lfm2,
    /// FireFunction v2 and Phi-4-mini: `functools[{"name": …, "arguments": …}]`.
    Functools,
    /// Functionary v3.2: the reply opens with `>>>name`, then the JSON arguments on the next
    /// line (or with `>>>all` and text, then such a call).
    Functionary,
    /// Gemma (prompted): a fenced `` ```tool_code `` block holding a Python call.
    ToolCode,
    /// gpt-oss (harmony): `<|channel|>commentary to=functions.name <|constrain|>json
    /// <|message|>{…}<|call|>`.
    Harmony,
    /// Llama 3.2 and Gemma 3 (prompted): the whole reply is a Python call list
    /// `[name(key=value), …]`.
    PythonicList,
    /// The whole reply is a bare function-call JSON object (or a list of them): Llama 3.x's
    /// `{"name": …, "parameters": …}`, `{"type": "function", "name": …}`, the OpenAI
    /// `{"type": "function", "function": {…}}` shape.
    BareJson,
}

impl TextToolFormat {
    /// A stable snake_case label, for logs and the ledger.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hermes => "hermes",
            Self::LlamaPythonTag => "llama_python_tag",
            Self::FunctionTag => "function_tag",
            Self::Mistral => "mistral",
            Self::DeepSeek => "deepseek",
            Self::KimiK2 => "kimi_k2",
            Self::Granite => "granite",
            Self::Gemma4 => "gemma4",
            Self::Lfm2 => "lfm2",
            Self::Functools => "functools",
            Self::Functionary => "functionary",
            Self::ToolCode => "tool_code",
            Self::Harmony => "harmony",
            Self::PythonicList => "pythonic_list",
            Self::BareJson => "bare_json",
        }
    }
}

impl std::fmt::Display for TextToolFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
