"""What a store written by an earlier release needs before this one serves it: the claims it never recorded.

Wave 1 recorded no claims: its settled payments hold their transactions in `SettlementSubmitted` but no claim on
them, and its idempotency keys were derived from the client's signature (wave 2 derives them from the message
hash), so a payment it settled is not found under the key a request now derives. The claim on the transaction is
what finds it whatever the key's derivation (`application.verifying.recorded_under_another_key`): it is keyed by the
transaction's message hash, a property of the transaction itself. `backfill_claims` records it for every
broadcast recorded before the store's first claim, once (the ones present are left alone), before the API serves.
"""

from __future__ import annotations

from eventsourcing.persistence import IntegrityError
from eventsourcing.utils import get_topic

from application.payments import Payments
from domain.claims import Claim, ClaimKind, claim_id
from domain.payment import Payment
from domain.solana_tx import decode_transaction, message_hash

BATCH = 500
SUBMITTED, CLAIMED = get_topic(Payment.SettlementSubmitted), get_topic(Claim.Made)


def backfill_claims(payments: Payments) -> int:
    """Claim the transaction of every broadcast recorded before the first claim of the store (the releases that
    recorded none); returns how many claims were added. Reads only those two topics, and stops at the first claim:
    every later broadcast was recorded with its claims."""
    added, start = 0, None
    recorder = payments.recorder
    while True:
        found = recorder.select_notifications(start, BATCH, topics=(SUBMITTED, CLAIMED), inclusive_of_start=False)
        for notification in found:
            if notification.topic == CLAIMED:
                return added
            submitted = payments.mapper.to_domain_event(notification)
            assert isinstance(submitted, Payment.SettlementSubmitted)
            subject = message_hash(decode_transaction(submitted.transaction))
            if claim_id(ClaimKind.TRANSACTION, subject) in payments.repository:
                continue
            try:
                payments.save(Claim(kind=ClaimKind.TRANSACTION, subject=subject,
                                    payment_id=str(submitted.originator_id)))
                added += 1
            except IntegrityError:  # another process starting at the same moment recorded it
                continue
        if len(found) < BATCH:
            return added
        start = found[-1].id
