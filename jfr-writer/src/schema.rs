//! The types this profiler writes, in two dialects ([`Dialect`]): the
//! value types the JDK defines (so `jdk.jfr.consumer`, JDK Mission Control
//! and async-profiler's converter understand stacks, threads and methods),
//! plus the events — the JDK's and async-profiler's names by default, the
//! Datadog profiler's `datadog.*` names in [`Dialect::Datadog`].
//!
//! The JDK dialect gives `jdk.ExecutionSample` and
//! `profiler.WallClockSample` exactly the JDK's and async-profiler's fields
//! (async-profiler's reader reads them by position and cannot skip more);
//! a sample's trace context follows it as a `jvmprofiler.SampleContext`
//! event. The Datadog dialect keeps the context in the sample event.
//! Type ids are fixed for every chunk; 0 and 1 are reserved for the
//! metadata and checkpoint events. Event ids stay below 128 so an event's
//! type takes one byte.

use crate::metadata::{FieldDef as F, Kind, TypeDef, Unit};
pub use frames::ThreadState;

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
    pub const SAMPLE_CONTEXT: u64 = 106;
    pub const ALLOCATION_SAMPLE: u64 = 107;
    pub const MONITOR_ENTER: u64 = 108;
    pub const THREAD_PARK: u64 = 109;
    pub const LIVE_OBJECT: u64 = 110;
    pub const MALLOC: u64 = 111;
    pub const FREE: u64 = 112;
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

/// The names and fields a recording's events are declared with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// `jdk.ExecutionSample`, async-profiler's `profiler.WallClockSample`
    /// and our own events as `jvmprofiler.*` (a namespace no other writer
    /// uses): what the JDK's tools and async-profiler's read.
    #[default]
    Jdk,
    /// The Datadog profiler's `datadog.*` events, for its backend.
    Datadog,
}

impl Dialect {
    pub const ALL: [Dialect; 2] = [Dialect::Jdk, Dialect::Datadog];

    /// The option value (`jfrdialect=`).
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Jdk => "jdk",
            Dialect::Datadog => "datadog",
        }
    }

    pub fn from_name(name: &str) -> Option<Dialect> {
        Dialect::ALL.into_iter().find(|d| d.name() == name)
    }

    /// The state a CPU sample carries: async-profiler's `STATE_DEFAULT` in
    /// the JDK dialect (its converter's `--cpu` selects samples by it).
    pub fn cpu_state(self) -> ThreadState {
        match self {
            Dialect::Jdk => ThreadState::Default,
            Dialect::Datadog => ThreadState::Runnable,
        }
    }
}

const SAMPLED_THREAD: F = F::new("sampledThread", id::THREAD, "Thread").pooled();
const STATE: F = F::new("state", id::THREAD_STATE, "Thread State").pooled();
const SPAN_ID: F = F::new("spanId", id::LONG, "Span ID");
const LOCAL_ROOT_SPAN_ID: F = F::new("localRootSpanId", id::LONG, "Local Root Span ID");

/// The names of the event types this writer declares, for the readers of
/// its recordings to use rather than spell. They are external formats'
/// names (the JDK's, async-profiler's, the Datadog profiler's, whose
/// readers know them), never to be renamed.
pub mod names {
    pub const EXECUTION_SAMPLE: &str = "jdk.ExecutionSample";
    pub const WALL_CLOCK_SAMPLE: &str = "profiler.WallClockSample";
    pub const ALLOCATION_SAMPLE: &str = "jdk.ObjectAllocationSample";
    pub const LIVE_OBJECT: &str = "profiler.LiveObject";
    pub const MONITOR_ENTER: &str = "jdk.JavaMonitorEnter";
    pub const THREAD_PARK: &str = "jdk.ThreadPark";
    pub const MALLOC: &str = "profiler.Malloc";
    pub const FREE: &str = "profiler.Free";
    pub const COUNTER: &str = "jvmprofiler.Counter";
    pub const ENDPOINT: &str = "jvmprofiler.Endpoint";
    pub const SAMPLE_CONTEXT: &str = "jvmprofiler.SampleContext";
    pub const ACTIVE_SETTING: &str = "jdk.ActiveSetting";
    pub const NATIVE_LIBRARY: &str = "jdk.NativeLibrary";
    pub const DATADOG_EXECUTION_SAMPLE: &str = "datadog.ExecutionSample";
    pub const DATADOG_METHOD_SAMPLE: &str = "datadog.MethodSample";
    pub const DATADOG_OBJECT_SAMPLE: &str = "datadog.ObjectSample";
    pub const DATADOG_HEAP_LIVE_OBJECT: &str = "datadog.HeapLiveObject";
    pub const DATADOG_NATIVE_ALLOCATION: &str = "datadog.NativeMemoryAllocation";
    pub const DATADOG_COUNTER: &str = "datadog.ProfilerCounter";
    pub const DATADOG_ENDPOINT: &str = "datadog.Endpoint";
    /// The JDK's own allocation events: recordings the JDK wrote hold
    /// them, and the symbolizer reads them, but this writer never
    /// declares or writes them.
    pub const ALLOCATION_IN_NEW_TLAB: &str = "jdk.ObjectAllocationInNewTLAB";
    pub const ALLOCATION_OUTSIDE_TLAB: &str = "jdk.ObjectAllocationOutsideTLAB";
}

