"""`paywarden audit …`: the auditor's commands (histories, rebuild-and-compare, the signed log, the chain)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from domain.merchant import merchant_id
from interfaces.cli.context import container

if TYPE_CHECKING:
    from interfaces.audit.log import AuditLog


def _print_history(events: list[dict[str, Any]], as_json: bool) -> None:
    from interfaces.audit.history import render

    if as_json:
        for e in events:
            print(json.dumps(e, sort_keys=True))
    elif events:
        print(render(events))


def _found(events: list[dict[str, Any]], args: argparse.Namespace, missing: str) -> int:
    """Print a history (1 and `paywarden: <missing>` on stderr when it has no event)."""
    if not events:
        print(f"paywarden: {missing}", file=sys.stderr)
        return 1
    _print_history(events, args.json)
    return 0


def payment(args: argparse.Namespace) -> int:
    from interfaces.audit.history import history, payment_ids
    from projections.payment_list import PaymentListProjection
    from projections.runner import catch_up

    c = container()
    catch_up(c.payments, PaymentListProjection(c.payment_list))  # look-ups by handle see every payment
    ids = payment_ids(args.handle, c.payments, c.payment_list)
    if not ids:
        print(f"paywarden: no payment is named by {args.handle}", file=sys.stderr)
        return 1
    for i in ids:
        _print_history(history(c.payments, i), args.json)
    return 0


def merchant(args: argparse.Namespace) -> int:
    from interfaces.audit.history import history

    c = container()
    return _found(history(c.merchants, merchant_id(args.name)), args, f"no merchant {args.name}")


def aggregate(args: argparse.Namespace) -> int:
    """Any aggregate's events (a proxy service, a webhook endpoint, a listing, …), found in whichever store holds it."""
    from uuid import UUID

    from interfaces.audit.history import history
    from interfaces.audit.stores import application_names, reader
    from interfaces.config import load_config

    try:
        wanted = UUID(args.id)
    except ValueError:
        print(f"paywarden: {args.id} is not an id", file=sys.stderr)
        return 2
    config, events = load_config(), []
    for name in application_names(config):
        app = reader(config, name)
        try:
            events.extend(history(app, wanted))
        finally:
            app.close()
    return _found(events, args, f"no events of {args.id}")


def rebuild(args: argparse.Namespace) -> int:
    from interfaces.audit.rebuild import rebuild_all

    c = container()
    different = 0
    for result in rebuild_all(c, check=args.check):  # results on stdout: `audit rebuild --check > report.txt`
        different += len(result.differences)
        if args.json:
            equal = None if not args.check else not result.differences
            print(json.dumps({"read_model": result.name, "events": result.rows, "equal": equal,
                              "differences": result.differences}), flush=True)
            continue
        for line in result.differences:
            print(line)
        verdict = "" if not args.check else (" equal" if not result.differences else
                                              f" {len(result.differences)} difference(s)")
        print(f"{result.name}: {result.rows} events replayed into a fresh copy;{verdict}", flush=True)
    return 1 if different else 0


def _audit_log() -> AuditLog:
    from interfaces.audit.log import AuditLog
    from interfaces.config import load_config

    return AuditLog.open(load_config())


def _witnessed(audit: AuditLog, size: int, note: str) -> str:
    """The checkpoint after the configured witnesses were asked to cosign it (each refusal named on stderr)."""
    from domain.cosignature import parse_witnesses
    from interfaces.audit.witnessing import submit

    witnesses = parse_witnesses(audit.config.audit_witnesses)
    for outcome in submit(audit.view, witnesses, size, note):
        if not outcome.cosigned:
            print(f"paywarden: witness {outcome.witness} refused checkpoint {size}: {outcome.detail}",
                  file=sys.stderr)
    return note + "".join(line + "\n" for line in audit.view.cosignatures(size))


def checkpoint(args: argparse.Namespace) -> int:
    audit = _audit_log()
    try:
        added = audit.catch_up()
        size, note = audit.checkpoint()
        note = _witnessed(audit, size, note)
    finally:
        audit.close()
    print(note, end="")
    print(f"checkpoint of {size} events ({added} newly logged)", file=sys.stderr)
    return 0


def export(args: argparse.Namespace) -> int:
    from pathlib import Path

    audit = _audit_log()
    try:
        from interfaces.audit.tiles import TileSource

        audit.catch_up()
        signer = audit.signer()
        _witnessed(audit, *audit.checkpoint(signer))
        size = audit.export(Path(args.out), signer.verifier)
        TileSource(audit=audit).write(Path(args.out))
    finally:
        audit.close()
    if args.json:
        print(json.dumps({"events": size, "directory": str(Path(args.out).resolve())}))
    else:
        print(f"exported {size} events, their checkpoints, the public key and the log's tiles to {args.out}")
    return 0


