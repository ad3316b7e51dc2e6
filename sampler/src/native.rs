//! The native part of a mixed stack: frames from the interrupted context
//! outwards, through native libraries, until the walk reaches code outside
//! every library (JIT-compiled or interpreter code, where the Java source
//! takes over), a marked JVM function, the end of the stack or a frame it
//! cannot unwind (counted by reason). The unwinder the stack plan chose
//! steps each frame through [`SnapshotUnwinder`].

use super::safe_read::safe_load;
use crate::counters::{self, Counter};
use crate::libraries::{Library, Snapshot, Snapshots};
use frames::{Frame, Mark, RemoteFrame};
use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::ops::Range;
use std::sync::Arc;
use unwind::arch;
use unwind::dwarf::{new_cache, DwarfCache, DwarfUnwinder, SectionData};
use unwind::fp::FramePointerUnwinder;
use unwind::sframe::SFrameUnwinder;
use unwind::{PcKind, Registers, StackReader, StepError, Unwinder, MAX_STACK_SPAN};

/// The native unwinder a stack plan asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NativeMode {
    FramePointer,
    Dwarf,
    SFrame,
}

/// The unwinder of a [`NativeMode`] over one library snapshot, with the
/// unwind information that snapshot holds.
enum SnapshotUnwinder<'a> {
    FramePointer,
    Dwarf(&'a DwarfUnwinder),
    SFrame(&'a SFrameUnwinder<SectionData>),
    /// DWARF was asked for but the snapshot has none: every step fails.
    NoDwarf,
}

impl<'a> SnapshotUnwinder<'a> {
    fn new(mode: NativeMode, snapshot: &'a Snapshot) -> Self {
        match mode {
            NativeMode::FramePointer => Self::FramePointer,
            NativeMode::Dwarf => snapshot.dwarf.as_ref().map_or(Self::NoDwarf, Self::Dwarf),
            // Libraries without SFrame sections are walked by frame pointers.
            NativeMode::SFrame => snapshot.sframe.as_ref().map_or(Self::FramePointer, Self::SFrame),
        }
    }
}

impl Unwinder for SnapshotUnwinder<'_> {
    /// Used by DWARF only.
    type Cache = DwarfCache;

    fn step(
        &self,
        kind: PcKind,
        regs: &mut Registers,
        cache: &mut DwarfCache,
        stack: &mut dyn StackReader,
    ) -> Result<bool, StepError> {
        match self {
            Self::FramePointer => FramePointerUnwinder.step(kind, regs, &mut (), stack),
            Self::Dwarf(dwarf) => dwarf.step(kind, regs, cache, stack),
            Self::SFrame(sframe) => sframe.step(kind, regs, &mut (), stack),
            Self::NoDwarf => Err(StepError::NoUnwindInfo),
        }
    }
}

/// Unwinds the native frames of a sample through the library table, with
/// the unwinder of its [`NativeMode`].
pub struct NativeUnwinder {
    mode: NativeMode,
    /// Record frames of libraries with a build-id for remote symbolication.
    remote: bool,
    /// The loaded libraries, published by the session's library table.
    libraries: Arc<Snapshots>,
    /// One DWARF rule cache per sample stripe, used under the stripe lock.
    caches: Box<[UnsafeCell<Box<DwarfCache>>]>,
}

// SAFETY: cache `i` is only touched by the holder of stripe `i`'s lock.
unsafe impl Sync for NativeUnwinder {}

/// Reads the interrupted thread's stack: only addresses from its stack
/// pointer up to [`MAX_STACK_SPAN`] above it, aligned, through a read that
/// recovers from faults.
struct ThreadStack {
    sp: u64,
}

impl StackReader for ThreadStack {
    fn read_u64(&mut self, address: u64) -> Option<u64> {
        if address < self.sp || address - self.sp > MAX_STACK_SPAN {
            return None;
        }
        safe_load(address)
    }
}

/// The registers of an interrupted context.
pub fn registers(ucontext: *mut c_void) -> Option<Registers> {
    if ucontext.is_null() {
        return None;
    }
    // SAFETY: the kernel's ucontext for the signal being handled.
    let context = unsafe { &*ucontext.cast::<libc::ucontext_t>() };
    Some(arch::registers(context))
}

