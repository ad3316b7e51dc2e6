/** Loaded over and over by DumpChurn into throwaway class loaders. */
public class DumpPayload {
    static volatile long sink;

    public static void work() {
        long x = 0;
        for (int i = 0; i < 200_000; i++) {
            x = x * 31 + i;
        }
        sink = x;
    }
}
