//! The Datadog agent's profiling intake, as dd-trace-java's uploader sends
//! it: `POST {URL}/profiling/v1/input`, multipart `event` (`event.json`:
//! the attachment, the period, the tags) and `main` (the period's
//! recording, gzipped: the intake tells compression by its magic bytes).
//! `DD_API_KEY`, when given, goes as `DD-API-KEY` (agentless intakes).

use super::{gzip, iso8601, multipart, Backend, Credentials, Identity, Part, Period, Request};
use std::sync::Arc;

pub struct Datadog {
    input: String,
    /// `tags_profiler`: `k:v,k2:v2`.
    tags: String,
    headers: Vec<(String, String)>,
}

impl Datadog {
    pub fn new(url: &str, identity: Arc<Identity>, credentials: &Credentials) -> Self {
        // `tags=`, then the runtime's as dd-trace-java adds them.
        let mut tags: Vec<String> = identity.tags.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        tags.extend([
            format!("service:{}", identity.service),
            "language:jvm".to_owned(),
            format!("host:{}", identity.host),
            format!("process_id:{}", identity.pid),
            format!("runtime_version:{}", identity.runtime_version),
            format!("profiler_version:jvmprofiler-{}", env!("CARGO_PKG_VERSION")),
        ]);
        let mut headers = vec![
            ("DD-EVP-ORIGIN".to_owned(), "jvmprofiler".to_owned()),
            ("DD-EVP-ORIGIN-VERSION".to_owned(), env!("CARGO_PKG_VERSION").to_owned()),
            ("Datadog-Meta-Lang".to_owned(), "java".to_owned()),
        ];
        if let Some(key) = credentials.get("DD_API_KEY") {
            headers.push(("DD-API-KEY".to_owned(), key));
        }
        Self { input: format!("{url}/profiling/v1/input"), tags: tags.join(",").replace('"', ""), headers }
    }
}

impl Backend for Datadog {
    fn name(&self) -> &'static str {
        "datadog"
    }

    fn request(&self, period: &Period) -> Result<Request, String> {
        let event = format!(
            "{{\"attachments\":[\"main.jfr\"],\"tags_profiler\":\"{},snapshot:periodic\",\"start\":\"{}\",\"end\":\"{}\",\
             \"family\":\"java\",\"version\":\"4\"}}",
            self.tags,
            iso8601(period.start),
            iso8601(period.end)
        );
        let jfr = gzip(&period.jfr)?;
        let parts = [
            Part {
                name: "event",
                filename: "event.json",
                content_type: Some("application/json"),
                data: event.as_bytes(),
            },
            Part { name: "main", filename: "main.jfr", content_type: Some("application/octet-stream"), data: &jfr },
        ];
        let (content_type, body) = multipart(&parts);
        let mut headers = self.headers.clone();
        headers.push(("Content-Type".to_owned(), content_type));
        Ok(Request { url: self.input.clone(), headers, body })
    }
}
