"""POST /v1/documents:upload: a PDF, DOCX, HTML, email or mailbox file sent as the body, converted as
`crossroads ingest` converts it and indexed with the groups the request names; a hostile or unknown file
is a 4xx with the reason, never a 500 (fixtures/formats/ holds the samples)."""
from __future__ import annotations

import io
import uuid
import zipfile

import pytest
from fastapi.testclient import TestClient

from api import tokens
from api.http.app import create_app
from api.usecases import UPLOAD_TYPES
from tests.conftest import FIXTURES

TENANT = f"upload_{uuid.uuid4().hex[:8]}"
PROBLEM = "application/problem+json"
PDF, DOCX = "application/pdf", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def sample(name: str) -> bytes:
    return (FIXTURES / "formats" / name).read_bytes()


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def client(db, settings, local_embedder):
    small = settings.model_copy(update={"max_document_bytes": 200_000})
    with TestClient(create_app(small, db, embedder=local_embedder), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture(scope="module")
def tok(db):
    spec = {"writer": (["hr", "staff"], "writer"), "staff_writer": (["staff"], "writer"),
            "staff": (["staff"], "reader"), "hr": (["hr"], "reader")}
    with db.connection() as conn:
        return {name: tokens.create_token(conn, TENANT, groups, role, name)[0] for name, (groups, role) in spec.items()}


def upload(client, token, doc_id, data, media_type, acl=("hr",), **params):
    return client.post("/v1/documents:upload", params={"doc_id": doc_id, "acl": list(acl), **params},
                       content=data, headers={**bearer(token), "Content-Type": media_type})


def problem(r, status: int) -> dict:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith(PROBLEM)
    assert "Traceback" not in r.text
    return r.json()


def test_an_uploaded_pdf_is_found_only_by_readers_of_its_groups(client, tok):
    r = upload(client, tok["writer"], "reports/q3.pdf", sample("report.pdf"), PDF)
    assert r.status_code == 201, r.text
    assert r.json()["status"] == "added" and r.json()["chunks"]["added"] >= 1
    document = client.get("/v1/documents/reports/q3.pdf", headers=bearer(tok["hr"])).json()
    assert document["title"] == "Quarterly Freight Report"
    assert "Berlin 1240 97%" in "\n".join(c["text"] for c in document["chunks"])

    def found(token) -> set[str]:
        r = client.post("/v1/search", json={"query": "freight shipments by office Berlin", "k": 5, "min_score": None},
                        headers=bearer(token))
        assert r.status_code == 200, r.text
        return {h["doc_id"] for h in r.json()["hits"]}

    assert "reports/q3.pdf" in found(tok["hr"])
    assert "reports/q3.pdf" not in found(tok["staff"])
    problem(client.get("/v1/documents/reports/q3.pdf", headers=bearer(tok["staff"])), 404)
    # the same bytes again cost nothing, as a PUT of unchanged text
    again = upload(client, tok["writer"], "reports/q3.pdf", sample("report.pdf"), PDF)
    assert again.status_code == 200 and again.json()["status"] == "unchanged"


@pytest.mark.parametrize("name, media_type, phrase", [
    ("handbook.docx", DOCX, "Wear a helmet"),
    ("checklist.html", "text/html; charset=utf-8", "Kazakhstan"),
    ("delay.eml", "message/rfc822", "LX-204"),
])
def test_each_format_is_read_by_its_media_type(client, tok, name, media_type, phrase):
    r = upload(client, tok["writer"], f"formats/{name}", sample(name), media_type, acl=["staff"], title="Given title")
    assert r.status_code == 201, r.text
    document = client.get(f"/v1/documents/formats/{name}", headers=bearer(tok["staff"])).json()
    assert document["title"] == "Given title" and document["acl"] == ["staff"]
    assert phrase in "\n".join(c["text"] for c in document["chunks"])


def _scanned_pdf() -> bytes:
    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(595, 842)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _zip_bomb_docx() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(sample("handbook.docx"))) as real, \
            zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bomb:
        for item in real.infolist():
            bomb.writestr(item, real.read(item))
        bomb.writestr("word/media/bomb.bin", b"\0" * 30_000_000)  # ~30 KB on the wire
    return out.getvalue()


@pytest.mark.parametrize("make, media_type, reason", [
    (_scanned_pdf, PDF, "no text layer: scanned PDF? OCR it first"),
    (lambda: sample("report.pdf")[:4000], PDF, "truncated or damaged"),
    (lambda: sample("checklist.html"), PDF, "truncated or damaged"),  # the wrong content type for the bytes
    (_zip_bomb_docx, DOCX, "zip bomb"),
    (lambda: b"   ", PDF, "empty"),
])
def test_hostile_files_are_422_with_the_reason_and_nothing_indexed(client, tok, make, media_type, reason):
    doc_id = f"bad/{uuid.uuid4().hex[:6]}"
    body = problem(upload(client, tok["writer"], doc_id, make(), media_type), 422)
    assert reason in body["detail"], body
    problem(client.get(f"/v1/documents/{doc_id}", headers=bearer(tok["hr"])), 404)


@pytest.mark.parametrize("media_type", ["application/octet-stream", "image/png", "text/markdown", None])
def test_unsupported_media_types_are_415_naming_the_accepted_ones(client, tok, media_type):
    headers = bearer(tok["writer"]) if media_type is None else {**bearer(tok["writer"]), "Content-Type": media_type}
    r = client.post("/v1/documents:upload", params={"doc_id": "x.bin", "acl": ["hr"]}, content=b"\x89PNG",
                    headers=headers)
    body = problem(r, 415)
    assert body["accepted"] == list(UPLOAD_TYPES) and "PUT /v1/documents" in body["detail"]


def test_request_limits_acl_and_roles(client, tok):
    body = problem(upload(client, tok["writer"], "big.pdf", b"%PDF" + b"0" * 200_001, PDF), 413)
    assert "CROSSROADS_MAX_DOCUMENT_BYTES" in body["detail"]
    body = problem(upload(client, tok["writer"], "blank-acl.pdf", sample("report.pdf"), PDF, acl=["  "]), 422)
    assert body["errors"][0]["field"] == "acl"
    r = client.post("/v1/documents:upload", params={"doc_id": "no-acl.pdf"}, content=sample("report.pdf"),
                    headers={**bearer(tok["writer"]), "Content-Type": PDF})
    assert problem(r, 422)["errors"][0]["field"] == "acl"
    problem(upload(client, tok["writer"], " padded.pdf", sample("report.pdf"), PDF), 422)
    problem(upload(client, tok["hr"], "reader.pdf", sample("report.pdf"), PDF), 403)
    # a writer whose groups cannot read an existing document cannot replace it, as with PUT
    assert upload(client, tok["writer"], "hr/only.pdf", sample("report.pdf"), PDF).status_code == 201
    problem(upload(client, tok["staff_writer"], "hr/only.pdf", sample("report.pdf"), PDF, acl=["staff"]), 404)

