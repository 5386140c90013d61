"""What the env does inside one MiniWoB page (async, on the browser host's loop).

Facts of MiniWoB's ``core.js`` used here: ``Math.seedrandom(seed)`` seeds the page's generator,
``core.setDataMode(mode)`` picks the train/test data, ``core.startEpisodeReal()`` generates a
problem and starts the task's timer (``core.EPISODE_MAX_TIME`` ms), ``core.getUtterance()`` is the
instruction, and ``WOB_DONE_GLOBAL`` / ``WOB_REWARD_GLOBAL`` (time-discounted) /
``WOB_RAW_REWARD_GLOBAL`` / ``WOB_REWARD_REASON`` are the task's verdict. The element list comes
from our own walker (``ELEMENTS_JS``), which tags elements with ``data-oe-ref`` so that a ref stays
the same for the whole episode.
"""

from __future__ import annotations

from typing import Any

from openenv.types import Image
from openenv_env_miniwob.models import TASK_HEIGHT, TASK_WIDTH

__all__ = ["ELEMENTS_JS", "VIEWPORT", "CommandRefused", "click_point", "element_info", "observe", "start_episode",
           "status"]

#: MiniWoB's window size (its gym env uses the same); the task area is the top-left 160x210.
VIEWPORT = {"width": 500, "height": 320}

# Walks the visible elements under <body>, skipping MiniWoB's own chrome (the instruction, the
# reward display, the start cover, the click canvas). A ref is given once per element and episode
# (data-oe-ref, with the episode counter in data-oe-ep), so it stays stable while the DOM changes.
ELEMENTS_JS = """
() => {
  const skip = new Set(['reward-display', 'sync-task-cover', 'click-canvas', 'query']);
  const ep = String(window.WOB_EPISODE_ID);
  window.__oeNext = window.__oeNext || 1;
  if (window.__oeEp !== ep) { window.__oeEp = ep; window.__oeNext = 1; }
  const out = [];
  const walk = (node, parent) => {
    if (skip.has(node.id)) return;
    const tag = node.tagName.toLowerCase();
    if (tag === 'script' || tag === 'style') return;
    const r = node.getBoundingClientRect();
    let ref = null;
    if (r.width > 0 && r.height > 0) {
      if (node.dataset.oeEp !== ep) { node.dataset.oeEp = ep; node.dataset.oeRef = String(window.__oeNext++); }
      ref = Number(node.dataset.oeRef);
      const text = Array.from(node.childNodes).filter((c) => c.nodeType === 3)
        .map((c) => c.data).join(' ').replace(/\\s+/g, ' ').trim();
      const e = {ref: ref, parent: parent, tag: tag, text: text, focused: document.activeElement === node,
                 id: node.id || '', classes: (typeof node.className === 'string' ? node.className : ''),
                 bbox: [r.left, r.top, r.width, r.height], value: null, checked: null};
      if (node instanceof HTMLInputElement) {
        e.tag = 'input_' + node.type;
        if (node.type === 'checkbox' || node.type === 'radio') e.checked = node.checked; else e.value = node.value;
      } else if (node instanceof HTMLTextAreaElement || node instanceof HTMLSelectElement) {
        e.value = node.value;
      }
      out.push(e);
    }
    for (const child of node.children) walk(child, ref === null ? parent : ref);
  };
  walk(document.body, null);
  return out;
}
"""

# The element a ref names (as of the last walk), as the facts an action needs about it.
_ELEMENT_JS = """
(ref) => {
  const ep = String(window.WOB_EPISODE_ID);
  const node = document.querySelector('[data-oe-ref="' + ref + '"][data-oe-ep="' + ep + '"]');
  if (!node) return null;
  const r = node.getBoundingClientRect();
  const editable = (node instanceof HTMLInputElement && !['button', 'submit', 'reset', 'checkbox', 'radio',
    'image', 'file', 'range', 'color', 'hidden'].includes(node.type)) || node instanceof HTMLTextAreaElement
    || node.isContentEditable;
  return {tag: node.tagName.toLowerCase() + (node instanceof HTMLInputElement ? '_' + node.type : ''),
          x: r.left + r.width / 2, y: r.top + r.height / 2, width: r.width, height: r.height,
          editable: editable, disabled: !!node.disabled};
}
"""

_STATUS_JS = """
() => ({done: !!window.WOB_DONE_GLOBAL, reward: Number(window.WOB_REWARD_GLOBAL) || 0,
        raw: Number(window.WOB_RAW_REWARD_GLOBAL) || 0, reason: window.WOB_REWARD_REASON,
        utterance: (window.core && core.getUtterance) ? core.getUtterance() : ''})
"""


class CommandRefused(Exception):
    """A command that cannot be carried out on this page (the episode goes on); says why."""


async def start_episode(page: Any, url: str, seed: int, mode: str, time_limit_ms: int | None,
                        ready_timeout_ms: float) -> None:
    """Load the task page afresh, seed it, pick the data mode (and time limit) and start the episode."""
    await page.goto(url, wait_until="load")
    await page.wait_for_function("() => window.core && typeof core.startEpisodeReal === 'function'",
                                 timeout=ready_timeout_ms)
    await page.evaluate("([seed, mode, limit]) => { Math.seedrandom(String(seed)); core.setDataMode(mode); "
                        "if (limit !== null) core.EPISODE_MAX_TIME = limit; core.startEpisodeReal(); }",
                        [seed, mode, time_limit_ms])
    # Some tasks build their problem asynchronously and say so through WOB_TASK_READY.
    await page.wait_for_function("() => window.WOB_TASK_READY !== false", timeout=ready_timeout_ms)


async def status(page: Any) -> dict[str, Any]:
    return await page.evaluate(_STATUS_JS)  # type: ignore[no-any-return]


async def element_info(page: Any, ref: int) -> dict[str, Any]:
    info = await page.evaluate(_ELEMENT_JS, ref)
    if info is None:
        raise CommandRefused(f"no element with ref {ref} on the page; use a ref of the last observation's "
                             "elements (refs of removed or hidden elements are gone)")
    if info["width"] <= 0 or info["height"] <= 0:
        raise CommandRefused(f"element ref {ref} (<{info['tag']}>) is not visible, so it cannot be clicked")
    return info  # type: ignore[no-any-return]


async def click_point(page: Any, x: float, y: float) -> None:
    await page.mouse.click(x, y)


async def observe(page: Any, *, screenshot: bool) -> tuple[list[dict[str, Any]], Image | None]:
    """The element list and (optionally) a PNG screenshot of the task area."""
    elements = await page.evaluate(ELEMENTS_JS)
    image = None
    if screenshot:
        # caret/animations off: a blinking cursor must not make two screenshots of one state differ.
        png = await page.screenshot(clip={"x": 0, "y": 0, "width": TASK_WIDTH, "height": TASK_HEIGHT},
                                    caret="hide", animations="disabled", type="png")
        image = Image.from_bytes(png)
    return elements, image
