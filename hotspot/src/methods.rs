//! Methods: a `Method*`'s jmethodID (through its holder's cache, and the
//! per-stripe table that remembers it across samples), whether it is
//! `native`, and the bci a bytecode pointer stands for. A method-handle
//! intrinsic, which has no id of its own, is named by the method its class
//! declares under its name ([`crate::layout::MhIntrinsics`]).

use crate::layout::{MethodIdScheme, MethodLayout};
use crate::memory::VmMemory;

const ACC_NATIVE: u64 = 0x100;
/// The method of a frame whose `Method*` has no jmethodID.
pub const NO_JMETHOD_ID: u64 = 0;
/// Entries of a [`MethodIds`] table.
const METHOD_IDS: usize = 512;
/// Methods of a class read at most while looking for one in its method
/// array.
const MAX_SCANNED_METHODS: u64 = 4096;

/// One remembered lookup: `id`, read for `method`, pointed at `points_at`
/// and named it `names` (`id`, or for a method-handle intrinsic whose
/// declared method's id points at an intrinsic of another kind,
/// [`NO_JMETHOD_ID`]).
#[derive(Clone, Copy, Default)]
struct RememberedId {
    method: u64,
    id: u64,
    points_at: u64,
    names: u64,
}

/// jmethodIDs by `Method*`, kept across samples by one sampling stripe
/// (used under its lock). The jmethodID chain is eight dependent reads; a
/// hit is one, checking that the id still points where it did (HotSpot
/// clears the slot when the method goes away; an intrinsic and the
/// `MethodHandle` method it is named by live as long as the VM). Used only
/// with [`MethodIdScheme::Checkable`] ids.
pub struct MethodIds {
    entries: [RememberedId; METHOD_IDS],
}

impl Default for MethodIds {
    fn default() -> Self {
        Self { entries: [RememberedId::default(); METHOD_IDS] }
    }
}

impl MethodIds {
    fn slot(method: u64) -> usize {
        ((method >> 3) ^ (method >> 12)) as usize % METHOD_IDS
    }
}

/// Reads methods and their jmethodIDs.
#[derive(Clone, Copy, Debug)]
pub struct MethodReader {
    layout: MethodLayout,
}

impl MethodReader {
    pub fn new(layout: MethodLayout) -> Self {
        Self { layout }
    }

    pub fn is_native<M: VmMemory + ?Sized>(&self, memory: &M, method: u64) -> bool {
        self.layout.method_access_flags.read(memory, method).is_some_and(|flags| flags & ACC_NATIVE != 0)
    }

    /// The bci a bytecode pointer stands for, if it points into the
    /// method's bytecodes.
    pub fn bci_of_bcp<M: VmMemory + ?Sized>(&self, memory: &M, method: u64, bcp: u64) -> Option<i32> {
        let l = &self.layout;
        let const_method = l.method_const_method.read(memory, method)?;
        let code_size = l.const_method_code_size.read(memory, const_method)?;
        let bci = bcp.checked_sub(const_method.checked_add(l.const_method_size)?)?;
        (bci < code_size).then_some(bci as i32)
    }

    /// [`Self::jmethod_id`] through the stripe's [`MethodIds`] table (ids
    /// only; a method without one is looked up again each time).
    pub fn remembered_jmethod_id<M: VmMemory + ?Sized>(
        &self,
        memory: &M,
        ids: &mut MethodIds,
        method: u64,
    ) -> Option<u64> {
        // Opaque ids cannot be checked by one read: never remembered.
        let checkable = self.layout.id_scheme == MethodIdScheme::Checkable;
        let entry = ids.entries.get_mut(MethodIds::slot(method))?;
        if checkable && entry.method == method && method != 0 && memory.u64(entry.id) == Some(entry.points_at) {
            return Some(entry.names);
        }
        let lookup = self.lookup(memory, method)?;
        if checkable && lookup.id != NO_JMETHOD_ID {
            *entry = lookup;
        }
        Some(lookup.names)
    }

