/*
 * JNI fixture of native memory profiling (`nativemem=`), called by
 * NativeMemory.java. Two malloc call sites in C functions of their own
 * (not inlined, not static, frame pointers, no sibling calls, so each is a
 * frame of its own named by its symbol):
 *
 *   NativeMemory.split -> Java_NativeMemory_split -> nativemem_site_seven (7 x 4 KiB)
 *                                                 -> nativemem_site_three (3 x 4 KiB)
 *
 * per round, a 7:3 split by bytes; every block is freed by its site before
 * it returns, unless site three is told to leak. NativeMemory.funcs calls
 * one site per allocation function (calloc, realloc, posix_memalign,
 * aligned_alloc), each of which calls only that function, so a stack
 * through a site stands for that function's hook.
 *
 * Every block is written and its address stored to an external sink, so
 * the compiler can neither drop a malloc/free pair nor merge the sites.
 */
#include <jni.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NATIVEMEM_BLOCK 4096

/* Where each block's address goes: the compiler must assume it is read. */
void *volatile nativemem_sink;

/* Writes the first byte of each page of a block and its last byte; returns its first (0-255). */
__attribute__((noinline)) long nativemem_touch(char *block, size_t size, long seed) {
    for (size_t at = 0; at < size; at += 4096) {
        block[at] = (char)(seed + (long)at);
    }
    block[size - 1] = (char)seed;
    nativemem_sink = block;
    __asm__ volatile("" ::: "memory");
    return (unsigned char)block[0];
}

/* Allocates `count` blocks of 4 KiB at one call site, touches them, frees them unless `leak`. */
static inline long allocate_blocks(void **blocks, int count, int leak, long seed) {
    long sum = 0;
    for (int i = 0; i < count; i++) {
        blocks[i] = malloc(NATIVEMEM_BLOCK);
        if (blocks[i] == NULL) {
            return -1;
        }
        sum += nativemem_touch(blocks[i], NATIVEMEM_BLOCK, seed + i);
    }
    for (int i = 0; i < count && !leak; i++) {
        free(blocks[i]);
    }
    return sum;
}

__attribute__((noinline)) long nativemem_site_seven(long seed) {
    void *blocks[7];
    long sum = allocate_blocks(blocks, 7, 0, seed);
    __asm__ volatile("" ::: "memory");
    return sum + 7;
}

__attribute__((noinline)) long nativemem_site_three(long seed, int leak) {
    void *blocks[3];
    long sum = allocate_blocks(blocks, 3, leak, seed);
    __asm__ volatile("" ::: "memory");
    return sum + 3;
}

/*
 * `rounds` rounds of site seven then site three; site three leaks its
 * blocks when `leak`. Returns a checksum of the bytes written (-1 if an
 * allocation failed).
 */
JNIEXPORT jlong JNICALL Java_NativeMemory_split(JNIEnv *env, jclass cls, jlong rounds, jboolean leak) {
    (void)env;
    (void)cls;
    long sum = 0;
    for (long round = 0; round < rounds; round++) {
        long seven = nativemem_site_seven(round);
        long three = nativemem_site_three(round, leak != 0);
        if (seven < 0 || three < 0) {
            return -1;
        }
        sum += seven + three;
    }
    __asm__ volatile("" ::: "memory");
    return sum;
}

__attribute__((noinline)) void nativemem_release(void *block) {
    nativemem_sink = block;
    free(block);
}

__attribute__((noinline)) long nativemem_calloc_site(long seed) {
    char *block = calloc(NATIVEMEM_BLOCK / 16, 16);
    if (block == NULL) {
        return -1;
    }
    long sum = nativemem_touch(block, NATIVEMEM_BLOCK, seed) + block[1]; /* calloc zeroed it: block[1] is 0 */
    nativemem_release(block);
    return sum;
}

/* A small block for realloc to grow: allocated here, not in the realloc site. */
__attribute__((noinline)) char *nativemem_realloc_seed(long seed) {
    char *block = malloc(16);
    if (block != NULL) {
        block[0] = (char)seed;
        nativemem_sink = block;
    }
    return block;
}

__attribute__((noinline)) long nativemem_realloc_site(char *small, long seed) {
    char *block = realloc(small, NATIVEMEM_BLOCK);
    if (block == NULL) {
        nativemem_release(small);
        return -1;
    }
    long sum = nativemem_touch(block, NATIVEMEM_BLOCK, seed);
    nativemem_release(block);
    return sum;
}

__attribute__((noinline)) long nativemem_memalign_site(long seed) {
    void *block = NULL;
    if (posix_memalign(&block, 64, NATIVEMEM_BLOCK) != 0 || ((uintptr_t)block & 63) != 0) {
        return -1;
    }
    long sum = nativemem_touch(block, NATIVEMEM_BLOCK, seed);
    nativemem_release(block);
    return sum;
}

__attribute__((noinline)) long nativemem_aligned_site(long seed) {
    void *block = aligned_alloc(256, NATIVEMEM_BLOCK);
    if (block == NULL || ((uintptr_t)block & 255) != 0) {
        return -1;
    }
    long sum = nativemem_touch(block, NATIVEMEM_BLOCK, seed);
    nativemem_release(block);
    return sum;
}

/*
 * `rounds` rounds of one 4 KiB block from each of calloc, realloc (of a
 * 16-byte block from nativemem_realloc_seed), posix_memalign and
 * aligned_alloc, each in its own site and freed there. Returns a checksum
 * (-1 if an allocation failed or was misaligned, or calloc's was not zeroed).
 */
JNIEXPORT jlong JNICALL Java_NativeMemory_funcs(JNIEnv *env, jclass cls, jlong rounds) {
    (void)env;
    (void)cls;
    long sum = 0;
    for (long round = 0; round < rounds; round++) {
        long parts[4];
        parts[0] = nativemem_calloc_site(round);
        char *small = nativemem_realloc_seed(round);
        parts[1] = small == NULL ? -1 : nativemem_realloc_site(small, round);
        parts[2] = nativemem_memalign_site(round);
        parts[3] = nativemem_aligned_site(round);
        for (int i = 0; i < 4; i++) {
            if (parts[i] < 0) {
                return -1;
            }
            sum += parts[i];
        }
    }
    __asm__ volatile("" ::: "memory");
    return sum;
}
