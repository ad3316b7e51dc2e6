//! How stacks are walked, decided once from `cstack=`: the native unwinder
//! and the source of Java frames. The option parser produces a
//! [`StackPlan`]; `start` derives its option checks, the walkers it builds
//! and the setting it records from the plan alone. Control plane only.

use crate::libraries::sections::Wanted;
use crate::libraries::LibraryTable;
use crate::log;
use crate::sampling::java_thread::JavaThreads;
use crate::sampling::native::{NativeMode, NativeUnwinder};
use crate::sampling::vm_stack::HotSpotSource;
use crate::storage::samples::STRIPES;
use crate::vm::Vm;
use std::sync::Arc;

/// Where the Java frames of a sample come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JavaSource {
    AsyncGetCallTrace,
    /// HotSpot's own structures; `extended` (`vmx`) keeps the native
    /// frames between Java frames.
    HotSpot {
        extended: bool,
    },
}

/// The native unwinder (none: Java frames only) and the Java source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackPlan {
    pub native: Option<NativeMode>,
    pub java: JavaSource,
}

const fn plan(native: Option<NativeMode>, java: JavaSource) -> StackPlan {
    StackPlan { native, java }
}

/// Every `cstack=` spelling and its plan, the default (frame pointers) first.
const MODES: [(&str, StackPlan); 6] = [
    ("fp", plan(Some(NativeMode::FramePointer), JavaSource::AsyncGetCallTrace)),
    ("dwarf", plan(Some(NativeMode::Dwarf), JavaSource::AsyncGetCallTrace)),
    ("sframe", plan(Some(NativeMode::SFrame), JavaSource::AsyncGetCallTrace)),
    ("vm", plan(Some(NativeMode::Dwarf), JavaSource::HotSpot { extended: false })),
    ("vmx", plan(Some(NativeMode::Dwarf), JavaSource::HotSpot { extended: true })),
    ("no", plan(None, JavaSource::AsyncGetCallTrace)),
];

impl Default for StackPlan {
    /// Frame pointers, as `cstack=fp`.
    fn default() -> Self {
        MODES[0].1
    }
}

impl StackPlan {
    /// The plan `cstack=text` asks for.
    pub fn parse(text: &str) -> Option<Self> {
        MODES.iter().find(|(spelling, _)| *spelling == text).map(|(_, plan)| *plan)
    }

    /// The accepted spellings, for error messages.
    pub fn accepted() -> String {
        MODES.map(|(spelling, _)| spelling).join(", ")
    }

    /// The `cstack=` spelling of this plan (the recorded setting).
    pub fn spelling(self) -> &'static str {
        MODES.iter().find(|(_, plan)| *plan == self).map_or("fp", |(spelling, _)| spelling)
    }

    /// Rejects options this plan cannot serve.
    pub fn check(self, verify_walk: bool, remote_symbolication: bool) -> Result<(), &'static str> {
        if verify_walk && self.java == JavaSource::AsyncGetCallTrace {
            return Err("verifywalk: compares the HotSpot walker with AsyncGetCallTrace, so needs cstack=vm or vmx");
        }
        if remote_symbolication && self.native.is_none() {
            return Err("remotesym: remote symbolication needs native stacks (cstack=fp, dwarf, sframe, vm or vmx)");
        }
        Ok(())
    }

    /// The native unwinder, if the plan has one, over a new library table
    /// loading the unwind sections it needs. Not signal-safe.
    pub fn native_unwinder(self, remote: bool) -> Option<NativeUnwinder> {
        let mode = self.native?;
        let wanted = match mode {
            NativeMode::FramePointer => Wanted::Nothing,
            NativeMode::Dwarf => Wanted::Dwarf,
            NativeMode::SFrame => Wanted::SFrame,
        };
        Some(NativeUnwinder::new(mode, remote, Arc::new(LibraryTable::new(wanted)), STRIPES))
    }

    /// The HotSpot Java source the plan asks for, or `None` (with a
    /// warning saying why) to walk Java frames with AsyncGetCallTrace. It
    /// needs the TLS-free JavaThread lookup. Not signal-safe.
    pub fn hotspot_source(self, vm: &Vm, threads: &JavaThreads) -> Option<HotSpotSource> {
        let JavaSource::HotSpot { extended } = self.java else { return None };
        if !matches!(threads, JavaThreads::Key(_)) {
            log::warn!("cstack=vm: the JavaThread lookup is unavailable; walking Java frames with AsyncGetCallTrace");
            return None;
        }
        match vm.java_segment_walker() {
            Ok(segments) => Some(HotSpotSource::new(segments, extended, STRIPES)),
            Err(e) => {
                log::warn!("cstack=vm: {e}; walking Java frames with AsyncGetCallTrace");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_round_trips() {
        for (spelling, plan) in MODES {
            assert_eq!(StackPlan::parse(spelling), Some(plan));
            assert_eq!(plan.spelling(), spelling);
        }
        assert_eq!(StackPlan::default().spelling(), "fp");
        assert_eq!(StackPlan::parse("lbr"), None);
        assert_eq!(StackPlan::accepted(), "fp, dwarf, sframe, vm, vmx, no");
    }

    #[test]
    fn checks_follow_the_plan() {
        let vm = StackPlan::parse("vm").unwrap();
        let no = StackPlan::parse("no").unwrap();
        assert!(vm.check(true, true).is_ok());
        assert!(StackPlan::default().check(true, false).unwrap_err().starts_with("verifywalk"));
        assert!(no.check(false, true).unwrap_err().starts_with("remotesym"));
        assert!(no.check(false, false).is_ok());
    }
}
