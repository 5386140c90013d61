"""Our distribution names cannot be confused with upstream OpenEnv's, and depend on each other.

Upstream owns ``openenv`` and ``openenv-core`` on the public index, so a package of ours that said
``dependencies = ["openenv"]`` would install upstream's code. Every distribution of this workspace
is named ``openenvkit`` or ``openenvkit-*``, and every dependency on one of ours names it so (the
only ``openenv`` dependencies allowed are in the upstream-style test fixtures, which copy
upstream's template on purpose and are never installed as packages of ours).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MEMBERS = [ROOT / "kernel", *sorted(p.parent for p in ROOT.glob("plugins/*/pyproject.toml")),
           *sorted(p.parent for p in ROOT.glob("envs/*/pyproject.toml"))]
UPSTREAM = {"openenv", "openenv-core"}
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _project(folder: Path) -> dict[str, object]:
    return tomllib.loads((folder / "pyproject.toml").read_text())["project"]  # type: ignore[no-any-return]


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_distribution_has_our_prefix() -> None:
    names = {_normal(str(_project(m)["name"])) for m in MEMBERS}
    assert "openenvkit" in names
    bad = sorted(n for n in names if n != "openenvkit" and not n.startswith("openenvkit-"))
    assert not bad, f"distributions without the openenvkit prefix: {bad}"
    assert not names & UPSTREAM


def test_no_package_of_ours_depends_on_upstream() -> None:
    ours = {_normal(str(_project(m)["name"])) for m in MEMBERS}
    for member in MEMBERS:
        deps = [_normal(m.group(1)) for d in _project(member).get("dependencies") or []  # type: ignore[attr-defined]
                if (m := _NAME.match(str(d)))]
        assert not set(deps) & UPSTREAM, f"{member.relative_to(ROOT)} depends on upstream's {set(deps) & UPSTREAM}"
        for dep in deps:
            if dep.startswith("openenv"):
                assert dep in ours, f"{member.relative_to(ROOT)} depends on {dep}, which is not in this workspace"
        if member.name != "kernel" and _imports_the_kernel(member):
            assert "openenvkit" in deps, f"{member.relative_to(ROOT)} must depend on the kernel, openenvkit"


def _imports_the_kernel(member: Path) -> bool:
    """Whether a package's source imports ``openenv`` (a standalone library such as the sandbox
    runner need not depend on the kernel)."""
    pattern = re.compile(r"^\s*(from|import)\s+openenv(\.|\s|$)", re.M)
    return any(pattern.search(f.read_text()) for f in (member / "src").rglob("*.py"))


def test_uv_sources_name_workspace_members_by_their_distribution() -> None:
    ours = {_normal(str(_project(m)["name"])) for m in MEMBERS}
    for member in MEMBERS:
        sources = tomllib.loads((member / "pyproject.toml").read_text()).get("tool", {}).get("uv", {}) \
            .get("sources", {})
        unknown = {_normal(k) for k in sources} - ours
        assert not unknown, f"{member.relative_to(ROOT)}: [tool.uv.sources] names {unknown}"
