"""Console logins: an access key and its secret exchanged for a server-side session.

The cookie holds only a random session id (never the secret). Each request looks the key up again in
the live credential store, so a key revoked or given a new secret loses its sessions at once.
Failed logins wait, and attempts are throttled per key id and per client address (throttle.py), so
that guessing secrets over the form is slow however many connections try at once. A key keeps at
most `SESSIONS_PER_KEY` live sessions: a new login ends its oldest.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

from queueserver.auth.credentials import AccessKey, CredentialStore
from queueserver.clock import Clock
from queueserver.console.throttle import LoginThrottle

SESSION_COOKIE = "qs_console_session"
SESSION_SECONDS = 8 * 3600
FAILED_LOGIN_DELAY_S = 1.0
SESSIONS_PER_KEY = 10
_SESSIONS_KEPT = 10_000


def _fingerprint(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


@dataclass(frozen=True, slots=True)
class _Session:
    key_id: str
    secret_fingerprint: bytes  # a new secret for the key ends the session
    expires: float  # time.monotonic()


class Sessions:
    def __init__(self, store: CredentialStore, clock: Clock) -> None:
        self._store = store
        self._sessions: dict[str, _Session] = {}
        self._of_key: dict[str, list[str]] = {}  # key id -> its session ids, oldest first
        self._throttle = LoginThrottle(clock)

    async def login(self, key_id: str, secret: str, address: str) -> tuple[str | None, str]:
        """(a new session id, "") for a valid key and secret; (None, why not) otherwise, after a delay."""
        buckets = (f"key {key_id}", f"address {address}")
        wait = self._throttle.take(*buckets)
        if wait is not None:
            return None, (f"Too many login attempts for this key or from this address: try again in "
                          f"{max(1, round(wait))} seconds.")
        self._store.reload_if_changed()
        key = self._store.get(key_id)
        expected = key.secret if key is not None else secrets.token_urlsafe(32)  # compare even for unknown keys
        if key is None or not hmac.compare_digest(expected.encode(), secret.encode()):
            await asyncio.sleep(FAILED_LOGIN_DELAY_S)
            return None, "The access key ID or the secret access key is wrong."
        self._throttle.give_back(*buckets)
        now = time.monotonic()
        if len(self._sessions) >= _SESSIONS_KEPT:
            self._sessions = {sid: s for sid, s in self._sessions.items() if s.expires > now}
        live = [sid for sid in self._of_key.get(key_id, ()) if sid in self._sessions]
        while len(live) >= SESSIONS_PER_KEY:
            self._sessions.pop(live.pop(0), None)
        session_id = secrets.token_urlsafe(32)
        self._sessions[session_id] = _Session(key_id, _fingerprint(secret), now + SESSION_SECONDS)
        self._of_key[key_id] = live + [session_id]
        return session_id, ""

    def key(self, session_id: str) -> AccessKey | None:
        """The key of a live session, or None (unknown, expired, or the key revoked or re-keyed)."""
        session = self._sessions.get(session_id)
        if session is None:
            return None
        self._store.reload_if_changed()
        key = self._store.get(session.key_id)
        if (session.expires <= time.monotonic() or key is None
                or not hmac.compare_digest(_fingerprint(key.secret), session.secret_fingerprint)):
            self._sessions.pop(session_id, None)
            return None
        return key

    def logout(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
