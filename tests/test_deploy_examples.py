"""The deployment examples under deploy/ stay true: the fleet's compose file gives every
bastion instance flags that bastion accepts (its flags file included), and its haproxy
configuration is one Debian's haproxy accepts."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from bastion.cli import parse_args
from bastion.core.settings import ConfigError

FLEET = Path(__file__).resolve().parents[1] / "deploy" / "fleet"
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"


def _compose() -> dict[str, Any]:
    loaded = yaml.safe_load((FLEET / "compose.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def filled_flags(tmp: Path) -> Path:
    """The example secrets file as an operator fills it in."""
    filled = tmp / "bastion.flags"
    lines = (FLEET / "bastion.flags.example").read_text().splitlines()
    values = {"--admin-secret=": "a" * 32, "--client-secret=": "c" * 32, "--jwt-secret=": "j" * 40}
    filled.write_text("\n".join(line + values.get(line, "") for line in lines) + "\n")
    return filled


def instance_argv(command: list[str], flags_file: Path) -> list[str]:
    secrets = f"@{flags_file}"
    argv = [secrets if arg == "@/run/secrets/bastion-flags" else arg for arg in command]
    assert secrets in argv, "the flags file is mounted where the command reads it"
    return argv


def test_every_bastion_instance_of_the_fleet_starts_from_valid_flags(tmp_path: Path) -> None:
    compose = _compose()
    services = compose["services"]
    instances = [name for name in services if name.startswith("bastion-")]
    assert len(instances) == 3
    for name in instances:
        settings = parse_args(instance_argv(services[name]["command"], filled_flags(tmp_path)))
        assert settings.memory_store_url.startswith("redis+sentinel://sentinel-1:26379,")
        assert settings.workers == 2
        assert settings.database_type == "postgres"
        assert settings.database_url.startswith("postgresql://bastion:")
        # the balancer's fixed address alone is a trusted proxy (issue 36)
        balancer = services["haproxy"]["networks"]["default"]["ipv4_address"]
        assert settings.trusted_proxies == (balancer,)


def test_the_fleet_keeps_secrets_off_command_lines_and_never_starts_on_placeholders() -> None:
    compose = _compose()
    services = compose["services"]
    assert compose["secrets"] == {
        "bastion-flags": {"file": "./bastion.flags"},
        "db-password": {"file": "./db-password"},
    }
    assert (FLEET / ".gitignore").read_text().split() == ["bastion.flags", "db-password"]
    for name, service in services.items():
        command = " ".join(map(str, service.get("command", [])))
        assert "change-me" not in command, name
        assert "--database-url" not in command, name
        assert "secret=" not in command, name
        assert all("PASSWORD" not in key or key.endswith("_FILE")
                   for key in service.get("environment", {})), name  # fmt: skip
    command = services["bastion-1"]["command"]
    with pytest.raises(ConfigError, match="missing required flags: --admin-secret, --client-se"):
        parse_args(instance_argv(command, FLEET / "bastion.flags.example"))
    assert "change-me" not in (FLEET / "bastion.flags.example").read_text()


def test_every_service_waits_for_the_health_of_what_it_needs() -> None:
    """bastion for PostgreSQL and the sentinels, haproxy for bastion (the image's
    HEALTHCHECK), each with a health check of its own."""
    services = _compose()["services"]
    waits = {
        name: service["depends_on"]
        for name, service in services.items()
        if name.startswith("bastion-") or name == "haproxy"
    }
    for name, needs in waits.items():
        assert all(wait == {"condition": "service_healthy"} for wait in needs.values()), name
        for needed in needs:
            assert needed.startswith("bastion-") or "healthcheck" in services[needed], needed
    assert set(waits["haproxy"]) == {"bastion-1", "bastion-2", "bastion-3"}
    assert set(waits["bastion-1"]) == {"postgres", "sentinel-1", "sentinel-2", "sentinel-3"}


def test_the_load_balancer_sends_to_every_instance_and_checks_readiness() -> None:
    config = (FLEET / "haproxy.cfg").read_text()
    services = _compose()["services"]
    for name in (n for n in services if n.startswith("bastion-")):
        assert f"server {name} {name}:8080" in config
    assert "option httpchk GET /readyz" in config
    checked = subprocess.run(
        [HAPROXY, "-c", "-f", str(FLEET / "haproxy.cfg")], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stderr
