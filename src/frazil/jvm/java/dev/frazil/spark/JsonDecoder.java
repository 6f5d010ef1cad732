package dev.frazil.spark;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonStreamContext;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.core.util.BufferRecycler;
import com.fasterxml.jackson.core.util.RecyclerPool;
import dev.frazil.spark.JsonConverters.Plan;
import java.io.IOException;
import java.io.Serializable;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.Objects;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.util.DateTimeUtils;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;


/**
 * Decodes JSON objects into Spark rows, in the JVM: a Catalyst expression over a Kafka value's
 * bytes that returns {@code struct<data: <schema>, error: string>} as Spark's internal row
 * (UTF8String, microseconds, Decimal, GenericArrayData…), so no external {@code Row} is built
 * and converted per record as a UDF's would be (measured: about a quarter of the decoder's
 * time per record on the payments).
 *
 * <p>One pass over the bytes with Jackson's byte-based streaming parser (no {@code Reader}, no
 * char buffer of our own, no copy of the value): one {@link JsonFactory} per decoder (per
 * task), whose buffer pool keeps one buffer set rather than Jackson's default {@code
 * ThreadLocal} of soft references. Values convert as Spark's {@code from_json} converts them (its {@code JacksonParser}, read
 * for Spark 4.1): the same tokens accepted per type, integral overflow refused, a non-string
 * token in a string field kept as its JSON text, {@code "NaN"}/{@code "Infinity"} strings for
 * floating types, timestamps as ISO-8601 text or epoch seconds, dates as text, binary as
 * base64, decimals rounded half-up and refused when they overflow. Timestamps in the common
 * ISO-8601 forms ({@code yyyy-MM-dd[T ]HH:mm[:ss[.ffffff]][Z|+hh:mm|+hhmm]}) are parsed by
 * arithmetic here, without regex or a zone lookup per value (the session's zone rules are
 * resolved once); every other form goes to Spark's own parser ({@code DateTimeUtils}), so the
 * accepted forms stay Spark's. With a {@code timestampFormat}, Spark's formatter parses them,
 * as in {@code from_json}.
 *
 * <p>A value in the Schema Registry wire format (magic byte 0 and a 4-byte schema id) is read
 * after its header. A record that does not decode gives a null {@code data} and a reason,
 * never an exception: {@code "empty value"}; {@code "not a JSON object (...)"} for malformed
 * JSON (truncated, invalid UTF-8, nesting or number length past Jackson's limits, trailing
 * data, a byte-order mark before the object) and for an array, string, number or {@code
 * null} at the top level; {@code "field
 * 'who.age' has a value of type string, the schema's type is bigint"} for a value that does
 * not convert, at any depth (array elements as {@code tags[2]}, map values as {@code
 * m['k']}). With {@code unknownFields} set, a record holding a field the schema lacks (at any
 * depth) is marked with that reason, its data kept.
 */
public final class JsonDecoder extends Expression implements Serializable {
  private static final long serialVersionUID = 1L;

  /** Reason of a document that is not a JSON object (the Spark path's wording). */
  public static final String NOT_OBJECT =
      "not a JSON object (malformed JSON, an array, a string, a number or null)";

  public static final String EMPTY = "empty value";

  /**
   * Reason of a value that starts with a UTF-8 byte-order mark. Spark's {@code from_json}
   * marks it (its parser reads the mark as a character before the object), so frazil's marks
   * it too rather than let Jackson's byte parser skip it: one decoder or the other must not
   * decide what a table holds. The reason names the mark, where Spark's says only
   * {@link #NOT_OBJECT}.
   */
  public static final String BYTE_ORDER_MARK =
      "not a JSON object (it starts with a byte-order mark, U+FEFF)";

  /**
   * The JVM's shared factory (the generator that writes a non-string value of a string field
   * as its JSON text); parsers come from each decoder's own {@link #factory()}.
   */
  static final JsonFactory FACTORY = factory();