def verify(args: argparse.Namespace) -> int:
    from pathlib import Path

    from domain.checkpoint import NoteError
    from domain.cosignature import WitnessPolicy
    from interfaces.audit.verify import verify_export, verify_live

    kept = [Path(p) for p in args.checkpoint]
    try:
        policy = WitnessPolicy.parse(args.witness_policy) if args.witness_policy else None
    except NoteError as bad:
        print(f"paywarden: --witness-policy: {bad}", file=sys.stderr)
        return 2
    if args.live == (args.directory is not None):
        print("paywarden: give an export directory, or --live", file=sys.stderr)
        return 2
    if args.live:
        audit = _audit_log()
        try:
            report = verify_live(audit, audit.signer().verifier, kept, args.payment, policy)
        finally:
            audit.close()
    else:
        if not Path(args.directory).is_dir():
            print(f"paywarden: no export directory at {args.directory} (write one with `paywarden audit export "
                  "--out DIR`)", file=sys.stderr)
            return 2
        report = verify_export(Path(args.directory), kept, args.payment, policy)
    for note in report.notes:
        print(note)
    for failure in report.failures:
        print(f"FAILED: {failure}")
    if not report.ok:
        return 1
    print(f"verified: {report.size} events, every checkpoint signed and every root recomputed")
    print("settled volume (atomic units) per merchant, network, asset:")
    for (merchant_name, network, asset), amount in sorted(report.totals.items()):
        print(f"  {merchant_name}  {network}  {asset}  {amount}")
    return 0


def keygen(args: argparse.Namespace) -> int:
    from interfaces.audit.signing import CheckpointSigner

    signer = CheckpointSigner.generate(args.name)
    print(signer.encoded())
    print(f"verifier key (publish it): {signer.verifier.encoded()}", file=sys.stderr)
    return 0


def follow(args: argparse.Namespace) -> int:
    import threading

    from interfaces.audit.log import follow as run
    from interfaces.config import load_config

    stop = threading.Event()
    import signal

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    run(load_config(), stop)
    return 0


