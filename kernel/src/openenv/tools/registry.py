"""``ToolRegistry``: the tools of one env instance, with mode variants, validation and deadlines.

Sync tool bodies run on a worker thread so the deadline can be enforced; a body that ignores the
deadline keeps its thread until it returns (Python threads cannot be killed), but the caller gets
its ``timeout`` answer on time. Async tool bodies are cancelled at the deadline.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from openenv.errors import RuleViolation, did_you_mean
from openenv.tools.decorator import DEFAULT_TOOL_TIMEOUT_S, TOOL_ATTR, check_name
from openenv.tools.errors import (
    BodyError,
    ToolCallError,
    execution_error,
    guarded,
    guarded_async,
    timeout_error,
)
from openenv.tools.schema import ToolSpec, build_spec
from openenv.tools.wire import ToolErrorType

__all__ = ["ToolRegistry"]


# -- the registry --------------------------------------------------------------------------------


class ToolRegistry:
    """The tools of one env instance, with mode filtering, validation, deadlines and error classes.

    Thread-safe for registration and lookup. ``close()`` stops the worker threads of sync tools.
    """

    def __init__(self, *, default_timeout_s: float | None = DEFAULT_TOOL_TIMEOUT_S,
                 inline_sync: bool = False) -> None:
        self.default_timeout_s = default_timeout_s
        # Thread-affine envs run sync tool bodies on their own thread (no deadline enforcement).
        self.inline_sync = inline_sync
        self._by_name: dict[str, dict[str | None, ToolSpec]] = {}
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    # registration

    def add(self, fn: Callable[..., Any], **options: Any) -> ToolSpec:
        """Register ``fn`` (options as for ``@tool``; defaults from a ``@tool`` mark on ``fn``)."""
        marked = dict(getattr(inspect.unwrap(fn), TOOL_ATTR, None) or {})
        marked.update({k: v for k, v in options.items() if v is not None})
        spec = build_spec(fn, **marked)
        return self.add_spec(spec)

    def add_spec(self, spec: ToolSpec) -> ToolSpec:
        """Register a built spec. Refuses reserved names and overlapping same-name variants."""
        check_name(spec.name)
        with self._lock:
            variants = self._by_name.setdefault(spec.name, {})
            clash = [m for m in variants if m is None or spec.mode is None or m == spec.mode]
            if clash:
                where = "every mode" if spec.mode is None else f"{spec.mode} mode"
                raise RuleViolation(
                    f"Tool '{spec.name}' is already registered for "
                    f"{'every mode' if clash[0] is None else clash[0] + ' mode'}; another variant for "
                    f"{where} would make calls ambiguous. Remove the first one (remove_tool) or give "
                    "the variants distinct modes ('simulation' and 'production')."
                )
            variants[spec.mode] = spec
        return spec

    def remove(self, name: str, mode: str | None = None) -> None:
        """Remove one variant of a tool (``KeyError`` if it does not exist)."""
        with self._lock:
            variants = self._by_name[name]
            del variants[mode]
            if not variants:
                del self._by_name[name]

    # lookup

    def visible(self, mode: str | None) -> list[ToolSpec]:
        """Tools visible in ``mode``, in registration order."""
        with self._lock:
            items = [dict(v) for v in self._by_name.values()]
        out = []
        for variants in items:
            spec = variants.get(None) or variants.get(mode)
            if spec is not None:
                out.append(spec)
        return out

    def get(self, name: str, mode: str | None) -> ToolSpec:
        """The variant of ``name`` visible in ``mode``; ``ToolCallError(tool_not_found)`` otherwise."""
        with self._lock:
            variants = dict(self._by_name.get(name, {}))
        spec = variants.get(None) or variants.get(mode)
        if spec is not None:
            return spec
        if variants:
            other = ", ".join(sorted(m for m in variants if m))
            raise ToolCallError(
                ToolErrorType.TOOL_NOT_FOUND,
                f"Tool '{name}' not available in {mode} mode (it exists only in {other} mode).",
            )
        known = [s.name for s in self.visible(mode)]
        raise ToolCallError(
            ToolErrorType.TOOL_NOT_FOUND,
            f"Unknown tool: '{name}'.{did_you_mean(name, known)} Available tools: "
            f"{', '.join(known) if known else 'none'}.",
        )

    # calling

    def _deadline(self, spec: ToolSpec, timeout_s: float | None) -> float | None:
        if timeout_s is not None:
            return timeout_s
        return spec.timeout_s if spec.timeout_s is not None else self.default_timeout_s

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(4, thread_name_prefix="openenv-tool")
                # Idle workers exit when the pool is collected, even if close() is never called.
                weakref.finalize(self, self._pool.shutdown, wait=False)
            return self._pool

    def call(self, name: str, arguments: Any, *, mode: str | None,
             timeout_s: float | None = None) -> tuple[ToolSpec, Any]:
        """Look up, validate and run a tool from synchronous code. Returns (spec, raw value).

        Raises ``ToolCallError`` classified by where the call failed.
        """
        spec = self.get(name, mode)
        kwargs = spec.validate(arguments)
        deadline = self._deadline(spec, timeout_s)
        try:
            if spec.is_async:
                return spec, self._run_coroutine(spec, kwargs, deadline)
            if self.inline_sync or deadline is None:
                return spec, guarded(spec.fn, kwargs)
            future = self._executor().submit(guarded, spec.fn, kwargs)
            try:
                return spec, future.result(deadline)
            except TimeoutError:
                future.cancel()
                raise timeout_error(spec, deadline) from None
        except BodyError as exc:
            raise execution_error(spec, exc.original) from exc.original
        except (ToolCallError, KeyboardInterrupt):
            raise
        except (Exception, SystemExit) as exc:  # e.g. the worker pool was shut down
            raise execution_error(spec, exc) from exc

    def _run_coroutine(self, spec: ToolSpec, kwargs: dict[str, Any], deadline: float | None) -> Any:
        async def run() -> Any:
            try:
                return await asyncio.wait_for(guarded_async(spec.fn, kwargs), deadline)
            except TimeoutError:
                raise timeout_error(spec, deadline) from None  # type: ignore[arg-type]

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(run())
        # Called from a thread that runs an event loop (an inline env): use a helper thread.
        return self._executor().submit(asyncio.run, run()).result()

    async def call_async(self, name: str, arguments: Any, *, mode: str | None,
                         timeout_s: float | None = None) -> tuple[ToolSpec, Any]:
        """The async twin of ``call``: async tools are awaited, sync ones run on a worker thread."""
        spec = self.get(name, mode)
        kwargs = spec.validate(arguments)
        deadline = self._deadline(spec, timeout_s)
        try:
            if spec.is_async:
                awaitable: Any = guarded_async(spec.fn, kwargs)
            elif self.inline_sync:
                return spec, guarded(spec.fn, kwargs)
            else:
                loop = asyncio.get_running_loop()
                awaitable = loop.run_in_executor(self._executor(), guarded, spec.fn, kwargs)
            try:
                return spec, await asyncio.wait_for(awaitable, deadline)
            except TimeoutError:
                raise timeout_error(spec, deadline) from None  # type: ignore[arg-type]
        except BodyError as exc:
            raise execution_error(spec, exc.original) from exc.original
        except (ToolCallError, KeyboardInterrupt):
            raise
        except (Exception, SystemExit) as exc:
            raise execution_error(spec, exc) from exc

    def close(self) -> None:
        """Stop the worker threads (a tool still running keeps its thread until it returns)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


