"""One exception tree: every public exception class of queueserver roots at errors.QueueserverError."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

from queueserver import errors

PACKAGE = Path(__file__).resolve().parents[2] / "queueserver"
BUILTIN_EXCEPTIONS = {name for name, value in vars(builtins).items()
                      if isinstance(value, type) and issubclass(value, BaseException)}


def _exception_classes_outside_errors() -> dict[str, list[str]]:
    """Public classes defined outside errors.py whose bases look like exceptions: name -> base names."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name == "errors.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                continue
            bases = [ast.unparse(base).rpartition(".")[2] for base in node.bases]
            if any(b in BUILTIN_EXCEPTIONS or b.endswith(("Error", "Exception")) for b in bases):
                found[f"{path.relative_to(PACKAGE)}:{node.name}"] = bases
    return found


# The consumer imports nothing of queueserver but its clock (it runs against AWS unchanged).
STANDALONE = {"consumer/threads.py:HandlerInterrupted"}


def test_every_exception_class_outside_errors_py_is_a_client_library_error() -> None:
    strays = {name: bases for name, bases in _exception_classes_outside_errors().items()
              if "ClientError" not in bases and name not in STANDALONE}
    assert strays == {}


def test_every_class_in_errors_py_derives_from_the_root_and_is_drawn_in_the_docstring() -> None:
    classes = [value for value in vars(errors).values()
               if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == errors.__name__]
    assert all(issubclass(cls, errors.QueueserverError) for cls in classes)
    assert [cls.__name__ for cls in classes if cls.__name__ not in (errors.__doc__ or "")] == []


def test_the_server_side_errors_that_validate_input_are_still_value_errors() -> None:
    for cls in (errors.ConfigError, errors.CredentialsError, errors.PolicyError, errors.ConditionError):
        assert issubclass(cls, ValueError)
