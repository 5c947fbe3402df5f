#!/usr/bin/env python3
"""What SigV4 verification costs in-process: server CPU per request with credentials on vs off.

The server's own ASGI app (queueserver.app.create_app) over one QueueEngine, driven directly
(no sockets, no HTTP parsing: those add the same to both sides, bar the two extra headers), once
open and once verifying signed requests of the same key, with 16 concurrent callers as
scripts/auth_bench.py's 16 connections. Scenarios, interleaved rep by rep:

  send10      SendMessageBatch of 10 (100-byte bodies)
  recv10+del  ReceiveMessage(10) + DeleteMessageBatch of what came back

Every signed request is signed afresh (the client's cost is not measured: signing happens
before the clock starts). Printed: CPU µs per request (process CPU, all threads: the database
thread's share included), min of --reps, and verifying/open. `--profile` prints cProfile's view
of the verifying paths instead; `--gil-probe` times `authenticate` alone and next to a busy
thread (a call that releases the GIL then waits for it back: the database thread, in the server).

Usage: .venv/bin/python scripts/auth_cost.py [--reps 7] [--requests 2000] [--profile | --gil-probe]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import hashlib
import hmac
import json
import pstats
import statistics
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from queueserver.app import create_app
from queueserver.auth import Authenticator, CredentialStore
from queueserver.clock import SystemClock
from queueserver.config import ServerConfig
from queueserver.storage import QueueEngine

KEY_ID, SECRET, ACCOUNT, REGION = "AKIDCOST", "cost-secret", "123456789012", "us-east-1"
HOST = "127.0.0.1:9324"
CALLERS = 16


def _signing_key(day: str) -> bytes:
    key = ("AWS4" + SECRET).encode()
    for part in (day, REGION, "sqs", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def headers_for(action: str, body: bytes, signed: bool) -> list[tuple[bytes, bytes]]:
    """The headers botocore sends (the open side gets the same, less the signature's two)."""
    target, content_type = f"AmazonSQS.{action}", "application/x-amz-json-1.0"
    headers = [(b"host", HOST.encode()), (b"content-type", content_type.encode()), (b"x-amz-target", target.encode()),
               (b"content-length", str(len(body)).encode())]
    if not signed:
        return headers
    amz_date = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    names = "content-type;host;x-amz-date;x-amz-target"
    canonical = (f"POST\n/\n\ncontent-type:{content_type}\nhost:{HOST}\nx-amz-date:{amz_date}\n"
                 f"x-amz-target:{target}\n\n{names}\n{hashlib.sha256(body).hexdigest()}")
    scope = f"{amz_date[:8]}/{REGION}/sqs/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    signature = hmac.new(_signing_key(amz_date[:8]), to_sign.encode(), hashlib.sha256).hexdigest()
    authorization = f"AWS4-HMAC-SHA256 Credential={KEY_ID}/{scope}, SignedHeaders={names}, Signature={signature}"
    return [*headers, (b"x-amz-date", amz_date.encode()), (b"authorization", authorization.encode())]


async def call(app: Any, action: str, payload: dict[str, Any], signed: bool) -> dict[str, Any]:
    body = json.dumps(payload, separators=(",", ":")).encode()
    return await send_prepared(app, headers_for(action, body, signed), body)


async def send_prepared(app: Any, headers: list[tuple[bytes, bytes]], body: bytes) -> dict[str, Any]:
    scope = {"type": "http", "method": "POST", "path": "/", "headers": headers, "scheme": "http",
             "query_string": b"", "client": ("127.0.0.1", 40000)}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    if sent[0]["status"] != 200:
        raise RuntimeError(f"{sent[0]['status']}: {sent[1]['body'][:300]!r}")
    return json.loads(sent[1]["body"])


async def send10(app: Any, url: str, signed: bool, per_caller: int) -> float:
    """CPU seconds of `per_caller` SendMessageBatch(10) from each of CALLERS concurrent callers."""
    body = json.dumps({"QueueUrl": url, "Entries": [{"Id": str(i), "MessageBody": "x" * 100} for i in range(10)]},
                      separators=(",", ":")).encode()
    prepared = [headers_for("SendMessageBatch", body, signed) for _ in range(per_caller)]  # signed before timing

    async def one() -> None:
        for headers in prepared:
            await send_prepared(app, headers, body)

    began = time.process_time()
    await asyncio.gather(*(one() for _ in range(CALLERS)))
    return time.process_time() - began


async def recv10_del(app: Any, url: str, signed: bool, per_caller: int) -> float:
    """CPU seconds of `per_caller` ReceiveMessage(10) + DeleteMessageBatch from each caller, less the signing
    (timed apart: it never awaits, so no other caller's work falls inside its time)."""
    signing = 0.0

    def sign(action: str, body: bytes) -> list[tuple[bytes, bytes]]:
        nonlocal signing
        began = time.process_time()
        headers = headers_for(action, body, signed)
        signing += time.process_time() - began
        return headers

    async def one() -> None:
        receive_body = json.dumps({"QueueUrl": url, "MaxNumberOfMessages": 10, "VisibilityTimeout": 300}).encode()
        for _ in range(per_caller):
            got = await send_prepared(app, sign("ReceiveMessage", receive_body), receive_body)
            entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got["Messages"])]
            delete_body = json.dumps({"QueueUrl": url, "Entries": entries}).encode()
            await send_prepared(app, sign("DeleteMessageBatch", delete_body), delete_body)

    began = time.process_time()
    await asyncio.gather(*(one() for _ in range(CALLERS)))
    return time.process_time() - began - signing


