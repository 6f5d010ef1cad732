package dev.frazil.spark;

import com.google.protobuf.CodedInputStream;
import com.google.protobuf.DescriptorProtos.FileDescriptorProto;
import com.google.protobuf.DescriptorProtos.FileDescriptorSet;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.FileDescriptor;
import com.google.protobuf.InvalidProtocolBufferException;
import java.io.IOException;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

/**
 * Decodes Protobuf messages into Spark rows, in the JVM: a Spark Java UDF over the record's
 * bytes that returns {@code struct<data: <reader shape>, error: string>}.
 *
 * <p>The reader shape is a Spark struct whose fields are filled <em>by name</em> from the
 * writer's message, so several writer versions of one message decode into one shape: fields
 * the writer lacks are null, writer fields the reader lacks are skipped. An instance decodes
 * either plain Protobuf of one message, or the Schema Registry wire format for every known
 * writer id (magic byte 0, the 4-byte big-endian schema id, the message-index array, then the
 * message; the id picks the writer schema, the indexes the message inside its file), so each
 * record costs one call whatever its writer.
 *
 * <p>Messages are read straight off the wire by {@link MessageReader}, with the type mapping
 * of {@link ProtobufTypes}. Descriptors and readers are built once per JVM and schema. Any
 * failure (bad magic byte, unknown id, a message index not in the schema, a truncated or
 * invalid payload) gives a null {@code data} and a short {@code error} such as "truncated
 * message at byte 17"; the UDF never throws for one record.
 */
public final class ProtobufDecoder implements UDF1<byte[], Row>, Serializable {
  private static final long serialVersionUID = 4L;
  /** The end of the mark of a record whose message is not one the reader reads. */
  public static final String ANOTHER_MESSAGE = "another message type";

  private final int[] ids;
  private final byte[][] descriptorSets;
  private final String[] rootFiles;
  private final String messageName;
  private final String readerSchemaJson;
  private final String registryUrl;
  /** The messages (full names) the reader reads, wire format; a record of another is marked. */
  private final String[] messages;

  /** Built on first use in each JVM (an instance arrives serialized in every task). */
  private transient volatile Writer[] writers;

  private transient MessageReader plainReader;

  /** The message of the last record, and whether the reader reads it (one task's thread). */
  private transient MessageReader lastMessage;

