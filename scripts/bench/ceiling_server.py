"""The HTTP ceiling for scripts/bench load: queueserver's own HTTP stack with nothing behind it.

    python scripts/bench/ceiling_server.py      # prints "READY http://127.0.0.1:PORT"

The same stack the server runs, so that "of ceiling" cannot flatter: a raw ASGI callable (no
starlette: the server's SQS endpoint is one too) on uvicorn with httptools, under uvloop, with
queueserver's own protocol class (`server._HttpProtocol`: head and body in one write), its
garbage-collector settings, and no access log. It reads the request body and answers a constant
of the size and headers of a SendMessage answer. Run with PYTHONPATH set to a snapshot of a
revision, it uses that revision's stack.
"""

from __future__ import annotations

import functools
import gc
import socket
from typing import Any

import uvicorn

from queueserver.server import _HttpProtocol

BODY = b'{"MD5OfMessageBody":"5d41402abc4b2a76b9719d911017c592","MessageId":"4ab6b4a1-9d4e-4a0b-8f5e-2f1c0e6d9a77"}'
HEADERS = [(b"content-length", str(len(BODY)).encode()), (b"content-type", b"application/x-amz-json-1.0"),
           (b"x-amzn-requestid", b"8d1b2c3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e")]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect" or not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})


def _protocol() -> Any:
    """The server's protocol class as the server builds it (with its limits, where it has them)."""
    try:
        from queueserver.config import ServerConfig
        from queueserver.http_guard import ConnectionGate
        from queueserver.tallies import ConnectionTally
    except ImportError:
        try:
            from queueserver.http_guard import RefusalLog
        except ImportError:  # a revision from before the request limits
            return _HttpProtocol
        return functools.partial(_HttpProtocol, limits=ServerConfig(), refusals=RefusalLog())
    config = ServerConfig()
    return functools.partial(_HttpProtocol, limits=config, gate=ConnectionGate(config.max_connections,
                                                                                 ConnectionTally()))


def main() -> None:
    import uvloop

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)  # connections wait in the backlog until uvicorn serves the socket
    config = uvicorn.Config(app, http=_protocol(), loop="none", access_log=False, log_level="warning",
                            lifespan="off")
    gc.freeze()
    gc.set_threshold(10_000, 20, 20)
    print(f"READY http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    uvloop.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    main()
