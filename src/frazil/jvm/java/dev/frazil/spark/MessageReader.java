package dev.frazil.spark;

import com.google.protobuf.CodedInputStream;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.EnumDescriptor;
import com.google.protobuf.Descriptors.EnumValueDescriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Descriptors.OneofDescriptor;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.WireFormat;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.expressions.GenericRow;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.AtomicType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * Reads one writer message straight off the wire into a reader struct: a walk over the tags
 * with {@link CodedInputStream}, no {@code DynamicMessage} in between.
 *
 * <p>Built once per (writer message, reader struct): every writer field whose name the reader
 * has gets a {@link Field} that knows its reader slot, how to read its wire value and how to
 * convert it to the reader's type (the mapping of {@link ProtobufTypes}). Writer fields the
 * reader lacks are skipped like unknown fields; reader fields the writer lacks stay null. A
 * record costs one {@code Object[]} per message and the values themselves.
 *
 * <p>Protobuf's own parsing rules are kept: the last value of a singular field wins, a singular
 * message met twice is merged, packed and unpacked repeated values are both accepted, setting a
 * {@code oneof} member clears the others, a value with another wire type than the field's is an
 * unknown field, and a closed (proto2) enum's unknown number is dropped as protobuf-java does
 * (open enums keep it, as text).
 *
 * <p>Instances are immutable once built and shared by every thread of the JVM.
 */
final class MessageReader {
  // What a field's wire value is read as.
  private static final int INT32 = 0;
  private static final int SINT32 = 1;
  private static final int SFIXED32 = 2;
  private static final int INT64 = 3;
  private static final int SINT64 = 4;
  private static final int SFIXED64 = 5;
  private static final int UINT32 = 6;
  private static final int FIXED32 = 7;
  private static final int UINT64 = 8;
  private static final int FIXED64 = 9;
  private static final int FLOAT = 10;
  private static final int DOUBLE = 11;
  private static final int BOOL = 12;
  private static final int STRING = 13;
  private static final int BYTES = 14;
  private static final int ENUM = 15;
  private static final int MESSAGE = 16;
  private static final int GROUP = 17;
  private static final int TIMESTAMP = 18;
  private static final int DURATION = 19;
  private static final int WRAPPER = 20;
  private static final int JSON = 21;
  /** A sub-message beyond {@link ProtobufTypes#MAX_DEPTH}: its serialized bytes. */
  private static final int RAW = 22;
  /** The reader's type cannot hold the writer's value (another schema version): skipped. */
  private static final int SKIP = 23;

  /** What a closed enum's unknown number reads as: the field is left as it was. */
  private static final Object DROPPED = new Object();

  /** Field numbers up to this are looked up in an array, larger ones in a map. */
  private static final int DENSE_LIMIT = 2048;

  /** The full name of the message read (its package and enclosing messages first). */
  final String fullName;
  private final int width;
  private final Object[] defaults;
  private final Field[] dense;
  private final Map<Integer, Field> sparse;
  /** Per reader slot: the reader of a singular struct (merged until the message ends). */
  private final MessageReader[] structs;
  /** Per reader slot: what an unset repeated or map field reads as (empty, as protobuf). */
  private final Object[] empties;
  /**
   * By field number: the slots of the oneof members a member without a column clears when
   * it is read (a {@code google.protobuf.Empty} member has none); null if there is none.
   */
  private final Map<Integer, int[]> clearing;

