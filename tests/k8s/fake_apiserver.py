"""A loopback Kubernetes API server for tests: real HTTPS (generated CA), real kubeconfig,
bearer-token auth, the core/v1 read endpoints rlhealth and kubectl use, and ``pods/exec``
over the websocket channel protocol (``v5.channel.k8s.io`` / ``v4.channel.k8s.io`` /
``channel.k8s.io``: one channel byte in front of every binary frame, 1 stdout, 2 stderr,
3 error/status).

It serves one :class:`Incident` and records every request (method, path, query, whether it
was a websocket upgrade), so tests can assert which verbs a client used. Stdlib only, plus
``cryptography`` for the certificates.
"""
from __future__ import annotations

import base64
import datetime as dt
import hashlib
import http.server
import ipaddress
import json
import re
import secrets
import socket
import ssl
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable
from urllib.parse import parse_qs, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
CHANNEL_PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io", "channel.k8s.io")


# --------------------------------------------------------------------------- certificates

def make_certs(directory: Path) -> tuple[Path, Path, Path]:
    """A fresh CA and a server certificate for 127.0.0.1/localhost signed by it."""
    now = dt.datetime.now(dt.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rlhealth-test-ca")])
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                            content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False,
                                            encipher_only=False, decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    directory.mkdir(parents=True, exist_ok=True)
    ca_path, cert_path, key_path = directory / "ca.crt", directory / "server.crt", directory / "server.key"
    ca_path.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return ca_path, cert_path, key_path


# --------------------------------------------------------------------------- incident model

@dataclass
class ExecResult:
    stdout: bytes = b""
    stderr: bytes = b""
    exit_code: int = 0
    hang: bool = False          # accept the upgrade, then never answer


ExecHandler = Callable[[str, list[str]], ExecResult]


@dataclass
class Fault:
    """Answer matching requests with ``status`` (the first ``times`` of them; -1 = always)."""
    method: str
    path_regex: str
    status: int = 500
    times: int = -1
    hang_s: float = 0.0         # sleep before answering (a slow API)
    retry_after: str | None = None  # Retry-After header of the answer (429 throttling)


@dataclass
class Incident:
    namespace: str = "iris"
    pods: list[dict] = field(default_factory=list)
    # (pod name, previous) -> log text
    logs: dict[tuple[str, bool], str] = field(default_factory=dict)
    events: list[dict] = field(default_factory=list)
    exec_handler: ExecHandler | None = None
    faults: list[Fault] = field(default_factory=list)
    # pod names that disappear right after the first pod list is served
    delete_after_first_list: list[str] = field(default_factory=list)
    # pod names that disappear when the first exec request (into any pod) arrives
    delete_on_first_exec: list[str] = field(default_factory=list)
    # labels of the nodes the pods run on (every spec.nodeName is a node; an absent node is 404)
    node_labels: dict[str, str] = field(default_factory=lambda: {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "gpu.nvidia.com/class": "H100_NVLINK_80GB",
        "nvidia.com/gpu.count": "8"})


@dataclass
class RequestRecord:
    method: str
    path: str
    query: dict[str, list[str]]
    upgrade: str | None
    status: int | None = None
    authorized: bool = True
    subprotocol: str | None = None


# --------------------------------------------------------------------------- helpers

def _status(code: int, reason: str, message: str, details: dict | None = None) -> dict:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}
    if details:
        body["details"] = details
    return body


