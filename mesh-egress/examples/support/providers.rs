//! The model settings the examples read from the environment (DESIGN.md's fourth round): the
//! primary's API, base URL, key and model, the fallback routes in the `api=model` entry syntax,
//! and the answer's token bound.

use mesh_egress::model::{Api, Provider, RetryConfig, Route, Router};

/// The models the environment names: the primary's API (`MESH_MODEL_API`, default `chat`),
/// base URL, key and model (`MESH_MODEL_BASE_URL`, `MESH_MODEL_API_KEY`, `MESH_MODEL`), and the
/// fallback routes (`MESH_MODEL_FALLBACK_MODELS`), each entry `api=model` on that API's
/// `MESH_MODEL_<API>_BASE_URL` and `MESH_MODEL_<API>_API_KEY`, or a model name on the primary's.
#[derive(Clone)]
pub(crate) struct Models {
    /// The primary's connector: the Router's own.
    pub(crate) provider: Provider,
    /// The primary model.
    pub(crate) primary: String,
    fallbacks: Vec<Route>,
}

impl Models {
    /// The Router of a turn: the primary, then the fallbacks, under `MESH_MODEL_RETRY_*`.
    pub(crate) fn router(&self) -> Router<Provider> {
        Router::with_routes(
            self.provider.clone(),
            Route::new(self.primary.as_str()),
            self.fallbacks.iter().cloned(),
            RetryConfig::from_env(),
        )
    }

    /// A Router of one route, `entry` in the fallback entries' syntax (the judges').
    pub(crate) fn single(&self, entry: &str) -> Result<Router<Provider>, String> {
        Ok(Router::with_routes(
            self.provider.clone(),
            route_of(entry)?,
            [],
            RetryConfig::from_env(),
        ))
    }
}

/// The most tokens an answer may use, sent to every API: `MESH_MODEL_MAX_TOKENS`, default 4096.
pub(crate) fn max_tokens() -> Result<u32, String> {
    match std::env::var("MESH_MODEL_MAX_TOKENS") {
        Ok(value) if !value.trim().is_empty() => value
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("MESH_MODEL_MAX_TOKENS {value:?} is not a positive number")),
        _ => Ok(4096),
    }
}

/// The connector for `api` from the environment: the primary's variables, or a named API's
/// `MESH_MODEL_<API>_BASE_URL` and `MESH_MODEL_<API>_API_KEY`, both required.
pub(crate) fn provider_of(api: Api, primary: bool) -> Result<Provider, String> {
    let (base_name, key_name) = if primary {
        (
            "MESH_MODEL_BASE_URL".to_owned(),
            "MESH_MODEL_API_KEY".to_owned(),
        )
    } else {
        let upper = api.name().to_ascii_uppercase();
        (
            format!("MESH_MODEL_{upper}_BASE_URL"),
            format!("MESH_MODEL_{upper}_API_KEY"),
        )
    };
    let base_url = required_env(&base_name)?;
    let key = if primary {
        std::env::var(&key_name).unwrap_or_default()
    } else {
        required_env(&key_name)?
    };
    let provider = Provider::new(api, &base_url)
        .map_err(|_| format!("{base_name} {base_url:?} is not a valid URL"))?;
    Ok(provider.with_api_key(key))
}

/// One fallback (or judge) entry: `api=model` on that API when the text before the first `=`
/// names one, else a model name on the primary's API (`llama3:8b` stays a model name).
pub(crate) fn route_of(entry: &str) -> Result<Route, String> {
    let entry = entry.trim();
    match entry.split_once('=') {
        Some((api, model)) if Api::from_name(api.trim()).is_some() => {
            let api = Api::from_name(api.trim()).unwrap_or(Api::Chat);
            let model = model.trim();
            if model.is_empty() {
                return Err(format!("the model entry {entry:?} names no model"));
            }
            Ok(Route::new(model).via(provider_of(api, false)?))
        }
        _ => Ok(Route::new(entry)),
    }
}

/// The primary's API: `MESH_MODEL_API`, default `chat`.
pub(crate) fn primary_api() -> Result<Api, String> {
    match std::env::var("MESH_MODEL_API") {
        Ok(name) if !name.trim().is_empty() => Api::from_name(name.trim()).ok_or_else(|| {
            format!("unknown MESH_MODEL_API {name:?} (chat|responses|anthropic|gemini)")
        }),
        _ => Ok(Api::Chat),
    }
}

/// The models the environment names ([`Models`]), or the usage error to print.
pub(crate) fn model_from_env() -> Result<Models, String> {
    let provider = provider_of(primary_api()?, true)?;
    let primary = required_env("MESH_MODEL")?;
    max_tokens()?;
    let fallbacks = RetryConfig::from_env()
        .fallback_models()
        .iter()
        .map(|entry| route_of(entry))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Models {
        provider,
        primary,
        fallbacks,
    })
}

/// A variable that must be set and not blank.
pub(crate) fn required_env(name: &str) -> Result<String, String> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .ok_or_else(|| format!("{name} is not set"))
}
