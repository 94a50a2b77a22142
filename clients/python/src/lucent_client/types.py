"""The wire types of the Lucent API as TypedDicts (the answers' ``data``), mirroring clients/typescript/src/types.ts
(which test/client/types.ts checks against the server's schemas). Answers are plain dicts: fields the server adds
later pass through."""
from __future__ import annotations

import sys
from typing import Any, Dict, List, Optional

if sys.version_info >= (3, 11):
    from typing import NotRequired, TypedDict
else:  # pragma: no cover
    from typing_extensions import NotRequired, TypedDict  # noqa: F401  (httpx depends on typing_extensions)

__all__ = ["JobCreated", "OutputPut", "TaskStatus", "LedgerRow", "Account", "ModelInfo", "Models", "Presigned",
           "Stored", "Delivery", "JOB_STATUSES", "WEBHOOK_EVENTS"]

#: the values of TaskStatus["status"]
JOB_STATUSES = ("CONVERTING", "COMPLETED", "ERROR")
#: the events a submission may ask for in callback_events
WEBHOOK_EVENTS = ("job.completed", "job.failed", "job.canceled", "job.progress")


class JobCreated(TypedDict):
    job_id: str
    consume_coins: int
    model_name: NotRequired[str]
    output_width: NotRequired[int]
    output_height: NotRequired[int]


class OutputPut(TypedDict):
    status: str  # pending | delivered | failed
    http_status: Optional[int]
    attempts: int
    error: Optional[str]


class TaskStatus(TypedDict):
    job_id: str
    status: str
    progress: int
    original_url: str
    consume_coins: int
    res_url: NotRequired[str]
    error_code: NotRequired[int]
    message: NotRequired[str]
    reason: NotRequired[str]  # "canceled"
    eta_seconds: NotRequired[float]
    queue_position: NotRequired[int]
    output_put: NotRequired[OutputPut]
    mask_url: NotRequired[str]  # background removal, return_type mask / all
    thumbnail_url: NotRequired[str]  # background removal, return_type all


class LedgerRow(TypedDict):
    id: int
    job_id: Optional[str]
    kind: str
    delta: int
    balance_after: int
    at: str
    reason: NotRequired[str]


class Account(TypedDict):
    key_id: str
    balance: int
    trial: Dict[str, int]
    rate_limit: Dict[str, float]
    expires_at: Optional[str]
    created_at: str
    ledger: List[LedgerRow]


class ModelInfo(TypedDict):
    name: str
    kind: str  # photo | video | segmentation
    family: str
    scale: float
    family_scales: List[float]
    category: str
    aliases: List[str]
    description: str
    available: bool
    price: Dict[str, Any]
    limits: Dict[str, Any]
    own: NotRequired[Dict[str, str]]


class Models(TypedDict):
    models: List[ModelInfo]
    formats: Dict[str, List[str]]


class Presigned(TypedDict):
    upload_url: str
    access_url: str
    object_key: str
    content_type: str
    expire_at: str


class Stored(TypedDict):
    url: str
    object_key: str
    size: int


class Delivery(TypedDict):
    id: str
    event: str
    job_id: str
    url: str
    status: str  # pending | delivered | failed
    attempts: int
    last_status: Optional[int]
    last_error: Optional[str]
    last_attempt_at: Optional[str]
    next_attempt_at: Optional[str]
    created_at: str
    delivered_at: Optional[str]
