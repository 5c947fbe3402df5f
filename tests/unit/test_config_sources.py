"""Settings from the command line, the environment and the config file, derived from one declaration."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from queueserver.cli import _parser
from queueserver.config import ServerConfig
from queueserver.config_sources import CONFIG_ENV, ConfigError, load, reference_table, settings


def _load(argv: list[str], environ: dict[str, str] | None = None) -> ServerConfig:
    return load(vars(_parser().parse_args(["serve", *argv])), environ or {})


def _file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "queueserver.toml"
    path.write_text(text)
    return str(path)


def test_every_server_config_field_but_the_queues_is_a_setting_with_an_option_a_key_and_a_variable() -> None:
    fields = {f.name for f in dataclasses.fields(ServerConfig)} - {"queues"}
    declared = settings()
    assert {s.field for s in declared} == fields
    assert len({s.env for s in declared}) == len(declared)
    by_field = {s.field: s for s in declared}
    assert (by_field["db_path"].option, by_field["db_path"].env, by_field["db_path"].name) == \
        ("--db", "QUEUESERVER_DB", "db")
    assert by_field["allowed_origins"].option == "--allow-origin"


def test_a_field_declared_the_plain_way_is_a_setting_too() -> None:
    @dataclasses.dataclass(frozen=True)
    class Extended(ServerConfig):
        log_format: str = "text"
        access_log: bool = False
        limit: int | None = None

    added = {s.name: s for s in settings(Extended)}
    assert [(added[n].kind, added[n].default, added[n].option, added[n].env) for n in ("log_format", "access_log",
                                                                                       "limit")] == [
        (str, "text", "--log-format", "QUEUESERVER_LOG_FORMAT"),
        (bool, False, "--access-log", "QUEUESERVER_ACCESS_LOG"),
        (int, None, "--limit", "QUEUESERVER_LIMIT")]


def test_without_any_source_every_setting_has_its_default() -> None:
    assert _load([]) == ServerConfig()


def test_the_command_line_beats_the_environment_which_beats_the_file(tmp_path: Path) -> None:
    path = _file(tmp_path, 'port = 1111\nregion = "eu-west-1"\nhost = "0.0.0.0"\ntest_clock = true\n')
    only_file = _load(["--config", path])
    assert (only_file.port, only_file.region, only_file.host, only_file.test_clock) == \
        (1111, "eu-west-1", "0.0.0.0", True)
    env = {"QUEUESERVER_PORT": "2222", "QUEUESERVER_REGION": "eu-central-1", "QUEUESERVER_TEST_CLOCK": "false"}
    with_env = _load(["--config", path], env)
    assert (with_env.port, with_env.region, with_env.host, with_env.test_clock) == \
        (2222, "eu-central-1", "0.0.0.0", False)
    with_cli = _load(["--config", path, "--port", "3333", "--test-clock"], env)
    assert (with_cli.port, with_cli.region, with_cli.test_clock) == (3333, "eu-central-1", True)


def test_the_config_file_can_come_from_the_environment(tmp_path: Path) -> None:
    path = _file(tmp_path, "max_connections = 7\n")
    assert _load([], {"QUEUESERVER_CONFIG": path}).max_connections == 7


def test_lists_come_as_toml_arrays_comma_separated_variables_or_repeated_options(tmp_path: Path) -> None:
    path = _file(tmp_path, 'allow_origin = ["https://a.example", "https://b.example"]\n')
    assert _load(["--config", path]).allowed_origins == ("https://a.example", "https://b.example")
    assert _load([], {"QUEUESERVER_ALLOW_HOST": "a.test, b.test"}).allowed_hosts == ("a.test", "b.test")
    assert _load(["--allow-host", "a.test,b.test", "--allow-host", "c.test"]).allowed_hosts == \
        ("a.test", "b.test", "c.test")


def test_an_integer_is_a_valid_value_for_a_float_setting_in_the_file(tmp_path: Path) -> None:
    assert _load(["--config", _file(tmp_path, "body_timeout = 3\n")]).body_timeout == 3.0


@pytest.mark.parametrize(("text", "named"), [
    ("port = \"http\"\n", "key port: expected an integer, got 'http'"),
    ("prot = 9324\n", "key prot: unknown setting"),
    ("test_clock = \"yes\"\n", "key test_clock: expected true or false"),
    ("log_level = \"loud\"\n", "key log_level: expected one of debug, info, warning, error"),
    ("allow_origin = [1]\n", "key allow_origin: expected a list of strings"),
    ("port = \n", "not valid TOML"),
    ("[queues.orders]\nvisibility = 3\n", "key queues.orders.visibility: unknown key"),
    ("[queues.orders]\ndead_letter_queue = \"dlq\"\n",
     "key queues.orders.max_receive_count: required with dead_letter_queue"),
    ("[queues.orders]\ndead_letter_queue = \"dlq\"\nmax_receive_count = 0\n",
     "key queues.orders.max_receive_count: expected an integer from 1 to 1000"),
    ("[queues.orders]\ntags = { team = 5 }\n", "key queues.orders.tags: expected a table of strings"),
    ("[queues.orders]\naccount = \"123456789012\"\n", "key queues.orders.account: this server serves one account"),
    ("[queues.orders]\nVisibilityTimeout = [1]\n", "key queues.orders.VisibilityTimeout: expected a string"),
    ("[queues.orders]\nregion = \"us-east-1:222222222222\"\n", "key queues.orders.region: expected a region name"),
])
def test_a_bad_file_is_refused_in_one_line_naming_the_key_and_the_problem(tmp_path: Path, text: str,
                                                                          named: str) -> None:
    path = _file(tmp_path, text)
    with pytest.raises(ConfigError) as refused:
        _load(["--config", path])
    message = str(refused.value)
    assert named in message and path in message and "\n" not in message


@pytest.mark.parametrize("region", ["us-east-1:222222222222", "US-EAST-1", "a" * 64, "east-"])
def test_a_region_that_is_no_region_name_is_refused(region: str) -> None:
    with pytest.raises(ConfigError, match="expected a region name"):
        _load(["--region", region])


def test_a_bad_variable_is_refused_naming_the_variable() -> None:
    with pytest.raises(ConfigError, match="environment QUEUESERVER_MAX_HEADERS: expected an integer, got 'many'"):
        _load([], {"QUEUESERVER_MAX_HEADERS": "many"})


def test_a_missing_file_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="missing.toml: No such file"):
        _load(["--config", str(tmp_path / "missing.toml")])


def test_queues_take_the_server_region_and_account_unless_their_table_gives_them(tmp_path: Path) -> None:
    path = _file(tmp_path, 'account_id = "111111111111"\n'
                           '[queues.a]\nVisibilityTimeout = 60\nContentBasedDeduplication = false\n'
                           '[queues.b]\nregion = "eu-west-1"\naccount = "111111111111"\n'
                           'RedriveAllowPolicy = { redrivePermission = "denyAll" }\n')
    a, b = _load(["--config", path, "--region", "us-west-2"]).queues
    assert (a.region, a.account, a.attributes) == \
        ("us-west-2", "111111111111", {"VisibilityTimeout": "60", "ContentBasedDeduplication": "false"})
    assert (b.region, b.account, b.attributes) == \
        ("eu-west-1", "111111111111", {"RedriveAllowPolicy": '{"redrivePermission":"denyAll"}'})


def _configuration_page() -> str:
    return (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()


def test_the_configuration_page_shows_every_setting_in_the_table_generated_from_the_declaration() -> None:
    page = _configuration_page()
    start = "<!-- settings: generated by queueserver.config_sources.reference_table() -->\n"
    assert start in page and "\n<!-- /settings -->" in page
    shown = page.split(start, 1)[1].split("\n<!-- /settings -->", 1)[0]
    assert shown == reference_table(), (
        "docs/configuration.md's settings table is stale; regenerate it with\n"
        "python -c 'from queueserver.config_sources import reference_table; print(reference_table())'")
    for s in settings():
        assert f"| `{s.name}` |" in shown and s.env in shown


def test_backup_and_check_find_the_database_in_queueserver_db_as_the_server_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUEUESERVER_DB", "/data/queues.db")
    assert _parser().parse_args(["check"]).db == "/data/queues.db"
    assert _parser().parse_args(["backup", "copy.db"]).db == "/data/queues.db"
    assert _parser().parse_args(["check", "--db", "other.db"]).db == "other.db"


def test_every_option_of_serve_comes_from_the_declaration_with_its_help_and_no_default_of_its_own() -> None:
    serve = next(action for action in _parser()._subparsers._group_actions  # type: ignore[union-attr]
                 if action.choices and "serve" in action.choices).choices["serve"]
    by_option = {s.option: s for s in settings()}
    undeclared, drifted = [], []
    for action in serve._actions:
        options = [o for o in action.option_strings if o.startswith("--") and not o.startswith("--no-")]
        if not options or options[0] in ("--help", "--config"):
            continue
        declared = by_option.pop(options[0], None)
        if declared is None:
            undeclared.append(options[0])
        elif action.help != declared.help or action.default is not argparse.SUPPRESS:
            drifted.append(options[0])  # a help or default written beside the declaration
    assert (undeclared, drifted, sorted(by_option)) == ([], [], [])


def test_the_configuration_page_documents_the_config_file_option_and_its_variable() -> None:
    page = _configuration_page()
    assert "--config" in page and CONFIG_ENV in page
