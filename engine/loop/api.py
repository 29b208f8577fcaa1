"""The one module that talks to Kubernetes (the official `kubernetes` client); see `ports.ClusterAPI`.

All calls go through `KubeAPI._request`: raw JSON in and out, so objects cross the boundary as plain dicts, the
client's typed models never validate or reformat them, and a successful Binding (the apiserver answers with a
Status, which older clients failed to deserialize as `ValueError: Invalid value for target`) is judged by its HTTP
status alone. Watches go through the client (`param_serialize` + `call_api`); one-shot requests (binds, events,
patches, lists) through kept-alive `http.client` connections (engine.loop.transport: half the CPU per request)
set up from the client's configuration, unless it asks for what only the client does.
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode, urlparse

import kubernetes
import urllib3
from kubernetes.watch.watch import iter_resp_lines

from ..model.cluster import TERMINAL_PHASES
from ..reading.objects import BY_NAME
from .ports import (
    ApiError,
    ApiResult,
    ApiUnavailable,
    Conflict,
    Gone,
    NotFound,
    Obj,
    WatchEvent,
    WatchTarget,
)
from .recorder import event_name
from .transport import Transport, Unreachable
from .wire import MAGIC, MEDIA, Codec, WireError

COMPONENT = "policy-scheduler"
EVENT_MESSAGE_LIMIT = 1024  # the API's limit on an Event's message
REVIEWS = {"TokenReview": "/apis/authentication.k8s.io/v1/tokenreviews",
           "SubjectAccessReview": "/apis/authorization.k8s.io/v1/subjectaccessreviews"}
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
PENDING_OR_RUNNING = ",".join(f"status.phase!={p}" for p in TERMINAL_PHASES)  # finished pods hold no capacity


class ConfigError(Exception):
    """No usable cluster configuration (bad kubeconfig, not in a cluster): a user mistake."""


def load_client(kubeconfig: str | None, pool_size: int = 32) -> kubernetes.client.ApiClient:
    """An ApiClient from `kubeconfig`, else the in-cluster config, else the default kubeconfig."""
    config = kubernetes.client.Configuration()
    try:
        if kubeconfig:
            kubernetes.config.load_kube_config(config_file=kubeconfig, client_configuration=config)
        else:
            try:
                kubernetes.config.load_incluster_config(client_configuration=config)
            except kubernetes.config.ConfigException:
                kubernetes.config.load_kube_config(client_configuration=config)
    except (kubernetes.config.ConfigException, OSError, ValueError, TypeError, KeyError) as exc:
        where = f"kubeconfig {kubeconfig}" if kubeconfig else "in-cluster config or default kubeconfig"
        raise ConfigError(f"cannot load {where}: {getattr(exc, 'strerror', None) or exc}") from None
    if urlparse(config.host).hostname in LOOPBACK:
        config.proxy = None  # a proxy from the environment can never reach our own loopback
    config.connection_pool_maxsize = max(config.connection_pool_maxsize or 0, pool_size)
    return kubernetes.client.ApiClient(config)


def _transport(config: kubernetes.client.Configuration) -> tuple[Transport | None, str]:
    """The lean transport for one-shot requests (engine.loop.transport) and the path prefix of the apiserver's URL;
    (None, "") where the kubeconfig asks for what only the client does (plain HTTP, a proxy, a hostname to assert,
    socket options): those requests go through the client, as watches always do."""
    url = urlparse(config.host)
    if url.scheme != "https" or not url.hostname or config.proxy or config.assert_hostname not in (None, False) \
            or config.socket_options is not None:
        return None, ""
    try:
        context = ssl.create_default_context(cafile=config.ssl_ca_cert, cadata=getattr(config, "ca_cert_data", None) or None)
        if config.cert_file:
            context.load_cert_chain(config.cert_file, config.key_file)
    except (OSError, ssl.SSLError, ValueError):
        return None, ""  # the client says what is wrong with them at its first request
    if not config.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif config.assert_hostname is False:
        context.check_hostname = False

    def authorization() -> str | None:  # asked per request: a rotating token is refreshed by the client's hook
        setting = config.auth_settings().get("BearerToken")
        return None if setting is None else setting["value"]
    transport = Transport(url.hostname, url.port or 443, context, config.tls_server_name or url.hostname,
                          authorization, keep=config.connection_pool_maxsize or 32)
    return transport, url.path.rstrip("/")


def _path(resource: WatchTarget, api_version: str | None = None) -> str:
    kind = BY_NAME[resource.kind]
    api_version = api_version or kind.api_version
    root = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if kind.namespaced and resource.namespace:
        return f"{root}/namespaces/{quote(resource.namespace)}/{kind.plural}"
    return f"{root}/{kind.plural}"


def _query(resource: WatchTarget) -> list[tuple[str, str]]:
    selectors = [PENDING_OR_RUNNING] if resource.kind == "Pod" else []
    if resource.name:
        selectors.append(f"metadata.name={resource.name}")
    return [("fieldSelector", ",".join(selectors))] if selectors else []


PROTOBUF_FIRST = f"{MEDIA}, application/json"  # the apiserver answers JSON where it has no protobuf (CRDs)


def _object(data: bytes) -> Obj | None:
    try:
        found = json.loads(data)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _message(data: bytes, codec: Codec | None = None) -> str:
    """The message of the Status an apiserver answered with (JSON or, with `codec`, protobuf)."""
    try:
        found = codec.decode(data) if codec is not None and data.startswith(MAGIC) else json.loads(data)
        return str(found.get("message") or data[:300].decode(errors="replace"))
    except (ValueError, AttributeError):
        return data[:300].decode(errors="replace")


def raise_for(status: int, data: bytes, codec: Codec | None = None) -> None:
    """Map an HTTP status to the port's exceptions (2xx: nothing)."""
    if 200 <= status < 300:
        return
    message = _message(data, codec)
    if status == 404:
        raise NotFound(message)
    if status == 409:
        raise Conflict(message)
    if status == 410:
        raise Gone(message)
    if status == 429 or status >= 500:
        raise ApiUnavailable(f"{status}: {message}")
    raise ApiError(status, message)


