"""``ProviderHandle`` is built with keyword arguments and refuses empty ones."""

from __future__ import annotations

import pytest

from openenv.errors import RuleViolation
from openenv.interfaces import ProviderHandle


class Handle(ProviderHandle):
    def wait_ready(self, timeout_s: float) -> None:
        pass

    def stop(self, timeout_s: float = 10.0) -> None:
        pass

    def is_running(self) -> bool:
        return True


def test_a_handle_knows_its_provider_id_and_address() -> None:
    handle = Handle(provider="local", id="local-1", base_url="http://127.0.0.1:8000")
    assert (handle.provider, handle.id, handle.base_url) == ("local", "local-1", "http://127.0.0.1:8000")


@pytest.mark.parametrize("missing", ["provider", "id", "base_url"])
@pytest.mark.parametrize("value", ["", None])
def test_empty_values_are_refused_with_the_fix(missing: str, value: object) -> None:
    kwargs: dict[str, object] = {"provider": "local", "id": "local-1",
                                 "base_url": "http://127.0.0.1:8000", missing: value}
    with pytest.raises(RuleViolation) as excinfo:
        Handle(**kwargs)  # type: ignore[arg-type]
    message = str(excinfo.value)
    assert message.startswith(f"Handle: a ProviderHandle needs a non-empty {missing}= (got {value!r})")
    assert "Build the handle once the server's address is known" in message


def test_positional_arguments_are_refused() -> None:
    with pytest.raises(TypeError):
        Handle("local", "local-1", "http://127.0.0.1:8000")  # type: ignore[misc]
