"""Turns raw rounds into medians, ratios and goal checks; prints the tables; writes the JSON.

Ratios are what to read: absolute numbers drift on a shared machine, but every target of one
run saw the same machine, so ``ours ÷ bare echo`` and ``ours ÷ upstream`` are stable. Each metric
states its direction: ↑ means higher is better (throughput), ↓ lower is better (latency, CPU,
memory, threads, start-up). Goals are reported, never asserted: the benchmark must not fail
because a shared CI machine was busy.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

__all__ = ["CROSS_METRICS", "GOALS", "METRICS", "print_client", "print_report", "summarise", "write_json"]

#: (key, label, unit, direction) — direction +1: higher is better, -1: lower is better.
METRICS: list[tuple[str, str, str, int]] = [
    ("lat_p50_ms", "step latency p50, 1 session", "ms", -1),
    ("lat_p99_ms", "step latency p99, 1 session", "ms", -1),
    ("sps_1", "steps/s, 1 session", "/s", +1),
    ("sps_8", "steps/s, 8 sessions", "/s", +1),
    ("sps_64", "steps/s, 64 sessions", "/s", +1),
    ("sps_256", "steps/s, 256 sessions", "/s", +1),
    ("batch_sps_64", "batched steps/s, 64 sessions (16 actions/frame)", "/s", +1),
    ("batch_cpu_us_64", "server CPU per batched step, 64 sessions", "µs", -1),
    ("vector_sps_64", "multiplexed steps/s, 64 sessions on 4 connections (16 per frame)", "/s", +1),
    ("vector_cpu_us_64", "server CPU per multiplexed step, 64 sessions", "µs", -1),
    ("cpu_us_64", "server CPU per step, 64 sessions", "µs", -1),
    ("sys_us_64", "  of which kernel (sys), 64 sessions", "µs", -1),
    ("cpu_us_1", "server CPU per step, 1 session", "µs", -1),
    ("setup_p50_ms", "session setup (connect + reset) p50", "ms", -1),
    ("idle_rss_mib", "idle RSS", "MiB", -1),
    ("rss64_mib", "RSS with 64 sessions", "MiB", -1),
    ("threads64", "threads with 64 sessions", "", -1),
    ("ready_s", "start-to-ready", "s", -1),
    ("http_sps", "HTTP steps/s (8 connections)", "/s", +1),
    ("http_cpu_us", "HTTP server CPU per step", "µs", -1),
]

#: Issue 8's goals: (metric, reference target or None for absolute, bound, kind, label).
GOALS: list[tuple[str, str | None, float, str, str]] = [
    ("sps_64", "bare-default", 1.0, ">=", "throughput @64 ≥ 1.0x bare echo (default stack)"),
    ("sps_64", "bare-shipped", 0.9, ">=", "throughput @64 ≥ 0.9x bare echo (same stack)"),
    ("sps_64", "upstream", 2.5, ">=", "throughput @64 ≥ 2.5x upstream"),
    ("cpu_us_64", "bare-shipped", 1.1, "<=", "CPU per step ≤ 1.1x bare echo (same stack)"),
    ("lat_p50_ms", "bare-shipped", 1.15, "<=", "single-session p50 ≤ 1.15x bare echo (same stack)"),
    ("idle_rss_mib", None, 60.0, "<=", "idle RSS ≤ 60 MiB"),
    ("threads64", None, 8.0, "<=", "≤ 8 threads with 64 sessions"),
    ("ready_s", None, 1.0, "<=", "ready ≤ 1 s after start"),
    ("batch_sps_64", "bare-shipped", 3.0, ">=", "batched steps/s @64 ≥ 3x bare echo's steps/s @64 (same stack)"),
    ("vector_sps_64", "bare-shipped", 3.0, ">=",
     "multiplexed steps/s @64 ≥ 3x bare echo's steps/s @64 (same stack)"),
]

#: Metrics of our extensions that the references cannot run: their ratio is taken to the
#: reference's plain counterpart (batched steps/s vs. the bare echo's one-step-per-frame steps/s).
CROSS_METRICS = {"batch_sps_64": "sps_64", "batch_cpu_us_64": "cpu_us_64",
                 "vector_sps_64": "sps_64", "vector_cpu_us_64": "cpu_us_64"}

#: floor-shipped is not a goal's reference: it shows how much of the gap to bare-shipped is the
#: env's own work (the floor) and how much is ours (ours ÷ floor).
REFERENCES = ("bare-default", "bare-shipped", "floor-shipped", "upstream")
SUBJECTS = ("ours-sync", "ours-async")


def _phase(result: dict[str, Any], name: str) -> dict[str, Any]:
    for ph in result.get("phases", []):
        if ph.get("name") == name and "failed" not in ph:
            return ph
    return {}


def _metrics(result: dict[str, Any]) -> dict[str, Any]:
    """The flat metrics of one target in one round."""
    if "failed" in result:
        return {}
    m: dict[str, Any] = {"ready_s": result.get("ready_s"), "idle_rss_mib": (result.get("idle") or {}).get("rss_mib"),
                         "idle_threads": (result.get("idle") or {}).get("threads")}
    setup = _phase(result, "setup")
    m["setup_p50_ms"] = (setup.get("setup") or {}).get("p50_ms")
    m["byte_identical"] = setup.get("byte_identical")
    errors = 0
    client_util = []
    for ph in result.get("phases", []):
        errors += int(ph.get("errors") or 0) + int(ph.get("rejected") or 0) + int(ph.get("failures") or 0)
        if "failed" in ph:
            errors += 1
        if ph.get("client_cpu_util") is not None:
            client_util.append(ph["client_cpu_util"])
        if ph.get("kind") == "steps" and "failed" not in ph:
            n = ph["sessions"]
            m[f"sps_{n}"] = ph.get("steps_per_s")
            m[f"cpu_us_{n}"] = ph.get("server_cpu_us_per_step")
            m[f"sys_us_{n}"] = ph.get("server_sys_us_per_step")
            m[f"server_util_{n}"] = ph.get("server_cpu_util")
            m[f"client_util_{n}"] = ph.get("client_cpu_util")
            m[f"lat_p50_ms_{n}"] = (ph.get("latency") or {}).get("p50_ms")
            m[f"lat_p99_ms_{n}"] = (ph.get("latency") or {}).get("p99_ms")
            m[f"open_all_s_{n}"] = ph.get("open_all_s")
            if n == 1:
                m["lat_p50_ms"] = m["lat_p50_ms_1"]
                m["lat_p99_ms"] = m["lat_p99_ms_1"]
            if n == 64:
                server = ph.get("server") or {}
                m["rss64_mib"] = server.get("rss_mib")
                m["threads64"] = server.get("threads")
            m["deflate"] = ph.get("deflate")
        if ph.get("kind") == "batch" and "failed" not in ph:
            n = ph["sessions"]
            m[f"batch_sps_{n}"] = ph.get("steps_per_s")
            m[f"batch_cpu_us_{n}"] = ph.get("server_cpu_us_per_step")
            m[f"batch_size_{n}"] = ph.get("batch")
        if ph.get("kind") == "vector" and "failed" not in ph:
            n = ph["sessions"]
            m[f"vector_sps_{n}"] = ph.get("steps_per_s")
            m[f"vector_cpu_us_{n}"] = ph.get("server_cpu_us_per_step")
    http = _phase(result, "http")
    m["http_sps"] = http.get("steps_per_s")
    m["http_cpu_us"] = http.get("server_cpu_us_per_step")
    m["http_mode"] = http.get("mode")
    m["errors"] = errors
    m["client_util_max"] = max(client_util) if client_util else None
    return m


def _median(values: list[Any]) -> Any:
    nums = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    if nums:
        return round(statistics.median(nums), 4)
    others = [v for v in values if v is not None]
    return others[0] if others else None


def summarise(raw: dict[str, Any]) -> dict[str, Any]:
    """Medians per target, ratios to the references, and the goal checks."""
    per_target: dict[str, list[dict[str, Any]]] = {}
    for rnd in raw.get("rounds", []):
        for key, result in rnd.items():
            per_target.setdefault(key, []).append(_metrics(result))
    medians: dict[str, dict[str, Any]] = {}
    for key, rows in per_target.items():
        names = {name for row in rows for name in row}
        medians[key] = {name: _median([row.get(name) for row in rows]) for name in sorted(names)}
        medians[key]["errors"] = sum(int(row.get("errors") or 0) for row in rows)
        medians[key]["rounds_ok"] = sum(1 for row in rows if row)
    ratios: dict[str, dict[str, dict[str, float | None]]] = {}
    for subject in (*SUBJECTS, "upstream", "floor-shipped"):
        if subject not in medians:
            continue
        ratios[subject] = {}
        # The floor is only compared with the bare echo on its own stack (the env's own cost).
        refs = ("bare-shipped",) if subject == "floor-shipped" else REFERENCES
        for ref in refs:
            if ref == subject or ref not in medians or (subject == "upstream" and ref == "floor-shipped"):
                continue
            ratios[subject][ref] = {key: _ratio(medians[subject].get(key),
                                                medians[ref].get(CROSS_METRICS.get(key, key)))
                                    for key, *_ in METRICS}
    goals = []
    for subject in SUBJECTS:
        if subject not in medians:
            continue
        for metric, goal_ref, bound, kind, label in GOALS:
            value = medians[subject].get(metric)
            ref_value = medians.get(goal_ref, {}).get(CROSS_METRICS.get(metric, metric)) if goal_ref else None
            measured = _ratio(value, ref_value) if goal_ref else value
            met = None if measured is None else (measured >= bound if kind == ">=" else measured <= bound)
            goals.append({"target": subject, "goal": label, "metric": metric, "reference": goal_ref,
                          "bound": bound, "kind": kind, "measured": measured, "met": met})
    return {"medians": medians, "ratios": ratios, "goals": goals}


def _ratio(a: Any, b: Any) -> float | None:
    if not isinstance(a, int | float) or not isinstance(b, int | float) or not b:
        return None
    return round(a / b, 3)


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        if value.is_integer() and unit in ("", "/s"):  # counts (threads) and rates read best whole
            return f"{value:,.0f}"
        if unit in ("/s",) or abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 100:
            return f"{value:.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}"
    return str(value)


def _fmt_ratio(value: float | None, direction: int) -> str:
    if value is None:
        return "—"
    good = value >= 1 if direction > 0 else value <= 1
    colour = "green" if good else "red"
    return f"[{colour}]{value:.2f}x[/{colour}]"


def print_report(result: dict[str, Any], console: Any = None) -> None:
    """Machine, stacks, absolute medians, ratios, goals, scale test and Docker, as rich tables."""
    from rich.console import Console
    from rich.table import Table

    if console is None:
        console = Console()
        if not console.is_terminal:  # CI logs: rich would wrap the wide tables at 80 columns
            console = Console(width=200)
    machine = result.get("machine", {})
    console.print(f"[bold]OpenEnv benchmark[/bold] — mode {result.get('mode')}, "
                  f"{result.get('settings', {}).get('runs', '?')} run(s), median shown")
    console.print(f"machine: {machine.get('cpu_model')} · {machine.get('cpus_usable')} usable CPU(s) · "
                  f"{machine.get('mem_total_mib')} MiB · Linux {machine.get('kernel')} · "
                  f"Python {machine.get('python')} · load {machine.get('loadavg_at_start')}")
    pinning = result.get("pinning") or {}
    console.print(f"pinning: server on CPU {pinning.get('server')}, load generator on CPU {pinning.get('load')}; "
                  f"client offers permessage-deflate: {result.get('settings', {}).get('offer_deflate')}")
    for key, why in (result.get("skipped") or {}).items():
        console.print(f"[yellow]skipped {key}[/yellow]: {why}")
    summary = result.get("summary") or {}
    medians: dict[str, dict[str, Any]] = summary.get("medians", {})
    fixed = ("ours-sync", "ours-async", "upstream", "bare-default", "bare-shipped", "floor-shipped")
    keys = [k for k in fixed if k in medians] + [k for k in medians if k not in fixed]

    if result.get("stacks"):
        table = Table(title="Stacks")
        for col in ("target", "loop", "http", "ws", "deflate"):
            table.add_column(col)
        for key, stack in result["stacks"].items():
            table.add_row(key, _short(stack.get("loop")), _short(stack.get("http")), _short(stack.get("ws")),
                          str(stack.get("ws_per_message_deflate")))
        console.print(table)

    if keys:
        table = Table(title="Absolute numbers (median)")
        table.add_column("metric")
        table.add_column("unit")
        for key in keys:
            table.add_column(key, justify="right")
        for metric, label, unit, direction in METRICS:
            if all(medians[k].get(metric) is None for k in keys):
                continue
            arrow = "↑" if direction > 0 else "↓"
            table.add_row(f"{label} {arrow}", unit, *(_fmt(medians[k].get(metric), unit) for k in keys))
        table.add_row("errors (all rounds)", "", *(str(medians[k].get("errors")) for k in keys))
        table.add_row("client CPU use (max)", "", *(_fmt(medians[k].get("client_util_max")) for k in keys))
        table.add_row("byte-identical to ours", "", *(_identical(medians[k].get("byte_identical")) for k in keys))
        console.print(table)

    ratios = summary.get("ratios") or {}
    columns = [(s, r) for s in (*SUBJECTS, "upstream", "floor-shipped") for r in REFERENCES
               if r in ratios.get(s, {}) and r != s]
    if columns:
        table = Table(title="Ratios (same run): subject ÷ reference",
                      caption="batched rows are divided by the reference's plain (one step per frame) "
                              "row at 64 sessions")
        table.add_column("metric")
        for s, r in columns:
            table.add_column(f"{s.replace('ours-', '')} ÷ {r}", justify="right")
        for metric, label, _unit, direction in METRICS:
            cells = [ratios[s][r].get(metric) for s, r in columns]
            if all(c is None for c in cells):
                continue
            arrow = "↑" if direction > 0 else "↓"
            table.add_row(f"{label} {arrow}", *(_fmt_ratio(c, direction) for c in cells))
        console.print(table)

    goals = summary.get("goals") or []
    if goals:
        table = Table(title="Issue 8 goals (reported, not asserted)")
        table.add_column("goal")
        for subject in SUBJECTS:
            if any(g["target"] == subject for g in goals):
                table.add_column(subject, justify="right")
        labels = list(dict.fromkeys(g["goal"] for g in goals))
        for label in labels:
            cells = []
            for subject in SUBJECTS:
                row = [g for g in goals if g["goal"] == label and g["target"] == subject]
                if not row and not any(g["target"] == subject for g in goals):
                    continue
                g = row[0] if row else None
                cells.append(_goal_cell(g))
            table.add_row(label, *cells)
        console.print(table)

    scale = result.get("scale")
    if scale:
        if "failed" in scale and "opened" not in scale:
            console.print(f"[red]scale test failed[/red]: {scale['failed']}")
        else:
            lat = scale.get("latency") or {}
            peak = scale.get("server_peak") or {}
            verdict = "[green]OK[/green]" if scale.get("ok") else "[red]NOT OK[/red]"
            console.print(
                f"scale test {verdict}: {scale.get('opened')}/{scale.get('sessions')} sessions of "
                f"{scale.get('server')} held {scale.get('hold_s')} s (one step per session every "
                f"{result.get('settings', {}).get('scale_interval_s')} s); rejected {scale.get('rejected')}, "
                f"errors {scale.get('errors')}, dropped {scale.get('dropped')}; opened all in "
                f"{_fmt(scale.get('open_all_s'))} s; {_fmt(scale.get('steps_per_s'), '/s')} steps/s, p50 "
                f"{_fmt(lat.get('p50_ms'))} ms, p99 {_fmt(lat.get('p99_ms'))} ms; server peak RSS "
                f"{_fmt(peak.get('rss_mib'))} MiB, threads {peak.get('threads')}, fds {peak.get('fds')}")
    if result.get("client"):
        print_client(result["client"], console)
    docker = result.get("docker")
    if docker:
        if docker.get("skipped"):
            console.print(f"docker start-to-ready: skipped: {docker['skipped']}")
        else:
            console.print(f"docker start-to-ready ({docker.get('env')} image, {docker.get('provider')} provider, "
                          f"n={docker.get('n')}): median {_fmt(docker.get('median'))} s, min "
                          f"{_fmt(docker.get('min'))} s, max {_fmt(docker.get('max'))} s")


def print_client(client: dict[str, Any], console: Any = None) -> None:
    """The client-side rows (``bench.clientside``): REST client vs raw httpx, CLI start time."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console(width=200)
    table = Table(title="Client side (same run; goals reported, not asserted)")
    for col in ("metric", "ours", "reference", "ratio", "goal"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    rest = client.get("rest") or {}
    if "failed" in rest:
        table.add_row("REST client ms per step", f"[red]FAILED[/red] {rest['failed'][:120]}", "", "", "")
    elif rest:
        table.add_row(f"REST client: ms per step ({rest.get('steps_per_round')} steps, {rest.get('rounds')} "
                      "rounds) ↓ — kernel EnvClient(transport='rest') vs raw keep-alive httpx.Client",
                      _fmt(rest.get("client_ms"), "ms"), _fmt(rest.get("raw_httpx_ms"), "ms"),
                      _fmt_ratio(rest.get("ratio"), +1), _goal_mark(rest.get("met"), f"≥ {rest.get('goal')}x"))
    cli = client.get("cli") or {}
    if "failed" in cli:
        table.add_row("`openenv --help` start time", f"[red]FAILED[/red] {cli['failed'][:120]}", "", "", "")
    elif cli:
        table.add_row(f"`openenv --help` start time, s (median of {cli.get('runs')}) ↓ — reference "
                      "`python -c pass`", _fmt(cli.get("help_s"), "s"), _fmt(cli.get("python_pass_s"), "s"),
                      f"+{_fmt(cli.get('help_over_python_s'), 's')} s", _goal_mark(cli.get("met"),
                                                                             f"< {cli.get('goal_s')} s"))
    console.print(table)


def _goal_mark(met: Any, label: str) -> str:
    if met is None:
        return f"{label} —"
    return f"{label} [green]met[/green]" if met else f"{label} [red]not met[/red]"


def _identical(value: Any) -> str:
    if not isinstance(value, dict):
        return "—"
    return "yes" if all(value.values()) else "[red]NO[/red]"


def _goal_cell(g: dict[str, Any] | None) -> str:
    if g is None or g["measured"] is None:
        return "—"
    unit = "x" if g["reference"] else ""
    mark = "[green]met[/green]" if g["met"] else "[red]not met[/red]"
    return f"{g['measured']:.3g}{unit} {mark}"


def _short(name: Any) -> str:
    if not name:
        return "—"
    return str(name).rsplit(".", 1)[-1]


def write_json(result: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=str))
    return path
