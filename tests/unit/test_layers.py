"""The layering rules (which layer may import which), checked by walking every module's imports."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "queueserver"
LEAVES = {"clock", "errors", "extensions", "models", "limits", "config", "config_sources", "tallies", "logs",
          "client_text", "client_connection", "http_body"}
FORBIDDEN = {
    "leaf": {"queueserver.storage", "queueserver.protocol", "queueserver.app", "queueserver.server",
             "queueserver.consumer", "queueserver.spark", "queueserver.auth", "starlette", "uvicorn", "sqlite3",
             "boto3"},
    "storage": {"queueserver.protocol", "queueserver.app", "queueserver.server", "queueserver.consumer",
                "queueserver.spark", "queueserver.auth", "starlette", "uvicorn"},
    "protocol": {"sqlite3", "aiosqlite", "starlette", "uvicorn", "queueserver.app", "queueserver.server",
                 "queueserver.storage.database", "queueserver.storage.message_store",
                 "queueserver.storage.queue_store"},
    "auth": {"queueserver.storage", "queueserver.protocol", "queueserver.app", "queueserver.server",
             "queueserver.consumer", "queueserver.spark", "starlette", "uvicorn", "sqlite3", "aiosqlite"},
    "consumer": {"queueserver.storage", "queueserver.protocol", "queueserver.app", "queueserver.server",
                 "queueserver.auth"},
    "spark": {"queueserver.storage", "queueserver.protocol", "queueserver.app", "queueserver.server"},
    # The console reads and acts through the engine's API and the protocol's handlers, never the file.
    "console": {"sqlite3", "aiosqlite", "queueserver.storage.database", "queueserver.storage.message_store",
                "queueserver.storage.queue_store", "queueserver.storage.read_side", "queueserver.consumer",
                "queueserver.spark", "queueserver.app", "queueserver.server"},
    # The test harness users get sees the server as a client does: a process and HTTP.
    "testing": {"queueserver.storage", "queueserver.protocol", "queueserver.app", "queueserver.server",
                "queueserver.cli"},
    # Replication supervises a program beside the server; the server wires it to the engine.
    "replication": {"queueserver.storage", "queueserver.protocol", "queueserver.app", "queueserver.server",
                    "queueserver.console", "queueserver.consumer", "queueserver.spark", "queueserver.auth",
                    "sqlite3", "aiosqlite", "starlette", "uvicorn"},
    # The admin CLI is a client of the SQS API (it works against AWS too), never of the storage.
    "admin_cli": {"queueserver.storage", "queueserver.protocol", "queueserver.app", "queueserver.server",
                  "queueserver.cli", "sqlite3", "aiosqlite", "starlette", "uvicorn"},
}


def _layer(path: Path) -> str | None:
    relative = path.relative_to(PACKAGE)
    if relative.parts[0] in {"auth", "storage", "protocol", "consumer", "spark", "testing", "admin_cli", "console",
                             "replication"}:
        return relative.parts[0]
    if path.stem in LEAVES:
        return "leaf"
    return None


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_every_module_imports_only_what_its_layer_allows() -> None:
    broken = []
    for path in PACKAGE.rglob("*.py"):
        layer = _layer(path)
        if layer is None:
            continue
        for name in _imports(path):
            if any(name == f or name.startswith(f + ".") for f in FORBIDDEN[layer]):
                broken.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert broken == []


def test_all_sql_lives_in_the_storage_layer() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if "storage" in path.relative_to(PACKAGE).parts:
            continue
        text = path.read_text()
        if any(keyword in text for keyword in ("SELECT ", "UPDATE messages", "INSERT INTO", "DELETE FROM")):
            offenders.append(str(path.relative_to(PACKAGE)))
    assert offenders == []
