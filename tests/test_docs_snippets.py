"""Every ```bash / ```python / ```console block of README.md and docs/*.md is executed by the tests.

Each such block either runs here, in order, file by file, or carries an annotation on the line right
before its fence that says why not, which this module reads and checks:

* ``<!-- snippet: skip reason="..." -->``: not run; the reason is required and printed.
* ``<!-- snippet: ran-by="tests/x.py::test_name" -->``: another test runs it (with the setup it
  needs: TRL, a tutorial folder, CI services); that test must exist. ``ran-by=".ci/run"``: CI runs
  it, and every command line of the block must appear verbatim in that script.
* ``<!-- snippet: serve -->``: a ``bash`` block that starts a server; it is started in the
  background here (``--port 8000`` becomes a free port) until the next ``serve`` block or the end
  of the file, and later blocks of the file that name ``127.0.0.1:8000`` reach it.
* ``<!-- snippet: continues -->``: a ``python`` block that needs the previous python block of the
  file (its imports, its definitions): the two run as one script.
* ``<!-- snippet: excerpt-of="templates/x/y.py" -->``: a fragment of a file the tests run (a
  template package, the hook specs): its code must appear in that file, in order (``...`` elides,
  whitespace and trailing comments are ignored), so the page cannot drift from the tested code.
* ``<!-- snippet: needs=docker|slurm|bwrap|kubernetes|ray -->``: run only where that engine
  answers (the test skips without it, or fails under ``OPENENV_REQUIRE_<NAME>=1``, as in CI);
  ``kubernetes`` is the test cluster of ``.ci/k8s-setup.sh`` (its kubeconfig in ``KUBECONFIG``),
  ``ray`` needs the ray provider installed (the command starts a local Ray on 127.0.0.1).
* ``<!-- snippet: needs=llm -->``: an OpenAI-compatible server (``openenv_rubrics.testing``'s
  scripted one) stands in for ``http://127.0.0.1:8001/v1``.

An unannotated block runs: ``python`` with this interpreter, ``bash`` with ``bash -eo pipefail``,
both in a temp folder with this interpreter's ``bin`` first on ``PATH``; ``uv run --no-dev
--all-packages `` before a command is dropped (this interpreter has every workspace package; running
uv here would sync the venv the tests run in). A block that fails fails the test, so no snippet can
silently rot.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = {"bash", "sh", "shell", "console", "python"}
KEYS = {"skip", "reason", "ran-by", "excerpt-of", "serve", "continues", "needs"}
NEEDS = {"docker", "slurm", "bwrap", "kubernetes", "ray", "llm"}
_FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
_NOTE = re.compile(r"<!--\s*snippet:(?P<note>.*?)-->\s*$", re.S)
_UV_RUN = "uv run --no-dev --all-packages "
_PORT = "127.0.0.1:8000"
_LLM = "http://127.0.0.1:8001/v1"


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    body: str
    note: dict[str, str] = field(default_factory=dict)
    note_error: str = ""

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def _parse_note(text: str) -> tuple[dict[str, str], str]:
    try:
        words = shlex.split(text)
    except ValueError as exc:
        return {}, f"unreadable annotation {text.strip()!r}: {exc}"
    note = {}
    for word in words:
        key, _, value = word.partition("=")
        if key not in KEYS:
            return {}, f"unknown annotation key {key!r} (known: {', '.join(sorted(KEYS))})"
        note[key] = value
    return note, ""


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of ``path`` whose language is run, each with the annotation before it."""
    text = path.read_text(encoding="utf-8")
    out = []
    for match in _FENCE.finditer(text):
        words = match["info"].split()
        lang = words[0] if words else ""
        if lang not in RUNNABLE:
            continue
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        found = _NOTE.search(before)
        note, error = _parse_note(found["note"]) if found else ({}, "")
        out.append(Block(path, text.count("\n", 0, match.start()) + 1, lang, match["body"], note, error))
    return out


ALL = [b for path in DOCS for b in blocks(path)]


# -- the annotations are well-formed and true ------------------------------------------------------


