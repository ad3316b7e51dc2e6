//! Builders for the unit tests: recordings from plain frames, scratch
//! directories, and a debug file with known contents (the test binary).
//! The only test code that names frame kinds.

use crate::events::EventKind;
use crate::recording::{Builder, Chunk, Clock, Frame, NativeLibrary, Recording, SampleData, Thread};
use frames::{FrameType, NON_JAVA_DESCRIPTOR, REMOTE_METHOD_NAME};
use std::path::{Path, PathBuf};

pub const INTERPRETED: Option<FrameType> = Some(FrameType::Interpreted);
pub const NATIVE: Option<FrameType> = Some(FrameType::Native);
pub const REMOTE_NATIVE: Option<FrameType> = Some(FrameType::RemoteNative);

/// A Java frame of `class` (internal name) at `line`.
pub fn java(class: &str, method: &str, line: i32) -> Frame {
    Frame {
        class: class.to_owned(),
        method: method.to_owned(),
        descriptor: "()V".to_owned(),
        modifiers: 1,
        line,
        bci: 7,
        kind: INTERPRETED,
        build_id: None,
    }
}

/// A native frame named `symbol`.
pub fn native(symbol: &str) -> Frame {
    Frame {
        class: String::new(),
        method: symbol.to_owned(),
        descriptor: String::new(),
        modifiers: 0x100,
        line: -1,
        bci: -1,
        kind: NATIVE,
        build_id: None,
    }
}

/// A remote frame as the agent writes it in the Datadog dialect: the
/// build-id as class, [`REMOTE_METHOD_NAME`] as name, the offset in hex as
/// descriptor.
pub fn remote(build_id: &str, offset: u64) -> Frame {
    Frame {
        class: build_id.to_owned(),
        method: REMOTE_METHOD_NAME.to_owned(),
        descriptor: format!("{offset:#x}"),
        modifiers: 0x100,
        line: -1,
        bci: -1,
        kind: REMOTE_NATIVE,
        build_id: None,
    }
}

/// A remote frame as the agent writes it in the JDK dialect: a native
/// frame `[library+0xoffset]` of class `library` in the build-id's package.
pub fn remote_jdk(library: &str, build_id: &str, offset: u64) -> Frame {
    Frame {
        class: library.to_owned(),
        method: format!("[{library}+{offset:#x}]"),
        descriptor: NON_JAVA_DESCRIPTOR.to_owned(),
        modifiers: 0x100,
        line: -1,
        bci: -1,
        kind: NATIVE,
        build_id: Some(build_id.to_owned()),
    }
}

pub fn thread(name: &str) -> Thread {
    Thread { os_name: name.to_owned(), os_id: 100, java_name: Some(name.to_owned()), java_id: 1 }
}

/// A CPU sample; `frames` innermost first.
pub fn sample(thread_name: &str, weight: u64, frames: Vec<Frame>) -> SampleData {
    SampleData {
        event: "datadog.ExecutionSample",
        kind: EventKind::Cpu,
        start_ticks: 10,
        thread: thread(thread_name),
        state: "STATE_RUNNABLE".to_owned(),
        weight,
        leaf: None,
        span_id: 0,
        root_span_id: 0,
        attributes: Vec::new(),
        truncated: false,
        frames,
        address: 0,
        size: 0,
    }
}

/// A native allocation (`profiler.Malloc`) of `size` bytes at `address`,
/// at `ticks`.
pub fn malloc(ticks: i64, address: u64, size: u64, frames: Vec<Frame>) -> SampleData {
    SampleData {
        event: jfr_writer::schema::names::MALLOC,
        kind: EventKind::NativeMem,
        start_ticks: ticks,
        state: String::new(),
        address,
        size,
        ..sample("allocator", size, frames)
    }
}

pub fn library(path: &str, build_id: &str) -> NativeLibrary {
    NativeLibrary {
        name: path.to_owned(),
        base_address: 0x7f00_0000_0000,
        top_address: 0x7f00_0010_0000,
        build_id: Some(build_id.to_owned()),
        load_bias: 0x7f00_0000_0000,
    }
}

/// A chunk of a recording being built, its samples spelled out.
pub struct TestChunk {
    pub chunk: Chunk,
    pub samples: Vec<SampleData>,
    /// Its frees on thread "allocator": (ticks, address, samples before it).
    pub freed: Vec<(i64, u64, u32)>,
}

impl std::ops::Deref for TestChunk {
    type Target = Chunk;
    fn deref(&self) -> &Chunk {
        &self.chunk
    }
}

impl std::ops::DerefMut for TestChunk {
    fn deref_mut(&mut self) -> &mut Chunk {
        &mut self.chunk
    }
}

pub fn chunk(samples: Vec<SampleData>, libraries: Vec<NativeLibrary>) -> TestChunk {
    let chunk = Chunk {
        clock: Clock {
            start_nanos: 1_000_000_000,
            start_ticks: 0,
            ticks_per_second: 1_000_000_000,
            duration_nanos: 50,
        },
        libraries,
        ..Chunk::default()
    };
    TestChunk { chunk, samples, freed: Vec::new() }
}

/// A recording of these chunks.
pub fn recording_of(chunks: Vec<TestChunk>) -> Recording {
    let mut builder = Builder::default();
    for TestChunk { mut chunk, samples, freed } in chunks {
        chunk.samples = samples.into_iter().map(|s| builder.sample(s)).collect();
        chunk.frees =
            freed.into_iter().map(|(t, address, after)| builder.free(t, address, thread("allocator"), after)).collect();
        builder.push_chunk(chunk);
    }
    builder.finish()
}

/// A recording of one chunk.
pub fn recording(samples: Vec<SampleData>, libraries: Vec<NativeLibrary>) -> Recording {
    recording_of(vec![chunk(samples, libraries)])
}

/// An empty directory of its own for one test.
pub fn scratch_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("symbolizer-unit-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Links `<root>/.build-id/<id[..2]>/<id[2..]>.debug` to `target`.
pub fn link_in_build_id_tree(root: &Path, build_id: &str, target: &Path) -> PathBuf {
    let dir = root.join(".build-id").join(&build_id[..2]);
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join(format!("{}.debug", &build_id[2..]));
    std::os::unix::fs::symlink(target, &link).unwrap();
    link
}

/// A function the test binary's debug information describes, not inlined
/// anywhere, and its link-time address in the test binary.
#[inline(never)]
pub fn known_function(n: u64) -> u64 {
    std::hint::black_box(n).wrapping_mul(31).rotate_left(7)
}

/// The link-time address of [`known_function`]: its runtime address less
/// the load bias of the test binary (read from its symbol table).
pub fn known_function_address() -> u64 {
    use object::{Object, ObjectSymbol};
    let exe = std::env::current_exe().unwrap();
    let data = std::fs::read(&exe).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let symbol = file
        .symbols()
        .find(|s| s.name().is_ok_and(|n| n.contains("7testing14known_function")))
        .expect("known_function in the test binary's symbol table");
    std::hint::black_box(known_function(1));
    symbol.address()
}
