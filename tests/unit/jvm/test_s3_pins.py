"""The S3 jars are pinned to what they must match: pyspark's Hadoop and Iceberg's AWS SDK."""

from __future__ import annotations

from frazil.jvm.fetch import pyspark_jars_dir
from frazil.jvm.pins import (
    AWS_SDK_VERSION,
    HADOOP_AWS_VERSION,
    ICEBERG_VERSION,
    SPARK_SET,
    Coordinate,
)


def test_hadoop_aws_matches_the_hadoop_client_pyspark_ships() -> None:
    (client,) = pyspark_jars_dir().glob("hadoop-client-api-*.jar")
    assert client.name == f"hadoop-client-api-{HADOOP_AWS_VERSION}.jar"


def test_the_spark_set_holds_both_s3_clients() -> None:
    assert Coordinate("org.apache.hadoop", "hadoop-aws", HADOOP_AWS_VERSION) in (
        SPARK_SET.dependencies
    )
    assert Coordinate("org.apache.iceberg", "iceberg-aws-bundle", ICEBERG_VERSION) in (
        SPARK_SET.dependencies
    )
    assert Coordinate("software.amazon.awssdk", "s3-transfer-manager", AWS_SDK_VERSION) in (
        SPARK_SET.dependencies
    )
