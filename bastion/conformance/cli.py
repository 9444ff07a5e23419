"""``python -m bastion.conformance --base-url URL --grpc HOST:PORT --admin-secret S --client-id C``.

Runs the scenario catalogue through REST, GraphQL and gRPC against a live deployment,
then schemathesis over /openapi.json; prints the scenario x surface table, every
disagreement with every surface's answer, and ``N passed, M failed, K skipped`` last.
Exit status: 0 all passed, 1 any failure, 2 refused to start.
"""

from __future__ import annotations

import argparse
import ssl
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

import httpx

from bastion.conformance import catalogue, mailsink, smssink
from bastion.conformance.coverage import lines as coverage_lines
from bastion.conformance.coverage import uncovered
from bastion.conformance.discovery import (
    SUITE_DOMAIN,
    Deployment,
    DiscoveryError,
    discover,
    foreign_users,
)
from bastion.conformance.fuzz import FUZZ_ROW, fuzz
from bastion.conformance.pacing import Pacer
from bastion.conformance.profiles import PROFILES, describe, profile
from bastion.conformance.report import write_junit, write_text
from bastion.conformance.runner import (
    FAIL,
    NA,
    PASS,
    SKIP,
    Cell,
    ScenarioResult,
    run_catalogue,
    selected,
)
from bastion.conformance.scenario import Scenario
from bastion.conformance.surfaces import GraphQLSurface, GrpcSurface, RestSurface
from bastion.conformance.surfaces.base import Surface

SUBCOMMANDS = """other commands:
  bastion-conformance coverage REPORT.xml...
      the rows no run covered, over the JUnit reports of several runs (exit 1 when any)
  bastion-conformance openfga FILE...
      OpenFGA's own test data against the embedded engine (--face URL --key KEY: through
      an OpenFGA HTTP API); bastion-conformance openfga --help for its options

exit status: 0 nothing failed, 1 any failure, 2 refused to start"""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bastion-conformance",
        description="The cross-surface suite: the catalogue through REST, GraphQL and gRPC "
        "against a live deployment, then schemathesis over /openapi.json.",
        epilog=SUBCOMMANDS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--base-url",
        action="append",
        help="HTTP base URL (required to run); repeat it for several processes sharing "
        "one store "
        "(calls alternate between them)",
    )
    p.add_argument(
        "--grpc",
        action="append",
        default=[],
        help="gRPC HOST:PORT; repeatable like --base-url. Without it the gRPC "
        "column is skipped by name",
    )
    p.add_argument("--grpc-tls-ca", type=Path, help="CA bundle: talk TLS to the gRPC port")
    p.add_argument("--tls-ca", type=Path, help="CA bundle for an HTTPS --base-url")
    p.add_argument(
        "--admin-secret",
        help="the deployment's admin secret; without it the rows that need the admin "
        "skip by name (--destructive needs it)",
    )
    p.add_argument("--client-id", help="required to run")
    p.add_argument(
        "--client-secret",
        help="the client secret, for the webhook signature and introspection rows "
        "(without it they skip by name)",
    )
    p.add_argument("--only", help="run only scenarios whose name matches (glob or substring)")
    p.add_argument("--junit", type=Path, help="also write JUnit XML here")
    p.add_argument(
        "--destructive",
        action="store_true",
        help="also run scenarios that install a model, reset the store or change "
        "global settings; refuses a store that already holds tuples",
    )
    p.add_argument(
        "--receiver-host",
        default="127.0.0.1",
        help="address the deployment reaches this machine's webhook receiver at",
    )
    p.add_argument(
        "--mail-sink",
        metavar="HOST:PORT",
        help="start the suite's own SMTP sink here for the email rows; the deployment "
        "must send to it (--smtp-host/--smtp-port). Without it those rows are skipped",
    )
    p.add_argument(
        "--sms-sink",
        metavar="HOST:PORT",
        help="start the suite's own SMS sink (the provider's Messages API) here for the "
        "SMS rows; the deployment must text through it (--sms-api-url http://HOST:PORT). "
        "Without it those rows are skipped",
    )
    p.add_argument(
        "--fuzz-examples",
        type=int,
        default=10,
        help="schemathesis examples per operation (0: no fuzzing)",
    )
    p.add_argument(
        "--max-rps",
        type=float,
        default=None,
        help="send at most this many requests per second (all surfaces together); "
        "refusals the deployment marks as changing nothing are waited out either way",
    )
    p.add_argument("--list", action="store_true", help="list the catalogue and exit")
    p.add_argument(
        "--profile",
        choices=[p.name for p in PROFILES],
        help="print the flags a deployment needs for this group of rows, and exit",
    )
    return p


