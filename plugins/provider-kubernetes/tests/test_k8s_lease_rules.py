"""gc's owner rule and the API server's clock (``lease.py``), without a cluster."""

from __future__ import annotations

import email.utils
import socket
import time
from datetime import UTC, datetime, timedelta

from openenv.interfaces import owner_id
from openenv_provider_kubernetes import lease
from openenv_provider_kubernetes.lease import LeaseInfo, lease_name, owner_state, server_now

NOW = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)
OTHER = "laptop-7:4242:123456"


def _lease(owner: str, *, renewed_s_ago: float | None, duration_s: int | None = 60) -> LeaseInfo:
    renew = None if renewed_s_ago is None else NOW - timedelta(seconds=renewed_s_ago)
    return LeaseInfo(name=lease_name(owner), holder=owner, renew_time=renew, duration_s=duration_s)


def test_another_hosts_owner_is_alive_exactly_while_its_lease_is_fresh() -> None:
    name = lease_name(OTHER)
    assert owner_state(OTHER, name, {name: _lease(OTHER, renewed_s_ago=59)}, NOW) == (
        True, "owner on laptop-7, lease live, renewed 59s ago")
    assert owner_state(OTHER, name, {name: _lease(OTHER, renewed_s_ago=60)}, NOW) == (
        False, "owner on laptop-7, lease expired 0s ago")
    assert owner_state(OTHER, name, {name: _lease(OTHER, renewed_s_ago=200)}, NOW)[0] is False
    assert owner_state(OTHER, name, {}, NOW) == (False, "owner on laptop-7, lease missing")
    # A lease that is not the owner's (its holder differs) does not keep the owner's objects.
    assert owner_state(OTHER, name, {name: _lease("laptop-8:1:2", renewed_s_ago=1)}, NOW)[0] is False
    # Never renewed (no renewTime) or no duration: expired.
    assert owner_state(OTHER, name, {name: _lease(OTHER, renewed_s_ago=None)}, NOW)[0] is False
    assert owner_state(OTHER, name, {name: _lease(OTHER, renewed_s_ago=1, duration_s=None)}, NOW)[0] is False
    # Objects that name no lease (made before owner leases) of another host: kept, as before.
    assert owner_state(OTHER, None, {}, NOW)[0] is True


def test_this_hosts_owner_is_judged_by_its_process_not_its_lease() -> None:
    me = owner_id()
    name = lease_name(me)
    # Alive although its lease expired (a stalled renewal does not condemn a running process).
    assert owner_state(me, name, {name: _lease(me, renewed_s_ago=999)}, NOW) == (
        True, "owner on this host running, lease expired 939s ago")
    dead = f"{socket.gethostname()}:999999999:1"
    assert owner_state(dead, lease_name(dead), {}, NOW) == (False, "owner on this host gone, lease missing")
    assert owner_state("garbage", None, {}, NOW) == (False, "owner 'garbage' unreadable")


def test_times_follow_the_api_servers_clock_from_its_date_header() -> None:
    server = "https://clock-test.invalid:1"
    assert abs((server_now(server) - datetime.now(UTC)).total_seconds()) < 1  # nothing seen: local clock
    behind = email.utils.formatdate(time.time() - 120, usegmt=True)  # a server 2 minutes behind
    lease._observe(server, {"Date": behind})
    assert abs((server_now(server) - datetime.now(UTC)).total_seconds() + 120) < 1.5
    lease._observe(server, {"date": "not a date"})  # ignored, the offset stays
    assert abs((server_now(server) - datetime.now(UTC)).total_seconds() + 120) < 1.5
    lease._OFFSETS.pop(server)


def test_lease_names_are_valid_and_per_owner() -> None:
    import re

    names = {lease_name(f"host-{i}:1:2") for i in range(50)}
    assert len(names) == 50
    assert all(re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", n) and len(n) <= 63 for n in names)
