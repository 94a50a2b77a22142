"""429 answers of the real server (a key at 1 request per second, conftest.py): a RateLimitError with the
Retry-After, the calls repeated after it, and wait() polling on through them. Plus the polling schedule of wait()
(eta_seconds, backoff to the spec's 10 s) and the error families of error_for, as tables."""
from __future__ import annotations

import time

import pytest

import lucent_client as lc
from lucent_client._core import next_poll_delay, retry_delay
from conftest import Key, Server, png


def test_rate_limited_calls(server: Server, slow_key: Key) -> None:
    time.sleep(1.1)  # a full bucket
    with lc.Client(server.base, slow_key.key, max_retries=0) as once:
        once.account()
        with pytest.raises(lc.RateLimitError) as e:
            once.account()
        assert (e.value.error_code, e.value.status) == (100429000, 429)
        assert e.value.retry_after is not None and e.value.retry_after >= 1
    # the bucket is empty now: each of 3 calls waits about a second
    with lc.Client(server.base, slow_key.key, max_retries=3) as patient:
        t0 = time.monotonic()
        for _ in range(3):
            patient.account()
        took = time.monotonic() - t0
        assert took >= 1.9, f"3 calls at 1/s waited their Retry-After: {took:.2f} s"
        # wait() keeps polling through 429s until the job ends
        up = patient.upload(png(8, 8), filename="r.png")
        job = patient.submit_photo("general_2x", up["url"], ".png")
        with lc.Client(server.base, slow_key.key, max_retries=0) as strict:
            done = strict.wait(job["job_id"], poll_interval=0.05, timeout=60)
        assert done["status"] == "COMPLETED"
    # a Retry-After longer than max_retry_wait is not waited for
    err = lc.RateLimitError("x", 100429000, 429, retry_after=120)
    assert retry_delay(err, 0, 3, 30) is None and retry_delay(err, 0, 3, 300) == 120


def test_poll_schedule() -> None:
    d = lambda s, n, **k: next_poll_delay(s, n, poll_interval=k.get("fixed"), min_interval=1.0, max_interval=10.0)  # noqa: E731
    waiting = {"status": "CONVERTING", "queue_position": 3}
    assert [round(d(waiting, n), 2) for n in range(8)] == [1.0, 1.5, 2.25, 3.38, 5.06, 7.59, 10.0, 10.0]
    assert d({"status": "CONVERTING", "eta_seconds": 4}, 0) == 4.0, "the job's own estimate"
    assert d({"status": "CONVERTING", "eta_seconds": 600}, 0) == 10.0, "never longer than the spec's 10 s"
    assert d({"status": "CONVERTING", "eta_seconds": 0}, 5) == 1.0
    assert d(waiting, 3, fixed=0.2) == 0.2


@pytest.mark.parametrize("status,code,cls", [
    (400, 110400000, lc.AuthenticationError), (401, 100401000, lc.AuthenticationError),
    (403, 100403000, lc.InvalidRequestError), (400, 110400005, lc.InvalidRequestError),
    (400, 110400002, lc.NotFoundError), (400, 110400023, lc.NotFoundError),
    (402, 110402004, lc.InsufficientCoinsError), (409, 110409001, lc.ConflictError),
    (429, 100429000, lc.RateLimitError), (503, 100500007, lc.ServiceUnavailableError),
    (500, 100500001, lc.ServerError), (502, 0, lc.ServerError), (404, 0, lc.NotFoundError),
    (400, 110400099, lc.InvalidRequestError),
])
def test_error_families(status: int, code: int, cls: type) -> None:
    e = lc.error_for(status, {"code": code, "error_code": code, "message": "m", "msg": "m"}, {"Retry-After": "5"})
    assert type(e) is cls and e.error_code == code and e.status == status
    if isinstance(e, (lc.RateLimitError, lc.ServiceUnavailableError)):
        assert e.retry_after == 5
