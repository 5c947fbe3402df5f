"""Runs the server: opens the engine, serves HTTP, prints READY, shuts down cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import gc
import ipaddress
import logging
import resource
import os
import platform
import signal
import socket
import ssl
import sys
from typing import Any, Callable

import uvicorn

from queueserver.app import ASGIApp, create_apps
from queueserver.auth import Authenticator, CredentialStore
from queueserver.config import ServerConfig
from queueserver.errors import ConfigError, StartupError
from queueserver.queue_setup import apply_queues
from queueserver.roles import Roles, open_primary, standby_for
from queueserver.http_guard import ConnectionGate, ForwardedShare, GuardedHttpProtocol, tls_protocol
from queueserver.logs import use_format
from queueserver.tallies import ConnectionTally

log = logging.getLogger(__name__)


class _OneWriteTransport:
    """A connection's transport that sends a response's head and body in one `send`.

    uvicorn writes the status line and headers, then the body: two system calls and two
    TCP segments per response. Here the first write of a loop step is held until the next
    write (the body, which follows at once) or, failing that, the end of the step.
    """

    __slots__ = ("_transport", "_loop", "_held", "_closed_unsent")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop,
                 closed_unsent: Callable[[], None]) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None
        self._closed_unsent = closed_unsent  # told when a close must wait for the client to read

    def write(self, data: bytes) -> None:
        held = self._held
        if held is None:
            self._held = bytes(data)
            self._loop.call_soon(self._flush)
        else:
            self._held = None
            self._transport.write(held + data)

    def _flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if not self._transport.is_closing():  # the client went away meanwhile
                self._transport.write(held)

    def close(self) -> None:
        self._flush()
        self._transport.close()
        if self._transport.get_write_buffer_size():
            self._closed_unsent()

    def is_closing(self) -> bool:  # asked three times a request: through __getattr__ that cost ~1 us
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _HttpProtocol(GuardedHttpProtocol):
    def __init__(self, *args: Any, app: ASGIApp | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if app is not None:  # the metrics listener's connections: its own app, the same limits
            self.app = app

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_OneWriteTransport(transport, self.loop, self.closed_unsent))  # type: ignore[arg-type]

    def shutdown(self) -> None:
        super().shutdown()
        # Closing an idle TLS connection waits up to 30 s for the client's close_notify, which a
        # pooled client never sends; at shutdown nothing is left to say on it.
        if self.transport.is_closing() and self.transport.get_extra_info("sslcontext") is not None:
            self.transport.abort()


class _Server(uvicorn.Server):
    """uvicorn, plus the metrics listener, the READY line and long polls that end when shutdown begins.

    The metrics listener is one more asyncio server of the same protocols, gate and connection state,
    so its connections count against --max-connections and obey the same head, body and idle limits.
    """

    def __init__(self, config: uvicorn.Config, begin_shutdown: Callable[[], None], host: str, scheme: str,
                 metrics: tuple[tuple[str, int], Callable[..., Any]] | None = None) -> None:
        super().__init__(config)
        self._begin_shutdown = begin_shutdown
        self._host = host
        self._loop: asyncio.AbstractEventLoop | None = None
        self._scheme = scheme
        self._metrics = metrics

    async def startup(self, sockets: Any = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().startup(sockets)
        if self.should_exit:
            return
        if self._metrics is not None:
            (host, port), protocols = self._metrics
            create = functools.partial(protocols, config=self.config, server_state=self.server_state,
                                       app_state=self.lifespan.state)
            try:
                listener = await self._loop.create_server(create, host=host, port=port, backlog=self.config.backlog)
            except OSError as exc:
                raise StartupError(f"--metrics-listen {host}:{port}: {exc.strerror or exc}") from None
            self.servers.append(listener)
            bound = listener.sockets[0].getsockname()
            log.info("metrics listener on %s://%s:%d (/metrics, /health and /ready, unsigned)", self._scheme,
                     host if ":" not in host else f"[{host}]", bound[1])
        port = self.servers[0].sockets[0].getsockname()[1]
        sys.stdout.write(f"READY {self._scheme}://{self._host}:{port}\n")
        sys.stdout.flush()

    def handle_exit(self, sig: int, frame: Any) -> None:
        super().handle_exit(sig, frame)
        # uvicorn re-raises the signal once serving stops, which would kill the process
        # before the database is closed; the shutdown is clean, so exit 0 instead.
        self._captured_signals.clear()
        # The handler runs between two bytecodes of whatever the loop's thread was doing (say,
        # between a notify's done() and set_result()); the shutdown itself runs as a loop step.
        if self._loop is not None:  # None: a signal before serving began; nobody waits yet
            self._loop.call_soon_threadsafe(self._begin_shutdown)


def _tls_context(config: ServerConfig) -> ssl.SSLContext | None:
    """The certificate and key of --tls-cert and --tls-key, loaded before anything else starts."""
    if config.tls_cert is None:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(config.tls_cert, config.tls_key)
    except (OSError, ssl.SSLError) as exc:
        raise StartupError(f"cannot use the certificate {config.tls_cert} and key {config.tls_key}: {exc}") from exc
    return context


def _protocols(config: ServerConfig, gate: ConnectionGate, tls: ssl.SSLContext | None,
               app: ASGIApp | None = None) -> Callable[..., Any]:
    """What uvicorn builds for each connection it accepts: the HTTP protocol, under TLS if it is on.
    TLS is done here, below the gate, rather than by uvicorn (its TLS would hide the connection from
    the gate until the handshake is over). `app`: the metrics listener's, instead of uvicorn's."""
    def accepted(**uvicorn_args: Any) -> asyncio.BaseProtocol:
        http = _HttpProtocol(limits=config, gate=gate, under_tls=tls is not None, app=app, **uvicorn_args)
        if tls is None:
            return http
        return tls_protocol(http, tls, gate, config.handshake_timeout)

    return accepted


def _listen(config: ServerConfig) -> list[socket.socket]:
    """The server's sockets, bound before the database is opened, so that a taken port or an address this
    machine does not have refuses the start in one line with nothing written (uvicorn listens on them)."""
    try:
        found = socket.getaddrinfo(config.host, config.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise StartupError(f"cannot listen on {config.host}: {exc.strerror}") from None
    bound: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(found):  # as asyncio's create_server binds them
            bound.append(sock := socket.socket(family, kind, proto))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
    except OSError as exc:
        for sock in bound:
            sock.close()
        raise StartupError(f"cannot listen on {config.host} port {config.port}: {exc.strerror or exc}") from None
    return bound
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter (malloc.h)


def _return_large_blocks() -> None:
    """Fix glibc's threshold above which a block is mapped apart (and unmapped when freed) at 128 KiB.

    glibc raises that threshold each time a mapped block is freed, up to 32 MiB: after a few answers of
    megabytes (ten 1 MiB messages) later ones come from the heap, and once freed (an answer its client
    never read, closed at the write deadline) their pages stay with the process. Measured: 30 unread
    10 MB answers left RSS 300 MB above its start with the moving threshold, 10 MB with it fixed."""
    if platform.libc_ver()[0] != "glibc":
        return
    try:
        ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, 128 * 1024)
    except (OSError, AttributeError):  # not glibc after all: its allocator keeps its own policy
        pass


def _allow_descriptors(config: ServerConfig) -> None:
    """Raise the soft descriptor limit so that --max-connections can be reached (the hard limit caps it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = config.max_connections + 64  # the database, its log, the listener, the event loop
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return
    granted = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (granted, hard))
    if granted < wanted:
        log.warning("only %d file descriptors are allowed: fewer than --max-connections %d needs",
                    granted, config.max_connections)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _log_access(config: ServerConfig, store: CredentialStore | None) -> None:
    """One line on who may call: said once the database is open (a refusal to start stays one line)."""
    if store is None:
        level = logging.INFO if _is_loopback(config.host) else logging.WARNING
        log.log(level, "no --credentials: every request is accepted, signed or not, with any key, on %s",
                config.host)
    else:
        log.info("credentials on: %d key(s) from %s; reloaded on SIGHUP and when the file changes",
                 len(store.keys), config.credentials_path)