  private MessageReader(Descriptor message, StructType target, int depth, Builder builder) {
    fullName = message.getFullName();
    StructField[] targetFields = target.fields();
    width = targetFields.length;
    defaults = new Object[width];
    structs = new MessageReader[width];
    empties = new Object[width];
    List<Field> fields = new ArrayList<>();
    Map<OneofDescriptor, List<Integer>> oneofs = new HashMap<>();
    int maxNumber = 0;
    for (int slot = 0; slot < width; slot++) {
      FieldDescriptor fd = message.findFieldByName(targetFields[slot].name());
      if (fd == null) {
        continue;
      }
      Field field = new Field(fd, slot, targetFields[slot].dataType(), depth, builder);
      fields.add(field);
      maxNumber = Math.max(maxNumber, fd.getNumber());
      OneofDescriptor oneof = fd.getRealContainingOneof();
      if (oneof != null) {
        oneofs.computeIfAbsent(oneof, o -> new ArrayList<>()).add(slot);
      }
      if (field.kind == SKIP) {
        continue; // unset: null; a value sent for it marks its record (Field.read)
      } else if (fd.isMapField()) {
        empties[slot] = Collections.emptyMap();
      } else if (fd.isRepeated()) {
        empties[slot] = Collections.emptyList();
      } else if (field.kind == MESSAGE) {
        structs[slot] = field.struct;
      } else if (!fd.hasPresence()) {
        try {
          defaults[slot] = field.convert(field.naturalDefault());
        } catch (Unreadable e) {
          // An unset field's default the reader's type cannot hold: nothing was sent, null.
        }
      }
    }
    for (Field field : fields) {
      OneofDescriptor oneof = field.descriptor.getRealContainingOneof();
      if (oneof != null) {
        field.oneofSiblings =
            oneofs.get(oneof).stream().mapToInt(Integer::intValue).filter(s -> s != field.slot)
                .toArray();
      }
    }
    Map<Integer, int[]> clears = new HashMap<>();
    for (FieldDescriptor fd : message.getFields()) {
      OneofDescriptor oneof = fd.getRealContainingOneof();
      List<Integer> members = oneof == null ? null : oneofs.get(oneof);
      if (members != null && fields.stream().noneMatch(f -> f.descriptor == fd)) {
        clears.put(fd.getNumber(), members.stream().mapToInt(Integer::intValue).toArray());
      }
    }
    clearing = clears.isEmpty() ? null : clears;
    if (maxNumber <= DENSE_LIMIT) {
      dense = new Field[maxNumber + 1];
      for (Field field : fields) {
        dense[field.descriptor.getNumber()] = field;
      }
      sparse = null;
    } else {
      dense = null;
      sparse = new HashMap<>();
      for (Field field : fields) {
        sparse.put(field.descriptor.getNumber(), field);
      }
    }
  }

  /**
   * The reader of {@code message} into {@code target}.
   *
   * @param depth the message's nesting below the record's message (0 for the record's)
   */
  static MessageReader of(Descriptor message, StructType target, int depth) {
    return new Builder().reader(message, target, depth);
  }

  /** Shares the readers of one (message, struct, depth): recursive types stay linear. */
  private static final class Builder {
    private final Map<List<Object>, MessageReader> built = new HashMap<>();

    MessageReader reader(Descriptor message, StructType target, int depth) {
      List<Object> key = Arrays.asList(message, target, depth);
      MessageReader done = built.get(key);
      if (done == null) {
        done = new MessageReader(message, target, depth, this);
        built.put(key, done);
      }
      return done;
    }
  }

  /** Reads a whole message from {@code in} (up to its end or its current limit) as a row. */
  Row read(CodedInputStream in) throws IOException {
    Object[] out = defaults.clone();
    fill(in, out);
    in.checkLastTagWas(0);
    return finish(out);
  }

  /** The message with no field set: its fields' defaults, as protobuf reads it. */
  Row empty() {
    return finish(defaults.clone());
  }

  private Row finish(Object[] out) {
    for (int i = 0; i < width; i++) {
      Object v = out[i];
      if (v == null) {
        out[i] = empties[i];
      } else if (structs[i] != null && v instanceof Object[]) {
        out[i] = structs[i].finish((Object[]) v);
      }
    }
    return new GenericRow(out);
  }

  /** Reads fields into {@code out} until the limit or an end-group tag (returned then). */
  private void fill(CodedInputStream in, Object[] out) throws IOException {
    while (true) {
      int tag = in.readTag();
      if (tag == 0 || WireFormat.getTagWireType(tag) == WireFormat.WIRETYPE_END_GROUP) {
        return;
      }
      int number = tag >>> 3;
      Field field;
      if (dense != null) {
        field = number < dense.length ? dense[number] : null;
      } else {
        field = sparse.get(number);
      }
      if (field == null) {
        in.skipField(tag);
        int[] members = clearing == null ? null : clearing.get(number);
        if (members != null) {
          for (int member : members) { // a oneof member without a column was set last
            out[member] = null;
          }
        }
      } else {
        field.read(in, tag, out);
      }
    }
  }