def _fuzz_row(args: argparse.Namespace, destructive: bool) -> ScenarioResult | None:
    row = Scenario(
        FUZZ_ROW,
        lambda ctx: None,
        surfaces=("rest",),
        doc="schemathesis over /openapi.json: no 5xx, responses as documented",
    )
    result = ScenarioResult(
        row, cells={"graphql": Cell(NA, "REST only"), "grpc": Cell(NA, "REST only")}
    )
    if args.fuzz_examples <= 0:
        result.cells["rest"] = Cell(SKIP, "--fuzz-examples 0")
        return result
    with tempfile.TemporaryDirectory() as workdir:
        outcome = fuzz(
            args.base_url[0],
            admin_secret=args.admin_secret if destructive else None,
            max_examples=args.fuzz_examples,
            workdir=Path(workdir),
            tls_ca=args.tls_ca,
            max_rps=args.max_rps,
        )
    if outcome is None:
        result.cells["rest"] = Cell(
            SKIP, "schemathesis is not installed (pip install schemathesis)"
        )
    else:
        result.cells["rest"] = Cell(PASS if outcome.ok else FAIL, outcome.summary)
    return result


ENGINE = {True: "on", False: "off", None: "unknown (no --admin-secret)"}


def _admin_by(deployment: Deployment) -> str:
    if deployment.admin_secret is None:
        return "none (no --admin-secret: admin rows skipped)"
    return "header" if deployment.header_auth else "cookie (one admin login spent)"


def _tls_hint(exc: Exception, tls_ca: Path | None) -> str:
    if "CERTIFICATE_VERIFY_FAILED" not in str(exc):
        return ""
    if tls_ca is None:
        return " (a private or self-signed certificate: give --tls-ca with its CA)"
    return f" (--tls-ca {tls_ca} does not verify the deployment's certificate)"


