"""Verification of Lucent's webhooks (Standard Webhooks: headers ``webhook-id``, ``webhook-timestamp`` and
``webhook-signature``, an HMAC-SHA256 of ``id.timestamp.body`` keyed by the key's ``whsec_`` secret; see
server/webhooks/signing.ts), done by the ``standardwebhooks`` package. Every failure, a malformed header or
secret included, is a ``lucent_client.WebhookVerificationError``."""
from __future__ import annotations

import binascii
import time
from datetime import datetime, timezone
from typing import Any, Mapping, Optional, Union

import standardwebhooks
from standardwebhooks.webhooks import EmptyWebhookSecretError

from .errors import WebhookVerificationError

__all__ = ["verify_webhook", "sign_webhook", "WebhookVerificationError"]


def _webhook(secret: Union[str, bytes]) -> standardwebhooks.Webhook:
    try:
        return standardwebhooks.Webhook(secret)
    except (EmptyWebhookSecretError, binascii.Error, ValueError, RuntimeError) as e:
        raise WebhookVerificationError(f"bad webhook secret: {e}") from None


def verify_webhook(secret: Union[str, bytes], headers: Mapping[str, str], body: Union[str, bytes], *,
                   tolerance: Optional[float] = None) -> Any:
    """Checks one webhook request and returns its parsed JSON event (``{"type", "timestamp", "data"}``).

    ``secret``: the key's ``whsec_...`` secret (printed by ``lucent keys create``). ``body``: the raw body as
    received (a re-serialised object would not match). ``headers``: any mapping (a dict in any case, httpx,
    Starlette or Flask headers). The timestamp must be within 5 minutes of now (the package's window, against
    replays); ``tolerance`` (seconds) narrows it."""
    h = {str(k).lower(): str(v) for k, v in headers.items()}
    wh = _webhook(secret)
    ts = h.get("webhook-timestamp", "")
    if tolerance is not None and ts.isdigit() and abs(time.time() - int(ts)) > tolerance:
        raise WebhookVerificationError("webhook-timestamp outside the tolerance")
    try:
        return wh.verify(body, h)
    except standardwebhooks.WebhookVerificationError as e:
        raise WebhookVerificationError(str(e)) from None
    except (ValueError, binascii.Error, UnicodeDecodeError) as e:
        # a malformed signature entry (no comma), bad base64, or a body that is not UTF-8 JSON
        raise WebhookVerificationError(f"malformed webhook: {e}") from None


def sign_webhook(secret: Union[str, bytes], msg_id: str, timestamp: int, body: Union[str, bytes]) -> str:
    """``v1,<base64>`` of a message, as the server signs it (to test a receiver)."""
    data = body if isinstance(body, str) else body.decode("utf-8")
    return _webhook(secret).sign(msg_id, datetime.fromtimestamp(timestamp, tz=timezone.utc), data)
