"""Hand-made hostile RFC 5322 messages (bytes), each named for what it breaks."""

from __future__ import annotations

import base64
from email.message import EmailMessage
from email.policy import SMTP

TEN_MB = 10 * 1024 * 1024


def _headers(n: str, extra: str = "") -> bytes:
    return (
        f"From: Ann <ann@example.org>\r\nTo: bo@example.org\r\nSubject: hostile {n}\r\n"
        f"Date: Tue, 05 Mar 2024 10:00:00 +0100\r\nMessage-ID: <{n}@hostile.example>\r\n{extra}"
    ).encode()


def broken_mime() -> bytes:
    """multipart/mixed whose boundary never appears, then a part with bad base64."""
    return _headers("broken-mime", 'MIME-Version: 1.0\r\nContent-Type: multipart/mixed; '
                    'boundary="NEVER-THERE"\r\n') + (
        b"\r\n--WRONG\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: base64\r\n\r\n"
        b"!!!not base64 at all%%%\r\nThe cache flush on the R10000 is broken.\r\n--WRONG--\r\n"
    )


def eight_bit_headers() -> bytes:
    """Raw Latin-1 and UTF-8 bytes in headers (no RFC 2047 encoding)."""
    return (
        b"From: Ren\xe9 Fran\xe7ois <rene@example.fr>\r\nTo: bo@example.org\r\n"
        b"Subject: R\xc3\xa9union caf\xc3\xa9 \xe0 Paris\r\n"
        b"Date: Tue, 05 Mar 2024 11:00:00 +0100\r\nMessage-ID: <eight-bit@hostile.example>\r\n"
        b"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n"
        b"Le caf\xc3\xa9 est pr\xc3\xaat.\r\n"
    )


def missing_date() -> bytes:
    return (
        b"From: ann@example.org\r\nSubject: no date here\r\nMessage-ID: <no-date@hostile.example>"
        b"\r\n\r\nThis message has no Date header.\r\n"
    )


def big_attachment() -> bytes:
    msg = EmailMessage(policy=SMTP)
    msg["From"], msg["To"] = "ann@example.org", "bo@example.org"
    msg["Subject"], msg["Message-ID"] = "the big log", "<big@hostile.example>"
    msg["Date"] = "Tue, 05 Mar 2024 12:00:00 +0000"
    msg.set_content("Log attached, 10 MB.")
    msg.add_attachment(b"x" * TEN_MB, maintype="application", subtype="octet-stream",
                       filename="huge.log")
    return msg.as_bytes()


def nested_rfc822() -> bytes:
    inner = EmailMessage(policy=SMTP)
    inner["From"], inner["Subject"] = "carol@example.org", "the original"
    inner["Message-ID"] = "<inner@hostile.example>"
    inner.set_content("Inner text that belongs to the forwarded message.")
    outer = EmailMessage(policy=SMTP)
    outer["From"], outer["To"] = "ann@example.org", "bo@example.org"
    outer["Subject"], outer["Message-ID"] = "Fwd: the original", "<outer@hostile.example>"
    outer["Date"] = "Tue, 05 Mar 2024 13:00:00 +0000"
    outer.set_content("See the forwarded mail.")
    outer.add_attachment(inner)
    return outer.as_bytes()


def html_only() -> bytes:
    html = ("<html><head><style>p{color:red}</style><script>alert(1)</script></head><body>"
            "<p>Hotel booking for the <b>conference</b> is confirmed.</p>"
            "<ul><li>Room 12</li><li>Three nights</li></ul></body></html>")
    return _headers("html-only", "MIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n"
                    "Content-Transfer-Encoding: base64\r\n") + b"\r\n" + base64.encodebytes(
        html.encode())


def empty() -> bytes:
    return b""


def not_mail() -> bytes:
    return b"\x00\x01\x02 binary junk without any header \xff\xfe\r\n\r\nbody?"


GOOD = {
    "broken-mime.eml": broken_mime,
    "eight-bit.eml": eight_bit_headers,
    "no-date.eml": missing_date,
    "big-attachment.eml": big_attachment,
    "nested.eml": nested_rfc822,
    "html-only.eml": html_only,
}
MALFORMED = {"empty.eml": empty, "not-mail.eml": not_mail}
