import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The allocation- and lock-heavy workloads of the `alloc` and `lock`
 * benchmarks: {@code AllocLockWorkload alloc|lock <seconds>}.
 *
 * <p>alloc: two threads allocating byte arrays of 64 to 4,160 bytes, filling
 * and summing them and keeping the last 1,024 of each thread reachable (a
 * busy service's rate, not a tight loop's: it prints the bytes allocated). lock: four threads taking turns on a
 * {@link ReentrantLock} and four on a monitor, each holding it for about
 * 200 µs of work, so that waits are around a millisecond. vlock (JDK 21+):
 * virtual threads, 16 pairs playing ping-pong through {@link SynchronousQueue}s
 * (every hand-over parks and unmounts one of them) and 8 taking turns on a
 * {@link ReentrantLock} held about 20 µs: many short parks, the cost of
 * timing virtual threads' parks. nativemem: two threads compressing and
 * decompressing 16 KiB buffers through fresh {@link java.util.zip.Deflater}
 * and {@link java.util.zip.Inflater} streams (zlib's state is malloc'ed
 * and freed by each: about 300 KiB per round trip in blocks of 6 to 256
 * KiB) and allocating and freeing 512 to 4,096-byte blocks of native
 * memory through {@code Unsafe}: a malloc-heavy service. Prints the
 * operations completed, and the peak resident memory.
 */
public class AllocLockWorkload {
    static final ReentrantLock LOCK = new ReentrantLock();
    static final Object MONITOR = new Object();
    static volatile long sink;

    /** About 200 µs of arithmetic (20 µs with {@code iterations} 20,000): a lock holder's work. */
    static long work(long x, int iterations) {
        for (int i = 0; i < iterations; i++) {
            x ^= x >>> 33;
            x *= 0xff51afd7ed558ccdL;
            x += i;
        }
        return x;
    }

    static final java.util.concurrent.atomic.AtomicLong BYTES = new java.util.concurrent.atomic.AtomicLong();

    /**
     * One allocation: an array of 64 to 4,160 bytes, filled and summed. A
     * method of its own, so it is compiled from a full profile rather than
     * replaced on the stack mid-loop (which makes throughput bimodal).
     */
    static byte[] allocateOne(long x) {
        byte[] bytes = new byte[64 + (int) ((x >>> 33) & 4095)];
        long sum = 0;
        for (int i = 0; i < bytes.length; i++) {
            bytes[i] = (byte) (x + i * 31);
            sum += bytes[i] * (long) i;
        }
        bytes[0] = (byte) (sum ^ (sum >>> 29));
        return bytes;
    }

