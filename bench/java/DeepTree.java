/**
 * Recordings the size of real ones, for the symbolizer's benchmark: N
 * threads work 400 frames deep for S seconds, each operation on one of
 * 4,096 paths (twelve levels of the recursion call {@code left} or
 * {@code right} by a bit of a pseudo-random path number), so a recording
 * holds thousands of distinct deep stacks, as a real service's does.
 */
public class DeepTree {
    /** Levels of recursion, two frames each ({@code step} and a branch). */
    static final int LEVELS = 200;
    static final int BRANCHES = 12;
    static final int SPACING = LEVELS / BRANCHES;
    static volatile long sink;

    static long left(int depth, int path, long x) {
        return step(depth, path, x) + 1;
    }

    static long right(int depth, int path, long x) {
        return step(depth, path, x) + 2;
    }

    static long step(int depth, int path, long x) {
        if (depth == 0) {
            return burn(x);
        }
        // Branch on the path's bits at evenly spaced levels.
        if (depth % SPACING == 0 && ((path >>> (depth / SPACING)) & 1) != 0) {
            return right(depth - 1, path, x);
        }
        return left(depth - 1, path, x);
    }

    static long burn(long x) {
        for (int i = 0; i < 20_000; i++) {
            x ^= x >>> 33;
            x *= 0xff51afd7ed558ccdL;
        }
        return x;
    }

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        long deadline = System.nanoTime() + (long) (Double.parseDouble(args[1]) * 1e9);
        Thread[] workers = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            final long seed = t + 1;
            workers[t] = new Thread(() -> {
                long x = seed;
                while (System.nanoTime() < deadline) {
                    x = x * 6364136223846793005L + 1442695040888963407L;
                    x = step(LEVELS, (int) (x >>> 40) & ((1 << BRANCHES) - 1), x);
                }
                sink += x;
            }, "tree-" + t);
            workers[t].start();
        }
        for (Thread worker : workers) {
            worker.join();
        }
    }
}