    /// The jmethodID of a `Method*`, from its holder's jmethodID cache
    /// (`[length, id for idnum 0, ...]`); [`NO_JMETHOD_ID`] if its class
    /// has none for it (being prepared, or an old version left running by
    /// a redefinition that changed it: AsyncGetCallTrace reports such a
    /// frame without a method too). `None` if the pointers do not lead to
    /// a method with an id slot, or its id leads to another method.
    ///
    /// A method-handle intrinsic is named by the id of the `native` method
    /// its class declares for it (`MethodHandle.linkToStatic(Object...)`
    /// for every `linkToStatic` call shape), not by the id of its own slot
    /// (idnum 0, shared by every intrinsic and `MethodHandle`'s first
    /// method); [`NO_JMETHOD_ID`] if that id points at an intrinsic of
    /// another kind (HotSpot made it for one, before the declared method
    /// had one).
    pub fn jmethod_id<M: VmMemory + ?Sized>(&self, memory: &M, method: u64) -> Option<u64> {
        self.lookup(memory, method).map(|lookup| lookup.names)
    }

    /// [`Self::jmethod_id`], with the id read and where it pointed.
    fn lookup<M: VmMemory + ?Sized>(&self, memory: &M, method: u64) -> Option<RememberedId> {
        let (holder, idnum) = self.holder_and_idnum(memory, method)?;
        let Some((declared, iid)) = self.declared_for_intrinsic(memory, method, holder) else {
            let id = self.slot_id(memory, method, holder, idnum)?;
            return Some(RememberedId { method, id, points_at: method, names: id });
        };
        let (_, declared_idnum) = self.holder_and_idnum(memory, declared)?;
        let id = self.slot_id(memory, declared, holder, declared_idnum)?;
        if id == NO_JMETHOD_ID || self.layout.id_scheme != MethodIdScheme::Checkable {
            return Some(RememberedId { method, id, points_at: declared, names: id });
        }
        // The declared method's slot may be the one of idnum 0, which
        // intrinsics share (`invokeBasic`'s on JDK 17): the id HotSpot made
        // there first may point at an intrinsic, of another kind.
        let points_at = memory.u64(id)?;
        let intrinsic_id = self.layout.mh_intrinsics.map(|i| i.intrinsic_id)?;
        let same_kind = points_at == declared || intrinsic_id.read(memory, points_at) == Some(iid);
        Some(RememberedId { method, id, points_at, names: if same_kind { id } else { NO_JMETHOD_ID } })
    }

    /// The id in slot `idnum` of `holder`'s jmethodID cache if it names
    /// `method`; [`NO_JMETHOD_ID`] if the slot is empty.
    fn slot_id<M: VmMemory + ?Sized>(&self, memory: &M, method: u64, holder: u64, idnum: u64) -> Option<u64> {
        let ids = self.layout.klass_jmethod_ids.read(memory, holder)?;
        if ids == 0 {
            return Some(NO_JMETHOD_ID);
        }
        let length = memory.u64(ids)?;
        if idnum >= length {
            return Some(NO_JMETHOD_ID);
        }
        match memory.u64(ids.checked_add(idnum.checked_add(1)?.checked_mul(8)?)?)? {
            NO_JMETHOD_ID => Some(NO_JMETHOD_ID),
            id => self.id_names(memory, id, method, holder, idnum).then_some(id),
        }
    }

    /// If `method` is a method-handle intrinsic (one HotSpot made for a
    /// call shape), the method its class declares with the same intrinsic
    /// id (the first of the class's methods that has it, unless that is
    /// `method` itself) and that id. `None` for every other method (one
    /// read), and where the layout does not tell intrinsics apart.
    fn declared_for_intrinsic<M: VmMemory + ?Sized>(&self, memory: &M, method: u64, holder: u64) -> Option<(u64, u64)> {
        let intrinsics = self.layout.mh_intrinsics?;
        let intrinsic_id = intrinsics.intrinsic_id;
        let iid = intrinsic_id.read(memory, method).filter(|&iid| intrinsics.contains(iid))?;
        let (length, at) = self.declared_methods(memory, holder)?;
        let declared = (0..length.min(MAX_SCANNED_METHODS))
            .find_map(|i| at(i).filter(|&m| m != 0 && intrinsic_id.read(memory, m) == Some(iid)))?;
        (declared != method).then_some((declared, iid))
    }

