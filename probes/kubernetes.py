"""Live, read-only probe of one Iris/CoreWeave job through the Kubernetes API.

``capture(args, now=...)`` writes a capture (contract §2.2) into the job's bundle
``<bundle-root>/jobs/<cluster>/<user>/<job>/rlhealth/captures/<stamp>/`` and returns the bundle
directory; the CLI then diagnoses that bundle exactly as ``rlhealth diagnose`` would.

Read-only by construction (contract §6). This is the only module that imports ``kubernetes``,
and every request it can make goes through two guards that refuse before anything is sent:
- REST: ``_GuardedApiClient.call_api`` admits only ``GET`` on pods (list/get), ``pods/log`` and
  events, and only with a timeout;
- exec: ``_guarded_websocket_call`` admits only the ``GET`` websocket upgrade of ``pods/exec`` whose
  ``command`` parameters pass ``rlhealth.probes.allowlist.check_command`` (``rules/remote_commands.yaml``).
No create/update/patch/delete method of the client is ever called; the only local subprocess is
the Iris CLI's ``job summary``, also allow-listed. Every call has a timeout (``--command-timeout``,
shortened to what is left of ``--deadline``); once the deadline passes nothing new is started.
Faults never raise: each becomes an ``error`` on its ``capture.json`` record, so the diagnosis
sees missing evidence and says ERROR with the reason.
"""
from __future__ import annotations

import functools
import json
import os
import posixpath
import re
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from rlhealth.probes import live
from rlhealth.probes.options import ProbeOptions
from rlhealth.usage import UsageError
from rlhealth.probes.allowlist import CommandRefused, check_command
from rlhealth.probes.capture import (CaptureWriter, ControllerState, GpuPoll, HardwareInfo, JobInfo, ProbeRecord,
                                     utc_iso)
from rlhealth.probes.parse import COUNT, read_count
from rlhealth.probes.parse import iris as iris_parse
from rlhealth.probes.parse import kubernetes as kparse
from rlhealth.probes.parse.roles import load_role_table
from rlhealth.probes.parse import launch as lp
from rlhealth.probes.parse.nvidia_smi import HEALTH_ARGS, QUERY_GPU_ARG, parse_compute_apps, parse_query_gpu

# Bounds (a capture must stay small and quick whatever the job prints).
LOG_TAIL_LINES = 20000
LOG_LIMIT_BYTES = 16 * 1024 * 1024
EXEC_OUTPUT_LIMIT = 8 * 1024 * 1024
RAY_LOG_DIR = "/tmp/ray/session_latest/logs"
RAY_TAIL_BYTES = 256 * 1024
RAY_MAX_FILES_PER_POD = 8
MAX_PODS = 64
LIST_ATTEMPTS = 3
EXEC_TIMEOUTS_BEFORE_GIVING_UP = 2
READ_CONCURRENCY = 8        # independent reads (logs, nodes) in flight at once

INVENTORY_ARGV = ["nvidia-smi", "--query-gpu=index,uuid,name", "--format=csv,noheader"]
QUERY_GPU_ARGV = ["nvidia-smi", QUERY_GPU_ARG, "--format=csv,noheader"]
COMPUTE_APPS_ARGV = ["nvidia-smi", "--query-compute-apps=gpu_uuid,pid,process_name,used_memory",
                     "--format=csv,noheader"]
PS_ARGV = ["ps", "-eo", "pid,args", "--no-headers", "-ww"]
DMESG_ARGV = ["dmesg", "--time-format=iso", "--level=err,crit,alert,emerg"]
RAY_LS_ARGV = ["ls", "-la", "--time-style=full-iso", "--", RAY_LOG_DIR]
_RAY_FILE_PRIORITY = [re.compile(p) for p in (
    r"^raylet\.(out|err)$", r"^gcs_server\.(out|err)$", r"^python-core-driver-.*\.log$",
    r"^worker-.*\.err$", r"^worker-.*\.out$", r"^monitor\.(out|err|log)$")]
_SAFE_FILE = re.compile(r"^[A-Za-z0-9_.+@=,:-]+$")


class RefusedRequest(Exception):
    """A Kubernetes request outside the read-only set; it was not sent."""


# --------------------------------------------------------------------------- the guards

_REST_ALLOWED = [re.compile(p) for p in (
    r"^/api/v1/namespaces/[a-z0-9-]+/pods$",
    r"^/api/v1/namespaces/[a-z0-9-]+/pods/[a-z0-9.-]+$",
    r"^/api/v1/namespaces/[a-z0-9-]+/pods/[a-z0-9.-]+/log$",
    r"^/api/v1/namespaces/[a-z0-9-]+/events$",
    r"^/api/v1/nodes/[a-z0-9.-]+$",     # one node by name: its labels name the GPU product
)]
_EXEC_PATH = re.compile(r"^/api/v1/namespaces/[a-z0-9-]+/pods/[a-z0-9.-]+/exec$")


def guard_rest(method: str, url: str, timeout: Any) -> None:
    path = urlsplit(url).path
    if method.upper() != "GET":
        raise RefusedRequest(f"{method} {path}: only GET is allowed")
    if not any(p.match(path) for p in _REST_ALLOWED):
        raise RefusedRequest(f"GET {path}: not a read-only pods/log/events/node endpoint")
    if not timeout:
        raise RefusedRequest(f"GET {path}: every call needs a timeout")


def guard_exec(method: str, url: str, query_params: list[tuple[str, Any]] | None, timeout: Any) -> list[str]:
    path = urlsplit(url).path
    if method.upper() != "GET" or not _EXEC_PATH.match(path):
        raise RefusedRequest(f"{method} {path}: only the pods/exec websocket upgrade is allowed")
    argv: list[str] = []
    # The generated client may put the query in the URL or pass it separately: check both.
    params = list(parse_qsl(urlsplit(url).query, keep_blank_values=True)) + list(query_params or [])
    for key, value in params:
        if key == "command":
            argv.extend(value if isinstance(value, list) else [value])
        elif key == "stdin" and str(value).lower() == "true":
            raise RefusedRequest("exec with stdin is not allowed")
        elif key == "tty" and str(value).lower() == "true":
            raise RefusedRequest("exec with a tty is not allowed")
    check_command(argv)  # raises CommandRefused
    if not timeout:
        raise RefusedRequest(f"exec {argv}: every call needs a timeout")
    return argv


