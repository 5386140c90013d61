"""Developer tasks. ``nox -l`` lists them; ``nox`` runs the default set that CI runs.

Each session installs what it needs into its own virtual environment with uv, from the local
folders, so the kernel is always this checkout's. Our distributions are named ``openenvkit``,
``openenvkit-transport-ws``, ... (the import names stay ``openenv``, ``openenv_transport_ws``, ...):
the distribution ``openenv`` on the public index is upstream's, a different package.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import nox

ROOT = Path(__file__).parent
nox.options.default_venv_backend = "uv"
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True
nox.options.sessions = ["lint", "typecheck", "kernel", "packages", "integration", "compat", "wheels",
                        "wheel_install"]

#: pytest < 9.2: pytest 9.2 keeps a node's id in ``_id``, and pytest-xdist (3.8.0, the latest) still writes
#: its ``--dist loadgroup`` suffix into ``_nodeid``, so xdist groups are silently ignored: the
#: machine-engine tests (conftest.py) would run side by side. tests/test_slow_test_rule.py checks it.
PYTEST = "pytest>=8,<9.2"
TEST_DEPS = [PYTEST, "pytest-asyncio>=0.24", "httpx>=0.27", "websockets>=13"]
STRICT = {"OPENENV_STRICT_PLUGINS": "1"}
#: Every pytest run prints its slowest tests, so each CI log shows where the minutes go (and
#: conftest.py fails a run with a test over 60 s that does not say why: ``slow_ok``).
DURATIONS = "--durations=15"
#: Workers of ``packages`` and pytest-xdist workers of ``compat`` (``OPENENV_TEST_WORKERS=1``: one
#: process). Tests of machine-wide engines share one xdist group (conftest.py), so they still run one
#: at a time.
WORKERS = os.environ.get("OPENENV_TEST_WORKERS", "2")


#: Workers for ``integration``: one more than the cores (at most 8), since its tests spend a third of
#: their time waiting on engines, servers and browsers (2 workers on 2 cores left the CPU 34% idle).
#: OPENENV_TEST_WORKERS sets it too.
INTEGRATION_WORKERS = os.environ.get("OPENENV_TEST_WORKERS") or str(min((os.cpu_count() or 1) + 1, 8))


def _parallel(workers: str = WORKERS) -> list[str]:
    return [] if workers in ("0", "1") else ["-n", workers, "--dist", "loadgroup"]
#: Where ``nox -s wheels`` puts every wheel (git-ignored, like all of .nox/).
WHEELS = ROOT / ".nox" / "_wheels"
#: Upstream openenv==0.10.0 in a venv of its own (its import name is also ``openenv``). .ci/run keeps it
#: outside the checkout (OPENENV_UPSTREAM_VENV) so a fresh clone on a warm machine reuses it.
UPSTREAM_VENV = Path(os.environ.get("OPENENV_UPSTREAM_VENV") or ROOT / ".nox" / "upstream-openenv-0.10")
#: Extras a package's own tests exercise, installed with it in ``packages`` (pygame draws gymnasium's
#: classic-control images; the test of the refusal without it simulates the missing module).
PACKAGE_TEST_EXTRAS = {"gymnasium": "[classic-control]", "gateway": "[test,parquet]", "harbor": "[swegen]"}
#: The package tests ``integration`` runs with everything installed: those that need another package
#: of the repo (``@pytest.mark.requires_plugins``, conftest.py) and the web page's browser tests
#: (``playwright``: installed only there; ``packages`` deselects them). Every other package test,
#: miniwob's Chromium tests included, runs once, in ``kernel``/``packages``.
INTEGRATION_PACKAGE_TESTS = ("requires_plugins", "playwright")
#: What ``wheel_install`` installs from those wheels: the kernel, one transport, one env.
WHEEL_INSTALL_DISTS = ["openenvkit", "openenvkit-serve-uvicorn", "openenvkit-transport-ws", "openenvkit-rubrics",
                       "openenvkit-env-echo"]


def _members() -> list[Path]:
    return sorted(p.parent for p in ROOT.glob("*/*/pyproject.toml") if p.parent.parent.name in {"plugins", "envs"})


def _editable(*paths: Path | str) -> list[str]:
    args: list[str] = []
    for p in paths:
        args += ["-e", str(p)]
    return args


@nox.session(python="3.11")
def lint(session: nox.Session) -> None:
    """Ruff lint over the whole repository."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")


