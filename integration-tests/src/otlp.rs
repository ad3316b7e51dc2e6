//! OTLP profiles read with the OpenTelemetry project's own definitions:
//! PyPI `opentelemetry-proto` 1.43+ (proto v1.10.0), from a Python script,
//! into a JSON summary the tests compare.

use crate::{assert_success, stdout};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use test_skip::{skip, InCi};

/// Decodes the request in argv[1] with opentelemetry-proto and prints a
/// JSON summary: the resource's attributes, the scope, every mapping (file
/// name, build-id, its locations, those with lines, their addresses), and
/// per profile its types, period, time, total, samples, samples with a
/// link, threads, per stack (outermost first, `;`-joined, `;` in names as
/// `:`, as `symbolize collapsed` prints them; a location without lines as
/// `[file+0xaddress]`) its total, per link (`trace_id/span_id` in hex) its
/// total and the stacks under links; and whether every table starts with
/// its zero entry and no field was unknown.
const DECODE: &str = r#"
import json, sys
from google.protobuf import unknown_fields
from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2
from opentelemetry.proto.profiles.v1development import profiles_pb2

request = profiles_service_pb2.ExportProfilesServiceRequest()
request.ParseFromString(open(sys.argv[1], "rb").read())
d = request.dictionary
s = d.string_table

def unknown(message):
    n = len(unknown_fields.UnknownFieldSet(message))
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        # protobuf 5.28+ says is_repeated; older ones only label.
        repeated = field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED
        values = value if repeated else [value]
        n += sum(unknown(v) for v in values)
    return n

def any_value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None

def attributes(indices):
    return {s[d.attribute_table[i].key_strindex]: any_value(d.attribute_table[i].value) for i in indices}

zero = (
    s[0] == ""
    and d.mapping_table[0] == profiles_pb2.Mapping()
    and d.location_table[0] == profiles_pb2.Location()
    and d.function_table[0] == profiles_pb2.Function()
    and d.link_table[0] == profiles_pb2.Link()
    and d.attribute_table[0] == profiles_pb2.KeyValueAndUnit()
    and d.stack_table[0] == profiles_pb2.Stack()
)

def frames(location):
    if not location.lines:
        mapping = d.mapping_table[location.mapping_index]
        return ["[%s+%s]" % (s[mapping.filename_strindex], hex(location.address))]
    return [s[d.function_table[line.function_index].name_strindex].replace(";", ":") for line in location.lines]

mappings = []
for index, mapping in enumerate(d.mapping_table[1:], 1):
    located = [l for l in d.location_table if l.mapping_index == index]
    mappings.append({
        "filename": s[mapping.filename_strindex],
        "build_id": attributes(mapping.attribute_indices).get("process.executable.build_id.gnu"),
        "locations": len(located),
        "with_lines": sum(1 for l in located if l.lines),
        "addresses": sorted({l.address for l in located}),
    })

profiles = []
for rp in request.resource_profiles:
    for sp in rp.scope_profiles:
        for p in sp.profiles:
            stacks = {}
            threads = set()
            spans = {}
            span_stacks = set()
            for sample in p.samples:
                assert len(sample.values) == 1 and not sample.timestamps_unix_nano
                names = []
                for index in d.stack_table[sample.stack_index].location_indices:
                    names.extend(frames(d.location_table[index]))
                names.reverse()
                key = ";".join(names)
                stacks[key] = stacks.get(key, 0) + sample.values[0]
                threads.add(attributes(sample.attribute_indices).get("thread.name"))
                if sample.link_index:
                    link = d.link_table[sample.link_index]
                    span = link.trace_id.hex() + "/" + link.span_id.hex()
                    spans[span] = spans.get(span, 0) + sample.values[0]
                    span_stacks.add(key)
            profiles.append({
                "sample_type": [s[p.sample_type.type_strindex], s[p.sample_type.unit_strindex]],
                "period_type": [s[p.period_type.type_strindex], s[p.period_type.unit_strindex]],
                "period": p.period,
                "time_unix_nano": p.time_unix_nano,
                "duration_nano": p.duration_nano,
                "total": sum(sample.values[0] for sample in p.samples),
                "samples": len(p.samples),
                "linked": sum(1 for sample in p.samples if sample.link_index),
                "threads": sorted(t for t in threads if t is not None),
                "stacks": stacks,
                "spans": spans,
                "span_stacks": sorted(span_stacks),
            })

rp = request.resource_profiles[0]
print(json.dumps({
    "resource": {kv.key: any_value(kv.value) for kv in rp.resource.attributes},
    "scope": rp.scope_profiles[0].scope.name,
    "zero_entries": zero,
    "unknown_fields": unknown(request),
    "mappings": mappings,
    "profiles": profiles,
}))
"#;

/// Exits 0 when opentelemetry-proto 1.43+ (the first with proto v1.10.0;
/// earlier ones decode the profiles of another version, silently wrong) is
/// importable.
const PYTHON_READY: &str = r#"
import importlib.metadata, sys
import opentelemetry.proto.collector.profiles.v1development.profiles_service_pb2
version = tuple(int(n) for n in importlib.metadata.version("opentelemetry-proto").split(".")[:2])
sys.exit(0 if version >= (1, 43) else 1)
"#;

/// Whether opentelemetry-proto 1.43+ can be imported; skips the calling
/// test (fails it under CI, whose `.ci/run` installs it) when not.
pub fn python_ready() -> bool {
    let ready = Command::new("python3").args(["-c", PYTHON_READY]).output();
    if ready.is_ok_and(|o| o.status.success()) {
        return true;
    }
    skip(
        "python3 cannot import opentelemetry-proto 1.43+ (python3 -m pip install 'opentelemetry-proto>=1.43.0')",
        InCi::Required,
    );
    false
}

/// The request in `file` (protobuf, not compressed) decoded by
/// [`DECODE`]: every table starts with its zero entry, no field is unknown
/// to opentelemetry-proto, and the scope is ours.
pub fn decode_otlp(file: &Path) -> Value {
    let script = file.with_extension("decode.py");
    std::fs::write(&script, DECODE).unwrap();
    let decoded = Command::new("python3").arg(&script).arg(file).output().expect("run python3");
    assert_success(&decoded);
    let summary: Value = serde_json::from_str(&stdout(&decoded)).expect("the decoder's JSON");
    assert_eq!(summary["zero_entries"], true, "every table starts with its zero entry");
    assert_eq!(summary["unknown_fields"], 0, "every field is one opentelemetry-proto knows");
    assert_eq!(summary["scope"], "jvmprofiler");
    summary
}