def _make_client(kubeconfig: str | None, context: str | None, temp_dir: str):
    """(CoreV1Api, guarded stream function) for the given kubeconfig/context."""
    import importlib

    from kubernetes import client, config
    from kubernetes.stream import ws_client

    stream_mod = importlib.import_module("kubernetes.stream.stream")  # the module, not the function

    class _GuardedApiClient(client.ApiClient):
        _local = threading.local()      # reads run on several threads: each sees its own last request

        @property
        def last_request(self) -> str | None:
            return getattr(self._local, "last_request", None)

        @last_request.setter
        def last_request(self, value: str | None) -> None:
            self._local.last_request = value

        def call_api(self, method, url, header_params=None, body=None, post_params=None,
                     _request_timeout=None):
            guard_rest(method, url, _request_timeout)
            parts = urlsplit(url)
            self.last_request = f"{method.upper()} {parts.path}" + (f"?{parts.query}" if parts.query else "")
            return super().call_api(method, url, header_params=header_params, body=body,
                                    post_params=post_params, _request_timeout=_request_timeout)

    def _guarded_websocket_call(configuration, method, url, **kwargs):
        guard_exec(method, url, kwargs.get("query_params"), kwargs.get("_request_timeout"))
        return ws_client.websocket_call(configuration, method, url, **kwargs)

    cfg = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg,
                            persist_config=False, temp_file_path=temp_dir)
    cfg.retries = False          # no hidden urllib3 retries: every attempt is ours and recorded
    api_client = _GuardedApiClient(cfg)
    api = client.CoreV1Api(api_client)
    guarded_stream = functools.partial(stream_mod._websocket_request, _guarded_websocket_call, None)
    return api, api_client, guarded_stream


# --------------------------------------------------------------------------- data files



# --------------------------------------------------------------------------- the session

@dataclass
class _Deadline:
    total_s: float
    start: float = field(default_factory=time.monotonic)

    def remaining(self) -> float:
        return self.total_s - (time.monotonic() - self.start)

    def expired(self) -> bool:
        return self.remaining() <= 0.5


@dataclass
class _ExecOutcome:
    stdout: bytes = b""
    stderr: bytes = b""
    exit_code: int | None = None
    error: str | None = None
    timed_out: bool = False
    gone: bool = False
    forbidden: bool = False     # the API refused exec (HTTP 403): the identity may not exec at all


@dataclass
class _Read:
    """One GET the probe means to make: its record name, client method, path and parameters (for
    the record), client keyword arguments, where the body goes, and what it is (for messages)."""
    name: str
    method_name: str
    path: str
    params: dict
    kwargs: dict
    output: str | None
    what: str


@dataclass
class _Answer:
    """What one GET got: the body and status, or the fault (``error``), or a refusal by the guard."""
    started: datetime
    finished: datetime
    api: str
    body: bytes | None = None
    status: int | None = None
    error: str | None = None
    refused: str | None = None
    retry_after: float | None = None


def _short(text: str, n: int = 400) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n] + "..."


def _retry_after(exc: BaseException) -> float | None:
    """Seconds of an HTTP ``Retry-After`` header on an API error (None when absent or a date)."""
    headers = getattr(exc, "headers", None) or {}
    try:
        value = headers.get("Retry-After") if hasattr(headers, "get") else None
        return max(0.0, float(value)) if value is not None else None
    except (TypeError, ValueError):
        return None


def _api_error(exc: BaseException) -> tuple[str, int | None]:
    """A one-line reason and the HTTP status (None for transport errors)."""
    status = getattr(exc, "status", None)
    body = getattr(exc, "body", None)
    message = None
    if body:
        try:
            message = json.loads(body).get("message")
        except (ValueError, AttributeError, TypeError):
            message = body if isinstance(body, str) else None
    if status:
        return _short(f"HTTP {status} {getattr(exc, 'reason', '') or ''}: {message or ''}".strip(" :")), status
    name = type(exc).__name__
    text = str(exc) or name
    if "timed out" in text.lower() or "timeout" in name.lower():
        return _short(f"timed out: {name}: {text}"), None
    return _short(f"{name}: {text}"), None


