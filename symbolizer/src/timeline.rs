//! The timeline (a heatmap): the recording's span cut into buckets of
//! time, one row per method most often on top of the stack (the top N by
//! self weight) with each bucket's share of it, and a row of each bucket's
//! total — when a hot method changed, and the window to look at with
//! `flamegraph --from --to`. The page embeds its data as JSON.

use crate::flamegraph::{html_escape, json_string};
use crate::profile::{Profile, Timed};
use rustc_hash::FxHashMap;
use std::fmt::Write;

const TEMPLATE: &str = include_str!("../assets/timeline.html");
/// The id of the element holding the page's data (JSON).
pub const DATA_ID: &str = "timeline-data";
/// About how many buckets an automatic width gives the recording's span.
pub const COLUMNS: i64 = 150;
/// The most columns a page gets (each row holds a count per column).
pub const MAX_COLUMNS: usize = 100_000;
/// The row of a sample whose stack has no frame.
const NO_FRAME: &str = "[no frames]";

/// The heatmap's numbers.
#[derive(Debug, PartialEq, Eq)]
pub struct Timeline {
    /// The first bucket's start (unix nanoseconds, a multiple of `bucket`).
    pub start: i64,
    /// Each bucket's length, in nanoseconds.
    pub bucket: i64,
    /// Each bucket's total weight, every sample's.
    pub totals: Vec<u64>,
    /// The methods most often on top, heaviest first: their name and
    /// their self weight in each bucket.
    pub rows: Vec<(String, Vec<u64>)>,
}

/// A round bucket length (1, 2 or 5 times a power of ten nanoseconds,
/// or whole seconds and minutes: 1, 2, 5, 10, 15, 30) of at least
/// `span / columns`, so that the span fills about `columns` buckets.
pub fn bucket_width(span: i64, columns: i64) -> i64 {
    let least = (span / columns.max(1)).max(1);
    const SECOND: i64 = 1_000_000_000;
    let steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600].map(|s| s * SECOND);
    if least > SECOND {
        let hours = (least + 3600 * SECOND - 1) / (3600 * SECOND);
        return steps.into_iter().find(|&s| s >= least).unwrap_or(hours * 3600 * SECOND);
    }
    let mut power = 1;
    loop {
        for step in [power, 2 * power, 5 * power] {
            if step >= least {
                return step;
            }
        }
        power *= 10;
    }
}

/// The bucket of the time `at`, for buckets of `width` from `start`.
pub fn bucket_of(at: i64, start: i64, width: i64) -> usize {
    usize::try_from(at.saturating_sub(start) / width.max(1)).unwrap_or(0)
}

/// The timeline of a [`crate::profile::build_timed`] profile: buckets of
/// `bucket` nanoseconds (else about [`COLUMNS`] over the samples' span)
/// and the `rows` methods (innermost frames, by name) of most weight.
/// A `--bucket` giving more columns than [`MAX_COLUMNS`] is refused.
pub fn build(profile: &Profile, times: &[Timed], rows: usize, bucket: Option<i64>) -> Result<Timeline, String> {
    let (first, last) = times.iter().fold((i64::MAX, i64::MIN), |(lo, hi), t| (lo.min(t.at), hi.max(t.at)));
    if times.is_empty() {
        return Ok(Timeline { start: 0, bucket: bucket.unwrap_or(1), totals: Vec::new(), rows: Vec::new() });
    }
    let span = last.saturating_sub(first);
    let width = bucket.unwrap_or_else(|| bucket_width(span, COLUMNS)).max(1);
    let start = first.div_euclid(width) * width;
    let columns = bucket_of(last, start, width) + 1;
    if columns > MAX_COLUMNS {
        return Err(format!(
            "--bucket: {columns} buckets over the samples' {:.3} s (at most {MAX_COLUMNS}: choose a longer bucket)",
            span as f64 / 1e9
        ));
    }
    let leaf = |t: &Timed| -> &str {
        let stack = &profile.samples[t.sample as usize].stack;
        stack.first().map_or(NO_FRAME, |&f| profile.frames[f as usize].name.as_str())
    };
    let mut by_name: FxHashMap<&str, u64> = FxHashMap::default();
    for t in times {
        *by_name.entry(leaf(t)).or_default() += t.weight;
    }
    let mut ranked: Vec<(&str, u64)> = by_name.into_iter().collect();
    ranked.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    ranked.truncate(rows);
    let row_of: FxHashMap<&str, usize> = ranked.iter().enumerate().map(|(i, (name, _))| (*name, i)).collect();
    let mut totals = vec![0u64; columns];
    let mut counts = vec![vec![0u64; columns]; ranked.len()];
    for t in times {
        let column = bucket_of(t.at, start, width);
        totals[column] += t.weight;
        if let Some(&row) = row_of.get(leaf(t)) {
            counts[row][column] += t.weight;
        }
    }
    let rows = ranked.iter().zip(counts).map(|((name, _), counts)| ((*name).to_owned(), counts)).collect();
    Ok(Timeline { start, bucket: width, totals, rows })
}

