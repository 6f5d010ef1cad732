package dev.frazil.spark;

import com.google.protobuf.ByteString;
import com.google.protobuf.CodedInputStream;
import com.google.protobuf.DescriptorProtos.FileDescriptorProto;
import com.google.protobuf.DescriptorProtos.FileDescriptorSet;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.EnumValueDescriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Descriptors.FileDescriptor;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.Message;
import java.io.Serializable;
import java.math.BigDecimal;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * Decodes Protobuf messages into Spark rows, in the JVM: a Spark Java UDF over the record's
 * bytes that returns {@code struct<data: <reader shape>, error: string>}.
 *
 * <p>One instance decodes one writer schema (a descriptor set and its root file). The reader
 * shape is a Spark struct whose fields are filled <em>by name</em> from the writer's message,
 * so several writer versions of one message decode into one shape. With the Schema Registry
 * wire format, the magic byte, the schema id and the message-index array are read first and
 * the indexes pick the message inside the root file.
 *
 * <p>The type mapping is {@link ProtobufTypes}'s. Any failure (truncated or invalid payload,
 * an unknown message index) gives a null {@code data} and a short {@code error}; the UDF never
 * throws for one record.
 */
public final class ProtobufDecoder implements UDF1<byte[], Row>, Serializable {
  private static final long serialVersionUID = 2L;

  private final int[] ids;
  private final byte[][] descriptorSets;
  private final String[] rootFiles;
  private final String messageName;
  private final String readerSchemaJson;
  private final String registryUrl;

  private transient StructType reader;
  private transient Map<Integer, Writer> writers;
  private transient Writer plain;

  /**
   * A decoder of plain Protobuf: every value is one {@code messageName} message.
   *
   * @param descriptorSet a serialized {@code FileDescriptorSet} with the root file and its
   *     imports
   * @param rootFile the name of the schema's own file in the set
   * @param messageName the full name of the message
   * @param readerSchemaJson the reader shape, as Spark's JSON form of a {@code StructType}
   */
  public ProtobufDecoder(
      byte[] descriptorSet, String rootFile, String messageName, String readerSchemaJson) {
    this.ids = new int[] {-1};
    this.descriptorSets = new byte[][] {descriptorSet};
    this.rootFiles = new String[] {rootFile};
    this.messageName = messageName;
    this.readerSchemaJson = readerSchemaJson;
    this.registryUrl = null;
  }

  /**
   * A decoder of the Schema Registry wire format for the known writer schemas: each value's
   * schema id picks the writer, its message indexes the message. One instance handles every
   * id, so a record is decoded by one call whatever its writer.
   *
   * @param ids the known schema ids
   * @param descriptorSets each id's serialized {@code FileDescriptorSet}
   * @param rootFiles each id's own file in its set
   * @param readerSchemaJson the reader shape, as Spark's JSON form of a {@code StructType}
   * @param registryUrl the registry's URL, for the message of an unknown id
   */
  public ProtobufDecoder(
      int[] ids,
      byte[][] descriptorSets,
      String[] rootFiles,
      String readerSchemaJson,
      String registryUrl) {
    this.ids = ids;
    this.descriptorSets = descriptorSets;
    this.rootFiles = rootFiles;
    this.messageName = null;
    this.readerSchemaJson = readerSchemaJson;
    this.registryUrl = registryUrl;
  }

  private void init() {
    if (reader != null) {
      return;
    }
    StructType shape = (StructType) DataType.fromJson(readerSchemaJson);
    Map<Integer, Writer> byId = new HashMap<>();
    for (int i = 0; i < ids.length; i++) {
      byId.put(ids[i], new Writer(descriptorSets[i], rootFiles[i], shape));
    }
    if (registryUrl == null) {
      plain = byId.get(-1);
      plain.plainMessage = Descriptors.find(plain.root, messageName);
      if (plain.plainMessage == null) {
        throw new IllegalArgumentException("no message " + messageName + " in " + rootFiles[0]);
      }
    }
    writers = byId;
    reader = shape;
  }

