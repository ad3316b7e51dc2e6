//! Which JDKs the agent runs in, decided once at load from the JVMTI
//! version before anything else is set up: JDK 11 and newer (tested on 11,
//! 17, 21 and 25; the HotSpot walker then decides from VMStructs what it
//! can read). On an older JDK every entry point says why in one message and
//! leaves the JVM untouched.

use jni::sys::jint;

/// The oldest JDK feature release supported.
pub const OLDEST_SUPPORTED: u32 = 11;

/// `JVMTI_VERSION_MASK_INTERFACE_TYPE` and the JVMTI interface type.
const INTERFACE_MASK: jint = 0x7000_0000;
const INTERFACE_JVMTI: jint = 0x3000_0000;

/// The major version of a JVMTI version number: the JDK feature release
/// from JDK 9 on (`0x300B0000` is JDK 11), 1 for JDK 8 and older (`1.2`).
pub fn major(version: jint) -> u32 {
    ((version & 0x0FFF_0000) >> 16) as u32
}

/// The JDK feature release behind JVMTI version `version` if the agent
/// supports it, else the one message to print.
pub fn check(version: jint) -> Result<u32, String> {
    if version & INTERFACE_MASK != INTERFACE_JVMTI {
        return Err(format!("JVMTI reports version {version:#x}, not a JVMTI version; the profiler does nothing"));
    }
    let (major, minor) = (major(version), (version >> 8) & 0xFF);
    let needs = format!(
        "the profiler needs JDK {OLDEST_SUPPORTED} or newer (it is tested on JDK 11, 17, 21 and 25) and does \
         nothing in this JVM"
    );
    match major {
        0 | 1 => Err(format!(
            "JDK 8 or older (JVMTI 1.{minor}) is not supported, no profiling mode runs there: {needs} (JDK 8 has \
             other VMStructs, which cstack=vm and vmx read, no SampledObjectAlloc event, no JVMTI.agent_load for \
             jcmd attach, cannot load the Java API's Java 11 classes, and its CPU, wall-clock and native-stack \
             sampling were never tested)"
        )),
        2..OLDEST_SUPPORTED => Err(format!("JDK {major} is not supported: {needs}")),
        _ => Ok(major),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jdk_11_and_newer_are_supported() {
        assert_eq!(check(0x300B_0000), Ok(11), "JVMTI_VERSION_11");
        assert_eq!(check(0x3011_0000), Ok(17), "JDK 17's JVMTI_VERSION");
        assert_eq!(check(0x3015_0000), Ok(21));
        assert_eq!(check(0x3019_0000), Ok(25));
        assert_eq!(check(0x301A_0100), Ok(26), "a newer JDK, with a minor version");
    }

    #[test]
    fn jdk_8_is_refused_with_the_modes_it_lacks() {
        let message = check(0x3001_0200).unwrap_err();
        assert!(message.starts_with("JDK 8 or older (JVMTI 1.2) is not supported"), "{message}");
        for named in ["no profiling mode", "cstack=vm", "jcmd attach", "Java API", "CPU, wall-clock", "does nothing"] {
            assert!(message.contains(named), "{named}: {message}");
        }
        assert!(check(0x3001_0000).unwrap_err().contains("JVMTI 1.0"));
    }

    #[test]
    fn jdk_9_and_10_are_refused() {
        assert!(check(0x3009_0000).unwrap_err().starts_with("JDK 9 is not supported: the profiler needs JDK 11"));
        assert!(check(0x300A_0000).unwrap_err().starts_with("JDK 10 is not supported"));
    }

    #[test]
    fn a_version_that_is_not_jvmti_is_refused() {
        assert!(check(0x0001_0008).unwrap_err().contains("not a JVMTI version"));
    }
}
