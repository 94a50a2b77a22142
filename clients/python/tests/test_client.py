"""The sync Client against a real `lucent serve` (conftest.py): models and account, upload + photo job + wait +
download of a real PNG, a video job, typed errors with the API's codes, cancel, idempotency keys."""
from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

import lucent_client as lc
from conftest import ROOT, Key, Server, free_port, png, png_size


@pytest.fixture
def lucent(server: Server, key: Key):
    with lc.Client(server.base + "/", key.key) as c:
        yield c


def test_models_and_account(lucent: lc.Client) -> None:
    models = lucent.models()
    g4 = next(m for m in models["models"] if m["name"] == "general_4x")
    assert g4["kind"] == "photo" and g4["scale"] == 4 and g4["price"]["unit"] == "output_megapixels"
    assert models["formats"]["photo"]
    acct = lucent.account(ledger=5)
    assert acct["key_id"].startswith("k_")
    assert 1 <= len(acct["ledger"]) <= 5 and acct["ledger"][0]["balance_after"] == acct["balance"], "newest first"


def test_upload_photo_wait_download(lucent: lc.Client, tmp_path: Path) -> None:
    src = tmp_path / "in put.png"
    src.write_bytes(png(24, 18))
    up = lucent.upload(src)
    assert up["size"] == src.stat().st_size and up["object_key"].endswith(".png")
    assert lucent.download(up["url"]) == src.read_bytes(), "the uploaded bytes, as stored"

    before = lucent.account()["balance"]
    job = lucent.submit_photo("general_2x", up["url"], ".png", target_width=36)
    assert job["consume_coins"] == 10 and (job["output_width"], job["output_height"]) == (36, 27)
    seen = []
    done = lucent.wait(job["job_id"], poll_interval=0.05, on_progress=lambda p, s: seen.append(p))
    assert done["status"] == "COMPLETED" and done["res_url"]
    assert seen[-1] == 100 and seen == sorted(seen), "progress reported, only upward"

    out = lucent.download(done, tmp_path / "out.png")
    assert png_size(Path(out).read_bytes()) == (36, 27), "a PNG of the size asked for"
    assert not (tmp_path / "out.png.part").exists()
    assert lucent.account()["balance"] == before - 10

    # the one-call helper: upload + submit + wait + download
    done2 = lucent.enhance_photo(src, "general_2x", tmp_path / "twice.png", scale=2)
    assert done2["status"] == "COMPLETED"
    assert png_size((tmp_path / "twice.png").read_bytes()) == (48, 36)


def test_segmentation_mask_and_thumbnail(lucent: lc.Client, tmp_path: Path) -> None:
    """Background removal (the official client's image_segmentation call) through the client: all three outputs."""
    photo = ROOT.parent / "shared" / "data" / "photos" / "0014.jpg"
    models = Path(os.environ.get("LUCENT_MODEL_DIR", str(ROOT / "data" / "test-models")))
    if not photo.exists() or not (models / "seg" / "u2netp.onnx").exists():
        pytest.skip("no shared photo or seg/u2netp.onnx")
    before = lucent.account()["balance"]
    up = lucent.upload(photo)
    job = lucent.submit_segmentation(up["url"], "all", model_name="u2netp")
    done = lucent.wait(job["job_id"], poll_interval=0.05)
    assert done["status"] == "COMPLETED"
    assert png_size(lucent.download(done["res_url"])) == (179, 179), "the matted image at the photo's size"
    assert png_size(lucent.download(done["mask_url"])) == (179, 179), "the mask at the photo's size"
    w, h = png_size(lucent.download(done["thumbnail_url"]))
    assert max(w, h) <= 256
    assert lucent.account()["balance"] == before - job["consume_coins"]


def test_upload_of_bytes_and_presigned(lucent: lc.Client, tmp_path: Path) -> None:
    data = png(10, 8)
    up = lucent.upload(data, filename="mem.png")
    assert lucent.download(up["url"]) == data
    f = tmp_path / "p.png"
    f.write_bytes(data)
    pre = lucent.upload_presigned(f)
    assert pre["size"] == len(data) and lucent.download(pre["url"]) == data
    with pytest.raises(lc.InvalidRequestError) as e:
        lucent.upload(b"not an image at all", filename="x.unknown")
    assert e.value.error_code == 110400007 and e.value.status == 400


def test_video_job(lucent: lc.Client, clip: Path, tmp_path: Path) -> None:
    up = lucent.upload(clip)
    job = lucent.submit_video(up["url"], "general_restore_1x", [32, 24])
    assert job["consume_coins"] >= 1
    done = lucent.wait(job["job_id"], poll_interval=0.1, timeout=120)
    assert done["status"] == "COMPLETED"
    out = Path(lucent.download(done, tmp_path / "out.mp4"))
    head = out.read_bytes()[:12]
    assert head[4:8] == b"ftyp", "an MP4 came back"


