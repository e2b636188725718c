"""permessage-deflate (RFC 7692) whose inflation stops at the message cap, sans-IO.

wsproto's ``PerMessageDeflate`` inflates each piece of a frame's payload whole: 64 KiB
of a deflate bomb became ~64 MB in one call, and a run held ~280 MB before the 16 MiB
message cap refused the message. This extension keeps wsproto's negotiation and its
compression of what we send (both public API) and inflates what arrives itself, never
more than the cap allows for the message so far: past it, the message is refused with
1009 (message too big), as RFC 6455 §7.4.1 names it.

One difference from wsproto's on purpose: a control frame between the fragments of a
compressed message (RFC 6455 §5.4 allows one) does not end the message's compression.
"""

from __future__ import annotations

import zlib

from wsproto.extensions import PerMessageDeflate
from wsproto.frame_protocol import CloseReason, FrameDecoder, FrameProtocol, Opcode, RsvBits

_DATA = (Opcode.TEXT, Opcode.BINARY, Opcode.CONTINUATION)
#: RFC 7692 §7.2.2: the tail a sender removed from each message, put back to inflate it.
_TAIL = b"\x00\x00\xff\xff"


class BoundedDeflate(PerMessageDeflate):
    """permessage-deflate, each message inflated to at most ``max_message`` bytes."""

    def __init__(self, max_message: int) -> None:
        super().__init__()
        self.max_message = max_message
        self._inflater: zlib._Decompress | None = None
        self._data_frame = False  # the frame being read is a data frame
        self._message: bool | None = None  # the message is compressed (None: between)
        self._inflated = 0  # bytes the message has inflated to so far

    def frame_inbound_header(
        self,
        proto: FrameDecoder | FrameProtocol,
        opcode: Opcode,
        rsv: RsvBits,
        payload_length: int,
    ) -> CloseReason | RsvBits:
        if rsv.rsv1 and (opcode.iscontrol() or opcode is Opcode.CONTINUATION):
            return CloseReason.PROTOCOL_ERROR  # RFC 7692 §6: RSV1 on a first frame only
        self._data_frame = opcode in _DATA
        if self._data_frame and self._message is None:
            self._message, self._inflated = rsv.rsv1, 0
            if rsv.rsv1 and self._inflater is None:
                bits = self.server_max_window_bits if proto.client else self.client_max_window_bits
                self._inflater = zlib.decompressobj(-int(bits))
        return RsvBits(True, False, False)

    def frame_inbound_payload_data(
        self, proto: FrameDecoder | FrameProtocol, data: bytes
    ) -> bytes | CloseReason:
        if not (self._data_frame and self._message):
            return data
        return self._inflate(bytes(data))

    def frame_inbound_complete(
        self, proto: FrameDecoder | FrameProtocol, fin: bool
    ) -> bytes | CloseReason | None:
        if not (self._data_frame and fin):
            return None  # a control frame, or a fragment the message goes on after
        compressed, self._message = self._message, None
        if not compressed:
            return None
        out = self._inflate(_TAIL)
        if self.server_no_context_takeover if proto.client else self.client_no_context_takeover:
            self._inflater = None
        return out

    def _inflate(self, data: bytes) -> bytes | CloseReason:
        inflater = self._inflater
        if inflater is None:
            return CloseReason.PROTOCOL_ERROR
        # One byte past the cap is enough to know the message is too big.
        room = self.max_message - self._inflated + 1
        try:
            out = inflater.decompress(data, room)
        except zlib.error:
            return CloseReason.INVALID_FRAME_PAYLOAD_DATA
        self._inflated += len(out)
        if self._inflated > self.max_message:
            return CloseReason.MESSAGE_TOO_BIG
        return out


__all__ = ["BoundedDeflate"]
