"""`PaymentFacts.as_json`, which the result cache projection writes, gives what `dataclasses.asdict` gives, without
its deep copy: the same dict for every shape of facts."""

from __future__ import annotations

import json
from dataclasses import asdict

from application.outcomes import PaymentFacts
from domain.payment import PaymentState


def test_the_facts_written_are_as_json_gives_them():
    for facts in (
        PaymentFacts("key", "terms", "solana:devnet"),
        PaymentFacts("key", "terms", "solana:devnet", state=PaymentState.REJECTED,
                     verify_outcome=PaymentState.REJECTED, payer="payer", reason="simulation_failed",
                     message="no", details={"logs": ["a", {"b": [1, 2]}]}),
        PaymentFacts("key", "terms", "solana:devnet", state=PaymentState.CONFIRMED, signature="sig",
                     success_answered=True, answer_key="k"),
    ):
        assert facts.as_json() == asdict(facts)
        assert json.dumps(facts.as_json(), sort_keys=True) == json.dumps(asdict(facts), sort_keys=True)
        assert PaymentFacts.from_json(facts.as_json()) == facts
