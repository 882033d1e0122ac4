"""A SOCKS5 proxy on 127.0.0.1 for tests: no authentication, CONNECT only, every host
name sent to 127.0.0.1 (so a made-up name proves the request went through the proxy)."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import struct
import threading
from collections.abc import Iterator


class _Socks5(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        client: socket.socket = self.request
        version, methods = client.recv(2)
        client.recv(methods)
        if version != 5:
            return
        client.sendall(b"\x05\x00")  # no authentication
        _, command, _, kind = client.recv(4)
        if kind == 3:  # a host name: the proxy resolves it (here, to this machine)
            client.recv(client.recv(1)[0])
        else:
            client.recv(4 if kind == 1 else 16)
        (port,) = struct.unpack("!H", client.recv(2))
        if command != 1:  # only CONNECT
            client.sendall(b"\x05\x07\x00\x01" + bytes(6))
            return
        upstream = socket.create_connection(("127.0.0.1", port))
        self.server.connections.append(f"CONNECT {port}")  # type: ignore[attr-defined]
        client.sendall(b"\x05\x00\x00\x01" + socket.inet_aton("127.0.0.1") + struct.pack("!H", 0))
        pump = threading.Thread(target=_copy, args=(upstream, client), daemon=True)
        pump.start()
        _copy(client, upstream)
        pump.join(timeout=5)


def _copy(source: socket.socket, target: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            target.sendall(data)
    with contextlib.suppress(OSError):
        target.shutdown(socket.SHUT_WR)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Socks5)
        self.connections: list[str] = []


@contextlib.contextmanager
def socks5_proxy() -> Iterator[_Server]:
    """A running proxy; its URL is socks5://127.0.0.1:<server.server_address[1]>."""
    server = _Server()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
