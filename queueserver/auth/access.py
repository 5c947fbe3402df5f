"""Who is calling, and may they do this: the two questions asked of every request with credentials on.

`Authenticator.authenticate` checks the signature and returns the `Principal`; `Principal.authorize`
decides one IAM action on one resource, as the door (protocol/door.py) asks it for each need of the
request's declared rule (auth/door.py), the way IAM and SQS decide it: an explicit Deny in the key's identity
policy or the queue's policy wins; on its own account's queue a key may act unless its identity
policy leaves the action out (and no queue policy statement names this very key); on another
account's queue only where the queue's policy allows it (and the key's identity policy, if any,
too). Some actions are never granted across accounts, whatever a policy says; a few only by a
statement that names them. A subscription (`queue~name`) is judged under its queue's Policy and
by both ARNs: what a policy says of the queue it says of the subscription.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

from queueserver import errors
from queueserver.auth.credentials import AccessKey, CredentialStore
from queueserver.auth.door import ADMIN_ONLY, DOOR
from queueserver.auth.policy import AccessRequest, Policy, PolicyError, Verdict, parse_policy, readable_denies
from queueserver.auth.sigv4 import Signed, SigV4Verifier
from queueserver.extensions import CREATE_SUBSCRIPTION_ACTION, DELETE_SUBSCRIPTION_ACTION
from queueserver.models import SUBSCRIPTION_SEPARATOR

# SQS: "cross-account permissions don't apply to" these; only the queue's own account may call them.
OWNER_ONLY_ACTIONS = frozenset({
    "AddPermission", "CancelMessageMoveTask", "CreateQueue", "DeleteQueue", "ListMessageMoveTasks", "ListQueues",
    "ListQueueTags", "RemovePermission", "SetQueueAttributes", "StartMessageMoveTask", "TagQueue", "UntagQueue",
})
# Another account runs these only where the queue's Policy names the action itself (`sqs:*` and other
# wildcards do not grant them): a subscription takes a copy of every message for good, the owner's call.
EXPLICIT_GRANT_ACTIONS = frozenset({CREATE_SUBSCRIPTION_ACTION, DELETE_SUBSCRIPTION_ACTION})
log = logging.getLogger(__name__)
_POLICIES_KEPT = 256
_DECISIONS_KEPT = 4096
_NO_POLICY = Policy(())


@dataclass(slots=True)
class Principal:
    """An authenticated request's principal and the facts its conditions may test."""

    key: AccessKey
    region: str
    now_ms: int
    source_ip: str
    secure: bool
    _policies: dict[str, Policy]
    _decisions: dict[tuple[int, str, str, str, str | None, str | None], tuple[AccessKey, str | None]]
    _unreadable: Callable[[str, PolicyError], None]
    signed: bool = True  # False: a console session, which acts in the region of the queue it shows
    _context: dict[str, str] | None = None

    @property
    def account(self) -> str:
        return self.key.account

    @property
    def context(self) -> dict[str, str]:
        """The condition keys of this request (built on first use: most requests test none)."""
        if self._context is None:
            key = self.key
            self._context = {
                "aws:sourceip": self.source_ip,
                "aws:securetransport": "true" if self.secure else "false",
                "aws:currenttime": datetime.fromtimestamp(self.now_ms / 1000, timezone.utc).strftime(
                    "%Y-%m-%dT%H:%M:%SZ"),
                "aws:epochtime": str(self.now_ms // 1000),
                "aws:principalaccount": key.account,
                "aws:principalarn": key.arn,
                "aws:principaltype": "User" if ":user/" in key.arn else "Account",
                "aws:requestedregion": self.region,
            }
            if ":user/" in key.arn:
                self._context["aws:username"] = key.arn.rpartition("/")[2]
        return self._context

    def act_in(self, region: str) -> None:
        """Act in the region of the queue a request acts on: `aws:RequestedRegion` is that region.

        A signed request is scoped to its signature's region, as AWS's regional endpoints are: a queue of
        another region is refused as AWS refuses a scope it does not serve. A console session (not signed
        for a region) takes the queue's.
        """
        if region == self.region:
            return
        if self.signed:
            raise errors.SignatureDoesNotMatch(
                f"Credential should be scoped to a valid region, not '{self.region}'. "
                f"The queue is in '{region[:64]}'.")
        self.region = region
        self._context = None

    def authorize(self, action: str, iam_action: str, resource: str, owner: str | None,
                  queue_policy: str | None) -> None:
        """Raise AccessDenied unless this caller, running `action`, may do `iam_action` on `resource`.

        `resource` is a queue ARN, or "*"; `owner` the account of the queue (None for actions on no queue);
        `queue_policy` its Policy. The rule of the door (auth/door.py) says which `iam_action`s.
        """
        key = self.key
        cross_account = owner is not None and owner != key.account
        if not cross_account and key.policy is None and not queue_policy:
            return  # the common case: a key of the queue's account, nothing to limit it
        policy = self._queue_policy(queue_policy) if queue_policy else None
        if (key.policy is not None and key.policy.conditional) or (policy is not None and policy.conditional):
            denial = self._denial(action, iam_action, resource, cross_account, policy, queue_policy)
        else:
            # Without conditions the answer depends only on these; a changed policy text or a reloaded key
            # (a new AccessKey object: the entry holds the old one, so its id is not reused) misses.
            decision_key = (id(key), action, iam_action, resource, owner, queue_policy)
            decided = self._decisions.get(decision_key)
            if decided is not None and decided[0] is key:
                denial = decided[1]
            else:
                denial = self._denial(action, iam_action, resource, cross_account, policy, queue_policy)
                if len(self._decisions) >= _DECISIONS_KEPT:
                    self._decisions.clear()
                self._decisions[decision_key] = (key, denial)
        if denial is not None:
            raise errors.AccessDenied(denial)

    def may(self, action: str, iam_action: str, resource: str, owner: str | None, queue_policy: str | None) -> bool:
        """Whether `authorize` would let it through (the console shows only what a viewer may use)."""
        try:
            self.authorize(action, iam_action, resource, owner, queue_policy)
        except errors.AccessDenied:
            return False
        return True

    def admit_server(self, way: str) -> None:
        """AccessDenied unless this key passes the door's rule of a server endpoint (`GET /metrics` …)."""
        rule = DOOR[way]
        if rule.another_account == ADMIN_ONLY and not self.key.admin:
            raise errors.AccessDenied(f"User: {self.key.arn} is not authorized to use {way}: only a key marked "
                                      "admin = true in the credentials file may")
        for need in rule.needs:
            for action in need.actions:
                self.authorize_server_action(action)

    def authorize_server_action(self, action: str) -> None:
        """AccessDenied unless the key's identity policy allows `action` (`queueserver:GetMetrics`) on "*".

        Such an action shows every account's queues, so no key has it by default and no queue policy grants it.
        """
        key = self.key
        verdict = key.policy.verdict(AccessRequest(action, "*", key.arn, key.account, self.context)) \
            if key.policy is not None else None
        if verdict is Verdict.DENY:
            reason = "with an explicit deny in an identity-based policy"
        elif verdict is None:
            reason = f"because no identity-based policy allows the {action} action"
        else:
            return
        raise errors.AccessDenied(f"User: {key.arn} is not authorized to perform: {action} on resource: * {reason}")

    def _denial(self, action: str, iam_action: str, resource: str, cross_account: bool, policy: Policy | None,
                policy_text: str | None) -> str | None:
        """Why the policies refuse this request, or None when they allow it (`policy`: `policy_text` parsed)."""
        identity = policy_verdict = None
        key, context = self.key, self.context
        requests = [AccessRequest(iam_action, resource, key.arn, key.account, context)]
        if SUBSCRIPTION_SEPARATOR in resource:  # a subscription: what is said of its queue is said of it
            queue_arn = resource.partition(SUBSCRIPTION_SEPARATOR)[0]
            requests.append(AccessRequest(iam_action, queue_arn, key.arn, key.account, context))
        # What SQS never grants another account is the action itself; a dependent action on another queue
        # (SendMessage on a CreateQueue's dead-letter target) is judged as that action.
        if not (cross_account and action in OWNER_ONLY_ACTIONS and iam_action == f"sqs:{action}"):
            if key.policy is not None:
                identity = _verdict(key.policy, requests)
            if policy is not None:
                policy_verdict = _verdict(policy, requests)
            if (cross_account and action in EXPLICIT_GRANT_ACTIONS and iam_action == f"sqs:{action}"
                    and policy_verdict is not Verdict.DENY):
                named = self._naming_policy(policy_text, iam_action) if policy_text else None
                policy_verdict = _verdict(named, requests) if named is not None else None
        if identity is Verdict.DENY or policy_verdict is Verdict.DENY:
            reason = f"with an explicit deny in {'an identity' if identity is Verdict.DENY else 'a resource'}-based policy"
        elif cross_account:
            if policy_verdict is not None and (self.key.policy is None or identity is not None):
                return None
            reason = f"because no resource-based policy allows the {iam_action} action"
        else:
            if self.key.policy is None or identity is not None or policy_verdict is Verdict.ALLOW:
                return None
            reason = f"because no identity-based policy allows the {iam_action} action"
        return f"User: {self.key.arn} is not authorized to perform: {iam_action} on resource: {resource} {reason}"

    def _queue_policy(self, text: str) -> Policy:
        """A queue's Policy, parsed once per text. One this server cannot read (stored by an older version)
        fails closed: it allows nothing, so no other account gets in, and keeps every Deny it can read."""
        policy = self._policies.get(text)
        if policy is None:
            try:
                policy = parse_policy(text, resource_policy=True)
            except PolicyError as error:
                policy = readable_denies(text)
                self._unreadable(text, error)
            if len(self._policies) >= _POLICIES_KEPT:
                self._policies.clear()
            self._policies[text] = policy
        return policy


    def _naming_policy(self, text: str, iam_action: str) -> Policy:
        """The Allow statements of a queue Policy whose Action names `iam_action` itself (no wildcard)."""
        cache_key = f"{iam_action}\n{text}"
        policy = self._policies.get(cache_key)
        if policy is None:
            try:
                document = json.loads(text)
                statements = document.get("Statement") if isinstance(document, dict) else None
                if isinstance(statements, dict):
                    statements = [statements]
                kept = [s for s in statements or () if isinstance(s, dict) and s.get("Effect") == "Allow"
                        and _names(s.get("Action"), iam_action)]
                policy = parse_policy(json.dumps({"Statement": kept}), resource_policy=True)
            except (PolicyError, ValueError, TypeError):
                policy = _NO_POLICY
            if len(self._policies) >= _POLICIES_KEPT:
                self._policies.clear()
            self._policies[cache_key] = policy
        return policy


def _names(actions: Any, iam_action: str) -> bool:
    """Whether a statement's Action (a string or a list) names this action without a wildcard."""
    wanted = iam_action.lower()
    listed = [actions] if isinstance(actions, str) else actions if isinstance(actions, list) else []
    return any(isinstance(a, str) and a.lower() == wanted for a in listed)


def _verdict(policy: Policy, requests: list[AccessRequest]) -> Verdict | None:
    """The policy's verdict over several resources of one request: a Deny of any wins, else the strongest Allow."""
    best = None
    for request in requests:
        verdict = policy.verdict(request)
        if verdict is Verdict.DENY:
            return verdict
        if verdict is not None and (best is None or verdict.value > best.value):
            best = verdict
    return best


class Authenticator:
    """Turns a signed request into a Principal, or raises the SQS error that says why not."""

    def __init__(self, store: CredentialStore) -> None:
        self.store = store
        self._verifier = SigV4Verifier(store)
        # Shared by every Principal: parsed queue policies, and decisions that depend on no request condition.
        self._policies: dict[str, Policy] = {}
        self._decisions: dict[tuple[int, str, str, str, str | None, str | None], tuple[AccessKey, str | None]] = {}
        # Stored policies this server cannot read (a digest each), logged once, counted in /metrics.
        self._unreadable_policies: set[str] = set()

    @property
    def unreadable_policies(self) -> int:
        """How many distinct stored queue policies were found unreadable (each denies every other account)."""
        return len(self._unreadable_policies)

    def _note_unreadable(self, text: str, error: PolicyError) -> None:
        digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]
        if digest in self._unreadable_policies or len(self._unreadable_policies) >= _POLICIES_KEPT:
            return
        self._unreadable_policies.add(digest)
        log.warning("a stored queue Policy (sha256 %s…) cannot be evaluated (%s): it allows no other account "
                    "and keeps the Deny statements it can read; set it again to replace it", digest, error)

    def authenticate(self, request: Signed, now_ms: int, source_ip: str) -> Principal:
        verified = self._verifier.verify(request, now_ms)
        return Principal(verified.key, verified.region, now_ms, source_ip, request.secure, self._policies,
                         self._decisions, self._note_unreadable)

    def caller_for(self, key: AccessKey, region: str, now_ms: int, source_ip: str, secure: bool) -> Principal:
        """A principal for a key already proven another way (the console's login), judged as a signed request
        is, in the region of each queue it acts on."""
        return Principal(key, region, now_ms, source_ip, secure, self._policies, self._decisions,
                         self._note_unreadable, signed=False)

    @staticmethod
    def policy_is_readable(text: str) -> bool:
        """Whether a stored queue Policy is one this server evaluates (the console names one that is not)."""
        try:
            parse_policy(text, resource_policy=True)
        except PolicyError:
            return False
        return True
