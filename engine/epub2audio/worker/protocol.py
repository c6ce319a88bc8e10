"""Messages across the worker pipe: a JSON header, optionally followed by a binary payload.

Frame: 4-byte big-endian header length, the UTF-8 JSON header, then `payload` bytes if the header
says so. Requests are small (text and a seed); audio comes back as raw PCM bytes, never as JSON.
"""

from __future__ import annotations

import json
import struct
from typing import BinaryIO

_LEN = struct.Struct(">I")
MAX_HEADER = 16 * 1024 * 1024


class ProtocolError(Exception):
    """The other side sent something that is not a frame, or went away mid-frame."""


def send(stream: BinaryIO, header: dict, payload: bytes = b"") -> None:
    if payload:
        header = {**header, "payload": len(payload)}
    data = json.dumps(header, separators=(",", ":")).encode()
    stream.write(_LEN.pack(len(data)) + data + payload)
    stream.flush()


def receive(stream: BinaryIO) -> tuple[dict, bytes] | None:
    """The next frame, or None at a clean end of stream."""
    head = stream.read(_LEN.size)
    if not head:
        return None
    if len(head) != _LEN.size:
        raise ProtocolError("stream ended inside a frame length")
    (size,) = _LEN.unpack(head)
    if size > MAX_HEADER:
        raise ProtocolError(f"frame header of {size} bytes is not plausible")
    header = json.loads(_read_exactly(stream, size))
    payload = _read_exactly(stream, header["payload"]) if header.get("payload") else b""
    return header, payload


def _read_exactly(stream: BinaryIO, size: int) -> bytes:
    chunks, remaining = [], size
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            raise ProtocolError("stream ended inside a frame")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
