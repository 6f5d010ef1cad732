package dev.frazil.spark;

import static dev.frazil.spark.JsonDecoder.FACTORY;
import static dev.frazil.spark.JsonDecoder.jsonType;

import com.fasterxml.jackson.core.Base64Variants;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.exc.InputCoercionException;
import com.fasterxml.jackson.core.io.SerializedString;
import dev.frazil.spark.JsonDecoder.Context;
import dev.frazil.spark.JsonDecoder.Mismatch;
import dev.frazil.spark.JsonTimes.DateConv;
import dev.frazil.spark.JsonTimes.TimestampConv;
import dev.frazil.spark.JsonTimes.TimestampNtzConv;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.time.LocalDateTime;
import java.time.ZoneId;
import java.time.zone.ZoneRules;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.ArrayBasedMapData;
import org.apache.spark.sql.catalyst.util.DateTimeUtils;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.catalyst.util.TimestampFormatter;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The converters of {@link JsonDecoder}: one per field of the decoded schema, built once per
 * JVM and task into a {@link Plan}, each turning the parser's current token into Spark's
 * internal value (or a {@link Mismatch}). Timestamps and dates are in {@link JsonTimes}.
 */
final class JsonConverters {
  private JsonConverters() {}

  /** The converters of one schema and the time settings, built once per JVM and task. */
  static final class Plan {
    final StructConv root;
    final ZoneId zone;
    final ZoneRules rules;
    final boolean fixedZone;
    final TimestampFormatter formatter;
    /** The parsers' factory, the plan's own: a plan serves one task at a time. */
    final JsonFactory factory = JsonDecoder.factory();

    Plan(StructType schema, String timestampFormat, String timeZone) {
      this.zone = DateTimeUtils.getZoneId(timeZone);
      this.rules = zone.getRules();
      this.fixedZone = rules.isFixedOffset();
      this.formatter =
          timestampFormat == null ? null : TimestampFormatter.apply(timestampFormat, zone, true);
      this.root = new StructConv(schema, this);
    }

    Conv conv(DataType type) {
      if (type instanceof StructType) {
        return new StructConv((StructType) type, this);
      }
      if (type instanceof ArrayType) {
        return new ArrayConv((ArrayType) type, this);
      }
      if (type instanceof MapType) {
        return new MapConv((MapType) type, this);
      }
      if (type instanceof StringType) {
        return new StringConv(type);
      }
      if (type instanceof LongType
          || type instanceof IntegerType
          || type instanceof ShortType
          || type instanceof ByteType) {
        return new IntegralConv(type);
      }
      if (type instanceof DoubleType || type instanceof FloatType) {
        return new FloatingConv(type);
      }
      if (type instanceof BooleanType) {
        return new BooleanConv(type);
      }
      if (type instanceof DecimalType) {
        return new DecimalConv((DecimalType) type);
      }
      if (type instanceof TimestampType) {
        return new TimestampConv(type, this);
      }
      if (type instanceof TimestampNTZType) {
        return new TimestampNtzConv(type);
      }
      if (type instanceof DateType) {
        return new DateConv(type);
      }
      if (type instanceof BinaryType) {
        return new BinaryConv(type);
      }
      throw new IllegalArgumentException("the frazil JSON decoder cannot read type " + type);
    }

    /** Microseconds of a local date-time in the session's zone (Spark's gap/overlap rule). */
    long localMicros(long epochDay, long secondOfDay, int micros) {
      long local = epochDay * 86400L + secondOfDay;
      int offset;
      if (fixedZone) {
        offset = rules.getOffset(java.time.Instant.EPOCH).getTotalSeconds();
      } else {
        offset =
            rules
                .getOffset(
                    LocalDateTime.ofEpochSecond(local, 0, java.time.ZoneOffset.UTC))
                .getTotalSeconds();
      }
      return (local - offset) * 1_000_000L + micros;
    }
  }

  /** Converts the value at the parser's current token. */
  abstract static class Conv {
    final DataType type;

    Conv(DataType type) {
      this.type = type;
    }

    /** The value of a token other than {@code null}. */
    abstract Object read(JsonParser p, JsonToken t, Context c) throws IOException;

    /** Whether a JSON string is a form of this type (a timestamp in text): one that does
     * not parse is quoted in the reason, not only called a string. */
    boolean parsesText() {
      return false;
    }

