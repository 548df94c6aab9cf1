//! Numeric settings read from the environment (or any key lookup): one parser and one warning
//! type for every layer, so a bad value is treated the same way wherever it is read.

use std::fmt;

/// A configuration value that was ignored, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigWarning {
    /// The variable.
    pub key: &'static str,
    /// The value it held.
    pub value: String,
    /// What was done about it.
    pub problem: ConfigProblem,
}

/// What was wrong with a configuration value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigProblem {
    /// Not a number: the default was restored.
    Unparseable,
    /// Below zero: the default was restored.
    Negative,
    /// Zero where zero means nothing useful: the default was restored.
    Zero,
    /// The attempt timeout was at or above the total deadline: it was clamped to the total.
    AttemptTimeoutClamped,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (key, value) = (self.key, &self.value);
        match self.problem {
            ConfigProblem::Unparseable => {
                write!(f, "{key}={value:?} is not a number; using the default")
            }
            ConfigProblem::Negative => write!(f, "{key}={value:?} is negative; using the default"),
            ConfigProblem::Zero => write!(f, "{key}=0 is not allowed; using the default"),
            ConfigProblem::AttemptTimeoutClamped => write!(
                f,
                "{key}={value} is at or above the total deadline; clamping the attempt timeout to the total"
            ),
        }
    }
}

/// A parsed millisecond/count value.
pub(crate) enum Parsed {
    Unset,
    Value(u64),
    Bad(ConfigProblem),
}

pub(crate) fn parse(raw: Option<&str>) -> Parsed {
    let Some(raw) = raw.map(str::trim).filter(|v| !v.is_empty()) else {
        return Parsed::Unset;
    };
    match raw.parse::<u64>() {
        Ok(v) => Parsed::Value(v),
        Err(_) if raw.parse::<i128>().is_ok() || raw.parse::<f64>().is_ok_and(|v| v < 0.0) => {
            Parsed::Bad(ConfigProblem::Negative)
        }
        Err(_) => Parsed::Bad(ConfigProblem::Unparseable),
    }
}

/// Reads `key` through `lookup`: `Some(value)` for a usable number; `None` when it is unset or
/// empty (silently), or unparseable, negative, or `0` where `zero_is_bad` (with a warning pushed).
pub(crate) fn read_setting(
    lookup: impl Fn(&str) -> Option<String>,
    key: &'static str,
    zero_is_bad: bool,
    warnings: &mut Vec<ConfigWarning>,
) -> Option<u64> {
    let raw = lookup(key);
    let problem = match parse(raw.as_deref()) {
        Parsed::Unset => return None,
        Parsed::Value(0) if zero_is_bad => ConfigProblem::Zero,
        Parsed::Value(v) => return Some(v),
        Parsed::Bad(problem) => problem,
    };
    warnings.push(ConfigWarning {
        key,
        value: raw.unwrap_or_default(),
        problem,
    });
    None
}
