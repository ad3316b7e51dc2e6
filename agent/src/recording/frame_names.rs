//! Turning stored frames into constant-pool frames: Java methods resolved
//! through JVMTI, native frames named from the library table (their
//! library as class, as async-profiler writes them), remote frames in the
//! dialect's encoding, and markers for stacks that could not be walked.

use super::methods::{MethodInfo, MethodSource};
use crate::libraries::kernel::KernelNames;
use crate::libraries::{Library, LibraryTable};
use frames::{
    CallTraceError, Frame, FrameKind, FrameType, Mark, Marker, RemoteFrame, UnknownNative, BCI_NATIVE_METHOD,
    NON_JAVA_DESCRIPTOR, NON_JAVA_POSITION, REMOTE_METHOD_NAME,
};
use jfr_writer::{ConstantPools, Dialect, FrameDef, MethodDef, MethodId};
use std::collections::HashMap;

const ACC_NATIVE: i32 = 0x100;
/// Pool keys for frames that are not Java methods: above any jmethodID.
const SYNTHETIC_METHOD_KEY: u64 = 1 << 63;
const NATIVE_METHOD_KEY: u64 = 1 << 62;
/// Packed remote frames have their two top bits clear.
const REMOTE_METHOD_KEY: u64 = 3 << 62;

/// A native frame's name: function (or `[library+0xoffset]`), library
/// file name (empty when no library holds the address) and frame type.
struct NativeName {
    name: String,
    library: String,
    frame_type: FrameType,
}

/// Resolves the frames of one chunk.
pub struct FrameNames<'a> {
    methods: &'a mut dyn MethodSource,
    libraries: Option<&'a LibraryTable>,
    kernel: &'a mut KernelNames,
    dialect: Dialect,
    /// Native frame names by attribution address.
    natives: HashMap<u64, NativeName>,
}

impl<'a> FrameNames<'a> {
    pub fn new(
        methods: &'a mut dyn MethodSource,
        libraries: Option<&'a LibraryTable>,
        kernel: &'a mut KernelNames,
        dialect: Dialect,
    ) -> Self {
        Self { methods, libraries, kernel, dialect, natives: HashMap::new() }
    }

    /// A marker frame (`[storage_full]`, `[GC_active]`, ...).
    pub fn marker(&mut self, pools: &mut ConstantPools, name: &str) -> FrameDef {
        let (line, bci) = (NON_JAVA_POSITION, NON_JAVA_POSITION);
        FrameDef { method: synthetic(pools, name), line, bci, frame_type: FrameType::Native }
    }

    pub fn frame(&mut self, pools: &mut ConstantPools, frame: &Frame) -> FrameDef {
        match frame.kind {
            FrameKind::Native => {
                let native = self.native_name(frame.method);
                let method = native_method(pools, &native.name, &native.library);
                FrameDef { method, line: NON_JAVA_POSITION, bci: NON_JAVA_POSITION, frame_type: native.frame_type }
            }
            FrameKind::Kernel => {
                let method = native_method(pools, self.kernel.name(frame.method), "");
                FrameDef { method, line: NON_JAVA_POSITION, bci: NON_JAVA_POSITION, frame_type: FrameType::Kernel }
            }
            FrameKind::RemoteNative => {
                let (method, frame_type) = self.remote(pools, RemoteFrame::unpack(frame.method));
                FrameDef { method, line: NON_JAVA_POSITION, bci: NON_JAVA_POSITION, frame_type }
            }
            // A frame whose method had no jmethodID when it was sampled.
            FrameKind::Java | FrameKind::Interpreted | FrameKind::C1Compiled | FrameKind::Inlined
                if frame.method == 0 =>
            {
                let native = frame.bci == BCI_NATIVE_METHOD;
                java_frame(self.dialect, synthetic(pools, Marker::UnknownJavaMethod.name()), -1, frame, native)
            }
            FrameKind::Java | FrameKind::Interpreted | FrameKind::C1Compiled | FrameKind::Inlined => {
                match self.methods.method(frame.method) {
                    Some(info) => {
                        let native = frame.bci == BCI_NATIVE_METHOD || info.modifiers & ACC_NATIVE != 0;
                        let method = java_method(pools, frame.method, info);
                        java_frame(self.dialect, method, info.line_of(frame.bci), frame, native)
                    }
                    // JVMTI no longer knows the id: its class was unloaded
                    // between the sample and this chunk.
                    None => FrameDef {
                        method: synthetic(pools, Marker::UnloadedJavaMethod.name()),
                        line: -1,
                        bci: frame.bci,
                        frame_type: FrameType::JitCompiled,
                    },
                }
            }
            FrameKind::Error => {
                let error = CallTraceError::from_code(frame.method as i64);
                self.marker(pools, error.name())
            }
        }
    }

