//! The readers of option values: each gives the value or an error naming
//! the option and what it accepts. Durations and sizes take units
//! (`10ms`, `512k`); counts and levels are checked against their ranges.

use super::{error, Limits, OptionError, MAX_ATTRIBUTES};
use crate::log::{echo, LogLevel};
use std::ops::RangeInclusive;
use std::time::Duration;

/// An interval as a user would write it: `100us`, `5ms`, `60s`.
pub(super) fn spell(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    match nanos {
        n if n % 1_000_000_000 == 0 => format!("{}s", n / 1_000_000_000),
        n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{}us", n / 1_000),
        n => format!("{n}ns"),
    }
}

/// Checks `value` (given as `key`) against `limits`: refused outside the
/// floor and ceiling, accepted with a warning below `costly_below`.
pub(super) fn limit(
    key: &str,
    value: Duration,
    limits: &Limits,
    warnings: &mut Vec<String>,
) -> Result<Duration, OptionError> {
    let (floor, ceiling) = (spell(limits.floor), spell(limits.ceiling));
    if value < limits.floor || value > limits.ceiling {
        let side =
            if value < limits.floor { format!("below the floor of {floor}") } else { format!("above {ceiling}") };
        return Err(error(
            key,
            format!("{} is {side} for {} (accepted: {floor} to {ceiling})", spell(value), limits.what),
        ));
    }
    if value < limits.costly_below {
        warnings.push(format!(
            "{key}={}: {} this often costs noticeable time on the sampled threads; {} or more is recommended",
            spell(value),
            limits.what,
            spell(limits.costly_below)
        ));
    }
    Ok(value)
}

/// A time as `loop`, `chunktime`, `timeout` and `maxage` take it: seconds,
/// or with a unit `ms`, `s`, `m`, `h` or `d` (`30s`, `10m`, `1h`, `7d`).
pub(super) fn parse_time(key: &str, value: &str) -> Result<Duration, OptionError> {
    let accepted = "accepted: a positive number with optional unit ms, s, m, h or d, e.g. 10m";
    let units = [("ms", 1), ("", 1_000), ("s", 1_000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000)];
    number_with_unit(key, value, &units, accepted).map(Duration::from_millis)
}

pub(super) fn required<'a>(key: &str, value: Option<&'a str>) -> Result<&'a str, OptionError> {
    match value {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(error(key, "requires a value")),
    }
}

pub(super) fn no_value(key: &str, value: Option<&str>) -> Result<(), OptionError> {
    match value {
        None => Ok(()),
        Some(v) => Err(error(key, format!("takes no value (got '{}')", echo(v)))),
    }
}

/// A whole number given as `key`, in `range`; `accepted` says what is, in
/// its errors.
pub(super) fn parse_count(
    key: &str,
    text: &str,
    range: RangeInclusive<u32>,
    accepted: &str,
) -> Result<u32, OptionError> {
    let count: u32 = text.parse().map_err(|_| error(key, format!("'{}' is not a number ({accepted})", echo(text))))?;
    if !range.contains(&count) {
        return Err(error(key, format!("{count} is out of range ({accepted})")));
    }
    Ok(count)
}

/// `remotesym`, `remotesym=true`, ...: bare means true.
pub fn parse_bool(key: &str, value: Option<&str>) -> Result<bool, OptionError> {
    match value {
        None => Ok(true),
        Some(v) => match v.to_ascii_lowercase().as_str() {
            "y" | "yes" | "t" | "true" | "1" => Ok(true),
            "n" | "no" | "f" | "false" | "0" => Ok(false),
            _ => Err(error(
                key,
                format!("'{}' is not a boolean (accepted: y, yes, t, true, 1, n, no, f, false, 0)", echo(v)),
            )),
        },
    }
}

/// A duration: nanoseconds by default, or with an `ns`, `us`, `ms` or `s`
/// suffix. Zero is refused.
pub fn parse_interval(key: &str, value: &str) -> Result<Duration, OptionError> {
    let accepted = "accepted: a positive number with optional unit ns, us, ms or s, e.g. 10ms";
    let units = [("", 1), ("ns", 1), ("us", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000)];
    number_with_unit(key, value, &units, accepted).map(Duration::from_nanos)
}

