package dev.frazil.spark;

import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.CodeBlock;
import org.apache.spark.sql.catalyst.expressions.codegen.JavaCode;

/** What frazil's Catalyst expressions build the same way: Scala values from Java. */
final class Catalyst {
  private Catalyst() {}

  /** An expression's children, as Catalyst's {@code Seq}. */
  static scala.collection.immutable.Seq<Expression> children(Expression... children) {
    return scala.jdk.javaapi.CollectionConverters.asScala(java.util.List.of(children)).toList();
  }

  /** Generated Java source, as one code block without interpolated values. */
  static CodeBlock code(String source) {
    return new CodeBlock(
        scala.jdk.javaapi.CollectionConverters.asScala(java.util.List.of(source)).toList(),
        scala.collection.immutable.List$.MODULE$.<JavaCode>empty());
  }
}
