"""Generated logs and expected answers of the log-forensics tasks (see _make.py)."""

from __future__ import annotations

import json
import math
import random
from collections import Counter, defaultdict
from collections.abc import Callable

__all__ = ["LOGS"]

MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
PATHS = ["/", "/login", "/api/items", "/api/cart", "/api/checkout", "/static/app.js", "/health"]


def _json(value: object) -> str:
    return json.dumps(value, indent=2, sort_keys=True) + "\n"


def _ip(rng: random.Random) -> str:
    return f"{rng.choice([10, 172, 192, 203])}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"


def _clf_time(second: int) -> str:
    # second 0 is 2024-03-10 00:00:00 +0000; every log stays inside that day
    return f"10/Mar/2024:{second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d} +0000"


def top_client_ips() -> dict[str, str]:
    rng = random.Random(201)
    pool = [_ip(rng) for _ in range(40)]
    weights = [max(1, 60 - 3 * i) + (i * 7) % 5 for i in range(40)]
    lines, counts = [], Counter[str]()
    for n in range(420):
        ip = rng.choices(pool, weights)[0]
        counts[ip] += 1
        path = rng.choice(PATHS)
        lines.append(f'{ip} - - [{_clf_time(n * 11)}] "GET {path} HTTP/1.1" {rng.choice([200, 200, 304, 404])} '
                     f'{rng.randint(100, 9000)} "-" "curl/8.5"')
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    return {"environment/access.log": "\n".join(lines) + "\n",
            "tests/expected.json": _json({"lines": [f"{c} {ip}" for ip, c in top]})}


def rotated_error_count() -> dict[str, str]:
    rng = random.Random(202)
    files: dict[str, list[str]] = {}
    per_day: Counter[str] = Counter()
    # app.log.3 is the oldest; every file covers two days
    for index, name in enumerate(["app.log.3", "app.log.2", "app.log.1", "app.log"]):
        lines = []
        for day in (2 * index + 1, 2 * index + 2):
            date = f"2024-04-{day:02d}"
            for minute in range(0, 1440, rng.randint(9, 14)):
                level = rng.choice(["INFO", "INFO", "INFO", "WARN", "ERROR"])
                msg = rng.choice(["request served", "cache miss", "disk 81% full", "retrying upstream"])
                if level == "INFO" and rng.random() < 0.1:
                    msg = "previous ERROR cleared"  # the word ERROR, but not an error line
                if level == "ERROR":
                    per_day[date] += 1
                lines.append(f"{date} {minute // 60:02d}:{minute % 60:02d}:{rng.randint(0, 59):02d} {level} {msg}")
        files[name] = lines
    out = {f"environment/logs/{name}": "\n".join(lines) + "\n" for name, lines in files.items()}
    out["tests/expected.json"] = _json({"lines": [f"{d} {c}" for d, c in sorted(per_day.items())]})
    return out


def ssh_bruteforce() -> dict[str, str]:
    rng = random.Random(203)
    attackers = [_ip(rng) for _ in range(6)]
    casual = [_ip(rng) for _ in range(12)]
    events: list[tuple[int, str]] = []
    failures: Counter[str] = Counter()
    first_fail: dict[str, int] = {}
    accepted: dict[str, list[int]] = defaultdict(list)
    for i, ip in enumerate(attackers):
        tries = 10 + i * 4 if i < 5 else 9  # the last one stays below the threshold
        start = rng.randint(0, 40000)
        for k in range(tries):
            events.append((start + k * 3, f"Failed password for invalid user {rng.choice(['admin', 'oracle', 'test'])}"
                                          f" from {ip} port {rng.randint(30000, 60000)} ssh2"))
            failures[ip] += 1
            first_fail.setdefault(ip, start)
        if i in (1, 3):  # these two got in afterwards
            t = start + tries * 3 + 100
            events.append((t, f"Accepted password for deploy from {ip} port {rng.randint(30000, 60000)} ssh2"))
            accepted[ip].append(t)
    # attacker 4 logged in legitimately *before* its attack: not compromised by it
    events.append((first_fail[attackers[4]] - 500, f"Accepted publickey for ops from {attackers[4]} port 40022 ssh2"))
    for ip in casual:
        for _ in range(rng.randint(0, 3)):
            t = rng.randint(0, 80000)
            events.append((t, f"Failed password for alice from {ip} port {rng.randint(30000, 60000)} ssh2"))
            failures[ip] += 1
        events.append((rng.randint(0, 80000), f"Accepted password for alice from {ip} port 50000 ssh2"))
    for _ in range(60):
        events.append((rng.randint(0, 80000), "pam_unix(sshd:session): session closed for user alice"))
    events.sort(key=lambda e: e[0])
    lines = []
    for n, (t, msg) in enumerate(events):
        t = max(0, t)
        lines.append(f"Mar 10 {t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d} bastion sshd[{1000 + n}]: {msg}")
    offenders = sorted(((ip, c) for ip, c in failures.items() if c >= 10), key=lambda kv: (-kv[1], kv[0]))
    compromised = sorted(ip for ip, _ in offenders if any(t > first_fail[ip] for t in accepted.get(ip, [])))
    expected = {"offenders": [{"ip": ip, "failures": c} for ip, c in offenders], "compromised": compromised}
    return {"environment/auth.log": "\n".join(lines) + "\n", "tests/expected.json": _json(expected)}