/// Our events' categories: async-profiler's for the samples (JMC groups
/// them with the JDK's), ours for the rest.
const JDK_PROFILING: &[&str] = &["Java Virtual Machine", "Profiling"];
const PROFILER: &[&str] = &["Profiler"];
const DATADOG_PROFILING: &[&str] = &["Datadog", "Profiling"];
const DATADOG: &[&str] = &["Datadog"];

/// The sample events' fields. Context attributes are appended per
/// recording (see [`extensions`]) to `jvmprofiler.SampleContext` and the
/// Datadog samples.
const JDK_CPU_SAMPLE: &[F] = &[START_TIME, SAMPLED_THREAD, STACK_TRACE, STATE];
const JDK_WALL_SAMPLE: &[F] = &[START_TIME, SAMPLED_THREAD, STACK_TRACE, STATE, F::new("samples", id::INT, "Samples")];
const SAMPLE_CONTEXT: &[F] = &[START_TIME, SAMPLED_THREAD, SPAN_ID, LOCAL_ROOT_SPAN_ID];
const OBJECT_CLASS: F = F::new("objectClass", id::CLASS, "Object Class").pooled();
const ALLOCATION_WEIGHT: F = F::new("weight", id::LONG, "Sample Weight").unit(Unit::Bytes);
const JDK_ALLOCATION_SAMPLE: &[F] = &[START_TIME, EVENT_THREAD, STACK_TRACE, OBJECT_CLASS, ALLOCATION_WEIGHT];
/// `datadog.ObjectSample`: the Datadog profiler's fields (`weight`: the
/// objects a sample stands for, a float).
const DATADOG_OBJECT_SAMPLE: &[F] = &[
    START_TIME,
    EVENT_THREAD,
    STACK_TRACE,
    OBJECT_CLASS,
    F::new("size", id::LONG, "Object Size").unit(Unit::Bytes),
    DATADOG_OBJECT_WEIGHT,
    SPAN_ID,
    LOCAL_ROOT_SPAN_ID,
];
const DATADOG_OBJECT_WEIGHT: F = F::new("weight", id::FLOAT, "Sample weight");
/// `profiler.LiveObject`: async-profiler's fields, in its order (its
/// converter reads them by position).
const JDK_LIVE_OBJECT: &[F] = &[
    START_TIME,
    EVENT_THREAD,
    STACK_TRACE,
    OBJECT_CLASS,
    F::new("allocationSize", id::LONG, "Allocation Size").unit(Unit::Bytes),
    F::new("allocationTime", id::LONG, "Allocation Time").unit(Unit::TimestampTicks),
];
/// `datadog.HeapLiveObject`: the Datadog profiler's fields (`weight`: the
/// objects a sample stands for; `age`: garbage collections survived).
const DATADOG_LIVE_OBJECT: &[F] = &[
    START_TIME,
    EVENT_THREAD,
    STACK_TRACE,
    OBJECT_CLASS,
    F::new("age", id::LONG, "Age"),
    F::new("size", id::LONG, "Original Size").unit(Unit::Bytes),
    DATADOG_OBJECT_WEIGHT,
    SPAN_ID,
    LOCAL_ROOT_SPAN_ID,
];
/// The JDK's category of allocation and lock events.
const JAVA_APPLICATION: &[&str] = &["Java Application"];
/// `jdk.JavaMonitorEnter`, the JDK's fields, in both dialects.
const MONITOR_ENTER: TypeDef = event(
    id::MONITOR_ENTER,
    names::MONITOR_ENTER,
    "Java Monitor Blocked",
    JAVA_APPLICATION,
    &[
        START_TIME,
        F::new("duration", id::LONG, "Duration").unit(Unit::TimespanTicks),
        EVENT_THREAD,
        STACK_TRACE,
        F::new("monitorClass", id::CLASS, "Monitor Class").pooled(),
        F::new("previousOwner", id::THREAD, "Previous Monitor Owner").pooled(),
        F::new("address", id::LONG, "Monitor Address").unit(Unit::Address),
    ],
);
/// `jdk.ThreadPark`, the JDK's fields (async-profiler's order, which its
/// converter reads by position), in both dialects.
const THREAD_PARK: TypeDef = event(
    id::THREAD_PARK,
    names::THREAD_PARK,
    "Java Thread Park",
    JAVA_APPLICATION,
    &[
        START_TIME,
        F::new("duration", id::LONG, "Duration").unit(Unit::TimespanTicks),
        EVENT_THREAD,
        STACK_TRACE,
        F::new("parkedClass", id::CLASS, "Class Parked On").pooled(),
        F::new("timeout", id::LONG, "Park Timeout").unit(Unit::TimespanNanos),
        F::new("until", id::LONG, "Park Until").unit(Unit::TimestampMillis),
        F::new("address", id::LONG, "Address of Object Parked").unit(Unit::Address),
    ],
);
/// async-profiler's category of native memory events.
const NATIVE_MEMORY: &[&str] = &["Java Virtual Machine", "Native Memory"];
const ADDRESS: F = F::new("address", id::LONG, "Address").unit(Unit::Address);
const SIZE: F = F::new("size", id::LONG, "Size").unit(Unit::Bytes);
/// `profiler.Malloc` and `profiler.Free`: async-profiler's fields, in its
/// order (its converter reads them by position); a free has no stack.
const JDK_MALLOC: &[F] = &[START_TIME, EVENT_THREAD, STACK_TRACE, ADDRESS, SIZE];
const JDK_FREE: &[F] = &[START_TIME, EVENT_THREAD, STACK_TRACE, ADDRESS];
/// `datadog.NativeMemoryAllocation`: the Datadog profiler's fields
/// (`weight`: the allocations a sample stands for, a float).
const DATADOG_MALLOC: &[F] =
    &[START_TIME, EVENT_THREAD, STACK_TRACE, ADDRESS, SIZE, DATADOG_OBJECT_WEIGHT, SPAN_ID, LOCAL_ROOT_SPAN_ID];
