"""The localnet over HTTP: solana-py, the x402 SDK and `RpcChain` talk to it as they talk to a cluster."""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
import warnings
from collections.abc import Iterator
from wsgiref.simple_server import make_server

import httpx
import pytest
from solana.rpc.api import Client
from solana.rpc.core import RPCException
from solana.rpc.models import TxOpts
from solders.hash import Hash
from solders.keypair import Keypair
from solders.message import to_bytes_versioned
from solders.pubkey import Pubkey
from solders.rpc.errors import SendTransactionPreflightFailureMessage
from solders.token.associated import get_associated_token_address
from solders.transaction import VersionedTransaction
from solders.transaction_status import TransactionConfirmationStatus, TransactionErrorFieldless

from application.ports import ChainUnavailableError, Confirmation, SubmissionError
from domain.networks import DEVNET, Programs
from interfaces.adapters.chain.litesvm import LiteSvmChain
from interfaces.adapters.chain.rpc import RpcChain
from interfaces.sandbox.localnet import LocalnetThread
from tests.integration.test_litesvm_chain import USDC, Wallets, transfer_checked
from tests.services import POLL


@pytest.fixture
def net() -> Iterator[LocalnetThread]:
    with LocalnetThread(slot_ms=None) as net:  # the tests drive the slots
        yield net


@pytest.fixture
def client(net: LocalnetThread) -> Client:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Client(net.url)


@pytest.fixture
def wallets(net: LocalnetThread) -> Wallets:
    wallets = Wallets(Keypair(), Keypair(), Keypair())
    for wallet, usdc in ((wallets.fee_payer, "0"), (wallets.payer, "5"), (wallets.merchant, "0.000001")):
        response = httpx.post(
            f"{net.url}/faucet", json={"address": str(wallet.pubkey()), "usdc": usdc, "sol": "1"}
        )
        assert response.status_code == 200, response.text
    return wallets


def pay(net: LocalnetThread, wallets: Wallets, amount: int, **options) -> VersionedTransaction:
    return transfer_checked(
        net.sandbox, wallets.fee_payer, wallets.payer, wallets.merchant.pubkey(), amount, **options
    )


def ata(owner: Pubkey, mint: str = DEVNET.usdc_mint) -> Pubkey:
    return get_associated_token_address(owner, Pubkey.from_string(mint), Pubkey.from_string(Programs.TOKEN))


def rpc(net: LocalnetThread, payload: object) -> object:
    return httpx.post(net.url, json=payload).json()


def test_airdrop_lands_and_shows_in_balance_and_status(net, client):
    wallet = Keypair().pubkey()

    signature = client.request_airdrop(wallet, 2 * 10**9).value

    assert client.get_balance(wallet).value == 2 * 10**9
    status = client.get_signature_statuses([signature]).value[0]
    assert status.err is None and status.confirmation_status == TransactionConfirmationStatus.Confirmed


def test_faucet_funds_usdc_and_sol_and_answers_the_amounts(net, client):
    wallet = Keypair().pubkey()

    response = httpx.post(f"{net.url}/faucet", json={"address": str(wallet), "usdc": "10.5", "sol": "0.25"})

    assert response.status_code == 200
    body = response.json()
    funded = (body["usdc"], body["usdcAtomic"], body["sol"], body["lamports"])
    assert funded == ("10.5", "10500000", "0.25", 250_000_000)
    assert body["mint"] == DEVNET.usdc_mint and len(body["signatures"]) == 2
    balance = client.get_token_account_balance(ata(wallet)).value
    assert (balance.amount, balance.decimals, balance.ui_amount_string) == ("10500000", 6, "10.5")
    assert client.get_balance(wallet).value == 250_000_000


