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


REPO = PACKAGE.parent
TESTS = REPO / "tests"
SCRIPTS = REPO / "scripts"


def _top_level_names(folder: Path) -> set[str]:
    """The names a module in `folder` could be imported by when the folder is on the path."""
    return {path.stem for path in folder.glob("*.py")} | {path.name for path in folder.iterdir()
                                                         if path.is_dir() and any(path.glob("*.py"))}


def _crossings(folder: Path, forbidden: set[str]) -> list[str]:
    found = []
    for path in folder.rglob("*.py"):
        for name in _imports(path):
            if name.split(".")[0] in forbidden:
                found.append(f"{path.relative_to(folder.parent)} imports {name}")
    return sorted(found)


def test_the_tests_import_nothing_from_scripts() -> None:
    """The tests start servers through queueserver.testing, the harness users get; the scripts are tools."""
    assert _crossings(TESTS, _top_level_names(SCRIPTS) | {"scripts"}) == []


def test_the_scripts_import_nothing_from_the_tests() -> None:
    assert _crossings(SCRIPTS, _top_level_names(TESTS) | {"tests", "support", "conftest"}) == []


def test_the_crossing_check_sees_every_form_of_import(tmp_path: Path) -> None:
    folder = tmp_path / "tools"
    (folder / "kit").mkdir(parents=True)
    (folder / "kit" / "__init__.py").write_text("")
    (folder / "probe.py").write_text("import kit.launch\nfrom support.server import start\nimport json\n"
                                     "def late():\n    from tests.support import wire\n")
    assert _top_level_names(folder) == {"kit", "probe"}
    assert _crossings(folder, {"support", "tests", "kit"}) == [
        "tools/probe.py imports kit.launch", "tools/probe.py imports support.server",
        "tools/probe.py imports support.server.start", "tools/probe.py imports tests.support",
        "tools/probe.py imports tests.support.wire"]