  /**
   * A factory with the features Spark's {@code JSONOptions} turns on by default (single
   * quotes, NaN/Infinity tokens) and Jackson's default read limits (nesting depth 1000, number
   * length 1000). Its buffer pool is its own ({@link TaskBuffers}): each parser takes and
   * returns one buffer set, so a record allocates no buffers. A decoder (one per task) has a
   * factory of its own: with one pool and one field-name table per JVM, the task threads took
   * turns at the same memory for every record (Jackson's shared lock-free pool was 3% of a
   * steady run's samples, and allocated a node each time a parser gave its buffers back).
   */
  static JsonFactory factory() {
    return JsonFactory.builder()
        .enable(JsonReadFeature.ALLOW_SINGLE_QUOTES)
        .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
        .streamReadConstraints(StreamReadConstraints.defaults())
        .recyclerPool(new TaskBuffers())
        .disable(JsonFactory.Feature.INTERN_FIELD_NAMES)
        .build();
  }

  /**
   * The buffer sets of one factory's parsers: one kept for the next parser, taken and given
   * back without allocating. A decoder's parsers run one at a time (one task), so there is
   * seldom a second; the lock is uncontended but keeps a shared factory safe.
   */
  static final class TaskBuffers implements RecyclerPool<BufferRecycler> {
    private static final long serialVersionUID = 1L;
    private transient BufferRecycler idle;

    @Override
    public synchronized BufferRecycler acquirePooled() {
      BufferRecycler taken = idle;
      if (taken == null) {
        return new BufferRecycler();
      }
      idle = null;
      return taken;
    }

    @Override
    public synchronized void releasePooled(BufferRecycler recycler) {
      idle = recycler;
    }
  }

  private final Expression child;
  private final String schemaJson;
  private final String timestampFormat;
  private final String timeZone;
  private final String unknownFields;
  private final StructType resultType;

  private transient volatile Plan plan;
  private transient UTF8String unknownReason;

  /**
   * The decoder over a column of values (binary), as a column of {@code struct<data, error>}.
   *
   * @see #JsonDecoder(Expression, String, String, String, String)
   */
  public static Column column(
      Column values,
      String schemaJson,
      String timestampFormat,
      String timeZone,
      String unknownFields) {
    return ExpressionUtils.column(
        new JsonDecoder(
            ExpressionUtils.expression(values),
            schemaJson,
            timestampFormat,
            timeZone,
            unknownFields));
  }

  /**
   * @param schemaJson the decoded shape, as Spark's JSON form of a {@code StructType}
   * @param timestampFormat the pattern of timestamp text (Spark's {@code timestampFormat}), or
   *     null for ISO-8601 and Spark's fallback forms
   * @param timeZone the session's time zone, for timestamps written without an offset
   * @param unknownFields null to ignore fields the schema lacks; else the reason that marks a
   *     record holding one
   */
  public JsonDecoder(
      Expression child,
      String schemaJson,
      String timestampFormat,
      String timeZone,
      String unknownFields) {
    this.child = child;
    this.schemaJson = schemaJson;
    this.timestampFormat = timestampFormat;
    this.timeZone = timeZone;
    this.unknownFields = unknownFields;
    this.resultType =
        new StructType()
            .add("data", DataType.fromJson(schemaJson), true)
            .add("error", org.apache.spark.sql.types.DataTypes.StringType, true);
  }

  /**
   * Generated code that calls {@link #decodeValue} on the child's bytes. Not {@code
   * CodegenFallback}: Spark keeps a projection holding such an expression out of whole-stage
   * code generation ({@code CollapseCodegenStages}), and that projection then materialised
   * every decoded row once more between two generated stages (measured: ~5% of a steady
   * run's samples in {@code SpecificUnsafeProjection}, plus the next stage's reads).
   */
  @Override
  public ExprCode doGenCode(CodegenContext context, ExprCode ev) {
    ExprCode value = child.genCode(context);
    String decoder = context.addReferenceObj("frazilJson", this, JsonDecoder.class.getName());
    String row = InternalRow.class.getName();
    String code =
        value.code()
            + "\nboolean " + ev.isNull() + " = " + value.isNull() + ";\n"
            + row + " " + ev.value() + " = null;\n"
            + "if (!" + ev.isNull() + ") {\n  "
            + ev.value() + " = " + decoder + ".decodeValue((byte[]) " + value.value() + ");\n}";
    return ev.copy(
        Catalyst.code(code),
        ev.isNull(),
        ev.value());
  }

