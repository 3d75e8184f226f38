"""An upstream that breaks HTTP on purpose, to test how Gym servers answer when a peer's reply is broken.

Started as a real subprocess (see tests/helpers.py `run_server`): it binds 127.0.0.1 on an OS-chosen port
and writes {"host", "port", "pid"} to the file named by NEMO_GYM_BOUND_ADDRESS_FILE, as Gym servers do.

It speaks raw bytes over asyncio streams, since a proper HTTP server cannot send broken HTTP. Which fault
a request gets is named by a `fault:<name>` marker anywhere in its request line or body: in the path
(`/fault:stall/v1`, usable as a base URL) or in a prompt's text, which every model server passes upstream.
A request without a marker gets a well-formed JSON answer.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson

FAULT_MARKER = re.compile(rb"fault:([a-z_]+)")
# Bounds on what a test can make this server do, so nothing it starts runs on forever.
STALL_S = 60.0
DRIP_BYTES = 60
READ_TIMEOUT_S = 10.0
JSON_BODY = b'{"object": "response", "id": "resp_faulty"}'

Fault = Callable[[asyncio.StreamWriter], Awaitable[None]]


def head(status_line: str, *headers: str) -> bytes:
    """A response head; every connection serves one request, and says so."""
    return ("\r\n".join([status_line, *headers, "Connection: close"]) + "\r\n\r\n").encode()


async def closed_mid_body(writer: asyncio.StreamWriter) -> None:
    """Promises 1000 bytes, sends a few, closes."""
    writer.write(head("HTTP/1.1 200 OK", "Content-Type: application/json", "Content-Length: 1000"))
    writer.write(b'{"object": "resp')


async def not_http(writer: asyncio.StreamWriter) -> None:
    writer.write(b"\x00\x17SSH-2.0 certainly not HTTP\r\n\r\n")


async def bad_chunked(writer: asyncio.StreamWriter) -> None:
    """A chunk size that is not hexadecimal, sent with the head in one write so the client's parser meets
    it while reading the head (aiohttp's C parser never reports it if it comes in a later read)."""
    chunked = head("HTTP/1.1 200 OK", "Content-Type: application/json", "Transfer-Encoding: chunked")
    writer.write(chunked + b'4\r\n{"ob\r\nzz\r\nject\r\n0\r\n\r\n')


async def chunked_cut_short(writer: asyncio.StreamWriter) -> None:
    """A chunk that promises 16 bytes, 3 of them sent, then the connection closed."""
    writer.write(head("HTTP/1.1 200 OK", "Content-Type: application/json", "Transfer-Encoding: chunked"))
    await writer.drain()
    writer.write(b'10\r\n{"o')


async def stall(writer: asyncio.StreamWriter) -> None:
    """Headers, part of the body, then nothing (until the client gives up or STALL_S passes)."""
    writer.write(
        head("HTTP/1.1 200 OK", "Content-Type: application/json", f"Content-Length: {len(JSON_BODY)}")
    )
    writer.write(JSON_BODY[:5])
    await writer.drain()
    await asyncio.sleep(STALL_S)


async def drip(writer: asyncio.StreamWriter) -> None:
    """A body of DRIP_BYTES sent one byte a second: always moving, never done within a short deadline."""
    body = b" " * (DRIP_BYTES - 2) + b"{}"
    writer.write(head("HTTP/1.1 200 OK", "Content-Type: application/json", f"Content-Length: {len(body)}"))
    for index in range(len(body)):
        writer.write(body[index : index + 1])
        await writer.drain()
        await asyncio.sleep(1.0)


async def not_json(writer: asyncio.StreamWriter) -> None:
    body = b"<html><body>502 Bad Gateway, but said with a 200</body></html>"
    writer.write(head("HTTP/1.1 200 OK", "Content-Type: text/html", f"Content-Length: {len(body)}"))
    writer.write(body)


async def well_formed(writer: asyncio.StreamWriter) -> None:
    writer.write(
        head("HTTP/1.1 200 OK", "Content-Type: application/json", f"Content-Length: {len(JSON_BODY)}")
    )
    writer.write(JSON_BODY)


FAULTS: dict[bytes, Fault] = {
    b"closed_mid_body": closed_mid_body,
    b"not_http": not_http,
    b"bad_chunked": bad_chunked,
    b"chunked_cut_short": chunked_cut_short,
    b"stall": stall,
    b"drip": drip,
    b"not_json": not_json,
}


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """The request line and the body (headers are only read for Content-Length)."""
    raw_head = await reader.readuntil(b"\r\n\r\n")  # at most the reader's 64 KiB limit
    request_line, *header_lines = raw_head.split(b"\r\n")
    length = 0
    for line in header_lines:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    return request_line + b"\n" + await reader.readexactly(length)


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One request per connection: the fault it names (or a good answer), then the connection is closed."""
    try:
        request = await asyncio.wait_for(read_request(reader), READ_TIMEOUT_S)
        marker = FAULT_MARKER.search(request)
        fault = FAULTS.get(marker.group(1), well_formed) if marker else well_formed
        await fault(writer)
        await writer.drain()
    except (TimeoutError, OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        pass  # the client went away or sent nonsense: nothing to answer
    finally:
        writer.close()


async def main() -> None:
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    host, port = server.sockets[0].getsockname()[:2]
    target = Path(os.environ["NEMO_GYM_BOUND_ADDRESS_FILE"])
    Path(f"{target}.tmp").write_bytes(orjson.dumps({"host": host, "port": port, "pid": os.getpid()}))
    Path(f"{target}.tmp").replace(target)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
