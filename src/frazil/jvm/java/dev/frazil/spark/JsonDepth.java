package dev.frazil.spark;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;

/**
 * How deep a JSON value nests, read from its bytes: a Catalyst expression over a Kafka value
 * (binary) that returns the most objects and arrays open at once ({@code 0} for a string, a
 * number, {@code true}…; {@code 1} for {@code {"a": 1}}), or {@link #TRAILING} when anything
 * but whitespace follows the first value.
 *
 * <p>It checks what Spark's {@code parse_json} does not: how deep a value nests (Jackson only
 * refuses past 1000 levels) and whether the text holds more than one value ({@code parse_json}
 * reads the first value and ignores the rest). One pass over the bytes without decoding them:
 * the structural characters are ASCII, so they are found in UTF-8 as bytes; the insides of
 * strings (with their escapes) are skipped. It does not check the JSON otherwise: {@code
 * parse_json} does. A value in the Schema Registry wire format (magic byte 0 and a 4-byte
 * schema id) is read after its header. Generated code calls {@link #depth} directly ({@link UnaryCall}).
 */
public final class JsonDepth extends UnaryCall {
  private static final long serialVersionUID = 1L;

  /** What {@link #depth} returns when more than whitespace follows the first value. */
  public static final int TRAILING = -1;

  /** The expression over a column of values (binary), as a column of {@code int}. */
  public static Column column(Column values) {
    return ExpressionUtils.column(new JsonDepth(ExpressionUtils.expression(values)));
  }

  public JsonDepth(Expression child) {
    super(child);
  }

  /** The nesting depth of one value, or {@link #TRAILING}. */
  public static int depth(byte[] data) {
    int n = data.length;
    int i = skipSpace(data, n > 0 && data[0] == 0 ? Math.min(5, n) : 0);
    int depth = 0;
    int deepest = 0;
    boolean scalar = false; // a top-level number or literal is under way
    while (i < n) {
      byte b = data[i];
      if (b == '"') {
        if (scalar) {
          return TRAILING;
        }
        i = skipString(data, i + 1);
        if (depth == 0) {
          break;
        }
        continue;
      }
      if (b == '{' || b == '[') {
        if (scalar) {
          return TRAILING;
        }
        if (++depth > deepest) {
          deepest = depth;
        }
      } else if (b == '}' || b == ']') {
        if (depth == 0) {
          return TRAILING;
        }
        if (--depth == 0) {
          i++;
          break;
        }
      } else if (depth == 0) {
        if (isSpace(b)) {
          break; // leading whitespace was skipped: this ends a top-level scalar
        }
        scalar = true;
      }
      i++;
    }
    return skipSpace(data, i) < n ? TRAILING : deepest;
  }

  private static boolean isSpace(byte b) {
    return b == ' ' || b == '\n' || b == '\r' || b == '\t';
  }

  private static int skipSpace(byte[] data, int i) {
    while (i < data.length && isSpace(data[i])) {
      i++;
    }
    return i;
  }

  /** The index after the string's closing quote ({@code start} is after its opening one). */
  private static int skipString(byte[] data, int start) {
    int i = start;
    while (i < data.length) {
      byte b = data[i];
      if (b == '\\') {
        i += 2;
      } else if (b == '"') {
        return i + 1;
      } else {
        i++;
      }
    }
    return data.length;
  }

  @Override
  String method() {
    return "depth";
  }

  @Override
  String argumentType() {
    return "byte[]";
  }

  @Override
  String resultType() {
    return "int";
  }

  @Override
  String nullValue() {
    return "0";
  }

  @Override
  Object call(Object value) {
    return depth((byte[]) value);
  }

  @Override
  UnaryCall withChild(Expression child) {
    return new JsonDepth(child);
  }

  @Override
  public DataType dataType() {
    return DataTypes.IntegerType;
  }

  @Override
  public boolean nullable() {
    return true;
  }

  @Override
  public String prettyName() {
    return "frazil_json_depth";
  }
}
