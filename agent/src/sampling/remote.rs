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

use crate::libraries::marks::Mark;

/// The bytecode-index marker of a packed remote frame.
pub const BCI_NATIVE_FRAME_REMOTE: i32 = -19;

pub const OFFSET_BITS: u32 = 44;
pub const MARK_BITS: u32 = 3;
pub const LIB_INDEX_BITS: u32 = 15;
pub const MAX_OFFSET: u64 = (1 << OFFSET_BITS) - 1;
pub const MAX_LIB_INDEX: u32 = (1 << LIB_INDEX_BITS) - 1;

/// An unpacked remote frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteFrame {
    pub offset: u64,
    pub mark: Mark,
    pub lib_index: u32,
}

impl RemoteFrame {
    /// Packs the frame; `None` when the offset or library index does not
    /// fit (the caller then symbolizes locally). Signal-safe.
    pub fn pack(self) -> Option<u64> {
        if self.offset > MAX_OFFSET || self.lib_index > MAX_LIB_INDEX {
            return None;
        }
        Some(
            self.offset
                | (u64::from(self.mark as u8) << OFFSET_BITS)
                | (u64::from(self.lib_index) << (OFFSET_BITS + MARK_BITS)),
        )
    }

    pub fn unpack(packed: u64) -> RemoteFrame {
        RemoteFrame {
            offset: packed & MAX_OFFSET,
            mark: Mark::from_bits(((packed >> OFFSET_BITS) & ((1 << MARK_BITS) - 1)) as u8),
            lib_index: ((packed >> (OFFSET_BITS + MARK_BITS)) & u64::from(MAX_LIB_INDEX)) as u32,
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
}
