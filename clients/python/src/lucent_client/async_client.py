"""``AsyncClient``: the asyncio client of the Lucent API (httpx.AsyncClient), the same methods as ``Client``
(./client.py) as coroutines. Every failed call raises a ``LucentError`` of the family of the API's ``error_code``."""
from __future__ import annotations

import os
import asyncio
import inspect
import time
from urllib.parse import quote
from typing import Any, AsyncIterator, BinaryIO, Callable, Dict, List, Mapping, Optional, Sequence, Union

import httpx

from . import _core
from ._core import PathLike, Req
from .errors import LucentConnectionError, LucentError, RateLimitError, ServiceUnavailableError, WaitTimeoutError
from .types import Account, Delivery, JobCreated, Models, Presigned, Stored, TaskStatus

ProgressFn = Callable[[int, TaskStatus], Any]


async def _chunks(f: BinaryIO, size: int = 1 << 16) -> AsyncIterator[bytes]:
    """A file's bytes as an async stream (httpx.AsyncClient takes no sync file as a body)."""
    while True:
        b = f.read(size)
        if not b:
            return
        yield b


class AsyncClient:
    """An asyncio client of one Lucent server with one API key (``async with AsyncClient(...) as lucent``).

    ``max_retries``: how often a call answered 429 / 503 is repeated after its Retry-After (at most
    ``max_retry_wait`` seconds each); calls that change nothing (and submissions with an Idempotency-Key) are also
    repeated after a connection failure. ``timeout``: seconds per HTTP request.
    """

    def __init__(self, base_url: str, api_key: str, *, timeout: float = 60.0, max_retries: int = 2,
                 max_retry_wait: float = 30.0, http_client: Optional[httpx.AsyncClient] = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._key = api_key
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        self._own = http_client is None
        # no default headers: the key goes to the API's routes only, never to a result URL on another host
        self._http = http_client or httpx.AsyncClient(timeout=timeout, headers={"user-agent": f"lucent-client-python/{_core.__version__}"})

    # --- plumbing -------------------------------------------------------------------------------------------------

    async def close(self) -> None:
        if self._own:
            await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def _send(self, r: Req, **kw: Any) -> Any:
        attempt = 0
        while True:
            try:
                resp = await self._http.request(r.method, self.base_url + r.route, json=r.json, params=r.params,
                                          headers={"apikey": self._key, **r.headers}, **kw)
                return _core.parse(resp)
            except httpx.TransportError as e:
                err: LucentError = LucentConnectionError(f"no answer from {self.base_url}: {e}")
                delay = 0.5 * (2 ** attempt) if r.safe and attempt < self.max_retries else None
                if delay is None:
                    raise err from e
            except LucentError as e:
                delay = _core.retry_delay(e, attempt, self.max_retries if r.retry else 0, self.max_retry_wait)
                if delay is None:
                    raise
            await asyncio.sleep(delay)
            if r.rewind:
                r.rewind()
            attempt += 1

    # --- jobs -----------------------------------------------------------------------------------------------------

    async def submit_photo(self, model_name: str, img_url: str, extension: str = ".png", *, exif: Optional[bool] = None,
                           dpi: Optional[int] = None, target_width: Optional[int] = None, target_height: Optional[int] = None,
                           scale: Optional[float] = None, callback_url: Optional[str] = None,
                           callback_events: Optional[Sequence[str]] = None, output_put_url: Optional[str] = None,
                           idempotency_key: Optional[str] = None, **extra: Any) -> JobCreated:
        """POST /api/photo-enhancer. ``idempotency_key``: the same key and body within 24 h answer the same job,
        charged once. Other keyword arguments are sent as body fields (newer extensions)."""
        return await self._send(_core.photo_req(
            model_name, img_url, extension, exif=exif, dpi=dpi, target_width=target_width, target_height=target_height,
            scale=scale, callback_url=callback_url, callback_events=callback_events, output_put_url=output_put_url,
            idempotency_key=idempotency_key, extra=extra))

    async def submit_video(self, video_url: str, model_name: str, resolution: Sequence[int], *,
                           extension: Optional[str] = None, original_resolution: Optional[Sequence[int]] = None,
                           fps: Optional[float] = None, slowmo: Optional[int] = None, callback_url: Optional[str] = None,
                           callback_events: Optional[Sequence[str]] = None, output_put_url: Optional[str] = None,
                           idempotency_key: Optional[str] = None, **extra: Any) -> JobCreated:
        """POST /api/video-enhancer (``resolution``: [width, height] of the output)."""
        return await self._send(_core.video_req(
            video_url, model_name, resolution, extension=extension, original_resolution=original_resolution, fps=fps,
            slowmo=slowmo, callback_url=callback_url, callback_events=callback_events, output_put_url=output_put_url,
            idempotency_key=idempotency_key, extra=extra))

    async def submit_segmentation(self, file_url: str, return_type: Optional[str] = None, *,
                                  model_name: Optional[str] = None, extension: Optional[str] = None,
                                  callback_url: Optional[str] = None, callback_events: Optional[Sequence[str]] = None,
                                  idempotency_key: Optional[str] = None, **extra: Any) -> JobCreated:
        """POST /api/image-segmentation (background removal; ``return_type`` matted (default), mask or all: the
        COMPLETED status then holds res_url, and mask_url / thumbnail_url as asked)."""
        return await self._send(_core.segmentation_req(
            file_url, return_type, model_name=model_name, extension=extension, callback_url=callback_url,
            callback_events=callback_events, idempotency_key=idempotency_key, extra=extra))

    async def status(self, job_id: str) -> TaskStatus:
        """POST /api/task-status"""
        return await self._send(Req("POST", "/api/task-status", {"job_id": job_id}))

    async def cancel(self, job_id: str) -> TaskStatus:
        """POST /api/task-cancel (extension): a waiting job never runs, a running one stops; refunded once. Answers
        the job's status (ERROR, reason ``canceled``); a finished job raises ConflictError (110409000)."""
        return await self._send(Req("POST", "/api/task-cancel", {"job_id": job_id}, safe=False))

    async def wait(self, job_id: str, *, timeout: Optional[float] = None, poll_interval: Optional[float] = None,
                   min_interval: float = 1.0, max_interval: float = 10.0, on_progress: Optional[ProgressFn] = None) -> TaskStatus:
        """Polls the job until it ends and returns the COMPLETED answer (``on_progress`` may be a coroutine
        function); raises JobFailedError (JobCanceledError for a canceled job) when it ends in ERROR,
        WaitTimeoutError after ``timeout`` seconds. Between polls: the job's ``eta_seconds`` when known, else a
        backoff from ``min_interval`` to ``max_interval`` (or a fixed ``poll_interval``); a poll answered 429/503
        waits its Retry-After and polls again."""
        end = None if timeout is None else time.monotonic() + timeout
        last = -1
        polls = 0
        while True:
            try:
                s = await self.status(job_id)
            except (RateLimitError, ServiceUnavailableError) as e:
                s, delay = None, (e.retry_after if e.retry_after is not None else max_interval)
            if s is not None:
                if s.get("progress") != last:
                    last = s.get("progress", last)
                    if on_progress:
                        r = on_progress(last, s)
                        if inspect.isawaitable(r):
                            await r
                if _core.job_end(s):
                    return s
                delay = _core.next_poll_delay(s, polls, poll_interval=poll_interval, min_interval=min_interval,
                                              max_interval=max_interval)
            polls += 1
            if end is not None:
                left = end - time.monotonic()
                if left <= 0:
                    raise WaitTimeoutError(f"job {job_id} still {(s or {}).get('status', 'CONVERTING')} after {timeout} s", s or {})
                delay = min(delay, left)
            await asyncio.sleep(delay)

    # --- files ----------------------------------------------------------------------------------------------------

    async def upload(self, file: Union[PathLike, bytes, BinaryIO], *, filename: Optional[str] = None,
                     content_type: Optional[str] = None) -> Stored:
        """POST /api/oss/upload (multipart, streamed from the file): the ``url`` to give as img_url / video_url."""
        name, data, ct, close = _core.upload_part(file, filename, content_type)
        try:
            return await self._send(_core.upload_req(data), files={"file": (name, data, ct)})
        finally:
            if close:
                data.close()

    async def presign(self, filename: str, content_type: str, expire_seconds: Optional[int] = None) -> Presigned:
        """POST /api/oss/presign-put: a URL to PUT a file to, and the URL to submit afterwards."""
        body: Dict[str, Any] = {"filename": filename, "content_type": content_type}
        if expire_seconds:
            body["expire_seconds"] = expire_seconds
        return await self._send(Req("POST", "/api/oss/presign-put", body, safe=False))

    async def upload_presigned(self, file: PathLike, *, filename: Optional[str] = None,
                               content_type: Optional[str] = None) -> Stored:
        """A local file through a pre-signed PUT (with S3 storage its bytes go to the bucket, not the gateway)."""
        name = filename or os.path.basename(os.fspath(file))
        ct = content_type or _core.content_type_of(name)
        if not ct:
            raise LucentError(f"unknown content type of {name}: give content_type", 110400007)
        p = await self.presign(name, ct)
        size = os.path.getsize(file)
        with open(file, "rb") as f:
            try:
                resp = await self._http.put(p["upload_url"], content=_chunks(f), headers={"content-type": ct, "content-length": str(size)})
            except httpx.TransportError as e:
                raise LucentConnectionError(f"upload failed: {e}") from e
        _core.raise_for_transfer(resp, "upload failed")
        return {"url": p["access_url"], "object_key": p["object_key"], "size": size}

    async def transfer(self, url: str, filename: Optional[str] = None) -> Stored:
        """POST /api/oss/transfer: the service copies a remote file into its storage."""
        return await self._send(Req("POST", "/api/oss/transfer", {"url": url, **({"filename": filename} if filename else {})}, safe=False))

    async def download(self, source: Union[str, Mapping[str, Any]], dest: Optional[PathLike] = None) -> Union[bytes, str]:
        """Downloads a result (a URL, or a COMPLETED task-status answer): streamed into ``dest`` (written to
        ``dest.part``, then renamed; returns the path), or returned as bytes. The API key is not sent."""
        url = _core.result_url(source)
        try:
            async with self._http.stream("GET", url) as resp:
                if not resp.is_success:
                    await resp.aread()
                    _core.raise_for_transfer(resp, "download failed")
                if dest is None:
                    return await resp.aread()
                path = os.fspath(dest)
                part = _core.part_file(path)
                try:
                    with open(part, "wb") as out:
                        async for chunk in resp.aiter_bytes():
                            out.write(chunk)
                    os.replace(part, path)
                except BaseException:
                    if os.path.exists(part):
                        os.remove(part)
                    raise
                return path
        except httpx.TransportError as e:
            raise LucentConnectionError(f"download failed: {e}") from e

    async def enhance_photo(self, file: PathLike, model_name: str, dest: PathLike, *, extension: Optional[str] = None,
                            timeout: Optional[float] = None, on_progress: Optional[ProgressFn] = None, **options: Any) -> TaskStatus:
        """Upload + submit + wait + download in one call: returns the COMPLETED status; the result is in ``dest``
        (its extension is the output format unless ``extension`` is given). ``options``: submit_photo's."""
        ext = extension or os.path.splitext(os.fspath(dest))[1] or ".png"
        up = await self.upload(file)
        job = await self.submit_photo(model_name, up["url"], ext, **options)
        done = await self.wait(job["job_id"], timeout=timeout, on_progress=on_progress)
        await self.download(done, dest)
        return done

    # --- account, catalog, webhooks -------------------------------------------------------------------------------

    async def account(self, *, ledger: Optional[int] = None) -> Account:
        """GET /api/account (extension): balance, trial jobs left, rate limit, the newest ledger rows."""
        return await self._send(Req("GET", "/api/account", params={"ledger": ledger} if ledger is not None else None))

    async def models(self) -> Models:
        """GET /api/models: every model (kind, scale, price, limits) and the accepted formats."""
        return await self._send(Req("GET", "/api/models"))

    async def deliveries(self, *, job_id: Optional[str] = None, status: Optional[str] = None,
                         limit: Optional[int] = None) -> List[Delivery]:
        """GET /api/webhooks/deliveries: the key's webhook deliveries, newest first."""
        q = {k: v for k, v in {"job_id": job_id, "status": status, "limit": limit}.items() if v is not None}
        return (await self._send(Req("GET", "/api/webhooks/deliveries", params=q or None)))["deliveries"]

    async def replay_delivery(self, delivery_id: str) -> Delivery:
        """POST /api/webhooks/deliveries/{id}/replay: send a delivery again (same webhook-id)."""
        return await self._send(Req("POST", f"/api/webhooks/deliveries/{quote(delivery_id, safe='')}/replay", safe=False))
