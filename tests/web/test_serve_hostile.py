"""A real ``conveyor serve`` process under attack, through real sockets: bodies built to
stall a parser, connections that stall on purpose, a database lock held by another
process, more long polls than the server allows, leases that expire with no client
left to recover them. Bounds below are generous time limits that turn a hang into a
failure, not measurements."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

import conveyor
from conveyor.web.limits import Limits
from tests.web.conftest import serving

ADMIN = "admin-serve-0001"
READER = "reader-serve-001"
TOKENS = f"admin:{ADMIN},reader:{READER}"
AS_ADMIN = {"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"}
AS_READER = {"Authorization": f"Bearer {READER}"}
# How long a socket waits for the server to answer or hang up before the test fails.
SOCKET_BOUND_S = 20

pytestmark = pytest.mark.slow


def _eventually(check: Callable[[], Any], bound_s: float = 30) -> Any:
    deadline = time.monotonic() + bound_s
    while True:
        outcome = check()
        if outcome:
            return outcome
        assert time.monotonic() < deadline, "the condition did not hold in time"
        time.sleep(0.1)


def _hostile_depth_body(size: int) -> bytes:
    """80 opening brackets, then an unterminated string of escaped quotes: the input on
    which a backtracking string matcher takes time quadratic in the size."""
    return b"[" * 80 + b'"\\' * ((size - 80) // 2)


def test_a_body_built_to_stall_the_depth_check_does_not_stall_the_server(tmp_path: Path) -> None:
    body = _hostile_depth_body(Limits().max_body_bytes)
    with serving(f"sqlite:///{tmp_path}/q.db", tokens=TOKENS) as served:
        answers: dict[str, httpx.Response] = {}

        def post(name: str, headers: dict[str, str]) -> None:
            answers[name] = httpx.post(f"{served.url}/api/jobs", content=body, headers=headers,
                                       timeout=60)  # fmt: skip

        posts = [
            threading.Thread(target=post, args=("anonymous", {"Content-Type": "application/json"})),
            threading.Thread(target=post, args=("admin", AS_ADMIN)),
        ]
        for thread in posts:
            thread.start()
        health = httpx.get(f"{served.url}/healthz", timeout=SOCKET_BOUND_S)  # meanwhile
        for thread in posts:
            thread.join(timeout=90)
        assert health.status_code == 200
        # No token: refused before a byte of the body is looked at.
        assert answers["anonymous"].status_code == 401
        # With one: the depth check runs, in linear time, and refuses it.
        assert answers["admin"].status_code == 422
        assert answers["admin"].json()["error"]["code"] == "json_too_deep"
        assert httpx.get(f"{served.url}/api/stats", headers=AS_READER).json()["total"] == 0
    assert served.process.returncode in (0, -signal.SIGTERM)  # stopped by SIGTERM, not killed


def _recv_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it hangs up (or the bound passes: a failure)."""
    sock.settimeout(SOCKET_BOUND_S)
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def test_stalled_connections_are_dropped_and_the_server_keeps_answering(tmp_path: Path) -> None:
    """Hundreds of connections that stop half-way through a request's head, or that
    promise a body they never send: each is dropped once its time is up (the head with
    no answer, the body with a 408), and the server answers others all along."""
    args = ("--header-timeout", "1", "--body-timeout", "1")
    with serving(f"sqlite:///{tmp_path}/q.db", *args, tokens=TOKENS) as served:
        host, port = served.address
        partial_heads, lying_bodies = [], []
        for _ in range(200):
            sock = socket.create_connection((host, port), timeout=SOCKET_BOUND_S)
            sock.sendall(b"GET /api/stats HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            partial_heads.append(sock)
        for _ in range(200):
            sock = socket.create_connection((host, port), timeout=SOCKET_BOUND_S)
            sock.sendall(
                b"POST /api/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Authorization: Bearer " + ADMIN.encode() + b"\r\n"
                b'Content-Length: 1000\r\n\r\n{"task": '
            )
            lying_bodies.append(sock)
        assert httpx.get(f"{served.url}/healthz", timeout=SOCKET_BOUND_S).status_code == 200
        for sock in partial_heads:
            with sock:
                assert _recv_until_closed(sock) == b""
        for sock in lying_bodies:
            with sock:
                answer = _recv_until_closed(sock)
            assert answer.startswith(b"HTTP/1.1 408 "), answer[:100]
            assert b'"request_timeout"' in answer
        assert httpx.get(f"{served.url}/api/stats", headers=AS_READER).json()["total"] == 0


def test_past_the_connection_limit_requests_get_a_json_503_and_health_checks_still_answer(
    tmp_path: Path,
) -> None:
    """The audit's attack, scaled to the cap: one anonymous client holds more half-sent
    requests than the server takes. /healthz still answers (room is kept for it); other
    requests get 503 with the error envelope, Retry-After and the security headers;
    once the stalled requests run out of time, the server is free again."""
    args = ("--max-connections", "10", "--header-timeout", "2")
    with serving(f"sqlite:///{tmp_path}/q.db", *args) as served:
        host, port = served.address
        stalled = [socket.create_connection((host, port), timeout=SOCKET_BOUND_S)
                   for _ in range(12)]  # fmt: skip
        for sock in stalled:
            sock.sendall(b"GET /api/stats HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        full = _eventually(lambda: _refused(httpx.get(f"{served.url}/api/stats")))
        assert full.json()["error"]["code"] == "overloaded"
        assert full.headers["retry-after"] == "1"
        assert full.headers["content-type"] == "application/json"
        assert full.headers["x-content-type-options"] == "nosniff"
        assert "content-security-policy" in full.headers
        health = [httpx.get(f"{served.url}/healthz").status_code for _ in range(20)]
        assert health == [200] * 20
        _eventually(lambda: httpx.get(f"{served.url}/api/stats").status_code == 200)
        for sock in stalled:
            sock.close()


def test_guesses_do_not_spread_over_forwarded_addresses(tmp_path: Path) -> None:
    """X-Forwarded-For from a loopback client is not believed unless the proxy is
    named: every guess counts against the peer. (Past the five free guesses each lock
    lasts 1, 2, 4 … s: on a machine slow enough that a request takes longer than the
    lock, a later guess is checked, and refused, rather than locked out; so some of
    guesses 7 to 12 are 429, not necessarily the last.)"""
    with serving(f"sqlite:///{tmp_path}/q.db", tokens=TOKENS) as served:
        statuses = [
            httpx.get(f"{served.url}/api/stats", headers={
                "Authorization": "Bearer guess-guess-01", "X-Forwarded-For": f"10.0.{n}.1"
            }).status_code
            for n in range(12)
        ]  # fmt: skip
        assert statuses[:6] == [401] * 6 and 429 in statuses[6:], statuses
    proxied = ("--trusted-proxies", "127.0.0.1")
    with serving(f"sqlite:///{tmp_path}/q.db", *proxied, tokens=TOKENS) as served:
        statuses = [
            httpx.get(f"{served.url}/api/stats", headers={
                "Authorization": "Bearer guess-guess-01", "X-Forwarded-For": f"10.0.{n}.1"
            }).status_code
            for n in range(12)
        ]  # fmt: skip
        assert statuses == [401] * 12  # a named proxy's clients are told apart


def _answer_at_once(address: tuple[str, int], head: bytes) -> bytes:
    """Send a request's head alone (the body it announces never comes) and read what
    the server answers before it hangs up."""
    with socket.create_connection(address, timeout=SOCKET_BOUND_S) as sock:
        sock.sendall(head)
        return _recv_until_closed(sock)


def test_bodies_nobody_reads_are_refused_from_the_head(tmp_path: Path) -> None:
    """A body announced to an unknown or public path, without a token: answered at once
    and the connection closed, without waiting for (or reading) the body."""
    with serving(f"sqlite:///{tmp_path}/q.db", tokens=TOKENS) as served:
        for path, status in ((b"/nowhere", b"404"), (b"/healthz", b"413"), (b"/api/jobs", b"401")):
            answer = _answer_at_once(
                served.address,
                b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 1048576\r\n\r\n[[[[",
            )
            assert answer.startswith(b"HTTP/1.1 " + status + b" "), answer[:100]
            assert b"connection: close" in answer.lower()


def test_content_length_with_chunked_encoding_is_refused(tmp_path: Path) -> None:
    with serving(f"sqlite:///{tmp_path}/q.db", tokens=TOKENS) as served:
        answer = _answer_at_once(
            served.address,
            b"POST /api/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + ADMIN.encode() + b"\r\nContent-Length: 13\r\n"
            b'Transfer-Encoding: chunked\r\n\r\nd\r\n{"task": "t"}\r\n0\r\n\r\n',
        )
        assert answer.startswith(b"HTTP/1.1 400 "), answer[:100]
        assert b'"bad_request"' in answer
        assert httpx.get(f"{served.url}/api/stats", headers=AS_READER).json()["total"] == 0


def test_long_polls_past_the_cap_get_503_with_retry_after(db_url: str) -> None:
    with serving(db_url, "--max-waits", "2") as served:
        job = httpx.post(f"{served.url}/api/jobs", json={"task": "t"}).json()
        wait_url = f"{served.url}/api/jobs/{job['id']}/wait"
        waited: list[httpx.Response] = []

        def wait() -> None:
            # As a polite client does: a 503 (a probe below took the slot) means later.
            while (
                answer := httpx.get(wait_url, params={"timeout": 30}, timeout=60)
            ).status_code == 503:
                time.sleep(0.05)
            waited.append(answer)

        waiters = [threading.Thread(target=wait) for _ in range(2)]
        for thread in waiters:
            thread.start()
        # A third long poll (with no time to wait) is refused once the two are waiting.
        refused = _eventually(lambda: _refused(httpx.get(wait_url, params={"timeout": 0})))
        assert refused.json()["error"]["code"] == "too_many_waits"
        assert refused.headers["retry-after"] == "1"
        claim = httpx.post(f"{served.url}/api/queues/default/claim", json={}).json()
        httpx.post(f"{served.url}/api/jobs/{job['id']}/complete",
                   json={"claim_id": claim["claim_id"]})  # fmt: skip
        for thread in waiters:
            thread.join(timeout=60)
        assert [r.json()["status"] for r in waited] == ["completed", "completed"]
        # The waits are over: polls are welcome again.
        assert httpx.get(wait_url, params={"timeout": 0}).status_code == 200


def _refused(response: httpx.Response) -> httpx.Response | None:
    return response if response.status_code == 503 else None


_HOLD_LOCK = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.read()
conn.rollback()
"""


def test_reads_answer_while_another_process_holds_the_sqlite_write_lock(tmp_path: Path) -> None:
    """Another process holds the write lock until the test lets it go, and writes sent
    to the server wait for it; reads (health, a job, stats, metrics) answer meanwhile.
    Were they queued behind the lock, they could not answer before it is released."""
    path = tmp_path / "q.db"
    with conveyor.connect(f"sqlite:///{path}") as q:
        job = q.enqueue("t", {"n": 1})
    with serving(f"sqlite:///{path}?timeout=120", tokens=TOKENS) as served:
        holder = subprocess.Popen(
            [sys.executable, "-c", _HOLD_LOCK, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
            writes: list[httpx.Response] = []
            writers = [
                threading.Thread(target=lambda: writes.append(httpx.post(
                    f"{served.url}/api/jobs", json={"task": "w"}, headers=AS_ADMIN, timeout=120)))
                for _ in range(3)
            ]  # fmt: skip
            for thread in writers:
                thread.start()
            time.sleep(0.5)  # let the writes reach the lock (their wait is not what is tested)
            with httpx.Client(base_url=served.url, headers=AS_READER, timeout=10) as reader:
                assert reader.get("/healthz").status_code == 200
                assert reader.get(f"/api/jobs/{job.id}").json()["id"] == job.id
                assert reader.get("/api/stats").json()["pending"] == 1
                assert reader.get("/api/jobs").status_code == 200
                assert "conveyor_database_up 1.0" in reader.get("/metrics").text
            assert holder.poll() is None and writes == []  # the lock was held throughout
        finally:
            holder.communicate(input="", timeout=30)  # lets the lock go
        for thread in writers:
            thread.join(timeout=120)
        assert [w.status_code for w in writes] == [201, 201, 201]


def test_the_server_puts_expired_leases_back_by_itself(db_url: str) -> None:
    """A worker claims over HTTP and dies; no client ever calls /api/recover, and nobody
    reads the job (a read would recover it): the server's own rescuer does."""
    with serving(db_url, "--rescue-interval", "0.2") as served:
        job = httpx.post(f"{served.url}/api/jobs", json={"task": "t"}).json()
        claim = httpx.post(f"{served.url}/api/queues/default/claim",
                           json={"lease_seconds": 1}).json()  # fmt: skip
        assert [j["id"] for j in claim["jobs"]] == [job["id"]]
        with conveyor.connect(db_url) as q:
            _eventually(lambda: q.stats().pending == 1)
            back = q.get(job["id"])
        assert back is not None and back.status == "pending"
        assert back.error is not None and back.error.startswith("lease expired")


def test_the_access_log_hides_claim_ids_and_cuts_long_urls(tmp_path: Path) -> None:
    secret = "5f0c2a9e" * 4
    long_key = "k" * 3000
    with serving(f"sqlite:///{tmp_path}/q.db") as served:
        headers = {"Content-Type": "application/json"}
        httpx.delete(f"{served.url}/api/claims/{secret}", headers=headers)
        httpx.post(f"{served.url}/api/claims/{secret}/ack", headers=headers)
        httpx.get(f"{served.url}/api/jobs", params={"key": long_key})
    assert "DELETE /api/claims/… HTTP/1.1" in served.log
    assert "POST /api/claims/…/ack HTTP/1.1" in served.log
    assert secret not in served.log
    assert "k" * 300 not in served.log
    assert "characters) HTTP/1.1" in served.log
