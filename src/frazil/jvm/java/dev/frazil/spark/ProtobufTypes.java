package dev.frazil.spark;

import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Message;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The Protobuf → Spark type mapping (docs/formats.md has it too): the reader shape a message
 * decodes into, and what {@link MessageReader} puts in the row for each type.
 *
 * <table>
 *   <caption>Protobuf → Spark</caption>
 *   <tr><th>Protobuf</th><th>Spark type</th><th>Java object in the row</th></tr>
 *   <tr><td>int32, sint32, sfixed32</td><td>int</td><td>Integer</td></tr>
 *   <tr><td>int64, sint64, sfixed64</td><td>bigint</td><td>Long</td></tr>
 *   <tr><td>uint32, fixed32</td><td>bigint (unsigned)</td><td>Long</td></tr>
 *   <tr><td>uint64, fixed64</td><td>decimal(20,0) (unsigned)</td><td>BigDecimal</td></tr>
 *   <tr><td>float / double</td><td>float / double</td><td>Float / Double</td></tr>
 *   <tr><td>bool</td><td>boolean</td><td>Boolean</td></tr>
 *   <tr><td>string</td><td>string</td><td>String</td></tr>
 *   <tr><td>bytes</td><td>binary</td><td>byte[]</td></tr>
 *   <tr><td>enum</td><td>string: the value's name; an open enum's unknown number as text (a
 *       closed proto2 enum drops it, as protobuf-java)</td><td>String</td></tr>
 *   <tr><td>message (and proto2 group)</td><td>struct</td><td>Row</td></tr>
 *   <tr><td>repeated T</td><td>array&lt;T&gt;; unset: empty</td><td>java.util.List</td></tr>
 *   <tr><td>map&lt;K, V&gt;</td><td>map&lt;string, V&gt;: integer and bool keys as text;
 *       unset: empty</td><td>java.util.Map</td></tr>
 *   <tr><td>oneof members, proto3 optional, proto2 singular fields</td><td>nullable: null
 *       when unset</td><td>(the member's type)</td></tr>
 *   <tr><td>other proto3 scalars when unset</td><td>their default (0, "", false, empty bytes,
 *       the enum's first value), as protobuf itself reads them</td><td>(the type's)</td></tr>
 *   <tr><td>message fields when unset</td><td>null</td><td>null</td></tr>
 *   <tr><td>google.protobuf.Timestamp</td><td>timestamp</td><td>java.time.Instant</td></tr>
 *   <tr><td>google.protobuf.Duration</td><td>bigint, microseconds (Iceberg has no interval
 *       type)</td><td>Long</td></tr>
 *   <tr><td>wrappers (Int32Value, Int64Value, UInt32Value, UInt64Value, FloatValue,
 *       DoubleValue, BoolValue, StringValue, BytesValue)</td><td>the wrapped scalar's type,
 *       null when unset</td><td>(the scalar's)</td></tr>
 *   <tr><td>google.protobuf.Struct, Value, ListValue</td><td>string (JSON text)</td>
 *       <td>String</td></tr>
 *   <tr><td>google.protobuf.Any</td><td>struct&lt;type_url: string, value: binary&gt; (the
 *       packed message's schema is not known to the reader)</td><td>Row</td></tr>
 *   <tr><td>a message nested deeper than {@link #MAX_DEPTH} levels, or inside itself more
 *       often than a recursive type's budget allows (see {@link #struct})</td>
 *       <td>binary: the serialized sub-message (a proto2 group that deep: null)</td>
 *       <td>byte[]</td></tr>
 * </table>
 *
 * <p>A field of a message type with no fields ({@code google.protobuf.Empty}), alone, repeated
 * or as a map's value, has no column: Parquet cannot store a group without fields.
 *
 * <p>When the reader shape (another schema version) has another type than the writer's field:
 * int widens to bigint, float to double, a number or boolean becomes its text for a string,
 * bytes their UTF-8 text; any other difference marks the record.
 */
public final class ProtobufTypes {
  /** Message nesting kept as structs; deeper (recursive) messages stay serialized bytes. */
  public static final int MAX_DEPTH = 10;

  /**
   * The fields (at every depth) a record's shape may have for recursive types to nest as far
   * as {@link #MAX_DEPTH}. A message that refers to itself through two fields doubles its
   * columns with each level (a tree's {@code left} and {@code right}): ten levels are
   * thousands of columns, and Spark took minutes to plan a batch of them. Such types nest
   * fewer levels, as many as keep the shape within this many fields.
   */
  static final int FIELD_BUDGET = 1000;

  private static final DecimalType UINT64 = DataTypes.createDecimalType(20, 0);

  private ProtobufTypes() {}

  /**
   * The struct a message reads into. A message nested inside itself (a recursive type, at any
   * remove) nests as structs as often as the shape stays within {@link #FIELD_BUDGET} fields,
   * at most down to {@link #MAX_DEPTH}; at the next level it is its serialized bytes (where
   * it first meets itself, at the least).
   *
   * @param depth the message's nesting below the record's message (0 for the record's)
   */
  static StructType struct(Descriptor message, int depth) {
    for (int recursions = MAX_DEPTH; ; recursions--) {
      Shape shape = new Shape(recursions, recursions > 0 ? FIELD_BUDGET : Integer.MAX_VALUE);
      try {
        return shape.struct(message, depth);
      } catch (OverBudget e) {
        // fewer levels of the recursive types
      }
    }
  }

  static DataType type(FieldDescriptor field, int depth) {
    return new Shape(MAX_DEPTH, Integer.MAX_VALUE).type(field, depth);
  }

  /** Raised when a shape grows past its budget of fields. */
  private static final class OverBudget extends RuntimeException {
    OverBudget() {
      super(null, null, false, false);
    }
  }

  /** One try at a message's shape: how often a type may nest in itself, fields allowed. */
  private static final class Shape {
    private final int recursions;
    private final int budget;
    private int fields;
    /** The messages on the path from the record's message, with how often each is on it. */
    private final Map<Descriptor, Integer> path = new HashMap<>();

    Shape(int recursions, int budget) {
      this.recursions = recursions;
      this.budget = budget;
    }

    StructType struct(Descriptor message, int depth) {
      path.merge(message, 1, Integer::sum);
      try {
        List<StructField> out = new ArrayList<>();
        for (FieldDescriptor field : message.getFields()) {
          DataType type = type(field, depth);
          if (!holdsNothing(type)) {
            if (++fields > budget) {
              throw new OverBudget();
            }
            out.add(DataTypes.createStructField(field.getName(), type, true));
          }
        }
        return DataTypes.createStructType(out);
      } finally {
        path.merge(message, -1, Integer::sum);
      }
    }

    DataType type(FieldDescriptor field, int depth) {
      if (field.isMapField()) {
        Descriptor entry = field.getMessageType();
        return DataTypes.createMapType(
            DataTypes.StringType, single(entry.findFieldByName("value"), depth + 1), true);
      }
      DataType element = single(field, depth);
      return field.isRepeated() ? DataTypes.createArrayType(element, true) : element;
    }

    private DataType single(FieldDescriptor field, int depth) {
      DataType scalar = scalar(field);
      return scalar != null ? scalar : message(field.getMessageType(), depth + 1);
    }

    private DataType message(Descriptor message, int depth) {
      DataType known = wellKnown(message.getFullName());
      if (known != null) {
        return known;
      }
      if (isWrapper(message.getFullName())) {
        return single(message.findFieldByName("value"), depth);
      }
      if (depth > MAX_DEPTH || path.getOrDefault(message, 0) > recursions) {
        return DataTypes.BinaryType;
      }
      return struct(message, depth);
    }
  }

  /**
   * Whether a field of this type has no column: a message with no fields (such as {@code
   * google.protobuf.Empty}, or one holding only such messages), alone, repeated or as a map's
   * value. Parquet cannot write a group without fields ("Cannot write a schema with an empty
   * group"), so a table given such a column could take no record; the field is read as one the
   * reader does not know (skipped).
   */
  static boolean holdsNothing(DataType type) {
    if (type instanceof StructType) {
      return ((StructType) type).fields().length == 0;
    }
    if (type instanceof org.apache.spark.sql.types.ArrayType) {
      return holdsNothing(((org.apache.spark.sql.types.ArrayType) type).elementType());
    }
    if (type instanceof org.apache.spark.sql.types.MapType) {
      return holdsNothing(((org.apache.spark.sql.types.MapType) type).valueType());
    }
    return false;
  }

  /** A scalar field's type; null for a message (or group) field. */
  private static DataType scalar(FieldDescriptor field) {
    switch (field.getType()) {
      case INT32:
      case SINT32:
      case SFIXED32:
        return DataTypes.IntegerType;
      case INT64:
      case SINT64:
      case SFIXED64:
      case UINT32:
      case FIXED32:
        return DataTypes.LongType;
      case UINT64:
      case FIXED64:
        return UINT64;
      case FLOAT:
        return DataTypes.FloatType;
      case DOUBLE:
        return DataTypes.DoubleType;
      case BOOL:
        return DataTypes.BooleanType;
      case STRING:
      case ENUM:
        return DataTypes.StringType;
      case BYTES:
        return DataTypes.BinaryType;
      default:
        return null;
    }
  }

  /** The type of a well-known message read as a value of its own; null for others. */
  private static DataType wellKnown(String name) {
    switch (name) {
      case "google.protobuf.Timestamp":
        return DataTypes.TimestampType;
      case "google.protobuf.Duration":
        return DataTypes.LongType;
      case "google.protobuf.Struct":
      case "google.protobuf.Value":
      case "google.protobuf.ListValue":
        return DataTypes.StringType;
      default:
        return null;
    }
  }

  static boolean isWrapper(String name) {
    return name.startsWith("google.protobuf.") && name.endsWith("Value")
        && !name.equals("google.protobuf.Value");
  }

  /** google.protobuf.Struct / Value / ListValue as JSON text. */
  static String json(Message message) {
    StringBuilder out = new StringBuilder();
    writeJson(message, out);
    return out.toString();
  }

  private static void writeJson(Message message, StringBuilder out) {
    Descriptor d = message.getDescriptorForType();
    switch (d.getFullName()) {
      case "google.protobuf.Struct":
        {
          FieldDescriptor fields = d.findFieldByName("fields");
          out.append('{');
          boolean first = true;
          for (Object entry : (List<?>) message.getField(fields)) {
            Message e = (Message) entry;
            Descriptor ed = e.getDescriptorForType();
            if (!first) {
              out.append(',');
            }
            first = false;
            quote((String) e.getField(ed.findFieldByName("key")), out);
            out.append(':');
            writeJson((Message) e.getField(ed.findFieldByName("value")), out);
          }
          out.append('}');
          return;
        }
      case "google.protobuf.ListValue":
        {
          out.append('[');
          boolean first = true;
          for (Object item : (List<?>) message.getField(d.findFieldByName("values"))) {
            if (!first) {
              out.append(',');
            }
            first = false;
            writeJson((Message) item, out);
          }
          out.append(']');
          return;
        }
      default:
        break;
    }
    // google.protobuf.Value: one of its kinds is set.
    for (Map.Entry<FieldDescriptor, Object> kind : message.getAllFields().entrySet()) {
      Object v = kind.getValue();
      switch (kind.getKey().getName()) {
        case "null_value":
          out.append("null");
          return;
        case "number_value":
          double n = (Double) v;
          if (Double.isNaN(n) || Double.isInfinite(n)) {
            quote(Double.toString(n), out); // not JSON numbers: text, as proto3's JSON mapping
          } else if (n == Math.rint(n) && Math.abs(n) < 1e15) {
            out.append((long) n);
          } else {
            out.append(n);
          }
          return;
        case "string_value":
          quote((String) v, out);
          return;
        case "bool_value":
          out.append(v);
          return;
        default:
          writeJson((Message) v, out);
          return;
      }
    }
    out.append("null");
  }

  private static void quote(String s, StringBuilder out) {
    out.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"':
          out.append("\\\"");
          break;
        case '\\':
          out.append("\\\\");
          break;
        case '\n':
          out.append("\\n");
          break;
        case '\r':
          out.append("\\r");
          break;
        case '\t':
          out.append("\\t");
          break;
        default:
          if (c < 0x20) {
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
      }
    }
    out.append('"');
  }
}