def error_spike_minute() -> dict[str, str]:
    rng = random.Random(204)
    lines = []
    per_minute: Counter[str] = Counter()
    per_path: dict[str, Counter[str]] = defaultdict(Counter)
    second = 14 * 3600 + 5 * 60
    while second < 14 * 3600 + 35 * 60:
        second += rng.randint(2, 7)
        minute = f"2024-03-05T{second // 3600:02d}:{second // 60 % 60:02d}"
        in_spike = 14 * 3600 + 17 * 60 <= second < 14 * 3600 + 18 * 60
        status = rng.choice([500, 502, 503, 503]) if in_spike and rng.random() < 0.7 else \
            rng.choice([200] * 30 + [404, 500, 503])
        path = "/api/checkout" if in_spike and status >= 500 and rng.random() < 0.8 else rng.choice(PATHS)
        level = "ERROR" if status >= 500 else "INFO"
        lines.append(f"{minute}:{second % 60:02d}Z level={level} method=GET path={path} status={status} "
                     f"dur_ms={rng.randint(3, 900)}")
        if status >= 500:
            per_minute[minute] += 1
            per_path[minute][path] += 1
    (best, count), (_, runner_up) = per_minute.most_common(2)
    path, n = per_path[best].most_common(1)[0]
    assert count > runner_up and list(per_path[best].values()).count(n) == 1, "the spike must be unambiguous"
    return {"environment/app.log": "\n".join(lines) + "\n",
            "tests/expected.json": _json({"line": f"{best} {count} {path}"})}


def trace_request() -> dict[str, str]:
    rng = random.Random(205)
    services: dict[str, list[str]] = {"gateway": [], "auth": [], "db": []}
    target = "req-7f3a9c"
    ms = 0
    timeline = []

    def log(service: str, rid: str, message: str) -> None:
        nonlocal ms
        ms += rng.randint(1, 40)
        ts = f"2024-07-01T09:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}Z"
        services[service].append(f"{ts} [req={rid}] {message}")
        if rid == target:
            timeline.append(f"{ts} {service} {message}")

    rids = [f"req-{rng.randrange(16 ** 6):06x}" for _ in range(40)]
    rids[23] = target
    for rid in rids:
        log("gateway", rid, "POST /api/orders received")
        log("auth", rid, f"token ok user={rng.choice(['u17', 'u42', 'u88'])}")
        if rid == target:
            log("db", rid, "BEGIN")
            log("db", rid, "UPDATE stock SET qty = qty - 1 WHERE sku = 'P0042'")
            log("db", rid, "ERROR: deadlock detected")
            log("db", rid, "ROLLBACK")
            log("gateway", rid, "502 upstream error")
        else:
            log("db", rid, "BEGIN")
            log("db", rid, "COMMIT")
            log("gateway", rid, "201 created")
    # a second request mentions the word deadlock without failing on it
    log("db", "req-000001", "SET deadlock_timeout = '1s'")
    files = {f"environment/logs/{s}.log": "\n".join(lines) + "\n" for s, lines in services.items()}
    files["tests/expected.json"] = _json({"request_id": target, "lines": timeline})
    return files


