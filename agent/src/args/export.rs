//! The exporters' options: `pyroscope=URL`, `datadog=URL`, `otlp=URL`,
//! `service=NAME`, `tags=k:v;k:v`, `credentials=FILE`. Credentials never
//! come in the option string (it shows in process lists): from the
//! environment or from `credentials=FILE`.

use crate::args::{echo, OptionError};
use std::path::PathBuf;

/// Where a session's periods are shipped, and as what.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportOptions {
    /// A Pyroscope server's base URL.
    pub pyroscope: Option<String>,
    /// A Datadog agent's base URL.
    pub datadog: Option<String>,
    /// An OTLP/HTTP endpoint (a collector's, Pyroscope's).
    pub otlp: Option<String>,
    /// The service's name (default: the Java command's main class or jar).
    pub service: Option<String>,
    /// Labels sent with every upload.
    pub tags: Vec<(String, String)>,
    /// A file of `NAME=value` lines read for credentials, as the
    /// environment is.
    pub credentials: Option<PathBuf>,
}

impl ExportOptions {
    /// Whether any backend is named.
    pub fn any(&self) -> bool {
        self.pyroscope.is_some() || self.datadog.is_some() || self.otlp.is_some()
    }
}

fn error(option: &str, message: impl Into<String>) -> OptionError {
    OptionError { option: option.to_owned(), message: message.into() }
}

fn url(key: &str, value: &str) -> Result<String, OptionError> {
    let rest = value.strip_prefix("http://").or_else(|| value.strip_prefix("https://"));
    match rest {
        Some(host) if !host.is_empty() && !host.starts_with('/') => Ok(value.trim_end_matches('/').to_owned()),
        _ => Err(error(
            key,
            format!("'{}' is not a URL (accepted: http://HOST[:PORT][/PATH] or https://...)", echo(value)),
        )),
    }
}

/// Parses one exporter option into `export`; false if `key` is not one.
pub fn parse(key: &str, value: Option<&str>, export: &mut ExportOptions) -> Result<bool, OptionError> {
    let required = || value.filter(|v| !v.is_empty()).ok_or_else(|| error(key, "needs a value"));
    match key {
        "pyroscope" => export.pyroscope = Some(url(key, required()?)?),
        "datadog" => export.datadog = Some(url(key, required()?)?),
        "otlp" => export.otlp = Some(url(key, required()?)?),
        "service" => {
            let name = required()?;
            if name.contains(|c: char| c.is_control() || "{}=;,\"\\".contains(c)) {
                return Err(error(
                    key,
                    format!("'{}' holds a character a label cannot ({{ }} = ; , \" \\)", echo(name)),
                ));
            }
            export.service = Some(name.to_owned());
        }
        "tags" => export.tags = parse_tags(key, required()?)?,
        "credentials" => export.credentials = Some(PathBuf::from(required()?)),
        _ => return Ok(false),
    }
    Ok(true)
}

fn parse_tags(key: &str, value: &str) -> Result<Vec<(String, String)>, OptionError> {
    value
        .split(';')
        .map(|tag| {
            let (name, value) = tag.split_once(':').unwrap_or((tag, ""));
            let bad = |s: &str| s.is_empty() || s.contains(|c: char| c.is_control() || "{}=,\"\\".contains(c));
            if bad(name) || bad(value) {
                return Err(error(
                    key,
                    format!("'{}' is not NAME:VALUE (accepted: k:v;k2:v2, without {{ }} = , \" or \\)", echo(tag)),
                ));
            }
            Ok((name.to_owned(), value.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(items: &[(&str, &str)]) -> Result<ExportOptions, OptionError> {
        let mut export = ExportOptions::default();
        for (key, value) in items {
            assert!(parse(key, Some(value), &mut export)?);
        }
        Ok(export)
    }

    #[test]
    fn backends_take_urls_and_labels_take_names() {
        let export = parsed(&[
            ("pyroscope", "http://localhost:4040/"),
            ("service", "orders"),
            ("tags", "env:prod;region:eu-west-1"),
        ])
        .unwrap();
        assert_eq!(export.pyroscope.as_deref(), Some("http://localhost:4040"));
        assert_eq!(export.tags, [("env".into(), "prod".into()), ("region".into(), "eu-west-1".into())]);
        assert!(export.any());
        for (key, bad) in [("datadog", "localhost:8126"), ("pyroscope", "http://"), ("tags", "env"), ("tags", "a:b;;")]
        {
            let e = parsed(&[(key, bad)]).unwrap_err();
            assert_eq!(e.option, key, "{bad}");
        }
        assert!(!parse("file", Some("x"), &mut ExportOptions::default()).unwrap());
    }
}
