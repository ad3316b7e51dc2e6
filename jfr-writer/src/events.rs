//! Event records. Each writes its fields in the order the schema declares
//! (the same in both dialects; names are in [`crate::schema`]).

use crate::buffer::ByteBuf;
use crate::schema::{id, ThreadState};

/// An event that can be appended to a chunk.
pub trait Event {
    const TYPE_ID: u64;
    fn write_fields(&self, out: &mut ByteBuf);
}

/// How a writer spells a sample's stack trace: the key itself, or a
/// provisional id of fixed width, replaced in place once the chunk's keys
/// are known ([`crate::ChunkWriter::renumber_stack_traces`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StackIds {
    Final,
    Provisional,
}

impl StackIds {
    fn put(self, out: &mut ByteBuf, stack_trace: u64) {
        match self {
            StackIds::Final => out.put_varint(stack_trace),
            StackIds::Provisional => out.put_varint_padded(stack_trace),
        }
    }
}

/// Where a sample event of `type_id` has its stack trace: after how many
/// varint fields (following the type id). `None` for events that are not
/// samples. Must agree with [`Sample::write_head`] and `write_wait`.
pub(crate) fn stack_field(type_id: u64) -> Option<usize> {
    match type_id {
        // start time, sampled thread
        id::EXECUTION_SAMPLE | id::METHOD_SAMPLE | id::ALLOCATION_SAMPLE | id::LIVE_OBJECT | id::MALLOC => Some(2),
        // start time, duration, event thread
        id::MONITOR_ENTER | id::THREAD_PARK => Some(3),
        // A free has no stack.
        _ => None,
    }
}

/// Samples a JDK-dialect CPU sample is written at most: one per interval
/// its weight stands for (ctimer overruns).
pub const MAX_REPEAT: u64 = 1000;

/// What a sample measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleKind {
    Cpu,
    Wall,
    /// A sampled heap allocation of `size` bytes of `class` (a class pool
    /// key); the sample's weight is the bytes it stands for.
    Alloc {
        class: u64,
        size: u64,
    },
    /// A wait of `duration_ticks` for a contended monitor of `class`,
    /// starting at the sample's time (`jdk.JavaMonitorEnter`, in both
    /// dialects).
    Lock {
        class: u64,
        duration_ticks: i64,
    },
    /// A sampled object of `class` and `size` bytes, allocated at
    /// `allocation_ticks`, still alive at the sample's time, `age` garbage
    /// collections later; the sample's weight is the bytes it stands for
    /// (`profiler.LiveObject`, `datadog.HeapLiveObject`).
    Live {
        class: u64,
        size: u64,
        allocation_ticks: i64,
        age: u64,
    },
    /// A wait of `duration_ticks` parked on a lock of `class`
    /// (`jdk.ThreadPark`, in both dialects), with the park's timeout in ns
    /// or its deadline in epoch ms (`None`: the JDK's `Long.MIN_VALUE`).
    Park {
        class: u64,
        duration_ticks: i64,
        timeout_ns: Option<i64>,
        until_ms: Option<i64>,
    },
    /// A sampled native allocation of `size` bytes at `address`
    /// (`profiler.Malloc`, `datadog.NativeMemoryAllocation`); the sample's
    /// weight is the bytes it stands for.
    Malloc {
        address: u64,
        size: u64,
    },
    /// The release of a sampled native allocation at `address`
    /// (`profiler.Free`, without a stack; not in the Datadog dialect,
    /// whose writer drops it).
    Free {
        address: u64,
    },
}

/// One CPU, wall-clock or allocation sample, in either dialect: see
/// [`crate::ChunkWriter::sample`].
#[derive(Clone, Copy, Debug)]
pub struct Sample<'a> {
    pub kind: SampleKind,
    pub start_ticks: i64,
    pub thread: u64,
    pub stack_trace: u64,
    pub state: ThreadState,
    /// Sampling intervals the sample stands for (bytes for an allocation).
    pub weight: u64,
    pub span_id: u64,
    pub local_root_span_id: u64,
    /// Attribute value pool keys (0: none), one per `attributes=` name,
    /// in order.
    pub context: &'a [u64],
}

