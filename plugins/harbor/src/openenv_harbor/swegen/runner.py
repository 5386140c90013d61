"""Runs pytest and records each test's outcome (standard library and pytest only: it runs in the box).

    python3 -S runner.py --out RESULT.json [--coverage DIR] -- PYTEST_ARGS...
    python3 -S runner.py --expect EXPECTED.json --reward REWARD.txt -- PYTEST_ARGS...

``--coverage DIR``: coverage.py measures DIR with one dynamic context per test (its node id), and the
result maps each measured line to the tests that ran it. ``--expect``: the reward is 1 only if every
node id listed (``fail_to_pass`` + ``pass_to_pass``) passed; anything else, a crash included, is 0.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

MESSAGE_CHARS = 600


class Recorder:
    """A pytest plugin: the outcome of each test (a failing setup or teardown fails it) and its message."""

    def __init__(self, coverage: Any = None) -> None:
        self.outcomes: dict[str, str] = {}
        self.messages: dict[str, str] = {}
        self.coverage = coverage

    def pytest_runtest_logreport(self, report: Any) -> None:
        nodeid = report.nodeid
        if report.when == "call" or report.outcome != "passed":
            if report.outcome == "passed" and self.outcomes.get(nodeid) not in (None, "passed"):
                return
            if self.outcomes.get(nodeid) in ("failed",):
                return
            self.outcomes[nodeid] = report.outcome
            if report.outcome == "failed":
                crash = getattr(report.longrepr, "reprcrash", None)
                message = getattr(crash, "message", None) or str(report.longrepr).strip().splitlines()[-1:]
                self.messages[nodeid] = (message if isinstance(message, str) else " ".join(message))[:MESSAGE_CHARS]

    def pytest_runtest_setup(self, item: Any) -> None:
        if self.coverage is not None:
            self.coverage.switch_context(item.nodeid)

    def pytest_runtest_teardown(self, item: Any, nextitem: Any) -> None:
        if self.coverage is not None:
            self.coverage.switch_context("")


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print("usage: python3 -S runner.py (--out FILE [--coverage DIR] | --expect FILE --reward FILE) -- PYTEST_ARGS",
              file=sys.stderr)
        return 2
    split = argv.index("--")
    options, pytest_args = argv[:split], argv[split + 1:]
    opts = dict(zip(options[::2], options[1::2], strict=False))
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    import pytest

    cov = None
    if "--coverage" in opts:
        import coverage

        cov = coverage.Coverage(data_file=None, source=[opts["--coverage"]], branch=False)
        cov.start()
    recorder = Recorder(cov)
    status = pytest.main(["-q", "-p", "no:cacheprovider", "--tb=short", *pytest_args], plugins=[recorder])
    result: dict[str, Any] = {"status": int(status), "outcomes": recorder.outcomes, "messages": recorder.messages}
    if cov is not None:
        cov.stop()
        data = cov.get_data()
        contexts: dict[str, dict[str, list[str]]] = {}
        for path in data.measured_files():
            by_line = data.contexts_by_lineno(path)
            contexts[path] = {str(line): sorted(c for c in ctx if c) for line, ctx in by_line.items()}
        result["contexts"] = contexts
    if "--expect" in opts:
        with open(opts["--expect"], encoding="utf-8") as handle:
            expected = json.load(handle)
        wanted = list(expected["fail_to_pass"]) + list(expected["pass_to_pass"])
        bad = [t for t in wanted if recorder.outcomes.get(t) != "passed"]
        for test in bad[:20]:
            print(f"NOT PASSED: {test}: {recorder.outcomes.get(test, 'not run')}")
        with open(opts["--reward"], "w", encoding="utf-8") as handle:
            handle.write("1\n" if wanted and not bad else "0\n")
    if "--out" in opts:
        with open(opts["--out"], "w", encoding="utf-8") as handle:
            json.dump(result, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
