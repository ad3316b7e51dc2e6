//! The types this profiler writes: JDK-compatible value types (so
//! `jdk.jfr.consumer` and JDK Mission Control understand stacks, threads and
//! methods) plus the `datadog.*` events.
//!
//! Type ids are chunk-local; 0 and 1 are reserved for the metadata and
//! checkpoint events. Event ids stay below 128 so an event's type takes one
//! byte.

use crate::metadata::{FieldDef as F, Kind, TypeDef, Unit};

pub mod id {
    pub const BOOLEAN: u64 = 4;
    pub const CHAR: u64 = 5;
    pub const FLOAT: u64 = 6;
    pub const DOUBLE: u64 = 7;
    pub const BYTE: u64 = 8;
    pub const SHORT: u64 = 9;
    pub const INT: u64 = 10;
    pub const LONG: u64 = 11;
    pub const STRING: u64 = 20;

    pub const CLASS: u64 = 21;
    pub const THREAD: u64 = 22;
    pub const CLASS_LOADER: u64 = 23;
    pub const FRAME_TYPE: u64 = 24;
    pub const THREAD_STATE: u64 = 25;
    pub const STACK_TRACE: u64 = 26;
    pub const STACK_FRAME: u64 = 27;
    pub const METHOD: u64 = 28;
    pub const PACKAGE: u64 = 29;
    pub const SYMBOL: u64 = 30;

    pub const LABEL: u64 = 40;
    pub const CATEGORY: u64 = 41;
    pub const TIMESTAMP: u64 = 42;
    pub const TIMESPAN: u64 = 43;
    pub const DATA_AMOUNT: u64 = 44;
    pub const MEMORY_ADDRESS: u64 = 45;

    pub const EXECUTION_SAMPLE: u64 = 100;
    pub const METHOD_SAMPLE: u64 = 101;
    pub const ACTIVE_SETTING: u64 = 102;
    pub const PROFILER_COUNTER: u64 = 103;
    pub const NATIVE_LIBRARY: u64 = 104;
    pub const ENDPOINT: u64 = 105;
    pub const ATTRIBUTE_VALUE: u64 = 31;
}

const fn primitive(id: u64, name: &'static str) -> TypeDef {
    TypeDef { id, name, kind: Kind::Primitive, label: None, category: &[], fields: &[] }
}

const fn value(id: u64, name: &'static str, label: &'static str, fields: &'static [F]) -> TypeDef {
    TypeDef { id, name, kind: Kind::Value, label: Some(label), category: &[], fields }
}

const fn simple(id: u64, name: &'static str, label: &'static str, fields: &'static [F]) -> TypeDef {
    TypeDef { id, name, kind: Kind::Simple, label: Some(label), category: &[], fields }
}

const fn annotation(id: u64, name: &'static str, fields: &'static [F]) -> TypeDef {
    TypeDef { id, name, kind: Kind::Annotation, label: None, category: &[], fields }
}

const fn event(
    id: u64,
    name: &'static str,
    label: &'static str,
    category: &'static [&'static str],
    fields: &'static [F],
) -> TypeDef {
    TypeDef { id, name, kind: Kind::Event, label: Some(label), category, fields }
}

const START_TIME: F = F::new("startTime", id::LONG, "Start Time").unit(Unit::TimestampTicks);
const EVENT_THREAD: F = F::new("eventThread", id::THREAD, "Event Thread").pooled();
const STACK_TRACE: F = F::new("stackTrace", id::STACK_TRACE, "Stack Trace").pooled();

const PROFILING: &[&str] = &["Datadog", "Profiling"];

/// The fields of both sample events (context attributes are appended per
/// recording, see [`extensions`]).
const SAMPLE_FIELDS: &[F] = &[
    START_TIME,
    EVENT_THREAD,
    STACK_TRACE,
    F::new("state", id::THREAD_STATE, "Thread State").pooled(),
    F::new("weight", id::LONG, "Sample weight"),
    F::new("spanId", id::LONG, "Span ID"),
    F::new("localRootSpanId", id::LONG, "Local Root Span ID"),
];