/// The registers of the first caller outside `own` (the agent's image)
/// of the code whose registers `regs` are: stepped by the frame records
/// the agent's code always keeps (`force-frame-pointers`). The caller's
/// frame pointer is whatever it held (code without frame pointers keeps
/// anything there), for the walk from there to judge. The pc returned is
/// the return address less one, so that a walk from there attributes the
/// frame to its call. None when a frame record cannot be read or the walk
/// stays inside `own` for 32 frames. Signal-safe.
pub fn caller_outside(mut regs: Registers, own: &Range<u64>) -> Option<Registers> {
    let mut stack = ThreadStack { sp: regs.sp };
    for _ in 0..32 {
        if !own.contains(&regs.pc) {
            regs.pc = regs.pc.checked_sub(1)?;
            return Some(regs);
        }
        let fp = regs.fp;
        if !fp.is_multiple_of(8) || fp < regs.sp {
            return None;
        }
        let caller_fp = stack.read_u64(fp)?;
        let return_address = stack.read_u64(fp.checked_add(8)?)?;
        regs = Registers { pc: return_address, sp: fp.checked_add(16)?, fp: caller_fp, lr: 0 };
    }
    None
}

fn count(error: StepError) {
    counters::increment(match error {
        StepError::NoUnwindInfo | StepError::BadUnwindInfo => Counter::NativeNoUnwindInfo,
        StepError::ReadRefused => Counter::NativeReadRefused,
        StepError::BadFramePointer | StepError::NoProgress => Counter::NativeBadFrame,
    });
}

impl NativeUnwinder {
    /// Not signal-safe: allocates the per-stripe caches.
    pub fn new(mode: NativeMode, remote: bool, libraries: Arc<Snapshots>, stripes: usize) -> Self {
        let caches = (0..stripes).map(|_| UnsafeCell::new(new_cache())).collect();
        Self { mode, remote, libraries, caches }
    }

    /// The frame to store for `address` in `library`: packed for remote
    /// symbolication when enabled and possible, else the raw address.
    fn frame(&self, library: &Library, address: u64, mark: Mark) -> Frame {
        if !self.remote {
            return Frame::native(address);
        }
        let packed = library.build_id.as_ref().and_then(|_| {
            RemoteFrame { offset: address.wrapping_sub(library.bias), mark, lib_index: library.index }.pack()
        });
        match packed {
            Some(packed) => {
                counters::increment(Counter::RemoteFrames);
                Frame::remote(packed)
            }
            None => {
                counters::increment(Counter::RemoteFallbacks);
                Frame::native(address)
            }
        }
    }

    /// Writes native frames from `regs` (a frame whose pc is of kind
    /// `kind`) into `out`, until a pc outside every library, a marked
    /// function `end_at` names, the end of the stack or a frame it cannot
    /// unwind. Signal-safe.
    ///
    /// # Safety
    /// The caller holds stripe `stripe`: no other thread walks with it
    /// until this returns.
    pub unsafe fn walk_from(
        &self,
        stripe: usize,
        regs: Registers,
        kind: PcKind,
        out: &mut [Frame],
        end_at: EndAt,
    ) -> NativeWalk {
        // SAFETY: the caller holds `stripe` (this function's contract).
        unsafe { self.walk(stripe, regs, kind, out, end_at, |_| false) }
    }

    /// Writes the native code between the Java code and the JVM into
    /// `out`, walking outwards from `regs` (a pc of the agent's, called by
    /// the JVM on this thread) to the first pc outside every library: the
    /// JNI code that called the JVM (`NewObject`, `NewByteArray`), or
    /// nothing when Java code did. Frames of the agent and of libjvm, and
    /// every frame inside them, are left out. Returns how many frames.
    ///
    /// # Safety
    /// The caller holds stripe `stripe`, and `regs` are the calling
    /// thread's own (so the stack walked is its own).
    pub unsafe fn walk_jvm_caller(&self, stripe: usize, regs: Registers, out: &mut [Frame]) -> usize {
        let agent = Self::walk_jvm_caller as *const () as u64;
        let inside_jvm = |library: &Library| library.is_jvm || library.image.contains(&agent);
        // SAFETY: the caller holds `stripe` (this function's contract).
        unsafe { self.walk(stripe, regs, PcKind::Interrupted, out, EndAt::NoMark, inside_jvm) }.frames
    }

