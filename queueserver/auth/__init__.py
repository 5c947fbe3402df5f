"""Who may do what: credentials, SigV4 verification, and IAM-style policy evaluation.

A layer of its own under `protocol/` (which asks it) and over the leaf modules (all it imports).
"""

from queueserver.auth.access import Authenticator, Principal
from queueserver.auth.credentials import CredentialsError, CredentialStore
from queueserver.auth.sigv4 import Signed

__all__ = ["Authenticator", "Principal", "CredentialStore", "CredentialsError", "Signed"]
