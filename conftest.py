"""Repository-wide pytest hooks: the ``requires_plugins`` marker, the slow-test rule, and the
grouping that lets ``pytest -n 2`` (pytest-xdist) run the suites safely.

A test of one package that also needs other packages of this repository declares them::

    @pytest.mark.requires_plugins("transport-ws", "provider-local")

Names are distribution names without the ``openenvkit-`` prefix (``transport-mcp``, ``env-echo``,
``rubrics``). ``nox -s packages`` tests each package with only the kernel installed, so there such a
test skips; ``nox -s integration`` installs everything and runs ``tests/`` plus only the package
tests carrying this marker (or ``playwright``: ``OPENENV_PACKAGE_TESTS`` below), instead of every
package's tests a second time.
There ``OPENENV_REQUIRE_PLUGINS=1`` turns a missing plugin into a failure, so a broken install
cannot pass as a skip.

**Slow tests need a reason.** A test whose call phase takes longer than ``OPENENV_SLOW_TEST_S``
(default 60 s) fails the run at its end unless it carries ``@pytest.mark.slow_ok("why it takes
that long")``: a CI that grows by one slow test at a time stays visible. This is hygiene of the
suite, not a timing assertion about the product (speed goals live in ``bench/``).

**Parallel runs.** Under pytest-xdist, tests that use a machine-wide engine (``docker``,
``kubernetes``, ``slurm``, ``bwrap``-marked, or under ``tests/docker``) share one xdist group, so
with ``--dist loadgroup`` they run one after another on one worker: their before/after counts of
containers, Pods and jobs see no other test's. Everything else spreads over the workers.

This file is not part of any distribution: it applies to tests run from a checkout.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
PREFIX = "openenvkit-"


@cache
def known_plugins() -> frozenset[str]:
    """Every plugin/env distribution of this repository, by its marker name."""
    names = set()
    for project in [*ROOT.glob("plugins/*/pyproject.toml"), *ROOT.glob("envs/*/pyproject.toml")]:
        name = tomllib.loads(project.read_text(encoding="utf-8"))["project"]["name"]
        names.add(name.removeprefix(PREFIX))
    return frozenset(names)


def _installed(name: str) -> bool:
    try:
        metadata.distribution(PREFIX + name)
    except metadata.PackageNotFoundError:
        return False
    return True


def required_plugins(item: pytest.Item) -> list[str]:
    """The plugin names an item's ``requires_plugins`` markers ask for (every marker, in order)."""
    names: list[str] = []
    for mark in item.iter_markers("requires_plugins"):
        if not mark.args:
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.requires_plugins needs at least one plugin "
                                    f"name, e.g. requires_plugins(\"transport-ws\")")
        names += [str(a) for a in mark.args]
    return names


#: Set by ``nox -s integration`` (comma-separated marker names): of the package tests (those under
#: ``kernel/``, ``plugins/`` and ``envs/``) only those carrying one of these markers are kept; the others ran in
#: ``kernel``/``packages``. One pytest run then holds both, so the engine tests of both wait in one
#: queue while the other worker goes on with the rest.
PACKAGE_TESTS_ENV = "OPENENV_PACKAGE_TESTS"
#: Where the package tests live (``tests/`` holds the cross-package ones).
PACKAGE_FOLDERS = frozenset({"kernel", "plugins", "envs"})


