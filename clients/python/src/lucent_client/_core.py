"""What the sync and the async client share: the requests of each API call (built as data), the parsing of the
API's envelope into data or a typed error, the retry rule for 429/503 (Retry-After) and the polling schedule of
``wait`` (the job's ``eta_seconds`` when known, else a backoff from 1 s to the spec's 10 s)."""
from __future__ import annotations

import mimetypes
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Union

import httpx

from .errors import (JobCanceledError, JobFailedError, LucentError, RateLimitError, ServiceUnavailableError,
                     error_for)

__version__ = "0.1.0"

#: content types of the extensions the upload facility takes (as the TypeScript client's table)
CONTENT_TYPES = {
    "jpg": "image/jpeg", "jpeg": "image/jpeg", "jfif": "image/jpeg", "png": "image/png", "webp": "image/webp",
    "bmp": "image/bmp", "tif": "image/tiff", "tiff": "image/tiff", "tga": "image/x-tga", "heic": "image/heic",
    "heif": "image/heif", "gif": "image/gif", "avif": "image/avif", "mp4": "video/mp4", "m4v": "video/x-m4v",
    "mov": "video/quicktime", "mkv": "video/x-matroska", "webm": "video/webm", "avi": "video/x-msvideo",
}

PathLike = Union[str, "os.PathLike[str]"]


def content_type_of(name: str) -> Optional[str]:
    ext = os.path.splitext(name)[1][1:].lower()
    return CONTENT_TYPES.get(ext) or (mimetypes.guess_type(name)[0] if ext else None)


@dataclass
class Req:
    """One API call: route, body, extra headers, and whether a connection failure may be retried (the call
    changes nothing, or carries an Idempotency-Key)."""
    method: str
    route: str
    json: Any = None
    params: Optional[Dict[str, Any]] = None
    headers: Dict[str, str] = field(default_factory=dict)
    safe: bool = True
    #: False: never repeated (a streamed upload body that cannot be read again)
    retry: bool = True
    #: called before a repeat (puts an upload's file back at its start)
    rewind: Optional[Callable[[], Any]] = None


