/*
 * JNI fixture: NativeChain.run -> outer -> middle -> leaf (a CPU loop), and
 * NativeChain.deep -> 30 recursive frames -> leaf, NativeChain.upcall (below),
 * built three ways by the
 * test build (frame pointers, no frame pointers, SFrame without frame
 * pointers). The empty asm statements keep calls from becoming tail calls.
 */
#include <jni.h>

__attribute__((noinline)) long leaf(long n) {
    volatile long sum = 0;
    for (long i = 0; i < n; i++) {
        sum += i ^ (i >> 3);
    }
    return sum;
}

__attribute__((noinline)) long middle(long n) {
    long r = leaf(n);
    __asm__ volatile("" ::: "memory");
    return r + 1;
}

__attribute__((noinline)) long outer(long n) {
    long r = middle(n);
    __asm__ volatile("" ::: "memory");
    return r + 2;
}

__attribute__((noinline)) long recurse(int depth, long n) {
    long r = depth == 0 ? leaf(n) : recurse(depth - 1, n);
    __asm__ volatile("" ::: "memory");
    return r + depth;
}

JNIEXPORT jlong JNICALL Java_NativeChain_run(JNIEnv *env, jclass cls, jlong n) {
    (void)env; (void)cls;
    long r = outer(n);
    __asm__ volatile("" ::: "memory");
    return r + 3;
}

JNIEXPORT jlong JNICALL Java_NativeChain_deep(JNIEnv *env, jclass cls, jint depth, jlong n) {
    (void)env; (void)cls;
    long r = recurse(depth, n);
    __asm__ volatile("" ::: "memory");
    return r;
}

/*
 * NativeChain.upcall -> upcall_middle (C) -> JNI CallStaticLongMethod ->
 * NativeChain.upcallTarget (Java, burns CPU): Java, JNI, C, a JNI upcall
 * and Java again on one stack.
 */
__attribute__((noinline)) long upcall_middle(JNIEnv *env, jclass cls, long n) {
    jmethodID target = (*env)->GetStaticMethodID(env, cls, "upcallTarget", "(J)J");
    long r = target == NULL ? 0 : (long)(*env)->CallStaticLongMethod(env, cls, target, (jlong)n);
    __asm__ volatile("" ::: "memory");
    return r + 4;
}

JNIEXPORT jlong JNICALL Java_NativeChain_upcall(JNIEnv *env, jclass cls, jlong n) {
    long r = upcall_middle(env, cls, n);
    __asm__ volatile("" ::: "memory");
    return r + 5;
}

/*
 * NativeChain.upcalls -> upcalls_middle (C) -> `count` short JNI upcalls
 * into NativeChain.upcallTarget: much of the time is spent in the VM's
 * upcall path (JavaCalls::call_helper and what it calls) between C and Java.
 */
__attribute__((noinline)) long upcalls_middle(JNIEnv *env, jclass cls, long count, long n) {
    jmethodID target = (*env)->GetStaticMethodID(env, cls, "upcallTarget", "(J)J");
    long r = 0;
    for (long i = 0; target != NULL && i < count; i++) {
        r += (long)(*env)->CallStaticLongMethod(env, cls, target, (jlong)n);
    }
    __asm__ volatile("" ::: "memory");
    return r + 6;
}

JNIEXPORT jlong JNICALL Java_NativeChain_upcalls(JNIEnv *env, jclass cls, jlong count, jlong n) {
    long r = upcalls_middle(env, cls, count, n);
    __asm__ volatile("" ::: "memory");
    return r + 7;
}

/*
 * NativeChain.runInAttachedThread: a thread created here, not by Java,
 * attaches to the VM as "native-attached", calls NativeChain.spinFromNative
 * and detaches.
 */
#include <pthread.h>

static JavaVM *attach_vm;

static void *attached_main(void *cls) {
    JNIEnv *env;
    JavaVMAttachArgs args = {JNI_VERSION_1_8, "native-attached", NULL};
    if ((*attach_vm)->AttachCurrentThread(attach_vm, (void **)&env, &args) != JNI_OK) {
        return NULL;
    }
    jmethodID spin = (*env)->GetStaticMethodID(env, (jclass)cls, "spinFromNative", "()V");
    if (spin != NULL) {
        (*env)->CallStaticVoidMethod(env, (jclass)cls, spin);
    }
    (*env)->DeleteGlobalRef(env, (jobject)cls);
    (*attach_vm)->DetachCurrentThread(attach_vm);
    return NULL;
}

JNIEXPORT void JNICALL Java_NativeChain_runInAttachedThread(JNIEnv *env, jclass cls) {
    pthread_t thread;
    (*env)->GetJavaVM(env, &attach_vm);
    if (pthread_create(&thread, NULL, attached_main, (*env)->NewGlobalRef(env, cls)) == 0) {
        pthread_join(thread, NULL);
    }
}

/*
 * NativeChain.allocate -> alloc_outer -> alloc_middle -> JNI NewByteArray:
 * heap allocations made by native code.
 */
__attribute__((noinline)) long alloc_middle(JNIEnv *env, int count) {
    long total = 0;
    for (int i = 0; i < count; i++) {
        jbyteArray array = (*env)->NewByteArray(env, 4096);
        if (array == NULL) {
            return total;
        }
        total += (*env)->GetArrayLength(env, array);
        (*env)->DeleteLocalRef(env, array);
    }
    __asm__ volatile("" ::: "memory");
    return total;
}

__attribute__((noinline)) long alloc_outer(JNIEnv *env, int count) {
    long r = alloc_middle(env, count);
    __asm__ volatile("" ::: "memory");
    return r + 1;
}

JNIEXPORT jlong JNICALL Java_NativeChain_allocate(JNIEnv *env, jclass cls, jint count) {
    (void)cls;
    long r = alloc_outer(env, count);
    __asm__ volatile("" ::: "memory");
    return r + 2;
}
