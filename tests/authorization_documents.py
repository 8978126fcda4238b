"""An https server on 127.0.0.1 serving Client ID Metadata Documents, on a thread, with a
self-signed certificate made for it, valid for ``127.0.0.1`` and ``localhost`` (the fetcher is
told to trust it: CIMD_CA_BUNDLE), so one server stands for two hosts."""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost (its own CA) and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                               x509.DNSName("localhost")]), critical=False)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@dataclass
class Drip:
    """A document sent one byte every ``interval`` seconds, as a slow (or hostile) server does.

    ``hung_up`` is set when the client closed the connection before the last byte; ``finished``
    when the server got to send it all (or gave up after ``give_up_after`` bytes)."""

    body: bytes
    interval: float
    give_up_after: int | None = None
    hits: int = 0
    sent: int = 0
    hung_up: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)


class DocumentServer:
    """``documents`` maps a path to (status, headers, body); ``hits`` counts requests per path;
    ``dripping`` maps a path (whatever its query string) to a :class:`Drip`."""

    def __init__(self, directory: Path):
        self.cert_path, key_path = self_signed(directory)
        self.documents: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.hits: dict[str, int] = {}
        # A path held here gets no answer until its event is set (a server that does not answer).
        self.held: dict[str, threading.Event] = {}
        self.dripping: dict[str, Drip] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.hits[self.path] = server.hits.get(self.path, 0) + 1
                drip = server.dripping.get(self.path.split("?", 1)[0])
                if drip is not None:
                    self.drip(drip)
                    return
                if self.path in server.held:
                    server.held[self.path].wait(60)
                    self.close_connection = True
                    return  # the client has given up by now: answering would only hit a closed socket
                status, headers, body = server.documents.get(self.path, (404, {}, b"not found"))
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def drip(self, drip: Drip) -> None:
                drip.hits += 1
                self.close_connection = True
                try:
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(drip.body)))
                    self.end_headers()
                    self.wfile.flush()
                    for index in range(len(drip.body)):
                        if drip.stop.wait(drip.interval) or index == drip.give_up_after:
                            break
                        self.wfile.write(drip.body[index:index + 1])
                        self.wfile.flush()
                        drip.sent += 1
                except (OSError, ssl.SSLError):
                    drip.hung_up.set()
                    return
                drip.finished.set()

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_path, key_path)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.base = f"https://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def publish(self, path: str, document: object, *, status: int = 200,
                headers: dict[str, str] | None = None) -> str:
        """Serve ``document`` (JSON) at ``path``; its URL."""
        body = document if isinstance(document, bytes) else json.dumps(document).encode()
        self.documents[path] = (status, {"content-type": "application/json", **(headers or {})}, body)
        return self.base + path

    def drip(self, path: str, document: object, *, interval: float, give_up_after: int | None = None) -> Drip:
        """Serve ``document`` (JSON) at ``path`` (any query string) one byte at a time."""
        body = json.dumps(document).encode()
        self.dripping[path] = Drip(body, interval, give_up_after)
        return self.dripping[path]

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        """The URL of ``path`` on this server, named by ``host`` (127.0.0.1 or localhost)."""
        return f"https://{host}:{self.httpd.server_address[1]}{path}"

    def close(self) -> None:
        for event in self.held.values():
            event.set()
        for drip in self.dripping.values():
            drip.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
