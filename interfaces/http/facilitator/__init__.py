"""The facilitator API app: verify, settle, payment history, its wire schemas and WSGI entry."""
