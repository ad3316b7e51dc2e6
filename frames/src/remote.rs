//! Remote-symbolication frames: a native frame stored as its library's
//! index and the frame's offset in that library, packed into 64 bits, so
//! it can be symbolized later, off the host, from the library's build-id.
//!
//! Layout (the contract of `remote-symbolication.md`):
//!
//! ```text
//!  63 62 61                 47 46  44 43                              0
//! | 0| 0| library index (15) |mark(3)|         pc offset (44)          |
//! ```
//!
//! `pc offset` is the frame's attribution address (the interrupted pc, or
//! a return address minus one) minus the library's load bias: the
//! link-time address, which `addr2line -e <debug file>` takes as is. A
//! symbolizer must not adjust it again.
//!
//! In a recording a remote frame's method is named [`REMOTE_METHOD_NAME`],
//! its class is the library's build-id and its descriptor the pc offset in
//! hex (`0x…`).

/// The method name of remote frames in a recording.
pub const REMOTE_METHOD_NAME: &str = "<remote>";

const OFFSET_BITS: u32 = 44;
const MARK_BITS: u32 = 3;
const LIB_INDEX_BITS: u32 = 15;
const MAX_OFFSET: u64 = (1 << OFFSET_BITS) - 1;
const MAX_LIB_INDEX: u32 = (1 << LIB_INDEX_BITS) - 1;

/// A JVM-internal function at which the native part of a stack walk ends
/// (past it lie frames the Java walker reports, or JVM plumbing). Packed
/// into 3 bits, so values stay below 8.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Mark {
    #[default]
    None = 0,
    /// The VM calling into Java (`JavaCalls::call_helper`).
    VmRuntime = 1,
    /// Runtime entries called from the interpreter.
    Interpreter = 2,
    /// A compiler thread compiling a method.
    CompilerEntry = 3,
}

impl Mark {
    /// The mark packed as `bits`; unknown values are [`Mark::None`].
    pub const fn from_bits(bits: u8) -> Mark {
        match bits {
            1 => Mark::VmRuntime,
            2 => Mark::Interpreter,
            3 => Mark::CompilerEntry,
            _ => Mark::None,
        }
    }
}

/// An unpacked remote frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteFrame {
    pub offset: u64,
    pub mark: Mark,
    pub lib_index: u32,
}

impl RemoteFrame {
    /// Packs the frame; `None` when the offset or library index does not
    /// fit (the caller then symbolizes locally).
    pub const fn pack(self) -> Option<u64> {
        if self.offset > MAX_OFFSET || self.lib_index > MAX_LIB_INDEX {
            return None;
        }
        Some(self.offset | ((self.mark as u64) << OFFSET_BITS) | ((self.lib_index as u64) << (OFFSET_BITS + MARK_BITS)))
    }

    pub const fn unpack(packed: u64) -> RemoteFrame {
        RemoteFrame {
            offset: packed & MAX_OFFSET,
            mark: Mark::from_bits(((packed >> OFFSET_BITS) & ((1 << MARK_BITS) - 1)) as u8),
            lib_index: ((packed >> (OFFSET_BITS + MARK_BITS)) & MAX_LIB_INDEX as u64) as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_including_maximum_values() {
        for frame in [
            RemoteFrame { offset: 0, mark: Mark::None, lib_index: 0 },
            RemoteFrame { offset: 0x1234, mark: Mark::Interpreter, lib_index: 7 },
            RemoteFrame { offset: MAX_OFFSET, mark: Mark::CompilerEntry, lib_index: MAX_LIB_INDEX },
        ] {
            let packed = frame.pack().unwrap();
            assert_eq!(packed >> 62, 0, "top two bits stay clear");
            assert_eq!(RemoteFrame::unpack(packed), frame);
        }
    }

    #[test]
    fn values_out_of_range_do_not_pack() {
        assert_eq!(RemoteFrame { offset: MAX_OFFSET + 1, mark: Mark::None, lib_index: 0 }.pack(), None);
        assert_eq!(RemoteFrame { offset: 0, mark: Mark::None, lib_index: MAX_LIB_INDEX + 1 }.pack(), None);
    }

    #[test]
    fn fields_sit_where_the_contract_says() {
        let packed = RemoteFrame { offset: 1, mark: Mark::VmRuntime, lib_index: 1 }.pack().unwrap();
        assert_eq!(packed, 1 | (1 << 44) | (1 << 47));
    }

    #[test]
    fn marks_round_trip_through_their_bits() {
        for bits in 0..8 {
            assert_eq!(Mark::from_bits(bits) as u8, if bits < 4 { bits } else { 0 });
        }
    }
}
