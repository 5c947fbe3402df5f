"""A mistyped option is refused with the usage of the command it was given to, which lists what that command takes."""

from __future__ import annotations

import pytest

from queueserver.admin_cli.output import counted
from queueserver.cli import main


@pytest.mark.parametrize("argv, usage", [(["serve", "--prot", "1"], "usage: queueserver serve "),
                                         (["check", "--dbb", "x.db"], "usage: queueserver check "),
                                         (["send", "jobs", "hi", "--dely", "3"], "usage: queueserver send ")])
def test_an_unknown_option_shows_its_commands_usage_and_exits_2(argv: list[str], usage: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(usage), err
    assert err.rstrip().endswith(f"error: unrecognized arguments: {' '.join(argv[-2:])}"), err


def test_counts_say_one_message_and_two_messages() -> None:
    assert [counted(n, "message") for n in (0, 1, 2)] == ["0 messages", "1 message", "2 messages"]
