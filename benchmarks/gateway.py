"""The gateway's cost: prints JSON.

1. Added latency per proxied call: the same chat call (tools offered; a tool result sent back on every
   second call) sent one at a time straight to a stub upstream on localhost and through `lle serve` in
   front of it, interleaved, in the same run. Reported: p50/p95 of each, and of the difference.
2. Throughput: 32 concurrent clients, each running its own episodes through the gateway as fast as
   it answers; calls/s (and the stub's calls/s straight, for reference).
3. Lost records: every episode is then given feedback and ended; the steps stored must equal the
   calls that got a 200.

The stub and the gateway each run in their own process (`python -m lle.gateway.stub`, `lle serve`),
so the load generator's Python does not share their interpreter.

    .venv/bin/python benchmarks/gateway.py [--calls 400] [--clients 32] [--per-client 40] [--steps 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2

from lle.gateway.stub import free_port
from lle.store import Store

TOKEN = "bench-token"
TOOLS = [{"type": "function", "function": {"name": "run_tests", "description": "Run the tests.",
                                           "parameters": {"type": "object", "properties": {}}}}]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far: the gateway's own cost, whatever else the machine runs."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_up(url: str, headers: dict[str, str], seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx2.get(url, headers=headers, timeout=1.0).status_code == 200:
                return
        except httpx2.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def messages_for(step: int, last: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A growing agent conversation: the task, and after a tool call its result."""
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."},
                                 {"role": "user", "content": f"Fix the failing test number {step % 7} in calc.py."}]
    if last and last.get("tool_calls"):
        out += [last, {"role": "tool", "tool_call_id": last["tool_calls"][0]["id"], "content": "1 failed, 3 passed"}]
    return out


def latency(stub: str, gateway: str, calls: int) -> dict[str, Any]:
    direct, proxied = [], []
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx2.Client(timeout=30) as client:
        last_direct: dict[str, Any] | None = None
        last_proxied: dict[str, Any] | None = None
        for i in range(calls + 20):
            episode = f"lat-{i // 8}"
            t = time.perf_counter()
            r = client.post(f"{stub}/chat/completions", json={"messages": messages_for(i, last_direct), "tools": TOOLS})
            d = (time.perf_counter() - t) * 1000
            last_direct = None if last_direct else r.json()["choices"][0]["message"]
            t = time.perf_counter()
            r = client.post(f"{gateway.removesuffix('/v1')}/episodes/{episode}/v1/chat/completions", headers=auth,
                            json={"messages": messages_for(i, last_proxied), "tools": TOOLS})
            p = (time.perf_counter() - t) * 1000
            assert r.status_code == 200, r.text
            last_proxied = None if last_proxied else r.json()["choices"][0]["message"]
            if i >= 20:  # warm-up left out
                direct.append(d)
                proxied.append(p)
    added = [p - d for p, d in zip(proxied, direct, strict=True)]
    return {"calls": calls, "direct_ms": {"p50": pct(direct, 0.5), "p95": pct(direct, 0.95)},
            "gateway_ms": {"p50": pct(proxied, 0.5), "p95": pct(proxied, 0.95)},
            "added_ms": {"p50": round(pct(proxied, 0.5) - pct(direct, 0.5), 3),
                         "p95": round(pct(proxied, 0.95) - pct(direct, 0.95), 3),
                         "paired_p50": pct(added, 0.5), "paired_p95": pct(added, 0.95),
                         "mean": round(statistics.fmean(added), 3)}}


