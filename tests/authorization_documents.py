"""An https server on 127.0.0.1 serving Client ID Metadata Documents, on a thread, with a
self-signed certificate made for it (the fetcher is told to trust it: CIMD_CA_BUNDLE)."""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (its own CA) and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                  critical=False)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


class DocumentServer:
    """``documents`` maps a path to (status, headers, body); ``hits`` counts requests per path."""

    def __init__(self, directory: Path):
        self.cert_path, key_path = self_signed(directory)
        self.documents: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.hits: dict[str, int] = {}
        # A path held here gets no answer until its event is set (a server that does not answer).
        self.held: dict[str, threading.Event] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.hits[self.path] = server.hits.get(self.path, 0) + 1
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

    def close(self) -> None:
        for event in self.held.values():
            event.set()
        self.httpd.shutdown()
        self.httpd.server_close()