    Mismatch mismatch(JsonParser p, JsonToken t) {
      if (t == JsonToken.VALUE_STRING && parsesText()) {
        try {
          return new Mismatch("string", type, p.getText());
        } catch (IOException e) {
          // The text is gone: the reason names the types only.
        }
      }
      return new Mismatch(jsonType(p, t), type);
    }
  }

  static final class StructConv extends Conv {
    final Map<String, Integer> index = new HashMap<>();
    final String[] names;
    /** The names as the parser compares them with the input's bytes, unparsed. */
    final SerializedString[] quoted;
    /**
     * The field (its index) that followed field {@code k - 1} in the last record read, -1 for
     * none ({@code after[0]}: the first field). Learnt from the records; a plan serves one
     * task at a time, and a stale guess only costs a failed comparison.
     */
    final int[] after;
    final Conv[] convs;

    StructConv(StructType schema, Plan plan) {
      super(schema);
      StructField[] fields = schema.fields();
      names = new String[fields.length];
      quoted = new SerializedString[fields.length];
      after = new int[fields.length + 1];
      after[fields.length] = -1;
      convs = new Conv[fields.length];
      for (int i = 0; i < fields.length; i++) {
        names[i] = fields[i].name();
        quoted[i] = new SerializedString(fields[i].name());
        index.put(fields[i].name(), i);
        convs[i] = plan.conv(fields[i].dataType());
      }
      // First guesses: the schema's order, each name as the lookup finds it (a name the
      // schema holds twice is its last field, as in from_json).
      for (int i = 0; i < fields.length; i++) {
        after[i] = index.get(names[i]);
      }
    }

    @Override
    Object read(JsonParser p, JsonToken t, Context c) throws IOException {
      if (t != JsonToken.START_OBJECT) {
        throw mismatch(p, t);
      }
      return readObject(p, c);
    }

    InternalRow readObject(JsonParser p, Context c) throws IOException {
      Object[] values = new Object[convs.length];
      // Records of a topic mostly hold their fields in one order (seldom the schema's: an
      // inferred one is sorted by name). The field that followed the last one read in the
      // previous record is tried first, its name compared with the input's bytes as they
      // stand; any other name is parsed and looked up, and followed next time.
      int previous = 0;
      while (true) {
        int guess = after[previous];
        String name;
        int i;
        if (guess >= 0 && p.nextFieldName(quoted[guess])) {
          name = names[guess];
          i = guess;
        } else {
          if (guess >= 0) {
            name = p.currentToken() == JsonToken.FIELD_NAME ? p.currentName() : null;
          } else {
            name = p.nextFieldName();
          }
          if (name == null) {
            break;
          }
          Integer found = index.get(name);
          i = found == null ? -1 : found;
          if (i >= 0) {
            after[previous] = i;
          }
        }
        JsonToken t = p.nextToken();
        if (i < 0) {
          if (c.track) {
            c.unknownAt(p, t);
          }
          p.skipChildren();
          continue;
        }
        previous = i + 1;
        if (t == JsonToken.VALUE_NULL) {
          values[i] = null; // duplicate keys: the last one wins, as in from_json
          continue;
        }
        try {
          values[i] = convs[i].read(p, t, c);
        } catch (Mismatch m) {
          throw m.under(name);
        }
      }
      if (p.currentToken() != JsonToken.END_OBJECT) {
        throw new IOException("not an object end");
      }
      return new GenericInternalRow(values);
    }
  }

  static final class ArrayConv extends Conv {
    final Conv element;

    ArrayConv(ArrayType type, Plan plan) {
      super(type);
      element = plan.conv(type.elementType());
    }

    @Override
    Object read(JsonParser p, JsonToken t, Context c) throws IOException {
      if (t != JsonToken.START_ARRAY) {
        throw mismatch(p, t);
      }
      List<Object> out = new ArrayList<>();
      JsonToken e;
      while ((e = p.nextToken()) != JsonToken.END_ARRAY) {
        if (e == null) {
          throw new IOException("truncated array");
        }
        if (e == JsonToken.VALUE_NULL) {
          out.add(null);
          continue;
        }
        try {
          out.add(element.read(p, e, c));
        } catch (Mismatch m) {
          throw m.under("[" + out.size() + "]");
        }
      }
      return new GenericArrayData(out.toArray());
    }
  }

  static final class MapConv extends Conv {
    final Conv value;

