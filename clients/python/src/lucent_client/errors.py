"""The exceptions of lucent_client: one class per family of the API's error codes (docs/api.md, server/errors.ts).

Every exception is a ``LucentError`` with ``error_code`` (the API's ``error_code``, 0 when the answer had none),
``status`` (HTTP status, 0 when no answer came) and ``body`` (the parsed answer). ``error_for`` picks the family
of an answer from its code first, then its HTTP status, so a code the client does not know still lands in the
right family.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

import standardwebhooks

__all__ = [
    "LucentError", "LucentConnectionError", "AuthenticationError", "InsufficientCoinsError", "InvalidRequestError",
    "NotFoundError", "ConflictError", "RateLimitError", "ServerError", "ServiceUnavailableError", "JobFailedError",
    "JobCanceledError", "WaitTimeoutError", "WebhookVerificationError", "error_for",
]


class LucentError(Exception):
    """An answer of the API that is not a success (or no answer at all)."""

    def __init__(self, message: str, error_code: int = 0, status: int = 0, body: Any = None,
                 headers: Optional[Mapping[str, str]] = None) -> None:
        super().__init__(message)
        self.message = message
        #: the API's error_code (docs/api.md), e.g. 110402000 = coins not enough; 0 when the answer had none
        self.error_code = error_code
        #: HTTP status (0: no answer)
        self.status = status
        #: the parsed JSON answer (or its text)
        self.body = body
        self.headers = dict(headers or {})

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, error_code={self.error_code}, status={self.status})"


class LucentConnectionError(LucentError):
    """No answer: the server could not be reached, or the connection broke (error_code 0, status 0)."""


class AuthenticationError(LucentError):
    """The key is not valid, expired, disabled or not allowed (110400000, 100400000, 100401000, 100403001/2)."""


class InsufficientCoinsError(LucentError):
    """HTTP 402: the key's coins or trial jobs are not enough (110402000, 110402001, 110402004)."""


class InvalidRequestError(LucentError):
    """The request was refused for its content: a missing or ill-typed field (100403000), an unknown model
    (110400005), a bad extension (110400007), a URL, size, duration or callback that is not allowed, ..."""


class NotFoundError(LucentError):
    """The job (110400002) or webhook delivery (110400023) does not exist for this key."""


class ConflictError(LucentError):
    """HTTP 409: the job has already finished (cancel: 110409000), or the Idempotency-Key was used with another
    request (110409001)."""


class RateLimitError(LucentError):
    """HTTP 429 (100429000): the key's rate, queue share or storage quota. ``retry_after``: seconds to wait, from
    the answer's Retry-After header (None when absent)."""

    def __init__(self, *args: Any, retry_after: Optional[float] = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.retry_after = retry_after


class ServerError(LucentError):
    """HTTP 5xx: the server failed (100500xxx)."""


class ServiceUnavailableError(ServerError):
    """HTTP 503: the service is busy or stopping (a full queue: 100500007). ``retry_after`` as RateLimitError."""

    def __init__(self, *args: Any, retry_after: Optional[float] = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.retry_after = retry_after


class JobFailedError(LucentError):
    """A job that ended in ERROR (``wait``): ``job`` is its task-status answer, ``error_code`` the job's."""

    def __init__(self, job: Mapping[str, Any]) -> None:
        code = int(job.get("error_code") or 0)
        super().__init__(f"job {job.get('job_id')} failed: {job.get('message') or 'error'} ({code})", code, 200, dict(job))
        self.job = dict(job)


class JobCanceledError(JobFailedError):
    """A job that ended in ERROR because it was canceled (``reason: "canceled"``, error_code 110400014)."""


class WaitTimeoutError(LucentError):
    """``wait`` gave up after its timeout; the job itself goes on. ``job``: the last status answer."""

    def __init__(self, message: str, job: Mapping[str, Any]) -> None:
        super().__init__(message, 0, 0, dict(job))
        self.job = dict(job)


class WebhookVerificationError(LucentError, standardwebhooks.WebhookVerificationError):
    """A webhook request whose headers, timestamp or signature do not verify (also a
    ``standardwebhooks.WebhookVerificationError``)."""

    def __init__(self, message: str) -> None:
        LucentError.__init__(self, message)


_AUTH = {110400000, 100400000, 100401000, 100403001, 100403002}
_NOT_FOUND = {110400002, 110400023}


def _retry_after(headers: Mapping[str, str]) -> Optional[float]:
    v = headers.get("retry-after")
    if v is None:
        return None
    try:
        return max(0.0, float(v))
    except ValueError:
        # an HTTP date: the server sends seconds, so treat a date as "soon"
        return None


def error_for(status: int, body: Any, headers: Optional[Mapping[str, str]] = None) -> LucentError:
    """The exception of a failed answer: its family from the API's error_code, else from the HTTP status."""
    h = {k.lower(): v for k, v in (headers or {}).items()}
    code = 0
    message = f"HTTP {status}"
    if isinstance(body, dict):
        raw = body.get("error_code", body.get("code", 0))
        code = raw if isinstance(raw, int) and raw != 200 else 0
        message = str(body.get("message") or body.get("msg") or message)
        if body.get("detail"):
            message = f"{message}: {body['detail']}"
    args = (message, code, status, body, h)
    if code in _AUTH:
        return AuthenticationError(*args)
    if code in _NOT_FOUND:
        return NotFoundError(*args)
    if status == 402 or 110402000 <= code < 110403000:
        return InsufficientCoinsError(*args)
    if status == 409 or 110409000 <= code < 110410000:
        return ConflictError(*args)
    if status == 429 or code == 100429000:
        return RateLimitError(*args, retry_after=_retry_after(h))
    if status == 503:
        return ServiceUnavailableError(*args, retry_after=_retry_after(h))
    if status >= 500 or 100500000 <= code < 100600000:
        return ServerError(*args)
    if status in (401, 403) and code == 0:
        return AuthenticationError(*args)
    if status == 404:
        return NotFoundError(*args)
    return InvalidRequestError(*args)