/// Every type of the schema, in declaration order.
pub const TYPES: &[TypeDef] = &[
    primitive(id::BOOLEAN, "boolean"),
    primitive(id::CHAR, "char"),
    primitive(id::FLOAT, "float"),
    primitive(id::DOUBLE, "double"),
    primitive(id::BYTE, "byte"),
    primitive(id::SHORT, "short"),
    primitive(id::INT, "int"),
    primitive(id::LONG, "long"),
    primitive(id::STRING, "java.lang.String"),
    value(
        id::CLASS,
        "java.lang.Class",
        "Java Class",
        &[
            F::new("classLoader", id::CLASS_LOADER, "Class Loader").pooled(),
            F::new("name", id::SYMBOL, "Name").pooled(),
            F::new("package", id::PACKAGE, "Package").pooled(),
            F::new("modifiers", id::INT, "Access Modifiers"),
            F::new("hidden", id::BOOLEAN, "Hidden"),
        ],
    ),
    value(
        id::THREAD,
        "java.lang.Thread",
        "Thread",
        &[
            F::new("osName", id::STRING, "OS Thread Name"),
            F::new("osThreadId", id::LONG, "OS Thread Id"),
            F::new("javaName", id::STRING, "Java Thread Name"),
            F::new("javaThreadId", id::LONG, "Java Thread Id"),
        ],
    ),
    value(
        id::CLASS_LOADER,
        "jdk.types.ClassLoader",
        "Java Class Loader",
        &[F::new("type", id::CLASS, "Type").pooled(), F::new("name", id::SYMBOL, "Name").pooled()],
    ),
    simple(id::FRAME_TYPE, "jdk.types.FrameType", "Frame type", &[F::new("description", id::STRING, "Description")]),
    simple(id::THREAD_STATE, "jdk.types.ThreadState", "Java Thread State", &[F::new("name", id::STRING, "Name")]),
    value(
        id::STACK_TRACE,
        "jdk.types.StackTrace",
        "Stacktrace",
        &[F::new("truncated", id::BOOLEAN, "Truncated"), F::new("frames", id::STACK_FRAME, "Stack Frames").array()],
    ),
    value(
        id::STACK_FRAME,
        "jdk.types.StackFrame",
        "Stack Frame",
        &[
            F::new("method", id::METHOD, "Java Method").pooled(),
            F::new("lineNumber", id::INT, "Line Number"),
            F::new("bytecodeIndex", id::INT, "Bytecode Index"),
            F::new("type", id::FRAME_TYPE, "Frame Type").pooled(),
        ],
    ),
    value(
        id::METHOD,
        "jdk.types.Method",
        "Java Method",
        &[
            F::new("type", id::CLASS, "Type").pooled(),
            F::new("name", id::SYMBOL, "Name").pooled(),
            F::new("descriptor", id::SYMBOL, "Descriptor").pooled(),
            F::new("modifiers", id::INT, "Access Modifiers"),
            F::new("hidden", id::BOOLEAN, "Hidden"),
        ],
    ),
    value(id::PACKAGE, "jdk.types.Package", "Package", &[F::new("name", id::SYMBOL, "Name").pooled()]),
    simple(id::SYMBOL, "jdk.types.Symbol", "Symbol", &[F::new("string", id::STRING, "String")]),
    simple(id::ATTRIBUTE_VALUE, "profiler.types.AttributeValue", "Value", &[F::new("value", id::STRING, "Value")]),
    annotation(id::LABEL, "jdk.jfr.Label", &[F::new("value", id::STRING, "")]),
    annotation(id::CATEGORY, "jdk.jfr.Category", &[F::new("value", id::STRING, "").array()]),
    annotation(id::TIMESTAMP, "jdk.jfr.Timestamp", &[F::new("value", id::STRING, "")]),
    annotation(id::TIMESPAN, "jdk.jfr.Timespan", &[F::new("value", id::STRING, "")]),
    annotation(id::DATA_AMOUNT, "jdk.jfr.DataAmount", &[F::new("value", id::STRING, "")]),
    annotation(id::MEMORY_ADDRESS, "jdk.jfr.MemoryAddress", &[]),
    event(id::EXECUTION_SAMPLE, "datadog.ExecutionSample", "Method CPU Profiling Sample", PROFILING, SAMPLE_FIELDS),
    event(id::METHOD_SAMPLE, "datadog.MethodSample", "Method Wall Profiling Sample", PROFILING, SAMPLE_FIELDS),
    event(
        id::ENDPOINT,
        "datadog.Endpoint",
        "Endpoint",
        &["Datadog"],
        &[
            START_TIME,
            F::new("duration", id::LONG, "Duration").unit(Unit::TimespanTicks),
            EVENT_THREAD,
            STACK_TRACE,
            F::new("endpoint", id::STRING, "Endpoint").pooled(),
            F::new("operation", id::STRING, "Operation").pooled(),
            F::new("localRootSpanId", id::LONG, "Local Root Span ID"),
            F::new("parentSpanId", id::LONG, "Parent Span ID"),
        ],
    ),
    event(
        id::ACTIVE_SETTING,
        "jdk.ActiveSetting",
        "Profiler Setting",
        &["Flight Recorder"],
        &[
            START_TIME,
            F::new("duration", id::LONG, "Duration").unit(Unit::TimespanTicks),
            EVENT_THREAD,
            F::new("id", id::LONG, "Event Id"),
            F::new("name", id::STRING, "Setting Name"),
            F::new("value", id::STRING, "Setting Value"),
        ],
    ),
    event(
        id::NATIVE_LIBRARY,
        "jdk.NativeLibrary",
        "Native Library",
        &["Java Virtual Machine", "Runtime"],
        &[
            START_TIME,
            F::new("name", id::STRING, "Name"),
            F::new("baseAddress", id::LONG, "Base Address").unit(Unit::Address),
            F::new("topAddress", id::LONG, "Top Address").unit(Unit::Address),
            F::new("buildId", id::STRING, "GNU Build ID"),
            F::new("loadBias", id::LONG, "Load Bias").unit(Unit::Address),
        ],
    ),
    event(
        id::PROFILER_COUNTER,
        "datadog.ProfilerCounter",
        "Profiler Internal Counter",
        &["Datadog"],
        &[START_TIME, F::new("name", id::STRING, "Name"), F::new("count", id::LONG, "Count")],
    ),
];