def _problem(block: Block) -> str:
    note = block.note
    if block.note_error:
        return block.note_error
    if "skip" in note and not note.get("reason", "").strip():
        return 'a skipped block needs a reason: <!-- snippet: skip reason="why it cannot run here" -->'
    if "reason" in note and "skip" not in note:
        return "reason= goes with skip"
    if "needs" in note and note["needs"] not in NEEDS:
        return f"needs={note['needs']!r} is not one of {sorted(NEEDS)}"
    if "serve" in note and block.lang != "bash":
        return "only a bash block can be a serve block"
    if "continues" in note and block.lang != "python":
        return "only a python block continues the previous one"
    if "ran-by" in note and "excerpt-of" in note:
        return "ran-by and excerpt-of exclude each other"
    if "ran-by" in note:
        return _ran_by_problem(block, note["ran-by"])
    if "excerpt-of" in note:
        return _excerpt_problem(block, note["excerpt-of"])
    return ""


def _excerpt_problem(block: Block, target: str) -> str:
    path = ROOT / target
    if not path.is_file():
        return f"excerpt-of names {target}, which does not exist"
    # Whitespace is dropped on both sides: the page may wrap a call differently from the file.
    text = "".join(path.read_text(encoding="utf-8").split())
    at = 0
    for line in block.body.splitlines():
        code = re.sub(r"\s#\s.*$", "", line)  # a trailing comment explains; it need not be in the file
        if code.strip().startswith("#"):
            continue
        for piece in code.split("..."):
            piece = "".join(piece.split())
            if not piece:
                continue
            found = text.find(piece, at)
            if found < 0:
                return (f"this code is not in {target} (in the block's order): {piece!r}; copy the file's "
                        "current code into the page, or point excerpt-of at the file it comes from")
            at = found + len(piece)
    return ""