  /** One writer field present in the reader: where it goes and how it is read. */
  private static final class Field {
    final FieldDescriptor descriptor;
    final int slot;
    final int kind;
    final int wireType;
    final boolean repeated;
    final boolean packable;
    /** Converts the natural value to the reader's type when they differ; null if equal. */
    final Conversion conversion;
    final MessageReader struct;
    final Descriptor messageType;
    /** Enum value names by number (dense) or null for sparse enums (see enumByNumber). */
    final String[] enumNames;
    final Map<Integer, String> enumByNumber;
    final boolean closedEnum;
    /** A wrapper's value, or a map entry's key and value. */
    final Field inner;
    final Field mapValue;
    final Field mapKey;
    int[] oneofSiblings;

    Field(FieldDescriptor fd, int slot, DataType target, int depth, Builder builder) {
      this.descriptor = fd;
      this.slot = slot;
      if (fd.isMapField()) {
        Descriptor entry = fd.getMessageType();
        this.repeated = true;
        this.packable = false;
        this.wireType = WireFormat.WIRETYPE_LENGTH_DELIMITED;
        this.enumNames = null;
        this.enumByNumber = null;
        this.closedEnum = false;
        this.struct = null;
        this.messageType = entry;
        this.inner = null;
        if (target instanceof MapType) {
          this.kind = MESSAGE;
          this.mapKey = new Field(entry.findFieldByName("key"), 0, DataTypes.StringType, 0, null);
          this.mapValue =
              new Field(
                  entry.findFieldByName("value"), 1, ((MapType) target).valueType(), depth + 1,
                  builder);
        } else {
          this.kind = SKIP;
          this.mapKey = null;
          this.mapValue = null;
        }
        this.conversion = null;
        return;
      }
      this.mapKey = null;
      this.mapValue = null;
      this.repeated = fd.isRepeated();
      DataType element = target;
      boolean fits = true;
      if (repeated) {
        fits = target instanceof ArrayType;
        element = fits ? ((ArrayType) target).elementType() : target;
      } else if (target instanceof ArrayType || target instanceof MapType) {
        fits = false;
      }
      int natural = naturalKind(fd, depth);
      Descriptor type =
          fd.getJavaType() == FieldDescriptor.JavaType.MESSAGE ? fd.getMessageType() : null;
      this.messageType = type;
      if (natural == MESSAGE || natural == GROUP) {
        if (fits && element instanceof StructType) {
          this.struct =
              builder == null ? null : builder.reader(type, (StructType) element, depth + 1);
        } else {
          this.struct = null;
          if (fits && element instanceof BinaryType && natural == MESSAGE) {
            natural = RAW;
          } else {
            fits = false;
          }
        }
      } else {
        this.struct = null;
      }
      this.kind = fits ? natural : SKIP;
      this.wireType = wireTypeOf(natural);
      this.packable = repeated && wireType != WireFormat.WIRETYPE_LENGTH_DELIMITED
          && wireType != WireFormat.WIRETYPE_START_GROUP;
      if (fd.getJavaType() == FieldDescriptor.JavaType.ENUM) {
        EnumDescriptor e = fd.getEnumType();
        int max = 0;
        boolean small = true;
        for (EnumValueDescriptor v : e.getValues()) {
          if (v.getNumber() < 0 || v.getNumber() > DENSE_LIMIT) {
            small = false;
          }
          max = Math.max(max, v.getNumber());
        }
        if (small) {
          String[] names = new String[max + 1];
          for (EnumValueDescriptor v : e.getValues()) {
            if (names[v.getNumber()] == null) { // aliases: the first name, as protobuf-java
              names[v.getNumber()] = v.getName();
            }
          }
          this.enumNames = names;
          this.enumByNumber = null;
        } else {
          Map<Integer, String> byNumber = new HashMap<>();
          for (EnumValueDescriptor v : e.getValues()) {
            byNumber.putIfAbsent(v.getNumber(), v.getName());
          }
          this.enumNames = null;
          this.enumByNumber = byNumber;
        }
        this.closedEnum = fd.legacyEnumFieldTreatedAsClosed();
      } else {
        this.enumNames = null;
        this.enumByNumber = null;
        this.closedEnum = false;
      }
      if (natural == WRAPPER) {
        FieldDescriptor value = type.findFieldByName("value");
        this.inner = new Field(value, 0, ProtobufTypes.type(value, depth), depth, null);
      } else {
        this.inner = null;
      }
      this.conversion =
          kind == SKIP || kind == MESSAGE || kind == GROUP || kind == RAW
              ? null
              : Conversion.of(ProtobufTypes.type(fd, depth), target, repeated, fd.getName());
    }

