"""``bench/common.py``'s memory sampler: the summed RSS of a process and its descendants, read cheaply
(it shares the cores with the command it measures): once a process's parent is known, a sample reads
the ``stat`` of the tree's processes only, not of every process on the machine."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
import common  # noqa: E402

#: A child that starts a grandchild holding 64 MB; the grandchild says when it holds them.
_TREE = ("import subprocess, sys; subprocess.run([sys.executable, '-c', "
         "\"import sys; b = bytearray(64 << 20); b[::4096] = b'x' * len(b[::4096]); print('ready', flush=True); sys.stdin.read()\"])")


def test_a_sample_sums_the_tree_and_reads_only_its_processes_once_their_parents_are_known(monkeypatch):
    child = subprocess.Popen([sys.executable, "-c", _TREE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "ready\n"
        sampler = common._TreeMemory([child.pid])
        first = sampler._sample()
        known = set(sampler._parents)  # every process on the machine at the first sample
        reads: list[int] = []
        stat = common._TreeMemory._stat
        monkeypatch.setattr(common._TreeMemory, "_stat", staticmethod(lambda pid: reads.append(pid) or stat(pid)))
        second = sampler._sample()
    finally:
        child.stdin.close()  # the grandchild's stdin too: both end
        child.wait(timeout=60)
    assert min(first, second) > 64 << 10  # kB: the grandchild's 64 MB counted
    # Of the processes known at the first sample, only the tree's two (child, grandchild) are read again; a
    # process started since (other tests run beside this one) is read once, to learn its parent.
    again = [pid for pid in reads if pid in known]
    assert child.pid in again and len(again) == 2 and len(known) > len(again)
    assert sorted(reads) == sorted(set(reads))
