"""Every docker-compose.yml service command's ``--help`` runs through the installed
``.venv/bin/sidecar`` and lists each option the service passes (a CLI process per service,
seconds each: kept out of the unit tier, where ``tests/unit/test_compose.py`` checks that the
same commands exist and their options parse)."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.unit.test_compose import SIDECAR, _compose_commands


@pytest.mark.parametrize(
    ("name", "command"), [pytest.param(n, c, id=n) for n, c in _compose_commands()]
)
def test_service_command_help_runs_through_the_installed_script(
    name: str, command: list[str]
) -> None:
    env = {**os.environ, "COLUMNS": "200", "HF_HUB_OFFLINE": "1"}
    helped = subprocess.run(
        [str(SIDECAR), command[1], "--help"], env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )
    assert helped.returncode == 0, helped.stderr
    for option in (a.split("=", 1)[0] for a in command[2:] if a.startswith("--")):
        assert option in helped.stdout, f"{name}: {option} not in `sidecar {command[1]} --help`"
