"""IAM-style policy documents: parsing, and whether one allows, denies or says nothing.

Supported: Effect, Principal / NotPrincipal (`*`, account ids, `arn:aws:iam::ID:root`, user and
role ARNs, with wildcards; `Service` principals, which no key here is, so they match nothing), Action / NotAction with `*` and `?` wildcards (case-insensitive),
Resource / NotResource with wildcards, and the Condition operators of `conditions.py`. Every
pattern is matched by wildcards.py, in time bounded by its length. Anything else (Federated and
CanonicalUser principals, policy variables, unknown operators) is refused when the policy is read, so a
policy never means less than it says; one stored before it was refused keeps its readable Denies
(`readable_denies`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

from queueserver.auth.conditions import Condition, parse_conditions
from queueserver.auth.wildcards import Wildcard
from queueserver.client_text import MAX_JSON_DEPTH, json_document
from queueserver.errors import ConditionError, PolicyError


class Match(Enum):
    """How a statement's principal names the caller: an account (delegating to its identity
    policies, as IAM does) or this very user."""

    ACCOUNT = 1
    EXACT = 2


class Verdict(Enum):
    DENY = 0
    ALLOW_ACCOUNT = 1  # allowed by a statement naming the caller's account
    ALLOW = 2  # allowed by a statement naming the caller (or everyone), or by an identity policy


@dataclass(frozen=True, slots=True)
class AccessRequest:
    action: str  # "sqs:SendMessage"
    resource: str  # a queue ARN, or "*" for actions on no queue
    principal_arn: str
    principal_account: str
    context: dict[str, str]  # condition keys, lower-case names


def _strings(value: Any, field: str) -> list[str]:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise PolicyError(f"{field} must be a string or a non-empty list of strings")
    return values


@dataclass(frozen=True, slots=True)
class _Principals:
    anyone: bool
    accounts: frozenset[str]
    arns: frozenset[str]
    arn_patterns: tuple[Wildcard, ...]  # ARNs with `*` or `?` (AWS refuses them; here they match as written)

    @classmethod
    def parse(cls, value: Any, field: str) -> _Principals:
        if value == "*":
            return cls(True, frozenset(), frozenset(), ())
        if not isinstance(value, dict) or not value or set(value) - {"AWS", "Service"}:
            raise PolicyError(f'{field} must be "*" or {{"AWS": ...}} or {{"Service": ...}}; other principal types '
                              'are not supported')
        if "Service" in value:  # a service principal (sns.amazonaws.com) is never a SigV4 key here: it matches none
            for entry in _strings(value["Service"], field):
                if not re.fullmatch(r"[a-z0-9.-]+\.amazonaws\.com(\.cn)?", entry):
                    raise PolicyError(f"{field}: invalid service principal {entry!r}")
        anyone, accounts, arns, patterns = False, set(), set(), []
        for entry in _strings(value["AWS"], field) if "AWS" in value else ():
            root = re.fullmatch(r"arn:aws:iam::(\d{12}):root", entry)
            if entry == "*":
                anyone = True
            elif re.fullmatch(r"\d{12}", entry) or root:
                accounts.add(root.group(1) if root else entry)
            elif re.fullmatch(r"arn:aws:(iam|sts)::\d{12}:\S+", entry):
                if "*" in entry or "?" in entry:
                    patterns.append(Wildcard(entry))
                else:
                    arns.add(entry)
            else:
                raise PolicyError(f"{field}: invalid principal {entry!r}")
        return cls(anyone, frozenset(accounts), frozenset(arns), tuple(patterns))

    def match(self, request: AccessRequest) -> Match | None:
        if self.anyone or request.principal_arn in self.arns:
            return Match.EXACT
        if self.arn_patterns and any(p.match(request.principal_arn) for p in self.arn_patterns):
            return Match.EXACT
        if request.principal_account in self.accounts:
            return Match.ACCOUNT
        return None


@dataclass(frozen=True, slots=True)
class Statement:
    allow: bool
    principals: _Principals | None  # None: an identity policy's statement, about its own key
    not_principal: bool
    actions: tuple[Wildcard, ...]
    not_action: bool
    resources: tuple[Wildcard, ...]
    not_resource: bool
    conditions: tuple[Condition, ...]

    def applies(self, request: AccessRequest) -> Match | None:
        """How the statement covers the request (None: not at all)."""
        match = Match.EXACT
        if self.principals is not None:
            found = self.principals.match(request)
            if self.not_principal:
                found = None if found else Match.EXACT
            if found is None:
                return None
            match = found
        if any(p.match(request.action) for p in self.actions) == self.not_action:
            return None
        if any(p.match(request.resource) for p in self.resources) == self.not_resource:
            return None
        if not all(c.holds(request.context) for c in self.conditions):
            return None
        return match


def _one_of(raw: dict[str, Any], names: tuple[str, str], index: int, required: bool) -> tuple[Any, bool]:
    present = [n for n in names if n in raw]
    if len(present) > 1:
        raise PolicyError(f"Statement {index}: give {names[0]} or {names[1]}, not both")
    if not present:
        if required:
            raise PolicyError(f"Statement {index}: {names[0]} is missing")
        return None, False
    return raw[present[0]], present[0] == names[1]


def _statement(raw: Any, index: int, resource_policy: bool) -> Statement:
    if not isinstance(raw, dict):
        raise PolicyError(f"Statement {index} must be an object")
    known = {"Sid", "Effect", "Principal", "NotPrincipal", "Action", "NotAction", "Resource", "NotResource",
             "Condition"}
    if set(raw) - known:
        raise PolicyError(f"Statement {index}: unsupported field(s) {', '.join(sorted(set(raw) - known))}")
    if raw.get("Effect") not in ("Allow", "Deny"):
        raise PolicyError(f'Statement {index}: Effect must be "Allow" or "Deny"')
    principal, not_principal = _one_of(raw, ("Principal", "NotPrincipal"), index, resource_policy)
    if principal is not None and not resource_policy:
        raise PolicyError(f"Statement {index}: an identity policy names no Principal")
    action, not_action = _one_of(raw, ("Action", "NotAction"), index, True)
    resource, not_resource = _one_of(raw, ("Resource", "NotResource"), index, not resource_policy)
    try:
        conditions = parse_conditions(raw.get("Condition", {}))
    except ConditionError as exc:
        raise PolicyError(f"Statement {index}: {exc}") from None
    return Statement(
        allow=raw["Effect"] == "Allow",
        principals=_Principals.parse(principal, f"Statement {index} Principal") if principal is not None else None,
        not_principal=not_principal,
        actions=tuple(Wildcard(a, ignore_case=True) for a in _strings(action, f"Statement {index} Action")),
        not_action=not_action,
        resources=tuple(Wildcard(r)
                        for r in (_strings(resource, f"Statement {index} Resource") if resource is not None
                                  else ["*"])),
        not_resource=not_resource,
        conditions=conditions,
    )


@dataclass(frozen=True, slots=True)
class Policy:
    statements: tuple[Statement, ...]
    conditional: bool = False  # a statement has a Condition: verdicts depend on the request, not only on who and what

    def verdict(self, request: AccessRequest) -> Verdict | None:
        """Deny if any Deny statement applies (explicit Deny wins), else the strongest Allow, else None."""
        best: Verdict | None = None
        for statement in self.statements:
            match = statement.applies(request)
            if match is None:
                continue
            if not statement.allow:
                return Verdict.DENY
            if match is Match.EXACT:
                best = Verdict.ALLOW
            elif best is None:
                best = Verdict.ALLOW_ACCOUNT
        return best


def readable_denies(text: str) -> Policy:
    """The Deny statements of a queue Policy that does not parse as a whole, those that parse alone.

    What a stored policy this version cannot read still says: it grants nothing, and denies what it can.
    """
    document = json_document(text)
    statements = document.get("Statement") if isinstance(document, dict) else None
    if isinstance(statements, dict):
        statements = [statements]
    kept = []
    for index, raw in enumerate(statements if isinstance(statements, list) else ()):
        if isinstance(raw, dict) and raw.get("Effect") == "Deny":
            try:
                kept.append(_statement(raw, index, True))
            except PolicyError:
                continue
    return Policy(tuple(kept), conditional=any(statement.conditions for statement in kept))


def parse_policy(text: str, *, resource_policy: bool) -> Policy:
    """A queue policy (resource_policy: each statement names a Principal) or a key's identity policy."""
    if "${" in text:
        raise PolicyError("policy variables (${...}) are not supported")
    document = json_document(text)
    if document is None:
        raise PolicyError(f"the policy is not valid JSON (nor nested more than {MAX_JSON_DEPTH} deep)")
    if not isinstance(document, dict):
        raise PolicyError("the policy must be a JSON object")
    statements = document.get("Statement")
    if isinstance(statements, dict):
        statements = [statements]
    if not isinstance(statements, list):
        raise PolicyError("the policy needs a Statement list")
    parsed = tuple(_statement(s, i, resource_policy) for i, s in enumerate(statements))
    return Policy(parsed, conditional=any(statement.conditions for statement in parsed))