class _Probe:
    def __init__(self, args: ProbeOptions, now: datetime, writer: CaptureWriter, bundle: Path, job_id: str,
                 cluster: str, manifest: dict | None):
        self.args, self.now, self.writer, self.bundle = args, now, writer, bundle
        self.job_id, self.cluster, self.manifest = job_id, cluster, manifest
        self.namespace = args.namespace or "iris"
        self.deadline = _Deadline(args.deadline_s)
        self.command_timeout = args.command_timeout_s
        self.poll_interval = args.poll_interval_s
        self.polls = max(1, int(args.polls or 1))
        self.m0 = time.monotonic()
        self.api = self.api_client = self.stream = None
        self.deadline_noted = False
        self.exec_timeouts: dict[str, int] = {}
        self.exec_refused: str | None = None    # why exec was refused (403); no exec is sent after it
        self.gone: set[str] = set()
        self.roles = load_role_table()
        self.retry_after: float | None = None

    # ---------------------------------------------------------------- clock and records
    def clock(self) -> datetime:
        return self.now + timedelta(seconds=time.monotonic() - self.m0)

    def timeout(self) -> float:
        return max(0.5, min(self.command_timeout, self.deadline.remaining()))

    def out_of_time(self, what: str) -> bool:
        if not self.deadline.expired():
            return False
        if not self.deadline_noted:
            self.deadline_noted = True
            t = utc_iso(self.clock())
            self.writer.record(ProbeRecord(
                name="deadline", started_at=t, finished_at=t,
                error=live.with_fix(f"probe deadline {self.args.deadline_text} reached; not started: {what} and everything after it",
                                    "deadline", deadline=self.args.deadline_text)))
        return True

    def record(self, name: str, started: datetime, *, api: str | None = None, argv: list[str] | None = None,
               exit_code: int | None = None, output: str | None = None, error: str | None = None,
               finished: datetime | None = None) -> None:
        self.writer.record(ProbeRecord(name=name, api=api, argv=argv, started_at=utc_iso(started),
                                       finished_at=utc_iso(finished or self.clock()), exit_code=exit_code,
                                       output=output, error=error))

    # ---------------------------------------------------------------- REST
    def _api_repr(self, path: str, params: dict) -> str:
        q = urlencode({k: v for k, v in params.items() if v is not None})
        return f"GET {path}" + (f"?{q}" if q else "")

    def rest(self, name: str, method_name: str, path: str, params: dict, kwargs: dict,
             output: str | None) -> tuple[bytes | None, int | None, str | None]:
        """One guarded GET; writes the body to ``output`` on success. Returns (body, status, error)."""
        return self._commit(_Read(name, method_name, path, params, kwargs, output, ""), self._get(method_name, path, params, kwargs))

    def _get(self, method_name: str, path: str, params: dict, kwargs: dict) -> "_Answer":
        """One guarded GET, nothing written or recorded (safe on a worker thread)."""
        started = self.clock()
        self.api_client.last_request = None
        try:
            fn = getattr(self.api, method_name)
            resp = fn(**kwargs, _preload_content=False, _request_timeout=(self.timeout(), self.timeout()))
            return _Answer(started, self.clock(), self.api_client.last_request or self._api_repr(path, params),
                           body=resp.data, status=resp.status)
        except (RefusedRequest, CommandRefused) as exc:
            return _Answer(started, self.clock(), self._api_repr(path, params), refused=f"refused before sending: {exc}")
        except Exception as exc:  # noqa: BLE001 - every fault becomes a recorded error
            reason, status = _api_error(exc)
            return _Answer(started, self.clock(), self.api_client.last_request or self._api_repr(path, params),
                           status=status, error=reason, retry_after=_retry_after(exc))

    def _commit(self, read: "_Read", answer: "_Answer") -> tuple[bytes | None, int | None, str | None]:
        """Write and record one answered GET (on the probe's own thread, in request order)."""
        if answer.refused is not None:
            self.record(read.name, answer.started, api=answer.api, error=answer.refused, finished=answer.finished)
            return None, None, answer.refused
        if answer.error is not None:
            self.retry_after = answer.retry_after
            self.record(read.name, answer.started, api=answer.api, error=self._with_fix(answer.error, answer.status),
                        finished=answer.finished)
            return None, answer.status, answer.error
        if read.output is not None:
            self.writer.write_bytes(read.output, answer.body)
        self.record(read.name, answer.started, api=answer.api, exit_code=None, output=read.output, finished=answer.finished)
        return answer.body, answer.status, None

    def read_all(self, reads: list["_Read"]) -> list[tuple[bytes | None, int | None, str | None] | None]:
        """Independent GETs, at most ``READ_CONCURRENCY`` in flight; answers written and recorded in
        the order of ``reads``. A read the deadline leaves no time for is not sent (None), and the
        deadline is noted once, naming it."""
        def one(read: _Read) -> _Answer | None:
            if self.deadline.expired():
                return None
            return self._get(read.method_name, read.path, read.params, read.kwargs)

        if len(reads) > 1:
            with ThreadPoolExecutor(max_workers=min(READ_CONCURRENCY, len(reads)),
                                    thread_name_prefix="rlhealth-k8s-read") as pool:
                answers = list(pool.map(one, reads))
        else:
            answers = [one(r) for r in reads]
        results: list[tuple[bytes | None, int | None, str | None] | None] = []
        for read, answer in zip(reads, answers):
            if answer is None:
                self.out_of_time(read.what)
                results.append(None)
            else:
                results.append(self._commit(read, answer))
        return results

    def _with_fix(self, reason: str, status: int | None) -> str:
        """The API fault's reason with the fix that ends it (``rules/capture_probes.yaml``)."""
        context = dict(kubeconfig=self.args.kubeconfig or "the default kubeconfig", context=self.args.context or "(current)",
                       namespace=self.namespace, status=status,
                       retry_after=f"{self.retry_after:g}" if self.retry_after is not None else "?")
        kind = {401: "kube_credentials_expired", 403: "kube_forbidden", 429: "api_throttled"}.get(status or 0)
        if kind is None and status is not None and status >= 500:
            kind = "api_unavailable"
        return live.with_fix(reason, kind, **context) if kind else reason

    # ---------------------------------------------------------------- exec
    def exec(self, pod: str, argv: list[str], name: str, output: str | None) -> _ExecOutcome:
        started = self.clock()
        api = f"GET /api/v1/namespaces/{self.namespace}/pods/{pod}/exec?" + urlencode(
            [("command", a) for a in argv] + [("container", kparse.TASK_CONTAINER), ("stderr", "True"),
                                              ("stdin", "False"), ("stdout", "True"), ("tty", "False")])
        try:
            check_command(argv)
        except CommandRefused as exc:
            self.record(name, started, api=api, argv=list(argv), error=f"refused before sending: {exc}")
            return _ExecOutcome(error=str(exc))
        if self.exec_refused is not None:    # reported once, on the refused exec: nothing more is sent
            return _ExecOutcome(error=self.exec_refused, forbidden=True)
        if pod in self.gone:
            self.record(name, started, api=api, argv=argv, error="not sent: pod is gone (NotFound earlier)")
            return _ExecOutcome(error="pod gone", gone=True)
        if self.exec_timeouts.get(pod, 0) >= EXEC_TIMEOUTS_BEFORE_GIVING_UP:
            self.record(name, started, api=api, argv=argv,
                        error=f"not sent: {self.exec_timeouts[pod]} exec timeouts on this pod already")
            return _ExecOutcome(error="pod unresponsive", timed_out=True)
        outcome = self._exec_ws(pod, argv)
        if outcome.timed_out:
            self.exec_timeouts[pod] = self.exec_timeouts.get(pod, 0) + 1
            outcome.error = live.with_fix(outcome.error or "timed out", "exec_timeout", pod=pod,
                                          timeout=f"{self.command_timeout:g}s")
        if outcome.gone:
            self.gone.add(pod)
        if outcome.forbidden:
            outcome.error = live.with_fix(f"{outcome.error}; no further exec is sent in this probe (GPU polls, "
                                          "process lists, stacks and in-pod files are not read)", "exec_forbidden",
                                          context=self.args.context or "(current)", namespace=self.namespace)
            self.exec_refused = outcome.error
        written = None
        if output is not None and (outcome.stdout or outcome.exit_code is not None):
            written = self.writer.write_bytes(output, outcome.stdout)
            if outcome.stderr:
                self.writer.write_bytes(output + ".stderr", outcome.stderr)
        self.record(name, started, api=api, argv=argv, exit_code=outcome.exit_code, output=written,
                    error=outcome.error)
        return outcome

    def _exec_ws(self, pod: str, argv: list[str]) -> _ExecOutcome:
        import websocket  # the kubernetes client's websocket transport

        timeout = self.timeout()
        end = time.monotonic() + timeout
        previous_default = websocket.getdefaulttimeout()
        websocket.setdefaulttimeout(timeout)  # bounds the TLS connect and the upgrade handshake
        ws = None
        try:
            ws = self.stream(self.api.connect_get_namespaced_pod_exec, pod, self.namespace,
                             command=list(argv), container=kparse.TASK_CONTAINER, stderr=True,
                             stdin=False, stdout=True, tty=False, _preload_content=False,
                             _request_timeout=timeout, binary=True)
            while ws.is_open() and time.monotonic() < end:
                ws.update(timeout=max(0.05, end - time.monotonic()))
            timed_out = ws.is_open()
            stdout = ws.read_channel(1) or b""
            stderr = ws.read_channel(2) or b""
            status_raw = ws.read_channel(3) or b""
            if isinstance(stdout, str):
                stdout = stdout.encode()
            if isinstance(stderr, str):
                stderr = stderr.encode()
            if isinstance(status_raw, bytes):
                status_raw = status_raw.decode("utf-8", "replace")
            if timed_out:
                return _ExecOutcome(stdout=stdout[:EXEC_OUTPUT_LIMIT], stderr=stderr[:EXEC_OUTPUT_LIMIT],
                                    error=f"timed out after {timeout:.0f}s waiting for the command to finish",
                                    timed_out=True)
            exit_code, error = _exec_status(status_raw, ws.subprotocol)
            if exit_code not in (0, None) and error is None:
                error = f"exit code {exit_code}: {_short(stderr.decode('utf-8', 'replace'), 300)}"
            return _ExecOutcome(stdout=stdout[:EXEC_OUTPUT_LIMIT], stderr=stderr[:EXEC_OUTPUT_LIMIT],
                                exit_code=exit_code, error=error)
        except (RefusedRequest, CommandRefused) as exc:
            return _ExecOutcome(error=f"refused before sending: {exc}")
        except Exception as exc:  # noqa: BLE001
            text = str(getattr(exc, "reason", "") or exc)
            status_line = text.split("-+-")[0]
            if "404" in status_line:
                return _ExecOutcome(error=f"pod not found (NotFound): {_short(text, 200)}", gone=True)
            if re.search(r"\b403\b", status_line):
                return _ExecOutcome(error=f"exec refused (HTTP 403 Forbidden): {_short(text, 200)}", forbidden=True)
            low = text.lower()
            if "timed out" in low or "timeout" in low:
                return _ExecOutcome(error=f"timed out after {timeout:.0f}s: {_short(text, 200)}", timed_out=True)
            return _ExecOutcome(error=f"exec failed: {type(exc).__name__}: {_short(text, 300)}")
        finally:
            websocket.setdefaulttimeout(previous_default)
            if ws is not None:
                try:
                    ws.close()
                except Exception:  # noqa: BLE001
                    pass

    # ---------------------------------------------------------------- steps
    def connect(self) -> bool:
        started = self.clock()
        kubeconfig = str(self.args.kubeconfig) if self.args.kubeconfig else None
        context = self.args.context
        job = (self.manifest or {}).get("job") or {}
        mcluster = job.get("cluster") if isinstance(job, dict) else None
        if isinstance(mcluster, dict):  # the watcher's bundle names the cluster's kubeconfig/context
            if kubeconfig is None and mcluster.get("kubeconfig") not in (None, "", "."):
                candidate = os.path.expanduser(str(mcluster["kubeconfig"]))
                if os.path.exists(candidate):
                    kubeconfig = candidate
            if context is None and mcluster.get("context"):
                context = mcluster["context"]
        self._tmp = tempfile.mkdtemp(prefix="rlhealth-kube-")
        try:
            self.api, self.api_client, self.stream = _make_client(kubeconfig, context, self._tmp)
            return True
        except Exception as exc:  # noqa: BLE001
            where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
            readable = bool(kubeconfig is None or os.access(kubeconfig, os.R_OK))
            kind = "kube_context_missing" if readable and "context" in str(exc).lower() else "kubeconfig_unreadable"
            self.record("kubeconfig", started, error=live.with_fix(
                _short(f"cannot load kubeconfig {kubeconfig or '(default)'} context {context or '(current)'}: "
                       f"{type(exc).__name__}: {exc}", 300), kind, kubeconfig=where))
            return False

    def _list_pods(self, name: str, what: str, path: str, query: dict, kwargs: dict, raw: str):
        """One pod list with retries on 5xx/429 inside the deadline: (raw body, parsed JSON) or (None, None)."""
        body = None
        for attempt in range(LIST_ATTEMPTS):
            if self.out_of_time(what):
                return None, None
            self.retry_after = None
            body, status, _err = self.rest(name, "list_namespaced_pod", path, query, kwargs, raw)
            if body is not None or (status is not None and status < 500 and status != 429):
                break
            wait = self.retry_after if status == 429 and self.retry_after is not None else 2 ** attempt
            if attempt + 1 < LIST_ATTEMPTS and wait >= self.deadline.remaining() - 1:
                t = utc_iso(self.clock())
                self.writer.record(ProbeRecord(name=name, started_at=t, finished_at=t, error=self._with_fix(
                    f"not retried: the server asks to wait {wait:g}s, more than is left of --deadline "
                    f"{self.args.deadline_text}", status)))
                break
            time.sleep(min(wait, max(0.0, self.deadline.remaining() - 1)))
        if body is None:
            return None, None
        try:
            return body, json.loads(body)
        except ValueError:
            self.record("pods:parse", self.clock(), output=raw, error="the pod list is not JSON")
            return None, None

    def discover(self) -> tuple[dict | None, list[kparse.PodInfo]]:
        """The job's PodList (written to pods.json) and its pods; (None, []) if the API failed."""
        ns = self.namespace
        path = f"/api/v1/namespaces/{ns}/pods"
        selector = f"{kparse.JOB_LABEL}={kparse.job_label_value(self.job_id)}"
        body, by_label = self._list_pods("pods:list-by-label", "pod discovery", path, {"labelSelector": selector},
                                         {"namespace": ns, "label_selector": selector}, "raw/pods.by-label.json")
        if by_label is None:
            return None, []
        pods = kparse.job_pods(by_label, self.job_id)
        if pods:
            self.writer.write_bytes("pods.json", body)
            return by_label, pods
        # No labelled pods: list the namespace and match names / kueue pod-group labels client-side.
        body, everything = self._list_pods("pods:list-namespace", "pod discovery (namespace list)", path, {},
                                           {"namespace": ns}, "raw/pods.namespace.json")
        if everything is None:
            return None, []
        filtered = kparse.filter_pod_list(everything, self.job_id)
        started = self.clock()
        self.writer.write_json("pods.json", filtered)
        # not an API call: pods.json is raw/pods.namespace.json with only this job's items kept
        self.record("pods:select-job-pods", started, output="pods.json")
        return filtered, kparse.job_pods(filtered, self.job_id)

    def controller_state(self, pods_ok: bool, pods: list[kparse.PodInfo]) -> None:
        summary = None
        exe = shutil.which("iris")
        iris_note = "iris CLI not installed"
        if exe and not self.out_of_time("iris job summary"):
            argv = ["iris", f"--cluster={self.cluster}", "job", "summary", self.job_id]
            started = self.clock()
            try:
                check_command(argv)
                env = dict(os.environ)
                if self.args.kubeconfig:
                    env["KUBECONFIG"] = str(self.args.kubeconfig)
                proc = subprocess.run(argv, capture_output=True, timeout=self.timeout(), env=env,
                                      stdin=subprocess.DEVNULL, check=False)
                out = self.writer.write_bytes("raw/iris_job_summary.txt", proc.stdout)
                if proc.stderr:
                    self.writer.write_bytes("raw/iris_job_summary.stderr", proc.stderr)
                text = proc.stdout.decode("utf-8", "replace")
                summary = iris_parse.parse_job_summary(text) if proc.returncode == 0 else None
                err = None
                if proc.returncode != 0:
                    err = f"exit {proc.returncode}: {_short(proc.stderr.decode('utf-8', 'replace'), 300)}"
                elif summary is None or summary.get("state") is None:
                    err = "no recognizable 'State:' line in the summary"
                    summary = None
                self.record("iris:job-summary", started, argv=argv, exit_code=proc.returncode, output=out,
                            error=err)
                iris_note = f"iris job summary failed ({err})" if err else ""
            except CommandRefused as exc:
                self.record("iris:job-summary", started, argv=argv, error=f"refused before running: {exc}")
            except subprocess.TimeoutExpired:
                self.record("iris:job-summary", started, argv=argv,
                            error=f"timed out after {self.timeout():.0f}s")
                iris_note = "iris job summary timed out"
            except OSError as exc:
                self.record("iris:job-summary", started, argv=argv, error=f"{type(exc).__name__}: {exc}")
                iris_note = "iris job summary could not run"
        started = self.clock()
        if summary is not None:
            state = iris_parse.state_from_summary(summary, pods)
            self.writer.write_json("state.json", state)
            self.record("state", started, output="state.json")
            return
        if not pods_ok:
            self.record("state", started, error=f"controller state unknown: {iris_note} and the pod list "
                                                 "could not be read; state.json not written")
            return
        state, note = iris_parse.derive_state(pods, self.manifest)
        if state is None:
            self.record("state", started, error=f"controller state unknown: {iris_note}; {note}")
            return
        self.writer.write_json("state.json", state)
        self.record("state", started, output="state.json", error=f"{iris_note}; state {note}".lstrip("; "))

    def nodes(self, pods: list[kparse.PodInfo]) -> None:
        """The nodes the newest generation's pods run on, one GET each however many pods share one
        (``raw/nodes/<node>.json``, read concurrently); ``nodes.json`` keeps their names and labels
        (the GPU product labels). Reading nodes needs a cluster-scoped ``get nodes`` permission: a
        refusal is recorded and only listed."""
        names = sorted({p.node for p in kparse.newest_generation(pods) if p.node})[:MAX_PODS]
        if not names or self.out_of_time(f"node {names[0]}"):
            return
        reads = [_Read("node:get", "read_node", f"/api/v1/nodes/{node}", {}, {"name": node},
                       f"raw/nodes/{node}.json", f"node {node}") for node in names]
        bodies = [r[0] for r in self.read_all(reads) if r is not None and r[0] is not None]
        if bodies:
            self.writer.write_json("nodes.json", kparse.node_list(bodies))

    def logs_and_events(self, pods: list[kparse.PodInfo]) -> None:
        """Every pod's task log (and the previous container's after a restart), read concurrently,
        then the namespace's events listed once and kept for the job's pods (``events.json``)."""
        ns = self.namespace
        pods = pods[:MAX_PODS]
        reads = []
        for pod in pods:
            base = f"/api/v1/namespaces/{ns}/pods/{pod.name}/log"
            for previous in ([False, True] if pod.restart_count > 0 else [False]):
                suffix = ".previous.log" if previous else ".log"
                params = {"container": kparse.TASK_CONTAINER, "limitBytes": LOG_LIMIT_BYTES,
                          "previous": "true" if previous else None, "tailLines": LOG_TAIL_LINES}
                kwargs = {"name": pod.name, "namespace": ns, "container": kparse.TASK_CONTAINER,
                          "tail_lines": LOG_TAIL_LINES, "limit_bytes": LOG_LIMIT_BYTES}
                if previous:
                    kwargs["previous"] = True
                reads.append(_Read("pod:log-previous" if previous else "pod:log", "read_namespaced_pod_log",
                                   base, params, kwargs, f"pod_logs/{pod.name}{suffix}", f"logs of {pod.name}"))
        if reads and self.out_of_time(reads[0].what):
            return
        for read, result in zip(reads, self.read_all(reads)):
            if result is not None and result[1] == 404:
                self.gone.add(read.kwargs["name"])
        if not pods or self.out_of_time(f"events of namespace {ns}"):
            return
        body, _, _ = self.rest("events:list-namespace", "list_namespaced_event", f"/api/v1/namespaces/{ns}/events",
                               {}, {"namespace": ns}, "raw/events.namespace.json")
        if body is None:
            return
        try:
            listed = json.loads(body)
        except ValueError:
            return
        if not isinstance(listed, dict):
            return
        # the job's pods' events, pod by pod in pod order (as the per-pod lists gave them)
        self._write_events([e for pod in pods for e in kparse.events_for(listed, [pod.name])], True)

    def _write_events(self, merged: list[dict], ok: bool) -> None:
        if ok:
            self.writer.write_json("events.json", {"kind": "EventList", "apiVersion": "v1", "metadata": {},
                                                   "items": merged})

    def live(self, pods: list[kparse.PodInfo]) -> None:
        """GPU polls, process roles, stacks and Ray log tails from the running pods (newest generation)."""
        targets = [p for p in kparse.newest_generation(pods) if p.running][:MAX_PODS]
        if not targets:
            return
        inventory: dict[str, list[dict]] = {}
        ps_rows: dict[str, list[dict]] = {}
        for pod in targets:
            if self.out_of_time(f"GPU inventory of {pod.name}"):
                break
            out = self.exec(pod.name, INVENTORY_ARGV, "exec:nvidia-smi-inventory",
                            f"raw/exec/{pod.name}/nvidia-smi.inventory.csv")
            inventory[pod.name] = kparse.parse_gpu_inventory(out.stdout.decode("utf-8", "replace"))
            if self.out_of_time(f"process list of {pod.name}"):
                break
            out = self.exec(pod.name, PS_ARGV, "exec:ps", f"raw/exec/{pod.name}/ps.txt")
            ps_rows[pod.name] = kparse.parse_ps(out.stdout.decode("utf-8", "replace"))
        rows: list[GpuPoll] = []
        t0 = time.monotonic()
        for i in range(self.polls):
            if self.exec_refused is not None:
                break           # polls are exec; the refusal is recorded once already
            due = t0 + i * self.poll_interval
            if i == 1:
                self.stacks_and_ray_logs(targets, ps_rows)  # use the wait between polls
            wait = due - time.monotonic()
            if wait > 0:
                if wait >= self.deadline.remaining() - 1:
                    self._note_deadline(f"GPU poll {i + 1}/{self.polls} and later (due after the deadline)")
                    break
                time.sleep(wait)
            for pod in targets:
                if self.out_of_time(f"GPU poll {i + 1}/{self.polls} of {pod.name}"):
                    break
                rows.extend(self.poll(pod.name, i, inventory.get(pod.name) or [], ps_rows.get(pod.name) or []))
            if self.deadline.expired():
                break
        if self.polls == 1:
            self.stacks_and_ray_logs(targets, ps_rows)
        self.writer.write_jsonl("gpu_polls.jsonl", rows)
        self.gpu_health(targets)
        self.flight_recorder(targets, ps_rows)
        launch = self.launch(targets, ps_rows)
        self.job_info(targets, inventory, launch)

    def gpu_health(self, targets: list[kparse.PodInfo]) -> None:
        """``nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER`` and the kernel log (Xid) once per pod."""
        sources = []
        for pod in targets:
            if self.out_of_time(f"GPU health of {pod.name}"):
                break
            h = self.exec(pod.name, ["nvidia-smi", *HEALTH_ARGS], "exec:nvidia-smi-health",
                          f"raw/exec/{pod.name}/nvidia-smi-health.txt")
            if self.out_of_time(f"kernel log of {pod.name}"):
                break
            k = self.exec(pod.name, DMESG_ARGV, "exec:dmesg", f"raw/exec/{pod.name}/dmesg.txt")
            sources.append((pod.name, f"raw/exec/{pod.name}/nvidia-smi-health.txt" if h.exit_code == 0 else None,
                            f"raw/exec/{pod.name}/dmesg.txt" if k.exit_code == 0 else None))
        live.write_gpu_health(self.writer.dir, [s for s in sources if s[1] or s[2]])

    def flight_recorder(self, targets: list[kparse.PodInfo], ps_rows: dict[str, list[dict]]) -> None:
        """The NCCL flight-recorder dumps of the trainer processes, fetched read-only when the pod logs
        show a hang signature or a stall (``rules/live_evidence.yaml``), and their summary."""
        logs = [(self.writer.dir / "pod_logs" / f"{p.name}.log", f"pod_logs/{p.name}.log") for p in targets]
        reason, measured = live.flight_recorder_reason([(p, r) for p, r in logs if p.is_file()], self.now.timestamp())
        live.record_decision(self.writer, utc_iso(self.clock()), reason, measured)
        if reason is None:
            return
        seen: set[str] = set()
        prefix_written = False
        for pod in targets:
            pids = [row["pid"] for row in ps_rows.get(pod.name) or []
                    if self.roles.role_of(row["args"]) in ("policy", "driver")]
            if not pids or self.out_of_time(f"flight recorder of {pod.name}"):
                continue
            env = self.exec(pod.name, ["cat", "--", f"/proc/{pids[0]}/environ"], "exec:trainer-environment", None)
            kept, prefix = live.nccl_env(env.stdout) if env.exit_code == 0 else ({}, live.policy()["flight_recorder"]["default_prefix"])
            if env.exit_code == 0:
                self.writer.write_bytes(f"raw/exec/{pod.name}/nccl_env_{pids[0]}.txt",
                                        "".join(f"{k}={v}\n" for k, v in sorted(kept.items())).encode())
            if not prefix_written:
                self.writer.write_bytes(f"{live.FR_DIR}/prefix.txt", (prefix + "\n").encode())
                prefix_written = True
            directory = posixpath.dirname(prefix) or "/"
            ls = self.exec(pod.name, ["ls", "-la", "--time-style=full-iso", "--", directory], "exec:flight-recorder-ls",
                           f"raw/exec/{pod.name}/fr_ls.txt")
            if ls.exit_code != 0:
                continue
            for path in live.dump_files(kparse.parse_ls_full_iso(ls.stdout.decode("utf-8", "replace")), prefix):
                name = posixpath.basename(path)
                if name in seen or self.out_of_time(f"flight-recorder dump {name}"):
                    continue
                seen.add(name)
                self.exec(pod.name, ["head", "-c", str(live.max_dump_bytes()), "--", path],
                          "exec:flight-recorder-dump", f"{live.FR_DIR}/dumps/{pod.name}/{name}")
        if live.write_flight_recorder_summary(self.writer.dir) is not None:
            started = self.clock()
            why = live.run_fr_trace(self.writer.dir)
            self.record("fr_trace", started, output=None if why else f"{live.FR_DIR}/fr_trace.txt", error=why)

    def launch(self, targets: list[kparse.PodInfo], ps_rows: dict[str, list[dict]]) -> list[tuple[str, int | None, str]]:
        """The launch arguments of the trainer (driver) pod: its task container's command and args as
        the API returned them (``pods.json``), the driver process's own command line
        (``/proc/<pid>/cmdline``), and the resolved configuration file they name, copied into ``config/``."""
        driver = next((p for p in targets if p.rank == 0), targets[0] if targets else None)
        if driver is None:
            return []
        args: list[tuple[str, int | None, str]] = []
        try:
            pod_list = json.loads((self.writer.dir / "pods.json").read_text())
        except (OSError, ValueError):
            pod_list = {}
        for pod in pod_list.get("items") or []:
            if (pod.get("metadata") or {}).get("name") == driver.name:
                args += [(t, None, f"pods.json {driver.name} container {kparse.TASK_CONTAINER}")
                         for t in lp.container_args(pod, kparse.TASK_CONTAINER)]
        pids = [row["pid"] for row in ps_rows.get(driver.name) or [] if self.roles.role_of(row["args"]) == "driver"]
        if pids and not self.out_of_time(f"command line of {driver.name}"):
            rel = f"raw/exec/{driver.name}/cmdline_{pids[0]}.txt"
            out = self.exec(driver.name, ["cat", "--", f"/proc/{pids[0]}/cmdline"], "exec:driver-cmdline", rel)
            if out.exit_code == 0:
                args += [(t, None, rel) for t in out.stdout.decode("utf-8", "replace").split("\0") if t]
        for path in lp.config_paths([t for t, _, _ in args]):
            if self.out_of_time(f"resolved config {path}"):
                break
            name = posixpath.basename(path)
            out = self.exec(driver.name, ["head", "-c", str(lp.MAX_CONFIG_BYTES), "--", path], "exec:resolved-config",
                            f"config/{name}" if name in lp.CONFIG_FILES else f"config/resolved_config{posixpath.splitext(name)[1]}")
            if out.exit_code == 0:
                break
        return args

    def _note_deadline(self, what: str) -> bool:
        if not self.deadline_noted:
            self.deadline_noted = True
            t = utc_iso(self.clock())
            self.writer.record(ProbeRecord(name="deadline", started_at=t, finished_at=t,
                                           error=live.with_fix(f"probe deadline {self.args.deadline_text} leaves no time for: {what}",
                                                               "deadline", deadline=self.args.deadline_text)))
        return True

    def poll(self, pod: str, i: int, inventory: list[dict], ps: list[dict]) -> list[GpuPoll]:
        t = self.clock()
        q = self.exec(pod, QUERY_GPU_ARGV, "exec:nvidia-smi-query-gpu", f"raw/exec/{pod}/query-gpu.poll{i}.csv")
        if q.error or q.exit_code not in (0,):
            return []
        a = self.exec(pod, COMPUTE_APPS_ARGV, "exec:nvidia-smi-compute-apps",
                      f"raw/exec/{pod}/compute-apps.poll{i}.csv")
        apps = parse_compute_apps(a.stdout.decode("utf-8", "replace")) if a.exit_code == 0 else []
        roles = kparse.gpu_roles(inventory, apps, ps, self.roles)
        out = []
        for row in parse_query_gpu(q.stdout.decode("utf-8", "replace")):
            role, procs = roles.get(row["gpu"], ("unknown", []))
            out.append(GpuPoll(t=utc_iso(t), host=pod, gpu=row["gpu"], util_pct=row["util_pct"],
                               mem_used_mib=row["mem_used_mib"], mem_total_mib=row["mem_total_mib"],
                               power_w=row["power_w"], role=role, processes=procs))
        return out

    def stacks_and_ray_logs(self, targets: list[kparse.PodInfo], ps_rows: dict[str, list[dict]]) -> None:
        for pod in targets:
            picked = [(row["pid"], self.roles.role_of(row["args"])) for row in ps_rows.get(pod.name) or []]
            picked = [(pid, role) for pid, role in picked if role in self.roles.stack_roles]
            for pid, role in picked[: self.roles.max_stacks_per_pod]:
                if self.out_of_time(f"py-spy dump of {pod.name} pid {pid}"):
                    return
                self.exec(pod.name, ["py-spy", "dump", "--pid", str(pid), "--nonblocking"],
                          f"exec:py-spy-dump:{role}", f"stacks/{pod.name}__{pid}.txt")
        for pod in targets:
            if self.out_of_time(f"Ray log listing of {pod.name}"):
                return
            ls = self.exec(pod.name, RAY_LS_ARGV, "exec:ray-logs-ls", f"raw/exec/{pod.name}/ray-logs.ls.txt")
            if ls.exit_code != 0:
                continue
            for name in _pick_ray_files(kparse.parse_ls_full_iso(ls.stdout.decode("utf-8", "replace"))):
                if self.out_of_time(f"Ray log tail {name} of {pod.name}"):
                    return
                self.exec(pod.name, ["tail", "-c", str(RAY_TAIL_BYTES), "--", f"{RAY_LOG_DIR}/{name}"],
                          "exec:ray-log-tail", f"ray_vllm_logs/{pod.name}/{name}")

    def job_info(self, targets: list[kparse.PodInfo], inventory: dict[str, list[dict]],
                 launch: list[tuple[str, int | None, str]]) -> None:
        info = JobInfo()
        sources: dict[str, str] = {}
        rows = [(pod, rows) for pod, rows in inventory.items() if rows]
        if rows:
            per_node = max(len(r) for _, r in rows)
            nodes = len({p.node or p.name for p in targets})
            info.hardware = HardwareInfo(gpu=kparse.gpu_class(rows[0][1][0]["name"]), gpus_per_node=per_node, nodes=nodes)
            sources["hardware.gpu"] = f"raw/exec/{rows[0][0]}/nvidia-smi.inventory.csv:1"
            sources["hardware.gpus_per_node"] = ", ".join(f"raw/exec/{pod}/nvidia-smi.inventory.csv" for pod, _ in rows)
        if targets:
            info.nodes = [p.name for p in targets]
            sources["nodes"] = "pods.json"
        config, config_rel = live.read_config(self.writer.dir)
        live.launch_into(info, sources, config, config_rel, launch)
        info.sources = dict(sorted(sources.items()))
        self.writer.write_json("job.json", info)
        self._retry_budget_into_state(info)

    def _retry_budget_into_state(self, info: JobInfo) -> None:
        """A controller state derived from pods has no retry budget; the launch's ``--max-retries``
        (job.json ``max_retries``) is the budget the restarts are counted against."""
        path = self.writer.dir / "state.json"
        if info.max_retries is None or not path.is_file():
            return
        state = ControllerState.model_validate_json(path.read_text())
        if state.max_retries is None:
            state.max_retries = info.max_retries
            self.writer.write_json("state.json", state)