  @Override
  public scala.collection.immutable.Seq<Expression> children() {
    return Catalyst.children(child);
  }

  @Override
  public DataType dataType() {
    return resultType;
  }

  @Override
  public boolean nullable() {
    return true;
  }

  @Override
  public String prettyName() {
    return "frazil_json";
  }

  @Override
  public Expression withNewChildrenInternal(
      scala.collection.immutable.IndexedSeq<Expression> children) {
    return new JsonDecoder(children.apply(0), schemaJson, timestampFormat, timeZone, unknownFields);
  }

  @Override
  public int productArity() {
    return 5;
  }

  @Override
  public Object productElement(int n) {
    switch (n) {
      case 0:
        return child;
      case 1:
        return schemaJson;
      case 2:
        return timestampFormat;
      case 3:
        return timeZone;
      default:
        return unknownFields;
    }
  }

  @Override
  public boolean canEqual(Object other) {
    return other instanceof JsonDecoder;
  }

  @Override
  public boolean equals(Object other) {
    // Equal decoders of equal children are one expression: Spark evaluates it once per
    // record for both the data and the error column (subexpression elimination).
    if (!(other instanceof JsonDecoder)) {
      return false;
    }
    JsonDecoder o = (JsonDecoder) other;
    return child.equals(o.child)
        && schemaJson.equals(o.schemaJson)
        && Objects.equals(timestampFormat, o.timestampFormat)
        && Objects.equals(timeZone, o.timeZone)
        && Objects.equals(unknownFields, o.unknownFields);
  }

  @Override
  public int hashCode() {
    return Objects.hash(child, schemaJson, timestampFormat, timeZone, unknownFields);
  }

  private Plan plan() {
    Plan p = plan;
    if (p == null) {
      p = new Plan((StructType) DataType.fromJson(schemaJson), timestampFormat, timeZone);
      plan = p;
    }
    return p;
  }

  @Override
  public Object eval(InternalRow input) {
    Object value = child.eval(input);
    if (value == null) {
      return null; // a tombstone: no struct, no error
    }
    return decodeValue((byte[]) value);
  }

  /** Decodes one non-null value (the generated code's call). */
  public InternalRow decodeValue(byte[] value) {
    if (unknownFields != null && unknownReason == null) {
      unknownReason = UTF8String.fromString(unknownFields);
    }
    return decode(plan(), value, unknownReason);
  }

  /** Decodes one value into {@code struct<data, error>}; never throws. */
  static InternalRow decode(Plan plan, byte[] data, UTF8String unknownFields) {
    // A JSON document never starts with a zero byte: it is the wire format's magic byte.
    int start = data.length > 0 && data[0] == 0 ? Math.min(5, data.length) : 0;
    if (data.length - start >= 3
        && data[start] == (byte) 0xEF
        && data[start + 1] == (byte) 0xBB
        && data[start + 2] == (byte) 0xBF) {
      return failure(BYTE_ORDER_MARK);
    }
    Context context = new Context(unknownFields != null);
    try (JsonParser parser = plan.factory.createParser(data, start, data.length - start)) {
      JsonToken first = parser.nextToken();
      if (first == null) {
        return failure(EMPTY);
      }
      if (first != JsonToken.START_OBJECT) {
        return failure(NOT_OBJECT);
      }
      InternalRow row = plan.root.readObject(parser, context);
      if (parser.nextToken() != null) {
        return failure(NOT_OBJECT); // trailing data after the object
      }
      return new GenericInternalRow(
          new Object[] {row, context.unknown ? context.unknownReason(unknownFields) : null});
    } catch (Mismatch m) {
      return failure(m.message());
    } catch (IOException | RuntimeException | StackOverflowError e) {
      // Jackson's parse errors (malformed, truncated, invalid UTF-8, limits) and anything odd.
      return failure(NOT_OBJECT);
    }
  }

