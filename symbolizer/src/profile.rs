//! A recording reduced to what stack-based outputs need: samples with a
//! weight, a thread and a stack of interned frames.

use std::collections::HashMap;

/// How a frame executes, from the JFR frame type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameKind {
    Interpreted,
    Jit,
    Inlined,
    C1,
    Native,
    Cpp,
    Kernel,
    RemoteNative,
    Other,
}

impl FrameKind {
    pub fn from_description(description: &str) -> Self {
        match description {
            "Interpreted" => Self::Interpreted,
            "JIT compiled" => Self::Jit,
            "Inlined" => Self::Inlined,
            "C1 compiled" => Self::C1,
            "Native" => Self::Native,
            "C++" => Self::Cpp,
            "Kernel" => Self::Kernel,
            "Remote native" => Self::RemoteNative,
            _ => Self::Other,
        }
    }

    pub fn is_java(self) -> bool {
        matches!(self, Self::Interpreted | Self::Jit | Self::Inlined | Self::C1)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    /// `com.example.Foo.bar` for Java, the symbol for native frames.
    pub name: String,
    pub kind: FrameKind,
}

#[derive(Clone, Debug)]
pub struct Sample {
    pub event: String,
    pub thread: String,
    pub weight: u64,
    /// Indexes into [`Profile::frames`], innermost first.
    pub stack: Vec<u32>,
}

#[derive(Default, Debug)]
pub struct Profile {
    pub frames: Vec<Frame>,
    index: HashMap<Frame, u32>,
    pub samples: Vec<Sample>,
}

impl Profile {
    pub fn intern(&mut self, frame: Frame) -> u32 {
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
