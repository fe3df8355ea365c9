"""x402's reason codes, the family spelled `svm`
(docs/architecture.md#decisions-where-the-x402-specification-is-open)."""

from __future__ import annotations

from enum import StrEnum


class Code(StrEnum):
    INVALID_X402_VERSION = "invalid_x402_version"
    INVALID_PAYLOAD = "invalid_payload"
    INVALID_PAYMENT_REQUIREMENTS = "invalid_payment_requirements"
    INVALID_NETWORK = "invalid_network"
    UNSUPPORTED_SCHEME = "unsupported_scheme"
    CAPABILITY_NOT_ENABLED = "capability_not_enabled"
    DUPLICATE_REQUEST = "duplicate_request"
    UNEXPECTED_VERIFY_ERROR = "unexpected_verify_error"
    UNEXPECTED_SETTLE_ERROR = "unexpected_settle_error"
    AUTHORIZATION_VALUE = "invalid_exact_svm_payload_authorization_value"
    RECIPIENT_MISMATCH = "invalid_exact_svm_payload_recipient_mismatch"
    ASSET_MISMATCH = "invalid_asset_mismatch"
    INVALID_FEE_PAYER = "invalid_fee_payer"
    INVALID_TRANSACTION_FORMAT = "invalid_transaction_format"
    MISSING_COMPUTE_BUDGET_LIMIT = "missing_compute_budget_limit"
    MISSING_COMPUTE_BUDGET_PRICE = "missing_compute_budget_price"
    PRIORITY_FEE_EXCEEDS_LIMIT = "priority_fee_exceeds_limit"
    INSTRUCTION_TOPOLOGY = "invalid_instruction_count_topology"
    FACILITATOR_CANNOT_BE_PAYER = "facilitator_cannot_be_payer"
    SIMULATION_FAILED = "simulation_failed"
    SUBMISSION_FAILED = "submission_failed"
    # x402 v2: a settle whose transaction was broadcast but not yet confirmed (non-terminal).
    SETTLEMENT_PENDING = "settlement_pending"
    # x402 v2 SVM `exact`: a payment (or its transaction, or its payTo+memo pair) already settled.
    DUPLICATE_SETTLEMENT = "duplicate_settlement"
    MEMO_COUNT = "invalid_exact_svm_payload_memo_count"
    MEMO_MISMATCH = "invalid_exact_svm_payload_memo_mismatch"