class KubeAPI:
    """`ports.ClusterAPI` over one ApiClient; thread-safe (urllib3's pool is). With `protobuf` (the default), lists,
    watches, binds, events and status writes speak protobuf as kube-scheduler does (engine.loop.wire), for every
    kind the k8s.io/api release has a message for; JSON for the rest (CRDs), and wherever the apiserver answers it."""

    def __init__(self, client: kubernetes.client.ApiClient, request_timeout: float = 30.0, protobuf: bool = True):
        self.client = client
        self.request_timeout = request_timeout
        self._transport, self._base = _transport(client.configuration)  # one-shot requests; None: the client's
        self._served: dict[str, str] = {}  # kind -> the group/version found serving it
        self._codec = Codec() if protobuf else None

    def _accept(self, api_version: str, kind: str) -> str:
        """What to ask the apiserver for when listing and watching `kind` at `api_version`: protobuf first where we
        read it."""
        return PROTOBUF_FIRST if self._codec is not None and self._codec.serves(api_version, f"{kind}List") \
            else "application/json"

    def _decode(self, data: bytes, media: str) -> Obj:
        """An answer's body as its JSON dict, whichever encoding the apiserver chose."""
        if self._codec is not None and media.startswith(MEDIA):
            try:
                return self._codec.decode(data)
            except WireError as exc:
                raise ApiError(200, f"undecodable protobuf answer: {exc}") from None
        found = json.loads(data)
        if not isinstance(found, dict):
            raise ApiError(200, "the apiserver answered with JSON that is not an object")
        return found

    def _encoded(self, obj: Obj) -> tuple[Any, str]:
        """`obj` as a request body and its content type: protobuf where we have its message."""
        if self._codec is not None and self._codec.serves(str(obj["apiVersion"]), str(obj["kind"])):
            return self._codec.encode(obj), MEDIA
        return obj, "application/json"

    def _api_version(self, kind_name: str) -> str:
        """The group/version serving `kind_name`: fixed for most kinds; for those with `served` versions
        (engine.reading.objects), the newest the apiserver serves the resource at (asked once, again after it was not found).
        NotFound when none does."""
        kind = BY_NAME[kind_name]
        if not kind.served:
            return kind.api_version
        if kind_name not in self._served:
            group = kind.api_version.split("/")[0]
            for version in kind.served:
                status, data = self._request("GET", f"/apis/{group}/{version}")
                if status == 200 and any(r.get("name") == kind.plural for r in json.loads(data).get("resources") or []):
                    self._served[kind_name] = f"{group}/{version}"
                    break
            else:
                raise NotFound(f"{kind.plural}.{group} is not served (versions {', '.join(kind.served)})")
        return self._served[kind_name]

    def _resource_path(self, resource: WatchTarget) -> str:
        return _path(resource, self._api_version(resource.kind))

    def _request(self, method: str, path: str, query: list[tuple[str, str]] | None = None, body: Any = None,
                 content_type: str = "application/json", timeout: Any = None, stream: bool = False,
                 accept: str = "application/json") -> Any:
        """One HTTP call: (status, bytes), or the open urllib3 response when `stream`. Never raises on status."""
        if stream:
            return self._call(method, path, query, body, content_type, timeout, accept, stream=True)
        return self._exchange(method, path, query, body, content_type, timeout, accept)[:2]

    def _exchange(self, method: str, path: str, query: list[tuple[str, str]] | None = None, body: Any = None,
                  content_type: str = "application/json", timeout: Any = None,
                  accept: str = "application/json") -> tuple[int, bytes, str]:
        """One HTTP call: (status, bytes, the answer's content type). A `body` of bytes is sent as it is (protobuf),
        anything else as JSON. Never raises on status."""
        if self._transport is None:
            return self._call(method, path, query, body, content_type, timeout, accept)
        target = f"{self._base}{path}?{urlencode(query)}" if query else f"{self._base}{path}"
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        try:
            return self._transport.request(method, target, data, content_type, timeout or self.request_timeout, accept)
        except Unreachable as exc:
            raise ApiUnavailable(str(exc)) from None

    def _call(self, method: str, path: str, query: list[tuple[str, str]] | None, body: Any, content_type: str,
              timeout: Any, accept: str, stream: bool = False) -> Any:
        """One HTTP call through the client: the open urllib3 response when `stream` and answered 200, else
        (status, bytes, content type)."""
        headers = {"Accept": accept, "Content-Type": content_type}
        params = self.client.param_serialize(method, path, query_params=query or [], header_params=headers,
                                             body=body, auth_settings=["BearerToken"])
        try:
            response = self.client.call_api(*params, _request_timeout=timeout or self.request_timeout)
        except (urllib3.exceptions.HTTPError, OSError, kubernetes.client.ApiException) as exc:
            raise ApiUnavailable(f"{method} {path}: {exc}") from None
        if stream and response.status == 200:
            return response.response
        try:
            return response.status, response.read(), response.getheader("Content-Type") or ""
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiUnavailable(f"{method} {path}: {exc}") from None

    def _json(self, method: str, path: str, accept: str = "application/json", **kwargs: Any) -> Obj:
        """One call whose answer is an object (in protobuf when `accept` asks and the apiserver agrees)."""
        status, data, media = self._exchange(method, path, accept=accept, **kwargs)
        raise_for(status, data, self._codec)
        return self._decode(data, media)

    def _send(self, method: str, path: str, **kwargs: Any) -> None:
        """One write whose answer only its status is read: asked for in the encoding cheapest for the apiserver, and
        not decoded."""
        status, data = self._request(method, path, accept=self._answers(), **kwargs)
        raise_for(status, data, self._codec)

    def list(self, resource: WatchTarget) -> tuple[list[Obj], str]:
        kind = BY_NAME[resource.kind]
        try:
            api_version = self._api_version(resource.kind)
            body = self._json("GET", self._resource_path(resource), query=_query(resource),
                              accept=self._accept(api_version, kind.manifest_kind))
        except NotFound:
            self._served.pop(resource.kind, None)  # looked for again next time
            raise
        items = [{"kind": kind.manifest_kind, "apiVersion": api_version, **item} for item in body.get("items") or []]
        return items, str((body.get("metadata") or {}).get("resourceVersion") or "")

    def watch(self, resource: WatchTarget, resource_version: str, timeout_seconds: int) -> Iterator[WatchEvent]:
        query = _query(resource) + [("watch", "true"), ("resourceVersion", resource_version),
                                    ("timeoutSeconds", str(timeout_seconds)), ("allowWatchBookmarks", "true")]
        accept = self._accept(self._api_version(resource.kind), BY_NAME[resource.kind].manifest_kind)
        answer = self._request("GET", self._resource_path(resource), query=query, stream=True,
                               timeout=(10, timeout_seconds + 30), accept=accept)
        if isinstance(answer, tuple):  # refused: (status, bytes, content type)
            raise_for(answer[0], answer[1], self._codec)
            return
        try:
            for type_, obj in self._events(answer):
                if type_ == "ERROR":
                    raise_for(int(obj.get("code") or 500), json.dumps(obj).encode())
                yield WatchEvent(type_, obj)
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:  # WireError is a ValueError
            raise ApiUnavailable(f"watch {resource.kind}: {exc}") from None
        finally:  # a watch left mid-stream must not hand its half-read connection back to the pool
            answer.close()
            answer.release_conn()

    def _events(self, answer: Any) -> Iterator[tuple[str, Obj]]:
        """A watch stream's (type, object), in the encoding the apiserver chose."""
        if self._codec is not None and str(answer.headers.get("Content-Type") or "").startswith(MEDIA):
            yield from self._codec.watch_events(answer.stream(None, decode_content=False))  # chunk by chunk
            return
        for line in iter_resp_lines(answer):
            event = json.loads(line)
            yield event["type"], event.get("object") or {}

    def warm(self, connections: int) -> int:
        """Open `connections` connections now, so the first binds and events after the start do not each wait for
        a TLS handshake of their own (10–50 ms beside a start's lists: the first pods' whole wait; kube-scheduler's
        one HTTP/2 connection is open from its first list). How many opened."""
        return 0 if self._transport is None else self._transport.warm(connections)

    def server_version(self) -> tuple[int, int] | None:
        try:
            status, data = self._request("GET", "/version")
            found = json.loads(data) if status == 200 else {}
            return int(found["major"]), int("".join(c for c in found["minor"] if c.isdigit()))
        except (ApiUnavailable, ValueError, KeyError, TypeError):
            return None

    def bind(self, namespace: str, name: str, uid: str, node: str) -> ApiResult:
        body, content_type = self._encoded({"apiVersion": "v1", "kind": "Binding",
                                            "metadata": {"name": name, "namespace": namespace, "uid": uid},
                                            "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
        try:
            status, data = self._request("POST", f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/binding",
                                         body=body, content_type=content_type, accept=self._answers())
        except ApiUnavailable as exc:
            return ApiResult(False, 0, str(exc))
        ok = 200 <= status < 300
        return ApiResult(ok, status, "" if ok else _message(data, self._codec))

    def _answers(self) -> str:
        """Accept for a write whose answer only its status is read (a bind's Status, a patched pod): the encoding
        cheapest for the apiserver to write."""
        return "application/json" if self._codec is None else PROTOBUF_FIRST

    def patch(self, kind: str, namespace: str, name: str, body: Obj, subresource: str = "") -> ApiResult:
        """A JSON merge patch of one object (metadata.resourceVersion in `body` makes it conditional: 409 when
        the object changed since)."""
        path = f"{self._resource_path(WatchTarget(kind, namespace or None))}/{quote(name)}"
        if subresource:
            path += f"/{subresource}"
        return self._write("PATCH", path, body, "application/merge-patch+json")

    def create_object(self, kind: str, namespace: str, body: Obj) -> ApiResult:
        return self._write("POST", self._resource_path(WatchTarget(kind, namespace or None)), body)

    def delete_object(self, kind: str, namespace: str, name: str) -> ApiResult:
        return self._write("DELETE", f"{self._resource_path(WatchTarget(kind, namespace or None))}/{quote(name)}", gone_ok=True)

    def _write(self, method: str, path: str, body: Obj | None = None, content_type: str = "application/json",
               gone_ok: bool = False) -> ApiResult:
        """One write; the object as the apiserver answered it in `obj` (404 counts as done with `gone_ok`)."""
        try:
            status, data = self._request(method, path, body=body, content_type=content_type)
        except ApiUnavailable as exc:
            return ApiResult(False, 0, str(exc))
        ok = 200 <= status < 300 or (gone_ok and status == 404)
        return ApiResult(ok, status, "" if ok else _message(data), obj=_object(data) if ok and status != 404 else None)

    def set_unschedulable(self, namespace: str, name: str, message: str, reason: str = "Unschedulable") -> None:
        self.set_condition(namespace, name, {"type": "PodScheduled", "status": "False", "reason": reason,
                                             "message": message, "lastTransitionTime": _now(), "lastProbeTime": None})

    def set_condition(self, namespace: str, name: str, condition: Obj) -> None:
        """A strategic merge patch: the pod's other conditions (the kubelet's) stay."""
        self._send("PATCH", f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/status",
                   body={"status": {"conditions": [condition]}}, content_type="application/strategic-merge-patch+json")

    def evict(self, namespace: str, name: str, uid: str, message: str) -> ApiResult:
        """kube-scheduler's way with a victim: a DisruptionTarget condition, then delete (UID precondition).
        404 counts as done: the pod is gone already."""
        pod = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}"
        condition = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                     "message": message, "lastTransitionTime": _now()}
        try:
            status, data = self._request("PATCH", f"{pod}/status", body={"status": {"conditions": [condition]}},
                                         content_type="application/strategic-merge-patch+json", accept=self._answers())
            if status == 404:
                return ApiResult(True, 404)
            status, data = self._request("DELETE", pod, body={"apiVersion": "v1", "kind": "DeleteOptions",
                                                              "preconditions": {"uid": uid}}, accept=self._answers())
        except ApiUnavailable as exc:
            return ApiResult(False, 0, str(exc))
        ok = 200 <= status < 300 or status == 404
        return ApiResult(ok, status, "" if ok else _message(data, self._codec))

    def nominate(self, namespace: str, name: str, node: str) -> None:
        self._send("PATCH", f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/status",
                   body={"status": {"nominatedNodeName": node}}, content_type="application/merge-patch+json")

    def create_event(self, involved: Obj, type_: str, reason: str, message: str, name: str | None = None,
                     count: int = 1) -> None:
        event = event_body(involved, type_, reason, message, name, count)
        namespace = event["metadata"]["namespace"]
        body, content_type = self._encoded(event)
        self._send("POST", f"/api/v1/namespaces/{quote(namespace)}/events", body=body, content_type=content_type)

    def update_event(self, namespace: str, name: str, message: str, count: int) -> bool:
        body = {"count": count, "lastTimestamp": _now(), "message": message[:EVENT_MESSAGE_LIMIT]}
        try:
            self._send("PATCH", f"/api/v1/namespaces/{quote(namespace)}/events/{quote(name)}", body=body,
                       content_type="application/merge-patch+json")
        except NotFound:
            return False
        return True

    def review(self, kind: str, spec: Obj, timeout: float) -> Obj:
        """A TokenReview or SubjectAccessReview's status (the serving side's delegated authentication and
        authorization; engine.loop.serving.access). ApiUnavailable when not answered in `timeout`, ApiError when
        refused (403: the scheduler's ServiceAccount lacks system:auth-delegator)."""
        path = REVIEWS[kind]
        body = {"apiVersion": path.rsplit("/", 1)[0].removeprefix("/apis/"), "kind": kind, "spec": spec}
        return self._json("POST", path, body=body, timeout=timeout).get("status") or {}

    def _lease_path(self, namespace: str, name: str = "") -> str:
        path = f"/apis/coordination.k8s.io/v1/namespaces/{quote(namespace)}/leases"
        return f"{path}/{quote(name)}" if name else path

    def get_lease(self, namespace: str, name: str) -> Obj | None:
        try:
            return self._json("GET", self._lease_path(namespace, name), timeout=5)
        except NotFound:
            return None

    def create_lease(self, namespace: str, lease: Obj) -> Obj:
        return self._json("POST", self._lease_path(namespace), body=lease, timeout=5)

    def update_lease(self, namespace: str, lease: Obj) -> Obj:
        return self._json("PUT", self._lease_path(namespace, lease["metadata"]["name"]), body=lease, timeout=5)


def event_body(involved: Obj, type_: str, reason: str, message: str, name: str | None = None, count: int = 1) -> Obj:
    """A core/v1 Event about `involved` as the loop writes it (named `name`, else a fresh name; seen `count` times)."""
    meta = involved.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    now = _now()
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name or event_name(meta), "namespace": namespace},
            "involvedObject": {"apiVersion": involved.get("apiVersion", "v1"), "kind": involved.get("kind"),
                               "name": meta.get("name"), "namespace": namespace, "uid": meta.get("uid"),
                               "resourceVersion": meta.get("resourceVersion")},
            "type": type_, "reason": reason, "message": message[:EVENT_MESSAGE_LIMIT],
            "firstTimestamp": now, "lastTimestamp": now, "count": count,
            "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
            "reportingInstance": COMPONENT, "action": reason}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