  private static final UTF8String NOT_OBJECT_UTF8 = UTF8String.fromString(NOT_OBJECT);
  private static final UTF8String EMPTY_UTF8 = UTF8String.fromString(EMPTY);
  private static final UTF8String BYTE_ORDER_MARK_UTF8 = UTF8String.fromString(BYTE_ORDER_MARK);

  private static InternalRow failure(String reason) {
    UTF8String text =
        reason == NOT_OBJECT
            ? NOT_OBJECT_UTF8
            : reason == EMPTY
                ? EMPTY_UTF8
                : reason == BYTE_ORDER_MARK ? BYTE_ORDER_MARK_UTF8 : UTF8String.fromString(reason);
    return new GenericInternalRow(new Object[] {null, text});
  }

  /** Per-record state: whether a field the schema lacks was met, and the first one's path. */
  static final class Context {
    final boolean track;
    boolean unknown;
    /** The first field the schema lacks ({@code info.b}, {@code items[0].y}), or null. */
    String firstUnknown;
    /** Whether another came after it. */
    boolean moreUnknown;
    /** Whether the first one's name is empty: no column can be named so (nothing to learn). */
    boolean emptyName;

    /**
     * A field the schema lacks, its value's first token {@code t} just read: its path comes
     * from the parser's own contexts, so nothing is tracked while fields are known.
     */
    void unknownAt(JsonParser p, JsonToken t) {
      unknown = true;
      if (firstUnknown != null) {
        moreUnknown = true;
        return;
      }
      JsonStreamContext at = p.getParsingContext();
      if (t == JsonToken.START_OBJECT || t == JsonToken.START_ARRAY) {
        at = at.getParent(); // the value's own context: the field is its parent's
      }
      emptyName = "".equals(at.getCurrentName());
      if (emptyName) {
        at = at.getParent(); // named by where it is: the object holding it
      }
      java.util.ArrayDeque<String> steps = new java.util.ArrayDeque<>();
      for (; at != null && !at.inRoot(); at = at.getParent()) {
        if (at.inArray()) {
          steps.push("[" + at.getCurrentIndex() + "]");
        } else if (at.getCurrentName() != null) {
          steps.push("." + at.getCurrentName());
        }
      }
      StringBuilder path = new StringBuilder();
      for (String step : steps) {
        path.append(step);
      }
      firstUnknown =
          path.length() > 0 && path.charAt(0) == '.' ? path.substring(1) : path.toString();
    }

    /** The mark of a record holding fields the schema lacks, naming the first. */
    UTF8String unknownReason(UTF8String reason) {
      if (firstUnknown == null) {
        return reason;
      }
      if (emptyName) {
        // Spark's inference leaves such fields out: learning would never add it.
        String where = firstUnknown.isEmpty() ? "at the top level" : "in " + quoted(firstUnknown);
        return UTF8String.fromString(
            "a field with an empty name (\"\") " + where + ", which no column can take: "
                + "rename it where the records are produced, or land each value whole with "
                + "variant: <column>");
      }
      return UTF8String.fromString(
          reason + ": " + quoted(firstUnknown) + (moreUnknown ? " and more" : ""));
    }

    Context(boolean track) {
      this.track = track;
    }
  }

  /** A value that does not convert to its schema type; the path grows as it unwinds. */
  static final class Mismatch extends RuntimeException {
    private static final long serialVersionUID = 1L;
    final String found;
    final String expected;
    /** The text of a string that does not parse as the type (a timestamp, a decimal), or null. */
    final String text;
    /** What is wrong with a value whatever its type (a lone surrogate), or null. */
    private final String problem;
    String path = "";

    Mismatch(String found, DataType expected) {
      this(found, expected, null);
    }

    Mismatch(String found, DataType expected, String text) {
      this(found, shortType(expected), text, null);
    }

    private Mismatch(String found, String expected, String text, String problem) {
      super(null, null, false, false);
      this.found = found;
      this.expected = expected;
      this.text = text;
      this.problem = problem;
    }