/// A byte count with optional unit `k` (KiB), `m` (MiB) or `g` (GiB):
/// positive and below 2 GiB (JVMTI takes a `jint`).
pub fn parse_bytes(key: &str, value: &str) -> Result<u32, OptionError> {
    let accepted = "accepted: a positive byte count below 2g with optional unit k, m or g, e.g. 512k";
    let bytes = scaled_bytes(key, value, accepted)?;
    u32::try_from(bytes)
        .ok()
        .filter(|&b| b <= i32::MAX as u32)
        .ok_or_else(|| error(key, format!("'{}' is too large ({accepted})", echo(value))))
}

/// A size in bytes with optional unit `k`, `m` or `g`: positive.
pub(super) fn parse_size(key: &str, value: &str) -> Result<u64, OptionError> {
    scaled_bytes(key, value, "accepted: a positive byte count with optional unit k, m or g, e.g. 100m")
}

/// A positive number of bytes with optional unit `k`, `m` or `g` (binary).
pub(super) fn scaled_bytes(key: &str, value: &str, accepted: &str) -> Result<u64, OptionError> {
    let units =
        [("", 1), ("k", 1 << 10), ("K", 1 << 10), ("m", 1 << 20), ("M", 1 << 20), ("g", 1 << 30), ("G", 1 << 30)];
    number_with_unit(key, value, &units, accepted)
}

/// The one reader of numbers with units: digits, then one of `units`
/// (its spelling and how many of the base unit it is), positive and
/// without overflow; `accepted` says what is, in its errors.
fn number_with_unit(key: &str, value: &str, units: &[(&str, u64)], accepted: &str) -> Result<u64, OptionError> {
    let shown = echo(value);
    let digits_end = value.find(|c: char| !c.is_ascii_digit()).unwrap_or(value.len());
    let (digits, unit) = value.split_at(digits_end);
    if digits.is_empty() {
        return Err(error(key, format!("'{shown}' is not a number ({accepted})")));
    }
    let too_large = || error(key, format!("'{shown}' is too large ({accepted})"));
    let number: u64 = digits.parse().map_err(|_| too_large())?;
    let Some(&(_, scale)) = units.iter().find(|(spelling, _)| *spelling == unit) else {
        return Err(error(key, format!("unknown unit '{}' in '{shown}' ({accepted})", echo(unit))));
    };
    match number.checked_mul(scale) {
        Some(0) => Err(error(key, format!("'{shown}' must be greater than zero ({accepted})"))),
        Some(scaled) => Ok(scaled),
        None => Err(too_large()),
    }
}

/// `name1;name2`: distinct, non-empty names, at most [`MAX_ATTRIBUTES`].
pub(super) fn parse_attributes(key: &str, value: &str) -> Result<Vec<String>, OptionError> {
    let shown = echo(value);
    let names: Vec<String> = value.split(';').map(str::to_owned).collect();
    if names.iter().any(String::is_empty) {
        return Err(error(
            key,
            format!("'{shown}' has an empty name (accepted: name1;name2;... up to {MAX_ATTRIBUTES})"),
        ));
    }
    if names.len() > MAX_ATTRIBUTES {
        return Err(error(key, format!("{} names given (accepted: up to {MAX_ATTRIBUTES})", names.len())));
    }
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    if sorted.len() != names.len() {
        return Err(error(key, format!("'{shown}' names an attribute twice")));
    }
    Ok(names)
}

pub(super) fn parse_log_level(key: &str, value: &str) -> Result<LogLevel, OptionError> {
    let shown = echo(value);
    Ok(match value.to_ascii_uppercase().as_str() {
        "TRACE" => LogLevel::Trace,
        "DEBUG" => LogLevel::Debug,
        "INFO" => LogLevel::Info,
        "WARN" => LogLevel::Warn,
        "ERROR" => LogLevel::Error,
        "NONE" => LogLevel::None,
        _ => {
            return Err(error(
                key,
                format!("unknown level '{shown}' (accepted: TRACE, DEBUG, INFO, WARN, ERROR, NONE)"),
            ))
        }
    })
}
