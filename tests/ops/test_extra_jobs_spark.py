"""The SQL, Kryo, Scala and Avro fixtures export on Spark (``--master local[2]``) exactly as in-process
(whose export equals expected.json: test_sql_export.py, test_kryo_export.py, test_scala_export.py,
test_avro_export.py)."""

from __future__ import annotations

import pytest

from repair.cli.app import main
from tests.conftest import AVRO_FIXTURE_NAMES, KRYO_FIXTURE_NAMES, SCALA_FIXTURE_NAMES, SQL_FIXTURE_NAMES, job_root
from tests.export_testlib import assert_identical


@pytest.mark.slow
@pytest.mark.parametrize("name", SQL_FIXTURE_NAMES + KRYO_FIXTURE_NAMES + SCALA_FIXTURE_NAMES + AVRO_FIXTURE_NAMES)
def test_spark_local_export_is_identical(name, local_spark, tmp_path):
    root = job_root(name)
    assert main(["export", root, "--out", str(tmp_path / "local"), "--workers", "1"]) == 0
    assert main(["export", root, "--out", str(tmp_path / "spark"), "--master", local_spark]) == 0
    assert_identical(tmp_path / "local", tmp_path / "spark")