EXC = [("java.sql.SQLTransientConnectionException", "Connection is not available"),
       ("java.net.SocketTimeoutException", "Read timed out"),
       ("java.lang.NullPointerException", "Cannot invoke \"Order.total()\""),
       ("java.io.FileNotFoundException", "/var/cache/app/index.bin")]


def exception_root_causes() -> dict[str, str]:
    rng = random.Random(206)
    lines, causes = [], Counter[str]()
    for n in range(120):
        ts = f"2024-08-02 10:{n // 2 % 60:02d}:{(n * 29) % 60:02d},{n * 7 % 1000:03d}"
        if rng.random() < 0.6:
            lines.append(f"{ts} INFO  [worker-{n % 4}] c.e.OrderService - order {1000 + n} processed")
            continue
        top = rng.choice(["com.example.ServiceException", "java.lang.RuntimeException"])
        lines.append(f"{ts} ERROR [worker-{n % 4}] c.e.OrderService - order {1000 + n} failed")
        lines.append(f"{top}: order {1000 + n} failed")
        lines.append("\tat com.example.OrderService.process(OrderService.java:88)")
        lines.append("\tat com.example.Worker.run(Worker.java:41)")
        chain = rng.sample(EXC, rng.randint(0, 2))
        for exc, msg in chain:
            lines.append(f"Caused by: {exc}: {msg}")
            lines.append(f"\tat com.example.Dao.load(Dao.java:{rng.randint(10, 99)})")
            lines.append("\t... 12 more")
        causes[chain[-1][0] if chain else top] += 1
    return {"environment/app.log": "\n".join(lines) + "\n", "tests/expected.json": _json(dict(causes))}


def heartbeat_gaps() -> dict[str, str]:
    rng = random.Random(207)
    events: list[tuple[int, str]] = []
    gaps: list[tuple[str, int, int]] = []
    for host in ["db-1", "web-1", "cache-1"]:
        t, last = 0, None
        while t < 3600:
            t += 10
            if rng.random() < 0.025:
                t += rng.choice([20, 25, 60, 300, 900])  # outage (20 s is within tolerance)
            if last is not None and t - last > 30:
                gaps.append((host, last, t))
            events.append((t, host))
            last = t
    events.sort()

    def iso(t: int) -> str:
        return f"2024-06-01T{t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}Z"

    lines = [f"{iso(t)} {host} heartbeat ok" for t, host in events]
    rows = [f"{h},{iso(a)},{iso(b)},{b - a}" for h, a, b in sorted(gaps, key=lambda g: (g[0], g[1]))]
    assert rows, "the log must have gaps"
    return {"environment/heartbeats.log": "\n".join(lines) + "\n",
            "tests/expected.json": _json({"lines": ["host,start,end,seconds", *rows]})}


def latency_percentiles() -> dict[str, str]:
    rng = random.Random(208)
    lines, samples = [], defaultdict(list)
    for n in range(450):
        path = rng.choice(PATHS[1:])
        query = f"?page={rng.randint(1, 9)}" if rng.random() < 0.3 else ""
        base = {"/api/checkout": 180, "/login": 60, "/health": 2}.get(path, 25)
        ms = max(1, int(rng.expovariate(1 / base)))
        samples[path].append(ms)
        method = rng.choice(["GET", "GET", "POST"])
        lines.append(f'{_ip(rng)} - - [{_clf_time(n * 4)}] "{method} {path}{query} HTTP/1.1" 200 '
                     f"{rng.randint(100, 5000)} rt={ms}ms")

    def rank(values: list[int], p: int) -> int:
        ordered = sorted(values)
        return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]

    rows = ["endpoint,count,p50,p95,p99"] + [
        f"{p},{len(v)},{rank(v, 50)},{rank(v, 95)},{rank(v, 99)}" for p, v in sorted(samples.items())]
    return {"environment/access.log": "\n".join(lines) + "\n", "tests/expected.json": _json({"lines": rows})}


LOGS: dict[str, Callable[[], dict[str, str]]] = {
    "top-client-ips": top_client_ips, "rotated-error-count": rotated_error_count, "ssh-bruteforce": ssh_bruteforce,
    "error-spike-minute": error_spike_minute, "trace-request": trace_request,
    "exception-root-causes": exception_root_causes, "heartbeat-gaps": heartbeat_gaps,
    "latency-percentiles": latency_percentiles,
}
