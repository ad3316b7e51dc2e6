//! The kinds of events `symbolize` turns into profiles (`--event`), the
//! JFR event types of each, and what weighs an event of each type. One
//! profile shows one kind: CPU time, wall-clock time, allocated bytes, live
//! bytes, lock waits and native allocated bytes are never added together.

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
    /// Native allocations (`malloc` and its kin), freed or not.
    NativeMem,
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
    /// A size in bytes, of an allocation sampled as a Poisson process over
    /// bytes whose mean gap is the chunk's [`NATIVEMEM_SETTING`]: read as
    /// the size, weighed by the profile ([`sampled_bytes`]).
    SampledBytes(&'static str),
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

/// The setting naming the bytes between sampled native allocations: `"524288
/// bytes"` as we write it, `"524288"` as async-profiler does (its `0`: every
/// allocation recorded).
pub const NATIVEMEM_SETTING: &str = "nativemem";

/// The bytes a native allocation of `size` bytes sampled at a mean gap of
/// `interval` bytes stands for: the allocation was sampled with probability
/// `1 - exp(-size/interval)`, so `size / (1 - exp(-size/interval))` (about
/// `interval` for a small allocation, `size` for a large one). An interval
/// of at most 1 byte means every allocation was recorded: `size`.
pub fn sampled_bytes(size: u64, interval: u64) -> u64 {
    if interval <= 1 || size == 0 {
        return size;
    }
    let size = size as f64;
    let probability = -(-size / interval as f64).exp_m1();
    (size / probability).round() as u64
}

/// Every event type read as a sample. The weights follow async-profiler's
/// converter (`--total`): a TLAB allocation weighs the TLAB's size, one
/// outside a TLAB its own size, a JDK allocation sample its `weight`, a
/// native allocation recorded at every allocation its size.
pub const EVENT_TYPES: [EventType; 14] = [
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
        name: names::ALLOCATION_IN_NEW_TLAB,
        kind: EventKind::Alloc,
        weight: Weight::Bytes("tlabSize"),
        class_field: Some(("objectClass", IN_TLAB)),
    },
    EventType {
        name: names::ALLOCATION_OUTSIDE_TLAB,
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
    // async-profiler's (and ours in the JDK dialect): `address`, `size`.
    // Its `profiler.Free` (time, thread, no stack, `address`) is no
    // sample: it ends an allocation (`--leak`).
    EventType {
        name: names::MALLOC,
        kind: EventKind::NativeMem,
        weight: Weight::SampledBytes("size"),
        class_field: None,
    },
    // `address`, `size`, and the allocations it stands for as a float
    // `weight`; the Datadog dialect has no free event.
    EventType {
        name: names::DATADOG_NATIVE_ALLOCATION,
        kind: EventKind::NativeMem,
        weight: Weight::ScaledBytes { size: "size", objects: "weight" },
        class_field: None,
    },
];

impl EventKind {
    pub const ALL: [EventKind; 6] =
        [EventKind::Cpu, EventKind::Wall, EventKind::Alloc, EventKind::Live, EventKind::Lock, EventKind::NativeMem];

    /// The `--event` value.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Cpu => "cpu",
            EventKind::Wall => "wall",
            EventKind::Alloc => "alloc",
            EventKind::Live => "live",
            EventKind::Lock => "lock",
            EventKind::NativeMem => "nativemem",
        }
    }

    pub fn from_name(name: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.name() == name)
    }

    pub fn unit(self) -> Unit {
        match self {
            EventKind::Cpu | EventKind::Wall => Unit::Samples,
            EventKind::Alloc | EventKind::Live | EventKind::NativeMem => Unit::Bytes,
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
            EventKind::NativeMem => "native allocated bytes",
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
        assert_eq!(EventKind::accepted(), "cpu, wall, alloc, live, lock, nativemem");
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
        assert_eq!(of(EventKind::NativeMem), ["profiler.Malloc", "datadog.NativeMemoryAllocation"]);
        assert_eq!(event_type(names::MALLOC).map(|t| t.weight), Some(Weight::SampledBytes("size")));
        // A free ends an allocation; it is no sample.
        assert_eq!(event_type(names::FREE), None);
        assert_eq!(event_type("jdk.ThreadPark").map(|t| t.weight), Some(Weight::Duration));
        assert_eq!(event_type("jdk.ObjectAllocationInNewTLAB").map(|t| t.weight), Some(Weight::Bytes("tlabSize")));
        assert_eq!(event_type("jdk.CPULoad"), None);
    }

    /// A sampled native allocation stands for about the interval when
    /// small, its own size when large; recorded at every allocation (an
    /// interval of 0 or 1 byte), its size.
    #[test]
    fn native_allocations_weigh_what_their_sampling_stands_for() {
        const KIB: u64 = 1024;
        let interval = 512 * KIB;
        // 16 / (1 - exp(-16/524288)) = 524296.0
        assert_eq!(sampled_bytes(16, interval), 524_296);
        // 512 KiB: 524288 / (1 - 1/e) = 829411.4
        assert_eq!(sampled_bytes(interval, interval), 829_411);
        // 64 MiB: exp(-128) is nothing next to 1.
        assert_eq!(sampled_bytes(64 * 1024 * KIB, interval), 64 * 1024 * KIB);
        for every in [0, 1] {
            assert_eq!(sampled_bytes(16, every), 16);
        }
        assert_eq!(sampled_bytes(0, interval), 0);
        // Always at least the size, never more than size + interval.
        for size in [1, 100, 4096, 300_000, 1 << 20, 1 << 24] {
            let weight = sampled_bytes(size, interval);
            assert!(weight >= size && weight <= size + interval, "{size}: {weight}");
        }
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