@pytest.mark.parametrize(
    "body, message",
    [
        ({"address": "not-an-address", "usdc": "1"}, "address"),
        ({"address": "{wallet}", "usdc": "1.0000001"}, "decimal places"),
        ({"address": "{wallet}", "usdc": "-1"}, "between"),
        ({"address": "{wallet}", "sol": "1e9"}, "between"),
        ({"address": "{wallet}", "usdc": "ten"}, "decimal amount"),
        ({"address": "{wallet}", "usdc": True}, "decimal amount"),
        ({"address": "{wallet}", "usdc": "0", "sol": "0"}, "nothing to fund"),
        (["not", "an", "object"], "JSON object"),
    ],
)
def test_faucet_refuses_bad_requests_and_funds_nothing(net, client, body, message):
    wallet = Keypair().pubkey()
    if isinstance(body, dict):
        body = {k: (str(wallet) if v == "{wallet}" else v) for k, v in body.items()}

    response = httpx.post(f"{net.url}/faucet", json=body)

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request" and message in response.json()["message"]
    assert client.get_balance(wallet).value == 0 and net.sandbox.token_balance(str(wallet)) == 0


def test_a_transfer_checked_sent_with_solana_py_moves_the_amount(net, client, wallets):
    blockhash = client.get_latest_blockhash().value
    tx = pay(net, wallets, 1_500_000, blockhash=str(blockhash.blockhash))

    simulated = client.simulate_transaction(tx, sig_verify=True).value
    assert simulated.err is None and "Program log: Instruction: TransferChecked" in simulated.logs
    assert client.get_fee_for_message(tx.message).value == 10_000
    signature = client.send_transaction(tx).value

    assert signature == tx.signatures[0]
    assert client.get_token_account_balance(ata(wallets.merchant.pubkey())).value.amount == "1500001"
    assert client.get_token_account_balance(ata(wallets.payer.pubkey())).value.amount == "3500000"
    landed = client.get_transaction(signature, max_supported_transaction_version=0).value
    assert landed.slot == net.sandbox.slot and landed.transaction.meta.fee == 10_000
    post = {b.owner: b.ui_token_amount.amount for b in landed.transaction.meta.post_token_balances}
    assert post[wallets.merchant.pubkey()] == "1500001"
    raw = client.get_transaction(signature, "base64", max_supported_transaction_version=0).value
    assert bytes(raw.transaction.transaction) == bytes(tx)


def test_an_expired_blockhash_is_refused_like_a_cluster_refuses_it(net, client, wallets):
    tx = pay(net, wallets, USDC)
    net.sandbox.advance(151)

    assert RpcChain(net.url).is_blockhash_valid(str(tx.message.recent_blockhash)) is False
    simulated = client.simulate_transaction(tx, sig_verify=True).value
    assert simulated.err == TransactionErrorFieldless.BlockhashNotFound
    with pytest.raises(RPCException) as refused:
        client.send_transaction(tx)
    error = refused.value.args[0]
    assert isinstance(error, SendTransactionPreflightFailureMessage)
    assert error.message == "Transaction simulation failed: Blockhash not found"
    # Skipping preflight, the node answers the signature and the transaction is dropped.
    signature = client.send_raw_transaction(bytes(tx), TxOpts(skip_preflight=True)).value
    assert client.get_signature_statuses([signature], search_transaction_history=True).value == [None]
    assert net.sandbox.token_balance(str(wallets.merchant.pubkey())) == 1


def test_preflight_failure_carries_err_and_logs_on_the_wire(net, wallets):
    tx = pay(net, wallets, 6 * USDC)
    encoded = base64.b64encode(bytes(tx)).decode()

    params = [encoded, {"encoding": "base64"}]
    answer = rpc(net, {"jsonrpc": "2.0", "id": 7, "method": "sendTransaction", "params": params})

    assert answer["id"] == 7 and answer["error"]["code"] == -32002
    assert answer["error"]["message"] == (
        "Transaction simulation failed: Error processing Instruction 0: custom program error: 0x1"
    )
    assert answer["error"]["data"]["err"] == {"InstructionError": [0, {"Custom": 1}]}
    assert "Program log: Error: insufficient funds" in answer["error"]["data"]["logs"]


