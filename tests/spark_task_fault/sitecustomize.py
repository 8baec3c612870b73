"""Makes one Spark task die in the middle of writing its Parquet part (tests/ops/test_spark_task_faults.py).

Put this directory on ``PYTHONPATH`` with ``REPAIR_TEST_FAIL_ONCE`` naming a directory: Python imports
this module at start-up in the driver, the PySpark daemon and the workers it forks. The first call of
:meth:`repair.io.storage.Storage.write_atomic` in any of them (decided by creating
``$REPAIR_TEST_FAIL_ONCE/failed`` exclusively) writes part of the file and ends the process with
``os._exit(1)``, as a worker killed by the OOM killer would: no clean-up, a temporary file left in the
staging directory. Every later call writes normally.
"""

import os

_marker_dir = os.environ.get("REPAIR_TEST_FAIL_ONCE")

if _marker_dir:
    from repair.io import storage as _storage

    _write_atomic = _storage.Storage.write_atomic

    def _dies_once(self, uri, data, *, overwrite=False, inside=None):
        try:
            fd = os.open(os.path.join(_marker_dir, "failed"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return _write_atomic(self, uri, data, overwrite=overwrite, inside=inside)
        os.write(fd, uri.encode())
        os.close(fd)

        def first_chunk_then_die():
            chunks = iter((data,) if isinstance(data, (bytes, bytearray)) else data)
            yield next(chunks, b"")
            os._exit(1)

        def first_bytes_then_die(stream):  # a function writing into the stream (Parquet parts)
            stream.write(b"PAR1")
            stream.flush()
            os._exit(1)

        dying = first_bytes_then_die if callable(data) else first_chunk_then_die()
        return _write_atomic(self, uri, dying, overwrite=overwrite, inside=inside)

    _storage.Storage.write_atomic = _dies_once