impl Sample<'_> {
    pub(crate) fn has_context(&self) -> bool {
        self.span_id != 0 || self.local_root_span_id != 0 || self.context.iter().any(|&v| v != 0)
    }

    /// `datadog.ExecutionSample` / `datadog.MethodSample` /
    /// `datadog.ObjectSample` / `datadog.HeapLiveObject`: everything in one
    /// event.
    pub(crate) fn write_datadog(&self, out: &mut ByteBuf, stacks: StackIds) {
        if self.write_wait(out, stacks) {
            return;
        }
        if self.write_native(out, stacks) {
            // The Datadog profiler's weight: the allocations it stands for.
            let size = match self.kind {
                SampleKind::Malloc { size, .. } => size,
                _ => 0,
            };
            out.put_be_f32(if size == 0 { 0.0 } else { self.weight as f32 / size as f32 });
            self.write_context(out);
            return;
        }
        self.write_head(out, stacks);
        let size = match self.kind {
            SampleKind::Alloc { size, .. } => Some(size),
            SampleKind::Live { size, age, .. } => {
                out.put_varint(age);
                Some(size)
            }
            _ => None,
        };
        match size {
            // The Datadog profiler's weight of an object sample: the objects
            // it stands for (bytes over size), a float.
            Some(size) => {
                out.put_varint(size);
                out.put_be_f32(if size == 0 { 0.0 } else { self.weight as f32 / size as f32 });
            }
            None => out.put_varint(self.weight),
        }
        self.write_context(out);
    }

    /// `jdk.ExecutionSample` / `profiler.WallClockSample` /
    /// `jdk.ObjectAllocationSample` / `profiler.LiveObject`: the JDK's and
    /// async-profiler's fields.
    pub(crate) fn write_jdk(&self, out: &mut ByteBuf, stacks: StackIds) {
        if self.write_wait(out, stacks) || self.write_native(out, stacks) {
            return;
        }
        self.write_head(out, stacks);
        match self.kind {
            SampleKind::Cpu
            | SampleKind::Lock { .. }
            | SampleKind::Park { .. }
            | SampleKind::Malloc { .. }
            | SampleKind::Free { .. } => {}
            SampleKind::Wall => out.put_int(self.weight.min(i32::MAX as u64) as i32),
            SampleKind::Alloc { .. } => out.put_varint(self.weight),
            SampleKind::Live { size, allocation_ticks, .. } => {
                out.put_varint(size);
                out.put_varint_signed(allocation_ticks);
            }
        }
    }

    /// A wait, the same event in both dialects: `jdk.JavaMonitorEnter`
    /// or `jdk.ThreadPark` with the JDK's fields (no previous owner or
    /// address is known). False for the other kinds.
    fn write_wait(&self, out: &mut ByteBuf, stacks: StackIds) -> bool {
        let (class, duration_ticks) = match self.kind {
            SampleKind::Lock { class, duration_ticks } | SampleKind::Park { class, duration_ticks, .. } => {
                (class, duration_ticks)
            }
            SampleKind::Cpu
            | SampleKind::Wall
            | SampleKind::Alloc { .. }
            | SampleKind::Live { .. }
            | SampleKind::Malloc { .. }
            | SampleKind::Free { .. } => return false,
        };
        out.put_varint_signed(self.start_ticks);
        out.put_varint_signed(duration_ticks);
        out.put_varint(self.thread);
        stacks.put(out, self.stack_trace);
        out.put_varint(class);
        if let SampleKind::Park { timeout_ns, until_ms, .. } = self.kind {
            out.put_varint_signed(timeout_ns.unwrap_or(i64::MIN));
            out.put_varint_signed(until_ms.unwrap_or(i64::MIN));
        } else {
            out.put_varint(0); // previous owner: null
        }
        out.put_varint(0); // address
        true
    }

    /// A native allocation's or free's fields as async-profiler writes
    /// them: time, thread, stack (none for a free: JFR's null), address,
    /// and an allocation's size. False for the other kinds.
    fn write_native(&self, out: &mut ByteBuf, stacks: StackIds) -> bool {
        let (address, size) = match self.kind {
            SampleKind::Malloc { address, size } => (address, Some(size)),
            SampleKind::Free { address } => (address, None),
            _ => return false,
        };
        out.put_varint_signed(self.start_ticks);
        out.put_varint(self.thread);
        match size {
            Some(_) => stacks.put(out, self.stack_trace),
            None => out.put_varint(0),
        }
        out.put_varint(address);
        if let Some(size) = size {
            out.put_varint(size);
        }
        true
    }

    /// `jvmprofiler.SampleContext`: the context of the sample just written.
    pub(crate) fn write_context_event(&self, out: &mut ByteBuf) {
        out.put_varint_signed(self.start_ticks);
        out.put_varint(self.thread);
        self.write_context(out);
    }

    pub(crate) fn type_id(&self) -> u64 {
        match self.kind {
            SampleKind::Cpu => id::EXECUTION_SAMPLE,
            SampleKind::Wall => id::METHOD_SAMPLE,
            SampleKind::Alloc { .. } => id::ALLOCATION_SAMPLE,
            SampleKind::Live { .. } => id::LIVE_OBJECT,
            SampleKind::Lock { .. } => id::MONITOR_ENTER,
            SampleKind::Park { .. } => id::THREAD_PARK,
            SampleKind::Malloc { .. } => id::MALLOC,
            SampleKind::Free { .. } => id::FREE,
        }
    }

    /// Time, thread, stack, then the thread state or the allocated class.
    fn write_head(&self, out: &mut ByteBuf, stacks: StackIds) {
        out.put_varint_signed(self.start_ticks);
        out.put_varint(self.thread);
        stacks.put(out, self.stack_trace);
        match self.kind {
            SampleKind::Alloc { class, .. }
            | SampleKind::Live { class, .. }
            | SampleKind::Lock { class, .. }
            | SampleKind::Park { class, .. } => out.put_varint(class),
            SampleKind::Cpu | SampleKind::Wall | SampleKind::Malloc { .. } | SampleKind::Free { .. } => {
                out.put_varint(self.state.key())
            }
        }
    }

    fn write_context(&self, out: &mut ByteBuf) {
        out.put_varint(self.span_id);
        out.put_varint(self.local_root_span_id);
        for &value in self.context {
            out.put_varint(value);
        }
    }
}