const DATADOG_SAMPLE: &[F] = &[
    START_TIME,
    EVENT_THREAD,
    STACK_TRACE,
    STATE,
    F::new("weight", id::LONG, "Sample weight"),
    SPAN_ID,
    LOCAL_ROOT_SPAN_ID,
];

const ENDPOINT_FIELDS: &[F] = &[
    START_TIME,
    F::new("duration", id::LONG, "Duration").unit(Unit::TimespanTicks),
    EVENT_THREAD,
    STACK_TRACE,
    F::new("endpoint", id::STRING, "Endpoint").pooled(),
    F::new("operation", id::STRING, "Operation").pooled(),
    F::new("localRootSpanId", id::LONG, "Local Root Span ID"),
    F::new("parentSpanId", id::LONG, "Parent Span ID"),
];

const COUNTER_FIELDS: &[F] = &[START_TIME, F::new("name", id::STRING, "Name"), F::new("count", id::LONG, "Count")];

/// The events whose name and fields depend on the dialect.
const JDK_EVENTS: &[TypeDef] = &[
    event(id::EXECUTION_SAMPLE, names::EXECUTION_SAMPLE, "Method Profiling Sample", JDK_PROFILING, JDK_CPU_SAMPLE),
    event(id::METHOD_SAMPLE, names::WALL_CLOCK_SAMPLE, "Wall Clock Sample", JDK_PROFILING, JDK_WALL_SAMPLE),
    event(id::ENDPOINT, names::ENDPOINT, "Endpoint", PROFILER, ENDPOINT_FIELDS),
    event(id::PROFILER_COUNTER, names::COUNTER, "Profiler Internal Counter", PROFILER, COUNTER_FIELDS),
    event(id::SAMPLE_CONTEXT, names::SAMPLE_CONTEXT, "Sample Trace Context", PROFILER, SAMPLE_CONTEXT),
    event(
        id::ALLOCATION_SAMPLE,
        names::ALLOCATION_SAMPLE,
        "Object Allocation Sample",
        JAVA_APPLICATION,
        JDK_ALLOCATION_SAMPLE,
    ),
    MONITOR_ENTER,
    THREAD_PARK,
    event(id::LIVE_OBJECT, names::LIVE_OBJECT, "Live Object", JAVA_APPLICATION, JDK_LIVE_OBJECT),
    event(id::MALLOC, names::MALLOC, "malloc", NATIVE_MEMORY, JDK_MALLOC),
    event(id::FREE, names::FREE, "free", NATIVE_MEMORY, JDK_FREE),
];

