//! A recording reduced to stacks of display frames, with remote frames
//! resolved (and expanded into their inline chains) where possible.

use crate::recording::{Frame, Recording};
use crate::report::Report;
use crate::resolve::{Resolution, Resolver, Unresolved};
use frames::{FrameType, UnknownNative};
use std::collections::HashMap;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StackFrame {
    /// `com.example.Foo.bar` for Java, the function for native frames.
    pub name: String,
    pub kind: Option<FrameType>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// For frames that came from a remote frame: its build-id and offset.
    pub remote: Option<(String, u64)>,
    /// Inlined into the next (outer) frame: both come from one address.
    pub inlined: bool,
}

#[derive(Clone, Debug)]
pub struct ProfileSample {
    pub thread: String,
    pub weight: u64,
    /// Indexes into [`Profile::frames`], innermost first.
    pub stack: Vec<u32>,
}

#[derive(Default, Debug)]
pub struct Profile {
    pub frames: Vec<StackFrame>,
    index: HashMap<StackFrame, u32>,
    pub samples: Vec<ProfileSample>,
}

impl Profile {
    pub fn intern(&mut self, frame: StackFrame) -> u32 {
        if let Some(&i) = self.index.get(&frame) {
            return i;
        }
        let i = self.frames.len() as u32;
        self.frames.push(frame.clone());
        self.index.insert(frame, i);
        i
    }

    pub fn total_weight(&self) -> u64 {
        self.samples.iter().map(|s| s.weight).sum()
    }
}

/// Library file names by build-id, from the recording's `jdk.NativeLibrary` events.
fn library_names(recording: &Recording) -> HashMap<String, String> {
    recording
        .libraries()
        .filter_map(|l| {
            let name = l.name.rsplit('/').next().unwrap_or(&l.name).to_owned();
            Some((l.build_id.clone()?, name))
        })
        .collect()
}

/// Turns one recorded frame into display frames (several for a remote
/// frame whose address lies in inlined code), innermost first.
fn expand(
    frame: &Frame,
    resolver: &mut Option<&mut Resolver>,
    libraries: &HashMap<String, String>,
    problems: &mut Vec<Unresolved>,
) -> Vec<StackFrame> {
    let plain = |name: String, kind, file: Option<String>, line| StackFrame {
        name,
        kind,
        file,
        line,
        remote: None,
        inlined: false,
    };
    let Some((build_id, offset)) = frame.remote() else {
        if frame.kind == Some(FrameType::Native) && frame.method.starts_with(UnknownNative::PREFIX) {
            problems.push(Unresolved::NoFileMapping);
        }
        let line = u32::try_from(frame.line).ok().filter(|&l| l > 0);
        return vec![plain(frame.display_name(), frame.kind, None, line)];
    };
    let remote = Some((build_id.to_owned(), offset));
    let resolution = match resolver {
        Some(r) => r.resolve(build_id, offset),
        None => Resolution::Unresolved(Unresolved::DebugFileMissing),
    };
    if let Some(problem) = resolution.problem() {
        problems.push(problem);
    }
    match resolution {
        Resolution::Frames(frames) => {
            let last = frames.len() - 1;
            frames
                .into_iter()
                .enumerate()
                .map(|(i, f)| StackFrame {
                    name: f.function,
                    kind: Some(FrameType::Native),
                    file: f.file,
                    line: f.line,
                    remote: remote.clone(),
                    inlined: i < last,
                })
                .collect()
        }
        Resolution::NameOnly(name) => {
            vec![StackFrame { name, kind: Some(FrameType::Native), file: None, line: None, remote, inlined: false }]
        }
        Resolution::Unresolved(_) => {
            let library = libraries.get(build_id).cloned().unwrap_or_else(|| build_id.chars().take(12).collect());
            let name = format!("[{library}+{offset:#x}]");
            vec![StackFrame {
                name,
                kind: Some(FrameType::RemoteNative),
                file: None,
                line: None,
                remote,
                inlined: false,
            }]
        }
    }
}

/// Builds the profile, resolving remote frames with `resolver` (when
/// given), and reports what stayed unresolved.
pub fn build(recording: &Recording, mut resolver: Option<&mut Resolver>) -> (Profile, Report) {
    let libraries = library_names(recording);
    let remote_ids: Vec<String> = {
        let mut ids: Vec<String> = recording
            .samples()
            .flat_map(|s| s.frames.iter().filter_map(|f| f.remote().map(|(id, _)| id.to_owned())))
            .collect();
        ids.sort();
        ids.dedup();
        ids
    };
    if let Some(r) = resolver.as_deref_mut() {
        r.prefetch(&remote_ids);
    }
    let mut profile = Profile::default();
    let mut report = Report::default();
    for sample in recording.samples() {
        let mut problems = Vec::new();
        let mut stack = Vec::with_capacity(sample.frames.len());
        for frame in &sample.frames {
            if frame.remote().is_some() {
                report.remote_frames += sample.weight;
            }
            for expanded in expand(frame, &mut resolver, &libraries, &mut problems) {
                stack.push(profile.intern(expanded));
            }
        }
        report.add_sample(sample.weight, &problems);
        profile.samples.push(ProfileSample { thread: sample.thread.name().to_owned(), weight: sample.weight, stack });
    }
    if let Some(r) = resolver {
        report.problems = r.problems().to_vec();
    }
    (profile, report)
}
