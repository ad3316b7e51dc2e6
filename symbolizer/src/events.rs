//! The kinds of events `symbolize` turns into profiles (`--event`), the
//! JFR event types of each, and what weighs an event of each type. One
//! profile shows one kind: CPU time, wall-clock time, allocated bytes, live
//! bytes and lock waits are never added together.

use frames::FrameType;
use jfr_writer::schema::names;
use std::fmt;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    /// The default.
    #[default]
    Cpu,
    Wall,
    Alloc,
    /// Sampled objects still alive at a dump (`live`).
    Live,
    Lock,
}

/// What a sample's weight counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Sampling intervals.
    Samples,
    Bytes,
    Nanoseconds,
}

impl Unit {
    pub fn name(self) -> &'static str {
        match self {
            Unit::Samples => "samples",
            Unit::Bytes => "bytes",
            Unit::Nanoseconds => "ns",
        }
    }
}

/// How an event of one type is weighed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weight {
    /// The value of the first of these fields the event has, else 1, and
    /// at least 1 (a sample stands for at least one interval).
    Intervals(&'static [&'static str]),
    /// A size in bytes.
    Bytes(&'static str),
    /// A size in bytes times the objects the sample stands for (the Datadog
    /// profiler's `float` weight).
    ScaledBytes { size: &'static str, objects: &'static str },
    /// The event's `duration`, converted from ticks to nanoseconds.
    Duration,
}

/// A JFR event type `symbolize` reads as a sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventType {
    pub name: &'static str,
    pub kind: EventKind,
    pub weight: Weight,
    /// The field naming the class that ends the stack (the allocated
    /// object's, the monitor's, the object parked on), as async-profiler's
    /// converter shows it, and the frame type it colours that class with.
    pub class_field: Option<(&'static str, FrameType)>,
}

/// async-profiler colours a TLAB allocation's class and a lock's class as
/// inlined frames, other allocations' as kernel frames.
const IN_TLAB: FrameType = FrameType::Inlined;
const OUTSIDE_TLAB: FrameType = FrameType::Kernel;
const LOCK_CLASS: FrameType = FrameType::Inlined;

/// Every event type read as a sample. The weights follow async-profiler's
/// converter (`--total`): a TLAB allocation weighs the TLAB's size, one
/// outside a TLAB its own size, a JDK allocation sample its `weight`.
pub const EVENT_TYPES: [EventType; 12] = [
    EventType {
        name: names::EXECUTION_SAMPLE,
        kind: EventKind::Cpu,
        weight: Weight::Intervals(&["weight"]),
        class_field: None,
    },
    EventType {
        name: names::DATADOG_EXECUTION_SAMPLE,
        kind: EventKind::Cpu,
        weight: Weight::Intervals(&["weight"]),
        class_field: None,
    },
    EventType {
        name: names::WALL_CLOCK_SAMPLE,
        kind: EventKind::Wall,
        weight: Weight::Intervals(&["samples", "weight"]),
        class_field: None,
    },
    EventType {
        name: names::DATADOG_METHOD_SAMPLE,
        kind: EventKind::Wall,
        weight: Weight::Intervals(&["weight"]),
        class_field: None,
    },
    EventType {
        name: names::ALLOCATION_SAMPLE,
        kind: EventKind::Alloc,
        weight: Weight::Bytes("weight"),
        class_field: Some(("objectClass", OUTSIDE_TLAB)),
    },
    EventType {
        name: names::DATADOG_OBJECT_SAMPLE,
        kind: EventKind::Alloc,
        weight: Weight::ScaledBytes { size: "size", objects: "weight" },
        class_field: Some(("objectClass", OUTSIDE_TLAB)),
    },
    EventType {
        name: "jdk.ObjectAllocationInNewTLAB",
        kind: EventKind::Alloc,
        weight: Weight::Bytes("tlabSize"),
        class_field: Some(("objectClass", IN_TLAB)),
    },
    EventType {
        name: "jdk.ObjectAllocationOutsideTLAB",
        kind: EventKind::Alloc,
        weight: Weight::Bytes("allocationSize"),
        class_field: Some(("objectClass", OUTSIDE_TLAB)),
    },
    EventType {
        name: names::LIVE_OBJECT,
        kind: EventKind::Live,
        weight: Weight::Bytes("allocationSize"),
        class_field: Some(("objectClass", OUTSIDE_TLAB)),
    },
    EventType {
        name: names::DATADOG_HEAP_LIVE_OBJECT,
        kind: EventKind::Live,
        weight: Weight::ScaledBytes { size: "size", objects: "weight" },
        class_field: Some(("objectClass", OUTSIDE_TLAB)),
    },
    EventType {
        name: names::MONITOR_ENTER,
        kind: EventKind::Lock,
        weight: Weight::Duration,
        class_field: Some(("monitorClass", LOCK_CLASS)),
    },
    EventType {
        name: names::THREAD_PARK,
        kind: EventKind::Lock,
        weight: Weight::Duration,
        class_field: Some(("parkedClass", LOCK_CLASS)),
    },
];

