"""``openenv.lazy.lazy_exports``: names imported on first use, cached, listed, and suggested."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv.lazy import lazy_exports

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    """A package ``lazypkg`` on disk whose ``heavy`` module records that it was imported."""
    root = tmp_path / "lazypkg"
    root.mkdir()
    (root / "__init__.py").write_text(
        "from openenv.lazy import lazy_exports\n"
        "__version__ = '1'\n"
        "__getattr__, __dir__, __all__ = lazy_exports(__name__, {'Heavy': '.heavy', 'dumps': 'json',\n"
        "                                                        'Wrong': '.heavy'}, also=['__version__'])\n")
    (root / "heavy.py").write_text("import sys\nsys.modules[__name__].__dict__.setdefault('loads', 0)\n"
                                   "class Heavy:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import lazypkg  # type: ignore[import-not-found]

    yield lazypkg
    for name in ("lazypkg", "lazypkg.heavy"):
        sys.modules.pop(name, None)


def test_a_name_is_imported_on_first_use_and_then_cached(package: types.ModuleType) -> None:
    assert "lazypkg.heavy" not in sys.modules
    heavy = package.Heavy
    assert "lazypkg.heavy" in sys.modules and heavy is sys.modules["lazypkg.heavy"].Heavy
    assert vars(package)["Heavy"] is heavy  # cached: the next access is a plain attribute read
    import json

    assert package.dumps is json.dumps  # absolute module paths work too


def test_all_and_dir_list_the_exports_without_importing_them(package: types.ModuleType) -> None:
    assert package.__all__ == ["Heavy", "Wrong", "dumps", "__version__"]
    assert {"Heavy", "Wrong", "dumps", "__version__"} <= set(dir(package))
    assert "lazypkg.heavy" not in sys.modules


def test_an_unknown_name_suggests_the_closest_export(package: types.ModuleType) -> None:
    with pytest.raises(AttributeError, match=r"module 'lazypkg' has no attribute 'Heavyy'\. Did you mean 'Heavy'\?"):
        package.Heavyy  # noqa: B018
    assert not hasattr(package, "nothing_like_it")


def test_a_wrong_mapping_names_the_entry_to_fix(package: types.ModuleType) -> None:
    with pytest.raises(AttributeError, match=r"lazy export 'Wrong' is mapped to 'lazypkg.heavy', which does not "
                                             r"define it"):
        package.Wrong  # noqa: B018


def test_a_fallback_answers_names_that_are_not_exported() -> None:
    def fallback(name: str) -> str:
        if name == "old_name":
            return "replacement"
        raise AttributeError(name)

    getattr_, _, all_ = lazy_exports(__name__, {}, fallback=fallback)
    assert getattr_("old_name") == "replacement" and all_ == []
    with pytest.raises(AttributeError):
        getattr_("other")


def test_no_package_writes_its_own_lazy_exporter() -> None:
    """Every package (kernel, plugins, envs, templates) exports lazily through ``lazy_exports``
    (a module ``__getattr__`` that only refuses a removed name, importing nothing, is not an exporter)."""
    roots = [REPO / "kernel" / "src", *REPO.glob("plugins/*/src"), *REPO.glob("envs/*/src"),
             *REPO.glob("templates/*/src")]
    hand_written = [str(init.relative_to(REPO)) for root in roots for init in sorted(root.rglob("__init__.py"))
                    if "\ndef __getattr__(" in (text := init.read_text(encoding="utf-8")) and "import_module" in text]
    assert not hand_written, f"use openenv.lazy.lazy_exports instead of a hand-written __getattr__: {hand_written}"
