"""Who is calling, and may they do this: the two questions asked of every request with credentials on.

`Authenticator.authenticate` checks the signature and returns the `Caller`; `Caller.authorize`
decides one action on one queue as IAM and SQS decide it: an explicit Deny in the key's identity
policy or the queue's policy wins; on its own account's queue a key may act unless its identity
policy leaves the action out (and no queue policy statement names this very key); on another
account's queue only where the queue's policy allows it (and the key's identity policy, if any,
too). Some actions are never granted across accounts, whatever a policy says.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from queueserver import errors
from queueserver.auth.credentials import AccessKey, CredentialStore
from queueserver.auth.policy import AccessRequest, Policy, PolicyError, Verdict, parse_policy
from queueserver.auth.sigv4 import Signed, SigV4Verifier

# SQS: "cross-account permissions don't apply to" these; only the queue's own account may call them.
OWNER_ONLY_ACTIONS = frozenset({
    "AddPermission", "CancelMessageMoveTask", "CreateQueue", "DeleteQueue", "ListMessageMoveTasks", "ListQueues",
    "ListQueueTags", "RemovePermission", "SetQueueAttributes", "StartMessageMoveTask", "TagQueue", "UntagQueue",
})
# A batch is authorized as its single action (IAM has no sqs:SendMessageBatch).
_IAM_ACTIONS = {
    "SendMessageBatch": "SendMessage", "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}
_POLICIES_KEPT = 256
_NO_POLICY = Policy(())


@dataclass(slots=True)
class Caller:
    """An authenticated request's principal and the facts its conditions may test."""

    key: AccessKey
    region: str
    now_ms: int
    source_ip: str
    secure: bool
    _policies: dict[str, Policy]
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

    def authorize(self, action: str, resource: str, owner: str | None, queue_policy: str | None) -> None:
        """Raise AccessDenied unless this caller may run `action` on `resource` (a queue ARN, or "*").

        `owner` is the account of the queue (None for actions on no queue); `queue_policy` its Policy.
        """
        cross_account = owner is not None and owner != self.key.account
        if not cross_account and self.key.policy is None and not queue_policy:
            return  # the common case: a key of the queue's account, nothing to limit it
        iam_action = "sqs:" + _IAM_ACTIONS.get(action, action)
        identity = policy_verdict = None
        request = AccessRequest(iam_action, resource, self.key.arn, self.key.account, self.context)
        if not (cross_account and action in OWNER_ONLY_ACTIONS):
            if self.key.policy is not None:
                identity = self.key.policy.verdict(request)
            if queue_policy:
                policy_verdict = self._queue_policy(queue_policy).verdict(request)
        if identity is Verdict.DENY or policy_verdict is Verdict.DENY:
            reason = f"with an explicit deny in {'an identity' if identity is Verdict.DENY else 'a resource'}-based policy"
        elif cross_account:
            if policy_verdict is not None and (self.key.policy is None or identity is not None):
                return
            reason = f"because no resource-based policy allows the {iam_action} action"
        else:
            if self.key.policy is None or identity is not None or policy_verdict is Verdict.ALLOW:
                return
            reason = f"because no identity-based policy allows the {iam_action} action"
        raise errors.AccessDenied(
            f"User: {self.key.arn} is not authorized to perform: {iam_action} on resource: {resource} {reason}")

    def _queue_policy(self, text: str) -> Policy:
        """A queue's Policy, parsed once per text; one this server cannot read grants nothing."""
        policy = self._policies.get(text)
        if policy is None:
            try:
                policy = parse_policy(text, resource_policy=True)
            except PolicyError:
                policy = _NO_POLICY
            if len(self._policies) >= _POLICIES_KEPT:
                self._policies.clear()
            self._policies[text] = policy
        return policy


class Authenticator:
    """Turns a signed request into a Caller, or raises the SQS error that says why not."""

    def __init__(self, store: CredentialStore) -> None:
        self.store = store
        self._verifier = SigV4Verifier(store)
        self._policies: dict[str, Policy] = {}  # shared by every Caller: parsed queue policies

    def authenticate(self, request: Signed, now_ms: int, source_ip: str) -> Caller:
        verified = self._verifier.verify(request, now_ms)
        return Caller(verified.key, verified.region, now_ms, source_ip, request.secure, self._policies)

    def caller_for(self, key: AccessKey, region: str, now_ms: int, source_ip: str, secure: bool) -> Caller:
        """A caller for a key already proven another way (the console's login), judged as a signed request is."""
        return Caller(key, region, now_ms, source_ip, secure, self._policies)
