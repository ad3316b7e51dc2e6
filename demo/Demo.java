import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A small service-like program to profile: two request handler threads
 * that parse text, compute and render responses, plus a background thread
 * compressing data. Runs for the number of seconds given (default 10).
 */
public class Demo {
    static volatile long sink;

    static Map<String, Integer> parseQuery(String query) {
        Map<String, Integer> params = new HashMap<>();
        for (String pair : query.split("&")) {
            int eq = pair.indexOf('=');
            params.put(pair.substring(0, eq), Integer.parseInt(pair.substring(eq + 1)));
        }
        return params;
    }

    static List<Integer> primesBelow(int limit) {
        List<Integer> primes = new ArrayList<>();
        for (int n = 2; primes.size() < 2000 && n < limit; n++) {
            boolean prime = true;
            for (int p : primes) {
                if (p * p > n) break;
                if (n % p == 0) { prime = false; break; }
            }
            if (prime) primes.add(n);
        }
        return primes;
    }

    static String render(List<Integer> primes) {
        StringBuilder out = new StringBuilder();
        for (int p : primes) out.append(p).append(',');
        return out.toString();
    }

    static void handleRequest(int id) {
        Map<String, Integer> params = parseQuery("limit=" + (20_000 + id % 5000) + "&page=" + id % 7);
        String body = render(primesBelow(params.get("limit")));
        sink += body.hashCode();
    }

    static void compressInBackground(long deadline) {
        byte[] data = new byte[1 << 16];
        java.util.zip.Deflater deflater = new java.util.zip.Deflater();
        byte[] out = new byte[1 << 17];
        while (System.nanoTime() < deadline) {
            for (int i = 0; i < data.length; i++) data[i] = (byte) (i * 31 + sink);
            deflater.reset();
            deflater.setInput(data);
            deflater.finish();
            sink += deflater.deflate(out);
        }
    }

    public static void main(String[] args) throws Exception {
        long seconds = args.length > 0 ? Long.parseLong(args[0]) : 10;
        long deadline = System.nanoTime() + seconds * 1_000_000_000L;
        Thread background = new Thread(() -> compressInBackground(deadline), "compressor");
        background.start();
        long[] handled = new long[2];
        Thread[] handlers = new Thread[handled.length];
        for (int h = 0; h < handlers.length; h++) {
            final int slot = h;
            handlers[h] = new Thread(() -> {
                for (int id = slot; System.nanoTime() < deadline; id += handlers.length) {
                    handleRequest(id);
                    handled[slot]++;
                }
            }, "handler-" + h);
            handlers[h].start();
        }
        for (Thread t : handlers) t.join();
        background.join();
        System.out.println("handled " + (handled[0] + handled[1]) + " requests");
    }
}
