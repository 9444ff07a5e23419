"""The deployment examples under deploy/ stay true: the fleet's compose file gives every
bastion instance flags that bastion accepts (its flags file included), and its haproxy
configuration is one Debian's haproxy accepts."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from bastion.cli import parse_args

FLEET = Path(__file__).resolve().parents[1] / "deploy" / "fleet"
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"


def _compose() -> dict[str, Any]:
    loaded = yaml.safe_load((FLEET / "compose.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_every_bastion_instance_of_the_fleet_starts_from_valid_flags() -> None:
    services = _compose()["services"]
    instances = [name for name in services if name.startswith("bastion-")]
    assert len(instances) == 3
    for name in instances:
        command = services[name]["command"]
        secrets = f"@{FLEET / 'bastion.flags'}"
        argv = [secrets if arg == "@/run/secrets/bastion-flags" else arg for arg in command]
        assert secrets in argv, "the flags file is mounted where the command reads it"
        settings = parse_args(argv)
        assert settings.memory_store_url.startswith("redis+sentinel://sentinel-1:26379,")
        assert settings.workers == 2
        assert settings.database_type == "postgres"
        # the balancer's fixed address alone is a trusted proxy (issue 36)
        balancer = services["haproxy"]["networks"]["default"]["ipv4_address"]
        assert settings.trusted_proxies == (balancer,)


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
