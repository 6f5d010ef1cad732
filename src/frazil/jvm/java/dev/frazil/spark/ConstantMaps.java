package dev.frazil.spark;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Function;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.util.ArrayBasedMapData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A constant map as one literal, where Spark's {@code map(...)} ({@code CreateMap}) would hold
 * one expression per key and value.
 *
 * <p>A {@code CreateMap} is evaluated on the driver when a plan is optimized (constant folding;
 * {@code from_avro} reading its options), into a map builder the expression keeps for reuse.
 * Plans that share one analyzed frame (the tables of a batch, written from several threads)
 * share that builder: two threads filling it at once fail with {@code DUPLICATED_MAP_KEY} or,
 * worse, one of them gets a map with some entries missing. A literal's value is built once,
 * here, and only read after.
 */
public final class ConstantMaps {
  private static final ObjectMapper JSON = new ObjectMapper();

  private ConstantMaps() {}

  /**
   * A {@code map<string,string>} literal.
   *
   * @param entries a JSON object of strings
   * @return the literal column
   * @throws IOException if {@code entries} is not a JSON object of strings
   */
  public static Column strings(String entries) throws IOException {
    Map<String, String> parsed = JSON.readValue(entries, new TypeReference<Map<String, String>>() {});
    return literal(parsed, DataTypes.StringType, UTF8String::fromString);
  }

  /**
   * A {@code map<string,bigint>} literal.
   *
   * @param entries a JSON object of integers
   * @return the literal column
   * @throws IOException if {@code entries} is not a JSON object of integers
   */
  public static Column longs(String entries) throws IOException {
    Map<String, Long> parsed = JSON.readValue(entries, new TypeReference<Map<String, Long>>() {});
    return literal(parsed, DataTypes.LongType, v -> v);
  }

  private static <V> Column literal(
      Map<String, V> entries, DataType valueType, Function<V, Object> value) {
    Map<String, V> sorted = new TreeMap<>(entries);
    Object[] keys = new Object[sorted.size()];
    Object[] values = new Object[sorted.size()];
    int i = 0;
    for (Map.Entry<String, V> entry : sorted.entrySet()) {
      keys[i] = UTF8String.fromString(entry.getKey());
      values[i] = value.apply(entry.getValue());
      i++;
    }
    ArrayBasedMapData data =
        new ArrayBasedMapData(new GenericArrayData(keys), new GenericArrayData(values));
    return ExpressionUtils.column(
        new Literal(data, DataTypes.createMapType(DataTypes.StringType, valueType, false)));
  }
}