    MapConv(MapType type, Plan plan) {
      super(type);
      if (!(type.keyType() instanceof StringType)) {
        throw new IllegalArgumentException("the frazil JSON decoder reads maps of string keys");
      }
      value = plan.conv(type.valueType());
    }

    @Override
    Object read(JsonParser p, JsonToken t, Context c) throws IOException {
      if (t != JsonToken.START_OBJECT) {
        throw mismatch(p, t);
      }
      Map<String, Object> out = new LinkedHashMap<>();
      String name;
      while ((name = p.nextFieldName()) != null) {
        JsonToken v = p.nextToken();
        if (v == JsonToken.VALUE_NULL) {
          out.put(name, null);
          continue;
        }
        try {
          out.put(name, value.read(p, v, c));
        } catch (Mismatch m) {
          throw m.under("['" + name + "']");
        }
      }
      // A key met twice keeps its last value (LinkedHashMap), as a struct field does.
      Object[] keys = new Object[out.size()];
      Object[] values = new Object[out.size()];
      int i = 0;
      for (Map.Entry<String, Object> entry : out.entrySet()) {
        keys[i] = UTF8String.fromString(entry.getKey());
        values[i++] = entry.getValue();
      }
      return new ArrayBasedMapData(new GenericArrayData(keys), new GenericArrayData(values));
    }
  }

  static final class StringConv extends Conv {
    StringConv(DataType type) {
      super(type);
    }

    @Override
    Object read(JsonParser p, JsonToken t, Context c) throws IOException {
      if (t == JsonToken.VALUE_STRING) {
        return utf8(p);
      }
      if (t == JsonToken.VALUE_NUMBER_INT || t == JsonToken.VALUE_NUMBER_FLOAT) {
        // The number as the producer wrote it: Jackson's copy goes through a double, which
        // turned 1e400 into "Infinity" and 1.0E+2 into "100.0".
        return UTF8String.fromString(p.getText());
      }
      // from_json keeps any other value as its JSON text, written by Jackson's generator.
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      try (JsonGenerator generator = FACTORY.createGenerator(out)) {
        copyExact(p, generator);
      }
      return UTF8String.fromBytes(out.toByteArray());
    }
  }

  /**
   * {@link JsonGenerator#copyCurrentStructure} with every number written as its text in the
   * input, not as the double Jackson would read it into.
   */
  static void copyExact(JsonParser p, JsonGenerator g) throws IOException {
    int depth = 0;
    JsonToken t = p.currentToken();
    while (true) {
      if (t == JsonToken.VALUE_NUMBER_INT || t == JsonToken.VALUE_NUMBER_FLOAT) {
        g.writeNumber(p.getText());
      } else {
        g.copyCurrentEvent(p);
      }
      if (t == JsonToken.START_OBJECT || t == JsonToken.START_ARRAY) {
        depth++;
      } else if (t == JsonToken.END_OBJECT || t == JsonToken.END_ARRAY) {
        depth--;
      }
      if (depth == 0) {
        return;
      }
      t = p.nextToken();
    }
  }

  /**
   * The string at the parser's current token, from the parser's own characters: ASCII is
   * written to bytes as it is read, without the {@code String} that {@code getText()} builds
   * and {@code UTF8String.fromString} encodes again (the two were ~4% of a steady run's
   * samples); other text goes through a {@code String}, as before.
   */
  static UTF8String utf8(JsonParser p) throws IOException {
    char[] chars = p.getTextCharacters();
    int offset = p.getTextOffset();
    int length = p.getTextLength();
    byte[] bytes = new byte[length];
    for (int k = 0; k < length; k++) {
      char ch = chars[offset + k];
      if (ch >= 0x80) {
        return UTF8String.fromString(unicode(new String(chars, offset, length)));
      }
      bytes[k] = (byte) ch;
    }
    return UTF8String.fromBytes(bytes);
  }

  /**
   * The text itself, when every surrogate in it is half of a pair. Jackson reads an escaped
   * {@code \\ud83d} without its other half into a string, and UTF-8 has no bytes for one: Java
   * writes '?' in its place, which would store a character the producer never sent.
   *
   * @throws JsonDecoder.Mismatch at the first lone surrogate
   */
  static String unicode(String text) {
    for (int k = 0, n = text.length(); k < n; k++) {
      char ch = text.charAt(k);
      if (Character.isHighSurrogate(ch)
          && k + 1 < n
          && Character.isLowSurrogate(text.charAt(k + 1))) {
        k++; // a pair: one character
      } else if (Character.isSurrogate(ch)) {
        throw JsonDecoder.Mismatch.loneSurrogate(ch);
      }
    }
    return text;
  }

