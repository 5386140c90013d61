"""Developer tasks. ``nox -l`` lists them; ``nox`` runs the default set that CI runs.

Each session installs what it needs into its own virtual environment with uv, from the local
folders, so the kernel is always this checkout's (never upstream's ``openenv`` from PyPI).
"""

from __future__ import annotations

from pathlib import Path

import nox

ROOT = Path(__file__).parent
nox.options.default_venv_backend = "uv"
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True
nox.options.sessions = ["lint", "typecheck", "kernel", "packages", "integration", "compat"]

TEST_DEPS = ["pytest>=8", "pytest-asyncio>=0.24", "httpx>=0.27", "websockets>=13"]
STRICT = {"OPENENV_STRICT_PLUGINS": "1"}


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
    session.install("mypy>=1.10", "pytest>=8", *_editable(ROOT / "kernel", *_members()))
    session.run("mypy", "kernel/src", *[str(m / "src") for m in _members()])


@nox.session(python="3.11")
def kernel(session: nox.Session) -> None:
    """Kernel tests with no plugin installed: proves the kernel stands alone."""
    session.install(*TEST_DEPS, *_editable(ROOT / "kernel"))
    session.run("pytest", "kernel/tests", *session.posargs, env=STRICT)


@nox.session(python="3.11")
def packages(session: nox.Session) -> None:
    """Each plugin/env package's own tests, each with only the kernel and that package installed."""
    session.install(*TEST_DEPS, *_editable(ROOT / "kernel"))
    for member in _members():
        if not (member / "tests").is_dir():
            continue
        session.log(f"--- {member.relative_to(ROOT)}")
        # uninstall the previous member so each one is tested alone
        session.run("uv", "pip", "install", "-q", *_editable(ROOT / "kernel", member), external=True,
                    silent=True)
        session.run("pytest", str(member / "tests"), *session.posargs, env=STRICT)
        dist = _dist_name(member)
        session.run("uv", "pip", "uninstall", "-q", dist, external=True, silent=True)


def _dist_name(member: Path) -> str:
    import tomllib

    return tomllib.loads((member / "pyproject.toml").read_text())["project"]["name"]


@nox.session(python="3.11")
def integration(session: nox.Session) -> None:
    """Everything installed together: the cross-package tests in tests/ plus every package's own
    tests again, so tests that need a second plugin (e.g. MCP over the /ws tunnel) run too."""
    session.install(*TEST_DEPS, *_editable(ROOT / "kernel", *_members()))
    session.run("pytest", "tests", "kernel/tests", *[str(m / "tests") for m in _members() if (m / "tests").is_dir()],
                *session.posargs, env=STRICT)


@nox.session(python="3.11")
def compat(session: nox.Session) -> None:
    """Drive our server with upstream openenv==0.10.0's clients and upstream's server with ours.

    Upstream's import name is also ``openenv``, so it lives in a venv of its own under .nox/.
    """
    session.install(*TEST_DEPS, *_editable(ROOT / "kernel", *_members()))
    upstream = ROOT / ".nox" / "upstream-openenv-0.10"
    if not (upstream / "bin" / "python").exists():
        session.run("uv", "venv", "-q", "--python", "3.11", str(upstream), external=True)
        session.run("uv", "pip", "install", "-q", "--python", str(upstream / "bin" / "python"),
                    "openenv==0.10.0", external=True)
    session.run("pytest", "tests/compat", "tests/compat_layer", "-m", "compat", *session.posargs,
                env={**STRICT, "OPENENV_UPSTREAM_PYTHON": str(upstream / "bin" / "python")})


@nox.session(python="3.11")
def bench(session: nox.Session) -> None:
    """Benchmark our server against a bare ASGI echo (the transport limit) and upstream 0.10.

    ``nox -s bench`` is the full run (3 rounds, then 2,048 sessions held 60 s, ~10 min);
    ``-- --quick`` the ~30 s version CI runs; ``-- --scale`` only the scale test. Prints ratio tables
    and writes JSON under bench-results/. See bench/README.md for what each number means.
    """
    session.install(*TEST_DEPS, *_editable(ROOT / "kernel", *_members()))
    session.run("pytest", "-q", "bench/tests")  # the benchmark's own parts, in well under a second
    upstream = ROOT / ".nox" / "upstream-openenv-0.10"
    if not (upstream / "bin" / "python").exists():
        try:
            session.run("uv", "venv", "-q", "--python", "3.11", str(upstream), external=True)
            session.run("uv", "pip", "install", "-q", "--python", str(upstream / "bin" / "python"),
                        "openenv==0.10.0", external=True)
        except nox.command.CommandFailed:
            session.warn("could not create upstream's venv: the benchmark skips the upstream target")
    session.run("python", "-m", "bench", *session.posargs,
                env={"OPENENV_UPSTREAM_PYTHON": str(upstream / "bin" / "python")})