  private transient boolean lastReads;

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
    this.messages = new String[] {messageName};
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
   * @param messages the full names of the messages the reader reads: a record of another
   *     (another index into the same file, another subject's message) is marked, never read
   *     by field name into a shape that is not its own
   */
  public ProtobufDecoder(
      int[] ids,
      byte[][] descriptorSets,
      String[] rootFiles,
      String readerSchemaJson,
      String registryUrl,
      String[] messages) {
    int[] order = sortedOrder(ids);
    this.ids = new int[ids.length];
    this.descriptorSets = new byte[ids.length][];
    this.rootFiles = new String[ids.length];
    for (int i = 0; i < order.length; i++) {
      this.ids[i] = ids[order[i]];
      this.descriptorSets[i] = descriptorSets[order[i]];
      this.rootFiles[i] = rootFiles[order[i]];
    }
    this.messageName = null;
    this.readerSchemaJson = readerSchemaJson;
    this.registryUrl = registryUrl;
    this.messages = messages.clone();
  }

  private static int[] sortedOrder(int[] ids) {
    return java.util.stream.IntStream.range(0, ids.length)
        .boxed()
        .sorted((a, b) -> Integer.compare(ids[a], ids[b]))
        .mapToInt(Integer::intValue)
        .toArray();
  }

  private Writer[] writers() {
    Writer[] known = writers;
    if (known == null) {
      known = new Writer[ids.length];
      for (int i = 0; i < ids.length; i++) {
        known[i] = Writer.cached(descriptorSets[i], rootFiles[i], readerSchemaJson);
      }
      if (registryUrl == null) {
        plainReader = known[0].plain(messageName);
        if (plainReader == null) {
          throw new IllegalArgumentException(
              "no message " + messageName + " in " + rootFiles[0]);
        }
      }
      writers = known; // volatile: publishes plainReader too
    }
    return known;
  }

  @Override
  public Row call(byte[] data) {
    if (data == null) {
      return null;
    }
    Writer[] known = writers();
    if (registryUrl == null) {
      return decode(plainReader, CodedInputStream.newInstance(data), 0, "");
    }
    if (data.length == 0) {
      return failure("empty value (not Schema Registry wire format)");
    }
    if (data[0] != 0) {
      return failure(
          String.format(
              "bad magic byte 0x%02X (not Schema Registry wire format)", data[0] & 0xff));
    }
    if (data.length < 5) {
      return failure("value of " + data.length + " byte(s) is too short for the wire format");
    }
    int id =
        ((data[1] & 0xff) << 24) | ((data[2] & 0xff) << 16) | ((data[3] & 0xff) << 8)
            | (data[4] & 0xff);
    int at = java.util.Arrays.binarySearch(ids, id);
    if (at < 0) {
      return failure(
          "unknown schema id " + Integer.toUnsignedString(id) + " at registry " + registryUrl);
    }
    Writer writer = known[at];
    String schema = "schema id " + Integer.toUnsignedString(id) + ": ";
    CodedInputStream in = CodedInputStream.newInstance(data, 5, data.length - 5);
    MessageReader message;
    try {
      message = writer.messageAt(in);
    } catch (InvalidProtocolBufferException e) {
      return failure(schema + MessageReader.describe(e, 5 + in.getTotalBytesRead()));
    } catch (IOException e) {
      return failure(schema + e.getMessage());
    }
    if (message == null) {
      return failure(schema + "message index " + Writer.indexes(data) + " not in schema");
    }
    if (message != lastMessage) {
      // Records of one message follow each other: its name is compared once per run of them.
      lastReads = reads(message.fullName);
      lastMessage = message;
    }
    if (!lastReads) {
      return failure(
          schema
              + "a message '"
              + message.fullName
              + "' where the reader reads '"
              + String.join("', '", messages)
              + "': "
              + ANOTHER_MESSAGE);
    }
    return decode(message, in, 5, schema);
  }

  private boolean reads(String fullName) {
    for (String name : messages) {
      if (name.equals(fullName)) {
        return true;
      }
    }
    return false;
  }

  /**
   * The decoded row, or the failure of a payload that is not a valid message; {@code writer}
   * starts the reason ("schema id 2: ", empty for a plain value), as the header's own do.
   */
  private static Row decode(MessageReader message, CodedInputStream in, int base, String writer) {
    try {
      return RowFactory.create(message.read(in), null);
    } catch (InvalidProtocolBufferException e) {
      return failure(writer + MessageReader.describe(e, base + in.getTotalBytesRead()));
    } catch (MessageReader.Unreadable e) {
      return failure(writer + e.getMessage());
    } catch (IOException | RuntimeException e) {
      // Conversions of odd values (a timestamp beyond Instant's range …): never throw.
      return failure(
          writer + "cannot decode at byte " + (base + in.getTotalBytesRead()) + ": " + e);
    }
  }

  /**
   * One writer schema: its files, and the readers of its messages into the reader shape.
   * Shared by every decoder instance of the JVM with the same schema and shape (tasks each
   * deserialize their own instance; the descriptors are built once).
   */
  static final class Writer {
    private static final int CACHE_LIMIT = 1024;
    private static final Map<String, Writer> CACHE = new ConcurrentHashMap<>();

    final FileDescriptor root;
    final StructType reader;
    private final Map<Descriptor, MessageReader> readers = new ConcurrentHashMap<>();
    private final Map<String, MessageReader> byName = new ConcurrentHashMap<>();
    /** The root file's first message: what the single-byte index array [0] names. */
    private final MessageReader first;

    private Writer(byte[] set, String rootFile, StructType reader) {
      try {
        this.root = Descriptors.load(set, rootFile);
      } catch (Exception e) {
        throw new IllegalArgumentException(
            "cannot load the descriptor set of " + rootFile + ": " + e.getMessage(), e);
      }
      this.reader = reader;
      this.first = root.getMessageTypes().isEmpty() ? null : reader(root.getMessageTypes().get(0));
    }

    static Writer cached(byte[] set, String rootFile, String readerJson) {
      String key = digest(set, rootFile, readerJson);
      Writer writer = CACHE.get(key);
      if (writer == null) {
        if (CACHE.size() >= CACHE_LIMIT) {
          CACHE.clear(); // schemas of long-gone queries; rebuilt on demand
        }
        writer = new Writer(set, rootFile, (StructType) DataType.fromJson(readerJson));
        CACHE.put(key, writer);
      }
      return writer;
    }

    private static String digest(byte[] set, String rootFile, String readerJson) {
      try {
        MessageDigest sha = MessageDigest.getInstance("SHA-256");
        sha.update(set);
        sha.update((byte) 0);
        sha.update(rootFile.getBytes(StandardCharsets.UTF_8));
        sha.update((byte) 0);
        sha.update(readerJson.getBytes(StandardCharsets.UTF_8));
        return java.util.HexFormat.of().formatHex(sha.digest());
      } catch (java.security.NoSuchAlgorithmException e) {
        throw new IllegalStateException(e);
      }
    }

    MessageReader reader(Descriptor message) {
      return readers.computeIfAbsent(message, m -> MessageReader.of(m, reader, 0));
    }

    MessageReader plain(String fullName) {
      return byName.computeIfAbsent(
          fullName,
          n -> {
            Descriptor d = Descriptors.find(root, n);
            return d == null ? null : reader(d);
          });
    }

    /**
     * Reads the message-index array after the schema id and returns the reader of the message
     * it names (null when the schema has no such message): a zigzag count, then that many
     * zigzag indexes, top-level message first; a count of 0 means [0].
     */
    MessageReader messageAt(CodedInputStream in) throws IOException {
      int count = in.readSInt32();
      if (count == 0) {
        return first;
      }
      if (count < 0 || count > 100) {
        return null;
      }
      Descriptor current = null;
      for (int i = 0; i < count; i++) {
        int index = in.readSInt32();
        List<Descriptor> choices =
            current == null ? root.getMessageTypes() : current.getNestedTypes();
        if (index < 0 || index >= choices.size()) {
          return null;
        }
        current = choices.get(index);
      }
      return reader(current);
    }

    /** The message-index array of a wire-format value, as text (for messages). */
    static String indexes(byte[] data) {
      CodedInputStream in = CodedInputStream.newInstance(data, 5, data.length - 5);
      List<Integer> out = new ArrayList<>();
      try {
        int count = in.readSInt32();
        if (count == 0) {
          out.add(0);
        } else if (count < 0 || count > 100) {
          return "array of count " + count;
        }
        for (int i = 0; i < count; i++) {
          out.add(in.readSInt32());
        }
      } catch (IOException e) {
        return out + " (truncated)";
      }
      return out.toString();
    }
  }

  private static Row failure(String reason) {
    return RowFactory.create(null, reason);
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
  }
}