const DATADOG_EVENTS: &[TypeDef] = &[
    event(
        id::EXECUTION_SAMPLE,
        names::DATADOG_EXECUTION_SAMPLE,
        "Method CPU Profiling Sample",
        DATADOG_PROFILING,
        DATADOG_SAMPLE,
    ),
    event(
        id::METHOD_SAMPLE,
        names::DATADOG_METHOD_SAMPLE,
        "Method Wall Profiling Sample",
        DATADOG_PROFILING,
        DATADOG_SAMPLE,
    ),
    event(id::ENDPOINT, names::DATADOG_ENDPOINT, "Endpoint", DATADOG, ENDPOINT_FIELDS),
    event(id::PROFILER_COUNTER, names::DATADOG_COUNTER, "Profiler Internal Counter", DATADOG, COUNTER_FIELDS),
    event(
        id::ALLOCATION_SAMPLE,
        names::DATADOG_OBJECT_SAMPLE,
        "Allocation Sample",
        DATADOG_PROFILING,
        DATADOG_OBJECT_SAMPLE,
    ),
    event(id::LIVE_OBJECT, names::DATADOG_HEAP_LIVE_OBJECT, "Heap Live Object", DATADOG_PROFILING, DATADOG_LIVE_OBJECT),
    event(id::MALLOC, names::DATADOG_NATIVE_ALLOCATION, "Native Memory Allocation", DATADOG_PROFILING, DATADOG_MALLOC),
    MONITOR_ENTER,
    THREAD_PARK,
];

/// Every type of a dialect, in declaration order.
pub fn types(dialect: Dialect) -> Vec<TypeDef> {
    let events = match dialect {
        Dialect::Jdk => JDK_EVENTS,
        Dialect::Datadog => DATADOG_EVENTS,
    };
    COMMON.iter().chain(events).copied().collect()
}

/// The types both dialects declare alike.
const COMMON: &[TypeDef] = &[
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
    event(
        id::ACTIVE_SETTING,
        names::ACTIVE_SETTING,
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
        names::NATIVE_LIBRARY,
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
];

/// Context attribute names (`attributes=`), appended as fields to the
/// events that carry a sample's context: constant-pool references to
/// attribute values.
pub fn extensions(dialect: Dialect, attributes: &[String]) -> Vec<crate::metadata::Extension<'_>> {
    let carriers: &[u64] = match dialect {
        Dialect::Jdk => &[id::SAMPLE_CONTEXT],
        Dialect::Datadog => {
            &[id::EXECUTION_SAMPLE, id::METHOD_SAMPLE, id::ALLOCATION_SAMPLE, id::LIVE_OBJECT, id::MALLOC]
        }
    };
    carriers
        .iter()
        .map(|&type_id| crate::metadata::Extension { type_id, field_type: id::ATTRIBUTE_VALUE, names: attributes })
        .collect()
}

pub const ANNOTATIONS: crate::metadata::AnnotationIds = crate::metadata::AnnotationIds {
    label: id::LABEL,
    category: id::CATEGORY,
    timestamp: id::TIMESTAMP,
    timespan: id::TIMESPAN,
    data_amount: id::DATA_AMOUNT,
    memory_address: id::MEMORY_ADDRESS,
};

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn type_ids_are_unique_and_not_reserved() {
        for dialect in Dialect::ALL {
            let mut seen = HashSet::new();
            for def in types(dialect) {
                assert!(def.id > 1, "{} uses a reserved id", def.name);
                assert!(seen.insert(def.id), "duplicate id {}", def.id);
            }
        }
    }

    #[test]
    fn every_field_type_is_declared() {
        for dialect in Dialect::ALL {
            let types = types(dialect);
            let declared: HashSet<u64> = types.iter().map(|t| t.id).collect();
            for def in &types {
                for field in def.fields {
                    assert!(declared.contains(&field.type_id), "{}.{}", def.name, field.name);
                }
            }
        }
    }

    #[test]
    fn event_types_fit_in_one_byte_and_start_with_start_time() {
        for dialect in Dialect::ALL {
            for def in types(dialect).iter().filter(|t| t.kind == Kind::Event) {
                assert!(def.id < 128, "{}", def.name);
                assert_eq!(def.fields[0].name, "startTime", "{}", def.name);
            }
        }
    }

    #[test]
    fn the_jdk_dialect_declares_samples_as_the_jdk_and_async_profiler_do() {
        let types = types(Dialect::Jdk);
        let fields = |name: &str| -> Vec<&str> {
            types.iter().find(|t| t.name == name).unwrap().fields.iter().map(|f| f.name).collect()
        };
        assert_eq!(fields("jdk.ExecutionSample"), ["startTime", "sampledThread", "stackTrace", "state"]);
        assert_eq!(
            fields("profiler.WallClockSample"),
            ["startTime", "sampledThread", "stackTrace", "state", "samples"]
        );
        assert_eq!(fields("profiler.Malloc"), ["startTime", "eventThread", "stackTrace", "address", "size"]);
        assert_eq!(fields("profiler.Free"), ["startTime", "eventThread", "stackTrace", "address"]);
        assert_eq!(Dialect::from_name("jdk"), Some(Dialect::Jdk));
        assert_eq!(Dialect::from_name("datadog"), Some(Dialect::Datadog));
        assert_eq!(Dialect::from_name("dd"), None);
    }
}
