//! Recording file names: the `%p`, `%t` and `%n` patterns of `file=`,
//! expanded for a period, and paths escaped for an option string.

/// Whether [`expand_path`] gives `template` a new name each period: it
/// holds `%t`, or `%n` not cut to a single number by `{1}` (not escaped
/// as `%%`).
pub(super) fn varies_by_period(template: &str) -> bool {
    let mut rest = template;
    while let Some(at) = rest.find('%') {
        rest = &rest[at + 1..];
        match rest.chars().next() {
            Some('t') => return true,
            Some('n') if braced(&rest[1..]).and_then(|max| max.parse::<u64>().ok()) != Some(1) => return true,
            Some('%') => rest = &rest[1..],
            _ => {}
        }
    }
    false
}

/// The text of a `{...}` at the start of `after`.
pub(super) fn braced(after: &str) -> Option<&str> {
    after.strip_prefix('{').and_then(|b| b.split_once('}')).map(|(inside, _)| inside)
}

/// What the `%` sequences of a file name pattern stand for.
#[derive(Clone, Copy, Debug)]
pub struct Naming {
    pub pid: u32,
    /// The time the file's recording starts (`%t`).
    pub unix_seconds: u64,
    /// The file's number in its session, from 0 (`%n`).
    pub sequence: u64,
}

/// Expands a file name pattern: `%p` (process id), `%t` (UTC start time
/// `YYYYMMDD-hhmmss`), `%n` (sequence number) and `%n{MAX}` (it modulo
/// MAX), `%{NAME}` (environment variable NAME, empty if unset) and `%%`.
/// Other `%` sequences stay as written.
pub fn expand_path(template: &str, naming: &Naming) -> String {
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        rest = &rest[at + 1..];
        let (text, used) = match rest.chars().next() {
            Some('p') => (naming.pid.to_string(), 1),
            Some('t') => (format_timestamp(naming.unix_seconds), 1),
            Some('%') => ("%".to_owned(), 1),
            Some('n') => match braced(&rest[1..]).and_then(|max| Some((max, max.parse::<u64>().ok()?))) {
                Some((digits, max)) if max > 0 => ((naming.sequence % max).to_string(), 1 + digits.len() + 2),
                _ => (naming.sequence.to_string(), 1),
            },
            Some('{') => match braced(rest) {
                Some(name) => (std::env::var(name).unwrap_or_default(), name.len() + 2),
                None => ("%".to_owned(), 0),
            },
            _ => ("%".to_owned(), 0),
        };
        out.push_str(&text);
        rest = &rest[used..];
    }
    out.push_str(rest);
    out
}

/// A path as a template that [`expand_path`] turns back into it.
pub fn escape_path(path: &str) -> String {
    path.replace('%', "%%")
}

/// `YYYYMMDD-hhmmss` in UTC.
pub(super) fn format_timestamp(unix_seconds: u64) -> String {
    let secs = unix_seconds % 86_400;
    let (year, month, day) = sampler::clock::civil_from_days((unix_seconds / 86_400) as i64);
    format!("{year:04}{month:02}{day:02}-{:02}{:02}{:02}", secs / 3600, secs / 60 % 60, secs % 60)
}