    /** How a field's single value is read, following ProtobufTypes' mapping. */
    private static int naturalKind(FieldDescriptor fd, int depth) {
      switch (fd.getType()) {
        case INT32:
          return INT32;
        case SINT32:
          return SINT32;
        case SFIXED32:
          return SFIXED32;
        case INT64:
          return INT64;
        case SINT64:
          return SINT64;
        case SFIXED64:
          return SFIXED64;
        case UINT32:
          return UINT32;
        case FIXED32:
          return FIXED32;
        case UINT64:
          return UINT64;
        case FIXED64:
          return FIXED64;
        case FLOAT:
          return FLOAT;
        case DOUBLE:
          return DOUBLE;
        case BOOL:
          return BOOL;
        case STRING:
          return STRING;
        case BYTES:
          return BYTES;
        case ENUM:
          return ENUM;
        case GROUP:
          return depth + 1 > ProtobufTypes.MAX_DEPTH ? SKIP : GROUP;
        default:
          break;
      }
      String name = fd.getMessageType().getFullName();
      switch (name) {
        case "google.protobuf.Timestamp":
          return TIMESTAMP;
        case "google.protobuf.Duration":
          return DURATION;
        case "google.protobuf.Struct":
        case "google.protobuf.Value":
        case "google.protobuf.ListValue":
          return JSON;
        default:
          break;
      }
      if (ProtobufTypes.isWrapper(name)) {
        return WRAPPER;
      }
      return depth + 1 > ProtobufTypes.MAX_DEPTH ? RAW : MESSAGE;
    }

    private static int wireTypeOf(int kind) {
      switch (kind) {
        case INT32:
        case SINT32:
        case INT64:
        case SINT64:
        case UINT32:
        case UINT64:
        case BOOL:
        case ENUM:
          return WireFormat.WIRETYPE_VARINT;
        case SFIXED32:
        case FIXED32:
        case FLOAT:
          return WireFormat.WIRETYPE_FIXED32;
        case SFIXED64:
        case FIXED64:
        case DOUBLE:
          return WireFormat.WIRETYPE_FIXED64;
        case GROUP:
          return WireFormat.WIRETYPE_START_GROUP;
        default:
          return WireFormat.WIRETYPE_LENGTH_DELIMITED;
      }
    }

    /** The value of an unset field without presence: what protobuf itself reads. */
    Object naturalDefault() {
      switch (kind) {
        case INT32:
        case SINT32:
        case SFIXED32:
          return 0;
        case INT64:
        case SINT64:
        case SFIXED64:
        case UINT32:
        case FIXED32:
          return 0L;
        case UINT64:
        case FIXED64:
          return BigDecimal.ZERO;
        case FLOAT:
          return 0f;
        case DOUBLE:
          return 0d;
        case BOOL:
          return Boolean.FALSE;
        case STRING:
          return "";
        case BYTES:
          return new byte[0];
        case ENUM:
          return enumName(descriptor.getEnumType().getValues().get(0).getNumber());
        // The well-known types' empty messages (a map entry without its value holds one).
        case TIMESTAMP:
          return Instant.EPOCH;
        case DURATION:
          return 0L;
        case WRAPPER:
          return inner.naturalDefault();
        case JSON:
          return ProtobufTypes.json(DynamicMessage.getDefaultInstance(messageType));
        case RAW:
          return new byte[0];
        default:
          return null;
      }
    }

    Object convert(Object natural) {
      return conversion == null || natural == null ? natural : conversion.apply(natural);
    }

