"""The AsyncClient against the real `lucent serve` of conftest.py: the same calls as coroutines (upload, photo job,
wait, download, typed errors, cancel, idempotency), several jobs waited on at once, and a progress callback that
is a coroutine."""
from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

import lucent_client as lc
from conftest import Key, Server, png, png_size

pytestmark = pytest.mark.anyio


async def test_async_photo_jobs(server: Server, key: Key, tmp_path: Path) -> None:
    async with lc.AsyncClient(server.base, key.key) as lucent:
        src = tmp_path / "a.png"
        src.write_bytes(png(20, 10))
        up = await lucent.upload(src)
        assert await lucent.download(up["url"]) == src.read_bytes()
        pre = await lucent.upload_presigned(src)
        assert await lucent.download(pre["url"]) == src.read_bytes()
        before = (await lucent.account())["balance"]
        jobs = await asyncio.gather(*(lucent.submit_photo("general_2x", up["url"], ".png", target_width=w) for w in (30, 40, 50)))
        seen = []

        async def progress(p: int, s: lc.TaskStatus) -> None:
            seen.append(p)

        done = await asyncio.gather(*(lucent.wait(j["job_id"], poll_interval=0.05, on_progress=progress) for j in jobs))
        assert [d["status"] for d in done] == ["COMPLETED"] * 3
        assert seen.count(100) == 3
        for w, d in zip((30, 40, 50), done):
            out = await lucent.download(d, tmp_path / f"o{w}.png")
            assert png_size(Path(out).read_bytes()) == (w, w // 2)
        assert (await lucent.account())["balance"] == before - sum(j["consume_coins"] for j in jobs)


async def test_async_errors_cancel_idempotency(server: Server, key: Key) -> None:
    async with lc.AsyncClient(server.base, "not-a-key") as bad:
        with pytest.raises(lc.AuthenticationError) as e:
            await bad.account()
        assert e.value.error_code == 110400000
    async with lc.AsyncClient(server.base, key.key) as lucent:
        with pytest.raises(lc.InvalidRequestError) as e:
            await lucent.submit_photo("nope_9x", "http://127.0.0.1:9/x.png", ".png")
        assert e.value.error_code == 110400005

        big = await lucent.upload(png(512, 512), filename="big.png")
        small = await lucent.upload(png(16, 12), filename="small.png")
        running = await lucent.submit_photo("general_4x", big["url"], ".png")
        ik = f"py-async-{uuid.uuid4()}"
        waiting, again = [await lucent.submit_photo("general_2x", small["url"], ".png", idempotency_key=ik) for _ in range(2)]
        assert waiting["job_id"] == again["job_id"], "one job for one Idempotency-Key"
        c = await lucent.cancel(waiting["job_id"])
        assert (c["status"], c["reason"]) == ("ERROR", "canceled")
        with pytest.raises(lc.JobCanceledError):
            await lucent.wait(waiting["job_id"], poll_interval=0.05)
        with pytest.raises(lc.ConflictError) as e:
            await lucent.cancel(waiting["job_id"])
        assert e.value.error_code == 110409000
        with pytest.raises(lc.WaitTimeoutError):
            await lucent.wait(running["job_id"], timeout=0.1, poll_interval=0.05)
        await lucent.cancel(running["job_id"])
