//! OpenTelemetry's profiles signal over HTTP: `POST {URL}` (a base URL
//! gets `/v1development/profiles`) of an `ExportProfilesServiceRequest`
//! (protobuf, gzipped), the period's recording read back and encoded by
//! the symbolizer's OTLP writer, unresolved: remote native frames go as
//! mappings carrying their library's build-id, for the backend to
//! symbolize. Resource attributes: `service.name`, the runtime's, host,
//! pid and `tags=`. Headers from `OTEL_EXPORTER_OTLP_PROFILES_HEADERS`
//! or `OTEL_EXPORTER_OTLP_HEADERS` (`k=v,k2=v2`, as the SDKs read them).

use super::{gzip, Backend, Credentials, Identity, Period, Request};
use std::sync::Arc;
use symbolizer::otlp::{encode_request, OtlpOptions};

pub struct Otlp {
    url: String,
    options: OtlpOptions,
    headers: Vec<(String, String)>,
}

/// The endpoint `url` names: itself if it names the profiles path, else
/// its `/v1development/profiles`.
fn endpoint(url: &str) -> String {
    if url.ends_with("/profiles") {
        url.to_owned()
    } else {
        format!("{url}/v1development/profiles")
    }
}

/// `k=v,k2=v2`, values percent-encoded, as OpenTelemetry's SDKs read
/// their headers variable.
fn parse_headers(text: &str) -> Vec<(String, String)> {
    text.split(',')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), percent_decoded(v.trim())))
        .filter(|(k, _)| !k.is_empty())
        .collect()
}

fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (b, hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(decoded)) => {
                out.push(decoded);
                i += 3;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Otlp {
    pub fn new(url: &str, identity: Arc<Identity>, credentials: &Credentials) -> Self {
        let mut attributes = vec![
            ("process.runtime.name".to_owned(), "java".to_owned()),
            ("process.runtime.version".to_owned(), identity.runtime_version.clone()),
            ("host.name".to_owned(), identity.host.clone()),
            ("process.pid".to_owned(), identity.pid.to_string()),
        ];
        attributes.extend(identity.tags.iter().cloned());
        let headers = credentials
            .get("OTEL_EXPORTER_OTLP_PROFILES_HEADERS")
            .or_else(|| credentials.get("OTEL_EXPORTER_OTLP_HEADERS"))
            .map(|text| parse_headers(&text))
            .unwrap_or_default();
        let options = OtlpOptions { service: Some(identity.service.clone()), attributes, event: None };
        Self { url: endpoint(url), options, headers }
    }
}

impl Backend for Otlp {
    fn name(&self) -> &'static str {
        "otlp"
    }

    /// The OTLP specification's retryable answers.
    fn retries(&self, code: u16) -> bool {
        matches!(code, 502..=504)
    }

    fn request(&self, period: &Period) -> Result<Request, String> {
        let read =
            symbolizer::recording::read_bytes(&period.jfr, "the period's recording").map_err(|e| e.to_string())?;
        let body = gzip(&encode_request(&read.recording, &self.options))?;
        let mut headers = vec![
            ("Content-Type".to_owned(), "application/x-protobuf".to_owned()),
            ("Content-Encoding".to_owned(), "gzip".to_owned()),
        ];
        headers.extend(self.headers.iter().cloned());
        Ok(Request { url: self.url.clone(), headers, body })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_and_headers_are_read_as_the_sdks_read_them() {
        assert_eq!(endpoint("http://collector:4318"), "http://collector:4318/v1development/profiles");
        assert_eq!(
            endpoint("http://pyroscope:4040/v1development/profiles"),
            "http://pyroscope:4040/v1development/profiles"
        );
        assert_eq!(
            parse_headers("Authorization=Bearer%20abc, X-Scope-OrgID=team1,bad"),
            [("Authorization".to_owned(), "Bearer abc".to_owned()), ("X-Scope-OrgID".to_owned(), "team1".to_owned())]
        );
    }
}