@nox.session(python="3.11")
def typecheck(session: nox.Session) -> None:
    """Mypy over the kernel and every plugin/env package."""
    # pytest too: the testing helpers (openenv.testing, provider fixtures) are typed against it.
    session.install("mypy>=1.10", PYTEST, *_editable(ROOT / "kernel", *_members()))
    # OPENENV_MYPY_CACHE_DIR: a cache outside the checkout (.ci/run keeps one in /var/cache/openenv),
    # so a fresh clone checks only what changed (mypy compares file hashes: nothing stale is trusted).
    cache = os.environ.get("OPENENV_MYPY_CACHE_DIR")
    session.run("mypy", *(["--cache-dir", cache] if cache else []), "kernel/src", *[str(m / "src") for m in _members()])


@nox.session(python="3.11")
def kernel(session: nox.Session) -> None:
    """Kernel tests with no plugin installed: proves the kernel stands alone."""
    # numpy and Pillow only make and read the test images of openenv.images (whose array input
    # imports numpy lazily); no kernel module needs them.
    session.install(*TEST_DEPS, "numpy", "pillow", *_editable(ROOT / "kernel"))
    session.run("pytest", "kernel/tests", DURATIONS, *session.posargs, env=STRICT)


def _ci_services_state() -> str | None:
    """Where .ci/run's background services stand: ``"ok"`` when they are up (or when not under
    .ci/run, where the services are whatever this machine has), ``None`` while they are still
    starting, otherwise what failed (the verdict file that OPENENV_CI_SERVICES names)."""
    verdict_file = os.environ.get("OPENENV_CI_SERVICES")
    if not verdict_file:
        return "ok"
    if not Path(verdict_file).exists():
        return None
    return Path(verdict_file).read_text(encoding="utf-8").strip()


def _wait_for_ci_services(session: nox.Session) -> None:
    """.ci/run starts Docker, Kubernetes, the registry and Chromium in the background while the
    sessions that need none of them (lint, typecheck, kernel) run; a session that needs them waits
    here for the verdict file it names in OPENENV_CI_SERVICES ("ok", or what failed). Bounded by
    OPENENV_CI_SERVICES_WAIT_S (default one hour: a fresh machine builds Kubernetes first)."""
    wait_s = float(os.environ.get("OPENENV_CI_SERVICES_WAIT_S", "3600"))
    deadline = time.monotonic() + wait_s
    logged = False
    while (verdict := _ci_services_state()) is None:
        verdict_file = os.environ.get("OPENENV_CI_SERVICES")
        if time.monotonic() > deadline:
            session.error(f"the CI services were not ready within {wait_s:g}s ({verdict_file} was never "
                          "written): see .ci/run's log of the services phases")
        if not logged:
            session.log(f"waiting for .ci/run's services (Docker, Kubernetes, registry, Chromium): {verdict_file}")
            logged = True
        time.sleep(2)
    if verdict != "ok":
        session.error(f"the CI services did not start ({verdict}): see .ci/run's log of that phase")


#: Markers whose tests use a machine-wide engine: packages with such tests are tested one after
#: another on one worker of ``packages`` (their before/after counts must see no other package's).
ENGINE_MARKS = ("pytest.mark.docker", "pytest.mark.kubernetes", "pytest.mark.slurm", "pytest.mark.bwrap")
#: Markers whose tests need one of .ci/run's background services but no machine-wide count (the
#: browser): such packages wait for the services, then run on any worker.
SERVICE_MARKS = ("pytest.mark.browser",)


#: The packages whose own tests take longest in ``packages`` (about 80 s down to 15 s on 2 cores,
#: measured in .ci/run), handed out first; the others follow in name order.
SLOW_PACKAGES = ["miniwob", "gateway", "transport-ws", "jupyter", "reasoning_gym", "provider-aca", "coding",
                 "transport-rest", "sandbox", "provider-daytona", "mujoco", "openspiel", "transport-mcp"]


def _has_marks(member: Path, marks: tuple[str, ...]) -> bool:
    """Whether a test file of ``member`` names one of ``marks``."""
    return any(mark in f.read_text(encoding="utf-8") for f in (member / "tests").rglob("*.py") for mark in marks)


