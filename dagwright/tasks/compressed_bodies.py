"""No compressed message bodies in a worker.

kombu inflates a compressed body (header ``compression``) when it builds the message, in
the worker's main process, before Celery or dagwright can look at it: a 783-byte bz2
body becomes 1 GiB there. dagwright never compresses, so a worker refuses every method
kombu knows (re-registering each with a decoder that raises) and kombu reports the
message as undecodable instead: the consumer dead-letters it (``tasks/consumer.py``).
A method kombu does not know already fails the same way.

Rejected: inflating up to a cap. A capped decoder per method (zlib's ``max_length``,
bz2's and lzma's incremental decompressors, brotli, zstd) is five places to get a bound
wrong, for a feature nobody sends.
"""

from __future__ import annotations

from kombu import compression


class CompressedBodyRefused(Exception):
    """A message body was compressed; it was left as it came."""


def refuse(body: bytes) -> bytes:
    raise CompressedBodyRefused(f"a compressed body of {len(body)} bytes, not inflated")


def refuse_compressed_bodies() -> None:
    """Make kombu refuse, in this process, to inflate any body (idempotent). Compressing
    is unaffected: a worker that publishes never compresses anyway."""
    for content_type in compression.encoders():
        encoder, _ = compression.get_encoder(content_type)
        compression.register(encoder, refuse, content_type)
