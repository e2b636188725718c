"""What Linux's error queue hands a socket with ``IP_RECVERR`` (``IPV6_RECVERR``), parsed.

An ordinary socket with the option receives, on ``recvmsg(MSG_ERRQUEUE)``, the ICMP errors
its own packets caused: a ``struct sock_extended_err`` (linux/errqueue.h) with the errno,
where it came from (a router's ICMP, or this host itself), the ICMP type and code and
``ee_info`` (the MTU, for "fragmentation needed" and for a send this host refused as too
big), then the sender's address (``SO_EE_OFFENDER``). Checked on the lab chain with an
1100-byte link: a 1200-byte DF datagram brought (EMSGSIZE, origin ICMP, type 3, code 4,
ee_info 1100) from the router before that link; a second one sent with
``IP_PMTUDISC_DO`` failed in send() and queued (EMSGSIZE, origin local, ee_info 1100).
Pure but for the option numbers.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

IP_RECVERR = 11  # linux/in.h
IPV6_RECVERR = 25  # linux/in6.h
SO_EE_ORIGIN_LOCAL, SO_EE_ORIGIN_ICMP, SO_EE_ORIGIN_ICMP6 = 1, 2, 3
_EE = struct.Struct("=IBBBBII")  # struct sock_extended_err
#: ICMP "fragmentation needed" (type 3 code 4) and ICMPv6 "packet too big" (type 2, any
#: code): the datagram does not fit the next link; the message carries that link's MTU.
FRAG_NEEDED: dict[int, tuple[int, int | None]] = {
    socket.AF_INET: (3, 4),
    socket.AF_INET6: (2, None),
}


def recverr_option(family: int) -> tuple[int, int]:
    """The (level, option) that turns the error queue on for ``family``."""
    if family == socket.AF_INET6:
        return socket.IPPROTO_IPV6, IPV6_RECVERR
    return socket.IPPROTO_IP, IP_RECVERR


def too_big(family: int, icmp: tuple[int, int] | None) -> bool:
    """Whether an ICMP (type, code) says the datagram did not fit the path."""
    if icmp is None:
        return False
    wanted, code = FRAG_NEEDED.get(family, (-1, None))
    return icmp[0] == wanted and (code is None or icmp[1] == code)


@dataclass(frozen=True, slots=True)
class QueuedError:
    """One error-queue message: who sent the ICMP, its type/code, and ``ee_info``."""

    responder: str | None
    icmp: tuple[int, int] | None  # None: raised by this host (origin local)
    info: int
    errno: int


def queued_error(ancillary: list[tuple[int, int, bytes]]) -> QueuedError | None:
    """The ``sock_extended_err`` in one error-queue message's ancillary data, with the
    router's address after it; None when there is none."""
    for _level, _type, data in ancillary:
        if len(data) < _EE.size:
            continue
        err, origin, icmp_type, icmp_code, _pad, info, _data = _EE.unpack(data[: _EE.size])
        if origin == SO_EE_ORIGIN_LOCAL:
            return QueuedError(responder=None, icmp=None, info=info, errno=err)
        if origin not in (SO_EE_ORIGIN_ICMP, SO_EE_ORIGIN_ICMP6):
            continue
        offender = data[_EE.size :]
        family = struct.unpack("=H", offender[:2])[0] if len(offender) >= 2 else 0
        responder = None
        if family == socket.AF_INET and len(offender) >= 8:
            responder = socket.inet_ntop(socket.AF_INET, offender[4:8])
        elif family == socket.AF_INET6 and len(offender) >= 24:
            responder = socket.inet_ntop(socket.AF_INET6, offender[8:24])
        return QueuedError(responder=responder, icmp=(icmp_type, icmp_code), info=info, errno=err)
    return None
