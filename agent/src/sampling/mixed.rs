//! Mixed stacks: the one place where native and Java frames are stitched
//! into a single stack, innermost first. A walk alternates parts. Native
//! parts unwind library frames ([`NativeUnwinder`]); where one stops, the
//! sample's Java source (a [`JavaWalk`]: AsyncGetCallTrace or HotSpot's
//! structures) says where the walk goes next, and walks the Java parts.

use super::native::{EndAt, NativeStop, NativeUnwinder, NativeWalk};
use crate::counters::{self, Counter};
use frames::{CallTraceError, Frame};
use hotspot::NO_JMETHOD_ID;
use unwind::{PcKind, Registers};

/// Parts a walk may alternate through before it stops: more than any real
/// stack has (each JNI upcall adds two).
const MAX_PARTS: usize = 256;

/// Where a walk goes next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Native frames from `regs` (a frame whose pc is of kind `kind`),
    /// ending at the marked JVM functions `end_at` names.
    Native { regs: Registers, kind: PcKind, end_at: EndAt },
    /// Java frames, from where the Java source says.
    Java,
    /// The end of the stack; `truncated` if the depth limit or a broken
    /// invariant cut it.
    Stop { truncated: bool },
}

/// One sample's source of Java frames, driven by [`walk`]. Signal-safe.
pub trait JavaWalk {
    /// At most this many frames of one native part.
    const NATIVE_BUDGET: usize;

    /// Where the walk starts, from the interrupted registers (`None`: the
    /// context has none).
    fn start(&mut self, regs: Option<Registers>) -> Next;

    /// Where the walk goes after a native part stopped as `walk` says.
    fn after_native(&mut self, walk: &NativeWalk) -> Next;

    /// Writes one part's Java frames into `out` (the rest of the stack);
    /// returns how many, and where the walk goes next.
    fn walk_java(&mut self, out: &mut [Frame]) -> (usize, Next);
}

/// The result of a walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MixedWalk {
    pub frames: usize,
    /// The depth limit or a broken invariant cut the stack.
    pub truncated: bool,
}

/// Writes the mixed stack of the interrupted thread (registers `regs`)
/// into `out`, innermost first: native parts through `native` (none: no
/// native frames), Java parts through `java`. Signal-safe.
///
/// # Safety
/// The caller holds stripe `stripe`: no other thread walks with it until
/// this returns.
pub unsafe fn walk<J: JavaWalk>(
    native: Option<&NativeUnwinder>,
    stripe: usize,
    regs: Option<Registers>,
    java: &mut J,
    out: &mut [Frame],
) -> MixedWalk {
    let mut len = 0;
    let mut next = java.start(regs);
    for _ in 0..MAX_PARTS {
        let rest = out.get_mut(len..).unwrap_or_default();
        next = match next {
            Next::Native { regs, kind, end_at } => {
                let budget = rest.len().min(J::NATIVE_BUDGET);
                let walk = match (native, rest.get_mut(..budget)) {
                    // SAFETY: the caller holds `stripe` (this function's contract).
                    (Some(native), Some(part)) => unsafe { native.walk_from(stripe, regs, kind, part, end_at) },
                    _ => NativeWalk { frames: 0, regs, kind, stop: NativeStop::Failed },
                };
                len += walk.frames;
                java.after_native(&walk)
            }
            Next::Java => {
                let (written, next) = java.walk_java(rest);
                len += written;
                next
            }
            Next::Stop { truncated } => return MixedWalk { frames: len, truncated },
        };
    }
    MixedWalk { frames: len, truncated: true }
}

/// Whether a Java frame is left out of the stack: the innermost Java frame
/// (`innermost`) without a method id (HotSpot has made no jmethodID for it
/// yet) names nothing; its callers are kept, with an id or not. Both Java
/// sources and `verifywalk`'s reference follow this one rule.
pub fn drops_java_frame(innermost: bool, method: u64) -> bool {
    innermost && method == NO_JMETHOD_ID
}

/// Writes a frame saying why the Java stack could not be walked (unless
/// native frames already describe a thread that runs no Java code).
pub fn marker_frame(out: &mut [Frame], error: CallTraceError, after_native: bool) -> (usize, bool) {
    counters::increment(Counter::StackWalkFailed);
    let not_java = matches!(
        error,
        CallTraceError::NotJavaThread
            | CallTraceError::NoJavaFrame
            | CallTraceError::UnknownNotJava
            | CallTraceError::NotWalkableNotJava
    );
    match out.first_mut() {
        Some(slot) if !(after_native && not_java) => {
            *slot = Frame::error(error);
            (1, false)
        }
        _ => (0, false),
    }
}
