package dev.frazil.spark;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.Serializable;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.expressions.codegen.FalseLiteral$;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A routed row's table as a number: the table's position among a batch's known tables, or -1
 * for a name not among them (or null). Looked up once per row in a hash map, so that the row's
 * kind and its task test a number rather than the name: the name was looked up in a hash set of
 * the tables' names twice per row (Spark's {@code InSet} for the kind, again for the task; ~9%
 * of a routed batch's read stage, bench/routing, 2026-12-01), and the writer hashed it again to
 * find the table's writer.
 */
public final class TableSlot extends Expression implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final ObjectMapper JSON = new ObjectMapper();

  final Expression child;
  final String[] names;
  private transient Map<UTF8String, Integer> index;

  /**
   * The slot of a string column's value among {@code names}.
   *
   * @param value the table's name
   * @param names the known tables' names, as a JSON array (a slot is a position in it)
   * @return the slot column (an int, never null)
   * @throws IOException if {@code names} is not a JSON array of strings
   */
  public static Column column(Column value, String names) throws IOException {
    List<String> parsed = JSON.readValue(names, new TypeReference<List<String>>() {});
    return ExpressionUtils.column(
        new TableSlot(ExpressionUtils.expression(value), parsed.toArray(new String[0])));
  }

  public TableSlot(Expression child, String[] names) {
    this.child = child;
    this.names = names;
  }

  /**
   * The slot of a name.
   *
   * @param name the name (null: none)
   * @return its position among the names, -1 if it is not one of them
   */
  public int slot(UTF8String name) {
    if (name == null) {
      return -1;
    }
    Map<UTF8String, Integer> map = index;
    if (map == null) {
      map = new HashMap<>(names.length * 2);
      for (int i = 0; i < names.length; i++) {
        map.put(UTF8String.fromString(names[i]), i);
      }
      index = map;
    }
    Integer slot = map.get(name);
    return slot == null ? -1 : slot;
  }

  @Override
  public Object eval(InternalRow input) {
    return slot((UTF8String) child.eval(input));
  }

  @Override
  public ExprCode doGenCode(CodegenContext context, ExprCode ev) {
    ExprCode value = child.genCode(context);
    String self = context.addReferenceObj("tableSlot", this, getClass().getName());
    String code =
        value.code()
            + "\nint " + ev.value() + " = " + self + ".slot(" + value.isNull() + " ? null : "
            + "(" + UTF8String.class.getName() + ") " + value.value() + ");";
    return ev.copy(Catalyst.code(code), FalseLiteral$.MODULE$, ev.value());
  }

  @Override
  public DataType dataType() {
    return DataTypes.IntegerType;
  }

  @Override
  public boolean nullable() {
    return false;
  }

  @Override
  public String prettyName() {
    return "frazil_table_slot";
  }

  @Override
  public scala.collection.immutable.Seq<Expression> children() {
    return Catalyst.children(child);
  }

  @Override
  public Expression withNewChildrenInternal(
      scala.collection.immutable.IndexedSeq<Expression> children) {
    return new TableSlot(children.apply(0), names);
  }

  @Override
  public int productArity() {
    return 1;
  }

  @Override
  public Object productElement(int n) {
    return child;
  }

  @Override
  public boolean canEqual(Object other) {
    return other instanceof TableSlot;
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof TableSlot
        && child.equals(((TableSlot) other).child)
        && Arrays.equals(names, ((TableSlot) other).names);
  }

  @Override
  public int hashCode() {
    return child.hashCode() * 31 + Arrays.hashCode(names);
  }
}
