import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import jdk.jfr.ValueDescriptor;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordedFrame;
import jdk.jfr.consumer.RecordedMethod;
import jdk.jfr.consumer.RecordedStackTrace;
import jdk.jfr.consumer.RecordedThread;
import jdk.jfr.consumer.RecordingFile;

/**
 * Prints recordings in a line format the Rust tests parse, reading them with
 * the JDK's own parser (jdk.jfr.consumer). Every constant an event references
 * must resolve, or RecordingFile throws. {@code JfrDump file...}: one JVM
 * reads every file given, each introduced by a FILE line.
 *
 * <pre>
 * FILE  path
 * EVENT  type  startEpochNanos  threadName  osThreadId  state  weight  truncated
 * FRAME  frameType  class  method  descriptor  line  bci  hidden   (innermost first)
 * COUNTER  name  value
 * SETTING  name  value
 * FIELD  name  value   (the event's other fields: span ids, context attributes, endpoint, ...;
 *                      a jvmprofiler.SampleContext's fields go to the sample before it)
 * EVENT  jdk.NativeLibrary  startEpochNanos  path  0  buildId-or-dash  loadBias  false
 * </pre>
 *
 * Both recording dialects: the thread is {@code eventThread} (datadog) or
 * {@code sampledThread} (jdk); its name is the Java name, else the OS name;
 * the weight is {@code weight}, else the wall sample's {@code samples}, else
 * one for a jdk-dialect CPU sample.
 */
public class JfrDump {
    private static final Set<String> COMMON =
            Set.of("startTime", "duration", "eventThread", "sampledThread", "stackTrace", "state", "weight", "samples");

    public static void main(String[] args) throws Exception {
        StringBuilder out = new StringBuilder(1 << 20);
        for (String file : args) {
            out.append("FILE\t").append(file).append('\n');
            dump(Path.of(file), out);
        }
        System.out.print(out);
    }

    /** A value on one line: tabs and line breaks (another writer's system properties, CPU description) as spaces. */
    private static String oneLine(Object value) {
        return String.valueOf(value).replace('\t', ' ').replace('\n', ' ').replace('\r', ' ');
    }

    private static void dump(Path file, StringBuilder out) throws Exception {
        for (RecordedEvent e : RecordingFile.readAllEvents(file)) {
            String type = e.getEventType().getName();
            switch (type) {
                case "datadog.ProfilerCounter":
                case "jvmprofiler.Counter":
                    out.append("COUNTER\t").append(e.getString("name")).append('\t').append(e.getLong("count")).append('\n');
                    continue;
                case "jdk.ActiveSetting":
                    out.append("SETTING\t").append(e.getString("name")).append('\t').append(e.getString("value")).append('\n');
                    continue;
                case "jdk.NativeLibrary":
                    // Another writer's (the JDK's, async-profiler's) has no buildId or loadBias.
                    String id = e.hasField("buildId") ? e.getString("buildId") : null;
                    out.append("EVENT\tjdk.NativeLibrary\t0\t").append(e.getString("name"))
                       .append("\t0\t").append(id == null ? "-" : id)
                       .append('\t').append(e.hasField("loadBias") ? e.getLong("loadBias") : 0).append("\tfalse\n");
                    continue;
                case "jvmprofiler.SampleContext":
                    fields(out, e);
                    continue;
                default:
                    break;
            }
            RecordedThread thread = e.hasField("eventThread") ? e.getThread("eventThread")
                    : e.hasField("sampledThread") ? e.getThread("sampledThread") : null;
            RecordedStackTrace stack = e.getStackTrace();
            // A Datadog live object's weight is a float (objects it stands for).
            long weight = e.hasField("weight") ? ((Number) e.getValue("weight")).longValue()
                    : e.hasField("samples") ? e.getLong("samples") : type.equals("jdk.ExecutionSample") ? 1 : 0;
            out.append("EVENT\t").append(type)
               .append('\t').append(e.getStartTime().getEpochSecond() * 1_000_000_000L + e.getStartTime().getNano())
               .append('\t').append(thread == null ? "-" : thread.getJavaName() != null ? thread.getJavaName() : thread.getOSName())
               .append('\t').append(thread == null ? 0 : thread.getOSThreadId())
               .append('\t').append(e.hasField("state") ? e.getString("state") : "-")
               .append('\t').append(weight)
               .append('\t').append(stack != null && stack.isTruncated())
               .append('\n');
            fields(out, e);
            if (stack == null) {
                continue;
            }
            List<RecordedFrame> frames = stack.getFrames();
            for (RecordedFrame f : frames) {
                RecordedMethod m = f.getMethod();
                out.append("FRAME\t").append(f.getType())
                   .append('\t').append(m.getType().getName())
                   .append('\t').append(m.getName())
                   .append('\t').append(m.getDescriptor())
                   .append('\t').append(f.getLineNumber())
                   .append('\t').append(f.getBytecodeIndex())
                   .append('\t').append(m.isHidden())
                   .append('\n');
            }
        }
    }

    private static void fields(StringBuilder out, RecordedEvent e) {
        if (e.hasField("duration") && e.getDuration().toNanos() != 0) {
            out.append("FIELD\tdurationNanos\t").append(e.getDuration().toNanos()).append('\n');
        }
        for (ValueDescriptor field : e.getFields()) {
            if (!COMMON.contains(field.getName())) {
                out.append("FIELD\t").append(field.getName()).append('\t').append(oneLine(e.getValue(field.getName()))).append('\n');
            }
        }
    }
}
