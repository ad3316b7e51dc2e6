//! How stacks are walked, decided once from `cstack=`: the native unwinder
//! and the source of Java frames. The option parser produces a
//! [`StackPlan`]; its spelling, the option checks and the recorded setting
//! derive from the plan alone, and the session builds the unwinder and the
//! Java source it names (`profiler::build_sampler`). Pure, like the parser:
//! no side effects, no global state.

use crate::sampling::native::NativeMode;

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

/// Every `cstack=` spelling and its plan.
const MODES: [(&str, StackPlan); 6] = [
    ("fp", plan(Some(NativeMode::FramePointer), JavaSource::AsyncGetCallTrace)),
    ("dwarf", plan(Some(NativeMode::Dwarf), JavaSource::AsyncGetCallTrace)),
    ("sframe", plan(Some(NativeMode::SFrame), JavaSource::AsyncGetCallTrace)),
    ("vm", plan(Some(NativeMode::Dwarf), JavaSource::HotSpot { extended: false })),
    ("vmx", plan(Some(NativeMode::Dwarf), JavaSource::HotSpot { extended: true })),
    ("no", plan(None, JavaSource::AsyncGetCallTrace)),
];

/// The default, `cstack=vm` where the HotSpot walker knows the frames
/// (x86-64): Java frames from HotSpot's own structures (AsyncGetCallTrace,
/// with a warning, where the VM's layout cannot be read), native frames by
/// DWARF; cheaper on deep stacks and complete where AsyncGetCallTrace
/// gives up (README, benchmarks). Elsewhere `cstack=fp`.
const DEFAULT: usize = if unwind::arch::HOTSPOT_FRAME.is_some() { 3 } else { 0 };
const _: () = assert!(matches!(MODES[3].1.java, JavaSource::HotSpot { extended: false }));

impl Default for StackPlan {
    fn default() -> Self {
        MODES[DEFAULT].1
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
        MODES.iter().find(|(_, plan)| *plan == self).map_or(MODES[DEFAULT].0, |(spelling, _)| spelling)
    }

    /// What runs instead when the HotSpot walker cannot: the same native
    /// unwinder with AsyncGetCallTrace's Java frames (`vm`, `vmx` → `dwarf`).
    pub fn without_hotspot(self) -> Self {
        plan(self.native, JavaSource::AsyncGetCallTrace)
    }

    /// Rejects options this plan cannot serve.
    pub fn check(self, verify_walk: bool, remote_symbolication: bool) -> Result<(), String> {
        if verify_walk && self.java == JavaSource::AsyncGetCallTrace {
            let hotspot = spellings(|plan| plan.java != JavaSource::AsyncGetCallTrace);
            return Err(format!(
                "verifywalk: compares the HotSpot walker with AsyncGetCallTrace, so needs cstack={hotspot}"
            ));
        }
        if remote_symbolication && self.native.is_none() {
            let native = spellings(|plan| plan.native.is_some());
            return Err(format!("remotesym: remote symbolication needs native stacks (cstack={native})"));
        }
        Ok(())
    }
}

/// The spellings of the plans `wanted` accepts, in [`MODES`] order, as
/// "a, b or c".
fn spellings(wanted: impl Fn(StackPlan) -> bool) -> String {
    let names: Vec<&str> = MODES.iter().filter(|(_, plan)| wanted(*plan)).map(|(spelling, _)| *spelling).collect();
    match names.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_hotspot_plan_falls_back_to_asgct_over_the_same_native_unwinder() {
        for hotspot in ["vm", "vmx"] {
            assert_eq!(StackPlan::parse(hotspot).unwrap().without_hotspot().spelling(), "dwarf");
        }
        for other in ["fp", "dwarf", "sframe", "no"] {
            assert_eq!(StackPlan::parse(other).unwrap().without_hotspot().spelling(), other);
        }
    }

    use super::*;

    #[test]
    fn every_spelling_round_trips() {
        for (spelling, plan) in MODES {
            assert_eq!(StackPlan::parse(spelling), Some(plan));
            assert_eq!(plan.spelling(), spelling);
        }
        let default = if unwind::arch::HOTSPOT_FRAME.is_some() { "vm" } else { "fp" };
        assert_eq!(StackPlan::default().spelling(), default);
        assert_eq!(StackPlan::parse("lbr"), None);
        assert_eq!(StackPlan::accepted(), "fp, dwarf, sframe, vm, vmx, no");
    }

    #[test]
    fn checks_follow_the_plan() {
        let vm = StackPlan::parse("vm").unwrap();
        let no = StackPlan::parse("no").unwrap();
        assert!(vm.check(true, true).is_ok());
        if unwind::arch::HOTSPOT_FRAME.is_some() {
            assert!(StackPlan::default().check(true, true).is_ok(), "the default walks with HotSpot's structures");
        }
        assert_eq!(
            StackPlan::parse("fp").unwrap().check(true, false).unwrap_err(),
            "verifywalk: compares the HotSpot walker with AsyncGetCallTrace, so needs cstack=vm or vmx"
        );
        assert_eq!(
            no.check(false, true).unwrap_err(),
            "remotesym: remote symbolication needs native stacks (cstack=fp, dwarf, sframe, vm or vmx)"
        );
        assert!(no.check(false, false).is_ok());
    }
}