    void read(CodedInputStream in, int tag, Object[] out) throws IOException {
      int wire = WireFormat.getTagWireType(tag);
      if (kind == SKIP) {
        // A value the reader's type cannot hold (a message where it has a number, a list where
        // it has one value …): the record is marked rather than the value dropped.
        throw new Unreadable(
            "field '" + descriptor.getName() + "' is " + shape(descriptor)
                + " in this record's schema, which the reader's type for it cannot hold");
      }
      if (mapKey != null) {
        if (wire != WireFormat.WIRETYPE_LENGTH_DELIMITED) {
          in.skipField(tag);
          return;
        }
        @SuppressWarnings("unchecked")
        Map<String, Object> map = (Map<String, Object>) out[slot];
        if (map == null) {
          map = new LinkedHashMap<>();
          out[slot] = map;
        }
        readEntry(in, map);
        return;
      }
      if (repeated) {
        @SuppressWarnings("unchecked")
        List<Object> list = (List<Object>) out[slot];
        if (list == null) {
          list = new ArrayList<>();
          out[slot] = list;
        }
        if (packable && wire == WireFormat.WIRETYPE_LENGTH_DELIMITED) {
          int limit = in.pushLimit(in.readRawVarint32());
          while (in.getBytesUntilLimit() > 0) {
            Object v = readValue(in);
            if (v != DROPPED) {
              list.add(convert(v));
            }
          }
          in.popLimit(limit);
        } else if (wire == wireType) {
          Object v = readValue(in);
          if (v != DROPPED) {
            list.add(convert(v));
          }
        } else {
          in.skipField(tag);
        }
        return;
      }
      if (wire != wireType) {
        in.skipField(tag); // protobuf-java keeps it as an unknown field
        return;
      }
      Object v;
      if (kind == MESSAGE && out[slot] instanceof Object[]) {
        // A singular message met again: protobuf merges it into the first.
        int limit = in.pushLimit(in.readRawVarint32());
        struct.fill(in, (Object[]) out[slot]);
        in.checkLastTagWas(0);
        in.popLimit(limit);
        v = out[slot];
      } else if (kind == MESSAGE) {
        Object[] fields = struct.defaults.clone();
        int limit = in.pushLimit(in.readRawVarint32());
        struct.fill(in, fields);
        in.checkLastTagWas(0);
        in.popLimit(limit);
        v = fields;
      } else {
        v = readValue(in);
        if (v == DROPPED) {
          return;
        }
        v = convert(v);
      }
      out[slot] = v;
      if (oneofSiblings != null) {
        for (int sibling : oneofSiblings) {
          out[sibling] = null;
        }
      }
    }

    /** One value of the field's natural kind (messages as finished rows). */
    private Object readValue(CodedInputStream in) throws IOException {
      switch (kind) {
        case INT32:
          return in.readInt32();
        case SINT32:
          return in.readSInt32();
        case SFIXED32:
          return in.readSFixed32();
        case INT64:
          return in.readInt64();
        case SINT64:
          return in.readSInt64();
        case SFIXED64:
          return in.readSFixed64();
        case UINT32:
          return Integer.toUnsignedLong(in.readUInt32());
        case FIXED32:
          return Integer.toUnsignedLong(in.readFixed32());
        case UINT64:
          return unsigned(in.readUInt64());
        case FIXED64:
          return unsigned(in.readFixed64());
        case FLOAT:
          return in.readFloat();
        case DOUBLE:
          return in.readDouble();
        case BOOL:
          return in.readBool();
        case STRING:
          return descriptor.needsUtf8Check() ? in.readStringRequireUtf8() : in.readString();
        case BYTES:
          return in.readByteArray();
        case ENUM:
          {
            int number = in.readEnum();
            String name = knownEnumName(number);
            if (name == null) {
              return closedEnum ? DROPPED : Integer.toString(number);
            }
            return name;
          }
        case MESSAGE:
          {
            int limit = in.pushLimit(in.readRawVarint32());
            Row row = struct.read(in);
            in.popLimit(limit);
            return row;
          }
        case GROUP:
          {
            Object[] fields = struct.defaults.clone();
            struct.fill(in, fields);
            in.checkLastTagWas(
                tag(descriptor.getNumber(), WireFormat.WIRETYPE_END_GROUP));
            return struct.finish(fields);
          }
        case TIMESTAMP:
          {
            long[] sn = secondsNanos(in);
            Instant instant = Instant.ofEpochSecond(sn[0], sn[1]); // nanos may carry seconds
            if (instant.getEpochSecond() < MIN_SECONDS || instant.getEpochSecond() > MAX_SECONDS) {
              // Spark's timestamp is microseconds in a long: about ±292,000 years.
              throw new Unreadable(
                  "field '" + descriptor.getName() + "' holds a Timestamp of "
                      + instant.getEpochSecond()
                      + " seconds, past what a timestamp column holds (microseconds since 1970"
                      + " in a long)");
            }
            return instant;
          }
        case DURATION:
          {
            long[] sn = secondsNanos(in);
            try {
              return Math.addExact(Math.multiplyExact(sn[0], 1_000_000L), sn[1] / 1_000);
            } catch (ArithmeticException e) {
              throw new Unreadable(
                  "field '" + descriptor.getName() + "' holds a Duration of " + sn[0]
                      + " seconds, past what its bigint column of microseconds holds");
            }
          }
        case WRAPPER:
          return readWrapper(in);
        case JSON:
          return ProtobufTypes.json(DynamicMessage.parseFrom(messageType, in.readByteArray()));
        case RAW:
          return in.readByteArray();
        default:
          throw new IllegalStateException("kind " + kind);
      }
    }