impl EventKind {
    pub const ALL: [EventKind; 5] =
        [EventKind::Cpu, EventKind::Wall, EventKind::Alloc, EventKind::Live, EventKind::Lock];

    /// The `--event` value.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Cpu => "cpu",
            EventKind::Wall => "wall",
            EventKind::Alloc => "alloc",
            EventKind::Live => "live",
            EventKind::Lock => "lock",
        }
    }

    pub fn from_name(name: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.name() == name)
    }

    pub fn unit(self) -> Unit {
        match self {
            EventKind::Cpu | EventKind::Wall => Unit::Samples,
            EventKind::Alloc | EventKind::Live => Unit::Bytes,
            EventKind::Lock => Unit::Nanoseconds,
        }
    }

    /// What a profile of this kind shows, for titles.
    pub fn describe(self) -> &'static str {
        match self {
            EventKind::Cpu => "CPU time",
            EventKind::Wall => "wall-clock time",
            EventKind::Alloc => "allocated bytes",
            EventKind::Live => "live bytes",
            EventKind::Lock => "lock waits",
        }
    }

    /// The event types of this kind.
    pub fn event_types(self) -> impl Iterator<Item = &'static str> {
        EVENT_TYPES.iter().filter(move |t| t.kind == self).map(|t| t.name)
    }

    /// The accepted `--event` values, for messages.
    pub fn accepted() -> String {
        EventKind::ALL.map(EventKind::name).join(", ")
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The event type named `name`, if it is one read as a sample.
pub fn event_type(name: &str) -> Option<&'static EventType> {
    EVENT_TYPES.iter().find(|t| t.name == name)
}

/// A class as Java source names it, from its JVM name: `java/lang/String`
/// → `java.lang.String`, `[B` → `byte[]`, `[[Ljava/lang/Object;` →
/// `java.lang.Object[][]` (as async-profiler's converter names allocated
/// classes).
pub fn java_class_name(internal: &str) -> String {
    let depth = internal.bytes().take_while(|&b| b == b'[').count();
    let element = &internal[depth..];
    let base = if depth == 0 {
        element.replace('/', ".")
    } else {
        match element {
            "B" => "byte".to_owned(),
            "C" => "char".to_owned(),
            "S" => "short".to_owned(),
            "I" => "int".to_owned(),
            "J" => "long".to_owned(),
            "Z" => "boolean".to_owned(),
            "F" => "float".to_owned(),
            "D" => "double".to_owned(),
            other => other.strip_prefix('L').and_then(|c| c.strip_suffix(';')).unwrap_or(other).replace('/', "."),
        }
    };
    base + &"[]".repeat(depth)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_named_as_the_option_spells_them() {
        for kind in EventKind::ALL {
            assert_eq!(EventKind::from_name(kind.name()), Some(kind));
        }
        assert_eq!(EventKind::from_name("CPU"), None);
        assert_eq!(EventKind::from_name("alloc,lock"), None);
        assert_eq!(EventKind::accepted(), "cpu, wall, alloc, live, lock");
    }

    #[test]
    fn every_event_type_belongs_to_one_kind() {
        let of = |kind: EventKind| kind.event_types().collect::<Vec<_>>();
        assert_eq!(of(EventKind::Cpu), ["jdk.ExecutionSample", "datadog.ExecutionSample"]);
        assert_eq!(of(EventKind::Wall), ["profiler.WallClockSample", "datadog.MethodSample"]);
        assert_eq!(
            of(EventKind::Alloc),
            [
                "jdk.ObjectAllocationSample",
                "datadog.ObjectSample",
                "jdk.ObjectAllocationInNewTLAB",
                "jdk.ObjectAllocationOutsideTLAB"
            ]
        );
        assert_eq!(of(EventKind::Live), ["profiler.LiveObject", "datadog.HeapLiveObject"]);
        assert_eq!(of(EventKind::Lock), ["jdk.JavaMonitorEnter", "jdk.ThreadPark"]);
        assert_eq!(event_type("jdk.ThreadPark").map(|t| t.weight), Some(Weight::Duration));
        assert_eq!(event_type("jdk.ObjectAllocationInNewTLAB").map(|t| t.weight), Some(Weight::Bytes("tlabSize")));
        assert_eq!(event_type("jdk.CPULoad"), None);
    }

    #[test]
    fn classes_are_named_as_in_java_source() {
        assert_eq!(java_class_name("java/lang/String"), "java.lang.String");
        assert_eq!(java_class_name("Main"), "Main");
        assert_eq!(java_class_name("[B"), "byte[]");
        assert_eq!(java_class_name("[[J"), "long[][]");
        assert_eq!(java_class_name("[Ljava/lang/Object;"), "java.lang.Object[]");
        assert_eq!(java_class_name("[[Lapp/Node$Leaf;"), "app.Node$Leaf[][]");
    }
}