def test_json_rpc_errors_and_batches_answer_as_a_validator_does(net):
    def error(method: str, *params: object) -> dict:
        return rpc(net, {"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)})["error"]

    parse_error = httpx.post(net.url, content=b"{not json").json()
    assert parse_error == {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": None}
    assert rpc(net, {"id": 1, "method": "getSlot"})["error"]["code"] == -32600  # no "jsonrpc": "2.0"
    assert rpc(net, [])["error"]["code"] == -32600
    assert error("getNothing") == {"code": -32601, "message": "Method not found"}
    assert error("getBalance", "xyz") == {"code": -32602, "message": "Invalid param: Invalid"}
    assert error("getBalance")["code"] == -32602
    assert error("getLatestBlockhash", "finalized")["code"] == -32602  # a config must be an object
    assert error("getSignatureStatuses", ["x"] * 257)["message"] == "Too many inputs provided; max 256"

    batch = rpc(net, [{"jsonrpc": "2.0", "id": 1, "method": "getSlot"},
                      {"jsonrpc": "2.0", "id": "b", "method": "getHealth"},
                      {"jsonrpc": "2.0", "id": 3, "method": "nope"}])
    assert [answer["id"] for answer in batch] == [1, "b", 3]
    assert (batch[0]["result"], batch[1]["result"]) == (net.sandbox.slot, "ok")
    assert batch[2]["error"]["code"] == -32601
    assert httpx.get(f"{net.url}/health").text == "ok"


def test_the_mint_reads_as_the_x402_sdk_expects(net, client):
    mint = client.get_account_info(Pubkey.from_string(DEVNET.usdc_mint)).value
    assert str(mint.owner) == Programs.TOKEN and mint.data[44] == 6
    parsed = client.get_account_info_json_parsed(Pubkey.from_string(DEVNET.usdc_mint)).value.data.parsed
    assert parsed["type"] == "mint" and parsed["info"]["decimals"] == 6
    assert str(client.get_genesis_hash().value).startswith(DEVNET.caip2.split(":")[1])


def test_an_x402_sdk_payment_built_against_the_localnet_settles(net, wallets):
    from x402.mechanisms.svm.exact.client import ExactSvmScheme
    from x402.mechanisms.svm.signers import KeypairSigner
    from x402.schemas import PaymentRequirements

    requirements = PaymentRequirements(
        scheme="exact",
        network=DEVNET.caip2,
        asset=DEVNET.usdc_mint,
        amount="42000",
        pay_to=str(wallets.merchant.pubkey()),
        max_timeout_seconds=60,
        extra={"feePayer": str(wallets.fee_payer.pubkey())},
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        payload = ExactSvmScheme(KeypairSigner(wallets.payer), net.url).create_payment_payload(requirements)
    partial = VersionedTransaction.from_bytes(base64.b64decode(payload["transaction"]))
    fee_payer_signature = wallets.fee_payer.sign_message(to_bytes_versioned(partial.message))
    signed = VersionedTransaction.populate(partial.message, [fee_payer_signature, partial.signatures[1]])

    chain = RpcChain(net.url)
    assert chain.simulate(bytes(signed)).ok
    signature = chain.send(bytes(signed))

    assert chain.signature_status(signature).confirmation is Confirmation.CONFIRMED
    assert net.sandbox.token_balance(str(wallets.merchant.pubkey())) == 42_001


def test_rpc_chain_on_the_localnet_answers_as_the_in_process_chain(net, client, wallets):
    remote, local = RpcChain(net.url), LiteSvmChain(net.sandbox)
    good = pay(net, wallets, USDC)
    forged = VersionedTransaction.populate(good.message, [good.signatures[0], Keypair().sign_message(b"x")])
    unfunded = transfer_checked(net.sandbox, Keypair(), wallets.payer, wallets.merchant.pubkey(), USDC)
    made_up_blockhash = pay(net, wallets, 1, blockhash=str(Hash.new_unique()))
    candidates = [good, pay(net, wallets, 6 * USDC), forged, made_up_blockhash, unfunded]

    simulations = [remote.simulate(bytes(tx)) for tx in candidates]
    assert simulations == [local.simulate(bytes(tx)) for tx in candidates]
    codes = [simulation.error_code for simulation in simulations]
    assert codes == ["", "InstructionError", "SignatureFailure", "BlockhashNotFound", "AccountNotFound"]

    for tx in candidates[1:]:
        with pytest.raises(SubmissionError) as by_rpc:
            remote.send(bytes(tx))
        with pytest.raises(SubmissionError) as in_process:
            local.send(bytes(tx))
        assert str(by_rpc.value) == str(in_process.value)

    signature = remote.send(bytes(good))
    assert remote.signature_status(signature) == local.signature_status(signature)
    assert remote.signature_status(signature).confirmation is Confirmation.CONFIRMED
    with pytest.raises(SubmissionError, match="already been processed") as by_rpc:
        remote.send(bytes(good))
    with pytest.raises(SubmissionError) as in_process:
        local.send(bytes(good))
    assert str(by_rpc.value) == str(in_process.value)
    assert net.sandbox.token_balance(str(wallets.merchant.pubkey())) == 1 + USDC

    failing = pay(net, wallets, 6 * USDC)
    landed = str(client.send_raw_transaction(bytes(failing), TxOpts(skip_preflight=True)).value)
    assert remote.signature_status(landed) == local.signature_status(landed)
    assert remote.signature_status(landed).confirmation is Confirmation.FAILED

    unknown = str(Keypair().sign_message(b"never"))
    assert remote.signature_status(unknown) == local.signature_status(unknown)
    blockhash = str(good.message.recent_blockhash)
    assert remote.is_blockhash_valid(blockhash) is local.is_blockhash_valid(blockhash) is True
    table = net.sandbox.create_lookup_table([str(Keypair().pubkey()) for _ in range(3)])
    assert list(remote.lookup_table_addresses(table)) == list(local.lookup_table_addresses(table))
    assert remote.account_exists(table) and not remote.account_exists(str(Keypair().pubkey()))


def test_rpc_chain_reports_an_unreachable_or_nonsensical_endpoint_as_unavailable(net, wallets):
    tx = bytes(pay(net, wallets, 1))

    def garbage(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/html")])
        return [b"<html>maintenance</html>"]

    server = make_server("127.0.0.1", 0, garbage)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": POLL}, daemon=True).start()
    closed = make_server("127.0.0.1", 0, garbage)
    closed_url = f"http://127.0.0.1:{closed.server_port}"
    closed.server_close()
    try:
        for url in (closed_url, f"http://127.0.0.1:{server.server_port}", f"{net.url}/health"):
            chain = RpcChain(url, timeout=2)
            with pytest.raises(ChainUnavailableError):
                chain.simulate(tx)
            with pytest.raises(ChainUnavailableError):
                chain.send(tx)
            with pytest.raises(ChainUnavailableError):
                chain.signature_status(str(Keypair().sign_message(b"x")))
            with pytest.raises(ChainUnavailableError):
                chain.is_blockhash_valid(str(Hash.new_unique()))
    finally:
        server.shutdown()
        server.server_close()


def test_the_ticker_advances_slots_and_serves_concurrent_clients():
    with LocalnetThread(slot_ms=5) as net:
        deadline = time.monotonic() + 5
        while net.sandbox.slot < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert net.sandbox.slot >= 5

        answers: list[dict] = []

        def ask() -> None:
            with httpx.Client() as http:
                for _ in range(10):
                    request = {"jsonrpc": "2.0", "id": 1, "method": "getLatestBlockhash"}
                    answers.append(http.post(net.url, json=request).json()["result"])

        threads = [threading.Thread(target=ask) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(answers) == 80 and all(a["value"]["lastValidBlockHeight"] >= 150 for a in answers)


def test_rpc_chain_simulates_over_one_kept_alive_connection_and_reconnects_when_it_drops(net, wallets):
    import socket

    chain = RpcChain(net.url)
    assert chain.simulate(bytes(pay(net, wallets, 1))).ok
    pool = chain._lean._idle  # the hot path's connection pool (interfaces/adapters/chain/keepalive.py)
    assert len(pool) == 1
    conn, sock = pool[0], pool[0].sock
    assert chain.simulate(bytes(pay(net, wallets, 2))).ok
    assert pool == [conn] and conn.sock is sock  # the same TCP connection answered both
    sock.shutdown(socket.SHUT_RDWR)  # the connection drops: the next simulation retries once on a new one
    refused = chain.simulate(bytes(pay(net, wallets, 10**12)))  # more than the payer holds
    assert not refused.ok and refused.error_code == "InstructionError"
    assert len(pool) == 1 and pool[0] is not conn


def test_rpc_chain_with_signatures_verified_asks_the_node_not_to_check_them_and_nothing_else(net, wallets):
    """`signatures_verified` travels as `sigVerify: false`: a forged signature passes (only a caller that checked
    them may say so: the exact inspection does), everything else is refused as before, over the real JSON-RPC."""
    chain = RpcChain(net.url)
    good = pay(net, wallets, USDC)
    forged = VersionedTransaction.populate(good.message, [good.signatures[0], Keypair().sign_message(b"x")])
    assert chain.simulate(bytes(forged)).error_code == "SignatureFailure"
    assert chain.simulate(bytes(forged), signatures_verified=True).ok
    assert chain.simulate(bytes(good), signatures_verified=True) == chain.simulate(bytes(good))
    unfunded = pay(net, wallets, 6 * USDC)
    assert chain.simulate(bytes(unfunded), signatures_verified=True).error_code == "InstructionError"
    stale = pay(net, wallets, 1, blockhash=str(Hash.new_unique()))
    assert chain.simulate(bytes(stale), signatures_verified=True).error_code == "BlockhashNotFound"


def test_a_simulation_asking_for_accounts_still_gets_their_post_simulation_state(net, wallets):
    """The localnet converts post-simulation accounts only when asked: asked, they are the simulated state."""
    tx = pay(net, wallets, USDC)
    merchant_ata = str(ata(wallets.merchant.pubkey()))
    before = net.sandbox.token_balance(str(wallets.merchant.pubkey()))
    answer = rpc(net, {"jsonrpc": "2.0", "id": 1, "method": "simulateTransaction", "params": [
        base64.b64encode(bytes(tx)).decode(), {"encoding": "base64", "sigVerify": True,
                                               "accounts": {"encoding": "jsonParsed", "addresses": [merchant_ata]}}]})
    value = answer["result"]["value"]
    assert value["err"] is None
    amount = value["accounts"][0]["data"]["parsed"]["info"]["tokenAmount"]["amount"]
    assert int(amount) == before + USDC and net.sandbox.token_balance(str(wallets.merchant.pubkey())) == before


def test_rpc_chain_sends_a_transaction_once_on_a_connection_the_node_has_not_closed(net, wallets):
    """`send` goes over the kept-alive connections too, but never twice: an idle connection the node closed is
    replaced before the send, and a connection lost with the send in flight is a fault, not a second broadcast
    (a lost answer may hide a landed transaction; a second send would be refused as already processed)."""
    import socket

    chain = RpcChain(net.url)
    first = chain.send(bytes(pay(net, wallets, 1)))
    pool = chain._lean._idle
    assert len(pool) == 1 and chain.signature_status(first).confirmation is Confirmation.CONFIRMED
    pool[0].sock.shutdown(socket.SHUT_RDWR)  # the connection drops while idle
    second = chain.send(bytes(pay(net, wallets, 2)))
    assert chain.signature_status(second).confirmation is Confirmation.CONFIRMED
    assert net.sandbox.token_balance(str(wallets.merchant.pubkey())) == 1 + 1 + 2

    received: list[bytes] = []
    listener = socket.create_server(("127.0.0.1", 0))

    def answer_nothing() -> None:  # reads each request and hangs up without an answer
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                request = b""
                while b"}" not in request:  # the JSON body's end: the whole request read
                    request += conn.recv(65536) or b"}"
                received.append(request)

    threading.Thread(target=answer_nothing, daemon=True).start()
    try:
        mute = RpcChain(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=2)
        with pytest.raises(ChainUnavailableError):
            mute.send(bytes(pay(net, wallets, 3)))
        assert len(received) == 1 and b"sendTransaction" in received[0]
        with pytest.raises(ChainUnavailableError):
            mute.signature_status(second)  # a query is retried once on a new connection
        assert len(received) == 3
    finally:
        listener.close()


def data_segments_sent(sock) -> int:
    """The TCP data segments this socket has sent (Linux's `tcp_info.tcpi_data_segs_out`)."""
    import struct

    return struct.unpack_from("I", sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256), 156)[0]


# Linux sends what a corked socket holds once it has been corked 200 ms: a writer descheduled that long between the
# headers and the body (a loaded machine) sends two segments, corked or not. A request is counted only when it was
# written within that ceiling; a slower one is sent again (at most 20 times), so the count is the transport's.
CORK_CEILING = 0.2


def segments_of_a_timely_request(sock_of, send) -> int:
    import time

    for _ in range(20):
        sock = sock_of()
        before, started = data_segments_sent(sock), time.monotonic()
        send()
        if time.monotonic() - started < CORK_CEILING:
            return data_segments_sent(sock) - before
    raise AssertionError("no request was written within the cork's 200 ms in 20 tries")


def test_a_json_rpc_request_goes_out_in_one_segment_with_its_headers(net):
    """http.client writes the headers and the body apart (two segments, two wake-ups of the node); the hot path's
    transport corks the socket while it writes them (keepalive.py), and the node answers it as before."""
    from solders.rpc.requests import GetLatestBlockhash
    from solders.rpc.responses import GetLatestBlockhashResp

    from interfaces.adapters.chain import keepalive

    rpc_client = keepalive.KeepAliveJsonRpc(net.url)
    assert rpc_client.call(GetLatestBlockhash(), GetLatestBlockhashResp).value.last_valid_block_height > 0
    [conn] = rpc_client._idle
    answers = []

    def send() -> None:
        answers.append(rpc_client.call(GetLatestBlockhash(), GetLatestBlockhashResp))

    assert segments_of_a_timely_request(lambda: conn.sock, send) == 1
    assert answers[-1].value.last_valid_block_height > 0 and rpc_client._idle == [conn]
    assert conn.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK) == 0  # left corked, it would hold the next
    rpc_client.close()


def test_over_tls_the_request_also_goes_out_in_one_segment():
    import http.client

    from interfaces.adapters.chain import keepalive
    from tests.https_backend import start_backend

    backend = start_backend()
    try:
        conn = http.client.HTTPSConnection("127.0.0.1", backend.port, timeout=5, context=backend.client_context())
        conn.connect()
        echoed = []

        def send() -> None:
            keepalive._corked_request(conn, "/rpc", b'{"jsonrpc":"2.0"}', {"Content-Type": "application/json"})
            echoed.append(json.loads(conn.getresponse().read()))

        # the headers' and the body's TLS records together
        assert segments_of_a_timely_request(lambda: conn.sock, send) == 1
        assert echoed[-1]["body"] == '{"jsonrpc":"2.0"}' and echoed[-1]["path"] == "/rpc"
        conn.close()
    finally:
        backend.close()


def test_each_answer_leaves_the_localnet_in_one_send(net, monkeypatch):
    """The status line, the headers and the body of an answer on a kept-alive connection leave in one send
    (interfaces/sandbox/http11.py), not three segments each waking the client (wsgiref's, before QuietHandler's
    buffer)."""
    sends: list[int] = []
    for name in ("send", "sendall"):
        original = getattr(socket.socket, name)

        def counted(self, data, *args, _original=original):
            if threading.current_thread() is not threading.main_thread():  # the localnet's serving thread
                sends.append(len(data))
            return _original(self, data, *args)

        monkeypatch.setattr(socket.socket, name, counted)
    with httpx.Client(base_url=net.url) as http:
        for n in range(5):
            answer = http.post("/", json={"jsonrpc": "2.0", "id": n, "method": "getSlot"})
            assert answer.json()["id"] == n
        assert http.get("/health").text == "ok"
    assert len(sends) == 6, sends
