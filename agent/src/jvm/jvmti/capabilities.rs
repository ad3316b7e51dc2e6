//! `jvmtiCapabilities`: 128 bits, one per capability in declaration order
//! (GCC allocates bit-fields from the least significant bit).

/// A capability and its bit index in `jvmtiCapabilities`.
#[derive(Clone, Copy, Debug)]
pub struct Capability {
    pub bit: usize,
    pub name: &'static str,
}

pub const CAN_GET_SOURCE_FILE_NAME: Capability = Capability { bit: 11, name: "can_get_source_file_name" };
pub const CAN_GET_LINE_NUMBERS: Capability = Capability { bit: 12, name: "can_get_line_numbers" };
pub const CAN_GENERATE_ALL_CLASS_HOOK_EVENTS: Capability =
    Capability { bit: 26, name: "can_generate_all_class_hook_events" };
pub const CAN_GENERATE_COMPILED_METHOD_LOAD_EVENTS: Capability =
    Capability { bit: 27, name: "can_generate_compiled_method_load_events" };

/// Contended monitor events (`lock=`).
pub const CAN_GENERATE_MONITOR_EVENTS: Capability = Capability { bit: 28, name: "can_generate_monitor_events" };
/// Garbage collection events (`live`: objects' ages).
pub const CAN_GENERATE_GARBAGE_COLLECTION_EVENTS: Capability =
    Capability { bit: 31, name: "can_generate_garbage_collection_events" };
/// Allocation sampling (`alloc=`): JDK 11+ grant it at load and attach.
pub const CAN_GENERATE_SAMPLED_OBJECT_ALLOC_EVENTS: Capability =
    Capability { bit: 43, name: "can_generate_sampled_object_alloc_events" };

/// Rewriting a loaded class (`LockSupport`, to time virtual threads'
/// lock waits, JDK 21+). Taken at load, as async-profiler and the JDK's
/// recorder take it: taken later, HotSpot's JIT has not recorded which
/// code depends on which method, and the first rewrite discards every
/// compiled method.
pub const CAN_RETRANSFORM_CLASSES: Capability = Capability { bit: 37, name: "can_retransform_classes" };

/// Every capability the agent requests at load.
pub const REQUESTED: &[Capability] = &[
    CAN_GET_SOURCE_FILE_NAME,
    CAN_GET_LINE_NUMBERS,
    CAN_GENERATE_ALL_CLASS_HOOK_EVENTS,
    CAN_GENERATE_COMPILED_METHOD_LOAD_EVENTS,
    CAN_GENERATE_MONITOR_EVENTS,
    CAN_GENERATE_GARBAGE_COLLECTION_EVENTS,
    CAN_GENERATE_SAMPLED_OBJECT_ALLOC_EVENTS,
    CAN_RETRANSFORM_CLASSES,
];

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Capabilities {
    words: [u32; 4],
}

impl Capabilities {
    pub fn with(mut self, capability: Capability) -> Self {
        self.words[capability.bit / 32] |= 1 << (capability.bit % 32);
        self
    }

    pub fn requested() -> Self {
        REQUESTED.iter().fold(Self::default(), |caps, &c| caps.with(c))
    }
}
