//! Pyroscope's JFR ingest, as Grafana's Pyroscope Java agent sends it:
//! `POST {URL}/ingest?name=<service>{labels}&...&format=jfr`, the period's
//! recording gzipped in the multipart part `jfr`. Tenant
//! (`PYROSCOPE_TENANT_ID`, as `X-Scope-OrgID`) and auth
//! (`PYROSCOPE_AUTH_TOKEN` as a bearer token, or
//! `PYROSCOPE_BASIC_AUTH_USER` and `PYROSCOPE_BASIC_AUTH_PASSWORD`).

use super::{gzip, multipart, unix_seconds, Backend, Credentials, Identity, Part, Period, Request};
use base64::Engine;
use std::sync::Arc;

pub struct Pyroscope {
    ingest: String,
    /// `name=`: the service and its labels, sorted, URL-encoded.
    name: String,
    /// Samples per second of CPU time (Pyroscope weighs a sample by
    /// 1e9 / rate nanoseconds).
    sample_rate: u64,
    headers: Vec<(String, String)>,
}

/// `text` with everything but unreserved characters percent-encoded.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Pyroscope's application name with labels: `service{k=v,k2=v2}`,
/// `tags=` and the runtime's (as Pyroscope's Java agent adds them), sorted
/// by name.
fn application_name(identity: &Identity) -> String {
    let mut labels: Vec<(String, String)> = identity.tags.clone();
    let runtime = [("process.runtime.name", "java"), ("process.runtime.version", identity.runtime_version.as_str())];
    for (name, value) in runtime.into_iter().filter(|(_, v)| !v.is_empty()) {
        if !labels.iter().any(|(k, _)| k == name) {
            labels.push((name.to_owned(), value.to_owned()));
        }
    }
    labels.sort();
    let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{}{{{}}}", identity.service, labels.join(","))
}

impl Pyroscope {
    pub fn new(url: &str, identity: Arc<Identity>, credentials: &Credentials) -> Self {
        let mut headers = Vec::new();
        if let Some(tenant) = credentials.get("PYROSCOPE_TENANT_ID") {
            headers.push(("X-Scope-OrgID".to_owned(), tenant));
        }
        let basic = credentials.get("PYROSCOPE_BASIC_AUTH_USER").zip(credentials.get("PYROSCOPE_BASIC_AUTH_PASSWORD"));
        if let Some((user, password)) = basic {
            let pair = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            headers.push(("Authorization".to_owned(), format!("Basic {pair}")));
        } else if let Some(token) = credentials.get("PYROSCOPE_AUTH_TOKEN") {
            headers.push(("Authorization".to_owned(), format!("Bearer {token}")));
        }
        let sample_rate = identity.interval_ns.map_or(100, |ns| (1_000_000_000 / ns.max(1)).max(1));
        Self { ingest: format!("{url}/ingest"), name: encode(&application_name(&identity)), sample_rate, headers }
    }
}

impl Backend for Pyroscope {
    fn name(&self) -> &'static str {
        "pyroscope"
    }

    fn request(&self, period: &Period) -> Result<Request, String> {
        let url = format!(
            "{}?name={}&units=samples&aggregationType=sum&from={}&until={}&spyName=javaspy&sampleRate={}&format=jfr",
            self.ingest,
            self.name,
            unix_seconds(period.start),
            unix_seconds(period.end).max(unix_seconds(period.start) + 1),
            self.sample_rate
        );
        let jfr = gzip(&period.jfr)?;
        let (content_type, body) = multipart(&[Part { name: "jfr", filename: "jfr", content_type: None, data: &jfr }]);
        let mut headers = self.headers.clone();
        headers.push(("Content-Type".to_owned(), content_type));
        Ok(Request { url, headers, body })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_carries_sorted_labels_url_encoded() {
        let identity = Identity {
            service: "orders".into(),
            tags: vec![("region".into(), "eu".into()), ("env".into(), "prod".into())],
            runtime_version: "21.0.8".into(),
            interval_ns: Some(1_000_000),
            ..Identity::default()
        };
        assert_eq!(
            application_name(&identity),
            "orders{env=prod,process.runtime.name=java,process.runtime.version=21.0.8,region=eu}"
        );
        assert_eq!(encode("orders{env=prod}"), "orders%7Benv%3Dprod%7D");
        let pyroscope = Pyroscope::new("http://host:4040", Arc::new(identity), &Credentials::read(None).unwrap());
        assert_eq!(pyroscope.sample_rate, 1000);
    }
}
