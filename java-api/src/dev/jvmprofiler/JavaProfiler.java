package dev.jvmprofiler;

import java.io.File;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The profiler's Java API.
 *
 * <p>{@link #getInstance()} uses the agent if it is already loaded (with
 * {@code -agentpath} or {@code jcmd JVMTI.agent_load}); otherwise it loads
 * the library: the path given to {@link #getInstance(String)}, else the
 * {@code jvmprofiler.library} system property, else {@code libprofiler.so}
 * next to this jar, else {@code profiler} from {@code java.library.path}.
 *
 * <p>Commands take the agent's option syntax ({@code start,cpu=1ms,file=p.jfr}).
 * Context calls are cheap, apply to the calling thread and may be made at
 * any time; samples taken while profiling carry the context of their thread.
 * Misuse is reported with exceptions: {@link IllegalArgumentException} for a
 * bad argument or option, {@link IllegalStateException} when profiling is
 * not running, {@link IOException} when a file cannot be written.
 */
public final class JavaProfiler {
    private static JavaProfiler instance;

    private JavaProfiler() {}

    /** The profiler, loading the library if the agent is not loaded yet. */
    public static synchronized JavaProfiler getInstance() throws IOException {
        return getInstance(null);
    }

    /** The profiler, loading the library from {@code libraryPath} if the agent is not loaded yet. */
    public static synchronized JavaProfiler getInstance(String libraryPath) throws IOException {
        if (instance == null) {
            load(libraryPath);
            instance = new JavaProfiler();
        }
        return instance;
    }

    private static boolean agentLoaded() {
        try {
            return isAgentLoaded0();
        } catch (UnsatisfiedLinkError e) {
            return false;
        }
    }

    private static String besideJar() {
        try {
            File jar = new File(JavaProfiler.class.getProtectionDomain().getCodeSource().getLocation().toURI());
            File library = new File(jar.getParentFile(), "libprofiler.so");
            return library.isFile() ? library.getPath() : null;
        } catch (URISyntaxException | SecurityException | NullPointerException e) {
            return null;
        }
    }

    private static void load(String explicit) throws IOException {
        if (agentLoaded()) {
            return;
        }
        String path = explicit != null ? explicit : System.getProperty("jvmprofiler.library");
        if (path == null) {
            path = besideJar();
        }
        try {
            if (path != null) {
                System.load(new File(path).getAbsolutePath());
            } else {
                System.loadLibrary("profiler");
            }
        } catch (UnsatisfiedLinkError e) {
            throw new IOException("cannot load the profiler library " + (path != null ? path : "'profiler'") + ": " + e.getMessage(), e);
        }
        if (!agentLoaded()) {
            throw new IOException("the profiler library was loaded but does not answer");
        }
    }

    /**
     * Runs a command in the agent's option syntax and returns its message.
     *
     * @throws IllegalArgumentException for an invalid option, naming it
     * @throws IllegalStateException if the command needs a running profiler
     * @throws IOException if a file cannot be written
     */
    public String execute(String command) throws IOException {
        if (command == null) {
            throw new IllegalArgumentException("command must not be null");
        }
        return check(execute0(command));
    }

    /** Writes the data recorded since the previous dump to {@code path} as a JFR file; sampling continues. */
    public void dump(Path path) throws IOException {
        if (path == null) {
            throw new IllegalArgumentException("dump path must not be null");
        }
        check(dump0(path.toAbsolutePath().toString()));
    }

    /** Stops profiling, writing the recording if a file was given at start. */
    public void stop() throws IOException {
        check(execute0("stop"));
    }

    /**
     * The files a looping session ({@code loop=}) finished since the last
     * call, oldest first: complete recordings an application may ship
     * itself. After {@code stop}, the stopped session's files not yet
     * returned, its last one included. At most the 1,024 most recent are
     * remembered between calls.
     */
    public List<Path> pollFinishedFiles() {
        List<Path> files = new ArrayList<>();
        for (String line : finishedFiles0().split("\n")) {
            if (!line.isEmpty()) {
                files.add(Paths.get(line));
            }
        }
        return Collections.unmodifiableList(files);
    }

    /** The agent's debug counters, by name (samples, drops, remote-symbolication counts, ...). */
    public Map<String, Long> getDebugCounters() {
        Map<String, Long> counters = new LinkedHashMap<>();
        for (String line : counters0().split("\n")) {
            int eq = line.indexOf('=');
            if (eq > 0) {
                counters.put(line.substring(0, eq), Long.parseLong(line.substring(eq + 1)));
            }
        }
        return Collections.unmodifiableMap(counters);
    }

    /** Sets the calling thread's span and local root span ids. */
    public void setContext(long spanId, long rootSpanId) {
        setContext0(spanId, rootSpanId);
    }

    /** Clears the calling thread's span ids and context values. */
    public void clearContext() {
        clearContext0();
    }

    /**
     * Sets the calling thread's context value {@code slot} (an index into the
     * {@code attributes=} names given at start); {@code null} clears it.
     *
     * @throws IllegalArgumentException if the slot is out of range
     */
    public void setContextValue(int slot, String value) {
        String error = setContextValue0(slot, value);
        if (error != null) {
            throw new IllegalArgumentException(error);
        }
    }

    /**
     * Records the endpoint and operation of a trace root. Returns false when
     * profiling is not running, or when {@code endpoint} is new and the current
     * chunk already holds {@code sizeLimit} distinct labels.
     */
    public boolean recordTraceRoot(long rootSpanId, String endpoint, String operation, int sizeLimit) {
        if (endpoint == null || operation == null) {
            throw new IllegalArgumentException("endpoint and operation must not be null");
        }
        if (sizeLimit < 0) {
            throw new IllegalArgumentException("sizeLimit must not be negative: " + sizeLimit);
        }
        return recordTraceRoot0(rootSpanId, endpoint, operation, sizeLimit);
    }

    /** Adds the calling thread to the thread filter (sampled when {@code filter} is on). */
    public void addThread() {
        filterThread0(true);
    }

    /** Removes the calling thread from the thread filter. */
    public void removeThread() {
        filterThread0(false);
    }

    /** Turns a native result ("kind\nmessage") into a message or an exception. */
    private static String check(String result) throws IOException {
        int newline = result.indexOf('\n');
        String kind = result.substring(0, newline);
        String message = result.substring(newline + 1);
        switch (kind) {
            case "ok":
                return message;
            case "argument":
                throw new IllegalArgumentException(message);
            case "state":
                throw new IllegalStateException(message);
            default:
                throw new IOException(message);
        }
    }

    private static native boolean isAgentLoaded0();

    private static native String execute0(String command);

    private static native String dump0(String path);

    private static native String counters0();

    private static native String finishedFiles0();

    private static native void setContext0(long spanId, long rootSpanId);

    private static native void clearContext0();

    private static native String setContextValue0(int slot, String value);

    private static native boolean recordTraceRoot0(long rootSpanId, String endpoint, String operation, int sizeLimit);

    private static native void filterThread0(boolean add);
}
