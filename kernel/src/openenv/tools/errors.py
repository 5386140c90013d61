"""Error classification of tool calls: by *where* a call failed, never by message text.

Lookup fails with ``tool_not_found``, validation with ``invalid_args``, an exception from the tool
body with ``execution_error`` and the deadline with ``timeout``. A body's exception is carried in
``BodyError`` on its way out, so it is never mistaken for the deadline or for a lookup failure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from openenv.tools.wire import ToolError, ToolErrorType

if TYPE_CHECKING:
    from openenv.tools.schema import ToolSpec

__all__ = ["BodyError", "ToolCallError", "execution_error", "guarded", "guarded_async", "timeout_error"]


# -- results and errors --------------------------------------------------------------------------


class ToolCallError(Exception):
    """A tool call failed; ``error_type`` says where. Tools may raise it to choose the class."""

    def __init__(self, error_type: ToolErrorType | str, message: str) -> None:
        super().__init__(message)
        self.error_type = ToolErrorType(error_type)
        self.message = message

    def to_tool_error(self) -> ToolError:
        return ToolError(error_type=self.error_type, message=self.message)




class BodyError(Exception):
    """Carries an exception raised by a tool body, so it is never mistaken for the deadline."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


def guarded(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    try:
        return fn(**kwargs)
    except ToolCallError:
        raise
    except (Exception, SystemExit) as exc:
        raise BodyError(exc) from exc


async def guarded_async(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    try:
        return await fn(**kwargs)
    except ToolCallError:
        raise
    except (Exception, SystemExit) as exc:
        raise BodyError(exc) from exc


def timeout_error(spec: ToolSpec, deadline: float) -> ToolCallError:
    return ToolCallError(ToolErrorType.TIMEOUT, f"Tool '{spec.name}' timed out after {deadline} seconds")


def execution_error(spec: ToolSpec, exc: BaseException) -> ToolCallError:
    text = str(exc) or type(exc).__name__
    return ToolCallError(ToolErrorType.EXECUTION_ERROR, f"Error calling tool '{spec.name}': {text}")