def _pick_ray_files(entries: list[dict]) -> list[str]:
    """Which Ray log files to tail: by kind (raylet, gcs, driver, worker .err/.out), newest first."""
    files = [e for e in entries if e["type"] == "file" and e["size"] > 0 and _SAFE_FILE.match(e["name"])]
    picked: list[str] = []
    for pattern in _RAY_FILE_PRIORITY:
        group = sorted((e for e in files if pattern.match(e["name"])), key=lambda e: e["mtime"], reverse=True)
        for e in group:
            if len(picked) >= RAY_MAX_FILES_PER_POD:
                return picked
            if e["name"] not in picked:
                picked.append(e["name"])
    return picked


def _exec_status(raw: str, subprotocol: str | None) -> tuple[int | None, str | None]:
    """Exit code and error from the exec error channel (v4/v5: a Status JSON; v1: plain text)."""
    raw = (raw or "").strip()
    if not raw:
        return (0, None) if subprotocol == "channel.k8s.io" else (None, "no exit status on the error channel")
    try:
        status = json.loads(raw)
    except ValueError:
        m = re.search(rf"exit code:?\s*({COUNT})", raw)
        return (int(m.group(1)) if m else None), _short(raw, 300)
    if status.get("status") == "Success":
        return 0, None
    for cause in (status.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode":
            code = read_count(cause.get("message"))
            if code is None:
                break
            return code, None
    return None, _short(status.get("message") or raw, 300)


# --------------------------------------------------------------------------- entry point

def bundle_dir(bundle_root: Path, cluster: str, job_id: str) -> Path:
    user, job = kparse.split_job_id(job_id)
    return Path(bundle_root).expanduser() / "jobs" / cluster / user / job


def capture(args: ProbeOptions, *, now: datetime | None = None) -> Path:
    """Capture one Iris job's live evidence into its bundle; return the bundle directory.

    Raises ``UsageError`` only for bad arguments; every cluster-side fault is recorded.
    """
    now = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    job_id = args.job
    try:
        kparse.split_job_id(job_id)
    except ValueError as exc:
        raise UsageError(f"--job: {exc}") from exc
    cluster = args.cluster or ""
    if not cluster or "/" in cluster or cluster in (".", ".."):
        raise UsageError("--cluster: the Iris cluster name is required for --backend iris (e.g. cw-us-east-02a)")
    bundle = bundle_dir(args.bundle_root, cluster, job_id)
    manifest = None
    manifest_path = bundle / "manifest.json"
    if manifest_path.is_file():
        try:
            manifest = json.loads(manifest_path.read_text(errors="replace"))
        except (ValueError, OSError):
            manifest = None
    writer = CaptureWriter(bundle, backend="iris", cluster=cluster, job_id=job_id, now=now)
    writer.flush()
    probe = _Probe(args, now, writer, bundle, job_id, cluster, manifest)
    try:
        connected = probe.connect()
        pod_list, pods = probe.discover() if connected else (None, [])
        probe.controller_state(pod_list is not None, pods)
        if pod_list is not None:
            probe.nodes(pods)
            probe.logs_and_events(pods)
            probe.live(pods)
    except Exception as exc:  # noqa: BLE001 - never a traceback; the diagnosis reports ERROR
        t = utc_iso(probe.clock())
        writer.record(ProbeRecord(name="probe", started_at=t, finished_at=t,
                                  error=_short(f"internal probe failure: {type(exc).__name__}: {exc}", 500)))
    finally:
        tmp = getattr(probe, "_tmp", None)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
        if probe.api_client is not None:
            try:
                probe.api_client.close()
            except Exception:  # noqa: BLE001
                pass
        writer.flush()
    return bundle