    private Object readWrapper(CodedInputStream in) throws IOException {
      int limit = in.pushLimit(in.readRawVarint32());
      Object value = inner.naturalDefault();
      while (true) {
        int tag = in.readTag();
        if (tag == 0) {
          break;
        }
        if (tag >>> 3 == 1 && WireFormat.getTagWireType(tag) == inner.wireType) {
          value = inner.readValue(in);
        } else if (!in.skipField(tag)) {
          break;
        }
      }
      in.checkLastTagWas(0);
      in.popLimit(limit);
      return value;
    }

    private static long[] secondsNanos(CodedInputStream in) throws IOException {
      int limit = in.pushLimit(in.readRawVarint32());
      long seconds = 0;
      long nanos = 0;
      while (true) {
        int tag = in.readTag();
        if (tag == 0) {
          break;
        }
        if (tag == tag(1, WireFormat.WIRETYPE_VARINT)) {
          seconds = in.readInt64();
        } else if (tag == tag(2, WireFormat.WIRETYPE_VARINT)) {
          nanos = in.readInt32();
        } else if (!in.skipField(tag)) {
          break;
        }
      }
      in.checkLastTagWas(0);
      in.popLimit(limit);
      return new long[] {seconds, nanos};
    }

    private void readEntry(CodedInputStream in, Map<String, Object> map) throws IOException {
      int limit = in.pushLimit(in.readRawVarint32());
      Object key = null;
      Object value = null;
      boolean hasValue = false;
      boolean dropped = false;
      while (true) {
        int tag = in.readTag();
        if (tag == 0) {
          break;
        }
        int number = tag >>> 3;
        int wire = WireFormat.getTagWireType(tag);
        if (number == 1 && wire == mapKey.wireType) {
          key = mapKey.readValue(in);
        } else if (number == 2 && mapValue.kind == SKIP) {
          // A value the reader's type cannot hold (another version's): marked, as a field's.
          throw new Unreadable(
              "field '" + descriptor.getName() + "' holds map values of "
                  + shape(mapValue.descriptor) + ", which the reader's type for them cannot hold");
        } else if (number == 2 && wire == mapValue.wireType) {
          value = mapValue.readValue(in);
          dropped = value == DROPPED;
          hasValue = !dropped;
        } else if (!in.skipField(tag)) {
          break;
        }
      }
      in.checkLastTagWas(0);
      in.popLimit(limit);
      if (dropped) {
        // A closed enum's unknown number: protobuf-java keeps the whole entry as an unknown
        // field, so the map has no such key (none is made up with a default value).
        return;
      }
      if (key == null) {
        key = mapKey.naturalDefault();
      }
      if (!hasValue) {
        // An entry without its value: the default scalar, or the empty message (its fields'
        // defaults), as protobuf reads it.
        value = mapValue.kind == MESSAGE ? mapValue.struct.empty() : mapValue.naturalDefault();
      }
      map.put(mapKey.keyText(key), mapValue.convert(value));
    }

    private String keyText(Object key) {
      if (key instanceof BigDecimal) {
        return ((BigDecimal) key).toPlainString();
      }
      return String.valueOf(key);
    }

    private String knownEnumName(int number) {
      if (enumNames != null) {
        return number >= 0 && number < enumNames.length ? enumNames[number] : null;
      }
      return enumByNumber.get(number);
    }

    private String enumName(int number) {
      String name = knownEnumName(number);
      return name == null ? Integer.toString(number) : name;
    }

    private static BigDecimal unsigned(long value) {
      return value >= 0 ? BigDecimal.valueOf(value) : new BigDecimal(Long.toUnsignedString(value));
    }
  }