    /// A remote frame's method and type in the dialect's encoding; one
    /// whose library has no build-id (it cannot be) is a marker.
    fn remote(&self, pools: &mut ConstantPools, remote: RemoteFrame) -> (MethodId, FrameType) {
        let library = self.libraries.and_then(|t| t.by_index(remote.lib_index));
        let Some((build_id, library)) = library.and_then(|l| Some((l.build_id.as_ref()?.to_hex(), l))) else {
            let frame_type = match self.dialect {
                Dialect::Jdk => FrameType::Native,
                Dialect::Datadog => FrameType::RemoteNative,
            };
            return (synthetic(pools, Marker::UnknownLibrary.name()), frame_type);
        };
        match self.dialect {
            Dialect::Jdk => (remote_library_method(pools, &library, &build_id, remote), native_type(&library)),
            Dialect::Datadog => (remote_method(pools, &build_id, remote), FrameType::RemoteNative),
        }
    }

    fn native_name(&mut self, address: u64) -> &NativeName {
        let libraries = self.libraries;
        self.natives.entry(address).or_insert_with(|| match libraries.and_then(|t| t.library_at(address)) {
            Some(library) => NativeName {
                name: library.describe(address),
                library: library.name().to_owned(),
                frame_type: native_type(&library),
            },
            None => NativeName {
                name: UnknownNative(address).to_string(),
                library: String::new(),
                frame_type: FrameType::Native,
            },
        })
    }
}

/// The JVM's own code is C++; other libraries' is native.
fn native_type(library: &Library) -> FrameType {
    if library.is_jvm {
        FrameType::Cpp
    } else {
        FrameType::Native
    }
}

/// A Java method's frame; a `native` method has no line or bci, and is
/// typed `Native` in the Datadog dialect, JIT compiled in the JDK
/// dialect as async-profiler types it (its converter prints `Native`
/// frames without their class: `sleep`, not `java.lang.Thread.sleep`).
fn java_frame(dialect: Dialect, method: MethodId, line: i32, frame: &Frame, native: bool) -> FrameDef {
    if !native {
        return FrameDef { method, line, bci: frame.bci, frame_type: FrameType::from(frame.kind) };
    }
    let frame_type = match dialect {
        Dialect::Jdk => FrameType::JitCompiled,
        Dialect::Datadog => FrameType::Native,
    };
    FrameDef { method, line: -1, bci: -1, frame_type }
}

/// A pseudo-method standing for a frame that is not a Java method.
fn synthetic(pools: &mut ConstantPools, name: &str) -> MethodId {
    pools.method(SYNTHETIC_METHOD_KEY | u64::from(name_hash(name)), |p| MethodDef {
        class: p.class("", 0),
        name: p.symbol(name),
        descriptor: p.symbol(NON_JAVA_DESCRIPTOR),
        modifiers: 0,
        hidden: false,
    })
}

fn name_hash(name: &str) -> u32 {
    name.bytes().fold(2_166_136_261u32, |h, b| (h ^ u32::from(b)).wrapping_mul(16_777_619))
}

