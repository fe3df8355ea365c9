"""`paywarden tool …`: an MCP service's tool prices from the command line, its MCP server asked for its tools."""

from __future__ import annotations

from solders.keypair import Keypair

from interfaces.cli.main import main
from tests.faults import free_port
from tests.integration.test_cli_proxy import data_dir, run, sandbox_merchant  # noqa: F401 (a fixture)
from tests.mcp_servers import Upstream, serving

PAY_TO = str(Keypair().pubkey())


def test_tools_are_listed_priced_refused_and_made_free_from_the_command_line(data_dir, capsys):  # noqa: F811
    sandbox_merchant("acme")
    upstream = Upstream(json_response=True)
    with serving(upstream.app, upstream.port):
        capsys.readouterr()
        service = run(capsys, "service", "create", "--merchant", "acme", "--name", "Tools", "--kind", "mcp",
                      "--domain", "localhost", "--port", str(upstream.port), "--path-suffix", "/mcp")
        sid = service["id"]
        price = ("--merchant", "acme", "--service", sid, "--pay-to", PAY_TO)
        priced = run(capsys, "tool", "price", "echo", *price, "--price-usdc", "0.25", "--description", "Echo")
        assert (priced["price"], priced["priceUsdc"], priced["description"]) == ("250000", "0.25", "Echo")
        assert priced["inputSchema"]["properties"]["text"]["type"] == "string"
        listed = run(capsys, "tool", "list", "--merchant", "acme", "--service", sid, "--upstream")
        assert {t["name"]: t["priced"] for t in listed} == {"get_weather": False, "get_forecast": False,
                                                           "broken": False, "echo": True}
        # a tool the server does not list, a price given twice or in a bad form: exit 2, one line, nothing priced
        for argv in (("tool", "price", "nope", *price, "--price", "5"),
                     ("tool", "price", "echo", *price, "--price", "5", "--price-usdc", "1"),
                     ("tool", "price", "echo", *price, "--price-usdc", "0.0000001")):
            assert main(list(argv)) == 2
            assert capsys.readouterr().err.count("\n") == 1
        assert run(capsys, "tool", "unprice", "echo", "--merchant", "acme", "--service", sid)["priced"] is False
    assert run(capsys, "tool", "list", "--merchant", "acme", "--service", sid) == []
    # the server gone: --upstream says so; --no-upstream prices a tool anyway, without its schema
    run(capsys, "service", "update", sid, "--merchant", "acme", "--port", str(free_port()))
    assert main(["tool", "list", "--merchant", "acme", "--service", sid, "--upstream"]) == 2
    assert "the MCP server did not answer" in capsys.readouterr().err
    offline = run(capsys, "tool", "price", "later", *price, "--price", "5", "--no-upstream")
    assert offline["name"] == "later" and "inputSchema" not in offline
