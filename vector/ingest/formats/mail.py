"""Email (.eml) and mailboxes (.mbox) -> Markdown with the standard `email` package: each message a
'# Subject' section with its From, To and Date lines and its body (the plain-text part, else the HTML
part converted), and the names of its attachments. Attachments are listed, not read.

The parser is lenient by design: malformed MIME yields what can be read. A part in an unknown or
wrong charset is decoded with replacement characters rather than dropped."""
from __future__ import annotations

import email
import email.policy
import re

from core.errors import BadDocument

# mbox separator lines; a body line starting with "From " was written as ">From " (mboxrd)
_MBOX_SEPARATOR = re.compile(rb"^From [^\n]*\n", re.MULTILINE)
_MBOX_QUOTED_FROM = re.compile(rb"^>(>*From )", re.MULTILINE)


def read_email(data: bytes, max_bytes: int):
    from vector.ingest.formats.converted import Converted

    message = _parse(data)
    subject = _header(message, "subject")
    return Converted(subject or None, _message_markdown(message, subject))


def read_mbox(data: bytes, max_bytes: int):
    from vector.ingest.formats.converted import Converted

    raw_messages = [m for m in _MBOX_SEPARATOR.split(data.replace(b"\r\n", b"\n")) if m.strip()]
    if not raw_messages or not data.startswith(b"From "):
        raise BadDocument("not a mailbox: an mbox file starts with a 'From ' line; save single messages as .eml")
    sections = []
    for raw in raw_messages:
        message = _parse(_MBOX_QUOTED_FROM.sub(rb"\1", raw))
        sections.append(_message_markdown(message, _header(message, "subject")))
    return Converted(None, "\n".join(sections))


def _parse(data: bytes):
    return email.message_from_bytes(data, policy=email.policy.default)


def _header(message, name: str) -> str:
    try:
        value = message.get(name)
    except Exception:  # a header the policy cannot parse (bad encoded-word, broken address)
        value = message.get_all(name, failobj=[""])[0] if hasattr(message, "get_all") else ""
    return " ".join(str(value or "").split())


def _message_markdown(message, subject: str) -> str:
    lines = [f"# {subject or '(no subject)'}", ""]
    for name in ("from", "to", "date"):
        if value := _header(message, name):
            lines.append(f"{name.capitalize()}: {value}")
    lines += ["", _body(message)]
    attachments = [_attachment_name(part) for part in _attachments(message)]
    if attachments:
        lines += ["", "Attachments: " + ", ".join(attachments)]
    return "\n".join(lines).strip() + "\n"


def _body(message) -> str:
    from vector.ingest.formats.web import decode_html, html_markdown

    part = message.get_body(preferencelist=("plain", "html")) if message.is_multipart() else message
    if part is None or part.get_content_maintype() != "text":
        return ""
    payload = part.get_payload(decode=True) or b""
    charset = part.get_content_charset()
    if part.get_content_subtype() == "html":
        from lxml import html

        try:
            return html_markdown(html.document_fromstring(decode_html(payload, charset)))
        except Exception:  # an HTML part with no text, or none parseable: the message keeps its headers
            return ""
    return _decode(payload, charset)


def _decode(payload: bytes, charset: str | None) -> str:
    for candidate in (charset, "utf-8"):
        if candidate:
            try:
                return payload.decode(candidate)
            except (LookupError, UnicodeDecodeError):  # an unknown charset name, or a part that lies about it
                continue
    from charset_normalizer import from_bytes

    guess = from_bytes(payload[:65536]).best()
    return payload.decode(guess.encoding if guess else "utf-8", "replace")


def _attachments(message):
    try:
        return list(message.iter_attachments()) if message.is_multipart() else []
    except Exception:  # a malformed multipart: the body still counts
        return []


def _attachment_name(part) -> str:
    name = part.get_filename() or "(unnamed)"
    return f"{' '.join(name.split())} ({part.get_content_type()})"