fn java_method(pools: &mut ConstantPools, id: u64, info: &MethodInfo) -> MethodId {
    pools.method(id, |p| MethodDef {
        class: p.class(&info.class_name, info.class_modifiers),
        name: p.symbol(&info.name),
        descriptor: p.symbol(&info.signature),
        modifiers: info.modifiers,
        hidden: false,
    })
}

/// A native function of `library` (a file name, outside any package).
fn native_method(pools: &mut ConstantPools, name: &str, library: &str) -> MethodId {
    let key = NATIVE_METHOD_KEY | name_hash64(&format!("{library}\0{name}"));
    pools.method(key, |p| MethodDef {
        class: p.class_in(library, None, 0),
        name: p.symbol(name),
        descriptor: p.symbol(NON_JAVA_DESCRIPTOR),
        modifiers: ACC_NATIVE,
        hidden: false,
    })
}

/// A remote frame in the JDK dialect, which every JFR tool prints: class =
/// the library's file name in a package named by its build-id, name =
/// `[library+0xoffset]` (what the frame shows until it is symbolized).
fn remote_library_method(
    pools: &mut ConstantPools,
    library: &Library,
    build_id: &str,
    remote: RemoteFrame,
) -> MethodId {
    let identity = RemoteFrame { mark: Mark::None, ..remote }.pack().unwrap_or(0);
    pools.method(REMOTE_METHOD_KEY | identity, |p| MethodDef {
        class: p.class_in(library.name(), Some(build_id), 0),
        name: p.symbol(&format!("[{}+{:#x}]", library.name(), remote.offset)),
        descriptor: p.symbol(NON_JAVA_DESCRIPTOR),
        modifiers: ACC_NATIVE,
        hidden: false,
    })
}

/// A remote frame in the Datadog dialect: class = the library's build-id,
/// name = `<remote>`, descriptor = the pc offset in hex (the
/// remote-symbolication contract).
fn remote_method(pools: &mut ConstantPools, build_id: &str, remote: RemoteFrame) -> MethodId {
    let identity = RemoteFrame { mark: Mark::None, ..remote }.pack().unwrap_or(0);
    pools.method(REMOTE_METHOD_KEY | identity, |p| MethodDef {
        class: p.class(build_id, 0),
        name: p.symbol(REMOTE_METHOD_NAME),
        descriptor: p.symbol(&format!("{:#x}", remote.offset)),
        modifiers: ACC_NATIVE,
        hidden: false,
    })
}

fn name_hash64(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)) >> 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::methods::NoMethods;
    use frames::JavaFrameKind;

    #[test]
    fn java_frames_without_a_method_id_are_unknown_java_methods() {
        let mut methods = NoMethods;
        let mut kernel = KernelNames::default();
        let mut names = FrameNames::new(&mut methods, None, &mut kernel, Dialect::Jdk);
        let mut pools = ConstantPools::new();
        let unknown = synthetic(&mut pools, Marker::UnknownJavaMethod.name());
        let compiled = names.frame(&mut pools, &Frame::java_of_kind(0, 7, JavaFrameKind::C1Compiled));
        assert_eq!((compiled.method, compiled.line, compiled.bci), (unknown, -1, 7));
        assert_eq!(compiled.frame_type, FrameType::C1Compiled);
        let native = names.frame(&mut pools, &Frame::java(0, BCI_NATIVE_METHOD));
        assert_eq!((native.method, native.bci, native.frame_type), (unknown, -1, FrameType::JitCompiled));
        // An id JVMTI does not know is another case: its class was unloaded.
        let unloaded = names.frame(&mut pools, &Frame::java(0x7f00_1234, 3));
        assert_ne!(unloaded.method, unknown);
        assert_eq!(unloaded.method, synthetic(&mut pools, Marker::UnloadedJavaMethod.name()));
        // The Datadog dialect types a native method Native.
        let mut datadog = FrameNames::new(&mut methods, None, &mut kernel, Dialect::Datadog);
        let native = datadog.frame(&mut pools, &Frame::java(0, BCI_NATIVE_METHOD));
        assert_eq!((native.method, native.bci, native.frame_type), (unknown, -1, FrameType::Native));
    }
}
