import dev.jvmprofiler.JavaProfiler;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Dump latency under thread and class churn (the `dumps` benchmark): 16
 * short-lived threads started and joined continuously, a class defined in
 * a throwaway class loader, run and dropped continuously (periodic GCs
 * unload them), CPU sampling at 1 ms, and a dump through the Java API
 * after every 100 ms sleep, timed. Arguments: the agent library, a scratch
 * directory, seconds. Prints DUMPS, CLASSES, and the dump times' p50, p99
 * and maximum in microseconds.
 */
public class DumpChurn {
    static final AtomicBoolean running = new AtomicBoolean(true);
    static final AtomicLong classes = new AtomicLong();
    static volatile long sink;

    static final class Throwaway extends ClassLoader {
        Throwaway() {
            super(null);
        }

        Class<?> define(byte[] bytes) {
            return defineClass("DumpPayload", bytes, 0, bytes.length);
        }
    }

    static void threadChurn() {
        Thread[] batch = new Thread[16];
        while (running.get()) {
            for (int i = 0; i < batch.length; i++) {
                batch[i] = new Thread(() -> {
                    long x = 0;
                    for (int k = 0; k < 50_000; k++) {
                        x = x * 31 + k;
                    }
                    sink = x;
                });
                batch[i].start();
            }
            for (Thread t : batch) {
                try {
                    t.join();
                } catch (InterruptedException e) {
                    return;
                }
            }
        }
    }

    static void classChurn(byte[] bytes) {
        while (running.get()) {
            try {
                new Throwaway().define(bytes).getMethod("work").invoke(null);
            } catch (ReflectiveOperationException e) {
                throw new RuntimeException(e);
            }
            if (classes.incrementAndGet() % 200 == 0) {
                System.gc();
            }
        }
    }

    public static void main(String[] args) throws Exception {
        JavaProfiler profiler = JavaProfiler.getInstance(args[0]);
        Path dir = Path.of(args[1]);
        long seconds = Long.parseLong(args[2]);
        byte[] payload;
        try (InputStream in = DumpChurn.class.getResourceAsStream("/DumpPayload.class")) {
            payload = in.readAllBytes();
        }
        profiler.execute("start,cpu=1ms,overhead=0");
        Thread threads = new Thread(DumpChurn::threadChurn, "thread-churn");
        Thread loaders = new Thread(() -> classChurn(payload), "class-churn");
        threads.start();
        loaders.start();
        List<Long> times = new ArrayList<>();
        long start = System.nanoTime();
        while (System.nanoTime() - start < seconds * 1_000_000_000L) {
            Thread.sleep(100);
            Path file = dir.resolve("dump.jfr");
            long before = System.nanoTime();
            profiler.dump(file);
            times.add(System.nanoTime() - before);
            Files.delete(file);
        }
        running.set(false);
        threads.join();
        loaders.join();
        profiler.stop();
        Collections.sort(times);
        System.out.println("DUMPS " + times.size());
        System.out.println("CLASSES " + classes.get());
        System.out.println("DUMP_P50_US " + times.get(times.size() / 2) / 1000);
        System.out.println("DUMP_P99_US " + times.get(Math.min(times.size() - 1, times.size() * 99 / 100)) / 1000);
        System.out.println("DUMP_MAX_US " + times.get(times.size() - 1) / 1000);
    }
}
