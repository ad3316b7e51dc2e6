import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;

/**
 * A real third-party application under load: the H2 SQL engine (Debian's
 * libh2-java), embedded, each worker thread running a mix of indexed
 * lookups, range aggregates, updates and insert/delete pairs against its
 * own in-memory database of 20,000 rows through JDBC prepared statements
 * (the SQL parser, the optimizer, MVStore B-trees, value conversions: deep
 * and varied stacks, unlike {@link Workload}). Prints the same lines as
 * {@link Workload}: operations done, the workers' CPU time, peak RSS.
 * The measured seconds start once every worker has loaded its database.
 * Arguments: worker threads, seconds.
 */
public class H2Workload {
    static final int ROWS = 20_000;

    /** The workers' common start: when all are loaded, the clock runs. */
    static final class Start {
        final CyclicBarrier loaded;
        volatile long deadline;

        Start(int workers, double seconds) {
            loaded = new CyclicBarrier(workers, () -> deadline = System.nanoTime() + (long) (seconds * 1e9));
        }
    }

    static final class Worker extends Thread {
        final Start start;
        long ops;
        long cpuNanos;
        Throwable failure;

        Worker(String name, Start start) {
            super(name);
            this.start = start;
        }

        @Override
        public void run() {
            try (Connection c = DriverManager.getConnection("jdbc:h2:mem:" + getName())) {
                work(c);
            } catch (Throwable t) {
                failure = t;
                // Break the barrier (a timed-out wait does) so that no other
                // worker waits for this one: they fail, and main reports it.
                try {
                    start.loaded.await(0, TimeUnit.NANOSECONDS);
                } catch (Exception ignored) {
                    // Broken, as intended (or tripped: the others run on).
                }
            }
            cpuNanos = java.lang.management.ManagementFactory.getThreadMXBean().getCurrentThreadCpuTime();
        }

        void work(Connection c) throws Exception {
            try (Statement s = c.createStatement()) {
                s.execute("CREATE TABLE orders(id INT PRIMARY KEY, customer INT, amount DECIMAL(12,2), note VARCHAR(64))");
                s.execute("CREATE INDEX orders_customer ON orders(customer)");
            }
            try (PreparedStatement insert = c.prepareStatement("INSERT INTO orders VALUES(?, ?, ?, ?)")) {
                for (int id = 0; id < ROWS; id++) {
                    bind(insert, id);
                    insert.executeUpdate();
                }
            }
            PreparedStatement byId = c.prepareStatement("SELECT customer, amount, note FROM orders WHERE id = ?");
            PreparedStatement range = c.prepareStatement(
                "SELECT customer, COUNT(*), SUM(amount) FROM orders WHERE customer BETWEEN ? AND ? GROUP BY customer ORDER BY 3 DESC");
            PreparedStatement update = c.prepareStatement("UPDATE orders SET amount = amount + 1 WHERE id = ?");
            PreparedStatement insert = c.prepareStatement("INSERT INTO orders VALUES(?, ?, ?, ?)");
            PreparedStatement delete = c.prepareStatement("DELETE FROM orders WHERE id = ?");
            start.loaded.await();
            long deadline = start.deadline;
            long x = getId();
            long sink = 0;
            while (System.nanoTime() < deadline) {
                x = x * 6364136223846793005L + 1442695040888963407L;
                int id = (int) ((x >>> 33) % ROWS);
                byId.setInt(1, id);
                try (ResultSet r = byId.executeQuery()) {
                    while (r.next()) {
                        sink += r.getInt(1) + r.getString(3).length();
                    }
                }
                int customer = id % 1000;
                range.setInt(1, customer);
                range.setInt(2, customer + 20);
                try (ResultSet r = range.executeQuery()) {
                    while (r.next()) {
                        sink += r.getLong(2);
                    }
                }
                update.setInt(1, id);
                update.executeUpdate();
                bind(insert, ROWS + id);
                insert.executeUpdate();
                delete.setInt(1, ROWS + id);
                delete.executeUpdate();
                ops++;
            }
            if (sink == 42) {
                System.out.print("");
            }
        }

        static void bind(PreparedStatement insert, int id) throws SQLException {
            insert.setInt(1, id);
            insert.setInt(2, id % 1000);
            insert.setBigDecimal(3, java.math.BigDecimal.valueOf(id * 37L % 100_000, 2));
            insert.setString(4, "order " + id + " of customer " + id % 1000);
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

    static Worker runWorker(String name, Start start) throws Exception {
        Worker w = new Worker(name, start);
        w.start();
        return w;
    }

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        double seconds = Double.parseDouble(args[1]);
        // Three seconds of warm-up on one thread: the JIT compiles the engine.
        Worker warm = runWorker("warmup", new Start(1, 3.0));
        warm.join();
        if (warm.failure != null) {
            throw new RuntimeException(warm.failure);
        }
        Start start = new Start(threads, seconds);
        Worker[] workers = new Worker[threads];
        for (int i = 0; i < threads; i++) {
            workers[i] = runWorker("worker-" + i, start);
        }
        long ops = 0;
        long cpu = 0;
        for (Worker w : workers) {
            w.join();
            if (w.failure != null) {
                throw new RuntimeException(w.failure);
            }
            ops += w.ops;
            cpu += w.cpuNanos;
        }
        System.out.println("ops " + ops);
        System.out.println("cpu_ns " + cpu);
        System.out.println("peak_rss_kb " + peakRssKb());
    }
}
