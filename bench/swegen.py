"""``python -m bench.swegen [--quick]``: the SWE task generator's yield and tasks per minute.

Generates tasks from one project (default ``inflection==0.5.1``, its sdist cached under
``~/.cache/openenv/swegen``) into a temporary folder and reports:

* **yield**: tasks kept per candidate mutation tried (a kept mutation makes some, not all, of the
  tests covering it fail);
* **tasks per minute** of the whole generation (download from the cache, the suite under coverage,
  the mutations' test runs, writing the tasks);
* **seconds per mutation tried**, against a **same-run reference**: one plain run of the project's
  whole test suite (the floor of one trial, which runs only the covering tests).

Numbers are reported, never asserted; the exit status is 0 whenever it ran.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from openenv_harbor.swegen.generate import generate_suite
from openenv_harbor.swegen.select import layout_of, run_tests
from openenv_harbor.swegen.sources import fetch, parse_project

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 tasks instead of 12")
    parser.add_argument("--project", default="inflection==0.5.1", help="NAME==VERSION")
    parser.add_argument("--jobs", type=int, default=2, help="mutations tried at once")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "swegen.json", help="JSON output")
    args = parser.parse_args(argv)
    project = parse_project(args.project)
    layout = layout_of(project, fetch(project))
    with tempfile.TemporaryDirectory(prefix="bench-swegen-") as tmp:
        work = Path(tmp) / "tree"
        shutil.copytree(layout.tree, work, symlinks=True)
        start = time.monotonic()
        run_tests(work, layout, list(layout.tests), 600)
        reference_s = time.monotonic() - start
        summary = generate_suite([project], Path(tmp) / "suite", max_per_project=3 if args.quick else 12,
                                 jobs=args.jobs)
    per_trial = summary.seconds / summary.tried if summary.tried else 0.0
    result = {**summary.to_dict(), "seconds_per_mutation": round(per_trial, 2),
              "reference_suite_run_s": round(reference_s, 2)}
    result.pop("out")
    print(f"swegen {project.spec}: {summary.kept} tasks / {summary.tried} mutations tried: yield "
          f"{summary.yield_:.2f}, {summary.per_minute:.1f} tasks/min; {per_trial:.2f} s per mutation tried vs "
          f"{reference_s:.2f} s for one plain run of the whole suite ({per_trial / reference_s:.1f}x)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
