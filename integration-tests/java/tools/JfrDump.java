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
 * Prints a recording in a line format the Rust tests parse, reading it with
 * the JDK's own parser (jdk.jfr.consumer). Every constant an event references
 * must resolve, or RecordingFile throws.
 *
 * <pre>
 * EVENT  type  startEpochNanos  threadJavaName  osThreadId  state  weight  truncated
 * FRAME  frameType  class  method  descriptor  line  bci   (innermost first)
 * COUNTER  name  value
 * SETTING  name  value
 * FIELD  name  value   (the event's other fields: span ids, context attributes, endpoint, ...;
 *                      a profiler.SampleContext's fields go to the sample before it)
 * EVENT  jdk.NativeLibrary  startEpochNanos  path  0  buildId-or-dash  loadBias  false
 * </pre>
 */
public class JfrDump {
    private static final Set<String> COMMON =
        Set.of("startTime", "duration", "eventThread", "sampledThread", "stackTrace", "state", "weight", "samples");

    public static void main(String[] args) throws Exception {
        StringBuilder out = new StringBuilder(1 << 20);
        for (RecordedEvent e : RecordingFile.readAllEvents(Path.of(args[0]))) {
            String type = e.getEventType().getName();
            switch (type) {
                case "profiler.Counter":
                case "datadog.ProfilerCounter":
                    out.append("COUNTER\t").append(e.getString("name")).append('\t').append(e.getLong("count")).append('\n');
                    continue;
                case "jdk.ActiveSetting":
                    out.append("SETTING\t").append(e.getString("name")).append('\t').append(e.getString("value")).append('\n');
                    continue;
                case "jdk.NativeLibrary":
                    String id = e.getString("buildId");
                    out.append("EVENT\tjdk.NativeLibrary\t0\t").append(e.getString("name"))
                       .append("\t0\t").append(id == null ? "-" : id)
                       .append('\t').append(e.getLong("loadBias")).append("\tfalse\n");
                    continue;
                case "profiler.SampleContext":
                    fields(out, e);
                    continue;
                default:
                    break;
            }
            String threadField = e.hasField("sampledThread") ? "sampledThread" : "eventThread";
            RecordedThread thread = e.hasField(threadField) ? e.getThread(threadField) : null;
            // A sample's weight: Datadog's `weight`, a wall-clock sample's `samples`, else one.
            long weight = e.hasField("weight") ? e.getLong("weight")
                : e.hasField("samples") ? e.getInt("samples") : e.hasField("sampledThread") ? 1 : 0;
            RecordedStackTrace stack = e.getStackTrace();
            out.append("EVENT\t").append(type)
               .append('\t').append(e.getStartTime().getEpochSecond() * 1_000_000_000L + e.getStartTime().getNano())
               .append('\t').append(thread == null ? "-" : thread.getJavaName())
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
                   .append('\n');
            }
        }
        System.out.print(out);
    }

    private static void fields(StringBuilder out, RecordedEvent e) {
        for (ValueDescriptor field : e.getFields()) {
            if (!COMMON.contains(field.getName())) {
                out.append("FIELD\t").append(field.getName()).append('\t').append((Object) e.getValue(field.getName())).append('\n');
            }
        }
    }
}
