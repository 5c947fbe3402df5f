"""The authorization door is declared for every way in: a new action, form or route without its rule fails here.

The tables walked: the dispatch table (every SQS action and extension), the console's forms and routes,
the app's routes. The handlers are read too: none may ask the evaluator itself, so what the door
declared is all that is asked. docs/security.md's table of the door is the one the code makes.
"""

from __future__ import annotations

import ast
from pathlib import Path

from queueserver.app import ROUTES
from queueserver.auth.door import (CONSOLE_ROUTE_DOORS, CONSOLE_RULES, DOOR, ROUTE_DOORS, SQS_RULES,
                                   STANDBY_ROUTE_DOORS, reference_table, rule_of)
from queueserver.console.actions import FORM_ACTIONS
from queueserver.console.topic_views import TOPIC_FORMS
from queueserver.protocol.dispatch import ACTIONS
from queueserver.protocol.door import ASKED_STEPS, OPEN_DOORS, RESOLVERS
from queueserver.protocol.sns.authorization import RULES as SNS_RULES
from queueserver.standby import STANDBY_ROUTES

PACKAGE = Path(__file__).resolve().parents[2] / "queueserver"


def test_every_action_the_dispatcher_runs_has_a_rule_and_every_rule_an_action() -> None:
    assert sorted(set(ACTIONS) - set(SQS_RULES)) == [], "actions without a rule in auth/door.py"
    assert sorted(set(SQS_RULES) - set(ACTIONS)) == [], "rules of actions the dispatcher does not have"
    for action, rule in SQS_RULES.items():
        assert rule.needs, f"{action} needs nothing: every action names what it needs"
        assert all(need.resource in RESOLVERS for need in rule.needs), action
        assert action in ASKED_STEPS and action in OPEN_DOORS


def test_every_console_form_runs_an_action_whose_rule_it_is() -> None:
    for form, (on_queue, on_subscription) in FORM_ACTIONS.items():
        if on_queue is not None:
            assert CONSOLE_RULES[f"console {form}"].runs == on_queue, form
        if on_subscription is not None and on_subscription != on_queue:
            assert CONSOLE_RULES[f"console {form} subscription"].runs == on_subscription, form
    assert CONSOLE_RULES["console create"].runs == "CreateQueue"
    for form, action in TOPIC_FORMS.items():
        assert (CONSOLE_RULES[f"console {form}"].runs, CONSOLE_RULES[f"console {form}"].api) == (action, "SNS"), form
    for name, rule in CONSOLE_RULES.items():
        assert rule.api in ("SQS", "SNS"), name
        if rule.api == "SNS":  # run through the SNS door: its table has the action
            assert rule.runs in SNS_RULES, name
        else:
            assert rule.runs is None or rule.runs in SQS_RULES, name
        assert rule_of(name).needs or rule.note or rule.another_account, name


def test_every_sns_action_a_console_page_needs_is_one_the_sns_door_judges() -> None:
    judged = {rule.iam_action for rule in SNS_RULES.values()}
    for name, rule in CONSOLE_RULES.items():
        for need in rule.needs:
            for action in need.actions:
                assert not action.startswith("sns:") or action in judged, (name, action)
    assert any(rule.api == "SNS" for rule in CONSOLE_RULES.values())


def test_every_route_of_the_app_and_of_the_console_names_its_rules() -> None:
    assert sorted({rule.name for rule in ROUTES} ^ set(ROUTE_DOORS)) == [], "app routes without their door"
    for route, names in ROUTE_DOORS.items():
        assert names and all(name in DOOR for name in names), route
    paths = set()
    for module in sorted((PACKAGE / "console").glob("*.py")):  # routes.py, and topic_views.py's topic routes
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Route":
                first = node.args[0]
                assert isinstance(first, ast.Constant), module.name
                paths.add(first.value)
    assert "/topics/{region}/{account}/{name}/publish" in paths
    assert paths and sorted(paths ^ set(CONSOLE_ROUTE_DOORS)) == [], "console routes without their door"
    for path, names in CONSOLE_ROUTE_DOORS.items():
        assert all(name in CONSOLE_RULES for name in names), path
    forms = {name for names in CONSOLE_ROUTE_DOORS.values() for name in names}
    assert sorted(set(CONSOLE_RULES) - forms) == [], "console rules no route uses"


def test_every_route_a_standby_answers_itself_names_its_rules() -> None:
    assert sorted(STANDBY_ROUTES ^ set(STANDBY_ROUTE_DOORS)) == [], "standby routes without their door"
    for route, names in STANDBY_ROUTE_DOORS.items():
        assert names and all(name in DOOR for name in names), route


def test_no_handler_asks_the_evaluator_itself() -> None:
    for path in sorted((PACKAGE / "protocol").glob("*_actions.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                assert node.attr not in ("authorize", "caller", "may", "admit_server"), \
                    f"{path.name}:{node.lineno} asks about the caller: the door (protocol/door.py) does"


def test_the_security_page_shows_the_door_generated_from_the_declaration() -> None:
    page = (PACKAGE.parent / "docs" / "security.md").read_text()
    start = "<!-- door: generated by queueserver.auth.door.reference_table() -->\n"
    assert start in page and "\n<!-- /door -->" in page
    shown = page.split(start, 1)[1].split("\n<!-- /door -->", 1)[0]
    assert shown == reference_table(), (
        "docs/security.md's door table is stale; regenerate it with\n"
        "python -c 'from queueserver.auth.door import reference_table; print(reference_table())'")
