//! Port of upstream `stackWalker_ut` (see gtest-compat/README.md).
//!
//! * `dropUnknownLeaf_*`: upstream drops a leaf frame without a method id
//!   (it would lump unrelated samples under one "unknown" frame). Upstream
//!   does it in its VMStructs walker; our Java frames come from
//!   AsyncGetCallTrace (which can also return a null method id), so the
//!   contract is checked on what `Sampler::record` stores, with a scripted
//!   AsyncGetCallTrace.
//! * `isValidFP_*`: our frame-pointer step (`FramePointerUnwinder::step_fp`)
//!   and the stack reader behind it (`safe_load`, which refuses the first
//!   page) are where frame pointers are validated.
//! * `isValidSP_*`: a caller's stack pointer is validated by every step
//!   (it must rise above the current one by at most `MAX_STACK_SPAN`);
//!   exercised with SFrame rules that put the caller's SP where we want.
//! * Crash recovery: upstream wraps the whole walk in sigsetjmp; ours reads
//!   the stack only through `safe_load`, whose fault our SIGSEGV handler
//!   (`safe_read::on_fault`) turns into a refused read, and which forwards
//!   every other fault. These tests change process-wide signal handlers, so
//!   each runs alone in a child process.

use super::sframe_ut::{fde_info, fre, fre_info, Builder, MapStack, ABI_AMD64, ADDR1, OFF4};
use super::support::asgct_sampler;
use frames::{CallTraceError, Frame, FrameKind};
use profiler_agent::libraries::sections::Wanted;
use profiler_agent::libraries::LibraryTable;
use sampler::asgct::{AsgctFrame, AsgctTrace};
use sampler::counters::{self, Counter};
use sampler::native::{registers, EndAt, NativeMode, NativeUnwinder};
use sampler::safe_read::{install_fault_handlers, on_fault, restore_fault_handlers, safe_load};
use sampler::storage::samples::{SampleKind, SampleStripes};
use sampler::storage::trace_storage::CallTraceStorage;
use sampler::SampleRequest;
use std::cell::RefCell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use unwind::fp::FramePointerUnwinder;
use unwind::sframe::{SFrameModule, SFrameSection, SFrameUnwinder};
use unwind::{PcKind, Registers, StackReader, StepError, Unwinder, MAX_STACK_SPAN};

/// Runs `body` in a child process running only `stack_walker_ut::<case>`,
/// so process-wide state (signal dispositions, the thread filter) is ours
/// alone.
fn isolated(case: &str, body: impl FnOnce()) {
    crate::isolation::in_own_process(&format!("stack_walker_ut::{case}"), &[], body);
}

// ---- dropUnknownLeaf ----