def chain(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from domain.networks import DEVNET, MAINNET
    from interfaces.audit.chain import JsonRpc, RpcUnavailable, check
    from interfaces.audit.stores import reader
    from interfaces.config import ConfigError, beside_running_stack, load_config

    config = beside_running_stack(load_config())  # beside `paywarden up`: the localnet it serves
    urls = {DEVNET.caip2: config.devnet_rpc_url, MAINNET.caip2: config.mainnet_rpc_url}
    for given in args.rpc_url:
        network, sep, url = given.partition("=")
        if not sep or not url.startswith(("http://", "https://")):
            raise ConfigError(f"--rpc-url takes NETWORK=URL, got {given!r}")
        urls[network] = url
    clients: dict[str, JsonRpc] = {}

    def rpc_for(network: str) -> JsonRpc | None:
        if network not in clients and urls.get(network):
            clients[network] = JsonRpc(urls[network])
        return clients.get(network)

    since = None
    if args.since:
        try:
            since = datetime.fromisoformat(args.since.replace("Z", "+00:00"))
        except ValueError:
            raise ConfigError(f"--since takes an ISO 8601 time, got {args.since!r}") from None
        since = since if since.tzinfo else since.replace(tzinfo=UTC)
    payments = reader(config, "payments")
    try:
        report = check(payments, rpc_for, since)
    except RpcUnavailable as down:
        print(f"paywarden: the chain did not answer: {down}", file=sys.stderr)
        return 2
    finally:
        payments.close()
        for client in clients.values():
            client.close()
    if args.json:
        print(json.dumps({"checked": report.checked, "problems": report.problems}))
        return 1 if report.problems else 0
    for problem in report.problems:
        print(problem)
    print(f"{report.checked} settled payment(s) checked against the chain; {len(report.problems)} problem(s)")
    return 1 if report.problems else 0


def _guarded(command: Any) -> Any:
    """A refusal (no signing key, an export that cannot be read, …) is a message and exit status 2."""

    def run(args: argparse.Namespace) -> int:
        from domain.checkpoint import NoteError
        from domain.log_entry import EntryError

        try:
            return int(command(args))
        except BrokenPipeError:
            raise  # the reader went away (`| head`): main() ends quietly
        except (NoteError, EntryError, OSError) as refused:
            print(f"paywarden: {refused}", file=sys.stderr)
            return 2

    return run


def add_parser(commands: Any) -> None:
    audit = commands.add_parser("audit", help="the auditor's tools").add_subparsers(dest="action", required=True)
    p = audit.add_parser("payment", help="a payment's events in order, by payment id, idempotency key, "
                                         "transaction signature or payment hash")
    p.add_argument("handle", help="payment id, idempotency key (the payment hash), transaction signature or "
                                  "message hash")
    p.add_argument("--json", action="store_true", help="one JSON object per event and line")
    p.set_defaults(func=_guarded(payment))
    m = audit.add_parser("merchant", help="a merchant account's events in order")
    m.add_argument("name", help="the merchant's name")
    m.add_argument("--json", action="store_true", help="one JSON object per event and line")
    m.set_defaults(func=_guarded(merchant))
    a = audit.add_parser("service", help="a proxy service's events in order (or any aggregate's, by id)")
    a.add_argument("id", help="the service's id (or any aggregate's)")
    a.add_argument("--json", action="store_true", help="one JSON object per event and line")
    a.set_defaults(func=_guarded(aggregate))
    r = audit.add_parser("rebuild", help="replay the event store into fresh copies of every read model "
                                         "(the live ones are only read)")
    r.add_argument("--check", action="store_true", help="compare each copy with the live read model row by row; "
                                                         "exit 1 on any difference")
    r.add_argument("--json", action="store_true", help="one JSON object per read model and line")
    r.set_defaults(func=_guarded(rebuild))
    c = audit.add_parser("checkpoint", help="log every stored event not yet logged and sign a checkpoint now")
    c.set_defaults(func=_guarded(checkpoint))
    e = audit.add_parser("export", help="write the events, checkpoints and public key an auditor verifies")
    e.add_argument("--out", required=True, help="directory to write (created)")
    e.add_argument("--json", action="store_true", help="one JSON object: the events written and the directory")
    e.set_defaults(func=_guarded(export))
    v = audit.add_parser("verify", help="verify an export offline (or the live store with --live)")
    v.add_argument("directory", nargs="?", help="an export written by `audit export`")
    v.add_argument("--live", action="store_true", help="verify the live store against its log and checkpoints")
    v.add_argument("--checkpoint", action="append", default=[], metavar="OLD",
                   help="a checkpoint you kept: prove the log only grew since (repeatable)")
    v.add_argument("--payment", action="append", default=[], metavar="ID",
                   help="prove this payment's events are in the log (repeatable)")
    v.add_argument("--witness-policy", metavar="K:KEY[,KEY…]",
                   help="fail unless the newest checkpoint carries K valid cosignatures by these witness keys")
    v.set_defaults(func=_guarded(verify))
    k = audit.add_parser("keygen", help="make a checkpoint signing key (PAYWARDEN_AUDIT_SIGNING_KEY)")
    k.add_argument("name", help="the log's name, e.g. paywarden.example.com/audit")
    k.set_defaults(func=_guarded(keygen))
    f = audit.add_parser("follow", help="run the audit log follower alone (`paywarden project` runs it too)")
    f.set_defaults(func=_guarded(follow))
    ch = audit.add_parser("chain", help="check every settled payment against the chain (RPC); exit 1 on any "
                                        "mismatch or payment pending past its blockhash lifetime")
    ch.add_argument("--since", help="only payments received at or after this ISO 8601 time")
    ch.add_argument("--rpc-url", action="append", default=[], metavar="NETWORK=URL",
                    help="RPC endpoint of a network (default: PAYWARDEN_DEVNET_RPC_URL, PAYWARDEN_MAINNET_RPC_URL)")
    ch.add_argument("--json", action="store_true", help="one JSON object: payments checked and the problems")
    ch.set_defaults(func=_guarded(chain))


# -- the witness ----------------------------------------------------------------------------------------------


def witness_keygen(args: argparse.Namespace) -> int:
    from interfaces.audit.witness import WitnessSigner

    signer = WitnessSigner.generate(args.name)
    print(signer.encoded())
    print(f"witness key (give it to the logs and auditors): {signer.key.encoded()}", file=sys.stderr)
    return 0


def witness_serve(args: argparse.Namespace) -> int:
    from pathlib import Path
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    from domain.checkpoint import parse_verifier_key
    from interfaces.audit.witness import Witness, WitnessSigner
    from interfaces.runtime.observability import configure_logging

    configure_logging("info")
    signer = WitnessSigner.parse(Path(args.key_file).read_text())
    witness = Witness(signer, [parse_verifier_key(k) for k in args.log], Path(args.state))
    host, _, port = args.listen.rpartition(":")

    class Quiet(WSGIRequestHandler):
        def log_message(self, *_: Any) -> None:  # the witness logs each decision itself
            pass

    server = make_server(host or "127.0.0.1", int(port), witness, handler_class=Quiet)
    print(f"witness {signer.name} listening on http://{host or '127.0.0.1'}:{server.server_address[1]} "
          f"(key {signer.key.encoded()})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def add_witness_parser(commands: Any) -> None:
    w = commands.add_parser("witness", help="a C2SP tlog-witness that cosigns consistent checkpoints of audit "
                                            "logs (docs/audit.md)").add_subparsers(dest="action", required=True)
    k = w.add_parser("keygen", help="make a witness key (keep it in a file only the witness reads)")
    k.add_argument("name", help="the witness's name, e.g. witness.example.com/w1")
    k.set_defaults(func=_guarded(witness_keygen))
    s = w.add_parser("serve", help="answer POST /add-checkpoint until interrupted")
    s.add_argument("--listen", default="127.0.0.1:7380", help="HOST:PORT (default 127.0.0.1:7380)")
    s.add_argument("--key-file", required=True, help="the file `paywarden witness keygen` wrote")
    s.add_argument("--state", required=True, help="the witness's state file (created): what it last cosigned")
    s.add_argument("--log", action="append", required=True, metavar="KEY",
                   help="a log's verifier key (name+keyid+key; the name is its origin): repeatable")
    s.set_defaults(func=_guarded(witness_serve))
