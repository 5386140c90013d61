"""Verifier of ini-app-config: the parsed configuration is exactly the production one."""

from __future__ import annotations

import configparser
import sys

WANT = {
    "server": {"host": "127.0.0.1", "port": "8443", "tls": "on", "cert_file": "/etc/orders/tls/cert.pem",
               "key_file": "/etc/orders/tls/key.pem"},
    "database": {"url": "postgresql://orders@db.internal:5432/orders", "pool_size": "20", "timeout": "30"},
    "cache": {"backend": "memory", "ttl": "300"},
}
parser = configparser.ConfigParser(interpolation=None)
try:
    if not parser.read("/app/app.ini"):
        sys.exit("FAIL: /app/app.ini is missing")
except configparser.Error as exc:
    sys.exit(f"FAIL: /app/app.ini is not valid INI: {exc}")
got = {s: dict(parser[s]) for s in parser.sections()}
if got != WANT:
    sys.exit(f"FAIL: the configuration is {got!r}, expected {WANT!r}")
print("ok")
