"""Completion callbacks: a signed POST to each webhook of a run when it ends.

``verify_signature`` is what a receiver needs (docs/client-guide.md, "Webhooks"). The
rest is the sending side: ``records`` (a run's delivery log in Redis), ``payload`` (the
JSON body), ``sender`` (the reconciler's step that sends the due deliveries).
"""

from dagwright.webhooks.signing import (
    DELIVERY_HEADER,
    SIGNATURE_HEADER,
    signature_header,
    verify_signature,
)

__all__ = ["DELIVERY_HEADER", "SIGNATURE_HEADER", "signature_header", "verify_signature"]
