//! How stacks are walked, decided once from `cstack=` (the native
//! unwinder) and `javawalk=` (the source of Java frames). The option
//! parser produces a [`StackPlan`]; its spellings, the option checks and
//! the recorded settings derive from the plan alone, and the session
//! builds the unwinder and the Java source it names
//! (`session::build_sampler`). Pure, like the parser: no side effects, no
//! global state.

use sampler::native::NativeMode;

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

/// The `javawalk=` spellings of the two Java sources.
const JAVA_WALKS: [(&str, JavaSource); 2] =
    [("hotspot", JavaSource::HotSpot { extended: false }), ("asgct", JavaSource::AsyncGetCallTrace)];

/// The default Java source: HotSpot's structures where the walker knows
/// the frames (x86-64), cheaper on deep stacks and complete where
/// AsyncGetCallTrace gives up (docs/benchmarks.md); AsyncGetCallTrace
/// elsewhere.
const DEFAULT_JAVA: JavaSource = if unwind::arch::HOTSPOT_FRAME.is_some() {
    JavaSource::HotSpot { extended: false }
} else {
    JavaSource::AsyncGetCallTrace
};

/// The native unwinder (none: Java frames only), the Java source, and the
/// `cstack=` spelling that asked for them (the recorded setting).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackPlan {
    pub native: Option<NativeMode>,
    pub java: JavaSource,
    cstack: &'static str,
}

/// One `cstack=` spelling: its native unwinder, and, for `vm` and `vmx`,
/// the Java source it names itself (the others take `javawalk=`'s).
struct Mode {
    spelling: &'static str,
    native: Option<NativeMode>,
    java: Option<JavaSource>,
}

const fn mode(spelling: &'static str, native: Option<NativeMode>, java: Option<JavaSource>) -> Mode {
    Mode { spelling, native, java }
}

/// Every `cstack=` spelling.
const MODES: [Mode; 6] = [
    mode("fp", Some(NativeMode::FramePointer), None),
    mode("dwarf", Some(NativeMode::Dwarf), None),
    mode("sframe", Some(NativeMode::SFrame), None),
    mode("vm", Some(NativeMode::Dwarf), Some(JavaSource::HotSpot { extended: false })),
    mode("vmx", Some(NativeMode::Dwarf), Some(JavaSource::HotSpot { extended: true })),
    mode("no", None, None),
];

/// The default `cstack=`: `vm` where the HotSpot walker knows the frames,
/// else `fp`.
const DEFAULT: usize = if unwind::arch::HOTSPOT_FRAME.is_some() { 3 } else { 0 };
const _: () = assert!(matches!(MODES[3].java, Some(JavaSource::HotSpot { extended: false })));

impl Default for StackPlan {
    fn default() -> Self {
        let mode = &MODES[DEFAULT];
        Self { native: mode.native, java: mode.java.unwrap_or(DEFAULT_JAVA), cstack: mode.spelling }
    }
}

impl StackPlan {
    /// The plan `cstack=text` asks for, Java frames from the default
    /// source unless the mode names its own.
    pub fn parse(text: &str) -> Option<Self> {
        let mode = MODES.iter().find(|mode| mode.spelling == text)?;
        Some(Self { native: mode.native, java: mode.java.unwrap_or(DEFAULT_JAVA), cstack: mode.spelling })
    }

    /// The accepted `cstack=` spellings, for error messages.
    pub fn accepted() -> String {
        MODES.map(|mode| mode.spelling).join(", ")
    }

    /// The Java source `javawalk=text` names.
    pub fn java_walk(text: &str) -> Option<JavaSource> {
        JAVA_WALKS.iter().find(|(spelling, _)| *spelling == text).map(|(_, java)| *java)
    }

    /// The accepted `javawalk=` spellings, for error messages.
    pub fn java_walks_accepted() -> String {
        JAVA_WALKS.map(|(spelling, _)| spelling).join(", ")
    }

    /// This plan with Java frames from `java` (`javawalk=`); an error if
    /// its `cstack=` mode names another source itself (`vm`, `vmx`).
    pub fn with_java(self, java: JavaSource) -> Result<Self, String> {
        let names_its_own = MODES.iter().any(|mode| mode.spelling == self.cstack && mode.java.is_some());
        match (names_its_own, self.java, java) {
            (true, JavaSource::HotSpot { .. }, JavaSource::HotSpot { .. }) => Ok(self),
            (true, _, _) => Err(format!(
                "cstack={} walks Java frames with HotSpot's structures; javawalk={} needs cstack={}",
                self.cstack,
                java_spelling(java),
                spellings(|mode| mode.java.is_none())
            )),
            (false, _, _) => Ok(Self { java, ..self }),
        }
    }

