"""The TypedDicts of lucent_client.types hold the fields of the TypeScript client's wire types
(clients/typescript/src/types.ts, which test/client/types.ts checks against the server's schemas both ways), so the
two clients cannot drift apart; and the answers of a real server carry no field the TypedDicts lack."""
from __future__ import annotations

import re
import typing

import pytest

import lucent_client as lc
from lucent_client import types as T
from conftest import ROOT, Key, Server, png

TS = (ROOT / "clients" / "typescript" / "src" / "types.ts").read_text()


def ts_fields(name: str) -> typing.Dict[str, bool]:
    """Top-level fields of `export interface <name> { ... }`: name -> optional."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", "", TS, flags=re.S)
    m = re.search(r"export interface " + name + r"\b[^{]*\{", text)
    assert m, f"no interface {name} in types.ts"
    depth, i, body = 1, m.end(), []
    while depth:
        c = text[i]
        depth += c in "{[(<"
        depth -= c in "}])>"
        body.append(c if depth == 1 else " ")  # nested types blanked: their fields are not this one's
        i += 1
    flat = "".join(body)
    return {f: bool(q) for f, q in re.findall(r"(?:^|[;\n,])\s*([A-Za-z_]\w*)(\?)?\s*:", flat)}


def py_fields(td: type) -> typing.Dict[str, bool]:
    hints = typing.get_type_hints(td, include_extras=True)
    return {k: k in td.__optional_keys__ or "NotRequired" in str(v) for k, v in hints.items()}


@pytest.mark.parametrize("td", [T.JobCreated, T.OutputPut, T.TaskStatus, T.LedgerRow, T.Account, T.ModelInfo, T.Models,
                                T.Presigned, T.Stored], ids=lambda t: t.__name__)
def test_same_fields_as_the_typescript_client(td: type) -> None:
    assert py_fields(td) == ts_fields(td.__name__)


def test_real_answers_have_no_unknown_fields(server: Server, key: Key) -> None:
    with lc.Client(server.base, key.key) as lucent:
        up = lucent.upload(png(8, 8), filename="t.png")
        assert set(up) <= set(py_fields(T.Stored))
        job = lucent.submit_photo("general_2x", up["url"], ".png", scale=1.5)
        assert set(job) <= set(py_fields(T.JobCreated))
        done = lucent.wait(job["job_id"], poll_interval=0.05)
        assert set(done) <= set(py_fields(T.TaskStatus))
        acct = lucent.account(ledger=3)
        assert set(acct) <= set(py_fields(T.Account)) and set(acct["ledger"][0]) <= set(py_fields(T.LedgerRow))
        models = lucent.models()
        assert set(models) == set(py_fields(T.Models))
        assert all(set(m) <= set(py_fields(T.ModelInfo)) for m in models["models"])
