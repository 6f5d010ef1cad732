package dev.frazil.spark;

import org.apache.iceberg.LocationProviders;
import org.apache.iceberg.SerializableTable;
import org.apache.iceberg.Table;
import org.apache.iceberg.io.LocationProvider;
import org.apache.iceberg.io.OutputFileFactory;

/**
 * The template's serializable copy, relocated for each new table: a new table's files go
 * under {@code <namespace location>/<table>}, and only the tasks learn its name (from its
 * rows). Iceberg's {@link OutputFileFactory} takes a {@link Table} and asks it for its
 * location provider, hence a copy whose location is the new table's. {@link
 * SerializableTable} copies from a live table only (given a copy, it would load the
 * metadata file), so the driver makes one copy and each new table gets a shallow clone.
 */
final class TemplateTable extends SerializableTable implements Cloneable {
  private final String namespace;
  private String location;
  private transient LocationProvider locations;

  TemplateTable(Table template, String namespace, String namespaceLocation) {
    super(template);
    this.namespace = namespace;
    this.location = namespaceLocation;
  }

  /** A new table's copy, or null for a name outside the template's namespace. */
  TemplateTable tableOf(String table) {
    String prefix = namespace + ".";
    if (!table.startsWith(prefix) || table.indexOf('.', prefix.length()) >= 0) {
      return null;
    }
    TemplateTable copy;
    try {
      copy = (TemplateTable) clone();
    } catch (CloneNotSupportedException e) {
      throw new IllegalStateException(e);
    }
    copy.location = location + "/" + table.substring(prefix.length());
    copy.locations = null;
    return copy;
  }

  @Override
  public String location() {
    return location;
  }

  @Override
  public LocationProvider locationProvider() {
    if (locations == null) {
      locations = LocationProviders.locationsFor(location, properties());
    }
    return locations;
  }
}