def test_typed_errors(server: Server, key: Key, poor_key: Key, lucent: lc.Client) -> None:
    with pytest.raises(lc.AuthenticationError) as e:
        lc.Client(server.base, "not-a-key").account()
    assert (e.value.error_code, e.value.status) == (110400000, 400)
    assert isinstance(e.value, lc.LucentError)

    with pytest.raises(lc.InvalidRequestError) as e:
        lucent.submit_photo("nope_9x", "http://127.0.0.1:9/x.png", ".png")
    assert (e.value.error_code, e.value.status) == (110400005, 400)
    assert e.value.message.startswith("The model is not supported")

    with pytest.raises(lc.InvalidRequestError) as e:
        lucent.submit_video("http://127.0.0.1:9/v.mp4", "general_restore_2x", [1, 2, 3])
    assert (e.value.error_code, e.value.status) == (100403000, 403), "an ill-typed field"

    up = lucent.upload(png(8, 8), filename="p.png")
    with pytest.raises(lc.InsufficientCoinsError) as e:
        lc.Client(server.base, poor_key.key).submit_photo("general_2x", up["url"], ".png")
    assert (e.value.error_code, e.value.status) == (110402000, 402)

    with pytest.raises(lc.NotFoundError) as e:
        lucent.status("0" * 32)
    assert e.value.error_code == 110400002

    with pytest.raises(lc.LucentConnectionError) as e:
        lc.Client(f"http://127.0.0.1:{free_port()}", key.key, max_retries=0).account()
    assert (e.value.error_code, e.value.status) == (0, 0)

    # a job that fails: wait() raises JobFailedError with the job's error_code
    cut = png(32, 32)
    bad = lucent.upload(cut[:-40], filename="cut.png")
    job = lucent.submit_photo("general_2x", bad["url"], ".png")
    with pytest.raises(lc.JobFailedError) as e:
        lucent.wait(job["job_id"], poll_interval=0.05, timeout=60)
    assert e.value.job["status"] == "ERROR" and e.value.error_code == e.value.job["error_code"] > 0
    assert not isinstance(e.value, lc.JobCanceledError)


def test_cancel(lucent: lc.Client) -> None:
    # one engine worker (conftest): a long job runs, the next waits in the queue
    big = lucent.upload(png(512, 512), filename="big.png")
    small = lucent.upload(png(16, 12), filename="small.png")
    before = lucent.account()["balance"]
    running = lucent.submit_photo("general_4x", big["url"], ".png")
    waiting = lucent.submit_photo("general_2x", small["url"], ".png")
    c = lucent.cancel(waiting["job_id"])
    assert (c["status"], c["reason"], c["error_code"]) == ("ERROR", "canceled", 110400014)
    with pytest.raises(lc.JobCanceledError) as e:
        lucent.wait(waiting["job_id"], poll_interval=0.05)
    assert e.value.error_code == 110400014
    with pytest.raises(lc.ConflictError) as e:
        lucent.cancel(waiting["job_id"])
    assert (e.value.error_code, e.value.status) == (110409000, 409), "an ended job cannot be canceled"
    with pytest.raises(lc.NotFoundError):
        lucent.cancel("0" * 32)
    # the waiting job never ran: refunded in full
    rows = [r for r in lucent.account(ledger=20)["ledger"] if r["job_id"] == waiting["job_id"]]
    assert sorted((r["kind"], r["delta"]) for r in rows) == [("debit", -waiting["consume_coins"]), ("refund", waiting["consume_coins"])]
    # and the long one stops too (refunded its unprocessed share)
    assert lucent.cancel(running["job_id"])["reason"] == "canceled"
    with pytest.raises(lc.JobCanceledError):
        lucent.wait(running["job_id"], poll_interval=0.05, timeout=30)
    assert lucent.account()["balance"] > before - running["consume_coins"] - waiting["consume_coins"]


def test_idempotency(lucent: lc.Client) -> None:
    up = lucent.upload(png(12, 12), filename="i.png")
    ik = f"py-{uuid.uuid4()}"
    before = lucent.account()["balance"]
    a = lucent.submit_photo("general_2x", up["url"], ".png", idempotency_key=ik)
    b = lucent.submit_photo("general_2x", up["url"], ".png", idempotency_key=ik)
    assert a["job_id"] == b["job_id"] and a["consume_coins"] == b["consume_coins"]
    with pytest.raises(lc.ConflictError) as e:
        lucent.submit_photo("general_2x", up["url"], ".webp", idempotency_key=ik)
    assert (e.value.error_code, e.value.status) == (110409001, 409)
    lucent.wait(a["job_id"], poll_interval=0.05)
    assert lucent.account()["balance"] == before - a["consume_coins"], "charged once"
    c = lucent.submit_photo("general_2x", up["url"], ".png", idempotency_key=f"py-{uuid.uuid4()}")
    assert c["job_id"] != a["job_id"]
    lucent.wait(c["job_id"], poll_interval=0.05)


def test_wait_timeout(lucent: lc.Client) -> None:
    up = lucent.upload(png(256, 256), filename="slow.png")
    job = lucent.submit_photo("general_4x", up["url"], ".png")
    with pytest.raises(lc.WaitTimeoutError) as e:
        lucent.wait(job["job_id"], timeout=0.15, poll_interval=0.05)
    assert e.value.job["status"] == "CONVERTING"
    lucent.cancel(job["job_id"])


def test_key_stays_with_the_api(lucent: lc.Client, receiver, tmp_path: Path) -> None:
    """A result URL on another host (a bucket, or a hostile server) never receives the API key."""
    assert lucent.download(f"{receiver.url}/r/out.png") == b"result bytes"
    assert lucent.download({"job_id": "x", "status": "COMPLETED", "res_url": f"{receiver.url}/r/2.png"}, tmp_path / "o") == str(tmp_path / "o")
    got = receiver.wait_for("/r/out.png") + receiver.wait_for("/r/2.png")
    assert all("apikey" not in {k.lower() for k in d.headers} for d in got)
    with pytest.raises(lc.LucentError):
        lucent.download({"job_id": "x", "status": "CONVERTING"})
