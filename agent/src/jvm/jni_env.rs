//! The few raw JNI calls control-plane code makes (not used by handlers).

use crate::jvm::jvmti::{ClassRef, Jvmti, JvmtiResult, ThreadRef};
use jni::sys::{jfieldID, jint, jlong, jmethodID, jobject, jstring, jvalue, JNIEnv, JNINativeMethod, JNI_OK};
use std::ffi::{c_void, CStr};
use std::ptr;

/// A JNIEnv of the calling thread.
#[derive(Clone, Copy)]
pub struct JniEnv(*mut JNIEnv);

impl JniEnv {
    /// # Safety
    /// `env` must be the calling thread's JNIEnv.
    pub unsafe fn from_raw(env: *mut JNIEnv) -> Option<Self> {
        (!env.is_null()).then_some(Self(env))
    }

    pub fn as_raw(&self) -> *mut JNIEnv {
        self.0
    }

    /// Runs `f` inside a local reference frame, so references created by
    /// JVMTI/JNI calls in `f` are released when it returns.
    pub fn with_local_frame<R>(&self, capacity: jint, f: impl FnOnce() -> R) -> R {
        // SAFETY: valid env of the calling thread.
        let pushed = unsafe { ((**self.0).v1_2.PushLocalFrame)(self.0, capacity) } == JNI_OK;
        let result = f();
        if pushed {
            // SAFETY: pops the frame pushed above.
            unsafe { ((**self.0).v1_2.PopLocalFrame)(self.0, ptr::null_mut()) };
        }
        result
    }

    /// Runs `f` on every loaded class inside a local reference frame that
    /// makes room for all their references (JVMTI creates one per class:
    /// hundreds, where JNI promises 16 and `-Xcheck:jni` warns past 32),
    /// released when `f` returns.
    pub fn with_loaded_classes<R>(&self, jvmti: Jvmti, f: impl FnOnce(Vec<ClassRef>) -> R) -> JvmtiResult<R> {
        self.with_local_frame(16, || {
            let classes = jvmti.loaded_classes()?;
            let room = jint::try_from(classes.len()).unwrap_or(jint::MAX);
            // SAFETY: valid env of the calling thread. On failure (out of
            // memory) the references exist anyway; only the check warns.
            unsafe { ((**self.0).v1_2.EnsureLocalCapacity)(self.0, room) };
            Ok(f(classes))
        })
    }

    /// Releases a local class reference; `class` must not be used after.
    pub fn delete_local_ref(&self, class: ClassRef) {
        if !class.as_raw().is_null() {
            // SAFETY: `class` is a local reference of this thread.
            unsafe { ((**self.0).v1_1.DeleteLocalRef)(self.0, class.as_raw()) };
        }
    }

    /// The class of `object` (a local reference the caller deletes), or
    /// `None` for a null object.
    ///
    /// # Safety
    /// `object` must be null or a valid reference on this thread.
    pub unsafe fn object_class(&self, object: jni::sys::jobject) -> Option<ClassRef> {
        if object.is_null() {
            return None;
        }
        // SAFETY: valid env and, per the contract, a valid reference.
        let class = unsafe { ((**self.0).v1_1.GetObjectClass)(self.0, object) };
        // SAFETY: a class reference of this thread, or null.
        (!class.is_null()).then(|| unsafe { ClassRef::from_raw(class) })
    }

    /// Clears a pending exception; true if there was one.
    pub fn clear_exception(&self) -> bool {
        // SAFETY: valid env.
        let pending = unsafe { ((**self.0).v1_2.ExceptionCheck)(self.0) };
        if pending {
            // SAFETY: valid env.
            unsafe { ((**self.0).v1_1.ExceptionClear)(self.0) };
        }
        pending
    }

    /// A Java string's contents (`None` for null), decoded from UTF-16.
    ///
    /// # Safety
    /// `s` is null or a live `java.lang.String` reference of the calling thread.
    pub unsafe fn string(&self, s: jstring) -> Option<String> {
        if s.is_null() {
            return None;
        }
        // SAFETY: `s` is a live java.lang.String reference of this thread (contract).
        let len = unsafe { ((**self.0).v1_1.GetStringLength)(self.0, s) }.max(0);
        let mut units = vec![0u16; len as usize];
        // SAFETY: the buffer holds `len` UTF-16 units.
        unsafe { ((**self.0).v1_2.GetStringRegion)(self.0, s, 0, len, units.as_mut_ptr()) };
        Some(String::from_utf16_lossy(&units))
    }

    /// A new Java string (a local reference), or null if out of memory.
    pub fn new_string(&self, text: &str) -> jstring {
        let units: Vec<u16> = text.encode_utf16().collect();
        // SAFETY: valid env and UTF-16 buffer of the given length.
        let s = unsafe { ((**self.0).v1_1.NewString)(self.0, units.as_ptr(), units.len() as jint) };
        self.clear_exception();
        s
    }

