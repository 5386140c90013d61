"""The TRL block of the README's guide (docs/guide.md) runs as written: its text, unchanged, trains
two GRPO steps on the CPU.

The block leaves ``model`` and ``tokenizer`` to the reader ("yours"); they are the only names
given to it here, tiny ones built on the spot (see conftest.py). It starts grid_world through the
local provider itself and stops it with ``GridEnv.shutdown()``. Runs in ``nox -s trl``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl", reason="the TRL adapter tests need trl and torch (nox -s trl)")
pytest.importorskip("torch", reason="the TRL adapter tests need trl and torch (nox -s trl)")


def test_the_readme_trl_block_trains(readme_block: Callable[[str], str], tiny_tokenizer: Any,
                                     tiny_model: Callable[[Any], Any], tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    code = readme_block("GRPOTrainer(")
    monkeypatch.chdir(tmp_path)  # the block's output_dir is relative
    names: dict[str, Any] = {"__name__": "__main__", "model": tiny_model(tiny_tokenizer),
                             "tokenizer": tiny_tokenizer}
    exec(compile(code, "docs/guide.md (the TRL block)", "exec"), names)
    trainer = names["trainer"]
    assert trainer.state.global_step == 2
    assert [h for h in trainer.state.log_history if "reward" in h]  # rewards came from the env
    assert (tmp_path / "grpo-grid").is_dir()
    assert names["GridEnv"].base_url is None  # GridEnv.shutdown() stopped the server the class started