thread_local! {
    /// The method ids the scripted AsyncGetCallTrace returns, leaf first.
    static SCRIPT: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

unsafe extern "C" fn scripted_asgct(trace: *mut AsgctTrace, depth: i32, _ucontext: *mut c_void) {
    // SAFETY: called by the sampler with a valid trace and a frame buffer
    // of `depth` entries.
    let trace = unsafe { &mut *trace };
    SCRIPT.with(|script| {
        let script = script.borrow();
        let n = script.len().min(usize::try_from(depth).unwrap_or(0));
        for (i, &method) in script.iter().take(n).enumerate() {
            // SAFETY: i < depth.
            unsafe { trace.frames.add(i).write(AsgctFrame { bci: 0, method: method as usize as _ }) };
        }
        trace.num_frames = n as i32;
    });
}

/// Records one sample whose AsyncGetCallTrace returns `methods` and
/// returns the stored trace.
fn record(methods: &[u64]) -> Vec<Frame> {
    SCRIPT.with(|s| *s.borrow_mut() = methods.to_vec());
    let sampler = asgct_sampler(
        CallTraceStorage::new(1024, 1 << 16).unwrap(),
        SampleStripes::new(1024, 64).unwrap(),
        64,
        scripted_asgct,
    );
    sampler.record(SampleRequest::signal(std::ptr::null_mut(), 1, SampleKind::Cpu, None), 1, 77);
    let mut frames = Vec::new();
    sampler.traces.for_each_live(|t| frames.extend_from_slice(t.frames));
    frames
}

fn java_methods(frames: &[Frame]) -> Vec<u64> {
    frames.iter().filter(|f| f.kind == FrameKind::Java).map(|f| f.method).collect()
}

/// An empty walk invents no Java frame (ours records the documented
/// `no_Java_frame` marker instead, so the CPU time is not lost).
#[test]
fn drop_unknown_leaf_empty_trace() {
    isolated("drop_unknown_leaf_empty_trace", || {
        let frames = record(&[]);
        assert_eq!(frames, vec![Frame::error(CallTraceError::NoJavaFrame)]);
    });
}

#[test]
fn drop_unknown_leaf_single_unknown_frame() {
    isolated("drop_unknown_leaf_single_unknown_frame", || {
        let frames = record(&[0]);
        assert_eq!(java_methods(&frames), Vec::<u64>::new());
    });
}

#[test]
fn drop_unknown_leaf_single_known_frame() {
    isolated("drop_unknown_leaf_single_known_frame", || {
        assert_eq!(java_methods(&record(&[2])), vec![2]);
    });
}

#[test]
fn drop_unknown_leaf_unknown_leaf_with_known_callers() {
    isolated("drop_unknown_leaf_unknown_leaf_with_known_callers", || {
        assert_eq!(java_methods(&record(&[0, 2, 3])), vec![2, 3]);
    });
}

#[test]
fn drop_unknown_leaf_known_leaf_not_dropped() {
    isolated("drop_unknown_leaf_known_leaf_not_dropped", || {
        assert_eq!(java_methods(&record(&[2, 3, 4])), vec![2, 3, 4]);
    });
}

#[test]
fn drop_unknown_leaf_unknown_non_leaf_not_dropped() {
    isolated("drop_unknown_leaf_unknown_non_leaf_not_dropped", || {
        assert_eq!(java_methods(&record(&[2, 0, 3])), vec![2, 0, 3]);
    });
}

// ---- isValidFP ----

/// The production read path: `safe_load`. Only used with addresses below
/// 4096, which it refuses without touching memory (no fault handler needed).
struct FirstPageStack;

impl StackReader for FirstPageStack {
    fn read_u64(&mut self, address: u64) -> Option<u64> {
        assert!(address < 4096, "test reads only the first page");
        safe_load(address)
    }
}

/// Answers every aligned read with a plausible return address, refuses
/// misaligned ones (as `safe_load` does).
struct AnyStack;

impl StackReader for AnyStack {
    fn read_u64(&mut self, address: u64) -> Option<u64> {
        address.is_multiple_of(8).then_some(0x4242)
    }
}

fn step_fp(sp: u64, fp: u64, stack: &mut dyn StackReader) -> (Result<bool, StepError>, Registers) {
    let mut regs = Registers { pc: 0x1234, sp, fp, lr: 0 };
    let result = FramePointerUnwinder::step_fp(&mut regs, stack);
    (result, regs)
}

/// A null frame pointer is not followed: it ends the walk, reading nothing.
#[test]
fn is_valid_fp_null_is_invalid() {
    let mut stack = MapStack::default();
    let (result, regs) = step_fp(0x1000, 0, &mut stack);
    assert_eq!(result, Ok(false));
    assert_eq!(regs, Registers { pc: 0x1234, sp: 0x1000, fp: 0, lr: 0 });
    assert!(stack.reads.is_empty());
}

#[test]
fn is_valid_fp_low_address_is_invalid() {
    assert_eq!(safe_load(0x100), None);
    assert_eq!(safe_load(0xff8), None);
    assert_eq!(step_fp(0x80, 0x100, &mut FirstPageStack).0, Err(StepError::ReadRefused));
    assert_eq!(step_fp(0xf00, 0xff8, &mut FirstPageStack).0, Err(StepError::ReadRefused));
    assert_eq!(step_fp(0xf00, 0xfff, &mut FirstPageStack).0, Err(StepError::BadFramePointer));
}

#[test]
fn is_valid_fp_high_address_is_invalid() {
    for fp in [u64::MAX, u64::MAX - 0x100] {
        let (result, _) = step_fp(fp - 0x1000, fp, &mut AnyStack);
        assert_eq!(result, Err(StepError::BadFramePointer), "fp {fp:#x}");
    }
}

/// Upstream's high-address cases are also misaligned; the dead zone holds
/// for aligned frame pointers too. Ours computes `fp + 8` and `fp + 16`
/// unchecked: with a reader that answers, a frame pointer in the last 16
/// bytes of the address space overflows (a panic in debug builds).
#[test]
fn is_valid_fp_high_aligned_address_is_invalid() {
    for fp in [u64::MAX - 15, u64::MAX - 7] {
        let (result, _) = step_fp(fp - 0x100, fp, &mut AnyStack);
        assert!(result.is_err(), "fp {fp:#x}: {result:?}");
    }
}

#[test]
fn is_valid_fp_misaligned_is_invalid() {
    for fp in [0x10001, 0x10002] {
        assert_eq!(step_fp(0x10000, fp, &mut AnyStack).0, Err(StepError::BadFramePointer), "fp {fp:#x}");
    }
}

#[test]
fn is_valid_fp_valid_aligned_address() {
    for (sp, fp) in [(0xff00u64, 0x10000u64), (0x7ffe_0000, 0x7fff_0000)] {
        let mut stack = MapStack { values: [(fp, fp + 0x100), (fp + 8, 0xABCD)].into(), reads: Vec::new() };
        let (result, regs) = step_fp(sp, fp, &mut stack);
        assert_eq!(result, Ok(true), "fp {fp:#x}");
        assert_eq!(regs, Registers { pc: 0xABCD, sp: fp + 16, fp: fp + 0x100, lr: 0 });
    }
}

// ---- isValidSP ----

/// Where the walk may go: a step's new SP must lie strictly above the
/// current SP (`lo`) and at most `MAX_STACK_SPAN` above it, so the first
/// aligned SP that is too high (`hi`, exclusive) is this.
const SP: u64 = 0x7ffd_0000_0000;
const HI: u64 = SP + MAX_STACK_SPAN + 8;

/// One step from SP through an SFrame rule putting the CFA (the caller's
/// SP) at SP + `cfa_offset` and the return address at CFA + `ra_offset`.
fn step_to(cfa_offset: i64, ra_offset: i8) -> Result<u64, StepError> {
    let mut b = Builder::new(ABI_AMD64, ra_offset);
    let cfa = i32::try_from(cfa_offset).unwrap();
    b.fde(0x1000, 0x100, fde_info(ADDR1, false), &[fre(0, ADDR1, fre_info(true, 1, OFF4), &[cfa])]);
    let section = SFrameSection::parse(b.build(), 0).unwrap();
    let unwinder = SFrameUnwinder::new(vec![SFrameModule { text: 0x1000..0x1100, section }]);
    let mut regs = Registers { pc: 0x1000, sp: SP, fp: 0, lr: 0 };
    unwinder.step(PcKind::Interrupted, &mut regs, &mut (), &mut AnyStack)?;
    Ok(regs.sp)
}

#[test]
fn is_valid_sp_must_be_strictly_above_lo() {
    assert_eq!(step_to(0, -8), Err(StepError::NoProgress), "sp == lo");
    assert_eq!(step_to(-8, -8), Err(StepError::NoProgress), "sp < lo");
}

#[test]
fn is_valid_sp_must_be_strictly_below_hi() {
    assert_eq!(step_to((HI - SP) as i64, -8), Err(StepError::NoProgress), "sp == hi");
    assert_eq!(step_to((HI - SP) as i64 + 8, -8), Err(StepError::NoProgress), "sp > hi");
}

#[test]
fn is_valid_sp_misaligned_is_invalid() {
    // CFA at SP+0x1001, return address at CFA-1 (an aligned slot).
    assert!(step_to(0x1001, -1).is_err());
}

#[test]
fn is_valid_sp_valid_aligned_in_range() {
    assert_eq!(step_to(0x1000, -8), Ok(SP + 0x1000));
    assert_eq!(step_to(8, -8), Ok(SP + 8), "lo + 8");
    assert_eq!(step_to((HI - 8 - SP) as i64, -8), Ok(HI - 8), "hi - 8");
}

// ---- crash recovery ----

#[inline(never)]
extern "C" fn walk_target() -> u64 {
    std::hint::black_box(7)
}

/// An interrupted context at `pc` with both SP and FP at `stack`.
fn context(pc: u64, stack: u64) -> Box<libc::ucontext_t> {
    // SAFETY: ucontext_t is plain data; all-zero is a valid value.
    let mut uc: Box<libc::ucontext_t> = Box::new(unsafe { std::mem::zeroed() });
    #[cfg(target_arch = "x86_64")]
    {
        let g = &mut uc.uc_mcontext.gregs;
        g[libc::REG_RIP as usize] = pc as i64;
        g[libc::REG_RSP as usize] = stack as i64;
        g[libc::REG_RBP as usize] = stack as i64;
    }
    #[cfg(target_arch = "aarch64")]
    {
        uc.uc_mcontext.pc = pc;
        uc.uc_mcontext.sp = stack;
        uc.uc_mcontext.regs[29] = stack;
    }
    uc
}

fn context_pc(uc: &libc::ucontext_t) -> u64 {
    #[cfg(target_arch = "x86_64")]
    return uc.uc_mcontext.gregs[libc::REG_RIP as usize] as u64;
    #[cfg(target_arch = "aarch64")]
    return uc.uc_mcontext.pc;
}

/// A page that faults on every access.
struct BadPage(*mut c_void);

impl BadPage {
    fn new() -> Self {
        // SAFETY: an anonymous PROT_NONE mapping of our own.
        let page = unsafe {
            libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_NONE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        assert_ne!(page, libc::MAP_FAILED);
        Self(page)
    }
}

impl Drop for BadPage {
    fn drop(&mut self) {
        // SAFETY: unmaps the page mapped in `new`.
        unsafe { libc::munmap(self.0, 4096) };
    }
}

/// Walks a context whose stack is a PROT_NONE page: the first stack read
/// faults, the fault is recovered, the walk keeps the interrupted frame
/// and counts a refused read; and it recovers again the next time.
fn walk_recovers(mode: NativeMode) {
    install_fault_handlers().unwrap();
    let bad = BadPage::new();
    let table = Arc::new(LibraryTable::new(Wanted::Dwarf));
    let unwinder = NativeUnwinder::new(mode, false, Arc::clone(table.snapshots()), 1);
    let pc = walk_target as *const () as usize as u64;
    assert_eq!(walk_target(), 7);
    for _ in 0..2 {
        let refused = counters::get(Counter::NativeReadRefused);
        let mut uc = context(pc, bad.0 as u64);
        let regs = registers((&mut *uc as *mut libc::ucontext_t).cast()).unwrap();
        let mut out = [Frame::default(); 16];
        // SAFETY: this unwinder is this test's alone, so stripe 0 is ours.
        let n = unsafe { unwinder.walk_from(0, regs, PcKind::Interrupted, &mut out, EndAt::EveryMark) }.frames;
        assert_eq!(n, 1, "only the interrupted frame");
        assert_eq!(out[0], Frame::native(pc));
        assert_eq!(counters::get(Counter::NativeReadRefused), refused + 1);
    }
    let value = 0x5a5a_5a5a_u64;
    assert_eq!(safe_load(&value as *const u64 as u64), Some(value), "reads work after recovery");
    restore_fault_handlers();
}

#[test]
fn walk_fp_recovers_from_fault_instead_of_crashing() {
    isolated("walk_fp_recovers_from_fault_instead_of_crashing", || walk_recovers(NativeMode::FramePointer));
}

#[test]
fn walk_dwarf_recovers_from_fault_instead_of_crashing() {
    isolated("walk_dwarf_recovers_from_fault_instead_of_crashing", || walk_recovers(NativeMode::Dwarf));
}

static FORWARDED: AtomicUsize = AtomicUsize::new(0);

extern "C" fn previous_handler(signo: c_int, _info: *mut libc::siginfo_t, _ucontext: *mut c_void) {
    if signo == libc::SIGSEGV {
        FORWARDED.fetch_add(1, Ordering::SeqCst);
    }
}

fn set_sigsegv(handler: libc::sighandler_t, flags: c_int) {
    // SAFETY: plain sigaction setup for our own process.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler;
        action.sa_flags = flags;
        libc::sigemptyset(&mut action.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGSEGV, &action, std::ptr::null_mut()), 0);
    }
}