    static long allocate(long deadline) {
        byte[][] kept = new byte[1024][];
        long ops = 0;
        long bytesAllocated = 0;
        long x = Thread.currentThread().getId();
        while (System.nanoTime() < deadline) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            byte[] bytes = allocateOne(x);
            kept[(int) (ops & 1023)] = bytes;
            bytesAllocated += bytes.length + 16;
            ops++;
        }
        sink = kept[0].length;
        BYTES.addAndGet(bytesAllocated);
        return ops;
    }

    static final byte[] TEXT = new byte[16 * 1024];
    static {
        for (int i = 0; i < TEXT.length; i++) {
            TEXT[i] = (byte) ("abcdefghij klmnop".charAt((i * 7 + i / 13) % 17));
        }
    }

    /** One round trip through zlib, and a few native blocks: one operation. */
    static long nativeRound(long x, byte[] packed, byte[] unpacked, sun.misc.Unsafe unsafe) throws Exception {
        java.util.zip.Deflater deflater = new java.util.zip.Deflater();
        deflater.setInput(TEXT);
        deflater.finish();
        int size = deflater.deflate(packed);
        deflater.end();
        java.util.zip.Inflater inflater = new java.util.zip.Inflater();
        inflater.setInput(packed, 0, size);
        int length = inflater.inflate(unpacked);
        inflater.end();
        for (int i = 0; i < 8; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            long block = unsafe.allocateMemory(512 + ((x >>> 33) & 3583));
            unsafe.putLong(block, x);
            x += unsafe.getLong(block);
            unsafe.freeMemory(block);
        }
        return x + length;
    }

    static long nativeMemory(long deadline) {
        try {
            java.lang.reflect.Field field = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
            field.setAccessible(true);
            sun.misc.Unsafe unsafe = (sun.misc.Unsafe) field.get(null);
            byte[] packed = new byte[TEXT.length + 1024];
            byte[] unpacked = new byte[TEXT.length];
            long ops = 0;
            long x = Thread.currentThread().getId();
            while (System.nanoTime() < deadline) {
                x = nativeRound(x, packed, unpacked, unsafe);
                ops++;
            }
            sink = x;
            return ops;
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    static long withLock(long deadline, int iterations) {
        long ops = 0;
        long x = Thread.currentThread().getId();
        while (System.nanoTime() < deadline) {
            LOCK.lock();
            try {
                x = work(x, iterations);
            } finally {
                LOCK.unlock();
            }
            ops++;
        }
        sink = x;
        return ops;
    }

    static long withMonitor(long deadline) {
        long ops = 0;
        long x = Thread.currentThread().getId();
        while (System.nanoTime() < deadline) {
            synchronized (MONITOR) {
                x = work(x, 200_000);
            }
            ops++;
        }
        sink = x;
        return ops;
    }

    /**
     * One side of a ping-pong pair: the even side serves first. Both
     * sides stop at the deadline after a whole round trip (a sentinel
     * from the server ends the partner).
     */
    static Loop pingPong(SynchronousQueue<Long> there, SynchronousQueue<Long> back, boolean serves) {
        return deadline -> {
            long ops = 0;
            try {
                while (true) {
                    if (serves) {
                        long token = System.nanoTime() < deadline ? ops : -1;
                        there.put(token);
                        if (token < 0) {
                            return ops;
                        }
                        back.take();
                    } else {
                        long token = there.take();
                        if (token < 0) {
                            return ops;
                        }
                        back.put(token);
                    }
                    ops++;
                }
            } catch (InterruptedException e) {
                return ops;
            }
        };
    }

    static Loop[] virtualLoops() {
        Loop[] loops = new Loop[40];
        for (int pair = 0; pair < 16; pair++) {
            SynchronousQueue<Long> there = new SynchronousQueue<>();
            SynchronousQueue<Long> back = new SynchronousQueue<>();
            loops[2 * pair] = pingPong(there, back, true);
            loops[2 * pair + 1] = pingPong(there, back, false);
        }
        for (int i = 32; i < 40; i++) {
            loops[i] = deadline -> withLock(deadline, 20_000);
        }
        return loops;
    }

    static boolean virtual;

    /** A thread running {@code task}: virtual in vlock mode (by reflection, for JDK 17's javac). */
    static Thread thread(Runnable task, String name) throws Exception {
        if (!virtual) {
            return new Thread(task, name);
        }
        Class<?> builder = Class.forName("java.lang.Thread$Builder");
        Object virtualBuilder = Thread.class.getMethod("ofVirtual").invoke(null);
        virtualBuilder = builder.getMethod("name", String.class).invoke(virtualBuilder, name);
        return (Thread) builder.getMethod("unstarted", Runnable.class).invoke(virtualBuilder, task);
    }

    interface Loop {
        long run(long deadline);
    }

    static long runThreads(int count, Loop[] loops, double seconds) throws Exception {
        long deadline = System.nanoTime() + (long) (seconds * 1e9);
        long[] ops = new long[count];
        Thread[] threads = new Thread[count];
        for (int i = 0; i < count; i++) {
            int index = i;
            Loop loop = loops[i % loops.length];
            threads[i] = thread(() -> ops[index] = loop.run(deadline), "worker-" + i);
            threads[i].start();
        }
        long total = 0;
        for (int i = 0; i < count; i++) {
            threads[i].join();
            total += ops[i];
        }
        return total;
    }

    public static void main(String[] args) throws Exception {
        boolean alloc = args[0].equals("alloc");
        boolean nativeMemory = args[0].equals("nativemem");
        virtual = args[0].equals("vlock");
        double seconds = Double.parseDouble(args[1]);
        Loop[] loops = alloc
                ? new Loop[] {AllocLockWorkload::allocate}
                : new Loop[] {deadline -> withLock(deadline, 200_000), AllocLockWorkload::withMonitor};
        if (nativeMemory) {
            loops = new Loop[] {AllocLockWorkload::nativeMemory};
        }
        int threads = alloc || nativeMemory ? 2 : 8;
        if (virtual) {
            loops = virtualLoops();
            threads = loops.length;
        }
        runThreads(threads, loops, 1.0); // warm-up
        if (virtual) {
            loops = virtualLoops();
        }
        BYTES.set(0);
        System.out.println("ops " + runThreads(threads, loops, seconds));
        if (alloc) {
            System.out.println("bytes_per_second " + (long) (BYTES.get() / seconds));
        }
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (line.startsWith("VmHWM:")) {
                System.out.println("peak_rss_kb " + line.replaceAll("[^0-9]", ""));
            }
        }
    }
}