async def main_async(args: argparse.Namespace, folder: Path) -> None:
    keys = folder / "keys.toml"
    keys.write_text(f'[keys.{KEY_ID}]\nsecret_access_key = "{SECRET}"\naccount_id = "{ACCOUNT}"\n')
    config = ServerConfig(account_id=ACCOUNT)
    engine = await QueueEngine.open(str(folder / "cost.db"), SystemClock())
    try:
        apps = {"open": create_app(config, engine), "verifying": create_app(config, engine,
                                                                            Authenticator(CredentialStore(keys)))}
        url = (await call(apps["open"], "CreateQueue", {"QueueName": "cost"}, False))["QueueUrl"]
        per_caller = args.requests // CALLERS
        if args.profile:
            await send10(apps["open"], url, False, per_caller * 2)  # the backlog the receives take
            profile = cProfile.Profile()
            profile.enable()
            await send10(apps["verifying"], url, True, per_caller)
            await recv10_del(apps["verifying"], url, True, per_caller)
            profile.disable()
            pstats.Stats(profile).sort_stats("tottime").print_stats(40)
            return
        for name in apps:  # warm both paths
            await send10(apps[name], url, name == "verifying", 20)
        best: dict[tuple[str, str], float] = {}
        for rep in range(args.reps):
            order = list(apps) if rep % 2 == 0 else list(apps)[::-1]
            for scenario, run, requests in (("send10", send10, per_caller * CALLERS),
                                            ("recv10+del", recv10_del, per_caller * CALLERS * 2)):
                for name in order:
                    if scenario == "send10":  # keep the backlog the receives need
                        cpu = await run(apps[name], url, name == "verifying", per_caller)
                    else:
                        await send10(apps["open"], url, False, per_caller)
                        cpu = await run(apps[name], url, name == "verifying", per_caller)
                    per_request = cpu / requests * 1e6
                    best[(scenario, name)] = min(best.get((scenario, name), per_request), per_request)
        print(f"CPU µs per request, min of {args.reps} interleaved runs of {per_caller * CALLERS} "
              f"requests ({CALLERS} concurrent callers)")
        for scenario in ("send10", "recv10+del"):
            open_us, verifying_us = best[(scenario, "open")], best[(scenario, "verifying")]
            print(f"{scenario:11s} open {open_us:6.1f}  verifying {verifying_us:6.1f}  "
                  f"overhead {verifying_us - open_us:5.1f} µs ({verifying_us / open_us - 1:+.1%}); "
                  f"open/verifying {open_us / verifying_us:.3f}x")
    finally:
        await engine.close()


def gil_probe(folder: Path) -> None:
    """Wall µs per `authenticate` next to a busy thread: a call that releases the GIL waits to get it back.
    Batches of 200 calls (shorter than the 5 ms switch interval, so no forced switch falls inside); median of 25."""
    from queueserver.app import _http_request
    from queueserver.auth import Signed

    keys = folder / "keys.toml"
    keys.write_text(f'[keys.{KEY_ID}]\nsecret_access_key = "{SECRET}"\naccount_id = "{ACCOUNT}"\n')
    authenticator = Authenticator(CredentialStore(keys))
    body = json.dumps({"QueueUrl": f"http://{HOST}/{ACCOUNT}/cost", "Entries": [
        {"Id": str(i), "MessageBody": "x" * 100} for i in range(10)]}).encode()
    scope = {"type": "http", "method": "POST", "path": "/", "headers": headers_for("SendMessageBatch", body, True),
             "scheme": "http", "query_string": b"", "client": ("127.0.0.1", 40000)}
    request = _http_request(scope, body, HOST)
    signed = Signed(request.method, request.path, request.query_string, request.headers, request.body, False)
    now_ms = int(time.time() * 1000)
    spinning = True

    def spin() -> None:
        while spinning:
            pass

    thread = threading.Thread(target=spin)
    thread.start()
    walls = []
    for _ in range(25):
        time.sleep(0.01)  # the spinner has the GIL; the next call takes it back at a switch
        began = time.perf_counter()
        for _ in range(200):
            authenticator.authenticate(signed, now_ms, "127.0.0.1")
        walls.append((time.perf_counter() - began) / 200 * 1e6)
    spinning = False
    thread.join()
    print(f"authenticate next to a busy thread: {statistics.median(walls):.1f} µs wall per call")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--requests", type=int, default=2000, help="requests per run (split among the callers)")
    parser.add_argument("--profile", action="store_true", help="cProfile the verifying paths instead")
    parser.add_argument("--gil-probe", action="store_true",
                        help="time authenticate alone and next to a busy thread instead (a GIL handed away shows)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="auth-cost-") as folder:
        if args.gil_probe:
            gil_probe(Path(folder))
        else:
            asyncio.run(main_async(args, Path(folder)))


if __name__ == "__main__":
    main()
