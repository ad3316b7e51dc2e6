//! Debug counters: plain atomics that the sampling path may bump, written
//! into every chunk as `jvmprofiler.Counter` (`datadog.ProfilerCounter`)
//! events and readable from Java later.

use crate::latency::Histogram;
use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($variant:ident => $name:literal,)*) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(usize)]
        pub enum Counter { $($variant,)* }

        impl Counter {
            pub const ALL: &'static [Counter] = &[$(Counter::$variant,)*];

            pub fn name(self) -> &'static str {
                match self { $(Counter::$variant => $name,)* }
            }
        }
    };
}

counters! {
    Samples => "samples",
    SamplesDroppedBusy => "samples_dropped_busy",
    SamplesFiltered => "samples_filtered_out",
    SamplesDroppedFaultsBlocked => "samples_dropped_faults_blocked",
    ContextValuesExpired => "context_values_expired",
    ContextValuesDropped => "context_values_dropped_dictionary_full",
    SamplesDroppedBufferFull => "samples_dropped_buffer_full",
    TracesDroppedTableFull => "traces_dropped_table_full",
    TracesDroppedArenaFull => "traces_dropped_arena_full",
    TracesDroppedContended => "traces_dropped_contended",
    StackWalkFailed => "stack_walk_failed",
    StackTruncated => "stack_truncated",
    NativeNoUnwindInfo => "native_no_unwind_info",
    NativeReadRefused => "native_stack_read_refused",
    NativeBadFrame => "native_bad_frame",
    NativeDepthCut => "native_depth_cut",
    DictionaryNoHazardSlot => "dictionary_no_hazard_slot",
    DictionaryProtectionViolations => "dictionary_protection_violations",
    RemoteFrames => "remote_symbolication_frames",
    RemoteFallbacks => "remote_symbolication_local_fallbacks",
    RemoteLibsWithBuildId => "remote_symbolication_libs_with_build_id",
    RemoteBuildIdCacheHits => "remote_symbolication_build_id_cache_hits",
    ForeignSignals => "signals_forwarded",
    WallTicksSkipped => "wall_ticks_skipped",
    WallSamplesFolded => "wall_samples_folded",
    WallIdleNotesDropped => "wall_idle_notes_dropped",
    OverheadStretches => "overhead_stretches",
    HandlerNanos => "handler_ns_total",
    CpuSignals => "cpu_signals_handled",
    WallSignals => "wall_signals_handled",
    KernelStackThreadsRefused => "kernel_stack_threads_refused",
    HandlerNanosMedian => "handler_ns_p50",
    HandlerNanosP99 => "handler_ns_p99",
    CallTraces => "call_traces",
    ChunksWritten => "chunks_written",
    ChunksDropped => "chunks_dropped",
    SessionFileWriteFailures => "session_file_write_failures",
    PeriodFiles => "period_files",
    PeriodFileCreateFailures => "period_file_create_failures",
    RetentionFilesRemoved => "retention_files_removed",
    RetentionBytesRemoved => "retention_bytes_removed",
    VmWalkNoCodeBlob => "vm_walk_no_code_blob",
    VmWalkBadInterpretedFrame => "vm_walk_bad_interpreted_frame",
    VmWalkUnknownMethod => "vm_walk_unknown_method",
    VmWalkBadCompiledFrame => "vm_walk_bad_compiled_frame",
    VmWalkNoProgress => "vm_walk_no_progress",
    VmWalkBadAnchor => "vm_walk_bad_anchor",
    VmWalkMethodWithoutId => "vm_walk_method_without_id",
    WalkVerified => "walk_verify_samples",
    WalkCompared => "walk_verify_compared",
    WalkAgreed => "walk_verify_agreed",
    WalkVmSucceeded => "walk_verify_vm_succeeded",
    WalkAsgctSucceeded => "walk_verify_asgct_succeeded",
    WalkVmNanos => "walk_verify_vm_ns_total",
    WalkAsgctNanos => "walk_verify_asgct_ns_total",
    AllocSamples => "alloc_samples",
    AllocDroppedBusy => "alloc_dropped_busy",
    AllocDroppedBufferFull => "alloc_dropped_buffer_full",
    LockSamples => "lock_samples",
    LockDroppedBusy => "lock_dropped_busy",
    LockDroppedBufferFull => "lock_dropped_buffer_full",
    ObjectClassesFull => "object_classes_full",
    JvmtiStackFailed => "jvmti_stack_failed",
    LiveObjects => "live_objects",
    LiveObjectsFull => "live_objects_full",
    NativeMemSamples => "nativemem_samples",
    NativeMemDroppedBusy => "nativemem_dropped_busy",
    NativeMemDroppedBufferFull => "nativemem_dropped_buffer_full",
    NativeMemFrees => "nativemem_frees",
    NativeMemTracked => "nativemem_tracked_addresses",
    NativeMemTableFull => "nativemem_table_full",
    NativeMemLibraries => "nativemem_hooked_libraries",
    NativeMemSlots => "nativemem_hooked_slots",
    NativeMemPatchFailures => "nativemem_patch_failures",
    ExportUploads => "export_uploads",
    ExportRetries => "export_retries",
    ExportFailures => "export_failures",
    ExportDropped => "export_dropped",
    ExportBytes => "export_bytes",
    ExportNanos => "export_ns_total",
    AgentHeapBytes => "agent_heap_bytes",
}

