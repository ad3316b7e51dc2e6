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

/// Why a walk stopped short of the stack's root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// The depth limit (`jstackdepth`): frames beyond it are not recorded.
    Depth,
    /// A frame the walk could not get past (counted by reason where it
    /// broke): the frames beyond it are unknown.
    Broken,
    /// Native code, with no Java frame above and no anchor leading to
    /// one, could not be unwound past a frame.
    BrokenNative,
}

impl Cut {
    /// The marker frame that stands at the root of a stack cut this way,
    /// so that no reader takes the last frame walked for the thread's
    /// first: `[truncated]`, or `[unknown_Java]` (`[unknown_not_Java]`
    /// below native code alone) for frames that could not be walked.
    pub const fn marker(self) -> Frame {
        Frame::error(match self {
            Cut::Depth => CallTraceError::Truncated,
            Cut::Broken => CallTraceError::UnknownJava,
            Cut::BrokenNative => CallTraceError::UnknownNotJava,
        })
    }
}

/// Where a walk goes next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Native frames from `regs` (a frame whose pc is of kind `kind`),
    /// ending at the marked JVM functions `end_at` names.
    Native { regs: Registers, kind: PcKind, end_at: EndAt },
    /// Java frames, from where the Java source says.
    Java,
    /// The end of the walk: the stack's root, or where and why it was cut.
    Stop { cut: Option<Cut> },
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
    /// Why the stack was cut, if it was: its root frame is then the
    /// cut's marker.
    pub cut: Option<Cut>,
}

impl MixedWalk {
    /// Whether the stack is not whole (JFR's `truncated`).
    pub fn truncated(&self) -> bool {
        self.cut.is_some()
    }

    /// The walk of `frames` frames written into `out`, ended as `cut`
    /// says: a cut stack with frames gets the cut's marker at its root,
    /// after its frames, or in place of the outermost one when `out` is
    /// full.
    fn ended(out: &mut [Frame], frames: usize, cut: Option<Cut>) -> Self {
        let root = frames.min(out.len().saturating_sub(1));
        match (cut, out.get_mut(root)) {
            (Some(cut), Some(slot)) if frames > 0 => {
                *slot = cut.marker();
                Self { frames: root + 1, cut: Some(cut) }
            }
            _ => Self { frames, cut },
        }
    }
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
            Next::Stop { cut } => return MixedWalk::ended(out, len, cut),
        };
    }
    MixedWalk::ended(out, len, Some(Cut::Broken))
}

/// Whether a Java frame is left out of the stack: the innermost Java frame
/// (`innermost`) without a method id (HotSpot has made no jmethodID for it
/// yet) names nothing; its callers are kept, with an id or not. Both Java
/// sources and `verifywalk`'s reference follow this one rule.
pub fn drops_java_frame(innermost: bool, method: u64) -> bool {
    innermost && method == NO_JMETHOD_ID
}

/// Writes a frame saying why the Java stack could not be walked (unless
/// native frames already describe a thread that runs no Java code);
/// returns how many frames (0 or 1).
pub fn marker_frame(out: &mut [Frame], error: CallTraceError, after_native: bool) -> usize {
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
            1
        }
        _ => 0,
    }
}