/// A trace root's endpoint and operation labels (`jvmprofiler.Endpoint`,
/// `datadog.Endpoint`).
#[derive(Clone, Copy, Debug)]
pub struct Endpoint {
    pub start_ticks: i64,
    pub thread: u64,
    /// String pool keys.
    pub endpoint: u64,
    pub operation: u64,
    pub local_root_span_id: u64,
}

impl Event for Endpoint {
    const TYPE_ID: u64 = id::ENDPOINT;

    fn write_fields(&self, out: &mut ByteBuf) {
        out.put_varint_signed(self.start_ticks);
        out.put_varint(0); // duration
        out.put_varint(self.thread);
        out.put_varint(0); // stack trace: none
        out.put_varint(self.endpoint);
        out.put_varint(self.operation);
        out.put_varint(self.local_root_span_id);
        out.put_varint(0); // parent span id
    }
}

/// `jdk.ActiveSetting`: one setting of the recording.
#[derive(Clone, Copy, Debug)]
pub struct ActiveSetting<'a> {
    pub start_ticks: i64,
    /// The type id of the event the setting applies to.
    pub event_type: u64,
    pub name: &'a str,
    pub value: &'a str,
}

impl Event for ActiveSetting<'_> {
    const TYPE_ID: u64 = id::ACTIVE_SETTING;

    fn write_fields(&self, out: &mut ByteBuf) {
        out.put_varint_signed(self.start_ticks);
        out.put_varint(0); // duration
        out.put_varint(0); // event thread: none
        out.put_varint(self.event_type);
        out.put_string(self.name);
        out.put_string(self.value);
    }
}

/// The value of one internal counter (`jvmprofiler.Counter`,
/// `datadog.ProfilerCounter`).
#[derive(Clone, Copy, Debug)]
pub struct ProfilerCounter<'a> {
    pub start_ticks: i64,
    pub name: &'a str,
    pub count: i64,
}

impl Event for ProfilerCounter<'_> {
    const TYPE_ID: u64 = id::PROFILER_COUNTER;

    fn write_fields(&self, out: &mut ByteBuf) {
        out.put_varint_signed(self.start_ticks);
        out.put_string(self.name);
        out.put_varint_signed(self.count);
    }
}

/// `jdk.NativeLibrary`: one loaded library, with what remote symbolication
/// needs to map its frames back to a debug file.
#[derive(Clone, Copy, Debug)]
pub struct NativeLibrary<'a> {
    pub start_ticks: i64,
    pub name: &'a str,
    pub base_address: u64,
    pub top_address: u64,
    /// Hex build-id, or `None` for a library without one.
    pub build_id: Option<&'a str>,
    pub load_bias: u64,
}

impl Event for NativeLibrary<'_> {
    const TYPE_ID: u64 = id::NATIVE_LIBRARY;

    fn write_fields(&self, out: &mut ByteBuf) {
        out.put_varint_signed(self.start_ticks);
        out.put_string(self.name);
        out.put_varint(self.base_address);
        out.put_varint(self.top_address);
        out.put_optional_string(self.build_id);
        out.put_varint(self.load_bias);
    }
}
