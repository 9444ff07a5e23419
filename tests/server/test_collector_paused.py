"""``bastion``'s commands import with the cyclic collector paused and freeze what the
imports made (a server's start costs 17-18% less CPU: bench/RESULTS.md, "A server's
start and the CI run"); the collector is on again after, whatever happened inside."""

from __future__ import annotations

import gc

import pytest

from bastion.cli import collector_paused, main


def test_the_collector_is_off_inside_and_on_after_with_what_was_made_frozen() -> None:
    before = gc.get_freeze_count()
    with collector_paused():
        assert not gc.isenabled()
        made = [[index] for index in range(1_000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= before + len(made)


def test_a_failure_inside_leaves_the_collector_on() -> None:
    with pytest.raises(ValueError, match="an import failed"), collector_paused():
        raise ValueError("an import failed")
    assert gc.isenabled()


def test_a_command_imports_under_it(capsys: pytest.CaptureFixture[str]) -> None:
    """``bastion fga`` without its command: imported, refused, the collector back on."""
    before = gc.get_freeze_count()
    assert main(["fga"]) == 2
    assert "name a command" in capsys.readouterr().err
    assert gc.isenabled()
    assert gc.get_freeze_count() > before