/// The page: the heatmap, drawn from the JSON in the element [`DATA_ID`]
/// (`start`, `bucket`: nanoseconds; `buckets`: each bucket's start, unix
/// nanoseconds; `total`: each bucket's weight; `rows`: each method's
/// `name` and `counts`, its self weight per bucket).
pub fn render(timeline: &Timeline, title: &str, units: &str, input: &str) -> String {
    let mut data = String::from("{\"title\":");
    json_string(&mut data, title);
    data.push_str(",\"input\":");
    json_string(&mut data, input);
    let _ =
        write!(data, ",\"units\":\"{units}\",\"start\":{},\"bucket\":{},\"buckets\":", timeline.start, timeline.bucket);
    let starts = (0..timeline.totals.len() as i64).map(|i| timeline.start + i * timeline.bucket);
    data.push_str(&crate::flamegraph::json_array(starts));
    data.push_str(",\"total\":");
    data.push_str(&crate::flamegraph::json_array(timeline.totals.iter()));
    data.push_str(",\"rows\":[");
    for (i, (name, counts)) in timeline.rows.iter().enumerate() {
        data.push_str(if i == 0 { "{\"name\":" } else { ",{\"name\":" });
        json_string(&mut data, name);
        data.push_str(",\"counts\":");
        data.push_str(&crate::flamegraph::json_array(counts.iter()));
        data.push('}');
    }
    data.push_str("]}");
    TEMPLATE
        .replace("%TITLE%", &html_escape(title))
        .replace("%DATA_ID%", DATA_ID)
        .replace("<!--%DATA%-->", &format!("<script type=\"application/json\" id=\"{DATA_ID}\">{data}</script>"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventKind;
    use crate::profile::{ProfileSample, StackFrame};

    const MS: i64 = 1_000_000;
    const SECOND: i64 = 1_000_000_000;

    #[test]
    fn buckets_are_round_and_fill_about_the_wanted_columns() {
        assert_eq!(bucket_width(4 * SECOND, 150), 50 * MS, "26.7 ms rounds up to 50 ms");
        assert_eq!(bucket_width(3 * SECOND, 150), 20 * MS);
        assert_eq!(bucket_width(150 * SECOND, 150), SECOND);
        assert_eq!(bucket_width(151 * SECOND, 150), 2 * SECOND);
        assert_eq!(bucket_width(3600 * SECOND, 150), 30 * SECOND);
        assert_eq!(bucket_width(100 * 3600 * SECOND, 150), 3600 * SECOND);
        assert_eq!(bucket_width(1000 * 3600 * SECOND, 150), 7 * 3600 * SECOND);
        assert_eq!(bucket_width(0, 150), 1);
        assert_eq!(bucket_width(1_000, 150), 10);
        // Half-open buckets: a time on a boundary opens the next.
        assert_eq!((bucket_of(0, 0, 10), bucket_of(9, 0, 10), bucket_of(10, 0, 10)), (0, 0, 1));
        assert_eq!(bucket_of(5, 10, 10), 0, "before the start: the first");
    }

    fn profile_of(leaves: &[&str]) -> Profile {
        let mut profile = Profile::new(EventKind::Cpu);
        for leaf in leaves {
            let frame = |name: &str| StackFrame {
                name: name.to_owned(),
                kind: None,
                file: None,
                line: None,
                remote: None,
                inlined: false,
            };
            let stack = vec![profile.intern(frame(leaf)), profile.intern(frame("Main.main"))];
            profile.samples.push(ProfileSample { thread: "t".to_owned(), weight: 0, events: 0, stack });
        }
        profile
    }

    /// A first then b on top: a's row holds the first buckets, b's the
    /// last, the total row both, and the rarest leaf gets no row of its
    /// own (but counts in the total).
    #[test]
    fn each_sample_counts_in_its_bucket_and_its_leaf_row() {
        let profile = profile_of(&["A.a", "B.b", "C.c"]);
        let start = 1_700_000_000 * SECOND + 3 * MS;
        let at = |ms: i64, sample: u32, weight: u64| Timed { at: start + ms * MS, sample, weight };
        let times = [at(0, 0, 1), at(5, 0, 2), at(12, 0, 1), at(25, 1, 1), at(26, 2, 1), at(36, 1, 3)];
        let timeline = build(&profile, &times, 2, Some(10 * MS)).unwrap();
        assert_eq!(timeline.start, 1_700_000_000 * SECOND, "aligned to the bucket length");
        assert_eq!(timeline.bucket, 10 * MS);
        assert_eq!(timeline.totals, [3, 1, 2, 3]);
        assert_eq!(
            timeline.rows,
            [("A.a".to_owned(), vec![3, 1, 0, 0]), ("B.b".to_owned(), vec![0, 0, 1, 3])],
            "heaviest first; C.c left out"
        );
        let page = render(&timeline, "t <1>", "samples", "x.jfr");
        let json = page.split(&format!("id=\"{DATA_ID}\">")).nth(1).unwrap().split("</script>").next().unwrap();
        let data: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(data["buckets"][1], serde_json::json!(1_700_000_000 * SECOND + 10 * MS));
        assert_eq!(data["rows"][1]["counts"], serde_json::json!([0, 0, 1, 3]));
        assert_eq!(data["title"], "t <1>");
        // Automatic width: 36 ms over 150 columns rounds to 500 µs.
        assert_eq!(build(&profile, &times, 2, None).unwrap().bucket, MS / 2);
        assert_eq!(build(&profile, &[], 2, None).unwrap().totals, Vec::<u64>::new());
        let refused = build(&profile, &times, 2, Some(1)).unwrap_err();
        assert!(refused.contains("longer bucket"), "{refused}");
    }
}