    /// [`Self::walk_from`], where a frame in a library `left_out` accepts
    /// is not written and drops the frames written before it.
    ///
    /// # Safety
    /// As [`Self::walk_from`].
    unsafe fn walk(
        &self,
        stripe: usize,
        mut regs: Registers,
        mut kind: PcKind,
        out: &mut [Frame],
        end_at: EndAt,
        left_out: impl Fn(&Library) -> bool,
    ) -> NativeWalk {
        let mut n = 0;
        let (Some(snapshot), Some(cache)) = (self.libraries.current(), self.caches.get(stripe)) else {
            return NativeWalk { frames: 0, regs, kind, stop: NativeStop::Failed };
        };
        // SAFETY: the caller holds stripe `stripe` (this function's
        // contract), so its cache is ours alone.
        let cache = unsafe { &mut **cache.get() };
        let unwinder = SnapshotUnwinder::new(self.mode, snapshot);
        let mut stack = ThreadStack { sp: regs.sp };
        let stop = loop {
            let address = kind.attribution(regs.pc);
            let Some(library) = snapshot.library_at(address) else { break NativeStop::OutsideLibraries };
            if left_out(library) {
                n = 0;
            } else {
                let Some(slot) = out.get_mut(n) else {
                    counters::increment(Counter::NativeDepthCut);
                    break NativeStop::Full;
                };
                let mark = library.mark_at(address);
                *slot = self.frame(library, address, mark);
                n += 1;
                if end_at.ends_at(mark) {
                    break NativeStop::Mark(mark);
                }
            }
            match unwinder.step(kind, &mut regs, cache, &mut stack) {
                Ok(true) => kind = PcKind::ReturnAddress,
                Ok(false) => break NativeStop::End,
                Err(error) => {
                    count(error);
                    break NativeStop::Failed;
                }
            }
        };
        NativeWalk { frames: n, regs, kind, stop }
    }

    /// Whether `pc` lies in a known library. Signal-safe.
    pub fn in_library(&self, pc: u64) -> bool {
        self.libraries.current().is_some_and(|snapshot| snapshot.library_at(pc).is_some())
    }
}

/// Which marked JVM functions end a native part (the walk then continues
/// where the Java source says: a last-Java-frame anchor).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndAt {
    /// Every marked function.
    EveryMark,
    /// Marked functions but `JavaCalls::call_helper` (`vmx` inside a JNI
    /// upcall: the native frames between it and the Java code that called
    /// native code are walked too).
    MarksButJavaCalls,
    /// Only a compiler thread's entry (a thread with no last-Java-frame
    /// anchor: an interpreter runtime entry called as a leaf, such as
    /// `InterpreterRuntime::monitorexit`, sets none, so the walk goes on
    /// through it into the interpreter frame that called it).
    CompilerOnly,
    /// None.
    NoMark,
}

impl EndAt {
    fn ends_at(self, mark: Mark) -> bool {
        match self {
            EndAt::EveryMark => mark != Mark::None,
            EndAt::MarksButJavaCalls => !matches!(mark, Mark::None | Mark::VmRuntime),
            EndAt::CompilerOnly => mark == Mark::CompilerEntry,
            EndAt::NoMark => false,
        }
    }
}

/// Where a native walk stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NativeStop {
    /// The pc in `regs` is outside every library (JIT code, or unknown).
    OutsideLibraries,
    /// A marked JVM function (kept as the last frame), and its mark.
    Mark(Mark),
    /// The outermost frame.
    End,
    /// A frame that could not be unwound (counted by reason).
    Failed,
    /// No room for more frames.
    Full,
}

/// The result of [`NativeUnwinder::walk_from`]: the frames written, and the
/// registers (with their pc kind) where the walk stopped.
#[derive(Clone, Copy, Debug)]
pub struct NativeWalk {
    pub frames: usize,
    pub regs: Registers,
    pub kind: PcKind,
    pub stop: NativeStop,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_marks_end_a_native_part() {
        let marks = [Mark::None, Mark::VmRuntime, Mark::Interpreter, Mark::CompilerEntry];
        let ends = |end_at: EndAt| marks.map(|m| end_at.ends_at(m));
        assert_eq!(ends(EndAt::EveryMark), [false, true, true, true]);
        assert_eq!(ends(EndAt::MarksButJavaCalls), [false, false, true, true]);
        assert_eq!(ends(EndAt::CompilerOnly), [false, false, false, true]);
        assert_eq!(ends(EndAt::NoMark), [false; 4]);
    }
}
