"""A TCP proxy in front of PostgreSQL that can lose a COMMIT's answer.

Armed, it forwards a client's COMMIT to the server, reads the server's answer (the transaction is
committed by then) and closes the client's connection instead of passing the answer on: exactly
what a connection lost after the server committed looks like to the client. Everything else is
relayed unchanged. The proxied URL disables SSL and GSS encryption so the protocol can be read.
"""

from __future__ import annotations

import socket
import struct
import threading
from contextlib import suppress

import sqlalchemy as sa

_SPECIAL_REQUESTS = {80877103, 80877104}  # SSLRequest, GSSENCRequest


def _read_exact(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _read_message(sock: socket.socket) -> tuple[bytes, bytes]:
    """One typed protocol message: (type byte, whole message bytes)."""
    header = _read_exact(sock, 5)
    length = struct.unpack("!I", header[1:])[0]
    return header[:1], header + _read_exact(sock, length - 4)


def _query_text(kind: bytes, message: bytes) -> bytes:
    if kind == b"Q":  # simple query: the text follows the header
        return message[5:].rstrip(b"\0").strip().upper()
    if kind == b"P":  # extended protocol Parse: statement name, then the query text
        return message[5:].split(b"\0")[1].strip().upper()
    return b""


def _is_commit(query: bytes) -> bool:
    return query in {b"COMMIT", b"COMMIT;"}


def _writes(query: bytes) -> bool:
    return query.startswith((b"INSERT", b"UPDATE", b"DELETE"))


class CommitDroppingProxy:
    def __init__(self, server_host: str, server_port: int) -> None:
        self.server = (server_host, server_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._lock = threading.Lock()
        self._armed = 0
        self.dropped = 0  # COMMITs whose answer was lost
        self._closing = False
        threading.Thread(target=self._accept, name="pgproxy-accept", daemon=True).start()

    @classmethod
    def for_url(cls, url: str) -> tuple[CommitDroppingProxy, str]:
        """A proxy in front of the server of `url`, and `url` rewritten to go through it."""
        parsed = sa.make_url(url)
        proxy = cls(parsed.host or "127.0.0.1", parsed.port or 5432)
        proxied = parsed.set(host="127.0.0.1", port=proxy.port).update_query_dict(
            {"sslmode": "disable", "gssencmode": "disable"})
        return proxy, proxied.render_as_string(hide_password=False)

    def arm(self, commits: int = 1) -> None:
        """Lose the answer of the next `commits` COMMITs of transactions that wrote (of any connection
        through the proxy)."""
        with self._lock:
            self._armed = commits

    def _take_arm(self) -> bool:
        with self._lock:
            if self._armed <= 0:
                return False
            self._armed -= 1
            return True

    def close(self) -> None:
        self._closing = True
        with suppress(OSError):
            self.listener.close()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), name="pgproxy-conn", daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        server = socket.create_connection(self.server)
        # the proxy forwards one protocol message per write: with Nagle's algorithm on, each write
        # after the first waits for the peer's delayed ACK (tens of ms), about 40 ms per round trip
        for end in (client, server):
            end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        swallow = threading.Event()  # set: the server's next answers are read and dropped, then both close
        done = threading.Event()
        try:
            self._startup(client, server)
            threading.Thread(target=self._server_to_client, args=(server, client, swallow, done),
                             daemon=True).start()
            wrote = False  # the open transaction changed something: only such a COMMIT's answer is lost
            while not done.is_set():
                kind, message = _read_message(client)
                query = _query_text(kind, message)
                wrote = (wrote or _writes(query)) and not query.startswith(b"ROLLBACK")
                if _is_commit(query):
                    if not (wrote and self._take_arm()):
                        wrote = False
                        server.sendall(message)
                        continue
                    swallow.set()
                    server.sendall(message)
                    done.wait(30)
                    return
                server.sendall(message)
        except (ConnectionError, OSError):
            pass
        finally:
            _close(client, server)

    @staticmethod
    def _startup(client: socket.socket, server: socket.socket) -> None:
        while True:
            length = struct.unpack("!I", _read_exact(client, 4))[0]
            body = _read_exact(client, length - 4)
            server.sendall(struct.pack("!I", length) + body)
            code = struct.unpack("!I", body[:4])[0]
            if code not in _SPECIAL_REQUESTS:
                return
            client.sendall(_read_exact(server, 1))  # 'N': no SSL/GSS, as the URL asked

    def _server_to_client(self, server: socket.socket, client: socket.socket, swallow: threading.Event,
                          done: threading.Event) -> None:
        try:
            while True:
                kind, message = _read_message(server)
                if swallow.is_set():
                    if kind == b"Z":  # ReadyForQuery: the COMMIT is fully processed by the server
                        with self._lock:
                            self.dropped += 1
                        return
                    continue
                client.sendall(message)
        except (ConnectionError, OSError):
            pass
        finally:
            done.set()
            _close(client, server)


def _close(*sockets: socket.socket) -> None:
    # shutdown first: a plain close() leaves the other thread's recv() on the socket blocked, and the
    # peer then never sees the connection end
    for sock in sockets:
        with suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        with suppress(OSError):
            sock.close()
