"""Did the server ask for a client certificate, and did we send one? Read from the records.

Python's ``ssl`` does not say whether the server sent a CertificateRequest (the message
callback that would is private). The bytes of the handshake do, without decrypting
anything, and we already carry every one of them through the stamping stream:

- TLS 1.2 and older: the server's CertificateRequest (handshake type 13) and our
  Certificate (type 11) travel in clear, before ChangeCipherSpec. Our Certificate with an
  empty list means none was sent.
- TLS 1.3: both are encrypted, but OpenSSL writes each handshake message of the client's
  second flight as a record of its own (checked with OpenSSL 3.0: one record per
  message, no padding). So the encrypted records we send during the handshake count the
  messages: Finished alone (not asked), empty Certificate + Finished (asked, none sent),
  Certificate + CertificateVerify + Finished (asked, sent). Any other count is reported
  as unknown rather than guessed.

Pure functions over bytes: no socket, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

_CHANGE_CIPHER_SPEC = 20
_HANDSHAKE = 22
_APPLICATION_DATA = 23
_CERTIFICATE = 11
_CERTIFICATE_REQUEST = 13

#: Encrypted records a TLS 1.3 client sends in its second flight -> (asked, sent).
_TLS13_FLIGHTS: dict[int, tuple[bool, bool]] = {
    1: (False, False),
    2: (True, False),
    3: (True, True),
}


@dataclass(frozen=True, slots=True)
class ClientAuth:
    """What the handshake showed about client authentication."""

    requested: bool | None  # the server sent a CertificateRequest; None: cannot tell
    sent: bool | None  # we answered with a certificate (not an empty list); None: cannot
    # tell, or the handshake ended before our answer left


@dataclass(slots=True)
class HandshakeTap:
    """The bytes both ways while a handshake runs (the stamping stream appends to it)."""

    sent: bytearray = field(default_factory=bytearray)
    received: bytearray = field(default_factory=bytearray)

    def client_auth(self, version: str | None) -> ClientAuth:
        """What these bytes say, for a handshake that negotiated ``version``
        (``"TLSv1.3"``, ``"TLSv1.2"``; None for one that failed before it was known)."""
        received = bytes(self.received)
        # A failed handshake has no version: a TLS 1.3 server encrypts from its second
        # record on, which a TLS 1.2 server never does before ChangeCipherSpec.
        if version == "TLSv1.3" or (
            version is None and any(t == _APPLICATION_DATA for t, _ in _records(received))
        ):
            return _tls13(bytes(self.sent))
        theirs = _messages(received)
        if not theirs:  # no server flight to read
            return ClientAuth(requested=None, sent=None)
        requested = any(t == _CERTIFICATE_REQUEST for t, _ in theirs)
        ours = [body for t, body in _messages(bytes(self.sent)) if t == _CERTIFICATE]
        if not ours:  # asked, but the handshake ended before our answer: None
            return ClientAuth(requested=requested, sent=None if requested else False)
        # The certificate list's 3-byte length: zero is the empty answer.
        return ClientAuth(requested=requested, sent=ours[0][:3] != b"\x00\x00\x00")


def _records(data: bytes) -> list[tuple[int, bytes]]:
    """(content type, payload) of each whole record in ``data``, in order."""
    out: list[tuple[int, bytes]] = []
    i = 0
    while i + 5 <= len(data):
        length = int.from_bytes(data[i + 3 : i + 5], "big")
        if i + 5 + length > len(data):
            break
        out.append((data[i], data[i + 5 : i + 5 + length]))
        i += 5 + length
    return out


def _messages(data: bytes) -> list[tuple[int, bytes]]:
    """(type, body) of the handshake messages sent in clear, up to ChangeCipherSpec
    (after it they are encrypted). A message may span records."""
    stream = bytearray()
    for content_type, payload in _records(data):
        if content_type == _CHANGE_CIPHER_SPEC:
            break
        if content_type == _HANDSHAKE:
            stream += payload
    out: list[tuple[int, bytes]] = []
    i = 0
    while i + 4 <= len(stream):
        length = int.from_bytes(stream[i + 1 : i + 4], "big")
        out.append((stream[i], bytes(stream[i + 4 : i + 4 + length])))
        i += 4 + length
    return out


def _tls13(sent: bytes) -> ClientAuth:
    encrypted = sum(1 for t, _ in _records(sent) if t == _APPLICATION_DATA)
    requested, answered = _TLS13_FLIGHTS.get(encrypted, (None, None))
    return ClientAuth(requested=requested, sent=answered)


__all__ = ["ClientAuth", "HandshakeTap"]