    /**
     * Text holding half of a UTF-16 surrogate pair without the other half (JSON's {@code \\ud83d}
     * escaped alone): no Unicode text holds one, and its UTF-8 would be a '?' in its place.
     */
    static Mismatch loneSurrogate(char half) {
      String escape = String.format("'\\u%04x'", (int) half);
      return new Mismatch(
          null,
          null,
          null,
          "holds a lone surrogate " + escape + " (half of a UTF-16 pair), not a character");
    }

    /** A finite number beyond what the type holds (1e39 for a float). */
    static Mismatch outOfRange(String text, DataType expected) {
      return new Mismatch(
          null, null, null, "holds the number " + quoted(text) + ", beyond the range of "
              + shortType(expected));
    }

    Mismatch under(String step) {
      path = path.isEmpty() || path.startsWith("[") ? step + path : step + "." + path;
      return this;
    }

    String message() {
      if (problem != null) {
        return "field '" + path + "' " + problem;
      }
      if (text != null) {
        return "field '" + path + "' does not parse as " + expected + ": " + quoted(text);
      }
      return "field '" + path + "' has a value of type " + found + ", the schema's type is "
          + expected;
    }
  }

  /** Longest value quoted in a reason: the record itself is in the dead letter. */
  static final int QUOTED_CHARS = 60;

  /**
   * A value as a reason quotes it: in single quotes, cut at {@link #QUOTED_CHARS} characters
   * (then …), backslash, quote and control characters escaped, so that the reason stays one
   * readable line whatever the record holds.
   */
  static String quoted(String value) {
    StringBuilder out = new StringBuilder(Math.min(value.length(), QUOTED_CHARS) + 4).append('\'');
    int end = Math.min(value.length(), QUOTED_CHARS);
    if (end < value.length() && Character.isHighSurrogate(value.charAt(end - 1))) {
      end--; // never half a character
    }
    for (int i = 0; i < end; i++) {
      char ch = value.charAt(i);
      if (ch == '\\' || ch == '\'') {
        out.append('\\').append(ch);
      } else if (ch == '\n') {
        out.append("\\n");
      } else if (ch == '\t') {
        out.append("\\t");
      } else if (ch == '\r') {
        out.append("\\r");
      } else if (ch < 0x20 || ch == 0x7f) {
        out.append(String.format("\\u%04x", (int) ch));
      } else {
        out.append(ch);
      }
    }
    out.append('\'');
    if (value.length() > QUOTED_CHARS) {
      out.append('…');
    }
    return out.toString();
  }

  /** A type for a message: {@code bigint}, {@code array<string>}, or {@code struct}. */
  static String shortType(DataType type) {
    String text = type.simpleString();
    return text.length() <= 40 ? text : text.substring(0, text.indexOf('<'));
  }

  /** The JSON type of the current token, as Spark's variant names it in the Spark path. */
  static String jsonType(JsonParser p, JsonToken t) {
    try {
      switch (t) {
        case VALUE_STRING:
          return "string";
        case VALUE_TRUE:
        case VALUE_FALSE:
          return "boolean";
        case START_OBJECT:
          return "object";
        case START_ARRAY:
          return "array";
        case VALUE_NUMBER_INT:
          {
            if (p.getNumberType() != JsonParser.NumberType.BIG_INTEGER) {
              return "bigint";
            }
            BigInteger big = p.getBigIntegerValue();
            int digits = big.abs().toString().length();
            // Spark's variant reads more digits than a decimal holds as a double; the reason
            // calls an integer an integer.
            return "decimal(" + digits + ",0)";
          }
        case VALUE_NUMBER_FLOAT:
          {
            String text = p.getText();
            if (p.isNaN() || text.indexOf('e') >= 0 || text.indexOf('E') >= 0) {
              return "double";
            }
            BigDecimal d = new BigDecimal(text);
            int scale = Math.max(d.scale(), 0);
            int precision = Math.max(d.precision(), scale);
            return precision <= 38 ? "decimal(" + precision + "," + scale + ")" : "double";
          }
        default:
          return t.asString() == null ? t.name().toLowerCase() : t.asString();
      }
    } catch (IOException | RuntimeException e) {
      return "number";
    }
  }
}