/// Context attribute names (`attributes=`), appended as fields to the
/// sample events: constant-pool references to attribute values.
pub fn extensions(attributes: &[String]) -> [crate::metadata::Extension<'_>; 2] {
    [id::EXECUTION_SAMPLE, id::METHOD_SAMPLE].map(|type_id| crate::metadata::Extension {
        type_id,
        field_type: id::ATTRIBUTE_VALUE,
        names: attributes,
    })
}

pub const ANNOTATIONS: crate::metadata::AnnotationIds = crate::metadata::AnnotationIds {
    label: id::LABEL,
    category: id::CATEGORY,
    timestamp: id::TIMESTAMP,
    timespan: id::TIMESPAN,
    data_amount: id::DATA_AMOUNT,
    memory_address: id::MEMORY_ADDRESS,
};

/// A sampled thread's state, as named in the `jdk.types.ThreadState` pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ThreadState {
    Runnable = 0,
    Sleeping = 1,
    Waiting = 2,
    TimedWaiting = 3,
    Parked = 4,
    TimedParked = 5,
    Blocked = 6,
    InNative = 7,
    Syscall = 8,
    Unknown = 9,
}

impl ThreadState {
    pub const ALL: [ThreadState; 10] = [
        ThreadState::Runnable,
        ThreadState::Sleeping,
        ThreadState::Waiting,
        ThreadState::TimedWaiting,
        ThreadState::Parked,
        ThreadState::TimedParked,
        ThreadState::Blocked,
        ThreadState::InNative,
        ThreadState::Syscall,
        ThreadState::Unknown,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ThreadState::Runnable => "STATE_RUNNABLE",
            ThreadState::Sleeping => "STATE_SLEEPING",
            ThreadState::Waiting => "STATE_IN_OBJECT_WAIT",
            ThreadState::TimedWaiting => "STATE_IN_OBJECT_WAIT_TIMED",
            ThreadState::Parked => "STATE_PARKED",
            ThreadState::TimedParked => "STATE_PARKED_TIMED",
            ThreadState::Blocked => "STATE_BLOCKED_ON_MONITOR_ENTER",
            ThreadState::InNative => "STATE_IN_NATIVE",
            ThreadState::Syscall => "STATE_SYSCALL",
            ThreadState::Unknown => "STATE_UNKNOWN",
        }
    }

    pub fn key(self) -> u64 {
        self as u64 + 1
    }

    pub fn from_u8(value: u8) -> ThreadState {
        ThreadState::ALL.get(usize::from(value)).copied().unwrap_or(ThreadState::Unknown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn type_ids_are_unique_and_not_reserved() {
        let mut seen = HashSet::new();
        for def in TYPES {
            assert!(def.id > 1, "{} uses a reserved id", def.name);
            assert!(seen.insert(def.id), "duplicate id {}", def.id);
        }
    }

    #[test]
    fn every_field_type_is_declared() {
        let declared: HashSet<u64> = TYPES.iter().map(|t| t.id).collect();
        for def in TYPES {
            for field in def.fields {
                assert!(declared.contains(&field.type_id), "{}.{}", def.name, field.name);
            }
        }
    }

    #[test]
    fn event_types_fit_in_one_byte_and_start_with_start_time() {
        for def in TYPES.iter().filter(|t| t.kind == Kind::Event) {
            assert!(def.id < 128, "{}", def.name);
            assert_eq!(def.fields[0].name, "startTime", "{}", def.name);
        }
    }
}
