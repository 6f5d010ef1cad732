package dev.frazil.spark;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A value as a route puts it into a table name ({@code frazil.route.rules.sanitize}): lower
 * case, each run of characters other than {@code a-z}, {@code 0-9} and {@code _} one {@code _};
 * equal to Python's {@code re.sub("[^a-z0-9_]+", "_", value.lower())}.
 *
 * <p>Only A-Z, the Kelvin sign ({@code k}) and {@code İ} ({@code i} and a combining dot) lower
 * to a character a name keeps; every other character becomes part of a run. Spark's own
 * functions gave the same result with a {@code translate}, a {@code replace} and a {@code
 * regexp_replace}: a map lookup per character and a regular expression per row, ~11% of a
 * routed batch's read stage (bench/routing, 2026-11-30). Here a value already a valid name
 * (the common case) is returned as it is, and an ASCII one is mapped byte by byte.
 *
 * <p>Text that is not valid UTF-8 is decoded as Java (and so Spark's {@code regexp_replace})
 * decodes it, each malformed sequence a replacement character, which is then part of a run.
 */
public final class TableNameText extends UnaryCall {
  private static final long serialVersionUID = 1L;

  /** The sanitized text of a string column. */
  public static Column column(Column value) {
    return ExpressionUtils.column(new TableNameText(ExpressionUtils.expression(value)));
  }

  public TableNameText(Expression child) {
    super(child);
  }

  /**
   * The text as it appears in a table name.
   *
   * @param value the text (not null)
   * @return {@code value} itself when it is already a valid name, else a new string
   */
  public static UTF8String sanitize(UTF8String value) {
    Object base = value.getBaseObject();
    long offset = value.getBaseOffset();
    int size = value.numBytes();
    boolean valid = true;
    for (int i = 0; i < size; i++) {
      byte b = Platform.getByte(base, offset + i);
      if (b < 0) {
        return UTF8String.fromString(sanitize(value.toString()));
      }
      valid &= kept(b);
    }
    if (valid) {
      return value;
    }
    byte[] out = new byte[size];
    int length = 0;
    boolean inRun = false;
    for (int i = 0; i < size; i++) {
      byte b = Platform.getByte(base, offset + i);
      byte c = b >= 'A' && b <= 'Z' ? (byte) (b + ('a' - 'A')) : b;
      if (kept(c)) {
        out[length++] = c;
        inRun = false;
      } else if (!inRun) {
        out[length++] = '_';
        inRun = true;
      }
    }
    return UTF8String.fromBytes(out, 0, length);
  }

  /** {@link #sanitize(UTF8String)} of text with characters beyond ASCII. */
  static String sanitize(String text) {
    StringBuilder out = new StringBuilder(text.length());
    boolean inRun = false;
    for (int i = 0; i < text.length(); ) {
      int point = text.codePointAt(i);
      i += Character.charCount(point);
      int lower;
      if (point >= 'A' && point <= 'Z') {
        lower = point + ('a' - 'A');
      } else if (point == '\u212a') { // Kelvin sign
        lower = 'k';
      } else if (point == '\u0130') { // İ: "i" and a combining dot above, not kept
        out.append('i');
        inRun = false;
        lower = '\u0307';
      } else {
        lower = point;
      }
      if (lower < 128 && kept((byte) lower)) {
        out.append((char) lower);
        inRun = false;
      } else if (!inRun) {
        out.append('_');
        inRun = true;
      }
    }
    return out.toString();
  }

  private static boolean kept(byte b) {
    return (b >= 'a' && b <= 'z') || (b >= '0' && b <= '9') || b == '_';
  }

  @Override
  String method() {
    return "sanitize";
  }

  @Override
  String argumentType() {
    return UTF8String.class.getName();
  }

  @Override
  String resultType() {
    return UTF8String.class.getName();
  }

  @Override
  String nullValue() {
    return "null";
  }

  @Override
  Object call(Object value) {
    return sanitize((UTF8String) value);
  }

  @Override
  UnaryCall withChild(Expression child) {
    return new TableNameText(child);
  }

  @Override
  public DataType dataType() {
    return DataTypes.StringType;
  }

  @Override
  public boolean nullable() {
    return child.nullable();
  }

  @Override
  public String prettyName() {
    return "frazil_table_name_text";
  }
}
