"""One local[2] SparkSession for every Spark test, with kfast's sources registered.

Python workers are separate processes that import kfast_spark by name (the
data source classes are pickled by reference), so the source tree goes on the
PYTHONPATH they inherit before the JVM starts.
"""

import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def spark():
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO / "spark"), str(REPO), os.environ.get("PYTHONPATH")) if p
    )
    from pyspark.sql import SparkSession

    from kfast_spark import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("kfast_spark tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()