def _ran_by_problem(block: Block, target: str) -> str:
    file, _, test = target.partition("::")
    path = ROOT / file
    if not path.is_file():
        return f"ran-by names {file}, which does not exist"
    if path.suffix == ".py":
        if not test:
            return f"ran-by={file!r}: name the test, e.g. {file}::test_name"
        names = {n.name for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        return "" if test in names else f"{file} has no test {test!r}"
    script = path.read_text(encoding="utf-8")
    missing = [c for c in _commands(block) if c not in script]
    return f"{file} does not run these commands as written: {missing}" if missing else ""


def _commands(block: Block) -> list[str]:
    """The command lines of a shell block (comments and blank lines dropped)."""
    return [line.strip() for line in _shell_body(block).replace("\\\n", " ").splitlines()
            if line.strip() and not line.strip().startswith("#")]


def _shell_body(block: Block) -> str:
    if block.lang != "console":
        return block.body
    # A console block shows commands after "$ " and their output below them: only commands run.
    return "\n".join(line[2:] for line in block.body.splitlines() if line.startswith("$ "))


def test_the_docs_have_snippets_of_each_kind() -> None:
    assert len(ALL) >= 30, "README.md and docs/*.md should hold the bash and python blocks"
    assert any(not b.note for b in ALL if b.lang == "python") and any(not b.note for b in ALL if b.lang == "bash")


@pytest.mark.parametrize("block", ALL, ids=[b.where for b in ALL])
def test_each_annotation_is_well_formed_and_true(block: Block) -> None:
    problem = _problem(block)
    assert not problem, f"{block.where}: {problem}"


def test_an_annotation_names_what_is_wrong() -> None:
    """The checks above can fail: a typo'd key, a skip without a reason, a test that does not exist,
    a command CI does not run."""
    fake = ROOT / "README.md"
    assert "unknown annotation key 'skp'" in _problem(Block(fake, 1, "bash", "x\n", *_parse_note(' skp reason="x"')))
    assert "needs a reason" in _problem(Block(fake, 1, "bash", "x\n", {"skip": ""}))
    assert "has no test" in _problem(Block(fake, 1, "bash", "x\n", {"ran-by": "tests/test_readme.py::test_nope"}))
    assert "as written" in _problem(Block(fake, 1, "bash", "openenv frobnicate\n", {"ran-by": ".ci/run"}))
    spec = "kernel/src/openenv/hookspecs.py"
    assert not _problem(Block(fake, 1, "python", "def openenv_register_envs(...) -> None: ...\n", {"excerpt-of": spec}))
    assert "not in" in _problem(Block(fake, 1, "python", "def openenv_register_nothing() -> None\n",
                                      {"excerpt-of": spec}))


# -- running them ----------------------------------------------------------------------------------


def _free_port() -> int:
    from openenv.testing.live import bind_local

    sock = bind_local()
    port = int(sock.getsockname()[1])
    sock.close()
    return port


class Runner:
    """Runs one file's blocks in order in ``tmp``, with the servers its serve blocks start."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        bin_dir = str(Path(sys.executable).parent)
        # The tests' own settings (a token, a state dir of the session) must not leak into the
        # reader's commands; the local provider's records go to this test's folder.
        self.env = {k: v for k, v in os.environ.items() if k not in ("OPENENV_TOKEN", "VIRTUAL_ENV")}
        self.env.update(PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
                        OPENENV_STATE_DIR=str(tmp / "state"), PYTHONDONTWRITEBYTECODE="1")
        self.server: subprocess.Popen[bytes] | None = None
        self.port: int | None = None
        self.previous_python = ""
        self.llm_url = ""
        self.ran = 0

    def text(self, block: Block, body: str) -> str:
        if _PORT in body:
            assert self.port is not None, (f"{block.where} reaches {_PORT} but no serve block before it starts "
                                           "a server: annotate the command that starts it <!-- snippet: serve -->")
            body = body.replace(_PORT, f"127.0.0.1:{self.port}")
        if _LLM in body:
            assert self.llm_url, f"{block.where} needs an LLM endpoint: annotate it <!-- snippet: needs=llm -->"
            body = body.replace(_LLM, self.llm_url)
        return body.replace(_UV_RUN, "")

    def run(self, block: Block) -> None:
        if block.lang == "python":
            code = (self.previous_python + "\n" if "continues" in block.note else "") + block.body
            self.previous_python = block.body
            script = self.tmp / f"snippet_{block.line}.py"
            script.write_text(self.text(block, code), encoding="utf-8")
            command = [sys.executable, str(script)]
        elif "serve" in block.note:
            self.start_server(block)
            return
        else:
            command = ["bash", "-eo", "pipefail", "-c", self.text(block, _shell_body(block))]
        done = subprocess.run(command, cwd=self.tmp, env=self.env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (f"{block.where} failed (exit {done.returncode}):\n{block.body}\n"
                                      f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}")
        self.ran += 1

    def start_server(self, block: Block) -> None:
        self.stop()
        self.port = _free_port()
        command = self.text(block, block.body).strip().replace("--port 8000", f"--port {self.port}")
        assert "\n" not in command, f"{block.where}: a serve block holds one command"
        self.server = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=self.tmp, env=self.env,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.server.poll() is not None:
                log = self.server.stderr.read().decode()[-3000:] if self.server.stderr else ""
                raise AssertionError(f"{block.where}: the server exited ({self.server.returncode}):\n{log}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2):
                    self.ran += 1
                    return
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"{block.where}: the server did not answer /health within 60 s")

    def stop(self) -> None:
        if self.server is not None and self.server.poll() is None:
            os.killpg(self.server.pid, signal.SIGTERM)  # the group of the server this test started
            try:
                self.server.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.server.pid, signal.SIGKILL)
                self.server.wait(5)
        self.server = None


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[Runner]:
    r = Runner(tmp_path)
    try:
        yield r
    finally:
        r.stop()


def _runs_here(block: Block, need: str | None) -> bool:
    """Whether the page's test for ``need`` (None: the plain one, which also runs needs=llm) runs it."""
    if {"skip", "ran-by", "excerpt-of"} & block.note.keys():
        return False
    return block.note.get("needs") in ((None, "llm") if need is None else (need,))


def _run_file(path: Path, runner: Runner, need: str | None = None) -> None:
    page = blocks(path)
    mine = [b for b in page if _runs_here(b, need)]
    if not mine:
        pytest.skip(f"{path.relative_to(ROOT)} has no block to run here")
    for block in page:
        if block in mine and block.note.get("needs") == "llm":
            _with_llm(block, runner)
        elif block in mine or ("serve" in block.note and _runs_here(block, None)):
            runner.run(block)  # a block that needs an engine may reach the page's server too
    assert runner.ran >= len(mine)


def _with_llm(block: Block, runner: Runner) -> None:
    """Run ``block`` with a scripted OpenAI-compatible server in place of 127.0.0.1:8001: it answers
    every chat completion with a grid_world move, as a model prompted with the action schema would."""
    from openenv_rubrics.testing import FakeChatServer, Reply

    with FakeChatServer(lambda body, n: Reply(json.dumps({"move": ("right", "down")[n % 2]}))) as llm:
        runner.llm_url = llm.url
        try:
            runner.run(block)
        finally:
            runner.llm_url = ""


#: The pages with a block that the plain test runs (needs=llm included: its server is in-process).
RUN_PAGES = [p for p in DOCS if any(_runs_here(b, None) for b in blocks(p))]


@pytest.mark.slow
@pytest.mark.parametrize("path", RUN_PAGES, ids=[str(p.relative_to(ROOT)) for p in RUN_PAGES])
def test_the_snippets_of_each_page_run(path: Path, runner: Runner) -> None:
    _run_file(path, runner)


def _skip_or_fail(env_var: str, reason: str) -> None:
    if os.environ.get(env_var, "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"{env_var} is set but {reason}", pytrace=False)
    pytest.skip(reason)


def _pages_needing(need: str) -> list[Path]:
    return [p for p in DOCS if any(b.note.get("needs") == need for b in blocks(p))]


@pytest.mark.docker
@pytest.mark.parametrize("path", _pages_needing("docker"))
def test_the_docker_snippets_run(path: Path, runner: Runner) -> None:
    try:
        from openenv_provider_docker.testing import engine_skip_reason
    except ImportError:
        _skip_or_fail("OPENENV_REQUIRE_DOCKER", "openenvkit-provider-docker is not installed")
    reason = engine_skip_reason()
    if reason:
        _skip_or_fail("OPENENV_REQUIRE_DOCKER", reason)
    _run_file(path, runner, "docker")


@pytest.mark.slurm
@pytest.mark.parametrize("path", _pages_needing("slurm"))
def test_the_slurm_snippets_run(path: Path, runner: Runner) -> None:
    from openenv.interfaces import EngineUnavailable
    from openenv_provider_slurm.provider import slurm_available

    try:
        slurm_available()
    except EngineUnavailable as exc:
        _skip_or_fail("OPENENV_REQUIRE_SLURM", f"no Slurm cluster here: {exc}")
    _run_file(path, runner, "slurm")


@pytest.mark.parametrize("path", _pages_needing("bwrap"))
def test_the_bwrap_snippets_run(path: Path, runner: Runner) -> None:
    from openenv.interfaces import EngineUnavailable
    from openenv_provider_bwrap.provider import preflight

    try:
        preflight()
    except EngineUnavailable as exc:
        _skip_or_fail("OPENENV_REQUIRE_BWRAP", str(exc))
    _run_file(path, runner, "bwrap")


@pytest.mark.kubernetes
@pytest.mark.slow_ok("starts four Pods of the test cluster (about 45 s on 2 cores)")
@pytest.mark.parametrize("path", _pages_needing("kubernetes"))
def test_the_kubernetes_snippets_run(path: Path, runner: Runner) -> None:
    kubeconfig = os.environ.get("OPENENV_K8S_KUBECONFIG", "/var/cache/openenv/k8s/kubeconfig")
    try:
        from kubernetes import client, config
    except ImportError:
        _skip_or_fail("OPENENV_REQUIRE_KUBERNETES", "openenvkit-provider-kubernetes is not installed")
    if not Path(kubeconfig).is_file():
        _skip_or_fail("OPENENV_REQUIRE_KUBERNETES", f"no kubeconfig at {kubeconfig}: run .ci/k8s-setup.sh")
    try:
        api = config.new_client_from_config(config_file=kubeconfig)
        api.configuration.retries = 0
        with api:
            client.CoreV1Api(api).list_node(_request_timeout=5)
    except Exception as exc:
        _skip_or_fail("OPENENV_REQUIRE_KUBERNETES", f"the test cluster does not answer: {exc}")
    runner.env["KUBECONFIG"] = kubeconfig
    _run_file(path, runner, "kubernetes")


@pytest.mark.slow
@pytest.mark.parametrize("path", _pages_needing("ray"))
def test_the_ray_snippets_run(path: Path, runner: Runner) -> None:
    try:
        import openenv_provider_ray  # noqa: F401
    except ImportError:
        _skip_or_fail("OPENENV_REQUIRE_RAY", "openenvkit-provider-ray is not installed")
    _run_file(path, runner, "ray")