def _selector_matches(selector: str, labels: dict[str, str]) -> bool:
    """Equality/existence label selectors (``a=b,c!=d,e,!f``) and ``k in (x,y)`` / ``notin``."""
    if not selector:
        return True
    parts = re.findall(r"[^,(]+(?:\([^)]*\))?", selector)
    for part in parts:
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)", part)
        if m:
            key, op, values = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
            ok = labels.get(key) in values
            if (op == "in") != ok:
                return False
            continue
        if "!=" in part:
            key, value = part.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "==" in part or "=" in part:
            key, value = re.split("==?", part, maxsplit=1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif part.startswith("!"):
            if part[1:] in labels:
                return False
        elif part not in labels:
            return False
    return True


def _field_selector_matches(selector: str, obj: dict) -> bool:
    for part in filter(None, (p.strip() for p in selector.split(","))):
        neg = "!=" in part
        key, value = re.split("!=|==?", part, maxsplit=1)
        cur: object = obj
        for k in key.strip().split("."):
            cur = cur.get(k) if isinstance(cur, dict) else None
        if (str(cur) == value.strip()) == neg:
            return False
    return True


def _age(ts: str | None) -> str:
    if not ts:
        return "<unknown>"
    t = dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    s = int((dt.datetime.now(dt.timezone.utc) - t).total_seconds())
    return f"{s // 86400}d" if s >= 86400 else f"{s // 3600}h" if s >= 3600 else f"{max(s, 0) // 60}m"


def _pod_table(pods: list[dict]) -> dict:
    rows = []
    for pod in pods:
        statuses = pod.get("status", {}).get("containerStatuses") or []
        ready = sum(1 for c in statuses if c.get("ready"))
        restarts = sum(int(c.get("restartCount", 0)) for c in statuses)
        rows.append({"cells": [pod["metadata"]["name"], f"{ready}/{len(pod['spec']['containers'])}",
                               pod.get("status", {}).get("phase", "Unknown"), restarts,
                               _age(pod["metadata"].get("creationTimestamp"))],
                     "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                "metadata": pod["metadata"]}})
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": "1"},
            "columnDefinitions": [
                {"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0},
                {"name": "Ready", "type": "string", "format": "", "description": "", "priority": 0},
                {"name": "Status", "type": "string", "format": "", "description": "", "priority": 0},
                {"name": "Restarts", "type": "integer", "format": "", "description": "", "priority": 0},
                {"name": "Age", "type": "string", "format": "", "description": "", "priority": 0}],
            "rows": rows}


_API_RESOURCES = {
    "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1",
    "resources": [
        {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod",
         "verbs": ["get", "list", "watch"], "shortNames": ["po"], "categories": ["all"]},
        {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]},
        {"name": "pods/exec", "singularName": "", "namespaced": True, "kind": "PodExecOptions",
         "verbs": ["create", "get"]},
        {"name": "events", "singularName": "event", "namespaced": True, "kind": "Event",
         "verbs": ["get", "list", "watch"], "shortNames": ["ev"]},
    ],
}


# --------------------------------------------------------------------------- websocket framing

def ws_frame(payload: bytes, opcode: int = 0x2) -> bytes:
    """One unmasked, final server frame."""
    head = bytes([0x80 | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([n])
    elif n < 1 << 16:
        head += bytes([126]) + struct.pack("!H", n)
    else:
        head += bytes([127]) + struct.pack("!Q", n)
    return head + payload


def ws_read_frame(rfile) -> tuple[int, bytes] | None:
    """Read one (masked) client frame; None on EOF."""
    head = rfile.read(2)
    if len(head) < 2:
        return None
    opcode = head[0] & 0x0F
    masked = head[1] & 0x80
    n = head[1] & 0x7F
    if n == 126:
        n = struct.unpack("!H", rfile.read(2))[0]
    elif n == 127:
        n = struct.unpack("!Q", rfile.read(8))[0]
    mask = rfile.read(4) if masked else b"\0\0\0\0"
    data = bytearray(rfile.read(n))
    for i in range(len(data)):
        data[i] ^= mask[i % 4]
    return opcode, bytes(data)


# --------------------------------------------------------------------------- the server

class FakeApiServer:
    def __init__(self, incident: Incident, workdir: Path):
        self.incident = incident
        self.workdir = Path(workdir)
        self.token = secrets.token_hex(16)
        self.requests: list[RequestRecord] = []
        self._lock = threading.Lock()
        self._lists_served = 0
        self._fault_hits: dict[int, int] = {}
        self._stop = threading.Event()
        self.ca_path, cert_path, key_path = make_certs(self.workdir / "pki")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert_path, key_path)
        server = self

        class Handler(_Handler):
            api = server

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True,
                                            do_handshake_on_connect=False)
        self.port = self.httpd.server_address[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    # lifecycle
    def start(self) -> "FakeApiServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def write_kubeconfig(self, path: Path | None = None, context: str = "fake-cw") -> Path:
        path = path or self.workdir / "kubeconfig"
        path.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: fake\n  cluster:\n    server: {self.url}\n"
            f"    certificate-authority: {self.ca_path}\n"
            f"users:\n- name: tester\n  user:\n    token: {self.token}\n"
            f"contexts:\n- name: {context}\n  context:\n    cluster: fake\n    user: tester\n"
            f"    namespace: {self.incident.namespace}\n"
            f"current-context: {context}\n")
        return path

    # state
    def record(self, rec: RequestRecord) -> None:
        with self._lock:
            self.requests.append(rec)

    def pods(self) -> list[dict]:
        with self._lock:
            return list(self.incident.pods)

    def find_pod(self, name: str) -> dict | None:
        return next((p for p in self.pods() if p["metadata"]["name"] == name), None)

    def find_node(self, name: str) -> dict | None:
        """A Node for every node a pod is scheduled on, labelled as the incident says."""
        if not any((p.get("spec") or {}).get("nodeName") == name for p in self.pods()):
            return None
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1",
                             "labels": {"kubernetes.io/hostname": name, **self.incident.node_labels}},
                "status": {"nodeInfo": {"kubeletVersion": "v1.30.0"},
                           "capacity": {"nvidia.com/gpu": self.incident.node_labels.get("nvidia.com/gpu.count", "8")}}}

    def after_list(self) -> None:
        with self._lock:
            self._lists_served += 1
            if self._lists_served == 1 and self.incident.delete_after_first_list:
                gone = set(self.incident.delete_after_first_list)
                self.incident.pods = [p for p in self.incident.pods if p["metadata"]["name"] not in gone]

    def before_exec(self) -> None:
        with self._lock:
            if self.incident.delete_on_first_exec:
                gone = set(self.incident.delete_on_first_exec)
                self.incident.delete_on_first_exec = []
                self.incident.pods = [p for p in self.incident.pods if p["metadata"]["name"] not in gone]

    def fault_for(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for i, f in enumerate(self.incident.faults):
                if f.method == method and re.search(f.path_regex, path):
                    hits = self._fault_hits.get(i, 0)
                    if f.times < 0 or hits < f.times:
                        self._fault_hits[i] = hits + 1
                        return f
        return None

    def methods_used(self) -> set[str]:
        return {r.method for r in self.requests}


class _Handler(http.server.BaseHTTPRequestHandler):
    api: FakeApiServer
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # keep test output clean
        pass

    def handle(self):
        try:
            self.connection.do_handshake()
        except (ssl.SSLError, OSError):
            return
        try:
            super().handle()
        except (ConnectionError, ssl.SSLError, socket.timeout, OSError):
            pass

    # every verb goes through one dispatcher so nothing escapes the request log
    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_PATCH(self):
        self._dispatch("PATCH")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def do_HEAD(self):
        self._dispatch("HEAD")

    def do_OPTIONS(self):
        self._dispatch("OPTIONS")

    # ------------------------------------------------------------------ responses
    def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
        self._rec.status = code
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (getattr(self, "_extra_headers", None) or {}).items():
            self.send_header(key, value)
        self._extra_headers = None
        self.end_headers()
        self.wfile.write(body)

    def _json(self, code: int, obj: dict) -> None:
        self._send(code, json.dumps(obj).encode())

    def _dispatch(self, method: str) -> None:
        split = urlsplit(self.path)
        path, query = split.path, parse_qs(split.query, keep_blank_values=True)
        upgrade = self.headers.get("Upgrade")
        self._rec = RequestRecord(method, path, query, upgrade)
        self.api.record(self._rec)
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if self.headers.get("Authorization") != f"Bearer {self.api.token}":
            self._rec.authorized = False
            return self._json(401, _status(401, "Unauthorized", "Unauthorized"))
        fault = self.api.fault_for(method, path)
        if fault:
            if fault.hang_s:
                self.api._stop.wait(fault.hang_s)
            if fault.retry_after is not None:
                self._extra_headers = {"Retry-After": fault.retry_after}
                return self._json(fault.status, _status(fault.status, "TooManyRequests",
                                                        "the server has received too many requests and has asked us to try again later"))
            return self._json(fault.status, _status(fault.status, "InternalError",
                                                    f"Internal error occurred: injected fault for {path}"))
        if method != "GET":
            return self._json(405, _status(405, "MethodNotAllowed",
                                           f"the server does not allow this method on the requested resource"))
        ns = self.api.incident.namespace
        if path == "/version":
            return self._json(200, {"major": "1", "minor": "30", "gitVersion": "v1.30.0-rlhealth-fake",
                                    "platform": "linux/amd64"})
        if path == "/api":
            return self._json(200, {"kind": "APIVersions", "versions": ["v1"],
                                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                                                    "serverAddress": f"127.0.0.1:{self.api.port}"}]})
        if path == "/apis":
            return self._json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []})
        if path == "/api/v1":
            return self._json(200, _API_RESOURCES)
        node = re.fullmatch(r"/api/v1/nodes/([^/]+)", path)
        if node:
            found = self.api.find_node(node.group(1))
            if found is None:
                return self._json(404, _status(404, "NotFound", f'nodes "{node.group(1)}" not found',
                                               {"name": node.group(1), "kind": "nodes"}))
            return self._json(200, found)
        m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/(pods|events)(?:/([^/]+))?(?:/(log|exec))?", path)
        if m and m.group(1) != ns:
            if m.group(2) in ("pods", "events") and not m.group(3):
                kind = "PodList" if m.group(2) == "pods" else "EventList"
                return self._json(200, {"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": "1"},
                                        "items": []})
            return self._json(404, _status(404, "NotFound", f'{m.group(2)} "{m.group(3)}" not found'))
        if not m:
            return self._json(404, _status(404, "NotFound", "the server could not find the requested resource"))
        _, resource, name, sub = m.groups()
        if resource == "events":
            if name:
                return self._json(404, _status(404, "NotFound", f'events "{name}" not found'))
            selector = (query.get("fieldSelector") or [""])[0]
            items = [e for e in self.api.incident.events if _field_selector_matches(selector, e)]
            return self._json(200, {"kind": "EventList", "apiVersion": "v1",
                                    "metadata": {"resourceVersion": "1"}, "items": items})
        if not name:
            selector = (query.get("labelSelector") or [""])[0]
            fsel = (query.get("fieldSelector") or [""])[0]
            items = [p for p in self.api.pods()
                     if _selector_matches(selector, p["metadata"].get("labels") or {})
                     and _field_selector_matches(fsel, p)]
            self.api.after_list()
            if "as=Table" in (self.headers.get("Accept") or ""):
                return self._json(200, _pod_table(items))
            return self._json(200, {"kind": "PodList", "apiVersion": "v1",
                                    "metadata": {"resourceVersion": "4711"}, "items": items})
        if sub == "exec":
            self.api.before_exec()
        pod = self.api.find_pod(name)
        if pod is None:
            return self._json(404, _status(404, "NotFound", f'pods "{name}" not found',
                                           {"name": name, "kind": "pods"}))
        if sub is None:
            return self._json(200, pod)
        if sub == "log":
            return self._log(pod, query)
        return self._exec(pod, query)

    def _log(self, pod: dict, query: dict) -> None:
        name = pod["metadata"]["name"]
        container = (query.get("container") or [pod["spec"]["containers"][0]["name"]])[0]
        if container not in [c["name"] for c in pod["spec"]["containers"]]:
            return self._json(400, _status(400, "BadRequest",
                                           f"container {container} is not valid for pod {name}"))
        previous = (query.get("previous") or ["false"])[0] == "true"
        text = self.api.incident.logs.get((name, previous))
        if text is None:
            if previous:
                return self._json(400, _status(400, "BadRequest",
                                               f'previous terminated container "{container}" in pod "{name}" not found'))
            text = ""
        lines = text.splitlines(keepends=True)
        tail = (query.get("tailLines") or [None])[0]
        if tail is not None:
            lines = lines[-int(tail):] if int(tail) > 0 else []
        body = "".join(lines).encode()
        limit = (query.get("limitBytes") or [None])[0]
        if limit is not None:
            body = body[:int(limit)]
        self._send(200, body, "text/plain")

    # ------------------------------------------------------------------ exec over websocket
    def _exec(self, pod: dict, query: dict) -> None:
        if (self.headers.get("Upgrade") or "").lower() != "websocket":
            return self._json(400, _status(400, "BadRequest", "Upgrade request required"))
        offered = [p.strip() for p in (self.headers.get("Sec-WebSocket-Protocol") or "").split(",") if p.strip()]
        proto = next((p for p in CHANNEL_PROTOCOLS if p in offered), None)
        if proto is None:
            return self._json(400, _status(400, "BadRequest", f"no supported subprotocol in {offered}"))
        container = (query.get("container") or [pod["spec"]["containers"][0]["name"]])[0]
        if container not in [c["name"] for c in pod["spec"]["containers"]]:
            return self._json(400, _status(400, "BadRequest",
                                           f"container {container} is not valid for pod {pod['metadata']['name']}"))
        if pod.get("status", {}).get("phase") != "Running":
            return self._json(400, _status(400, "BadRequest",
                                           "unable to upgrade connection: container not found "
                                           f"(\"{container}\")"))
        argv = query.get("command") or []
        self._rec.subprotocol = proto
        key = self.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self._rec.status = 101
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("Sec-WebSocket-Protocol", proto)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        handler = self.api.incident.exec_handler
        result = handler(pod["metadata"]["name"], list(argv)) if handler else ExecResult(
            stderr=b"no exec handler\n", exit_code=126)
        if result.hang:
            self.api._stop.wait(120)
            return
        # stdin was not requested; drain nothing. Send output, status, close.
        chunk = 16 * 1024
        for channel, data in ((1, result.stdout), (2, result.stderr)):
            for i in range(0, len(data), chunk):
                self.wfile.write(ws_frame(bytes([channel]) + data[i:i + chunk]))
        if proto == "channel.k8s.io":
            err = b"" if result.exit_code == 0 else f"command terminated with non-zero exit code: {result.exit_code}".encode()
        elif result.exit_code == 0:
            err = json.dumps({"metadata": {}, "status": "Success"}).encode()
        else:
            err = json.dumps({"metadata": {}, "status": "Failure",
                              "message": f"command terminated with non-zero exit code: error executing command "
                                         f"[{' '.join(argv)}], exit code {result.exit_code}",
                              "reason": "NonZeroExitCode",
                              "details": {"causes": [{"reason": "ExitCode",
                                                      "message": str(result.exit_code)}]}}).encode()
        if err:
            self.wfile.write(ws_frame(bytes([3]) + err))
        self.wfile.write(ws_frame(struct.pack("!H", 1000), opcode=0x8))
        self.wfile.flush()
        # wait briefly for the client's close frame, then hang up
        try:
            self.connection.settimeout(2)
            while True:
                frame = ws_read_frame(self.rfile)
                if frame is None or frame[0] == 0x8:
                    break
        except (OSError, ssl.SSLError, struct.error):
            pass
