"""The ports a `run` serves, as its flags say: HTTPS with delegated access (default 10259, kube-scheduler's), and
the plain-HTTP escape hatch on 127.0.0.1 only (off by default)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI reads the defaults here without loading the server (prometheus_client, ssl)
    from .access import Reviews
    from .endpoints import Endpoints, Listener

SECURE_PORT = 10259
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Serving:
    """--secure-port, --bind-address, --tls-cert-file, --tls-private-key-file, --insecure-port."""

    secure_port: int = SECURE_PORT  # 0: none
    bind_address: str = "0.0.0.0"
    cert_file: str | None = None
    key_file: str | None = None
    insecure_port: int = 0  # 0: none


def listen(serving: Serving, endpoints: Endpoints, reviews: Reviews) -> list[Listener]:
    """Start the listeners (OSError: a port cannot be bound; CertificateError: the files do not serve)."""
    from .access import DelegatedAccess
    from .certificates import Certificates, default_hosts
    from .endpoints import Listener

    listeners: list[Listener] = []
    try:
        if serving.secure_port:
            specific = serving.bind_address not in ("0.0.0.0", "::", "")
            hosts = default_hosts() + ((serving.bind_address,) if specific else ())
            certificates = Certificates(serving.cert_file, serving.key_file, hosts)
            listeners.append(Listener(endpoints, serving.secure_port, serving.bind_address, certificates,
                                      DelegatedAccess(reviews)))
            listeners[-1].start()
        if serving.insecure_port:
            listeners.append(Listener(endpoints, serving.insecure_port, LOOPBACK))
            listeners[-1].start()
    except BaseException:
        for listener in listeners:
            listener.stop()
        raise
    return listeners

