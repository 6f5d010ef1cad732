package dev.frazil.spark;

import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Message;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The Protobuf → Spark type mapping (docs/formats.md has it as a table), and the value
 * converters that go with it.
 *
 * <ul>
 *   <li>int32, sint32, sfixed32 → int; int64, sint64, sfixed64 → bigint; uint32, fixed32 →
 *       bigint; uint64, fixed64 → decimal(20,0); float, double, bool, string; bytes → binary;
 *   <li>enum → string (the value's name; a number the schema does not know → the number);
 *   <li>message → struct; repeated → array; map&lt;K,V&gt; → map&lt;string,V&gt; (keys as text);
 *   <li>google.protobuf.Timestamp → timestamp; Duration → bigint microseconds (Iceberg has no
 *       interval type); wrappers (Int32Value, StringValue, …) → the nullable scalar;
 *       Struct, Value, ListValue → string (JSON); Any → struct&lt;type_url, value&gt;;
 *   <li>a message nested deeper than {@link #MAX_DEPTH} (recursive types) → binary (the
 *       serialized sub-message).
 * </ul>
 */
public final class ProtobufTypes {
  /** Message nesting kept as structs; deeper (recursive) messages stay serialized bytes. */
  public static final int MAX_DEPTH = 10;

  private static final DecimalType UINT64 = DataTypes.createDecimalType(20, 0);

  private ProtobufTypes() {}

  static StructType struct(Descriptor message, int depth) {
    List<StructField> fields = new ArrayList<>();
    for (FieldDescriptor field : message.getFields()) {
      fields.add(DataTypes.createStructField(field.getName(), type(field, depth), true));
    }
    return DataTypes.createStructType(fields);
  }

  static DataType type(FieldDescriptor field, int depth) {
    if (field.isMapField()) {
      Descriptor entry = field.getMessageType();
      return DataTypes.createMapType(
          DataTypes.StringType, single(entry.findFieldByName("value"), depth + 1), true);
    }
    DataType element = single(field, depth);
    return field.isRepeated() ? DataTypes.createArrayType(element, true) : element;
  }

  private static DataType single(FieldDescriptor field, int depth) {
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
        return message(field.getMessageType(), depth + 1);
    }
  }

  private static DataType message(Descriptor message, int depth) {
    String name = message.getFullName();
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
        break;
    }
    if (isWrapper(name)) {
      return single(message.findFieldByName("value"), depth);
    }
    if (depth > MAX_DEPTH) {
      return DataTypes.BinaryType;
    }
    return struct(message, depth);
  }

  private static boolean isWrapper(String name) {
    return name.startsWith("google.protobuf.") && name.endsWith("Value")
        && !name.equals("google.protobuf.Value");
  }

  /** A converter of {@code field}'s values into the reader's {@code target} type. */
  static ProtobufDecoder.ValueConverter converter(FieldDescriptor field, DataType target, int depth) {
    if (field.isMapField()) {
      if (!(target instanceof MapType)) {
        return v -> null;
      }
      Descriptor entry = field.getMessageType();
      FieldDescriptor keyField = entry.findFieldByName("key");
      FieldDescriptor valueField = entry.findFieldByName("value");
      ProtobufDecoder.ValueConverter values =
          singleConverter(valueField, ((MapType) target).valueType(), depth + 1);
      return v -> ProtobufDecoder.map(v, keyField, valueField, values);
    }
    if (field.isRepeated()) {
      if (!(target instanceof ArrayType)) {
        return v -> null;
      }
      ProtobufDecoder.ValueConverter element =
          singleConverter(field, ((ArrayType) target).elementType(), depth);
      return v -> ProtobufDecoder.list(v, element);
    }
    return singleConverter(field, target, depth);
  }

  private static ProtobufDecoder.ValueConverter singleConverter(
      FieldDescriptor field, DataType target, int depth) {
    DataType natural = single(field, depth);
    ProtobufDecoder.ValueConverter base = naturalConverter(field, target, depth);
    if (natural.sameType(target) || natural instanceof StructType) {
      return base;
    }
    // The reader's type differs (another schema version): widen numbers, else null.
    if (target.sameType(DataTypes.LongType) && natural.sameType(DataTypes.IntegerType)) {
      return v -> v == null ? null : ((Integer) base.convert(v)).longValue();
    }
    if (target.sameType(DataTypes.DoubleType) && natural.sameType(DataTypes.FloatType)) {
      return v -> v == null ? null : ((Float) base.convert(v)).doubleValue();
    }
    if (target.sameType(DataTypes.StringType)) {
      return v -> {
        Object out = base.convert(v);
        return out == null ? null : out.toString();
      };
    }
    return v -> null;
  }

  private static ProtobufDecoder.ValueConverter naturalConverter(
      FieldDescriptor field, DataType target, int depth) {
    switch (field.getType()) {
      case UINT32:
      case FIXED32:
        return v -> Integer.toUnsignedLong((Integer) v);
      case UINT64:
      case FIXED64:
        return ProtobufDecoder::unsigned64;
      case BYTES:
        return ProtobufDecoder::bytes;
      case ENUM:
        return ProtobufDecoder::enumName;
      case MESSAGE:
      case GROUP:
        return messageConverter(field.getMessageType(), target, depth + 1);
      default:
        return v -> v;
    }
  }

  private static ProtobufDecoder.ValueConverter messageConverter(
      Descriptor message, DataType target, int depth) {
    String name = message.getFullName();
    switch (name) {
      case "google.protobuf.Timestamp":
        return v -> ProtobufDecoder.timestamp((Message) v);
      case "google.protobuf.Duration":
        return v -> ProtobufDecoder.durationMicros((Message) v);
      case "google.protobuf.Struct":
      case "google.protobuf.Value":
      case "google.protobuf.ListValue":
        return v -> json((Message) v);
      default:
        break;
    }
    if (isWrapper(name)) {
      FieldDescriptor value = message.findFieldByName("value");
      ProtobufDecoder.ValueConverter inner = naturalConverter(value, target, depth);
      return v -> inner.convert(((Message) v).getField(value));
    }
    if (!(target instanceof StructType)) {
      return v -> ((Message) v).toByteArray();
    }
    ProtobufDecoder.RowConverter rows =
        new ProtobufDecoder.RowConverter(message, (StructType) target, depth);
    return v -> rows.convert((Message) v);
  }

  static String keyString(FieldDescriptor keyField, Object key) {
    switch (keyField.getType()) {
      case UINT32:
      case FIXED32:
        return Long.toString(Integer.toUnsignedLong((Integer) key));
      case UINT64:
      case FIXED64:
        return Long.toUnsignedString((Long) key);
      default:
        return String.valueOf(key);
    }
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
          out.append(n == Math.rint(n) && Math.abs(n) < 1e15 ? Long.toString((long) n) : Double.toString(n));
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