def main(
    argv: Sequence[str], out: TextIO = sys.stdout, surfaces: dict[str, Surface | None] | None = None
) -> int:
    """``surfaces`` replaces the real clients (tests wrap one to make it answer wrongly)."""
    args = parser().parse_args(argv)
    scenarios = selected(catalogue.CATALOGUE, args.only)
    if args.only and not scenarios and args.only not in FUZZ_ROW:
        out.write(f"cannot start: --only {args.only!r} matches no row (--list shows them)\n")
        return 2
    if args.profile:
        out.write(describe(profile(args.profile), [s.name for s in catalogue.CATALOGUE]))
        return 0
    if args.list:
        for s in scenarios:
            flags = " [destructive]" if s.destructive else ""
            out.write(f"{s.name}{flags} ({', '.join(s.surfaces)}): {' '.join(s.doc.split())}\n")
        return 0
    missing = [
        option
        for option, value in (
            ("--base-url", args.base_url),
            ("--client-id", args.client_id),
        )
        if not value
    ]
    if args.destructive and not args.admin_secret:
        missing.append("--admin-secret (--destructive changes global state as the admin)")
    if missing:
        out.write(f"cannot start: missing {', '.join(missing)}\n")
        return 2
    try:
        verify: bool | ssl.SSLContext = (
            ssl.create_default_context(cafile=str(args.tls_ca)) if args.tls_ca else True
        )
    except (OSError, ssl.SSLError) as exc:
        out.write(f"cannot start: --tls-ca {args.tls_ca}: {exc}\n")
        return 2
    try:
        deployment = discover(
            args.base_url[0],
            admin_secret=args.admin_secret,
            client_id=args.client_id,
            client_secret=args.client_secret,
            verify=verify,
            pacer=Pacer(max_rps=args.max_rps),
        )
    except (DiscoveryError, OSError, httpx.HTTPError) as exc:
        out.write(f"cannot start: {args.base_url[0]}: {exc}{_tls_hint(exc, args.tls_ca)}\n")
        return 2
    deployment.destructive = args.destructive
    deployment.receiver_host = args.receiver_host
    deployment.base_urls = [url.rstrip("/") for url in args.base_url]
    if args.destructive and deployment.fga_tuples_present:
        out.write(
            "refusing --destructive: the authorization store already holds tuples "
            "(run it against a fresh deployment)\n"
        )
        return 2
    if args.destructive:
        try:
            others = foreign_users(deployment)
        except (DiscoveryError, httpx.HTTPError) as exc:
            out.write(f"cannot start: {exc}\n")
            return 2
        if others:
            out.write(
                f"refusing --destructive: the deployment holds users the suite did not "
                f"create ({', '.join(others[:3])}{', ...' if len(others) > 3 else ''}); "
                f"destructive rows and admin fuzzing may change any user: run it against "
                f"a deployment whose only users are the suite's (@{SUITE_DOMAIN})\n"
            )
            return 2
    try:
        sink = mailsink.start(args.mail_sink) if args.mail_sink else None
    except (OSError, ValueError) as exc:
        out.write(f"cannot start the mail sink on {args.mail_sink}: {exc}\n")
        return 2
    try:
        sms = smssink.start(args.sms_sink) if args.sms_sink else None
    except (OSError, ValueError) as exc:
        if sink is not None:
            sink.stop()
        out.write(f"cannot start the SMS sink on {args.sms_sink}: {exc}\n")
        return 2
    if surfaces is None:
        surfaces = {
            "rest": RestSurface(args.base_url, verify=verify, origin=deployment.public_url),
            "graphql": GraphQLSurface(args.base_url, verify=verify, origin=deployment.public_url),
            "grpc": GrpcSurface(args.grpc, tls_ca=args.grpc_tls_ca) if args.grpc else None,
        }
    enabled = ", ".join(sorted(k for k, v in deployment.meta.items() if v is True)) or "none"
    out.write(
        f"deployment {deployment.base_url}: version {deployment.meta.get('version')}; "
        f"enabled: {enabled}; authorization engine "
        f"{ENGINE[deployment.fga_enabled]}; admin by "
        f"{_admin_by(deployment)}; mail sink "
        f"{args.mail_sink or 'none (email rows skipped)'}; SMS sink "
        f"{args.sms_sink or 'none (SMS rows skipped)'}\n\n"
    )
    rest = surfaces.get("rest")
    if isinstance(rest, RestSurface) and not rest.schemas.enabled:
        out.write(
            "note: jsonschema_rs is not installed: REST bodies are not checked "
            "against /openapi.json\n\n"
        )
    try:
        results = run_catalogue(scenarios, surfaces, deployment)
    finally:
        if sink is not None:
            sink.stop()
        if sms is not None:
            sms.stop()
        for surface in surfaces.values():
            if surface is not None:
                surface.close()
    if not args.only or args.only in FUZZ_ROW:
        fuzz_result = _fuzz_row(args, args.destructive)
        if fuzz_result is not None:
            results.append(fuzz_result)
    passed = {r.scenario.name for r in results if any(c.status == PASS for c in r.cells.values())}
    not_here = uncovered([s.name for s in scenarios], passed)
    footer = [deployment.pacer.summary(), *coverage_lines(not_here)]
    write_text(results, out, footer=footer)
    if args.junit:
        write_junit(results, args.junit)
    return 1 if any(c.status == FAIL for r in results for c in r.cells.values()) else 0
