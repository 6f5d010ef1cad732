package dev.frazil.spark;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.util.List;
import org.apache.spark.sql.Column;

/**
 * A test of a column against many values, built in one call: PySpark's {@code isin} makes a
 * literal per value through py4j, a round trip each (a route's 100 table slots would cost
 * ~0.1 s a layout, and a layout has several such tests).
 */
public final class ValueSets {
  private static final ObjectMapper JSON = new ObjectMapper();

  private ValueSets() {}

  /**
   * Whether the column's value is one of these integers (Spark's {@code In}: a {@code switch}
   * in generated code beyond a few values).
   *
   * @param column the column
   * @param values the integers, as a JSON array
   * @return the test
   * @throws IOException if {@code values} is not a JSON array of integers
   */
  public static Column isInInts(Column column, String values) throws IOException {
    List<Integer> parsed = JSON.readValue(values, new TypeReference<List<Integer>>() {});
    return column.isInCollection(parsed);
  }
}
