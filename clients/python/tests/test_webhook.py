"""Webhook verification: a real delivery of `lucent serve` (job.completed, signed with the key's secret printed by
`lucent keys create`) to a local receiver, verified by lucent_client.verify_webhook (the standardwebhooks
package); tampered bodies, other secrets, old timestamps and malformed headers refused; and the server's own
signing function (server/webhooks/signing.ts, run by node) against the verifier on a non-ASCII body."""
from __future__ import annotations

import base64
import json
import os
import subprocess
import time

import pytest

import lucent_client as lc
from conftest import NODE, ROOT, Key, Receiver, Server, png


def test_real_delivery_verifies(server: Server, key: Key, receiver: Receiver) -> None:
    with lc.Client(server.base, key.key) as lucent:
        up = lucent.upload(png(8, 8), filename="w.png")
        job = lucent.submit_photo("general_2x", up["url"], ".png", callback_url=f"{receiver.url}/hook")
        lucent.wait(job["job_id"], poll_interval=0.05)
        got = receiver.wait_for("/hook")[0]
        event = lc.verify_webhook(key.secret, got.headers, got.body)
        assert event["type"] == "job.completed"
        assert event["data"]["job_id"] == job["job_id"] and event["data"]["status"] == "COMPLETED"
        assert got.headers["webhook-id"] == f"msg_{job['job_id']}_end"
        # the same event through str body and differently-cased headers
        assert lc.verify_webhook(key.secret, {k.upper(): v for k, v in got.headers.items()}, got.body.decode())["type"] == "job.completed"
        deliveries = lucent.deliveries(job_id=job["job_id"])
        assert deliveries and deliveries[0]["event"] == "job.completed"
        assert set(deliveries[0]) == set(lc.Delivery.__annotations__), "the Delivery TypedDict is the answer's shape"

        def refused(headers=got.headers, body=got.body, secret=key.secret, **kw) -> None:
            with pytest.raises(lc.WebhookVerificationError) as e:
                lc.verify_webhook(secret, headers, body, **kw)
            assert isinstance(e.value, lc.LucentError)

        refused(body=got.body.replace(job["job_id"].encode(), b"0" * 32))
        refused(secret="whsec_" + base64.b64encode(os.urandom(24)).decode())
        refused(headers={**got.headers, "webhook-id": "msg_other"})
        refused(headers={**got.headers, "webhook-signature": "v2," + got.headers["webhook-signature"].split(",", 1)[1]})
        refused(headers={**got.headers, "webhook-signature": "garbage"})
        refused(headers={k: v for k, v in got.headers.items() if k.lower() != "webhook-timestamp"})
        refused(secret="whsec_")
        refused(body=b"\xff\xfe not UTF-8")
        # a replay of an old delivery: re-signed correctly, but an hour old
        old = int(time.time()) - 3600
        sig = lc.sign_webhook(key.secret, got.headers["webhook-id"], old, got.body)
        refused(headers={**got.headers, "webhook-timestamp": str(old), "webhook-signature": sig})
        # a narrower window than the package's 5 minutes
        now = int(time.time()) - 120
        sig = lc.sign_webhook(key.secret, got.headers["webhook-id"], now, got.body)
        h2 = {**got.headers, "webhook-timestamp": str(now), "webhook-signature": sig}
        assert lc.verify_webhook(key.secret, h2, got.body)["type"] == "job.completed"
        refused(headers=h2, tolerance=60)


def test_server_signing_function(key: Key) -> None:
    body = json.dumps({"type": "job.progress", "data": {"message": "Größe ✓ 🖼"}}, ensure_ascii=False)
    script = ("import { webhookHeaders } from './server/webhooks/signing.ts';"
              "process.stdout.write(JSON.stringify(webhookHeaders(process.argv[1], process.argv[2], process.argv[3])))")
    out = subprocess.run([NODE, "--import", "tsx", "--input-type=module", "-e", script, key.secret, "msg_py_1", body],
                         cwd=str(ROOT), check=True, capture_output=True, text=True).stdout
    headers = json.loads(out)
    assert lc.verify_webhook(key.secret, headers, body.encode("utf-8"))["data"]["message"] == "Größe ✓ 🖼"
    assert headers["webhook-signature"] == lc.sign_webhook(key.secret, "msg_py_1", int(headers["webhook-timestamp"]), body)
