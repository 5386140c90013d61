"""``write_report(jsonl, out_dir)``: the page a researcher shares about a rollout file.

The page (``index.html``, self-contained apart from the PNG charts written beside it) has:

* the run's metadata (env and the distribution that serves it, policy, seed, provider, date, the
  command line with secrets masked), from ``run_meta`` as ``openenv collect`` passes it in;
* success and truncation rates with Wilson score intervals at 95 %;
* reward by component, as a chart and a table;
* a per-task table when the records carry ``task_id``;
* relative links to the data files (the JSONL, and Parquet/CSV when written).

Charts (matplotlib, Agg backend, no screen needed): the reward histogram, the reward of each episode
in episode order (a fixed policy does not learn, so the chart says so and draws no running mean,
which would read as a learning curve), the mean reward per component, and the episode length
histogram. Errored episodes are counted in the tables, not drawn.
"""

from __future__ import annotations

import datetime as dt
import html
import math
import os
import shlex
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from openenv_rollouts.records import read_records

__all__ = ["CHARTS", "CONFIDENCE", "RATE_HEAD", "components_chart", "components_table", "figure", "html_page",
           "html_table", "links_html", "meta_html", "rate_row", "run_meta", "save_figure", "wilson_interval",
           "write_report"]

CHARTS = ("reward_hist.png", "reward_per_episode.png", "reward_components.png", "episode_length.png")
#: The level of every interval on the report pages.
CONFIDENCE = 0.95
#: Option names whose values never reach a report (they are credentials).
_SECRET_WORDS = ("key", "token", "secret", "password")


def wilson_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The Wilson score interval ``(low, high)`` for ``successes`` out of ``n`` trials.

    Unlike the normal approximation it stays inside [0, 1] and is not zero-width at 0 or n
    successes, which matters for the small counts of a quick run. ``n == 0`` gives ``(0, 1)``:
    nothing is known."""
    if not 0 <= successes <= n:
        raise ValueError(f"wilson_interval needs 0 <= successes <= n, got {successes} of {n}.")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence}.")
    if n == 0:
        return 0.0, 1.0
    z = statistics.NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def _masked_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` with the values of credential options (``--token``, ``--llm-api-key``, …) masked."""
    out: list[str] = []
    mask_next = False
    for arg in argv:
        if mask_next:
            out.append("REDACTED")
            mask_next = False
            continue
        name, eq, _ = arg.partition("=")
        secret = name.startswith("--") and any(w in name.lower() for w in _SECRET_WORDS)
        if secret and eq:
            out.append(f"{name}=REDACTED")
        else:
            out.append(arg)
            mask_next = secret
    return out


def _env_dist(env: str) -> str | None:
    """The distribution and version that serve ``env`` (``openenvkit-grid-world 0.3.0``), if registered."""
    try:
        from openenv.plugins import get_plugin_manager

        return get_plugin_manager().catalog.registry("env").get(env).dist
    except Exception:  # a module:Class env, or no catalogue: the version is unknown, not fatal
        return None


def run_meta(*, env: str, policy: str, seed: int | None, provider: str | None, argv: Sequence[str] | None = None,
             **extra: Any) -> dict[str, Any]:
    """What a report says about how its data was made: env and its version, policy, seed, provider,
    date (UTC), the command line (``sys.argv`` unless given, credentials masked) and the ``extra``
    fields that are not ``None`` (an option the run did not use is left out)."""
    args = list(sys.argv if argv is None else argv)
    if args:
        args[0] = Path(args[0]).name
    return {"env": env, "env_version": _env_dist(env), "policy": policy, "seed": seed, "provider": provider or "local",
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "command": shlex.join(_masked_argv(args)),
            **{k: v for k, v in extra.items() if v is not None}}


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


def _fmt(v: Any) -> str:
    return "-" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)


def html_table(rows: Sequence[Sequence[Any]], head: Sequence[str] | None = None, *, cls: str = "") -> str:
    """A table of escaped cells (floats to 4 significant digits, ``None`` as ``-``)."""
    top = "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>" if head else ""
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(c))}</td>" for c in row) + "</tr>" for row in rows)
    attr = f' class="{html.escape(cls)}"' if cls else ""
    return f"<table{attr}>{top}{body}</table>"


def meta_html(meta: Mapping[str, Any]) -> str:
    """The run-metadata table (class ``meta``)."""
    return "<h2>run</h2>" + html_table([(k, v) for k, v in meta.items()], ["field", "value"], cls="meta")


def links_html(out_dir: Path, files: Mapping[str, Path | str | None]) -> str:
    """Relative links from ``out_dir`` to the data files that exist (so the folder can be moved or shared
    together with its data)."""
    items = []
    for label, path in files.items():
        if path is None or not Path(path).exists():
            continue
        rel = Path(os.path.relpath(Path(path).resolve(), out_dir.resolve())).as_posix()
        items.append(f'<li>{html.escape(label)}: <a href="{html.escape(rel)}">{html.escape(rel)}</a></li>')
    return f"<h2>data</h2><ul class='data'>{''.join(items)}</ul>" if items else ""


def rate_row(name: str, hits: int, n: int) -> tuple[str, int, int, float | None, str]:
    """``(name, hits, n, rate, "[low, high]")`` with the Wilson interval at ``CONFIDENCE``."""
    low, high = wilson_interval(hits, n)
    return name, hits, n, (hits / n if n else None), f"[{low:.3f}, {high:.3f}]"


RATE_HEAD = ["rate", "count", "of", "value", f"{CONFIDENCE:.0%} CI (Wilson)"]