/// What handlers count, process-wide (a session's start zeroes it): a
/// handler counts without looking up the session.
struct Counters {
    values: [AtomicU64; Counter::ALL.len()],
    /// Durations of sampling signal handlers (their median and 99th
    /// percentile are counters).
    handler: Histogram,
    /// The overhead governor's calibration signals delivered so far (not a
    /// counter of the recording: the calibration runs once per process,
    /// before any session arms an engine, and reads it as differences).
    calibration_signals: AtomicU64,
}

static COUNTERS: Counters = Counters {
    values: [const { AtomicU64::new(0) }; Counter::ALL.len()],
    handler: Histogram::new(),
    calibration_signals: AtomicU64::new(0),
};

/// Counts a calibration signal (`handler::on_calibration`). Signal-safe.
#[inline]
pub fn calibration_signal() {
    COUNTERS.calibration_signals.fetch_add(1, Ordering::Relaxed);
}

/// The calibration signals delivered so far.
pub fn calibration_signals() -> u64 {
    COUNTERS.calibration_signals.load(Ordering::Relaxed)
}

/// Records a sampling handler's duration. Signal-safe.
#[inline]
pub fn record_handler_ns(ns: u64) {
    COUNTERS.handler.record(ns);
}

/// Signal-safe.
#[inline]
pub fn increment(counter: Counter) {
    add(counter, 1);
}

/// Signal-safe.
#[inline]
pub fn add(counter: Counter, delta: u64) {
    if let Some(value) = COUNTERS.values.get(counter as usize) {
        value.fetch_add(delta, Ordering::Relaxed);
    }
}

pub fn set(counter: Counter, value: u64) {
    if let Some(slot) = COUNTERS.values.get(counter as usize) {
        slot.store(value, Ordering::Relaxed);
    }
}

pub fn get(counter: Counter) -> u64 {
    COUNTERS.values.get(counter as usize).map_or(0, |value| value.load(Ordering::Relaxed))
}

/// Zeroes every counter (at profiler start).
pub fn reset() {
    for value in &COUNTERS.values {
        value.store(0, Ordering::Relaxed);
    }
    COUNTERS.handler.reset();
}

/// Every counter with its current value (percentiles computed now).
pub fn snapshot() -> Vec<(&'static str, u64)> {
    set(Counter::HandlerNanosMedian, COUNTERS.handler.quantile(0.5));
    set(Counter::HandlerNanosP99, COUNTERS.handler.quantile(0.99));
    set(Counter::AgentHeapBytes, crate::heap::live_bytes());
    Counter::ALL.iter().map(|&c| (c.name(), get(c))).collect()
}
