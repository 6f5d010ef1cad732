package dev.frazil.spark;

import java.io.Serializable;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;

/**
 * A Catalyst expression of one child whose value is a static method of the subclass applied
 * to the child's value (null for a null value). Generated code calls the method directly, so
 * the expression stays inside whole-stage code generation, where a {@code CodegenFallback}
 * would split the stage and copy its rows.
 */
abstract class UnaryCall extends Expression implements Serializable {
  private static final long serialVersionUID = 1L;

  final Expression child;

  UnaryCall(Expression child) {
    this.child = child;
  }

  /** The name of the subclass's public static method that computes the value. */
  abstract String method();

  /** The Java type of the child's value as the method takes it (a cast in generated code). */
  abstract String argumentType();

  /** The Java type of the value in generated code. */
  abstract String resultType();

  /** The value in generated code when the child's is null. */
  abstract String nullValue();

  /** The method, for Spark's interpreted evaluation. */
  abstract Object call(Object value);

  /** The same expression of another child. */
  abstract UnaryCall withChild(Expression child);

  @Override
  public final Object eval(InternalRow input) {
    Object value = child.eval(input);
    return value == null ? null : call(value);
  }

  @Override
  public final ExprCode doGenCode(CodegenContext context, ExprCode ev) {
    ExprCode value = child.genCode(context);
    String code =
        value.code()
            + "\nboolean " + ev.isNull() + " = " + value.isNull() + ";\n"
            + resultType() + " " + ev.value() + " = " + nullValue() + ";\n"
            + "if (!" + ev.isNull() + ") {\n  "
            + ev.value() + " = " + getClass().getName() + "." + method() + "(("
            + argumentType() + ") " + value.value() + ");\n}";
    return ev.copy(Catalyst.code(code), ev.isNull(), ev.value());
  }

  @Override
  public final scala.collection.immutable.Seq<Expression> children() {
    return Catalyst.children(child);
  }

  @Override
  public final Expression withNewChildrenInternal(
      scala.collection.immutable.IndexedSeq<Expression> children) {
    return withChild(children.apply(0));
  }

  @Override
  public final int productArity() {
    return 1;
  }

  @Override
  public final Object productElement(int n) {
    return child;
  }

  @Override
  public final boolean canEqual(Object other) {
    return other != null && other.getClass() == getClass();
  }

  @Override
  public final boolean equals(Object other) {
    return canEqual(other) && child.equals(((UnaryCall) other).child);
  }

  @Override
  public final int hashCode() {
    return getClass().getName().hashCode() * 31 + child.hashCode();
  }
}