    /// Binds `methods` (name, JNI signature, function) as the natives of `class`.
    pub fn register_natives(&self, class: ClassRef, methods: &[(&CStr, &CStr, *mut c_void)]) -> bool {
        let table: Vec<JNINativeMethod> = methods
            .iter()
            .map(|(name, signature, f)| JNINativeMethod {
                name: name.as_ptr().cast_mut(),
                signature: signature.as_ptr().cast_mut(),
                fnPtr: *f,
            })
            .collect();
        // SAFETY: `class` is a live class reference; the table outlives the call.
        let rc =
            unsafe { ((**self.0).v1_1.RegisterNatives)(self.0, class.as_raw(), table.as_ptr(), table.len() as jint) };
        let failed = self.clear_exception();
        rc == JNI_OK && !failed
    }

    /// `Thread.currentThread().eetop`: HotSpot's JavaThread* of the caller.
    pub fn current_thread_eetop(&self) -> Option<i64> {
        self.with_local_frame(4, || {
            // SAFETY: valid env; constant NUL-terminated names and signatures.
            let thread = unsafe {
                let functions = &**self.0;
                let class = (functions.v1_1.FindClass)(self.0, c"java/lang/Thread".as_ptr());
                if class.is_null() {
                    self.clear_exception();
                    return None;
                }
                let current = (functions.v1_1.GetStaticMethodID)(
                    self.0,
                    class,
                    c"currentThread".as_ptr(),
                    c"()Ljava/lang/Thread;".as_ptr(),
                );
                if current.is_null() {
                    self.clear_exception();
                    return None;
                }
                (functions.v1_1.CallStaticObjectMethodA)(self.0, class, current, ptr::null())
            };
            if thread.is_null() || self.clear_exception() {
                return None;
            }
            // SAFETY: a live java.lang.Thread reference of this thread.
            self.thread_eetop(unsafe { ThreadRef::from_raw(thread) })
        })
    }

    /// `thread.eetop`: HotSpot's JavaThread* of a started thread, 0 once it
    /// has terminated.
    pub fn thread_eetop(&self, thread: ThreadRef) -> Option<i64> {
        self.with_local_frame(2, || {
            // SAFETY: valid env; constant NUL-terminated names; `thread` is a
            // live java.lang.Thread reference.
            unsafe {
                let functions = &**self.0;
                let class = (functions.v1_1.FindClass)(self.0, c"java/lang/Thread".as_ptr());
                if class.is_null() {
                    self.clear_exception();
                    return None;
                }
                let field = (functions.v1_1.GetFieldID)(self.0, class, c"eetop".as_ptr(), c"J".as_ptr());
                if field.is_null() {
                    self.clear_exception();
                    return None;
                }
                Some((functions.v1_1.GetLongField)(self.0, thread.as_raw(), field))
            }
        })
    }

    /// `thread.getId()`.
    pub fn java_thread_id(&self, thread: ThreadRef) -> Option<i64> {
        self.with_local_frame(4, || {
            // SAFETY: valid env; constant NUL-terminated names.
            let class = unsafe { ((**self.0).v1_1.FindClass)(self.0, c"java/lang/Thread".as_ptr()) };
            if class.is_null() {
                self.clear_exception();
                return None;
            }
            // SAFETY: valid class reference and names.
            let method = unsafe { ((**self.0).v1_1.GetMethodID)(self.0, class, c"getId".as_ptr(), c"()J".as_ptr()) };
            if method.is_null() {
                self.clear_exception();
                return None;
            }
            // SAFETY: `thread` is a java.lang.Thread; getId takes no arguments.
            let id: jlong = unsafe { ((**self.0).v1_1.CallLongMethodA)(self.0, thread.as_raw(), method, ptr::null()) };
            (!self.clear_exception()).then_some(id)
        })
    }

    /// A class by its internal name (a local reference), or `None` with
    /// the exception cleared.
    pub fn find_class(&self, name: &CStr) -> Option<ClassRef> {
        // SAFETY: valid env and NUL-terminated name.
        let class = unsafe { ((**self.0).v1_1.FindClass)(self.0, name.as_ptr()) };
        self.clear_exception();
        // SAFETY: a class reference of this thread, or null.
        (!class.is_null()).then(|| unsafe { ClassRef::from_raw(class) })
    }

    /// Defines class `name` from class-file `bytes` in the boot loader (a
    /// local reference), or `None` with the exception cleared.
    pub fn define_boot_class(&self, name: &CStr, bytes: &[u8]) -> Option<ClassRef> {
        // SAFETY: valid env, name and buffer; a null loader is the boot loader.
        let class = unsafe {
            ((**self.0).v1_1.DefineClass)(
                self.0,
                name.as_ptr(),
                ptr::null_mut(),
                bytes.as_ptr().cast(),
                bytes.len() as jint,
            )
        };
        self.clear_exception();
        // SAFETY: a class reference of this thread, or null.
        (!class.is_null()).then(|| unsafe { ClassRef::from_raw(class) })
    }

