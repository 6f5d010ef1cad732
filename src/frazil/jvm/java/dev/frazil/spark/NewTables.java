package dev.frazil.spark;

import com.fasterxml.jackson.core.type.TypeReference;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.apache.iceberg.AppendFiles;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.Table;
import org.apache.iceberg.Transaction;
import org.apache.iceberg.UpdateSchema;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.mapping.MappingUtil;
import org.apache.iceberg.mapping.NameMappingParser;
import dev.frazil.spark.RoutedWrites.Result;
import dev.frazil.spark.RoutedWrites.TableWritten;

/**
 * Creates the tables a routed batch met first, each with the files {@link RoutedWrites#write}
 * wrote for it and the batch's marker, in one transaction per table ({@link #createAndAppend},
 * several at once with {@link #createAll}): a table appears with its rows, or not at all.
 */
public final class NewTables {
  private NewTables() {}

  /**
   * Creates a table met first with the template's schema (the catalog assigns the same field
   * ids, checked), drops the columns none of its records filled, sets the name mapping and
   * appends its files, in one transaction: the table appears with its rows and marker. The
   * columns to drop (a JSON list) and the summary (a JSON object of strings) are one py4j
   * argument each, where a Java list or map costs a round trip per element.
   *
   * @return false if the catalog would give the columns other ids (nothing is created)
   */
  public static boolean createAndAppend(
      Result result,
      Catalog catalog,
      TableIdentifier identifier,
      Table template,
      Map<String, String> properties,
      String dropColumnsJson,
      String nameMappingProperty,
      String summaryJson)
      throws IOException {
    List<String> dropColumns =
        RoutedCommits.JSON.readValue(dropColumnsJson, new TypeReference<List<String>>() {});
    return create(
        result,
        catalog,
        identifier,
        template,
        properties,
        dropColumns,
        nameMappingProperty,
        RoutedCommits.summaryOf(summaryJson));
  }

  /** What {@link #createAll} made: each table, or why not. */
  public static final class Created {
    private final Table[] tables;
    private final Map<Integer, Throwable> failures;

    Created(Table[] tables, Map<Integer, Throwable> failures) {
      this.tables = tables;
      this.failures = failures;
    }

    /** The {@code i}th table, created and loaded; null if it failed or needs a refit. */
    public Table table(int i) {
      return tables[i];
    }

    /** The tables whose creation failed (by index), with the failure. */
    public Map<Integer, Throwable> failures() {
      return failures;
    }

    /**
     * Every table, in order (null where {@link #table} is): one py4j round trip for the batch's
     * new tables, a driver reading each only when it needs it.
     */
    public List<Table> tables() {
      return Collections.unmodifiableList(Arrays.asList(tables));
    }

    /** The indexes of the tables neither created nor failed (a refit), as a JSON list. */
    public String refits() throws IOException {
      List<Integer> out = new ArrayList<>();
      for (int i = 0; i < tables.length; i++) {
        if (tables[i] == null && !failures.containsKey(i)) {
          out.add(i);
        }
      }
      return RoutedCommits.JSON.writeValueAsString(out);
    }
  }

  /**
   * {@link #createAndAppend} for several tables in one call, several at once (each is a few
   * catalog round trips and file writes, mostly waiting), each table loaded once created. One
   * py4j round trip for the batch's new tables: per table the calls and their arguments cost
   * more than the creation itself (bench/routing, 100 tables met in a first batch).
   *
   * @param tablesJson a JSON list of {@code [table name, [columns to drop], summary object]}
   * @return each table created (null where the catalog would give the columns other ids:
   *     nothing is created), or its failure
   */
  public static Created createAll(
      Result result,
      Catalog catalog,
      Table template,
      Map<String, String> properties,
      String nameMappingProperty,
      String tablesJson)
      throws IOException {
    List<List<Object>> parsed =
        RoutedCommits.JSON.readValue(tablesJson, new TypeReference<List<List<Object>>>() {});
    Table[] tables = new Table[parsed.size()];
    Map<Integer, Throwable> failures =
        RoutedCommits.each(
            parsed.size(),
            i -> {
              List<Object> spec = parsed.get(i);
              TableIdentifier identifier = TableIdentifier.parse((String) spec.get(0));
              List<String> drops = new ArrayList<>();
              for (Object column : (List<?>) spec.get(1)) {
                drops.add((String) column);
              }
              if (create(
                  result,
                  catalog,
                  identifier,
                  template,
                  properties,
                  drops,
                  nameMappingProperty,
                  RoutedCommits.stringMap(spec.get(2)))) {
                tables[i] = catalog.loadTable(identifier);
              }
            });
    return new Created(tables, failures);
  }

  private static boolean create(
      Result result,
      Catalog catalog,
      TableIdentifier identifier,
      Table template,
      Map<String, String> properties,
      List<String> dropColumns,
      String nameMappingProperty,
      Map<String, String> summary) {
    TableWritten written = result.written(identifier.toString());
    Transaction txn =
        catalog
            .buildTable(identifier, template.schema())
            .withPartitionSpec(template.spec())
            .withProperties(properties)
            .withLocation(written.location)
            .createTransaction();
    if (!txn.table().schema().asStruct().equals(template.schema().asStruct())
        || !txn.table().spec().equals(template.spec())) {
      return false;
    }
    if (!dropColumns.isEmpty()) {
      UpdateSchema update = txn.updateSchema();
      for (String column : dropColumns) {
        update.deleteColumn(column);
      }
      update.commit();
    }
    txn.updateProperties()
        .set(nameMappingProperty, NameMappingParser.toJson(MappingUtil.create(txn.table().schema())))
        .commit();
    AppendFiles append = txn.newAppend().scanManifestsWith(RoutedCommits.IN_THREAD);
    for (DataFile f : written.files) {
      append.appendFile(f);
    }
    summary.forEach(append::set);
    append.commit();
    txn.commitTransaction();
    return true;
  }
}
