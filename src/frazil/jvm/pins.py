"""The single place where frazil pins its JVM artifacts.

Every jar frazil puts on a JVM classpath (Spark's connectors, the local Kafka broker) comes
from one of the :data:`ARTIFACT_SETS` below, resolved by Maven into the artifact cache (see
:mod:`frazil.jvm.fetch`); packaged applications (the local Schema Registry,
:data:`SCHEMA_REGISTRY_APP`) are fetched by Maven and unpacked there too (see
:mod:`frazil.jvm.apps`). Bump versions here and nowhere else.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

#: Must equal the ``pyspark`` version in pyproject.toml: Spark's connector jars are built
#: against one exact Spark release.
SPARK_VERSION = "4.1.3"
#: ``major.minor`` of Spark, as used in Iceberg's runtime artifact name.
SPARK_MINOR_VERSION = ".".join(SPARK_VERSION.split(".")[:2])
#: pyspark 4.x ships Scala 2.13 jars only.
SCALA_BINARY_VERSION = "2.13"
ICEBERG_VERSION = "1.11.0"
KAFKA_VERSION = "4.1.1"
#: JDBC driver for Iceberg's JdbcCatalog on a local SQLite file.
SQLITE_JDBC_VERSION = "3.54.1.0"
#: The log4j2 release kafka-server 4.1.1 itself depends on (log4j-api/log4j-core).
LOG4J_VERSION = "2.24.3"
#: spark-sql-kafka 4.1.x depends on spark-token-provider-kafka 4.1.x, which the Maven
#: repository frazil can reach does not serve. 4.0.0 is served, and every class/method that
#: spark-sql-kafka 4.1.3 uses from it exists with the same signature (checked with javap).
#: The only 4.1 incompatibility is in Kerberos delegation-token fetching (log keys moved),
#: which frazil does not use.
SPARK_TOKEN_PROVIDER_VERSION = "4.0.0"
#: What spark-sql-kafka 4.1.3's POM asks for (its Kafka client and connection pool).
SPARK_KAFKA_CLIENTS_VERSION = "3.9.1"
COMMONS_POOL2_VERSION = "2.12.1"
#: spark-avro (``from_avro``): the reachable Maven repository serves 4.1.1, not 4.1.3. Same
#: 4.1 line as pyspark; checked: loads and round-trips every Avro type frazil maps
#: (tests/integration/test_avro.py). It uses the avro 1.12 jars pyspark ships.
SPARK_AVRO_VERSION = "4.1.1"
#: protobuf-java for frazil's own Protobuf decoder (src/frazil/jvm/java): the reachable Maven
#: repository serves no spark-protobuf at all. pyspark ships no unshaded protobuf-java (Spark
#: and Hadoop shade theirs), so this one does not clash.
PROTOBUF_JAVA_VERSION = "4.33.1"
#: Apicurio Registry, a Confluent-compatible Schema Registry (``/apis/ccompat/v7``) for
#: ``frazil local up --with schema-registry`` and the tests (:data:`SCHEMA_REGISTRY_APP`).
#: The newest 3.x that runs on Java 17: 3.3.3 (also served) is compiled for Java 21 (class
#: file 65) and stops with UnsupportedClassVersionError. 3.0.9 answers ~3 s after start
#: here, ~1.5 s with its CDS archive (frazil.local.registry).
APICURIO_VERSION = "3.0.9"
#: S3A (``s3a://`` checkpoints and state folder): must equal the Hadoop client pyspark ships
#: (``pyspark/jars/hadoop-client-api-3.4.2.jar``), whose classes it extends.
HADOOP_AWS_VERSION = "3.4.2"
#: The AWS SDK v2 inside ``iceberg-aws-bundle`` (its ``META-INF/maven/.../pom.properties``):
#: S3A also needs the SDK's transfer manager, which the bundle leaves out.
AWS_SDK_VERSION = "2.44.4"
#: The S3-compatible object store of ``frazil local up --with s3`` (:data:`S3PROXY_SET`).
#: Chosen over moto's server (PyPI), measured here on 2026-11-26: s3proxy answers ~2.9 s
#: after start with ~150 MB RSS (-Xmx256m); moto_server answers in ~0.7 s with ~77 MB RSS,
#: but keeps buckets in memory (data would not survive ``down``/``up``), accepts any
#: signature by default and would add ~300 MB of Python packages (boto3, Flask, ...) to
#: frazil's environment. s3proxy's filesystem backend keeps objects as plain files under
#: ``<state_dir>/s3/`` and checks AWS v2/v4 signatures. 4.x needs Java 17.
S3PROXY_VERSION = "4.1.0"
#: Jetty of the REST catalog server: Iceberg 1.11's ``RESTCatalogServer`` is built against
#: Jetty 12.1 with the ee10 servlet API and the 12.1 ``jetty-compression`` handlers (javap).
JETTY_VERSION = "12.1.8"
#: Logging backend of the REST catalog server (the slf4j-api 2.0.x Iceberg brings).
SLF4J_VERSION = "2.0.17"
#: Pinned so resolution does not depend on the Maven version installed.
MAVEN_DEPENDENCY_PLUGIN_VERSION = "3.8.1"

# Bumped when the layout of a fetched set changes, so old cache folders are not reused.
_CACHE_LAYOUT_VERSION = "1"


@dataclass(frozen=True, order=True)
class Coordinate:
    """A Maven artifact coordinate ``group:artifact:version[:classifier]`` (jar packaging).

    Attributes:
        classifier: The jar's classifier (``tests``, ``jar-with-dependencies``), or None
            for the main jar.
    """

    group: str
    artifact: str
    version: str
    classifier: str | None = None

    @classmethod
    def parse(cls, text: str) -> Coordinate:
        """Parse ``group:artifact:version`` or ``group:artifact:version:classifier``.

        Raises:
            ValueError: If ``text`` does not have three or four non-empty parts.
        """
        parts = text.split(":")
        if len(parts) not in (3, 4) or not all(parts):
            raise ValueError(
                f"not a Maven coordinate group:artifact:version[:classifier]: {text!r}"
            )
        return cls(parts[0], parts[1], parts[2], parts[3] if len(parts) == 4 else None)

    def __str__(self) -> str:
        # Without a classifier exactly as before classifiers existed: the text goes into
        # the sets' fingerprints, which name their cache folders.
        base = f"{self.group}:{self.artifact}:{self.version}"
        return f"{base}:{self.classifier}" if self.classifier else base


@dataclass(frozen=True)
class ArtifactSet:
    """A named group of artifacts that is resolved (with transitive deps) as one classpath.

    Attributes:
        name: Key in :data:`ARTIFACT_SETS` and prefix of the cache folder.
        description: One line for humans (``frazil setup``).
        dependencies: Direct dependencies; Maven adds their runtime dependencies.
        managed: Versions forced on transitive dependencies (Maven dependencyManagement).
        skip_pyspark_provided: Leave out jars whose artifact pyspark already ships, so the
            Spark driver never sees two versions of one class.
    """

    name: str
    description: str
    dependencies: tuple[Coordinate, ...]
    managed: tuple[Coordinate, ...] = ()
    skip_pyspark_provided: bool = False
    intransitive: bool = False

    def fingerprint(self) -> str:
        """Short hash of everything that decides the resolved jars; names the cache folder."""
        text = "\n".join(
            [
                f"layout={_CACHE_LAYOUT_VERSION}",
                f"plugin={MAVEN_DEPENDENCY_PLUGIN_VERSION}",
                *(f"dep={c}" for c in self.dependencies),
                *(f"managed={c}" for c in self.managed),
                f"intransitive={self.intransitive}",
            ]
        )
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def _c(text: str) -> Coordinate:
    return Coordinate.parse(text)


_S = SCALA_BINARY_VERSION

SPARK_SET = ArtifactSet(
    name="spark",
    description=(
        "Spark connectors: Kafka source, Avro, protobuf-java, Iceberg runtime, SQLite JDBC "
        "driver, S3 (hadoop-aws, iceberg-aws-bundle)"
    ),
    # Listed flat and resolved without transitive dependencies: Spark's parent POM declares
    # an extra repository whose host is unreachable from many networks, and following Spark's
    # POMs makes Maven try it first. Everything else these jars need ships inside pyspark
    # (Scala, Hadoop client, lz4/snappy/zstd, slf4j) or is shaded into the Iceberg runtime.
    dependencies=(
        _c(f"org.apache.spark:spark-sql-kafka-0-10_{_S}:{SPARK_VERSION}"),
        _c(f"org.apache.spark:spark-token-provider-kafka-0-10_{_S}:{SPARK_TOKEN_PROVIDER_VERSION}"),
        _c(f"org.apache.kafka:kafka-clients:{SPARK_KAFKA_CLIENTS_VERSION}"),
        _c(f"org.apache.commons:commons-pool2:{COMMONS_POOL2_VERSION}"),
        _c(f"org.apache.spark:spark-avro_{_S}:{SPARK_AVRO_VERSION}"),
        _c(f"com.google.protobuf:protobuf-java:{PROTOBUF_JAVA_VERSION}"),
        _c(
            f"org.apache.iceberg:iceberg-spark-runtime-{SPARK_MINOR_VERSION}_{_S}:{ICEBERG_VERSION}"
        ),
        _c(f"org.xerial:sqlite-jdbc:{SQLITE_JDBC_VERSION}"),
        # S3: Iceberg's S3FileIO (the AWS SDK it needs, bundled) and Hadoop's S3A, which uses
        # the same SDK plus its transfer manager.
        _c(f"org.apache.iceberg:iceberg-aws-bundle:{ICEBERG_VERSION}"),
        _c(f"org.apache.hadoop:hadoop-aws:{HADOOP_AWS_VERSION}"),
        _c(f"software.amazon.awssdk:s3-transfer-manager:{AWS_SDK_VERSION}"),
    ),
    skip_pyspark_provided=True,
    intransitive=True,
)

KAFKA_SET = ArtifactSet(
    name="kafka",
    description="Apache Kafka broker (KRaft) for `frazil local`",
    dependencies=(
        _c(f"org.apache.kafka:kafka_{_S}:{KAFKA_VERSION}"),
        # Kafka 4.x logs through log4j2 and slf4j, but its POM brings no slf4j backend:
        # without this binding slf4j falls back to a no-op logger and broker.log stays
        # empty. slf4j-api on this classpath is 1.7.x, whose log4j binding is
        # log4j-slf4j-impl (log4j-slf4j2-impl is for slf4j 2.x and would not bind).
        _c(f"org.apache.logging.log4j:log4j-core:{LOG4J_VERSION}"),
        _c(f"org.apache.logging.log4j:log4j-slf4j-impl:{LOG4J_VERSION}"),
    ),
)


@dataclass(frozen=True)
class AppArchive:
    """A packaged JVM application (a ``tar.gz`` on Maven Central), unpacked into the cache.

    Attributes:
        coordinate: ``group:artifact:version``.
        classifier: The archive's classifier.
        extension: The archive's type (``tar.gz``).
        main_jar: The jar to run with ``java -jar``, relative to the unpacked folder.
    """

    coordinate: Coordinate
    classifier: str
    extension: str
    main_jar: str

    def __str__(self) -> str:
        c = self.coordinate
        return f"{c.group}:{c.artifact}:{c.version}:{self.extension}:{self.classifier}"


#: Apicurio Registry as Maven Central ships it: a Quarkus application, not a jar set (its
#: own ``lib/`` next to the runner jar), so it is fetched and unpacked by frazil.jvm.apps.
SCHEMA_REGISTRY_APP = AppArchive(
    coordinate=_c(f"io.apicurio:apicurio-registry-app:{APICURIO_VERSION}"),
    classifier="all",
    extension="tar.gz",
    # 3.0.9 is packaged as a Quarkus "legacy jar"; later ones (3.3.3 checked) use the
    # fast-jar layout, whose launcher is quarkus-run.jar.
    main_jar=f"apicurio-registry-app-{APICURIO_VERSION}-runner.jar",
)

S3PROXY_SET = ArtifactSet(
    name="s3proxy",
    description="s3proxy, the S3-compatible object store of `frazil local --with s3`",
    # The jar-with-dependencies holds everything it needs; its POM still lists those
    # dependencies (jclouds, Jetty, ...), which Maven would fetch a second time.
    dependencies=(_c(f"org.gaul:s3proxy:{S3PROXY_VERSION}:jar-with-dependencies"),),
    intransitive=True,
)

REST_CATALOG_SET = ArtifactSet(
    name="rest-catalog",
    description="Iceberg's REST catalog server (JDBC on SQLite, S3FileIO) for `frazil local`",
    # RESTCatalogServer and its adapter ship in test jars whose POMs list nothing: the
    # catalog's runtime (iceberg-core, S3FileIO from iceberg-aws + the AWS SDK bundle), the
    # Jetty it was built against, a JDBC driver and a logging backend are added here.
    # org.apache.hadoop.conf.Configuration, which the server instantiates (unused by a JDBC
    # catalog on S3FileIO), comes from pyspark's own hadoop-client-api/-runtime jars
    # (frazil.jvm.fetch.rest_catalog_classpath) rather than another ~50 MB download.
    dependencies=(
        _c(f"org.apache.iceberg:iceberg-open-api:{ICEBERG_VERSION}:test-fixtures"),
        _c(f"org.apache.iceberg:iceberg-core:{ICEBERG_VERSION}:tests"),
        _c(f"org.apache.iceberg:iceberg-core:{ICEBERG_VERSION}"),
        _c(f"org.apache.iceberg:iceberg-aws:{ICEBERG_VERSION}"),
        _c(f"org.apache.iceberg:iceberg-aws-bundle:{ICEBERG_VERSION}"),
        _c(f"org.eclipse.jetty.ee10:jetty-ee10-servlet:{JETTY_VERSION}"),
        _c(f"org.eclipse.jetty.compression:jetty-compression-server:{JETTY_VERSION}"),
        _c(f"org.eclipse.jetty.compression:jetty-compression-gzip:{JETTY_VERSION}"),
        _c(f"org.xerial:sqlite-jdbc:{SQLITE_JDBC_VERSION}"),
        _c(f"org.slf4j:slf4j-simple:{SLF4J_VERSION}"),
    ),
)

#: Every artifact set, by name.
ARTIFACT_SETS: Mapping[str, ArtifactSet] = MappingProxyType(
    {s.name: s for s in (SPARK_SET, KAFKA_SET, S3PROXY_SET, REST_CATALOG_SET)}
)
