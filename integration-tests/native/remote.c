/*
 * JNI fixture for remote symbolication. Built with hidden visibility, then
 * stripped of all symbols with its debug information split into a separate
 * file: only the JNI entry points stay nameable on the host.
 *
 *   RemoteChain.run  -> hot_outer -> hot_middle (with inlined_step inlined)
 *                    -> hot_leaf (a CPU loop)
 *   RemoteChain.spin -> ends_with_call, whose last instruction is the call to
 *                       spin_forever (noreturn), and function_after starts at
 *                       the very next byte: a return address there must be
 *                       attributed to ends_with_call, not function_after.
 *
 * Build flags keep that layout: -fno-optimize-sibling-calls (real calls),
 * -fno-reorder-functions (source order), -falign-functions=1 (no padding).
 */
#include <jni.h>

#define HIDDEN __attribute__((visibility("hidden"), noinline))

HIDDEN long hot_leaf(long n) {
    volatile long sum = 0;
    for (long i = 0; i < n; i++) {
        sum += (i * 7) ^ (i >> 2);
    }
    return sum;
}

static inline __attribute__((always_inline)) long inlined_step(long n) {
    long r = hot_leaf(n);
    __asm__ volatile("" ::: "memory");
    return r * 3;
}

HIDDEN long hot_middle(long n) {
    long r = inlined_step(n);
    __asm__ volatile("" ::: "memory");
    return r + 1;
}

HIDDEN long hot_outer(long n) {
    long r = hot_middle(n);
    __asm__ volatile("" ::: "memory");
    return r + 2;
}

HIDDEN __attribute__((noreturn)) void spin_forever(void) {
    volatile long x = 0;
    for (;;) {
        x++;
    }
}

HIDDEN void ends_with_call(void) {
    spin_forever();
}

HIDDEN long function_after(long n) {
    return n * 2 + 1;
}

JNIEXPORT jlong JNICALL Java_RemoteChain_run(JNIEnv *env, jclass cls, jlong n) {
    (void)env; (void)cls;
    long r = hot_outer(n);
    __asm__ volatile("" ::: "memory");
    return r + function_after(3);
}

JNIEXPORT void JNICALL Java_RemoteChain_spin(JNIEnv *env, jclass cls) {
    (void)env; (void)cls;
    ends_with_call();
}