    /// How many methods `holder` declares, and the `i`th of them (its
    /// `_methods`, an `Array<Method*>`: an int length, then the elements,
    /// word-aligned).
    fn declared_methods<'a, M: VmMemory + ?Sized>(
        &self,
        memory: &'a M,
        holder: u64,
    ) -> Option<(u64, impl Fn(u64) -> Option<u64> + 'a)> {
        let methods = self.layout.klass_methods.read(memory, holder).filter(|&p| p != 0)?;
        let length = memory.u32(methods)?;
        Some((u64::from(length), move |i: u64| memory.u64(methods.checked_add(8)?.checked_add(i.checked_mul(8)?)?)))
    }

    /// A method's class (`InstanceKlass*`) and its index there.
    fn holder_and_idnum<M: VmMemory + ?Sized>(&self, memory: &M, method: u64) -> Option<(u64, u64)> {
        let l = &self.layout;
        let const_method = l.method_const_method.read(memory, method).filter(|&p| p != 0)?;
        let constants = l.const_method_constants.read(memory, const_method).filter(|&p| p != 0)?;
        let holder = l.pool_holder.read(memory, constants).filter(|&p| p != 0)?;
        Some((holder, l.const_method_idnum.read(memory, const_method)?))
    }

    /// Whether `id` stands for `method`: a jmethodID that points at its
    /// `Method*` (up to JDK 25) must, or at the method that replaced it
    /// when its class was redefined (HotSpot moves the id to the new
    /// version, same holder and idnum, while frames of the old one may
    /// still run; AsyncGetCallTrace names them by that id too). An opaque
    /// id (JDK 26+, JDK-8268406) is checked through the holder's method
    /// array instead.
    fn id_names<M: VmMemory + ?Sized>(&self, memory: &M, id: u64, method: u64, holder: u64, idnum: u64) -> bool {
        match self.layout.id_scheme {
            MethodIdScheme::Checkable => match memory.u64(id) {
                Some(current) if current == method => true,
                Some(current) => current != 0 && self.holder_and_idnum(memory, current) == Some((holder, idnum)),
                None => false,
            },
            MethodIdScheme::Opaque => {
                let Some((length, at)) = self.declared_methods(memory, holder) else { return false };
                if idnum < length && at(idnum) == Some(method) {
                    return true;
                }
                (0..length.min(MAX_SCANNED_METHODS)).any(|i| at(i) == Some(method))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    /// JDK 26+ ids do not point at their method: an id is checked through
    /// the holder's method array, and none is remembered across samples.
    #[test]
    fn opaque_ids_are_checked_through_the_method_array_and_not_remembered() {
        let (mut m, methods) = vm();
        let opaque = MethodReader::new(MethodLayout { id_scheme: MethodIdScheme::Opaque, ..layout().methods });
        let array = 0x65_0000;
        m.put_u64(HOLDER + 408, array);
        m.put_u32(array, 3);
        for (i, method) in [methods.a, methods.b, methods.c].into_iter().enumerate() {
            m.put_u64(array + 8 + 8 * i as u64, method);
            m.put_u64(jmethod_id(i as u64), 0x7777);
        }
        assert_eq!(opaque.jmethod_id(&m, methods.c), Some(jmethod_id(2)));
        assert_eq!(method_reader().jmethod_id(&m, methods.c), None, "a checkable id must point at its method");
        let mut ids = MethodIds::default();
        assert_eq!(opaque.remembered_jmethod_id(&m, &mut ids, methods.c), Some(jmethod_id(2)));
        m.put_u64(IDS + 8 * 3, 0x63_1000);
        assert_eq!(opaque.remembered_jmethod_id(&m, &mut ids, methods.c), Some(0x63_1000), "read again");
        // A method its class does not list is not named by the id.
        m.put_u32(array, 2);
        assert_eq!(opaque.jmethod_id(&m, methods.c), None);
    }
}