    /// A global reference to `class`, valid on every thread until the JVM
    /// ends (never deleted).
    pub fn global_class(&self, class: ClassRef) -> Option<ClassRef> {
        // SAFETY: valid env and reference.
        let global = unsafe { ((**self.0).v1_1.NewGlobalRef)(self.0, class.as_raw()) };
        // SAFETY: a global class reference, or null.
        (!global.is_null()).then(|| unsafe { ClassRef::from_raw(global) })
    }

    pub fn static_method(&self, class: ClassRef, name: &CStr, signature: &CStr) -> Option<jmethodID> {
        // SAFETY: valid env, class reference and names.
        let method =
            unsafe { ((**self.0).v1_1.GetStaticMethodID)(self.0, class.as_raw(), name.as_ptr(), signature.as_ptr()) };
        self.clear_exception();
        (!method.is_null()).then_some(method)
    }

    /// Calls a static `void` method; false if it threw (cleared).
    ///
    /// # Safety
    /// `method` must be a static method of `class` taking `args`.
    pub unsafe fn call_static_void(&self, class: ClassRef, method: jmethodID, args: &[jvalue]) -> bool {
        // SAFETY: per the contract.
        unsafe { ((**self.0).v1_1.CallStaticVoidMethodA)(self.0, class.as_raw(), method, args.as_ptr()) };
        !self.clear_exception()
    }

    pub fn field(&self, class: ClassRef, name: &CStr, signature: &CStr) -> Option<jfieldID> {
        // SAFETY: valid env, class reference and names.
        let field = unsafe { ((**self.0).v1_1.GetFieldID)(self.0, class.as_raw(), name.as_ptr(), signature.as_ptr()) };
        self.clear_exception();
        (!field.is_null()).then_some(field)
    }

    pub fn static_field(&self, class: ClassRef, name: &CStr, signature: &CStr) -> Option<jfieldID> {
        // SAFETY: valid env, class reference and names.
        let field =
            unsafe { ((**self.0).v1_1.GetStaticFieldID)(self.0, class.as_raw(), name.as_ptr(), signature.as_ptr()) };
        self.clear_exception();
        (!field.is_null()).then_some(field)
    }

    /// Sets a static `boolean` field.
    ///
    /// # Safety
    /// `field` must be a static boolean field of `class`.
    pub unsafe fn set_static_boolean(&self, class: ClassRef, field: jfieldID, value: bool) {
        // SAFETY: per the contract.
        unsafe { ((**self.0).v1_1.SetStaticBooleanField)(self.0, class.as_raw(), field, value) };
    }

    /// The module of `class` (JDK 9+; a local reference).
    pub fn module(&self, class: ClassRef) -> Option<jobject> {
        // SAFETY: valid env and class reference; JNI 9+ (the agent needs 11).
        let module = unsafe { ((**self.0).v9.GetModule)(self.0, class.as_raw()) };
        (!module.is_null()).then_some(module)
    }

    /// Whether `thread` is a virtual thread.
    ///
    /// # Safety
    /// The JVM's JNI must be version 19 or later (JDK 19+).
    pub unsafe fn is_virtual(&self, thread: ThreadRef) -> bool {
        // SAFETY: valid env and thread reference; JNI 19+ per the contract.
        unsafe { ((**self.0).v19.IsVirtualThread)(self.0, thread.as_raw()) }
    }

    /// An object field's value (a local reference, null for null).
    ///
    /// # Safety
    /// `object` must be a live reference whose class has `field`, an object field.
    pub unsafe fn object_field(&self, object: jobject, field: jfieldID) -> jobject {
        // SAFETY: per the contract.
        unsafe { ((**self.0).v1_1.GetObjectField)(self.0, object, field) }
    }

    /// A weak global reference to `object` (`None` if out of memory).
    ///
    /// # Safety
    /// `object` must be a live reference of this thread.
    pub unsafe fn new_weak_ref(&self, object: jobject) -> Option<jobject> {
        // SAFETY: per the contract.
        let weak = unsafe { ((**self.0).v1_2.NewWeakGlobalRef)(self.0, object) };
        self.clear_exception();
        (!weak.is_null()).then_some(weak)
    }

    /// # Safety
    /// `weak` must be a weak global reference, not used after.
    pub unsafe fn delete_weak_ref(&self, weak: jobject) {
        // SAFETY: per the contract.
        unsafe { ((**self.0).v1_2.DeleteWeakGlobalRef)(self.0, weak) };
    }

    /// Whether two references name one object.
    ///
    /// # Safety
    /// Both must be null or live references.
    pub unsafe fn is_same_object(&self, a: jobject, b: jobject) -> bool {
        // SAFETY: per the contract.
        unsafe { ((**self.0).v1_1.IsSameObject)(self.0, a, b) }
    }
}