  static final class IntegralConv extends Conv {
    IntegralConv(DataType type) {
      super(type);
    }

    @Override
    Object read(JsonParser p, JsonToken t, Context c) throws IOException {
      if (t != JsonToken.VALUE_NUMBER_INT) {
        throw mismatch(p, t);
      }
      try {
        if (type instanceof LongType) {
          return p.getLongValue();
        }
        if (type instanceof IntegerType) {
          return p.getIntValue();
        }
        if (type instanceof ShortType) {
          return p.getShortValue();
        }
        return p.getByteValue();
      } catch (InputCoercionException e) {
        throw mismatch(p, t);
      }
    }
  }

  static final class FloatingConv extends Conv {
    final boolean isDouble;

    FloatingConv(DataType type) {
      super(type);
      isDouble = type instanceof DoubleType;
    }

    @Override
    Object read(JsonParser p, JsonToken t, Context c) throws IOException {
      if (t == JsonToken.VALUE_NUMBER_INT || t == JsonToken.VALUE_NUMBER_FLOAT) {
        // A finite number beyond the type's range would read as infinity: not what was sent.
        if (isDouble) {
          double d = p.getDoubleValue();
          if (Double.isInfinite(d) && !p.isNaN()) { // isNaN: a written Infinity
            throw Mismatch.outOfRange(p.getText(), type);
          }
          return d;
        }
        float f = p.getFloatValue();
        if (Float.isInfinite(f) && !p.isNaN()) {
          throw Mismatch.outOfRange(p.getText(), type);
        }
        return f;
      }
      if (t == JsonToken.VALUE_STRING && p.getTextLength() >= 1) {
        double special;
        switch (p.getText()) {
          case "NaN":
            special = Double.NaN;
            break;
          case "+INF":
          case "+Infinity":
          case "Infinity":
            special = Double.POSITIVE_INFINITY;
            break;
          case "-INF":
          case "-Infinity":
            special = Double.NEGATIVE_INFINITY;
            break;
          default:
            throw mismatch(p, t);
        }
        return isDouble ? (Object) special : (Object) (float) special;
      }
      throw mismatch(p, t);
    }
  }

  static final class BooleanConv extends Conv {
    BooleanConv(DataType type) {
      super(type);
    }

    @Override
    Object read(JsonParser p, JsonToken t, Context c) {
      if (t == JsonToken.VALUE_TRUE) {
        return Boolean.TRUE;
      }
      if (t == JsonToken.VALUE_FALSE) {
        return Boolean.FALSE;
      }
      throw mismatch(p, t);
    }
  }

  static final class DecimalConv extends Conv {
    final int precision;
    final int scale;

    DecimalConv(DecimalType type) {
      super(type);
      precision = type.precision();
      scale = type.scale();
    }

    @Override
    boolean parsesText() {
      return true;
    }

    @Override
    Object read(JsonParser p, JsonToken t, Context c) throws IOException {
      BigDecimal value;
      try {
        if (t == JsonToken.VALUE_NUMBER_INT || t == JsonToken.VALUE_NUMBER_FLOAT) {
          value = p.getDecimalValue();
        } else if (t == JsonToken.VALUE_STRING && p.getTextLength() >= 1) {
          // Spark's decimal parser for the US locale drops grouping commas.
          value = new BigDecimal(p.getText().replace(",", ""));
        } else {
          throw mismatch(p, t);
        }
      } catch (NumberFormatException | ArithmeticException | InputCoercionException e) {
        throw mismatch(p, t);
      }
      BigDecimal scaled = value.setScale(scale, RoundingMode.HALF_UP);
      if (scaled.precision() > precision) {
        throw mismatch(p, t);
      }
      return Decimal.apply(scaled, precision, scale);
    }
  }

  static final class BinaryConv extends Conv {
    BinaryConv(DataType type) {
      super(type);
    }

    @Override
    boolean parsesText() {
      return true;
    }

    @Override
    Object read(JsonParser p, JsonToken t, Context c) throws IOException {
      if (t != JsonToken.VALUE_STRING) {
        throw mismatch(p, t);
      }
      try {
        return Base64Variants.getDefaultVariant().decode(p.getText());
      } catch (IllegalArgumentException e) {
        throw mismatch(p, t);
      }
    }
  }
}
