"""The serving certificate: one generated in memory at start (kube-scheduler's self-signed default), or a pair of
PEM files (a mounted Secret) read again when they change, so a rotated certificate is served without a restart.

Each new connection asks for the current `ssl.SSLContext`; files are checked then (two `stat`s), and a pair that
does not load (half-written mid-rotation, a key that does not match) keeps the last good context until it does.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import os
import socket
import ssl
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

log = logging.getLogger("policy_scheduler.serving")

VALIDITY = datetime.timedelta(days=365)  # kube-scheduler's self-signed certificate's


class CertificateError(Exception):
    """The certificate files given cannot be read or do not form a pair: a user mistake, said at start."""


def self_signed(hosts: tuple[str, ...]) -> tuple[bytes, bytes]:
    """A self-signed serving certificate and its key (PEM) for `hosts` (names and IP addresses), valid a year:
    what kube-scheduler makes when no --tls-cert-file is given. ECDSA P-256: made in milliseconds at start."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{hosts[0]}@{int(now.timestamp())}")])
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def default_hosts() -> tuple[str, ...]:
    """The names a generated certificate is for: localhost, the loopback addresses, the host (pod) name."""
    return tuple(dict.fromkeys(("localhost", "127.0.0.1", "::1", socket.gethostname())))


def _context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2  # kube-scheduler's default minimum
    return context


@contextmanager
def _in_memory(data: bytes) -> Iterator[str]:
    """A path to `data` that never touches a disk (a memfd on Linux; a private temporary file elsewhere), since
    `ssl` loads certificates only from paths and the root filesystem is read-only in the installs."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("policy-scheduler-cert", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.NamedTemporaryFile() as file:
        file.write(data)
        file.flush()
        yield file.name


def generated_context(hosts: tuple[str, ...]) -> ssl.SSLContext:
    cert, key = self_signed(hosts)
    context = _context()
    with _in_memory(cert) as cert_path, _in_memory(key) as key_path:
        context.load_cert_chain(cert_path, key_path)
    return context


def _signature(path: str) -> tuple[int, int, int]:
    """What changes when a file is replaced or rewritten (a Secret volume swaps a symlink: the inode changes)."""
    st = os.stat(path)
    return st.st_ino, st.st_mtime_ns, st.st_size


@dataclass
class Certificates:
    """The serving certificate each new connection gets: from `cert_file`/`key_file` (checked for changes at each
    connection), else one generated in memory at start."""

    cert_file: str | None = None
    key_file: str | None = None
    hosts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: tuple[tuple[int, int, int], tuple[int, int, int]] | None = None
        self._failed: tuple[tuple[int, int, int], tuple[int, int, int]] | None = None
        if bool(self.cert_file) != bool(self.key_file):
            raise CertificateError("--tls-cert-file and --tls-private-key-file go together: give both or neither")
        if self.cert_file is None:
            self._current = generated_context(self.hosts or default_hosts())
            return
        try:
            self._seen = self._files_signature()
            self._current = self._load()
        except (OSError, ssl.SSLError) as exc:
            raise CertificateError(f"cannot serve with {self.cert_file} and {self.key_file}: "
                                   f"{getattr(exc, 'strerror', None) or exc}") from None

    @property
    def generated(self) -> bool:
        return self.cert_file is None

    def _files_signature(self) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        assert self.cert_file and self.key_file
        return _signature(self.cert_file), _signature(self.key_file)

    def _load(self) -> ssl.SSLContext:
        assert self.cert_file and self.key_file
        context = _context()
        context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def context(self) -> ssl.SSLContext:
        """The context for a new connection: the files' again if they changed and load, else the last good one."""
        if self.cert_file is None:
            return self._current
        with self._lock:
            try:
                seen = self._files_signature()
            except OSError:
                return self._current  # mid-rotation: a file is briefly missing
            if seen != self._seen and seen != self._failed:
                try:
                    self._current, self._seen = self._load(), seen
                    log.info("serving certificate reloaded from %s", self.cert_file)
                except (OSError, ssl.SSLError) as exc:
                    self._failed = seen
                    log.warning("serving certificate in %s does not load, keeping the previous one: %s",
                                self.cert_file, exc)
            return self._current
