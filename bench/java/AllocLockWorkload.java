import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The allocation- and lock-heavy workloads of the `alloc` and `lock`
 * benchmarks: {@code AllocLockWorkload alloc|lock <seconds>}.
 *
 * <p>alloc: two threads allocating byte arrays of 64 to 4,160 bytes, filling
 * and summing them and keeping the last 1,024 of each thread reachable (a
 * busy service's rate, not a tight loop's: it prints the bytes allocated). lock: four threads taking turns on a
 * {@link ReentrantLock} and four on a monitor, each holding it for about
 * 200 µs of work, so that waits are around a millisecond. Prints the operations completed, and the peak
 * resident memory.
 */
public class AllocLockWorkload {
    static final ReentrantLock LOCK = new ReentrantLock();
    static final Object MONITOR = new Object();
    static volatile long sink;

    /** About 200 µs of arithmetic: a lock holder's work. */
    static long work(long x) {
        for (int i = 0; i < 200_000; i++) {
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

    static long withLock(long deadline) {
        long ops = 0;
        long x = Thread.currentThread().getId();
        while (System.nanoTime() < deadline) {
            LOCK.lock();
            try {
                x = work(x);
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
                x = work(x);
            }
            ops++;
        }
        sink = x;
        return ops;
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
            threads[i] = new Thread(() -> ops[index] = loop.run(deadline), "worker-" + i);
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
        double seconds = Double.parseDouble(args[1]);
        Loop[] loops = alloc
                ? new Loop[] {AllocLockWorkload::allocate}
                : new Loop[] {AllocLockWorkload::withLock, AllocLockWorkload::withMonitor};
        int threads = alloc ? 2 : 8;
        runThreads(threads, loops, 1.0); // warm-up
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
