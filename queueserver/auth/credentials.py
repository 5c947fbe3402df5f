"""The credentials file: which access keys exist, their secrets, accounts and identity policies.

One TOML table per key (`[keys.AKID]` with `secret_access_key`, `account_id`, and optional
`name`, `policy` and `admin`: an admin key may also move the test clock). The file is read
whole and swapped in whole, so a reload that finds a broken file keeps the keys that were
working and says why in the log.
"""

from __future__ import annotations

import logging
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from queueserver.auth.policy import Policy, parse_policy
from queueserver.errors import CredentialsError, PolicyError

log = logging.getLogger(__name__)

_ACCOUNT_ID = re.compile(r"\d{12}")  # these three with fullmatch: `$` would let "\n" through
_KEY_ID = re.compile(r"[A-Za-z0-9]{1,128}")
_USER_NAME = re.compile(r"[\w+=,.@-]{1,64}")


@dataclass(frozen=True, slots=True)
class AccessKey:
    key_id: str
    secret: str
    account: str
    arn: str  # the caller's principal: the named user, or the account's root
    policy: Policy | None  # an identity policy limits the key; without one it may do all its account may
    admin: bool = False  # may move the test clock, which every tenant's signatures are checked against


def parse_credentials(text: str) -> dict[str, AccessKey]:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CredentialsError(f"not valid TOML: {exc}") from None
    tables = document.get("keys")
    if not isinstance(tables, dict) or not tables:
        raise CredentialsError("expected at least one [keys.<ACCESS_KEY_ID>] table")
    keys = {}
    for key_id, table in tables.items():
        if not _KEY_ID.fullmatch(key_id) or not isinstance(table, dict):
            raise CredentialsError(f"[keys.{key_id}]: an access key id is 1-128 letters and digits")
        unknown = set(table) - {"secret_access_key", "account_id", "name", "policy", "admin"}
        if unknown:
            raise CredentialsError(f"[keys.{key_id}]: unknown field(s) {', '.join(sorted(unknown))}")
        secret, account = table.get("secret_access_key"), table.get("account_id")
        if not isinstance(secret, str) or not secret:
            raise CredentialsError(f"[keys.{key_id}]: secret_access_key must be a non-empty string")
        if not isinstance(account, str) or not _ACCOUNT_ID.fullmatch(account):
            raise CredentialsError(f"[keys.{key_id}]: account_id must be a string of 12 digits")
        name = table.get("name")
        if name is not None and (not isinstance(name, str) or not _USER_NAME.fullmatch(name)):
            raise CredentialsError(f"[keys.{key_id}]: name must be an IAM user name (1-64 of A-Za-z0-9+=,.@_-)")
        policy = None
        if table.get("policy") is not None:
            if not isinstance(table["policy"], str):
                raise CredentialsError(f"[keys.{key_id}]: policy must be a string holding a JSON policy")
            try:
                policy = parse_policy(table["policy"], resource_policy=False)
            except PolicyError as exc:
                raise CredentialsError(f"[keys.{key_id}]: policy: {exc}") from None
        admin = table.get("admin", False)
        if not isinstance(admin, bool):
            raise CredentialsError(f"[keys.{key_id}]: admin must be true or false")
        arn = f"arn:aws:iam::{account}:user/{name}" if name else f"arn:aws:iam::{account}:root"
        keys[key_id] = AccessKey(key_id, secret, account, arn, policy, admin)
    return keys


class CredentialStore:
    """The keys of one credentials file; `reload` rereads it, `reload_if_changed` only when it changed."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._stamp = self._file_stamp()
        self.keys = self._read()

    def _file_stamp(self) -> tuple[int, int, int] | None:
        try:
            stat = self.path.stat()
        except OSError:
            return None
        return stat.st_mtime_ns, stat.st_size, stat.st_ino

    def _read(self) -> dict[str, AccessKey]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeError) as exc:
            raise CredentialsError(f"cannot read {self.path}: {exc}") from None
        return parse_credentials(text)

    def get(self, key_id: str) -> AccessKey | None:
        return self.keys.get(key_id)

    def reload(self) -> bool:
        """Reread the file; on a broken file keep the current keys. Returns whether keys were swapped in."""
        self._stamp = self._file_stamp()
        try:
            keys = self._read()
        except CredentialsError as exc:
            log.error("credentials not reloaded, the previous %d key(s) stay in force: %s", len(self.keys), exc)
            return False
        self.keys = keys
        log.info("credentials reloaded from %s: %d key(s)", self.path, len(keys))
        return True

    def reload_if_changed(self) -> bool:
        if self._file_stamp() == self._stamp:
            return False
        return self.reload()