def _trusted_proxies(config: ServerConfig) -> list[str]:
    """--trusted-proxy as uvicorn's forwarded_allow_ips wants it; anything but an address or network is refused
    (uvicorn would take it as a literal host name, which no socket peer ever is)."""
    trusted = []
    for entry in config.trusted_proxies:
        try:
            trusted.append(str(ipaddress.ip_network(entry, strict=False)) if "/" in entry
                           else str(ipaddress.ip_address(entry)))
        except ValueError:
            raise ConfigError(f"--trusted-proxy {entry!r}: expected an IP address or a network (10.0.0.0/8)") from None
    return trusted


async def _watch_credentials(store: CredentialStore) -> None:
    """Reload the credentials file when it changes (a stat a second) and on SIGHUP."""
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGHUP, store.reload)
    try:
        while True:
            await asyncio.sleep(1)
            store.reload_if_changed()
    finally:
        loop.remove_signal_handler(signal.SIGHUP)


async def serve(config: ServerConfig, standby: bool = False) -> None:
    """Serve as the primary; or, `standby`, follow the replica of --replicate until promoted."""
    # Read before the database opens, so a broken file stops the start and touches nothing.
    store = CredentialStore(config.credentials_path) if config.credentials_path is not None else None
    authenticator = Authenticator(store) if store is not None else None
    trusted_proxies = _trusted_proxies(config)
    tls = _tls_context(config)
    listeners = _listen(config)
    _allow_descriptors(config)
    _return_large_blocks()
    roles = Roles()
    connections = ConnectionTally()
    server: list[_Server] = []

    def fenced(why: str) -> None:
        roles.fenced = why
        log.error("refusing writes and stopping: %s", why)
        if server:
            server[0].should_exit = True

    async def open_apps(generation: int | None) -> tuple[ASGIApp, ASGIApp]:
        engine = await open_primary(config, roles, generation, fenced)
        await apply_queues(engine, config.queues, config.region)
        return create_apps(config, engine, authenticator, connections,
                           roles.replicator.report if roles.replicator is not None else None)

    if standby:
        os.umask(0o077)  # the copy Litestream writes, and all the server writes once promoted: 0600
        def open_reader(engine: Any) -> ASGIApp:  # a snapshot's read-only engine (standby_reads.py)
            report = roles.standby.follower.report if roles.standby is not None else None
            return create_apps(config, engine, authenticator, connections, report)[0]

        standby_role = roles.standby = standby_for(config, authenticator, open_apps, open_reader)
        engine_apps: tuple[ASGIApp, ASGIApp] = (standby_role.main, standby_role.metrics)
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGUSR1, lambda: asyncio.ensure_future(standby_role.promote()))
    watcher = asyncio.create_task(_watch_credentials(store)) if store is not None else None
    try:
        if roles.standby is not None:
            await roles.standby.start()
        else:
            engine_apps = await open_apps(None)
        # Said once the database has opened, so that a start refused there stays one line.
        _log_access(config, store)
        if trusted_proxies:
            log.info("X-Forwarded-For and X-Forwarded-Proto are believed from %s (--trusted-proxy)",
                     ", ".join(trusted_proxies))
        app, metrics_app = engine_apps
        gate = ConnectionGate(config.max_connections, connections, config.connections_per_address, trusted_proxies)
        metrics_address = config.metrics_address
        # Start-up objects live for the whole run: keep the collector from scanning them again
        # and again (it took 3-4 % of the CPU under load).
        gc.freeze()
        gc.set_threshold(10_000, 20, 20)
        if trusted_proxies:  # their clients share a connection: counted by forwarded address, request by request
            app = ForwardedShare(app, gate)
        uvicorn_config = _uvicorn_config(config, app, _protocols(config, gate, tls), trusted_proxies)
        metrics = (metrics_address, _protocols(config, gate, tls, metrics_app)) if metrics_address else None
        server.append(_Server(uvicorn_config, roles.begin_shutdown, config.host,
                              "https" if tls is not None else "http", metrics))
        await server[0].serve(sockets=listeners)
    finally:
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        for sock in listeners:  # uvicorn closes them too, once it has served on them
            sock.close()
        await roles.close()
    if roles.fenced is not None:
        raise StartupError(roles.fenced)


def _uvicorn_config(config: ServerConfig, app: ASGIApp, protocols: Any, trusted_proxies: list[str]) -> uvicorn.Config:
    """uvicorn's settings: our own protocols, no upgrades, no lifespan, proxies believed only if trusted."""
    return uvicorn.Config(
        app, host=config.host, port=config.port, access_log=False, log_level="warning",
        http=protocols, loop="none", ws="none",
        lifespan="off", timeout_graceful_shutdown=30, timeout_keep_alive=config.keep_alive_timeout,
        # Off unless configured: by default uvicorn believes X-Forwarded-For/-Proto from loopback, which
        # would let any local client choose its aws:SourceIp and aws:SecureTransport.
        proxy_headers=bool(trusted_proxies), forwarded_allow_ips=trusted_proxies or None,
        # JSON lines: uvicorn's loggers then use the root's handlers, not a text format of their own.
        log_config=None if config.log_format == "json" else uvicorn.config.LOGGING_CONFIG,
    )


def run(config: ServerConfig, standby: bool = False) -> None:
    use_format(config.log_format)
    try:
        import uvloop
    except ImportError:  # uvloop is not on every platform; asyncio works, slower
        asyncio.run(serve(config, standby))
    else:
        uvloop.run(serve(config, standby))
