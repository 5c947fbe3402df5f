"""Where settings come from: the command line, the environment, the config file, the defaults.

Everything here is derived from the one declaration in config.py: the option, the config
file key and the environment variable of every ServerConfig field. Precedence, highest
first: command line, environment, config file, default.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from queueserver.config import QueueDeclaration, ServerConfig
from queueserver.errors import ConfigError
from queueserver.limits import REGION_NAME

ENV_PREFIX = "QUEUESERVER_"
CONFIG_ENV = ENV_PREFIX + "CONFIG"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
# Queue table keys that are not SQS attribute names.
_QUEUE_KEYS = {"region", "account", "tags", "dead_letter_queue", "max_receive_count"}


@dataclass(frozen=True)
class Setting:
    field: str  # the ServerConfig attribute
    name: str  # the config file key
    kind: Any  # bool, int, float, str or tuple (of strings)
    default: Any
    help: str
    group: str
    choices: tuple[str, ...]
    metavar: str

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()


def settings(config_class: type = ServerConfig) -> list[Setting]:
    """Every setting, in declaration order (fields declared without `setting()` too, with no help)."""
    hints = typing.get_type_hints(config_class)
    found = []
    for f in dataclasses.fields(config_class):
        if f.metadata.get("file_only"):
            continue
        kind = hints[f.name]
        if typing.get_origin(kind) in (typing.Union, types.UnionType):  # `int | None`: an int when given
            kind = next(k for k in typing.get_args(kind) if k is not type(None))
        kind = tuple if typing.get_origin(kind) is tuple else kind
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        found.append(Setting(f.name, f.metadata.get("name") or f.name, kind, default,
                             f.metadata.get("help", ""), f.metadata.get("group", ""),
                             tuple(f.metadata.get("choices", ())), f.metadata.get("metavar", "")))
    return found


def add_options(parser: argparse.ArgumentParser) -> None:
    """One option per setting; none has an argparse default, so that a missing one falls through."""
    parser.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS,
                        help=f"a TOML config file (docs: Configuration); also ${CONFIG_ENV}")
    groups: dict[str, Any] = {}
    for s in settings():
        target = parser if not s.group else groups.setdefault(s.group, parser.add_argument_group(s.group))
        common: dict[str, Any] = {"dest": s.field, "default": argparse.SUPPRESS, "help": s.help}
        if s.kind is bool:
            target.add_argument(s.option, action=argparse.BooleanOptionalAction, **common)
        elif s.kind is tuple:
            target.add_argument(s.option, action="append", metavar=s.metavar or s.name.upper(), **common)
        else:
            target.add_argument(s.option, type=s.kind, choices=s.choices or None,
                                metavar=s.metavar or (None if s.choices else s.name.upper()),
                                **common)


def load(options: Mapping[str, Any], environ: Mapping[str, str]) -> ServerConfig:
    """The ServerConfig from parsed options (argparse's dests), the environment and the config file."""
    path = options.get("config") or environ.get(CONFIG_ENV)
    document = read_file(path) if path else {}
    where = f"config file {path}: " if path else ""
    values: dict[str, Any] = {}
    by_name = {s.name: s for s in settings()}
    for key, value in document.items():
        if key == "queues":
            continue
        setting = by_name.get(key)
        if setting is None:
            raise ConfigError(f"{where}key {key}: unknown setting")
        values[setting.field] = _from_file(setting, value, f"{where}key {key}")
    for setting in by_name.values():
        if setting.env in environ:
            values[setting.field] = _from_text(setting, environ[setting.env], f"environment {setting.env}")
        if setting.field in options:
            value = options[setting.field]
            values[setting.field] = _split(value) if setting.kind is tuple else value
    config = ServerConfig(**values)
    if not re.fullmatch(REGION_NAME, config.region):  # it goes into every ARN and queue URL of its queues
        raise ConfigError(f"region {config.region!r}: expected a region name (lower-case letters, digits, dashes)")
    queues = document.get("queues", {})
    if not isinstance(queues, dict):
        raise ConfigError(f"{where}key queues: expected tables of queues ([queues.NAME])")
    declared = tuple(_queue(name, table, config, f"{where}key queues.{name}") for name, table in queues.items())
    return dataclasses.replace(config, queues=declared)


def read_file(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as file:
            return tomllib.load(file)
    except OSError as exc:
        raise ConfigError(f"config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path}: not valid TOML: {exc}") from None


def _split(values: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    return tuple(item.strip() for value in values for item in value.split(",") if item.strip())


def _from_file(setting: Setting, value: Any, where: str) -> Any:
    kind = setting.kind
    if kind is tuple:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where}: expected a list of strings, got {value!r}")
        return _split(value)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if type(value) is not kind:
        raise ConfigError(f"{where}: expected {_describe(kind)}, got {value!r}")
    return _choose(setting, value, where)


def _from_text(setting: Setting, text: str, where: str) -> Any:
    kind = setting.kind
    if kind is tuple:
        return _split([text])
    if kind is bool:
        if text.strip().lower() not in _TRUE | _FALSE:
            raise ConfigError(f"{where}: expected true or false, got {text!r}")
        return text.strip().lower() in _TRUE
    try:
        value = kind(text.strip()) if kind is not str else text
    except ValueError:
        raise ConfigError(f"{where}: expected {_describe(kind)}, got {text!r}") from None
    return _choose(setting, value, where)


def _choose(setting: Setting, value: Any, where: str) -> Any:
    if setting.choices and value not in setting.choices:
        raise ConfigError(f"{where}: expected one of {', '.join(setting.choices)}, got {value!r}")
    return value


def _describe(kind: Any) -> str:
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}[kind]


def _queue(name: str, table: Any, config: ServerConfig, where: str) -> QueueDeclaration:
    """A [queues.NAME] table; attribute values become SQS strings here, and are checked when applied."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: expected a table of attributes")
    attributes: dict[str, str] = {}
    for key, value in table.items():
        if key in _QUEUE_KEYS:
            continue
        if not key[:1].isupper():
            raise ConfigError(f"{where}.{key}: unknown key (SQS attribute names start with a capital; "
                              f"the others are {', '.join(sorted(_QUEUE_KEYS))})")
        attributes[key] = _attribute_text(value, f"{where}.{key}")
    tags = table.get("tags", {})
    if not isinstance(tags, dict) or not all(isinstance(v, str) for v in tags.values()):
        raise ConfigError(f"{where}.tags: expected a table of strings, got {tags!r}")
    strings = {key: table[key] for key in ("region", "account", "dead_letter_queue") if key in table}
    for key, value in strings.items():
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{where}.{key}: expected a non-empty string, got {value!r}")
    if "region" in strings and not re.fullmatch(REGION_NAME, strings["region"]):
        raise ConfigError(f"{where}.region: expected a region name (lower-case letters, digits, dashes), "
                          f"got {strings['region']!r}")
    if strings.get("account", config.account_id) != config.account_id:  # until credentials name accounts
        raise ConfigError(f"{where}.account: this server serves one account, account_id = "
                          f"{config.account_id!r}; a queue in {strings['account']!r} could not be reached")
    count = table.get("max_receive_count")
    if count is not None and (type(count) is not int or not 1 <= count <= 1000):
        raise ConfigError(f"{where}.max_receive_count: expected an integer from 1 to 1000, got {count!r}")
    dead_letter_queue = strings.get("dead_letter_queue")
    if (dead_letter_queue is None) != (count is None):
        missing = "max_receive_count" if count is None else "dead_letter_queue"
        raise ConfigError(f"{where}.{missing}: required with "
                          f"{'dead_letter_queue' if count is None else 'max_receive_count'}")
    if dead_letter_queue is not None and "RedrivePolicy" in attributes:
        raise ConfigError(f"{where}.RedrivePolicy: give either RedrivePolicy or dead_letter_queue, not both")
    return QueueDeclaration(name=name, region=strings.get("region", config.region),
                            account=strings.get("account", config.account_id), attributes=attributes,
                            tags=dict(tags), dead_letter_queue=dead_letter_queue, max_receive_count=count)


def _attribute_text(value: Any, where: str) -> str:
    """The SQS string of a TOML value: booleans as true/false, tables (policies) as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, str)):
        return str(value)
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    raise ConfigError(f"{where}: expected a string, integer, boolean or table, got {value!r}")



def reference_table() -> str:
    """The settings table of docs/configuration.md, made from the declaration so it cannot drift."""
    lines = ["| key | option | environment | type | default | meaning |", "|---|---|---|---|---|---|"]
    for s in settings():
        kind = f"one of {', '.join(s.choices)}" if s.choices else \
            {bool: "boolean", int: "integer", float: "number", str: "string", tuple: "list of strings"}[s.kind]
        default = json.dumps(list(s.default) if s.kind is tuple else s.default)
        option = f"--[no-]{s.option[2:]}" if s.kind is bool else s.option
        lines.append(f"| `{s.name}` | `{option}` | `{s.env}` | {kind} | `{default}` | {s.help} |")
    return "\n".join(lines)