def _drop_none(d: Mapping[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _idem(key: Optional[str]) -> Dict[str, str]:
    return {"idempotency-key": key} if key else {}


def photo_req(model_name: str, img_url: str, extension: str, *, exif: Optional[bool], dpi: Optional[int],
              target_width: Optional[int], target_height: Optional[int], scale: Optional[float],
              callback_url: Optional[str], callback_events: Optional[Sequence[str]], output_put_url: Optional[str],
              idempotency_key: Optional[str], extra: Mapping[str, Any]) -> Req:
    body = _drop_none({
        "model_name": model_name, "img_url": img_url, "extension": extension, "exif": exif, "DPI": dpi,
        "target_width": target_width, "target_height": target_height, "scale": scale, "callback_url": callback_url,
        "callback_events": list(callback_events) if callback_events is not None else None,
        "output_put_url": output_put_url,
    })
    body.update(extra)
    return Req("POST", "/api/photo-enhancer", body, headers=_idem(idempotency_key), safe=bool(idempotency_key))


def segmentation_req(file_url: str, return_type: Optional[str], *, model_name: Optional[str], extension: Optional[str],
                     callback_url: Optional[str], callback_events: Optional[Sequence[str]],
                     idempotency_key: Optional[str], extra: Mapping[str, Any]) -> Req:
    body = _drop_none({
        "file_url": file_url, "return_type": return_type, "model_name": model_name, "extension": extension,
        "callback_url": callback_url, "callback_events": list(callback_events) if callback_events is not None else None,
    })
    body.update(extra)
    return Req("POST", "/api/image-segmentation", body, headers=_idem(idempotency_key), safe=bool(idempotency_key))


def video_req(video_url: str, model_name: str, resolution: Sequence[int], *, extension: Optional[str],
              original_resolution: Optional[Sequence[int]], fps: Optional[float], slowmo: Optional[int],
              callback_url: Optional[str], callback_events: Optional[Sequence[str]], output_put_url: Optional[str],
              idempotency_key: Optional[str], extra: Mapping[str, Any]) -> Req:
    body = _drop_none({
        "video_url": video_url, "model_name": model_name, "resolution": list(resolution), "extension": extension,
        "original_resolution": list(original_resolution) if original_resolution is not None else None,
        "fps": fps, "slowmo": slowmo, "callback_url": callback_url,
        "callback_events": list(callback_events) if callback_events is not None else None,
        "output_put_url": output_put_url,
    })
    body.update(extra)
    return Req("POST", "/api/video-enhancer", body, headers=_idem(idempotency_key), safe=bool(idempotency_key))


def parse(resp: httpx.Response) -> Any:
    """The envelope's ``data`` of a success, else the typed error of the answer."""
    try:
        body = resp.json()
    except ValueError:
        raise error_for(resp.status_code, resp.text, resp.headers) from None
    if resp.is_success and isinstance(body, dict) and body.get("code") == 200 and "data" in body:
        return body["data"]
    raise error_for(resp.status_code, body, resp.headers)


def raise_for_transfer(resp: httpx.Response, what: str) -> None:
    """A download or a pre-signed PUT: anything but 2xx is an error of the family of its status (S3 answers XML)."""
    if resp.is_success:
        return
    try:
        body: Any = resp.json()
    except ValueError:
        body = resp.text
    err = error_for(resp.status_code, body, resp.headers)
    err.message = f"{what}: {err.message}"
    err.args = (err.message,)
    raise err


def retry_delay(err: LucentError, attempt: int, max_retries: int, max_wait: float) -> Optional[float]:
    """Seconds before retrying a call that got ``err`` (attempt 0 = the first retry), or None: no retry. 429 and
    503 are retried after their Retry-After (else 0.5 s, 1 s, 2 s, ...), never longer than ``max_wait``."""
    if attempt >= max_retries or not isinstance(err, (RateLimitError, ServiceUnavailableError)):
        return None
    wait = err.retry_after if err.retry_after is not None else 0.5 * (2 ** attempt)
    return wait if wait <= max_wait else None


def next_poll_delay(status: Mapping[str, Any], polls: int, *, poll_interval: Optional[float], min_interval: float,
                    max_interval: float) -> float:
    """Seconds until the next task-status poll of ``wait``. A fixed ``poll_interval`` wins; else a running job's
    ``eta_seconds`` (clamped to [min_interval, max_interval]), else a backoff from ``min_interval`` growing by 1.5
    each poll up to ``max_interval`` (the spec advises 5 to 10 s between polls)."""
    if poll_interval is not None:
        return max(0.0, poll_interval)
    eta = status.get("eta_seconds")
    if isinstance(eta, (int, float)) and not isinstance(eta, bool):
        return min(max_interval, max(min_interval, float(eta)))
    return min(max_interval, min_interval * (1.5 ** polls))


def job_end(status: Mapping[str, Any]) -> bool:
    """True when the job has ended: COMPLETED returns, ERROR raises JobFailedError / JobCanceledError."""
    s = status.get("status")
    if s == "COMPLETED":
        return True
    if s == "ERROR":
        if status.get("reason") == "canceled":
            raise JobCanceledError(status)
        raise JobFailedError(status)
    return False


def result_url(source: Union[str, Mapping[str, Any]]) -> str:
    """A download source: a URL, or a task-status answer (its ``res_url``)."""
    if isinstance(source, str):
        return source
    url = source.get("res_url")
    if not url:
        raise LucentError(f"job {source.get('job_id')} has no res_url (status {source.get('status')})")
    return str(url)


def upload_part(file: Union[PathLike, bytes], filename: Optional[str], content_type: Optional[str]):
    """(name, opened file or bytes, content type, close?) of a multipart upload."""
    if isinstance(file, (bytes, bytearray)):
        name = filename or "file"
        return name, bytes(file), content_type or content_type_of(name) or "application/octet-stream", False
    if hasattr(file, "read"):
        name = filename or os.path.basename(str(getattr(file, "name", "file")))
        return name, file, content_type or content_type_of(name) or "application/octet-stream", False
    path = os.fspath(file)
    name = filename or os.path.basename(path)
    return name, open(path, "rb"), content_type or content_type_of(name) or "application/octet-stream", True


def part_file(path: str) -> str:
    return f"{path}.part"


def upload_req(data: Any) -> Req:
    """POST /api/oss/upload: repeated after a 429/503 only when the body can be read again from its start."""
    if isinstance(data, bytes):
        return Req("POST", "/api/oss/upload", safe=False)
    try:
        start = data.tell() if data.seekable() else None
    except (AttributeError, OSError):
        start = None
    if start is None:
        return Req("POST", "/api/oss/upload", safe=False, retry=False)
    return Req("POST", "/api/oss/upload", safe=False, rewind=lambda: data.seek(start))
