"""The result cache projection writes a payment's facts as `PaymentFacts.as_json` gives them, without its deep
copy: the same dict for every shape of facts."""

from __future__ import annotations

import json

from application.outcomes import PaymentFacts
from domain.payment import PaymentState
from projections.results import _as_json


def test_the_facts_written_are_as_json_gives_them():
    for facts in (
        PaymentFacts("key", "terms", "solana:devnet"),
        PaymentFacts("key", "terms", "solana:devnet", state=PaymentState.REJECTED,
                     verify_outcome=PaymentState.REJECTED, payer="payer", reason="simulation_failed",
                     message="no", details={"logs": ["a", {"b": [1, 2]}]}),
        PaymentFacts("key", "terms", "solana:devnet", state=PaymentState.CONFIRMED, signature="sig",
                     success_answered=True, answer_key="k"),
    ):
        assert _as_json(facts) == facts.as_json()
        assert json.dumps(_as_json(facts), sort_keys=True) == json.dumps(facts.as_json(), sort_keys=True)
        assert PaymentFacts.from_json(_as_json(facts)) == facts