async def load(url: str, clients: int, per_client: int, steps: int, episodes: bool) -> tuple[float, dict[str, int]]:
    """calls/s with `clients` concurrent clients; returns it and the 200s per episode."""
    ok: dict[str, int] = {}
    auth = {"Authorization": f"Bearer {TOKEN}"}
    limits = httpx2.Limits(max_connections=clients * 2, max_keepalive_connections=clients * 2)
    async with httpx2.AsyncClient(timeout=60, limits=limits) as client:
        async def one(c: int) -> None:
            last: dict[str, Any] | None = None
            for i in range(per_client):
                episode = f"load-{c}-{i // steps}"
                target = f"{url.removesuffix('/v1')}/episodes/{episode}/v1/chat/completions" if episodes \
                    else f"{url}/chat/completions"
                r = await client.post(target, headers=auth, json={"messages": messages_for(i, last), "tools": TOOLS})
                if r.status_code == 200:
                    ok[episode] = ok.get(episode, 0) + 1
                    last = None if last else r.json()["choices"][0]["message"]
        started = time.perf_counter()
        await asyncio.gather(*(one(c) for c in range(clients)))
        elapsed = time.perf_counter() - started
    return round(clients * per_client / elapsed, 1), ok


def end_all(gateway: str, episodes: list[str]) -> dict[str, str]:
    """Feedback and end for each episode; episode -> experience id."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    out = {}
    with httpx2.Client(timeout=120, headers=auth) as client:
        for episode in episodes:
            client.post(f"{gateway}/lle/episodes/{episode}/feedback", json={"kind": "test_result", "passed": True})
            r = client.post(f"{gateway}/lle/episodes/{episode}/end", json={})
            assert r.status_code == 200, r.text
            out[episode] = r.json()["experience_id"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--per-client", type=int, default=40)
    parser.add_argument("--steps", type=int, default=8, help="calls per episode")
    args = parser.parse_args()
    workspace = Path(tempfile.mkdtemp(prefix="lle-gateway-bench-"))
    stub_port, gw_port = free_port(), free_port()
    env = {**os.environ, "LLE_GATEWAY_TOKEN": TOKEN}
    procs = [subprocess.Popen([sys.executable, "-m", "lle.gateway.stub", "--port", str(stub_port)],
                              stdout=subprocess.DEVNULL),
             subprocess.Popen([sys.executable, "-m", "lle.cli.main", "--workspace", str(workspace), "serve",
                               "--port", str(gw_port), "--upstream", f"http://127.0.0.1:{stub_port}/v1",
                               "--model", "stub", "--rate", "100000", "--burst", "100000"],
                              env=env, stdout=subprocess.DEVNULL)]
    stub, gateway = f"http://127.0.0.1:{stub_port}/v1", f"http://127.0.0.1:{gw_port}/v1"
    try:
        wait_up(f"{stub}/models", {})
        wait_up(f"{gateway}/models", {"Authorization": f"Bearer {TOKEN}"})
        cpu_before = cpu_seconds(procs[1].pid)
        lat = latency(stub, gateway, args.calls)
        lat["gateway_cpu_ms_per_call"] = round((cpu_seconds(procs[1].pid) - cpu_before) * 1000 / (args.calls + 20), 3)
        direct_rate, _ = asyncio.run(load(stub, args.clients, args.per_client, args.steps, episodes=False))
        gw_rate, ok = asyncio.run(load(gateway, args.clients, args.per_client, args.steps, episodes=True))
        sent = sum(ok.values())
        lat_episodes = list(dict.fromkeys(f"lat-{i // 8}" for i in range(args.calls + 20)))
        t = time.perf_counter()
        ids = end_all(gateway, [*ok, *lat_episodes])
        end_s = time.perf_counter() - t
        ended = len(ids)
        with Store(workspace / "lle.db") as db:  # counted in the ledger, not from the gateway's answers
            stored = sum(len(db.steps_of(ids[ep])) for ep in ok)
        result = {
            "load_average": os.getloadavg(),
            "added_latency": lat,
            "throughput": {"clients": args.clients, "calls": args.clients * args.per_client,
                           "gateway_calls_per_s": gw_rate, "direct_calls_per_s": direct_rate},
            "records": {"calls_ok": sent, "steps_stored": stored, "lost": sent - stored,
                        "episodes_ended": ended, "end_seconds_each": round(end_s / max(ended, 1), 4)},
        }
        print(json.dumps(result, indent=2))
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)


if __name__ == "__main__":
    main()