def components_chart(comps: Mapping[str, Sequence[float]], path: Path, title: str) -> None:
    """Mean reward per component with one standard deviation as the error bar."""
    names = sorted(comps)
    fig, ax = figure()
    means = [statistics.fmean(comps[n]) for n in names]
    stds = [statistics.pstdev(comps[n]) if len(comps[n]) > 1 else 0.0 for n in names]
    ax.bar(range(len(names)), means, yerr=stds, capsize=4, color="#8e6bd8")
    # An env without components still gets the chart (empty), so the page's images are always the same four.
    ax.set_xticks(range(len(names)), names)
    ax.axhline(0, color="#555", lw=0.8)
    ax.set(title=title, xlabel="component", ylabel="mean per episode (±1 sd)")
    save_figure(fig, path)


def components_table(comps: Mapping[str, Sequence[float]]) -> str:
    rows = [(n, statistics.fmean(v), statistics.pstdev(v) if len(v) > 1 else None, min(v), max(v), len(v))
            for n, v in sorted(comps.items()) if v]
    return html_table(rows, ["component", "mean", "sd", "min", "max", "episodes"], cls="components")


def _component_values(ok: Sequence[dict[str, Any]]) -> dict[str, list[float]]:
    comps: dict[str, list[float]] = {}
    for r in ok:
        for name, value in (r.get("reward_components") or {}).items():
            comps.setdefault(str(name), []).append(float(value))
    return comps


def _task_table(records: Sequence[dict[str, Any]], threshold: float) -> str:
    by_task: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r.get("task_id") is not None:
            by_task.setdefault(str(r["task_id"]), []).append(r)
    if not by_task:
        return ""
    rows = []
    for tid, rs in sorted(by_task.items()):
        ok = [r for r in rs if r.get("status") == "ok"]
        wins = sum(float(r.get("reward") or 0.0) >= threshold for r in ok)
        low, high = wilson_interval(wins, len(rs))
        rows.append((tid, len(rs), len(rs) - len(ok), wins, wins / len(rs), f"[{low:.3f}, {high:.3f}]",
                     statistics.fmean(float(r.get("reward") or 0.0) for r in ok) if ok else None))
    return "<h2>tasks</h2>" + html_table(rows, ["task", "episodes", "errors", "successes", "success rate",
                                                f"{CONFIDENCE:.0%} CI (Wilson)", "mean reward"], cls="tasks")


def write_report(jsonl: Path | str, out_dir: Path | str, *, title: str | None = None,
                 meta: Mapping[str, Any] | None = None, threshold: float = 1.0,
                 data: Mapping[str, Path | str | None] | None = None) -> Path:
    """Write the charts and ``index.html`` into ``out_dir``; returns the page's path.

    ``meta`` is ``run_meta``'s dict (without it the page shows what the records say: env, policy,
    seed of the first episode); an episode succeeds when it finished with ``reward >= threshold``
    (an errored one counts as a failure); ``data`` names more files to link (``{"parquet": path}``)."""
    jsonl = Path(jsonl)
    records = list(read_records(jsonl))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ok = sorted((r for r in records if r.get("status") == "ok"), key=lambda r: int(r["episode"]))
    rewards = [float(r.get("reward") or 0.0) for r in ok]
    lengths = [int(r["num_steps"]) for r in ok]
    episodes = [int(r["episode"]) for r in ok]
    env = title or (records[0]["env"] if records else "rollouts")
    if meta is None:
        first = records[0] if records else {}
        meta = {"env": first.get("env"), "policy": first.get("policy"), "seed": first.get("seed")}

    fig, ax = figure()
    ax.hist(rewards or [0.0], bins=min(30, max(5, len(set(rewards)))), color="#3b7dd8", edgecolor="white")
    ax.set(title=f"{env}: episode reward", xlabel="reward", ylabel="episodes")
    save_figure(fig, out / CHARTS[0])

    fig, ax = figure()
    ax.plot(episodes, rewards, "o", ms=3, color="#3b7dd8")
    ax.set(title=f"{env}: reward in episode order (fixed policy, no training: not a learning curve)",
           xlabel="episode (order played)", ylabel="reward")
    save_figure(fig, out / CHARTS[1])

    comps = _component_values(ok)
    components_chart(comps, out / CHARTS[2], f"{env}: reward by component")

    fig, ax = figure()
    ax.hist(lengths or [0], bins=min(30, max(5, len(set(lengths)))), color="#4caf50", edgecolor="white")
    ax.set(title=f"{env}: episode length", xlabel="steps", ylabel="episodes")
    save_figure(fig, out / CHARTS[3])

    n = len(records)
    wins = sum(x >= threshold for x in rewards)
    truncated = sum(bool(r.get("truncated")) for r in ok)
    rates = html_table([rate_row(f"success (reward >= {threshold:g}; errors count as failures)", wins, n),
                        rate_row("truncated (of finished episodes)", truncated, len(ok)),
                        rate_row("errored", n - len(ok), n)], RATE_HEAD, cls="rates")
    summary = html_table([
        ("episodes", n), ("ok", len(ok)), ("errors", n - len(ok)), ("steps", sum(lengths)),
        ("mean reward", statistics.fmean(rewards) if rewards else None),
        ("std reward", statistics.pstdev(rewards) if len(rewards) > 1 else None),
        ("mean length", statistics.fmean(lengths) if lengths else None)], cls="summary")
    images = "".join(f'<figure><img src="{name}" alt="{name[:-4]}"></figure>' for name in CHARTS)
    body = (meta_html(meta) + links_html(out, {"rollouts (JSONL)": jsonl, **(data or {})})
            + f"<h2>summary</h2>{summary}<h2>rates</h2>{rates}"
            + f"<h2>reward by component</h2>{components_table(comps)}"
            + _task_table(records, threshold) + images)
    page = out / "index.html"
    page.write_text(html_page(f"{env} rollouts", body), encoding="utf-8")
    return page