  /**
   * A value of the writer's type into the reader's, when another schema version changed it:
   * numbers widen (int to bigint, float to double), a bigint the reader's int holds narrows,
   * a number, boolean or timestamp becomes text for a string, bytes their UTF-8 text (string
   * and bytes are one wire type). A value the reader's type cannot hold marks its record
   * ({@link Unreadable}): a null in its place would lose it without a word.
   */
  @FunctionalInterface
  private interface Conversion {
    Object apply(Object value);

    static Conversion of(DataType natural, DataType target, boolean repeated, String field) {
      if (repeated && natural instanceof ArrayType && target instanceof ArrayType) {
        natural = ((ArrayType) natural).elementType();
        target = ((ArrayType) target).elementType();
      }
      if (natural.sameType(target)) {
        return null;
      }
      if (target.sameType(DataTypes.LongType) && natural.sameType(DataTypes.IntegerType)) {
        return v -> ((Integer) v).longValue();
      }
      if (target.sameType(DataTypes.DoubleType) && natural.sameType(DataTypes.FloatType)) {
        return v -> ((Float) v).doubleValue();
      }
      String writer = natural.simpleString();
      String reader = target.simpleString();
      if (target.sameType(DataTypes.StringType) && natural.sameType(DataTypes.BinaryType)) {
        // string and bytes are the same on the wire: a version that changed one into the other
        // sent the same bytes, which are the text if they are UTF-8.
        return v -> {
          byte[] bytes = (byte[]) v;
          try {
            return StandardCharsets.UTF_8
                .newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT)
                .decode(ByteBuffer.wrap(bytes))
                .toString();
          } catch (CharacterCodingException e) {
            throw new Unreadable(
                "field '" + field + "' holds bytes that are not UTF-8 text, where the reader's"
                    + " is string (written as binary)");
          }
        };
      }
      if (target.sameType(DataTypes.BinaryType) && natural.sameType(DataTypes.StringType)) {
        // The other way round: the text's UTF-8 bytes, which is what was sent.
        return v -> ((String) v).getBytes(StandardCharsets.UTF_8);
      }
      if (target.sameType(DataTypes.StringType) && natural instanceof AtomicType) {
        // A number or boolean (or an enum's name) as its text.
        return v -> v instanceof BigDecimal ? ((BigDecimal) v).toPlainString() : v.toString();
      }
      if (target.sameType(DataTypes.IntegerType) && natural.sameType(DataTypes.LongType)) {
        return v -> {
          long n = (Long) v;
          if (n != (int) n) {
            throw new Unreadable(
                "field '" + field + "' holds " + n + ", which the reader's int cannot hold"
                    + " (written as " + writer + ")");
          }
          return (int) n;
        };
      }
      return v -> {
        throw new Unreadable(
            "field '" + field + "' is " + writer + " in this record's schema where the reader's"
                + " is " + reader);
      };
    }
  }

  private static String shape(FieldDescriptor fd) {
    String type =
        fd.getJavaType() == FieldDescriptor.JavaType.MESSAGE
            ? fd.getMessageType().getFullName()
            : fd.getType().name().toLowerCase(java.util.Locale.ROOT);
    return fd.isMapField() ? "a map" : fd.isRepeated() ? "a repeated " + type : type;
  }

  /** A value the reader's type cannot hold: the record is marked with this reason. */
  static final class Unreadable extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Unreadable(String reason) {
      super(reason, null, false, false);
    }
  }

  /** The seconds of the timestamps whose microseconds a long holds (Spark's timestamp). */
  private static final long MAX_SECONDS = Long.MAX_VALUE / 1_000_000L - 1;

  private static final long MIN_SECONDS = Long.MIN_VALUE / 1_000_000L + 1;

  private static int tag(int number, int wireType) {
    return (number << 3) | wireType;
  }

  /** Why a message did not decode, with where: what the UDF reports for the record. */
  static String describe(InvalidProtocolBufferException e, int position) {
    String why = e.getMessage() == null ? "invalid Protobuf" : e.getMessage();
    if (why.startsWith("While parsing a protocol message, the input ended unexpectedly")) {
      return "truncated message at byte " + position;
    }
    int dot = why.indexOf(". ");
    if (dot > 0) {
      why = why.substring(0, dot);
    }
    if (why.endsWith(".")) {
      why = why.substring(0, why.length() - 1);
    }
    return "invalid Protobuf at byte " + position + ": " + why;
  }
}
