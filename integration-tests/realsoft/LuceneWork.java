import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.Random;
import org.apache.lucene.analysis.standard.StandardAnalyzer;
import org.apache.lucene.document.Document;
import org.apache.lucene.document.Field;
import org.apache.lucene.document.StringField;
import org.apache.lucene.document.TextField;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.IndexWriter;
import org.apache.lucene.index.IndexWriterConfig;
import org.apache.lucene.index.Term;
import org.apache.lucene.search.BooleanClause;
import org.apache.lucene.search.BooleanQuery;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.TermQuery;
import org.apache.lucene.search.TopDocs;
import org.apache.lucene.store.ByteBuffersDirectory;

/**
 * Apache Lucene 8 (Debian's liblucene8-java) indexing synthetic documents,
 * then searching them, in two phases on the main thread, each for the
 * given CPU milliseconds of that thread: {@code LuceneWork <ms>}. Prints
 * the CPU time each phase took (the phase ends at the first batch past
 * it), the truth a profile's phase shares are compared against.
 */
public class LuceneWork {
    static String[] vocabulary(Random random, int size) {
        String[] words = new String[size];
        for (int i = 0; i < size; i++) {
            StringBuilder word = new StringBuilder();
            int length = 3 + random.nextInt(8);
            for (int c = 0; c < length; c++) {
                word.append((char) ('a' + random.nextInt(26)));
            }
            words[i] = word.toString();
        }
        return words;
    }

    /** A word, the frequent ones more often (as in text). */
    static String word(String[] words, Random random) {
        return words[(int) Math.abs(random.nextGaussian() * words.length / 6) % words.length];
    }

    static void index(IndexWriter writer, String[] words, Random random, long cpuNanos, ThreadMXBean mx) throws Exception {
        long end = mx.getCurrentThreadCpuTime() + cpuNanos;
        int id = 0;
        while (mx.getCurrentThreadCpuTime() < end) {
            for (int n = 0; n < 100; n++) {
                StringBuilder body = new StringBuilder();
                for (int w = 0; w < 80; w++) {
                    body.append(word(words, random)).append(' ');
                }
                Document doc = new Document();
                doc.add(new StringField("id", Integer.toString(id++), Field.Store.YES));
                doc.add(new TextField("body", body.toString(), Field.Store.NO));
                writer.addDocument(doc);
            }
        }
        writer.commit();
    }

    static long search(IndexSearcher searcher, String[] words, Random random, long cpuNanos, ThreadMXBean mx) throws Exception {
        long end = mx.getCurrentThreadCpuTime() + cpuNanos;
        long hits = 0;
        while (mx.getCurrentThreadCpuTime() < end) {
            for (int n = 0; n < 50; n++) {
                BooleanQuery.Builder query = new BooleanQuery.Builder();
                for (int t = 0; t < 3; t++) {
                    query.add(new TermQuery(new Term("body", word(words, random))), BooleanClause.Occur.SHOULD);
                }
                TopDocs top = searcher.search(query.build(), 10);
                hits += top.totalHits.value;
            }
        }
        return hits;
    }

    public static void main(String[] args) throws Exception {
        long phase = Long.parseLong(args[0]) * 1_000_000L;
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        Random random = new Random(42);
        String[] words = vocabulary(random, 20_000);
        ByteBuffersDirectory directory = new ByteBuffersDirectory();
        long start = mx.getCurrentThreadCpuTime();
        try (IndexWriter writer = new IndexWriter(directory, new IndexWriterConfig(new StandardAnalyzer()))) {
            index(writer, words, random, phase, mx);
        }
        long indexed = mx.getCurrentThreadCpuTime();
        try (DirectoryReader reader = DirectoryReader.open(directory)) {
            System.out.println("hits " + search(new IndexSearcher(reader), words, random, phase, mx));
        }
        long searched = mx.getCurrentThreadCpuTime();
        System.out.println("cpu index " + (indexed - start));
        System.out.println("cpu search " + (searched - indexed));
    }
}
