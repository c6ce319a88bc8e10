// EPUBCheck over many books in one JVM, run by the tests in Java's source-file mode
// (java -cp epubcheck.jar tests/EpubcheckMany.java BOOK...). A JVM start and EPUBCheck's schema
// loading cost about 3 s; each further book costs about 0.7 s. Each book gets its own report, whose
// messages go to stderr as EPUBCheck's command prints them, then one line "BOOK <fatals> <errors> <path>"
// on the same stream, so that each book's messages are the ones printed since the previous BOOK line.
import com.adobe.epubcheck.api.EpubCheck;
import com.adobe.epubcheck.util.DefaultReportImpl;
import java.io.File;

public class EpubcheckMany {
    public static void main(String[] paths) {
        for (String path : paths) {
            DefaultReportImpl report = new DefaultReportImpl(path);
            new EpubCheck(new File(path), report).doValidate();
            System.err.println("BOOK " + report.getFatalErrorCount() + " " + report.getErrorCount() + " " + path);
        }
    }
}
