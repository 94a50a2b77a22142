"""lucent_client: the Python client of the Lucent API (sync ``Client`` and asyncio ``AsyncClient``, httpx).

    from lucent_client import Client
    with Client("http://127.0.0.1:8080", api_key) as lucent:
        up = lucent.upload("photo.jpg")
        job = lucent.submit_photo("general_4x", up["url"], ".png", scale=3)
        done = lucent.wait(job["job_id"], on_progress=lambda p, s: print(p))
        lucent.download(done, "out.png")

Failed calls raise a ``LucentError`` subclass per family (``error_code``: the API's code); webhooks verify with
``verify_webhook`` (the ``standardwebhooks`` package).
"""
from ._core import __version__
from .async_client import AsyncClient
from .client import Client
from .errors import (AuthenticationError, ConflictError, InsufficientCoinsError, InvalidRequestError,
                     JobCanceledError, JobFailedError, LucentConnectionError, LucentError, NotFoundError,
                     RateLimitError, ServerError, ServiceUnavailableError, WaitTimeoutError,
                     WebhookVerificationError, error_for)
from .types import (JOB_STATUSES, WEBHOOK_EVENTS, Account, Delivery, JobCreated, LedgerRow, ModelInfo, Models,
                    OutputPut, Presigned, Stored, TaskStatus)
from .webhook import sign_webhook, verify_webhook

__all__ = [
    "__version__", "Client", "AsyncClient", "LucentError", "LucentConnectionError", "AuthenticationError",
    "InsufficientCoinsError", "InvalidRequestError", "NotFoundError", "ConflictError", "RateLimitError",
    "ServerError", "ServiceUnavailableError", "JobFailedError", "JobCanceledError", "WaitTimeoutError",
    "WebhookVerificationError", "error_for", "verify_webhook", "sign_webhook", "JOB_STATUSES", "WEBHOOK_EVENTS",
    "Account", "Delivery", "JobCreated", "LedgerRow", "ModelInfo", "Models", "OutputPut", "Presigned", "Stored",
    "TaskStatus",
]