fn current_sigsegv() -> libc::sighandler_t {
    // SAFETY: a null action only queries.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGSEGV, std::ptr::null(), &mut action);
        action.sa_sigaction
    }
}

/// A SIGSEGV whose pc is not our guarded load is not swallowed: the
/// context is left alone and the signal goes to the previous handler, or,
/// without one, the default action is restored so the fault stays fatal.
#[test]
fn check_fault_rejects_fault_outside_profiler_range() {
    isolated("check_fault_rejects_fault_outside_profiler_range", || {
        let foreign_pc = (walk_target as *const () as usize as u64).wrapping_add(256 << 20);
        // SAFETY: siginfo_t is plain data; on_fault only passes it on.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };

        set_sigsegv(previous_handler as *const () as usize, libc::SA_SIGINFO);
        install_fault_handlers().unwrap();
        let mut uc = context(foreign_pc, 0x1000);
        on_fault(libc::SIGSEGV, &mut info, (&mut *uc as *mut libc::ucontext_t).cast());
        assert_eq!(context_pc(&uc), foreign_pc, "not redirected");
        assert_eq!(FORWARDED.load(Ordering::SeqCst), 1, "forwarded to the previous handler");
        restore_fault_handlers();
        assert_eq!(current_sigsegv(), previous_handler as *const () as usize);

        set_sigsegv(libc::SIG_DFL, 0);
        install_fault_handlers().unwrap();
        let mut uc = context(foreign_pc, 0x1000);
        on_fault(libc::SIGSEGV, &mut info, (&mut *uc as *mut libc::ucontext_t).cast());
        assert_eq!(context_pc(&uc), foreign_pc, "not redirected");
        assert_eq!(current_sigsegv(), libc::SIG_DFL, "the fault will be fatal, as without us");
        assert_eq!(FORWARDED.load(Ordering::SeqCst), 1);
    });
}
