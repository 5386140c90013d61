"""``write_report(jsonl, out_dir)``: PNG charts of a rollout file and an HTML page that shows them.

Charts (matplotlib, Agg backend, no screen needed): the reward histogram, the reward of each
episode in order (with a running mean), and the episode length histogram; errored episodes are
counted in the page's table, not drawn.
"""

from __future__ import annotations

import html
import statistics
from pathlib import Path
from typing import Any

from openenv_rollouts.records import read_records

__all__ = ["CHARTS", "figure", "html_page", "save_figure", "write_report"]

CHARTS = ("reward_hist.png", "reward_per_episode.png", "episode_length.png")


def figure() -> tuple[Any, Any]:
    """A new chart (matplotlib's Agg backend: no screen needed) with the report's grid."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    ax.grid(True, alpha=0.3)
    return fig, ax


def save_figure(fig: Any, path: Path) -> None:
    """Write ``fig`` as a PNG and free it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def html_page(title: str, body: str) -> str:
    """A report page: ``title`` (escaped here) around ``body`` (HTML, escaped by the caller)."""
    return ("<!doctype html><html><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}</title><style>body{{font-family:sans-serif;margin:2em}}"
            "table{border-collapse:collapse}th,td{padding:.2em .8em;text-align:left;border-bottom:1px solid #ddd}"
            f"img{{max-width:100%}}</style></head><body><h1>{html.escape(title)}</h1>{body}</body></html>")


def write_report(jsonl: Path | str, out_dir: Path | str, *, title: str | None = None) -> Path:
    """Write the charts and ``index.html`` into ``out_dir``; returns the page's path."""
    records = list(read_records(Path(jsonl)))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ok = sorted((r for r in records if r.get("status") == "ok"), key=lambda r: int(r["episode"]))
    rewards = [float(r["reward"]) for r in ok]
    lengths = [int(r["num_steps"]) for r in ok]
    episodes = [int(r["episode"]) for r in ok]
    env = title or (records[0]["env"] if records else "rollouts")

    fig, ax = figure()
    ax.hist(rewards or [0.0], bins=min(30, max(5, len(set(rewards)))), color="#3b7dd8", edgecolor="white")
    ax.set(title=f"{env}: episode reward", xlabel="reward", ylabel="episodes")
    save_figure(fig, out / CHARTS[0])

    fig, ax = figure()
    ax.plot(episodes, rewards, "o", ms=3, color="#3b7dd8", label="episode")
    if rewards:
        running = [statistics.fmean(rewards[max(0, i - 19):i + 1]) for i in range(len(rewards))]
        ax.plot(episodes, running, "-", color="#d8643b", label="mean of last 20")
    ax.set(title=f"{env}: reward per episode", xlabel="episode", ylabel="reward")
    ax.legend(loc="best")
    save_figure(fig, out / CHARTS[1])

    fig, ax = figure()
    ax.hist(lengths or [0], bins=min(30, max(5, len(set(lengths)))), color="#4caf50", edgecolor="white")
    ax.set(title=f"{env}: episode length", xlabel="steps", ylabel="episodes")
    save_figure(fig, out / CHARTS[2])

    errors = len(records) - len(ok)
    mean = f"{statistics.fmean(rewards):.4g}" if rewards else "-"
    std = f"{statistics.pstdev(rewards):.4g}" if len(rewards) > 1 else "-"
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in [
        ("episodes", len(records)), ("ok", len(ok)), ("errors", errors), ("steps", sum(lengths)),
        ("mean reward", mean), ("std reward", std),
        ("mean length", f"{statistics.fmean(lengths):.4g}" if lengths else "-")])
    images = "".join(f'<figure><img src="{name}" alt="{name[:-4]}"></figure>' for name in CHARTS)
    page = out / "index.html"
    page.write_text(html_page(f"{env} rollouts", f"<p>from <code>{html.escape(str(jsonl))}</code></p>"
                                                 f"<table>{rows}</table>{images}"), encoding="utf-8")
    return page
