package dev.frazil.spark;

import java.nio.ByteBuffer;
import java.util.UUID;
import java.util.function.BiFunction;
import org.apache.iceberg.PartitionKey;
import org.apache.iceberg.StructLike;
import org.apache.iceberg.types.Type;
import org.apache.iceberg.types.Types;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;

/**
 * A Spark row as Iceberg's partition functions read it (Iceberg's internal values).
 *
 * <p>Follows {@code org.apache.iceberg.spark.source.InternalRowWrapper} of Iceberg 1.11.0
 * (spark/v4.1), which Iceberg's Spark writes use with {@link PartitionKey} and which is
 * package-private there: the same getters (strings, UUIDs held as strings, decimals,
 * binaries, nested structs), read-only.
 */
final class RowWrapper implements StructLike {
  private final DataType[] types;
  private final BiFunction<InternalRow, Integer, ?>[] getters;
  private InternalRow row;

  @SuppressWarnings("unchecked")
  RowWrapper(StructType shape, Types.StructType iceberg) {
    types = new DataType[shape.size()];
    for (int i = 0; i < types.length; i++) {
      types[i] = shape.fields()[i].dataType();
    }
    if (types.length != iceberg.fields().size()) {
      throw new IllegalArgumentException(
          "Invalid length: Spark struct type (" + types.length + ") != Iceberg struct type ("
              + iceberg.fields().size() + ")");
    }
    getters = new BiFunction[types.length];
    for (int i = 0; i < types.length; i++) {
      getters[i] = getter(iceberg.fields().get(i).type(), types[i]);
    }
  }

  RowWrapper wrap(InternalRow value) {
    this.row = value;
    return this;
  }

  @Override
  public int size() {
    return types.length;
  }

  @Override
  public <T> T get(int pos, Class<T> javaClass) {
    if (row.isNullAt(pos)) {
      return null;
    } else if (getters[pos] != null) {
      return javaClass.cast(getters[pos].apply(row, pos));
    }
    return javaClass.cast(row.get(pos, types[pos]));
  }

  @Override
  public <T> void set(int pos, T value) {
    throw new UnsupportedOperationException("read-only");
  }

  private static BiFunction<InternalRow, Integer, ?> getter(Type iceberg, DataType type) {
    if (type instanceof StringType) {
      if (iceberg.typeId() == Type.TypeID.UUID) {
        return (row, pos) -> UUID.fromString(row.getUTF8String(pos).toString());
      }
      return (row, pos) -> row.getUTF8String(pos).toString();
    } else if (type instanceof DecimalType) {
      DecimalType decimal = (DecimalType) type;
      return (row, pos) ->
          row.getDecimal(pos, decimal.precision(), decimal.scale()).toJavaBigDecimal();
    } else if (type instanceof BinaryType) {
      return (row, pos) -> ByteBuffer.wrap(row.getBinary(pos));
    } else if (type instanceof StructType) {
      StructType struct = (StructType) type;
      RowWrapper nested = new RowWrapper(struct, iceberg.asStructType());
      return (row, pos) -> nested.wrap(row.getStruct(pos, struct.size()));
    }
    return null;
  }
}