  @Override
  public Row call(byte[] data) {
    if (data == null) {
      return null;
    }
    init();
    try {
      if (plain != null) {
        return decoded(plain, plain.plainMessage, CodedInputStream.newInstance(data));
      }
      if (data.length > 0 && data[0] == 0 && data.length < 5) {
        return failure("value of " + data.length + " byte(s) is too short for the wire format");
      }
      if (data.length < 5 || data[0] != 0) {
        return failure(
            String.format(
                "bad magic byte 0x%02X (not Schema Registry wire format)",
                data.length == 0 ? 0 : data[0] & 0xff));
      }
      int id =
          ((data[1] & 0xff) << 24) | ((data[2] & 0xff) << 16) | ((data[3] & 0xff) << 8)
              | (data[4] & 0xff);
      Writer writer = writers.get(id);
      if (writer == null) {
        return failure(
            "unknown schema id " + Integer.toUnsignedString(id) + " at registry " + registryUrl);
      }
      CodedInputStream in = CodedInputStream.newInstance(data, 5, data.length - 5);
      int count = in.readSInt32();
      int[] indexes;
      if (count == 0) {
        indexes = new int[] {0};
      } else if (count < 0 || count > 100) {
        return failure("schema id " + id + ": invalid message-index array (count " + count + ")");
      } else {
        indexes = new int[count];
        for (int i = 0; i < count; i++) {
          indexes[i] = in.readSInt32();
        }
      }
      Descriptor message = writer.messageAt(indexes);
      if (message == null) {
        return failure(
            "schema id " + id + ": message index " + java.util.Arrays.toString(indexes)
                + " not in schema");
      }
      return decoded(writer, message, in);
    } catch (java.io.IOException e) {
      String why = e.getMessage() == null ? "invalid Protobuf" : e.getMessage();
      return failure("invalid or truncated Protobuf: " + firstSentence(why));
    } catch (RuntimeException e) {
      return failure("cannot decode: " + e);
    }
  }

  private static Row decoded(Writer writer, Descriptor message, CodedInputStream in)
      throws java.io.IOException {
    DynamicMessage parsed = DynamicMessage.parseFrom(message, in);
    return RowFactory.create(writer.converter(message).convert(parsed), null);
  }

  /** One writer schema: its files, and the converters of its messages to the reader shape. */
  static final class Writer {
    final FileDescriptor root;
    final StructType reader;
    final Map<Descriptor, RowConverter> converters = new HashMap<>();
    final Map<String, Descriptor> byIndexes = new HashMap<>();
    Descriptor plainMessage;

    Writer(byte[] set, String rootFile, StructType reader) {
      try {
        this.root = Descriptors.load(set, rootFile);
      } catch (Exception e) {
        throw new IllegalArgumentException(
            "cannot load the descriptor set of " + rootFile + ": " + e.getMessage(), e);
      }
      this.reader = reader;
    }

    RowConverter converter(Descriptor message) {
      return converters.computeIfAbsent(message, m -> new RowConverter(m, reader, 0));
    }

    Descriptor messageAt(int[] indexes) {
      String key = java.util.Arrays.toString(indexes);
      Descriptor cached = byIndexes.get(key);
      if (cached != null) {
        return cached;
      }
      if (indexes[0] < 0 || indexes[0] >= root.getMessageTypes().size()) {
        return null;
      }
      Descriptor current = root.getMessageTypes().get(indexes[0]);
      for (int i = 1; i < indexes.length; i++) {
        if (indexes[i] < 0 || indexes[i] >= current.getNestedTypes().size()) {
          return null;
        }
        current = current.getNestedTypes().get(indexes[i]);
      }
      byIndexes.put(key, current);
      return current;
    }
  }

  private static Row failure(String reason) {
    return RowFactory.create(null, reason);
  }

  private static String firstSentence(String text) {
    int dot = text.indexOf(". ");
    return dot > 0 ? text.substring(0, dot) : text;
  }

  /** Fills a reader struct from a message, field by field, by name. */
  static final class RowConverter {
    private final FieldDescriptor[] fields;
    private final ValueConverter[] values;

    RowConverter(Descriptor message, StructType target, int depth) {
      StructField[] targetFields = target.fields();
      fields = new FieldDescriptor[targetFields.length];
      values = new ValueConverter[targetFields.length];
      for (int i = 0; i < targetFields.length; i++) {
        FieldDescriptor field = message.findFieldByName(targetFields[i].name());
        fields[i] = field;
        if (field != null) {
          values[i] = ProtobufTypes.converter(field, targetFields[i].dataType(), depth);
        }
      }
    }

    Row convert(Message message) {
      Object[] out = new Object[fields.length];
      for (int i = 0; i < fields.length; i++) {
        FieldDescriptor field = fields[i];
        if (field == null) {
          continue;
        }
        if (field.isRepeated()) {
          out[i] = values[i].convert(message.getField(field));
        } else if (field.hasPresence() && !message.hasField(field)) {
          out[i] = null;
        } else {
          out[i] = values[i].convert(message.getField(field));
        }
      }
      return RowFactory.create(out);
    }
  }

  /** Converts one field's protobuf-java value into what Spark's row converters take. */
  interface ValueConverter extends Serializable {
    Object convert(Object value);
  }

  static Object enumName(Object value) {
    EnumValueDescriptor e = (EnumValueDescriptor) value;
    return e.getIndex() >= 0 && e.getType().findValueByNumber(e.getNumber()) != null
        ? e.getName()
        : Integer.toString(e.getNumber());
  }

  static Object unsigned64(Object value) {
    return new BigDecimal(Long.toUnsignedString((Long) value));
  }

  static Object bytes(Object value) {
    return ((ByteString) value).toByteArray();
  }

