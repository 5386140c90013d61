"""The slow-test rule of the repository's ``conftest.py``: a test whose call takes longer than
``OPENENV_SLOW_TEST_S`` fails the run unless ``@pytest.mark.slow_ok("reason")`` says why, and the
machine-engine tests are put in one xdist group. (The limit is lowered to 0.2 s so the sample runs
in a second; the rule is about the suite's hygiene, not the product's speed.)"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SAMPLE = """
import time
import pytest

def test_quick():
    pass

def test_slow_without_reason():
    time.sleep(0.5)

@pytest.mark.slow_ok("sleeps on purpose: the sample of the rule")
def test_slow_with_reason():
    time.sleep(0.5)
"""


def _run(tmp_path: Path, source: str, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_sample.py").write_text(textwrap.dedent(source))
    # The repository's conftest.py loaded as a plugin (-p conftest), from a folder outside the checkout.
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", *args,
                           str(tmp_path / "test_sample.py")], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT), "OPENENV_SLOW_TEST_S": "0.2"})


def test_a_slow_test_without_a_reason_fails_the_run_and_is_named(tmp_path: Path) -> None:
    out = _run(tmp_path, SAMPLE)
    assert out.returncode == 1, out.stdout
    assert "3 passed" in out.stdout  # every test passed: the run fails for the rule alone
    assert "1 test(s) took longer than 0.2 s without @pytest.mark.slow_ok" in out.stdout
    assert "test_slow_without_reason took" in out.stdout and "test_slow_with_reason took" not in out.stdout


def test_with_reasons_the_run_passes(tmp_path: Path) -> None:
    out = _run(tmp_path, SAMPLE.replace("def test_slow_without_reason", "@pytest.mark.slow_ok('x')\ndef test_b"))
    assert out.returncode == 0, out.stdout


def test_slow_ok_without_a_reason_is_refused(tmp_path: Path) -> None:
    out = _run(tmp_path, "import pytest\n\n@pytest.mark.slow_ok\ndef test_x():\n    pass\n")
    assert out.returncode != 0 and "slow_ok needs the reason" in out.stdout + out.stderr


def test_engine_tests_share_one_xdist_group(tmp_path: Path) -> None:
    source = ("import pytest\n\n@pytest.mark.docker\ndef test_d():\n    pass\n\n"
              "@pytest.mark.kubernetes\ndef test_k():\n    pass\n\ndef test_plain():\n    pass\n")
    out = _run(tmp_path, source, "--collect-only", "-q", "-m", "xdist_group", "-o",
               "markers=docker\n kubernetes")
    assert "test_d" in out.stdout and "test_k" in out.stdout and "test_plain" not in out.stdout, out.stdout


def test_engine_tests_run_on_one_xdist_worker(tmp_path: Path) -> None:
    """Under ``-n 2 --dist loadgroup`` every engine-marked test runs on one worker (pytest-xdist must
    see the group marker that conftest.py adds: the hook runs first, and pytest's version is one
    whose node ids xdist can suffix)."""
    pytest.importorskip("xdist")
    log = tmp_path / "workers.log"
    source = ("import os, time, pytest\n\n"
              "@pytest.mark.docker\n@pytest.mark.parametrize('i', range(6))\ndef test_d(i):\n"
              f"    open({str(log)!r}, 'a').write(os.environ['PYTEST_XDIST_WORKER'] + '\\n')\n"
              "    time.sleep(0.05)\n")
    out = _run(tmp_path, source, "-n", "2", "--dist", "loadgroup", "-o", "markers=docker")
    assert out.returncode == 0, out.stdout + out.stderr
    workers = log.read_text().split()
    assert len(workers) == 6 and len(set(workers)) == 1, workers


def test_the_integration_run_keeps_only_the_marked_package_tests() -> None:
    """``OPENENV_PACKAGE_TESTS`` (set by ``nox -s integration``): a package's tests are kept only
    when marked so (the rest ran in ``packages``); the cross-package tests under ``tests/`` all stay."""
    files = ["kernel/tests/test_env_types.py", "tests/test_slow_test_rule.py"]

    def collected(*args: str, **env: str) -> list[str]:
        out = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", *args, *files],
                             capture_output=True, text=True, timeout=120, cwd=ROOT, env={**os.environ, **env})
        assert out.returncode == 0, out.stdout + out.stderr
        return [line for line in out.stdout.splitlines() if "::" in line]

    everything = collected(OPENENV_PACKAGE_TESTS="")
    kept = collected(OPENENV_PACKAGE_TESTS="requires_plugins")
    marked = [t for t in collected("-m", "requires_plugins", OPENENV_PACKAGE_TESTS="") if t.startswith("kernel/")]
    kernel_kept = [t for t in kept if t.startswith("kernel/")]
    assert kernel_kept == marked and marked, (kernel_kept, marked)
    assert len([t for t in everything if t.startswith("kernel/")]) > len(kernel_kept)
    assert [t for t in kept if t.startswith("tests/")] == [t for t in everything if t.startswith("tests/")]
    # a marker that no package test carries: the run stops instead of testing nothing of the packages
    out = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", *files],
                         capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env={**os.environ, "OPENENV_PACKAGE_TESTS": "no_such_marker"})
    assert out.returncode != 0 and "kept no package test" in out.stdout + out.stderr
