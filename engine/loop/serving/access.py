"""Who may read /metrics: kube-scheduler's delegated authentication and authorization. A bearer token is checked
by a TokenReview, its user by a SubjectAccessReview for the non-resource path and verb; answers are cached
briefly (tokens 10 s, allowed 10 s, denied 10 s apart: the defaults of kube-scheduler's
--authentication-token-webhook-cache-ttl and --authorization-webhook-cache-(un)authorized-ttl); an apiserver that
cannot be asked is never cached, and is said (503) rather than taken for a no.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..ports import ApiError, ApiUnavailable, NotFound

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/livez"})  # kube-scheduler's --authorization-always-allow-paths
REVIEW_TIMEOUT = 10.0  # seconds; kube-scheduler's TokenRequestTimeout
CACHE_SIZE = 1024  # entries per cache; the oldest go first


class Reviews(Protocol):
    """The apiserver's review APIs (engine.loop.api.KubeAPI.review)."""

    def review(self, kind: str, spec: dict[str, Any], timeout: float) -> dict[str, Any]: ...


@dataclass(frozen=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class Decision:
    """The HTTP answer to a request before its path is served: 0 means serve it."""

    status: int = 0
    message: str = ""

    @property
    def allowed(self) -> bool:
        return self.status == 0


class _Cache:
    """Answers kept for their TTL (chosen per answer), at most CACHE_SIZE of them."""

    def __init__(self, clock: Callable[[], float]):
        self._clock = clock
        self._entries: OrderedDict[Any, tuple[Any, float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> tuple[bool, Any]:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[1] <= self._clock():
                self._entries.pop(key, None)
                return False, None
            return True, entry[0]

    def put(self, key: Any, value: Any, ttl: float) -> None:
        if ttl <= 0:
            return
        with self._lock:
            self._entries[key] = (value, self._clock() + ttl)
            self._entries.move_to_end(key)
            while len(self._entries) > CACHE_SIZE:
                self._entries.popitem(last=False)


class Unavailable(Exception):
    """The apiserver could not be asked (unreachable, timed out, or it refused the scheduler the review)."""


def _user(status: dict[str, Any]) -> User:
    user = status.get("user") or {}
    extra = tuple(sorted((k, tuple(v or ())) for k, v in (user.get("extra") or {}).items()))
    return User(user.get("username") or "", user.get("uid") or "", tuple(user.get("groups") or ()), extra)


@dataclass
class DelegatedAccess:
    """Authenticate a bearer token, then authorize its user for a path (verb `get`), through the apiserver."""

    reviews: Reviews
    token_ttl: float = 10.0
    allowed_ttl: float = 10.0
    denied_ttl: float = 10.0
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self._tokens = _Cache(self.clock)
        self._decisions = _Cache(self.clock)

    def check(self, authorization: str | None, path: str, verb: str = "get") -> Decision:
        """What a request with this Authorization header may do on `path`."""
        if path in OPEN_PATHS:
            return Decision()
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return Decision(401, "Unauthorized: a bearer token is needed\n")
        try:
            user = self.authenticate(token.strip())
            if user is None:
                return Decision(401, "Unauthorized: the token is not valid\n")
            if not self.authorize(user, path, verb):
                return Decision(403, f'Forbidden: user "{user.name}" cannot {verb} path "{path}"\n')
        except Unavailable as exc:
            return Decision(503, f"cannot check access with the apiserver: {exc}\n")
        return Decision()

    def authenticate(self, token: str) -> User | None:
        key = hashlib.sha256(token.encode()).digest()  # tokens are not kept in the clear
        found, user = self._tokens.get(key)
        if found:
            return user
        status = self._ask("TokenReview", {"token": token})
        user = _user(status) if status.get("authenticated") else None
        self._tokens.put(key, user, self.token_ttl)
        return user

    def authorize(self, user: User, path: str, verb: str) -> bool:
        key = (user, path, verb)
        found, allowed = self._decisions.get(key)
        if found:
            return bool(allowed)
        spec: dict[str, Any] = {"user": user.name, "groups": list(user.groups),
                                "nonResourceAttributes": {"path": path, "verb": verb}}
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        allowed = bool(self._ask("SubjectAccessReview", spec).get("allowed"))
        self._decisions.put(key, allowed, self.allowed_ttl if allowed else self.denied_ttl)
        return allowed

    def _ask(self, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
        try:
            return self.reviews.review(kind, spec, REVIEW_TIMEOUT)
        except ApiUnavailable as exc:
            raise Unavailable(f"{kind}: {exc}") from None
        except ApiError as exc:
            hint = " (the scheduler's ServiceAccount needs the system:auth-delegator ClusterRole)" \
                if exc.status == 403 else ""
            raise Unavailable(f"{kind} refused: {exc}{hint}") from None
        except NotFound as exc:
            raise Unavailable(f"{kind} is not served: {exc}") from None