@nox.session(python="3.11")
def packages(session: nox.Session) -> None:
    """Each plugin/env package's own tests, each with only the kernel and that package installed.

    Two workers (``OPENENV_TEST_WORKERS``), each with a venv of its own that holds the kernel and
    one package at a time (installed, tested, uninstalled). The packages whose tests use Docker,
    Kubernetes, Slurm or bubblewrap go to the first worker, one after another; each package's
    output is printed whole when it finishes. Under .ci/run the packages that need none of its
    background services (engines, Chromium) start at once, and those that need them wait until the
    services are up: on a fresh machine, where Kubernetes is built first, the workers are not idle
    meanwhile.
    """
    import contextlib
    import queue
    import subprocess
    import threading

    session.install(*TEST_DEPS, *_editable(ROOT / "kernel"))
    members = [m for m in _members() if (m / "tests").is_dir()]
    engine = [m for m in members if _has_marks(m, ENGINE_MARKS)]
    if unknown := sorted(set(SLOW_PACKAGES) - {m.name for m in members}):
        session.error(f"SLOW_PACKAGES names no package with tests: {unknown} (noxfile.py)")
    # The longest first, so that two workers end together instead of one waiting on a late long one.
    shared: queue.Queue[Path] = queue.Queue()  # need no service: start at once
    later: queue.Queue[Path] = queue.Queue()  # need a service (the browser) but no engine count
    for m in sorted((m for m in members if m not in engine),
                    key=lambda m: SLOW_PACKAGES.index(m.name) if m.name in SLOW_PACKAGES else len(SLOW_PACKAGES)):
        (later if _has_marks(m, SERVICE_MARKS) else shared).put(m)
    workers = 1 if WORKERS in ("0", "1") else max(1, int(WORKERS))
    python = str(Path(session.virtualenv.location) / "bin" / "python")
    lock = threading.Lock()
    failed: list[str] = []
    # playwright is installed only in the integration session: the web page's browser tests (marked
    # playwright) run there and are deselected here. Other browser tests (miniwob's, through Selenium)
    # run here, required in CI (.ci/run exports OPENENV_REQUIRE_BROWSER=1). Tests marked
    # requires_plugins (they need another package of the repo) skip here, and run in integration.
    env = {**os.environ, **STRICT}

    def sh(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(args), cwd=ROOT, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)

    def test_one(venv: Path, member: Path) -> None:
        started = time.monotonic()
        py = str(venv / "bin" / "python")
        steps = [("uv", "pip", "install", "-q", "--python", py, "-e", str(ROOT / "kernel"),
                  "-e", f"{member}{PACKAGE_TEST_EXTRAS.get(member.name, '')}"),
                 (py, "-m", "pytest", str(member / "tests"), "-m", "not playwright", DURATIONS, *session.posargs)]
        out, code = [], 0
        for step in steps:
            done = sh(*step)
            out.append(done.stdout + done.stderr)
            if done.returncode != 0:
                code = done.returncode
                break
        sh("uv", "pip", "uninstall", "-q", "--python", py, _dist_name(member))
        with lock:
            status = "ok" if code == 0 else f"FAILED (exit {code})"
            print(f"--- {member.relative_to(ROOT)}: {status} in {time.monotonic() - started:.0f} s", flush=True)
            print("".join(out).rstrip(), flush=True)
            if code != 0:
                failed.append(str(member.relative_to(ROOT)))

    def worker(index: int, first: list[Path]) -> None:
        venv = Path(session.virtualenv.location) / "workers" / f"w{index}"
        py = str(venv / "bin" / "python")
        made = sh("uv", "venv", "-q", "--python", python, str(venv)) if not Path(py).exists() else None
        if made is None or made.returncode == 0:
            made = sh("uv", "pip", "install", "-q", "--python", py, *TEST_DEPS, "-e", str(ROOT / "kernel"))
        if made.returncode:
            with lock:
                failed.append(f"worker {index} venv: {made.stdout}{made.stderr}")
            return
        todo = list(first)
        while True:
            state = _ci_services_state()
            if state not in (None, "ok"):
                with lock:
                    failed.append(f"worker {index}: the CI services did not start ({state}): see .ci/run's log")
                return
            member = None
            if state == "ok" and todo:
                member = todo.pop(0)
            if member is None and state == "ok":
                with contextlib.suppress(queue.Empty):
                    member = later.get_nowait()
            if member is None:
                with contextlib.suppress(queue.Empty):
                    member = shared.get_nowait()
            if member is None:
                if state == "ok" or (not todo and later.empty()):
                    return  # nothing left for this worker
                if not waiting.is_set():
                    waiting.set()
                    session.log("waiting for .ci/run's services (Docker, Kubernetes, registry, Chromium): "
                                f"{os.environ.get('OPENENV_CI_SERVICES')}")
                if time.monotonic() > services_deadline:
                    with lock:
                        failed.append("the CI services were not ready in time (OPENENV_CI_SERVICES_WAIT_S)")
                    return
                time.sleep(2)
                continue
            try:
                test_one(venv, member)
            except Exception as exc:  # a broken step must fail the session, never vanish with its thread
                with lock:
                    failed.append(f"{member.relative_to(ROOT)} ({type(exc).__name__}: {exc})")

    waiting = threading.Event()  # logged once
    services_deadline = time.monotonic() + float(os.environ.get("OPENENV_CI_SERVICES_WAIT_S", "3600"))
    session.log(f"{len(members)} packages on {workers} worker(s); with a machine-wide engine, one after another: "
                f"{', '.join(m.name for m in engine) or 'none'}")
    threads = [threading.Thread(target=worker, args=(i, engine if i == 0 else []), daemon=True)
               for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failed:
        session.error(f"package tests failed: {', '.join(failed)}")


def _dist_name(member: Path) -> str:
    import tomllib

    return tomllib.loads((member / "pyproject.toml").read_text())["project"]["name"]


@nox.session(python="3.11")
def integration(session: nox.Session) -> None:
    """Everything installed together: the cross-package tests in tests/, plus the package tests that
    need a second plugin (``@pytest.mark.requires_plugins``, e.g. MCP over the /ws tunnel) or the
    browser; the rest of each package's tests ran in ``kernel``/``packages`` and are not repeated."""
    # playwright drives Debian's chromium for the web page's tests (never a browser of its own);
    # huggingface_hub: `openenv push --hf-space` is tested against a local HTTP server (tests/author).
    # opentelemetry-sdk: the metrics plugin's spans are checked with the SDK's in-memory exporter.
    session.install(*TEST_DEPS, "pytest-xdist>=3.5", "playwright>=1.40", "huggingface_hub>=0.23",
                    "opentelemetry-sdk>=1.20", *_editable(ROOT / "kernel", *_members()),
                    # the rollouts package's Gymnasium adapter and datasets/Parquet output
                    "-e", f"{ROOT / 'plugins' / 'rollouts'}[gym,hf]",
                    # the gateway's cross-package tests drive it with the real openai SDK and write Parquet
                    "-e", f"{ROOT / 'plugins' / 'gateway'}{PACKAGE_TEST_EXTRAS['gateway']}",
                    # pygame for the gymnasium env's image renders (CartPole, FrozenLake, ...)
                    "-e", f"{ROOT / 'envs' / 'gymnasium'}[classic-control]")
    # In CI (.ci/run installs chromium) the browser tests must run: a missing browser fails them.
    # (.ci/run also exports OPENENV_REQUIRE_BROWSER=1, which reaches this session unchanged).
    browser = {"OPENENV_REQUIRE_BROWSER": "1"} if os.environ.get("CI") else {}
    _wait_for_ci_services(session)
    # tests/compat* marked compat need upstream's venv: the compat session runs them. One pytest run
    # for tests/ and the package tests that need the whole install (conftest.py keeps only those
    # marked INTEGRATION_PACKAGE_TESTS; none kept fails the run: the markers must have gone), so the
    # engine tests of both share one queue while the other worker goes on with everything else.
    # Everything is installed here, so a requires_plugins test whose plugin is missing fails.
    package_tests = ["kernel/tests", *[str(m / "tests") for m in _members() if (m / "tests").is_dir()]]
    session.run("pytest", "tests", *package_tests, "-m", "not compat", *_parallel(INTEGRATION_WORKERS), DURATIONS,
                *session.posargs,
                env={**STRICT, **browser, "OPENENV_REQUIRE_PLUGINS": "1",
                     "OPENENV_PACKAGE_TESTS": ",".join(INTEGRATION_PACKAGE_TESTS)})


@nox.session(python="3.11")
def podman(session: nox.Session) -> None:
    """The docker provider's engine tests (contract, run/stop, hardening, ps/gc) against Podman's
    Docker-compatible API: start it with ``bash .ci/podman-setup.sh`` (rootful, Unix socket only).
    Skips without it, fails instead with OPENENV_REQUIRE_DOCKER=1 (as CI sets)."""
    socket = os.environ.get("OPENENV_PODMAN_SOCKET", "/run/podman/podman.sock")
    session.install(*TEST_DEPS, *_editable(ROOT / "kernel", ROOT / "plugins" / "provider-docker"))
    session.run("pytest", "plugins/provider-docker/tests/test_docker_provider.py", DURATIONS, *session.posargs,
                env={**STRICT, "DOCKER_HOST": f"unix://{socket}"})


@nox.session(python="3.11")
def compat(session: nox.Session) -> None:
    """Drive our server with upstream openenv==0.10.0's clients and upstream's server with ours.

    Upstream's import name is also ``openenv``, so it lives in a venv of its own under .nox/.
    """
    # fastapi: upstream env apps add FastAPI routes to create_app's app (tests/compat_layer).
    # pytest-xdist: two workers (OPENENV_TEST_WORKERS); the tests wait on servers half of the time.
    session.install(*TEST_DEPS, "pytest-xdist>=3.5", "-e", f"{ROOT / 'kernel'}[fastapi]", *_editable(*_members()))
    _upstream_venv(session)
    session.run("pytest", "tests/compat", "tests/compat_layer", "-m", "compat", *_parallel(), DURATIONS,
                *session.posargs,
                env={**STRICT, "OPENENV_UPSTREAM_PYTHON": str(UPSTREAM_VENV / "bin" / "python")})


@nox.session(python="3.11")
def upstream_providers(session: nox.Session) -> None:
    """Real provider packages from the index written for upstream (openenv-sprites, openenv-openshell).

    They require upstream's ``openenv`` distribution, which our kernel stands in for: they are
    installed with ``--no-deps`` and their other dependencies listed here (docs/coming-from-openenv.md).
    Their clouds are local stand-ins (tests/compat_providers): the Sprites API, and an OpenShell
    gateway built from the ``openshell`` SDK's own gRPC modules.
    """
    session.install(*TEST_DEPS, "-e", f"{ROOT / 'kernel'}[fastapi]", *_editable(*_members()),
                    "sprites-py>=0.5.0", "websockets>=15.0.1", "uvicorn>=0.30",
                    "httpx>=0.28,<0.29", "pyyaml>=6.0.3,<7",
                    # openenv-openshell's gateway SDK (not among its declared requirements), with its own.
                    "openshell==0.1.2")
    session.install("--no-deps", "openenv-sprites==0.2.0", "openenv-openshell==0.1.1")
    session.run("pytest", "tests/compat_providers", "-m", "compat", DURATIONS, *session.posargs, env=STRICT)


def _upstream_venv(session: nox.Session) -> None:
    """Create UPSTREAM_VENV with openenv==0.10.0 unless it is already there."""
    if not (UPSTREAM_VENV / "bin" / "python").exists():
        session.run("uv", "venv", "-q", "--python", "3.11", str(UPSTREAM_VENV), external=True)
        session.run("uv", "pip", "install", "-q", "--python", str(UPSTREAM_VENV / "bin" / "python"),
                    "openenv==0.10.0", external=True)


#: The rows of ``nox -s bench`` (``-- --only=NAME,...`` / ``--skip=NAME,...`` pick some): ``main`` is
#: ``python -m bench`` (our server vs a bare ASGI echo and upstream 0.10), the others are
#: ``bench.NAME``. The feature rows each print their ratio against a reference measured in the same
#: run: rubrics on the step path and judge throughput; the sandbox vs a fresh interpreter; collect vs
#: raw stepping; a bystander's p99 beside hung sessions; a blocking env call's thread hop vs asyncio's
#: run_in_executor; Ray-placed vs local servers; Pod launch, warm pool and port-forward vs direct (with
#: the cluster of .ci/k8s-setup.sh); a click on the web page and MiniWoB's steps/s and memory per
#: session (both need Debian's chromium); per-env reset/step cost; coding's grading recorded and
#: replayed outside the solution's process vs in one process.
BENCH_ROWS = ["main", "rubrics", "sandbox", "collect", "evaluate", "hardening", "wsmemory", "envhop", "ray_provider",
              "catalog2", "pool", "workers", "fork", "hpc_providers", "gateway", "harbor", "swegen", "images",
              "codinggrade", "k8s_provider", "web", "miniwob", "envcost"]
#: Rows that need Debian's chromium.
BROWSER_ROWS = ("web", "miniwob")


def _bench_selection(session: nox.Session) -> tuple[list[str], list[str]]:
    """The rows ``--only=``/``--skip=`` select (in BENCH_ROWS order), and the other posargs."""
    import difflib

    only: set[str] | None = None
    skip: set[str] = set()
    rest: list[str] = []
    for arg in session.posargs:
        name, _, value = arg.partition("=")
        if name not in ("--only", "--skip"):
            rest.append(arg)
            continue
        names = {v.strip().removeprefix("bench.") for v in value.split(",") if v.strip()}
        for unknown in sorted(names - set(BENCH_ROWS)):
            close = difflib.get_close_matches(unknown, BENCH_ROWS, n=1)
            session.error(f"{name}: no benchmark row {unknown!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                          + f"; the rows: {', '.join(BENCH_ROWS)}")
        if name == "--only":
            only = (only or set()) | names
        else:
            skip |= names
    return [r for r in BENCH_ROWS if (only is None or r in only) and r not in skip], rest


@nox.session(python="3.11")
def bench(session: nox.Session) -> None:
    """Benchmark our server against a bare ASGI echo (the transport limit) and upstream 0.10, and
    each feature against a reference measured in the same run (BENCH_ROWS).

    ``nox -s bench`` is the full run (3 rounds, then 2,048 sessions held 60 s, ~10 min);
    ``-- --quick`` the quick version CI runs; ``-- --scale`` only the scale test;
    ``-- --only=k8s_provider,ray_provider`` / ``-- --skip=...`` some rows. Prints ratio tables and
    writes JSON under bench-results/. See bench/README.md for what each number means.
    """
    # coverage: bench.swegen generates tasks (openenvkit-harbor's [swegen] extra: coverage and pytest)
    session.install(*TEST_DEPS, "coverage>=7.5", *_editable(ROOT / "kernel", *_members()))
    rows, args = _bench_selection(session)
    if not any(arg.startswith("--only=") for arg in session.posargs):  # a run of some rows only skips them
        session.run("pytest", "-q", "bench/tests")  # the benchmark's own parts
    upstream = UPSTREAM_VENV
    try:
        _upstream_venv(session)
    except nox.command.CommandFailed:
        session.warn("could not create upstream's venv: the benchmark skips the upstream target")
    upstream_env = {"OPENENV_UPSTREAM_PYTHON": str(upstream / "bin" / "python")}
    quick = ["--quick"] if "--quick" in args else []
    browser = Path("/usr/bin/chromium").exists()
    if browser and any(r in BROWSER_ROWS for r in rows):
        session.install("playwright>=1.40")
    spent: list[tuple[str, float]] = []
    for name in rows:
        if name == "k8s_provider" and not (os.environ.get("KUBECONFIG")
                                           or Path("/var/cache/openenv/k8s/kubeconfig").exists()):
            session.warn("no Kubernetes cluster (KUBECONFIG, .ci/k8s-setup.sh): skipping the k8s_provider row")
            continue
        if name in BROWSER_ROWS and not browser:
            session.warn(f"no /usr/bin/chromium: skipping the {name} row")
            continue
        if name == "main":
            command = ["-m", "bench", *args]
        elif name == "envcost":
            command = ["-m", "bench.envcost", *(["--budget-s", "1"] if quick else [])]
        else:
            command = ["-m", f"bench.{name}", *quick]
        started = time.monotonic()
        session.run("python", *command, env=upstream_env)  # collect's upstream row needs upstream's interpreter
        spent.append((name, time.monotonic() - started))
    # What each part of the benchmark cost, so that keeping .ci/run fast has numbers to go by (not
    # in an --install-only pass, where nothing ran).
    if sum(t for _, t in spent) >= 1:
        by_time = sorted(spent, key=lambda r: -r[1])
        session.log("benchmark time per row (s): " + ", ".join(f"{m} {t:.0f}" for m, t in by_time))


@nox.session(python=False)
def wheels(session: nox.Session) -> None:
    """Build the wheel of every distribution (kernel, plugins, envs) into .nox/_wheels/."""
    import shutil

    shutil.rmtree(WHEELS, ignore_errors=True)
    session.run("uv", "build", "--all-packages", "--wheel", "--quiet", "--out-dir", str(WHEELS), external=True)
    built = sorted(p.name for p in WHEELS.glob("*.whl"))
    expected = {_dist_name(m).replace("-", "_") for m in [ROOT / "kernel", *_members()]}
    missing = expected - {name.split("-")[0] for name in built}
    if missing:
        session.error(f"no wheel was built for: {', '.join(sorted(missing))}")
    session.log(f"{len(built)} wheels in {WHEELS.relative_to(ROOT)}: {', '.join(built)}")


@nox.session(python=False)
def wheel_install(session: nox.Session) -> None:
    """Install kernel + ws transport + echo env from the wheels of ``nox -s wheels`` into a fresh
    venv (our distributions from those files only; third-party dependencies from the index), then
    serve echo with the installed console script and play an episode against it."""
    import tempfile

    wheel_files = []
    for dist in WHEEL_INSTALL_DISTS:
        found = sorted(WHEELS.glob(f"{dist.replace('-', '_')}-*.whl"))
        if not found:
            session.error(f"no wheel for {dist} in {WHEELS}: run `nox -s wheels` first")
        wheel_files.append(str(found[-1]))
    with tempfile.TemporaryDirectory(prefix="openenv-wheel-install-") as tmp:
        venv = Path(tmp) / "venv"
        python = str(venv / "bin" / "python")
        clean = {"VIRTUAL_ENV": None, "PYTHONPATH": None, "UV_PROJECT_ENVIRONMENT": None}
        session.run("uv", "venv", "-q", "--python", "3.11", str(venv), external=True, env=clean)
        # Wheel files as requirements: our distributions cannot come from anywhere else, and their
        # dependencies on each other (openenvkit>=0.1,<0.2) are satisfied by these files.
        session.run("uv", "pip", "install", "-q", "--python", python, *wheel_files, external=True, env=clean)
        # Run from outside the checkout so nothing of the source tree is importable.
        with session.chdir(tmp):
            session.run(python, str(ROOT / "tests" / "packaging" / "wheel_smoke.py"), "--wheels", str(WHEELS),
                        external=True, env=clean)


@nox.session(python="3.11")
def verifiers(session: nox.Session) -> None:
    """verifiers' own OpenEnv taskset (``vf-eval`` on ``verifiers.v1.tasksets.openenv``) against our envs.

    grid_world served and started through ``GenericEnvClient.from_env``, echo_mcp as a tool env; the
    model is a local scripted OpenAI-compatible server (tests/verifiers). About two minutes. Not in
    the default set (verifiers pulls in transformers); .ci/run runs it. Also ``openenv import
    verifiers:<module>`` (plugins/import-verifiers): a taskset imported, installed and served. verifiers is pinned: its
    OpenEnv taskset changes between releases, and this session tests the one named here.
    """
    session.install(*TEST_DEPS, "verifiers==0.4.0",
                    *_editable(ROOT / "kernel", ROOT / "plugins" / "transport-ws", ROOT / "plugins" / "provider-local",
                               ROOT / "plugins" / "rubrics", ROOT / "envs" / "grid_world", ROOT / "envs" / "echo_mcp",
                               ROOT / "plugins" / "import-verifiers"))
    session.run("pytest", "tests/verifiers", DURATIONS, *session.posargs, env=STRICT)


@nox.session(python="3.11")
def verifiers_legacy(session: nox.Session) -> None:
    """``openenv import verifiers:<module>`` on a module with verifiers' old ``load_environment()``
    API, installed from the index: staros-stardata's ``stardata.envs.constraint_gym`` (a
    ``vf.SingleTurnEnv`` whose dataset is built in code, scored by a deterministic rubric) imported,
    installed, served, played and checked by ``openenv validate`` (tests/verifiers/test_import_legacy.py).
    A session of its own: the old API needs verifiers 0.1 (0.4 ships only ``verifiers.v1``), and one
    venv holds one verifiers. Both pinned: the session tests the releases named here. Not in the
    default set (verifiers pulls in datasets, openai, mcp); .ci/run runs it.
    """
    session.install(*TEST_DEPS, "verifiers==0.1.9.post3", "staros-stardata[env]==0.1.1",
                    *_editable(ROOT / "kernel", ROOT / "plugins" / "transport-ws", ROOT / "plugins" / "provider-local",
                               ROOT / "plugins" / "import-verifiers"))
    session.run("pytest", "tests/verifiers/test_import_legacy.py", DURATIONS, *session.posargs, env=STRICT)


@nox.session(python="3.11")
def ors(session: nox.Session) -> None:
    """``openenv import ors:PATH_OR_MODULE`` (plugins/import-verifiers): an ORS environment written
    against the real ``openreward`` package (tests/ors/arith_ors.py) imported, installed, served and
    played, and checked by ``openenv validate``. Not in the default set (openreward pulls in the
    OpenAI, Anthropic and Google SDKs); .ci/run runs it. openreward is pinned: the session tests the
    ORS API of the release named here.
    """
    session.install(*TEST_DEPS, "openreward==0.1.167",
                    *_editable(ROOT / "kernel", ROOT / "plugins" / "transport-ws", ROOT / "plugins" / "provider-local",
                               ROOT / "plugins" / "import-verifiers"))
    session.run("pytest", "tests/ors", DURATIONS, *session.posargs, env=STRICT)


@nox.session(python="3.11", venv_backend="venv")
def trl(session: nox.Session) -> None:
    """The TRL adapter under TRL's real GRPOTrainer (CPU, a tiny model built in the test, no download).

    A pip venv: pip finds the machine's local CPU wheel of torch 2.13.0 (uv would fetch a CUDA build).
    Not in the default set (it installs torch and transformers); .ci/run runs it.
    """
    session.install("torch==2.13.0")
    session.install(*TEST_DEPS, *_editable(ROOT / "kernel", ROOT / "plugins" / "transport-ws",
                                            ROOT / "plugins" / "provider-local", ROOT / "plugins" / "rubrics",
                                            ROOT / "envs" / "grid_world", ROOT / "envs" / "echo",
                                            ROOT / "envs" / "echo_mcp"),
                    "-e", f"{ROOT / 'plugins' / 'rollouts'}[trl]")
    session.run("pytest", "tests/trl", DURATIONS, *session.posargs, env=STRICT)



@nox.session(python="3.11", venv_backend="venv")
def gateway(session: nox.Session) -> None:
    """The capture gateway in front of a real tiny model (tests/gateway) with the openai and anthropic SDKs,
    end to end with a command-harness agent and the echo env, mini-swe-agent on a coding task, and under
    TRL's GRPOTrainer.

    The model server (``openenv_gateway.testing.model_server``) builds a 2-layer transformers model
    and a BPE tokenizer on the spot (nothing downloaded). A pip venv, as ``trl``: pip finds the
    machine's local CPU wheel of torch 2.13.0. Not in the default set (torch); .ci/run runs it.
    """
    session.install("torch==2.13.0")
    # the end-to-end tests play the served echo env and the coding env's test split (local provider,
    # ws transport, rubrics, the sandbox) and write openenv.rollout/3 records (rollouts)
    session.install(*TEST_DEPS, *_editable(ROOT / "kernel", ROOT / "plugins" / "transport-ws",
                                            ROOT / "plugins" / "provider-local", ROOT / "plugins" / "rubrics",
                                            ROOT / "plugins" / "sandbox", ROOT / "envs" / "echo",
                                            ROOT / "envs" / "coding"),
                    "-e", f"{ROOT / 'plugins' / 'rollouts'}[trl]",  # GRPOTrainer runs the black-box rollout_func
                    # miniswe: mini-swe-agent from the package index, the third-party agent of test_miniswe.py
                    "-e", f"{ROOT / 'plugins' / 'gateway'}[testmodel,test,parquet,agents,miniswe]")
    session.run("pytest", "tests/gateway", DURATIONS, *session.posargs,
                env={**STRICT, "OPENENV_REQUIRE_TESTMODEL": "1"})
