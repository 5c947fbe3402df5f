"""The crash test's records and their check (no pytest, no I/O in here).

A call's outcome is acknowledged (a response said so), refused (a response said no,
or the connection was never made), or unknown (the request may have landed but no
response came back). `verify` compares the records with the queue's final contents.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

ACKED, REFUSED, UNKNOWN = "acked", "refused", "unknown"


@dataclass
class Observation:
    sent_at: float  # wall time the receive request left
    answered_at: float  # wall time its response arrived
    count: int


@dataclass
class Ledger:
    lock: threading.Lock = field(default_factory=threading.Lock)
    sends: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # body -> (outcome, MessageId)
    # message id -> wall time a delete was acknowledged inside its visibility window
    effective_deletes: dict[str, float] = field(default_factory=dict)
    late_deletes: set[str] = field(default_factory=set)  # acknowledged after the window: maybe stale
    delete_attempts: set[str] = field(default_factory=set)  # acknowledged or unknown deletes
    observations: dict[str, list[Observation]] = field(default_factory=lambda: defaultdict(list))
    body_of: dict[str, str] = field(default_factory=dict)  # message id -> body, from receives
    calls: Counter[str] = field(default_factory=Counter)  # "Action:outcome"
    errors: Counter[str] = field(default_factory=Counter)  # "Action:Code" of refused calls
    receives: int = 0
    # for diagnosis: body -> (started, finished, queue URL) of its send
    send_trace: dict[str, tuple[float, float, str]] = field(default_factory=dict)
    events: list[tuple[float, str]] = field(default_factory=list)  # (wall time, what the killer did)
    delete_trace: dict[str, list[tuple[str, float, float]]] = field(default_factory=lambda: defaultdict(list))
    failures: list[tuple[float, str, str, str]] = field(default_factory=list)  # (time, thread, action, error)

    def note(self, action: str, outcome: str, code: str | None = None) -> None:
        with self.lock:
            self.calls[f"{action}:{outcome}"] += 1
            if code:
                self.errors[f"{action}:{code}"] += 1

    def send(self, body: str, outcome: str, message_id: str | None, when: tuple[float, float, str]) -> None:
        with self.lock:
            self.sends[body] = (outcome, message_id)
            self.send_trace[body] = when

    def received(self, messages: list[dict[str, Any]], sent_at: float, answered_at: float) -> None:
        with self.lock:
            for m in messages:
                mid = m["MessageId"]
                self.receives += 1
                self.body_of[mid] = m["Body"]
                count = int(m["Attributes"]["ApproximateReceiveCount"])
                self.observations[mid].append(Observation(sent_at, answered_at, count))

    def failed(self, action: str, exc: BaseException) -> str:
        """Record a call that raised; returns its outcome (refused or unknown)."""
        outcome, code = classify(exc)
        self.note(action, outcome, code)
        with self.lock:
            self.failures.append((time.time(), threading.current_thread().name, action, repr(exc)[:300]))
        return outcome

    def delete(self, mid: str, outcome: str, answered_at: float, safe_until: float) -> None:
        with self.lock:
            self.delete_trace[mid].append((outcome, answered_at, safe_until))
            if outcome in (ACKED, UNKNOWN):
                self.delete_attempts.add(mid)
            if outcome == ACKED:
                if answered_at < safe_until:
                    self.effective_deletes.setdefault(mid, answered_at)
                else:
                    self.late_deletes.add(mid)


def classify(exc: BaseException) -> tuple[str, str | None]:
    """(outcome, error code) of a failed call."""
    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code", "?")
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if status >= 500 and code != "ServiceUnavailable":  # 503 ServiceUnavailable: nothing was changed
            return UNKNOWN, code
        return REFUSED, code
    if isinstance(exc, EndpointConnectionError):  # the connection was never made: nothing was sent
        return REFUSED, None
    if isinstance(exc, BotoCoreError):  # reset, closed, timed out: the request may have landed
        return UNKNOWN, None
    raise exc



@dataclass
class Figures:
    kills: int = 0
    acked_sends: int = 0
    unknown_sends: int = 0
    refused_sends: int = 0
    receives: int = 0
    acked_deletes: int = 0  # acknowledged inside the visibility window (they must stick)
    late_deletes: int = 0  # acknowledged after the window (the handle may have been stale)
    drained: int = 0
    unknown_sends_that_landed: int = 0
    lost: list[str] = field(default_factory=list)
    resurrected: list[str] = field(default_factory=list)
    count_regressions: list[str] = field(default_factory=list)
    counts_not_increased: list[str] = field(default_factory=list)
    wrong_ids: list[str] = field(default_factory=list)
    phantoms: list[str] = field(default_factory=list)
    integrity: str = "?"
    calls: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    ledger: Ledger | None = field(default=None, repr=False)  # the raw records, for diagnosis

    @property
    def ok(self) -> bool:
        return (not (self.lost or self.resurrected or self.count_regressions or self.counts_not_increased
                     or self.wrong_ids or self.phantoms) and self.integrity == "ok")

    def lines(self) -> list[str]:
        return [
            f"kills: {self.kills}",
            (f"sends: {self.acked_sends} acknowledged, {self.unknown_sends} unknown "
             f"({self.unknown_sends_that_landed} of them landed), {self.refused_sends} refused"),
            f"receives seen: {self.receives}",
            f"deletes: {self.acked_deletes} acknowledged in the window, {self.late_deletes} acknowledged late",
            f"drained at the end: {self.drained}",
            f"lost: {len(self.lost)}",
            f"resurrected: {len(self.resurrected)}",
            (f"receive count regressions: {len(self.count_regressions)} "
             f"(not increased: {len(self.counts_not_increased)})"),
            f"wrong message ids: {len(self.wrong_ids)}, phantoms: {len(self.phantoms)}",
            f"integrity: {self.integrity}",
            f"calls: {dict(sorted(self.calls.items()))}",
            f"refusals: {dict(sorted(self.errors.items()))}",
        ]

    def report(self) -> str:
        details = []
        for name in ("lost", "resurrected", "count_regressions", "counts_not_increased", "wrong_ids", "phantoms"):
            items = getattr(self, name)
            if items:
                details.append(f"{name} (first 10): {items[:10]}")
        if self.ledger is not None and details:
            details += self.diagnosis()
        return "\n".join(self.lines() + details)

    def diagnosis(self) -> list[str]:
        """The records around the first few bad messages: sends, receives, deletes, kills, errors."""
        ledger = self.ledger
        assert ledger is not None
        lines = []
        mid_by_body = {body: mid for body, (_, mid) in ledger.sends.items() if mid}
        bad_mids = [item.split(" ", 1)[0].rstrip(":") for item in
                    self.lost[:3] + self.resurrected[:3] + self.count_regressions[:3] + self.counts_not_increased[:3]]
        for mid in bad_mids:
            body = ledger.body_of.get(mid) or next((b for b, m in mid_by_body.items() if m == mid), "?")
            sent = ledger.send_trace.get(body)
            lines.append(f"message {mid} body {body[:30]}: send {ledger.sends.get(body)} at {sent}")
            lines.append(f"  receives (sent, answered, count): {ledger.observations.get(mid)}")
            lines.append(f"  deletes (outcome, answered, safe until): {ledger.delete_trace.get(mid)}")
            times = [o.sent_at for o in ledger.observations.get(mid, [])] + ([sent[0]] if sent else [])
            if times:
                lo, hi = min(times) - 2, max(times) + 5
                lines += [f"  server: {t:.3f} {what}" for t, what in ledger.events if lo <= t <= hi]
                lines += [f"  error: {t:.3f} {who} {action} {err[:120]}" for t, who, action, err in ledger.failures
                          if lo <= t <= hi][:20]
        return lines


def verify(ledger: Ledger, drained: dict[str, tuple[str, int]], kills: int, integrity_result: str) -> Figures:
    f = Figures(kills=kills, integrity=integrity_result, receives=ledger.receives, drained=len(drained),
                calls=dict(ledger.calls), errors=dict(ledger.errors), ledger=ledger)
    f.acked_deletes = len(ledger.effective_deletes)
    f.late_deletes = len(ledger.late_deletes)
    for body, (outcome, mid) in ledger.sends.items():
        if outcome == ACKED:
            f.acked_sends += 1
            if body in drained:
                if drained[body][0] != mid:
                    f.wrong_ids.append(f"{body[:40]}: sent as {mid}, drained as {drained[body][0]}")
            elif mid not in ledger.delete_attempts:
                f.lost.append(f"{mid} {body[:40]}")
        elif outcome == UNKNOWN:
            f.unknown_sends += 1
            if body in drained:
                f.unknown_sends_that_landed += 1
        else:
            f.refused_sends += 1
            if body in drained:
                f.phantoms.append(f"refused send landed: {body[:40]}")
    for body in drained:
        if body not in ledger.sends:
            f.phantoms.append(f"never sent: {body[:40]}")
    for mid, deleted_at in ledger.effective_deletes.items():
        back = [o for o in ledger.observations.get(mid, []) if o.sent_at > deleted_at]
        if back:
            f.resurrected.append(f"{mid}: delete acknowledged at {deleted_at:.3f}, "
                                 f"received again at {back[0].sent_at:.3f} (count {back[0].count})")
    for mid, seen in ledger.observations.items():
        by_answer = sorted(seen, key=lambda o: o.answered_at)
        for later in seen:
            before = [o.count for o in by_answer if o.answered_at < later.sent_at]
            if not before:
                continue
            highest = max(before)
            if later.count < highest:
                f.count_regressions.append(f"{mid}: count {later.count} after {highest} was seen")
            elif later.count == highest:
                f.counts_not_increased.append(f"{mid}: count {later.count} again")
    return f
