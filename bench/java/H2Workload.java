import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;

/**
 * A real third-party application under load: the H2 SQL engine (Debian's
 * libh2-java), embedded, each worker thread running a mix of indexed
 * lookups, range aggregates, updates and insert/delete pairs against its
 * own in-memory database of 20,000 rows through JDBC prepared statements
 * (the SQL parser, the optimizer, MVStore B-trees, value conversions: deep
 * and varied stacks, unlike {@link Workload}). Prints the same lines as
 * {@link Workload}: operations done, the workers' CPU time, peak RSS.
 * Arguments: worker threads, seconds.
 */
public class H2Workload {
    static final int ROWS = 20_000;

    static final class Worker extends Thread {
        final long deadline;
        long ops;
        long cpuNanos;
        Throwable failure;

        Worker(String name, long deadline) {
            super(name);
            this.deadline = deadline;
        }

        @Override
        public void run() {
            try (Connection c = DriverManager.getConnection("jdbc:h2:mem:" + getName())) {
                work(c);
            } catch (Throwable t) {
                failure = t;
            }
            cpuNanos = java.lang.management.ManagementFactory.getThreadMXBean().getCurrentThreadCpuTime();
        }

        void work(Connection c) throws SQLException {
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

    static Worker runWorker(String name, long deadline) throws Exception {
        Worker w = new Worker(name, deadline);
        w.start();
        return w;
    }

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        double seconds = Double.parseDouble(args[1]);
        // Two seconds of warm-up on one thread: the JIT compiles the engine.
        Worker warm = runWorker("warmup", System.nanoTime() + 2_000_000_000L);
        warm.join();
        if (warm.failure != null) {
            throw new RuntimeException(warm.failure);
        }
        long deadline = System.nanoTime() + (long) (seconds * 1e9);
        Worker[] workers = new Worker[threads];
        for (int i = 0; i < threads; i++) {
            workers[i] = runWorker("worker-" + i, deadline);
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