    /// The `cstack=` spelling of this plan (the recorded setting).
    pub fn spelling(self) -> &'static str {
        self.cstack
    }

    /// The `javawalk=` spelling of this plan's Java source (the recorded
    /// setting).
    pub fn java_spelling(self) -> &'static str {
        java_spelling(self.java)
    }

    /// What runs instead when the HotSpot walker cannot: the same native
    /// unwinder with AsyncGetCallTrace's Java frames (`vm`, `vmx` →
    /// `dwarf`).
    pub fn without_hotspot(self) -> Self {
        let cstack = match MODES.iter().find(|mode| mode.spelling == self.cstack) {
            Some(mode) if mode.java.is_some() => MODES.iter().find(|m| m.native == mode.native && m.java.is_none()),
            found => found,
        };
        Self { java: JavaSource::AsyncGetCallTrace, cstack: cstack.map_or(self.cstack, |m| m.spelling), ..self }
    }

    /// Rejects options this plan cannot serve.
    pub fn check(self, verify_walk: bool, remote_symbolication: bool) -> Result<(), String> {
        if verify_walk && self.java == JavaSource::AsyncGetCallTrace {
            return Err(
                "verifywalk: compares the HotSpot walker with AsyncGetCallTrace, so needs javawalk=hotspot (the \
                 default)"
                    .to_owned(),
            );
        }
        if remote_symbolication && self.native.is_none() {
            let native = spellings(|mode| mode.native.is_some());
            return Err(format!("remotesym: remote symbolication needs native stacks (cstack={native})"));
        }
        Ok(())
    }
}

fn java_spelling(java: JavaSource) -> &'static str {
    match java {
        JavaSource::HotSpot { .. } => JAVA_WALKS[0].0,
        JavaSource::AsyncGetCallTrace => JAVA_WALKS[1].0,
    }
}

/// The `cstack=` spellings of the modes `wanted` accepts, in [`MODES`]
/// order, as "a, b or c".
fn spellings(wanted: impl Fn(&Mode) -> bool) -> String {
    let names: Vec<&str> = MODES.iter().filter(|mode| wanted(mode)).map(|mode| mode.spelling).collect();
    match names.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOTSPOT: JavaSource = JavaSource::HotSpot { extended: false };

    #[test]
    fn a_hotspot_plan_falls_back_to_asgct_over_the_same_native_unwinder() {
        for hotspot in ["vm", "vmx"] {
            let fallback = StackPlan::parse(hotspot).unwrap().without_hotspot();
            assert_eq!((fallback.spelling(), fallback.java_spelling()), ("dwarf", "asgct"));
        }
        for other in ["fp", "dwarf", "sframe", "no"] {
            let fallback = StackPlan::parse(other).unwrap().without_hotspot();
            assert_eq!((fallback.spelling(), fallback.java), (other, JavaSource::AsyncGetCallTrace));
        }
    }

    #[test]
    fn every_spelling_round_trips() {
        for mode in &MODES {
            let plan = StackPlan::parse(mode.spelling).unwrap();
            assert_eq!((plan.spelling(), plan.native), (mode.spelling, mode.native));
        }
        let default = if unwind::arch::HOTSPOT_FRAME.is_some() { "vm" } else { "fp" };
        assert_eq!(StackPlan::default().spelling(), default);
        assert_eq!(StackPlan::parse("lbr"), None);
        assert_eq!(StackPlan::accepted(), "fp, dwarf, sframe, vm, vmx, no");
        assert_eq!(StackPlan::java_walks_accepted(), "hotspot, asgct");
        for (spelling, java) in JAVA_WALKS {
            assert_eq!(StackPlan::java_walk(spelling), Some(java));
            assert_eq!(java_spelling(java), spelling);
        }
    }

    /// Every native unwinder takes Java frames from the walker the default
    /// uses, so no `cstack=` loses the stacks the default keeps;
    /// AsyncGetCallTrace only when asked for.
    #[test]
    fn every_mode_walks_java_frames_as_the_default_does_unless_told() {
        let default_java = StackPlan::default().java;
        for spelling in ["fp", "dwarf", "sframe", "vm", "no"] {
            assert_eq!(StackPlan::parse(spelling).unwrap().java, default_java, "{spelling}");
        }
        for spelling in ["fp", "dwarf", "sframe", "no"] {
            let plan = StackPlan::parse(spelling).unwrap();
            let asgct = plan.with_java(JavaSource::AsyncGetCallTrace).unwrap();
            assert_eq!(
                (asgct.java, asgct.native, asgct.spelling()),
                (JavaSource::AsyncGetCallTrace, plan.native, spelling)
            );
            assert_eq!(plan.with_java(HOTSPOT).unwrap().java, HOTSPOT);
        }
        let vmx = StackPlan::parse("vmx").unwrap();
        assert_eq!(vmx.with_java(HOTSPOT), Ok(vmx), "vmx keeps its extended walk");
        assert_eq!(
            vmx.with_java(JavaSource::AsyncGetCallTrace).unwrap_err(),
            "cstack=vmx walks Java frames with HotSpot's structures; javawalk=asgct needs cstack=fp, dwarf, sframe or no"
        );
    }

    #[test]
    fn checks_follow_the_plan() {
        let vm = StackPlan::parse("vm").unwrap();
        let no = StackPlan::parse("no").unwrap();
        assert!(vm.check(true, true).is_ok());
        if unwind::arch::HOTSPOT_FRAME.is_some() {
            assert!(StackPlan::default().check(true, true).is_ok(), "the default walks with HotSpot's structures");
            assert!(StackPlan::parse("fp").unwrap().check(true, false).is_ok());
        }
        let asgct = StackPlan::parse("fp").unwrap().with_java(JavaSource::AsyncGetCallTrace).unwrap();
        assert_eq!(
            asgct.check(true, false).unwrap_err(),
            "verifywalk: compares the HotSpot walker with AsyncGetCallTrace, so needs javawalk=hotspot (the default)"
        );
        assert_eq!(
            no.check(false, true).unwrap_err(),
            "remotesym: remote symbolication needs native stacks (cstack=fp, dwarf, sframe, vm or vmx)"
        );
        assert!(no.check(false, false).is_ok());
    }
}
