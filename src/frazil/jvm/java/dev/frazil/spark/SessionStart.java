package dev.frazil.spark;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Enumeration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.classic.SparkSession;

/**
 * The driver's SparkSession, made without the session extensions that Spark finds through
 * {@link java.util.ServiceLoader} and frazil never uses.
 *
 * <p>A new SparkSession runs every {@code SparkSessionExtensionsProvider} on the classpath.
 * PySpark's jars hold one, Spark ML's {@code InternalFunctionRegistration}: it registers three
 * internal functions for Spark Connect's ML client ({@code vector_to_array}, {@code
 * array_to_vector}, {@code aggregate_metrics}), and building their encoders starts Scala's
 * runtime reflection, about 0.9 s of a 1.0 s session start on two cores (a profile of the
 * driver). The session is made here with a context class loader that leaves that provider's
 * service file out; every other provider (a user's jar) still applies, as do the extensions
 * of {@code spark.sql.extensions} (Iceberg's), which are not found this way.
 */
public final class SessionStart {
  static final String PROVIDERS =
      "META-INF/services/org.apache.spark.sql.SparkSessionExtensionsProvider";
  /** Providers left out: Spark ML's functions for Spark Connect. */
  static final Set<String> LEFT_OUT = Set.of("org.apache.spark.sql.ml.InternalFunctionRegistration");

  private SessionStart() {}

  /**
   * A new session on {@code context} with {@code options} (as PySpark passes its builder's),
   * the providers of {@link #LEFT_OUT} not run. The calling thread's context class loader is
   * put back before returning.
   */
  public static SparkSession create(SparkContext context, Map<String, String> options) {
    Thread thread = Thread.currentThread();
    ClassLoader before = thread.getContextClassLoader();
    ClassLoader parent = before != null ? before : SessionStart.class.getClassLoader();
    thread.setContextClassLoader(new WithoutProviders(parent));
    try {
      return new SparkSession(context, new HashMap<>(options));
    } finally {
      thread.setContextClassLoader(before);
    }
  }

  /** Its parent, except that a service file naming only left-out providers is not found. */
  public static final class WithoutProviders extends ClassLoader {
    public WithoutProviders(ClassLoader parent) {
      super(parent);
    }

    @Override
    public Enumeration<URL> getResources(String name) throws IOException {
      Enumeration<URL> found = super.getResources(name);
      if (!PROVIDERS.equals(name)) {
        return found;
      }
      List<URL> kept = new ArrayList<>();
      for (URL url : Collections.list(found)) {
        List<String> listed = providers(url);
        if (listed.isEmpty() || !LEFT_OUT.containsAll(listed)) {
          kept.add(url);
        }
      }
      return Collections.enumeration(kept);
    }

    /** The class names a service file lists (comments and blank lines left out). */
    static List<String> providers(URL url) throws IOException {
      List<String> names = new ArrayList<>();
      try (BufferedReader reader =
          new BufferedReader(new InputStreamReader(url.openStream(), StandardCharsets.UTF_8))) {
        String line;
        while ((line = reader.readLine()) != null) {
          int comment = line.indexOf('#');
          String name = (comment >= 0 ? line.substring(0, comment) : line).trim();
          if (!name.isEmpty()) {
            names.add(name);
          }
        }
      }
      return names;
    }
  }
}
