import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A CPU-bound workload for overhead measurements: N threads mix arithmetic
 * with sorting small arrays (no allocation in the loop, so garbage collection
 * does not add noise) for a fixed time and count the operations they complete. Prints the total, the CPU time the threads used
 * and the process's peak resident memory. With a depth, each worker does
 * its work at the bottom of a recursion that deep (deep-stack overhead).
 * With the work {@code deflate}, each operation compresses a buffer with
 * {@link java.util.zip.Deflater} instead: the time goes to zlib's C code
 * under a native method (native-stack overhead).
 */
public class Workload {
    static final class Worker extends Thread {
        final long deadline;
        final int depth;
        final boolean deflate;
        long ops;
        long cpuNanos;

        Worker(String name, long deadline, int depth, boolean deflate) {
            super(name);
            this.deadline = deadline;
            this.depth = depth;
            this.deflate = deflate;
        }

        /** Recurses `depth` frames, then works until the deadline. */
        int descend(int depth) {
            if (depth == 0) {
                return work();
            }
            return descend(depth - 1) + 1;
        }

        static long mix(long x) {
            x ^= x >>> 33;
            x *= 0xff51afd7ed558ccdL;
            x ^= x >>> 33;
            return x;
        }

        /** Fills and sorts a small array: calls into the JDK, no allocation. */
        static int sortChunk(int[] data, long seed) {
            for (int i = 0; i < data.length; i++) {
                seed = mix(seed + i);
                data[i] = (int) seed;
            }
            java.util.Arrays.sort(data);
            return data[data.length / 2];
        }

        @Override
        public void run() {
            if (descend(depth) == 42) {
                System.out.print("");
            }
            cpuNanos = java.lang.management.ManagementFactory.getThreadMXBean().getCurrentThreadCpuTime();
        }

        /**
         * One operation: arithmetic, then a sorted chunk. A method of its
         * own, so it is compiled from a full profile rather than replaced on
         * the stack mid-loop (which made throughput bimodal between runs).
         */
        static long operation(long x, int[] data) {
            for (int i = 0; i < 200; i++) {
                x = mix(x + i);
            }
            return x + sortChunk(data, x);
        }

        /**
         * One deflate operation: 16 KiB of compressible bytes (a random
         * walk over a small alphabet) through zlib at its default level.
         */
        static long deflateChunk(java.util.zip.Deflater deflater, byte[] input, byte[] output, long seed) {
            for (int i = 0; i < input.length; i++) {
                seed = mix(seed + i);
                input[i] = (byte) ('a' + (seed & 7));
            }
            deflater.reset();
            deflater.setInput(input);
            deflater.finish();
            long total = 0;
            while (!deflater.finished()) {
                total += deflater.deflate(output);
            }
            return seed + total;
        }

        int work() {
            long x = getId();
            if (deflate) {
                java.util.zip.Deflater deflater = new java.util.zip.Deflater();
                byte[] input = new byte[16 * 1024];
                byte[] output = new byte[32 * 1024];
                while (System.nanoTime() < deadline) {
                    x = deflateChunk(deflater, input, output, x);
                    ops++;
                }
                deflater.end();
                return (int) x;
            }
            int[] data = new int[48];
            while (System.nanoTime() < deadline) {
                x = operation(x, data);
                ops++;
            }
            return (int) x;
        }
    }

    static long peakRssKb() throws Exception {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (line.startsWith("VmHWM:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        return -1;
    }

    /** Threads that only wait: half sleep, half park (wall-clock targets). */
    static void startIdle(int count) {
        for (int i = 0; i < count; i++) {
            boolean sleeper = i % 2 == 0;
            Thread t = new Thread(() -> {
                while (true) {
                    if (sleeper) {
                        try {
                            Thread.sleep(60_000);
                        } catch (InterruptedException e) {
                            return;
                        }
                    } else {
                        java.util.concurrent.locks.LockSupport.park();
                    }
                }
            }, "idle-" + i);
            t.setDaemon(true);
            t.start();
        }
    }

    /**
     * Arguments: busy threads, seconds, and optionally idle threads,
     * recursion depth and the work ({@code sort}, the default, or
     * {@code deflate}).
     */
    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        double seconds = Double.parseDouble(args[1]);
        startIdle(args.length > 2 ? Integer.parseInt(args[2]) : 0);
        int depth = args.length > 3 ? Integer.parseInt(args[3]) : 0;
        boolean deflate = args.length > 4 && args[4].equals("deflate");
        long warmupEnd = System.nanoTime() + 1_000_000_000L;
        Worker warm = new Worker("warmup", warmupEnd, depth, deflate);
        warm.start();
        warm.join();
        long deadline = System.nanoTime() + (long) (seconds * 1e9);
        Worker[] workers = new Worker[threads];
        for (int i = 0; i < threads; i++) {
            workers[i] = new Worker("worker-" + i, deadline, depth, deflate);
            workers[i].start();
        }
        long ops = 0;
        long cpu = 0;
        for (Worker w : workers) {
            w.join();
            ops += w.ops;
            cpu += w.cpuNanos;
        }
        System.out.println("ops " + ops);
        System.out.println("cpu_ns " + cpu);
        System.out.println("peak_rss_kb " + peakRssKb());
    }
}