class _PackageTestFilter:
    """Runs last among the collection hooks: package conftests add requires_plugins markers in their
    own hooks (provider-kubernetes marks the tests that use its Docker-built image)."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        _keep_package_tests(config, items)


def _keep_package_tests(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = [m.strip() for m in os.environ.get(PACKAGE_TESTS_ENV, "").split(",") if m.strip()]
    if not wanted:
        return
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    package_tests = 0
    for item in items:
        try:
            top = item.path.resolve().relative_to(ROOT).parts[0]
        except ValueError:
            top = ""  # not this checkout's (a test's own sample project in a temporary folder)
        if top not in PACKAGE_FOLDERS:
            keep.append(item)
        elif any(item.get_closest_marker(m) for m in wanted):
            keep.append(item)
            package_tests += 1
        else:
            drop.append(item)
    if drop and not package_tests:
        raise pytest.UsageError(f"{PACKAGE_TESTS_ENV}={os.environ[PACKAGE_TESTS_ENV]!r} kept no package test: "
                                "the markers must have gone (conftest.py, noxfile.py's integration session)")
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


#: Markers of tests that touch a machine-wide engine (serialised under xdist: the module docstring).
ENGINE_MARKERS = ("docker", "kubernetes", "slurm", "bwrap")
ENGINE_GROUP = "machine-engines"
SLOW_TEST_S = float(os.environ.get("OPENENV_SLOW_TEST_S", "60"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow_ok(reason): this test may take longer than OPENENV_SLOW_TEST_S "
                                       "(60 s) because of the reason given (conftest.py)")
    config.addinivalue_line("markers", "xdist_group(name): tests of one group run on one xdist worker")
    if os.environ.get(PACKAGE_TESTS_ENV):
        config.pluginmanager.register(_PackageTestFilter(), "openenv-package-test-filter")


#: Tests over the limit without a reason, collected in the process that reports (the xdist controller).
_SLOW: list[str] = []


def _engine_bound(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(m) for m in ENGINE_MARKERS) or "tests/docker/" in item.nodeid


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook, which reads the group markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Checked at collection so a misspelt name fails every run, not only the one where it is missing.
    known = known_plugins()
    for item in items:
        if _engine_bound(item):
            item.add_marker(pytest.mark.xdist_group(ENGINE_GROUP))
        for mark in item.iter_markers("slow_ok"):
            if not mark.args or not str(mark.args[0]).strip():
                raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.slow_ok needs the reason as its argument, "
                                        "e.g. slow_ok(\"builds the env image\")")
        for name in required_plugins(item):
            if name not in known:
                close = difflib.get_close_matches(name.removeprefix(PREFIX), sorted(known), n=1)
                hint = f" Did you mean {close[0]!r}?" if close else f" Known: {', '.join(sorted(known))}."
                raise pytest.UsageError(f"{item.nodeid}: requires_plugins({name!r}) names no plugin or env of "
                                        f"this repository (a distribution name without {PREFIX!r}).{hint}")


def pytest_runtest_setup(item: pytest.Item) -> None:
    missing = [name for name in required_plugins(item) if not _installed(name)]
    if not missing:
        return
    dists = ", ".join(PREFIX + name for name in missing)
    if os.environ.get("OPENENV_REQUIRE_PLUGINS") == "1":
        pytest.fail(f"needs {dists}, which is not installed although OPENENV_REQUIRE_PLUGINS=1 "
                    f"(nox -s integration installs every package: check that session's install step)",
                    pytrace=False)
    pytest.skip(f"needs {dists} (installed together in `nox -s integration`)")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Called in the controller for every worker's reports too, so the rule holds under xdist.
    if report.when == "call" and report.duration > SLOW_TEST_S and "slow_ok" not in report.keywords:
        _SLOW.append(f"{report.nodeid} took {report.duration:.0f} s")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _SLOW or hasattr(session.config, "workerinput"):  # the controller reports, not each worker
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"{len(_SLOW)} test(s) took longer than {SLOW_TEST_S:g} s without @pytest.mark.slow_ok(\"reason\"):",
             *(f"  {line}" for line in _SLOW),
             "Make them faster (shared fixtures, smaller inputs) or write why next to them with "
             "@pytest.mark.slow_ok(\"...\") (conftest.py)."]
    if reporter is not None:
        reporter.write_line("")
        for line in lines:
            reporter.write_line(line, red=True)
    if session.exitstatus == 0:
        session.exitstatus = 1
