"""Inputs the fuzzers found (tests/data/fuzz_regressions/<target>/) and the seed corpus: every decoder
of untrusted bytes answers them with a typed error or a result, nothing else.

A file is added here for every crash ``python -m fuzz.run`` reports (docs/reliability.md has the list
and what each one was). The CI fuzz run itself (a fixed time per target) is the slow test at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fuzz.corpus import seed_corpus
from fuzz.targets import TARGETS, run_one
from tests._flink_state_files import REPO
from tests.conftest import DATA

REGRESSIONS = DATA / "fuzz_regressions"
CASES = sorted((target.name, case) for target in REGRESSIONS.iterdir() for case in sorted(target.iterdir()))
#: Seconds per target of the CI run (8 targets: 40 s of fuzzing, 20 s on 2 cores). A smoke test that every
#: target runs instrumented and that the first mutations of the seeds (seed 1: the same ones every run)
#: raise only typed errors; the search for crashes is the long runs (docs/reliability.md, "Fuzzing").
CI_SECONDS_PER_TARGET = 5
#: Targets fuzzed at a time: one per core (libFuzzer runs on one), each still fuzzed for the same time.
JOBS = len(os.sched_getaffinity(0))


@pytest.mark.parametrize(("target", "case"), CASES, ids=[f"{t}/{c.name}" for t, c in CASES])
def test_inputs_the_fuzzer_found_raise_only_typed_errors(target, case):
    assert target in TARGETS
    run_one(target, case.read_bytes())  # a RepairError is swallowed; anything else fails the test


def test_the_seed_corpus_covers_every_target_and_decodes():
    corpus = seed_corpus()
    assert set(corpus) == set(TARGETS) and all(corpus.values())
    for target, seeds in corpus.items():
        for data in seeds:
            run_one(target, data)


def test_a_key_group_offset_past_the_data_is_a_format_error_for_the_blocks_before_it_too():
    """The first crash: the block of an early key group ended at a later key group's offset, which lay
    past the data; reading it raised struct.error instead of a FormatError."""
    from repair.errors import FormatError
    from repair.formats.flink.full_snapshot.canonical import iter_key_group_entries
    from repair.formats.flink.handles import KeyGroupRange

    with pytest.raises(FormatError):
        list(iter_key_group_entries(b"\0\0\0\0\0\0\0\x01\x01" + b"\0" * 55, KeyGroupRange(0, 2), [5, 70_000], compressed=False))
    with pytest.raises(FormatError, match="offset of key group 0"):
        list(iter_key_group_entries(b"\0" * 64, KeyGroupRange(0, 2), [70_000, 10], compressed=False))


@pytest.mark.slow
def test_a_short_coverage_guided_run_of_every_target_finds_no_crash(tmp_path):
    try:
        import atheris  # noqa: F401
    except ImportError as error:
        pytest.skip(f"missing tool: atheris (pip install atheris): {error}")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        ["nice", "-n", "10", sys.executable, "-m", "fuzz.run", "--seconds", str(CI_SECONDS_PER_TARGET), "--jobs", str(JOBS),
         "--crashes", str(tmp_path / "crashes"), "--json", str(tmp_path / "summary.json")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=len(TARGETS) * (CI_SECONDS_PER_TARGET * 3 + 120))
    assert done.returncode == 0, done.stdout + done.stderr[-5000:]
    assert done.stdout.count("crashes: none") == len(TARGETS), done.stdout