  static Object timestamp(Message m) {
    FieldDescriptor seconds = m.getDescriptorForType().findFieldByName("seconds");
    FieldDescriptor nanos = m.getDescriptorForType().findFieldByName("nanos");
    return Instant.ofEpochSecond((Long) m.getField(seconds), (Integer) m.getField(nanos));
  }

  static Object durationMicros(Message m) {
    FieldDescriptor seconds = m.getDescriptorForType().findFieldByName("seconds");
    FieldDescriptor nanos = m.getDescriptorForType().findFieldByName("nanos");
    return (Long) m.getField(seconds) * 1_000_000L + (Integer) m.getField(nanos) / 1_000;
  }

  static List<Object> list(Object value, ValueConverter element) {
    List<?> in = (List<?>) value;
    List<Object> out = new ArrayList<>(in.size());
    for (Object item : in) {
      out.add(element.convert(item));
    }
    return out;
  }

  static Map<Object, Object> map(
      Object value, FieldDescriptor keyField, FieldDescriptor valueField, ValueConverter values) {
    List<?> entries = (List<?>) value;
    Map<Object, Object> out = new LinkedHashMap<>();
    for (Object entry : entries) {
      Message e = (Message) entry;
      Object key = e.getField(keyField);
      Object v = e.getField(valueField);
      if (valueField.getJavaType() == FieldDescriptor.JavaType.MESSAGE && !e.hasField(valueField)) {
        v = null;
      } else {
        v = values.convert(v);
      }
      out.put(ProtobufTypes.keyString(keyField, key), v);
    }
    return out;
  }

  /** Loading descriptor sets and finding messages (shared with {@link ProtobufTypes}). */
  public static final class Descriptors {
    private Descriptors() {}

    static FileDescriptor load(byte[] set, String rootFile) throws Exception {
      FileDescriptorSet files = FileDescriptorSet.parseFrom(set);
      Map<String, FileDescriptorProto> protos = new HashMap<>();
      for (FileDescriptorProto file : files.getFileList()) {
        protos.put(file.getName(), file);
      }
      Map<String, FileDescriptor> built = new HashMap<>();
      if (!protos.containsKey(rootFile)) {
        throw new IllegalArgumentException("no file " + rootFile + " in the descriptor set");
      }
      return build(rootFile, protos, built);
    }

    private static FileDescriptor build(
        String name, Map<String, FileDescriptorProto> protos, Map<String, FileDescriptor> built)
        throws Exception {
      FileDescriptor done = built.get(name);
      if (done != null) {
        return done;
      }
      FileDescriptorProto proto = protos.get(name);
      if (proto == null) {
        throw new IllegalArgumentException("import " + name + " is not in the descriptor set");
      }
      FileDescriptor[] deps = new FileDescriptor[proto.getDependencyCount()];
      for (int i = 0; i < deps.length; i++) {
        deps[i] = build(proto.getDependency(i), protos, built);
      }
      FileDescriptor file = FileDescriptor.buildFrom(proto, deps);
      built.put(name, file);
      return file;
    }

    static Descriptor find(FileDescriptor root, String fullName) {
      String pkg = root.getPackage();
      String local =
          !pkg.isEmpty() && fullName.startsWith(pkg + ".")
              ? fullName.substring(pkg.length() + 1)
              : fullName;
      String[] parts = local.split("\\.");
      Descriptor current = root.findMessageTypeByName(parts[0]);
      for (int i = 1; current != null && i < parts.length; i++) {
        current = current.findNestedTypeByName(parts[i]);
      }
      return current;
    }

    /**
     * The Spark schema (as JSON) of a message: what the plan uses as the reader shape.
     *
     * @param set a serialized {@code FileDescriptorSet}
     * @param rootFile the file holding the message
     * @param fullName the message's full name; null for the root file's first message
     */
    public static String sparkSchemaJson(byte[] set, String rootFile, String fullName)
        throws Exception {
      FileDescriptor root = load(set, rootFile);
      Descriptor message =
          fullName == null ? root.getMessageTypes().get(0) : find(root, fullName);
      if (message == null) {
        throw new IllegalArgumentException("no message " + fullName + " in " + rootFile);
      }
      return ProtobufTypes.struct(message, 0).json();
    }

    /** The full names of every message in a file (nested ones too), for error messages. */
    public static String[] messageNames(byte[] set, String rootFile) throws Exception {
      List<String> names = new ArrayList<>();
      for (Descriptor d : load(set, rootFile).getMessageTypes()) {
        collect(d, names);
      }
      return names.toArray(new String[0]);
    }

    private static void collect(Descriptor d, List<String> names) {
      if (d.getOptions().getMapEntry()) {
        return;
      }
      names.add(d.getFullName());
      for (Descriptor nested : d.getNestedTypes()) {
        collect(nested, names);
      }
    }
  }
}
