"""Live, read-only probe of one Slurm job (and its afterany chain) over SSH.

This is the only module that imports paramiko. Contract:

- ``capture(args, now=...) -> Path`` writes one capture directory into the job's bundle
  ``<bundle_root>/jobs/<cluster>/slurm/<job>/rlhealth/captures/<stamp>/`` (contract §2.2) and
  returns the bundle directory. It never raises for anything the cluster or the network does:
  a refused, failed, timed-out or unsent command is a ``ProbeRecord`` with ``error`` set, i.e.
  missing evidence. Bad options raise ``rlhealth.usage.UsageError``.
- Every remote command is an argv list passed through ``load_allowlist().shell_line`` (the
  read-only allow-list, ``rules/remote_commands.yaml``) *before* anything is sent; a refusal is
  recorded and the command is not sent. Nothing else ever reaches the remote shell.
- SSH honours ``~/.ssh/config`` (HostName, User, Port, IdentityFile, IdentitiesOnly, ProxyJump,
  ProxyCommand, UserKnownHostsFile), verifies the host key against known_hosts with
  ``RejectPolicy`` (an unknown or changed key is refused), never prompts (no passwords, no
  passphrases), bounds every command by ``--command-timeout`` and the whole probe by ``--deadline``.
- Normalized files (``state.json``, ``gpu_polls.jsonl``) are rebuilt from the raw files of the
  capture directory by ``normalize_capture`` (pure parsers in ``probes/parse/slurm.py``), so a
  capture can be re-normalized offline.

Raw file names inside the capture (the normalizer relies on them):
``slurm/scontrol_<id>.txt``, ``slurm/sacct_job.txt``, ``slurm/sacct_chain.txt``,
``slurm/squeue_chain.txt``, ``slurm/<id>.out`` / ``slurm/<id>.err`` (bounded tails; a
``.head`` file holds the beginning of a file too large to copy whole), ``raw/nvidia-smi_<node>_<id>.csv``,
``raw/ps_<node>_<id>.txt``, ``stacks/<node>__<pid>.txt``.
"""
from __future__ import annotations

import getpass
import json
import os
import posixpath
import re
import select
import socket
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import paramiko

from rlhealth.probes import live
from rlhealth.probes.allowlist import CommandRefused, load_allowlist
from rlhealth.probes.capture import (Attempt, CaptureWriter, ControllerState, GpuPoll, HardwareInfo, JobInfo,
                                     ProbeRecord, utc_iso)
from rlhealth.probes.options import ProbeOptions
from rlhealth.probes.parse import read_count
from rlhealth.probes.parse import launch as lp
from rlhealth.probes.parse import slurm as ps
from rlhealth.probes.parse.kubernetes import parse_ls_full_iso
from rlhealth.probes.parse.nvidia_smi import (HEALTH_ARGS, QUERY_APPS_ARG, QUERY_GPU_ARG, QUERY_INVENTORY_ARG,
                                              gpu_class, parse_compute_apps, parse_gpu_inventory, parse_query_gpu)
from rlhealth.probes.parse.roles import gpu_roles, load_role_table
from rlhealth.probes.parse.timestamps import parse_iso
from rlhealth.usage import UsageError

DEFAULT_CLUSTER = "jsc-jupiter"
SACCT_FIELDS = ["JobID", "JobName", "User", "State", "Submit", "Start", "End", "ExitCode",
                "Elapsed", "Timelimit", "NodeList", "WorkDir", "Reason"]
SACCT_FORMAT = "--format=" + ",".join(SACCT_FIELDS)
CHAIN_LOOKBACK = timedelta(days=14)   # how far before the requested leg's submission sacct looks
MAX_LEGS = 16                         # newest legs whose logs are copied
TAIL_BYTES = 4 * 1024 * 1024          # a log file up to this size is copied whole (tail -c)
HEAD_BYTES = 1024 * 1024              # larger files: this much of the beginning, plus the tail
MAX_OUTPUT_BYTES = TAIL_BYTES + 65536  # hard cap on what one command may return
MAX_NODES = 64                        # nodes of a running leg that get nvidia-smi / ps / py-spy (more are noted)
MAX_STACKS_PER_NODE = 4
_JOB_ID = re.compile(r"\d+(_\d+)?")
_HOST = re.compile(r"[A-Za-z0-9_.@-]+")


class ProbeAborted(Exception):
    """The probe cannot continue (SSH connection lost, overall deadline reached)."""


@dataclass
class CommandResult:
    exit_code: int | None
    stdout: bytes
    stderr: bytes
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None and self.exit_code == 0

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", errors="replace")


class Deadline:
    """One overall deadline; every command timeout is clipped to what is left of it."""

    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def remaining(self) -> float:
        return self.end - time.monotonic()

    def clip(self, timeout: float) -> float:
        return max(0.0, min(timeout, self.remaining()))


# ---- SSH ----------------------------------------------------------------------------------------

@dataclass
class SshTarget:
    alias: str
    hostname: str
    port: int
    user: str
    key_filenames: list[str]
    identities_only: bool
    proxy_jump: list[str]
    proxy_command: str | None
    known_hosts: list[Path]

    def describe(self) -> str:
        via = f" via {','.join(self.proxy_jump)}" if self.proxy_jump else ""
        return f"ssh://{self.user}@{self.hostname}:{self.port}{via}"


def _load_ssh_config(path: Path | None) -> paramiko.SSHConfig:
    if path and Path(path).is_file():
        return paramiko.SSHConfig.from_path(str(path))
    return paramiko.SSHConfig()


def resolve_target(alias: str, ssh_config: Path | None, known_hosts: Path | None) -> SshTarget:
    """What OpenSSH would use for ``alias`` per the config file (the subset we honour)."""
    user_part, _, host_part = alias.rpartition("@")
    host_alias, _, port_part = host_part.partition(":")
    conf = _load_ssh_config(ssh_config).lookup(host_alias)
    files = [Path(os.path.expanduser(p)) for p in conf.get("userknownhostsfile", "").split()]
    if known_hosts:
        files.insert(0, Path(known_hosts))
    jump = conf.get("proxyjump")
    return SshTarget(
        alias=alias,
        hostname=conf.get("hostname", host_alias),
        port=int(port_part or conf.get("port", 22)),
        user=user_part or conf.get("user") or getpass.getuser(),
        key_filenames=[os.path.expanduser(p) for p in conf.get("identityfile", [])],
        identities_only=conf.get("identitiesonly", "no").lower() == "yes",
        proxy_jump=[] if not jump or jump.lower() == "none" else [h.strip() for h in jump.split(",")],
        proxy_command=None if conf.get("proxycommand", "none").lower() == "none" else conf["proxycommand"],
        known_hosts=files,
    )


class SshSession:
    """A paramiko connection (through any ProxyJump hops) that runs allow-listed argv only."""

    def __init__(self, target: SshTarget, *, ssh_config: Path | None, connect_timeout: float):
        self.target = target
        self.ssh_config = ssh_config
        self.connect_timeout = connect_timeout
        self.clients: list[paramiko.SSHClient] = []
        self.allowlist = load_allowlist()

    def _client(self, target: SshTarget, sock=None) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        for f in target.known_hosts:
            if f.is_file():
                client.load_host_keys(str(f))
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        self.clients.append(client)
        if sock is None and target.proxy_command:
            sock = paramiko.ProxyCommand(target.proxy_command)
        client.connect(
            target.hostname, port=target.port, username=target.user,
            key_filename=target.key_filenames or None,
            look_for_keys=not target.identities_only, allow_agent=not target.identities_only,
            password=None, passphrase=None, sock=sock,
            timeout=self.connect_timeout, banner_timeout=self.connect_timeout,
            auth_timeout=self.connect_timeout, channel_timeout=self.connect_timeout,
        )
        return client

    def connect(self) -> None:
        sock = None
        hops = [resolve_target(h, self.ssh_config, self.target.known_hosts[0] if self.target.known_hosts else None)
                for h in self.target.proxy_jump]
        for i, hop in enumerate(hops):
            hop_client = self._client(hop, sock=sock)
            nxt = hops[i + 1] if i + 1 < len(hops) else self.target
            sock = hop_client.get_transport().open_channel(
                "direct-tcpip", (nxt.hostname, nxt.port), ("127.0.0.1", 0), timeout=self.connect_timeout)
        self.client = self._client(self.target, sock=sock)

    @property
    def alive(self) -> bool:
        transport = self.client.get_transport() if self.clients else None
        return bool(transport and transport.is_active())

    def run(self, argv: list[str], timeout: float) -> CommandResult:
        """Check ``argv`` against the allow-list (``CommandRefused`` propagates: nothing sent),
        run it, and return its output, bounded in time and size."""
        line = self.allowlist.shell_line(argv)
        if not self.alive:
            raise ProbeAborted("SSH connection lost")
        transport = self.client.get_transport()
        start = time.monotonic()
        try:
            chan = transport.open_session(timeout=max(timeout, 0.1))
            chan.exec_command(line)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            if not transport.is_active():
                raise ProbeAborted(f"SSH connection lost: {exc or type(exc).__name__}") from exc
            return CommandResult(None, b"", b"", f"could not start the command: {exc}")
        out, err = bytearray(), bytearray()
        error = None
        try:
            while True:
                left = timeout - (time.monotonic() - start)
                if left <= 0:
                    error = f"timed out after {timeout:.1f}s (command abandoned)"
                    break
                select.select([chan], [], [], min(left, 0.5))
                while chan.recv_ready():
                    out += chan.recv(65536)
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                if len(out) > MAX_OUTPUT_BYTES:
                    error = f"output larger than {MAX_OUTPUT_BYTES} bytes; truncated"
                    del out[MAX_OUTPUT_BYTES:]
                    break
                if chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
                    break
                if chan.closed or not transport.is_active():
                    break
        except (socket.error, paramiko.SSHException, EOFError) as exc:
            error = f"connection error while reading: {exc or type(exc).__name__}"
        exit_code = chan.recv_exit_status() if chan.exit_status_ready() else None
        chan.close()
        if error is None and (exit_code is None or exit_code == -1):
            if not transport.is_active():
                raise ProbeAborted("SSH connection lost while the command ran")
            error = "no exit status (channel closed by the server)"
            exit_code = None
        return CommandResult(exit_code, bytes(out), bytes(err), error)

    def close(self) -> None:
        for client in reversed(self.clients):
            try:
                client.close()
            except Exception:  # closing a dead connection must not turn into a failure
                pass


def describe_connect_error(exc: BaseException, target: SshTarget, ssh_config: Path | None = None) -> str:
    """One line naming the connect failure and its fix (``rules/capture_probes.yaml`` ``fixes``)."""
    known = ", ".join(map(str, target.known_hosts)) or "known_hosts"
    host = f"[{target.hostname}]:{target.port}" if target.port != 22 else target.hostname
    if isinstance(exc, paramiko.BadHostKeyException):
        return live.with_fix(f"host key of {exc.hostname} does not match known_hosts ({known}): refused",
                             "ssh_host_key_changed", host=host, known_hosts=known)
    if isinstance(exc, paramiko.SSHException) and "not found in known_hosts" in str(exc):
        return live.with_fix(f"{exc}: refused (no silent accept)", "ssh_host_key_unknown", host=host,
                             known_hosts=target.known_hosts[0] if target.known_hosts else "known_hosts")
    if isinstance(exc, paramiko.AuthenticationException):
        return live.with_fix(f"authentication failed for {target.user}@{target.hostname} (no prompts; key or agent only): {exc}",
                             "ssh_auth", ssh_config=ssh_config)
    return live.with_fix(f"{type(exc).__name__}: {exc}", "ssh_unreachable", host=target.alias, ssh_config=ssh_config)


# ---- the probe ----------------------------------------------------------------------------------

class SlurmProbe:
    """Runs the evidence plan for one job and records every command in the capture."""

    def __init__(self, writer: CaptureWriter, session: SshSession, job_id: str, *,
                 experiment_dir: str | None, command_timeout: float, deadline: Deadline,
                 polls: int = 1, poll_interval: float = 10.0, deadline_text: str = "", host: str = ""):
        self.w = writer
        self.session = session
        self.job_id = job_id
        self.experiment_dir = experiment_dir
        self.command_timeout = command_timeout
        self.deadline = deadline
        self.polls = max(1, polls)
        self.poll_interval = poll_interval
        self.deadline_text = deadline_text
        self.host = host

    def run(self, name: str, argv: list[str], output: str | None, keep=None) -> CommandResult:
        """One remote command: refused / sent / timed out, always recorded.

        The stdout goes to ``output`` (relative path in the capture), through ``keep(stdout) ->
        bytes`` when given (what of the output may be stored, e.g. a few variables of a process
        environment); stderr, if any, next to it as ``<output>.stderr``. A timeout or a lost
        connection carries its fix. Raises ``ProbeAborted`` when the probe must stop."""
        started = datetime.now(timezone.utc)
        timeout = self.deadline.clip(self.command_timeout)
        try:
            if timeout <= 0:
                raise ProbeAborted("overall deadline reached")
            result = self.session.run(argv, timeout)
        except CommandRefused as exc:
            result = CommandResult(None, b"", b"", f"refused by the read-only allow-list, not sent: {exc}")
        except ProbeAborted as exc:
            kind = "deadline" if "deadline" in str(exc) else "ssh_connection_lost"
            self.w.record(ProbeRecord(name=name, argv=list(argv), started_at=utc_iso(started),
                                      finished_at=utc_iso(datetime.now(timezone.utc)),
                                      error=live.with_fix(f"not completed: {exc}", kind, host=self.host,
                                                          deadline=self.deadline_text)))
            raise
        rel = None
        if output and (result.stdout or result.exit_code == 0):
            rel = self.w.write_bytes(output, keep(result.stdout) if keep else result.stdout)
        if result.stderr:
            self.w.write_bytes((output or f"raw/{_safe(name)}") + ".stderr", result.stderr)
        error = result.error
        if error is not None and error.startswith("timed out"):
            error = live.with_fix(error, "command_timeout", what=name, timeout=f"{self.command_timeout:g}s")
        if error is None and result.exit_code not in (0, None):
            detail = result.stderr.decode("utf-8", errors="replace").strip().splitlines()
            # srun interleaves its own lines with the task's; keep the first few so the cause is in
            error = f"exit status {result.exit_code}" + (f": {' | '.join(d.strip() for d in detail[:4])[:400]}" if detail else "")
        self.w.record(ProbeRecord(name=name, argv=list(argv), started_at=utc_iso(started),
                                  finished_at=utc_iso(datetime.now(timezone.utc)),
                                  exit_code=result.exit_code, output=rel, error=error))
        return result

    def note(self, name: str, error: str | None, api: str = "rlhealth:slurm-probe") -> None:
        """A record for a step that sent nothing (e.g. 'unknown job', 'tool absent')."""
        t = utc_iso(datetime.now(timezone.utc))
        self.w.record(ProbeRecord(name=name, api=api, started_at=t, finished_at=t, error=error))

    # -- plan --

    def collect(self) -> None:
        job = self.job_id
        sc = self.run(f"scontrol show job {job}", ["scontrol", "show", "job", "-o", job],
                      f"slurm/scontrol_{job}.txt")
        sa = self.run("sacct job", ["sacct", "-X", "--parsable2", f"--jobs={job}", SACCT_FORMAT],
                      "slurm/sacct_job.txt")
        sc_rows = ps.parse_scontrol_oneliner(sc.text)
        sa_rows = [r for r in ps.parse_sacct_parsable2(sa.text) if r.get("JobID") == job]
        me_sc = sc_rows[0] if sc_rows else {}
        me_sa = sa_rows[0] if sa_rows else {}
        name = me_sc.get("JobName") or me_sa.get("JobName")
        user = ps.scontrol_user(me_sc.get("UserId")) or me_sa.get("User")
        if not sc_rows and not sa_rows:
            self.note("slurm job lookup", f"job {job} is unknown to scontrol and sacct (unknown job id, "
                                          "or purged from the controller and absent from accounting)")
            self.run(f"squeue job {job}", ["squeue", "-h", f"--jobs={job}", ps.SQUEUE_FORMAT],
                     "slurm/squeue_job.txt")
            return
        if name and user:
            submit = ps.parse_time(me_sc.get("SubmitTime") or me_sa.get("Submit"))
            since = (datetime.fromtimestamp(parse_iso(submit), timezone.utc) if submit
                     else datetime.now(timezone.utc)) - CHAIN_LOOKBACK
            self.run("sacct chain", ["sacct", "-X", "--parsable2", f"--user={user}", f"--name={name}",
                                     f"--starttime={since.strftime('%Y-%m-%dT%H:%M:%S')}", SACCT_FORMAT],
                     "slurm/sacct_chain.txt")
            self.run("squeue chain", ["squeue", "-h", "-u", user, f"--name={name}", ps.SQUEUE_FORMAT],
                     "slurm/squeue_chain.txt")
        else:
            self.note("sacct chain", f"job {job}: name or user unknown, the afterany chain cannot be listed")
        legs = legs_from_capture(self.w.dir, job)
        known = {p.name for p in (self.w.dir / "slurm").glob("scontrol_*.txt")}
        for leg in legs[-MAX_LEGS:]:
            if f"scontrol_{leg.job_id}.txt" not in known and not leg.terminal or (
                    f"scontrol_{leg.job_id}.txt" not in known and leg.stdout is None):
                self.run(f"scontrol show job {leg.job_id}", ["scontrol", "show", "job", "-o", leg.job_id],
                         f"slurm/scontrol_{leg.job_id}.txt")
        legs = legs_from_capture(self.w.dir, job)
        self.copy_logs(legs[-MAX_LEGS:])
        running = [leg for leg in legs if leg.state == "running"]
        me = next((leg for leg in legs if leg.job_id == job), None)
        launch_leg = running[-1] if running else me
        if launch_leg is not None:
            self.launch_record(launch_leg)
        for leg in running:
            self.live_evidence(leg)

    def copy_logs(self, legs: list[ps.Leg]) -> None:
        listing: list[str] | None = None
        for leg in legs:
            paths: dict[str, str] = {}
            if leg.stdout:
                paths["out"] = leg.stdout
            if leg.stderr and leg.stderr != leg.stdout:
                paths["err"] = leg.stderr
            if not paths and self.experiment_dir:
                if listing is None:
                    logs_dir = self.experiment_dir.rstrip("/") + "/logs"
                    res = self.run("ls experiment logs", ["ls", "-1", "--", logs_dir], "slurm/ls_logs.txt")
                    listing = [ln.strip() for ln in res.text.splitlines()] if res.ok else []
                for entry in listing:
                    for ext in ("out", "err"):
                        if entry.endswith(f"_{leg.job_id}.{ext}") or entry == f"slurm-{leg.job_id}.{ext}":
                            paths[ext] = f"{self.experiment_dir.rstrip('/')}/logs/{entry}"
            if not paths and leg.work_dir:
                paths["out"] = f"{leg.work_dir.rstrip('/')}/slurm-{leg.job_id}.out"
            if not paths:
                self.note(f"logs of {leg.job_id}", f"leg {leg.job_id}: no StdOut/StdErr path known "
                                                   "(not in scontrol, no --experiment-dir, no WorkDir)")
            for ext, path in paths.items():
                self.copy_file(path, f"slurm/{leg.job_id}.{ext}")

    def copy_file(self, path: str, dest: str) -> None:
        """Bounded copy: the whole file up to TAIL_BYTES, else its head and its tail."""
        st = self.run(f"stat {path}", ["stat", "-c", "%s", "--", path], None)
        if not st.ok:
            return
        try:
            size = int(st.text.strip())
        except ValueError:
            size = TAIL_BYTES + 1
        if size > TAIL_BYTES:
            self.run(f"head {path}", ["head", "-c", str(HEAD_BYTES), "--", path], dest + ".head")
        self.run(f"tail {path}", ["tail", "-c", str(TAIL_BYTES), "--", path], dest)

    def launch_record(self, leg: ps.Leg) -> None:
        """The launch of ``leg``: its batch script (``scontrol write batch_script <id> -``: stdout,
        never a file) and the resolved configuration in the experiment directory (``--experiment-dir``,
        else the leg's WorkDir), bounded copies into ``slurm/`` and ``config/``."""
        self.run(f"batch script {leg.job_id}", ["scontrol", "write", "batch_script", leg.job_id, "-"],
                 f"slurm/batch_script_{leg.job_id}.sh")
        exp = (self.experiment_dir or leg.work_dir or "").rstrip("/")
        if not exp:
            self.note("experiment config", f"leg {leg.job_id}: no --experiment-dir and no WorkDir; "
                                           "resolved configuration not read")
            return
        listing = self.run("ls experiment dir", ["ls", "-la", "--time-style=full-iso", "--", exp],
                           "raw/ls_experiment.txt")
        if not listing.ok:
            return
        entries = {e["name"]: e for e in parse_ls_full_iso(listing.text)}
        for name in lp.CONFIG_FILES:
            top = name.split("/", 1)[0]
            if top not in entries or (("/" in name) != (entries[top]["type"] == "dir")):
                continue
            res = self.run(f"config {name}", ["head", "-c", str(lp.MAX_CONFIG_BYTES), "--", f"{exp}/{name}"],
                           f"config/{name}")
            if res.ok:
                return
        self.note("experiment config", f"none of {', '.join(lp.CONFIG_FILES)} in {exp}")

    def live_evidence(self, leg: ps.Leg) -> None:
        """On every node of a running leg (up to MAX_NODES): the GPU inventory, the process list,
        GPU health once, then ``polls`` GPU polls spaced ``poll_interval`` apart (utilization and
        compute processes, so each GPU gets its role), py-spy stacks of the job's python processes,
        and the flight-recorder dumps when the captured logs show a hang or a stall."""
        nodes = ps.expand_hostlist(leg.node_list)
        if not nodes:
            self.note(f"nodes of {leg.job_id}", f"running leg {leg.job_id} has no node list")
            return
        if len(nodes) > MAX_NODES:
            self.note(f"nodes of {leg.job_id}", f"running leg {leg.job_id} has {len(nodes)} nodes; only the first "
                                                f"{MAX_NODES} are polled ({', '.join(nodes[MAX_NODES:MAX_NODES + 5])}, ... skipped)")
        nodes = nodes[:MAX_NODES]
        up: list[str] = []
        procs: dict[str, str] = {}
        for node in nodes:
            inv = self.run(f"gpu inventory {node}", self.srun(leg, node) + ["nvidia-smi", QUERY_INVENTORY_ARG,
                                                                              "--format=csv,noheader"],
                           f"raw/nvidia-smi-inventory_{node}_{leg.job_id}.csv")
            if inv.error and inv.error.startswith("timed out"):
                self.unresponsive(node, f"gpu inventory {node}")
                continue
            up.append(node)
            res = self.run(f"ps {node}", self.srun(leg, node) + ["ps", "-eo", "pid,ppid,etimes,args", "-ww"],
                           f"raw/ps_{node}_{leg.job_id}.txt")
            if res.ok:
                procs[node] = res.text
            if inv.ok:
                self.run(f"gpu health {node}", self.srun(leg, node) + ["nvidia-smi", *HEALTH_ARGS],
                         f"raw/nvidia-smi-health_{node}_{leg.job_id}.txt")
            self.run(f"kernel log {node}", self.srun(leg, node) + ["dmesg", "--time-format=iso", "--level=err,crit,alert,emerg"],
                     f"raw/dmesg_{node}_{leg.job_id}.txt")
        t0 = time.monotonic()
        for i in range(self.polls):
            if i == 1:
                self.stacks(leg, up, procs)  # use the wait between polls
            wait = t0 + i * self.poll_interval - time.monotonic()
            if wait > 0:
                if wait >= self.deadline.remaining() - 1:
                    self.note(f"gpu poll {i + 1}/{self.polls}",
                              live.with_fix(f"GPU poll {i + 1}/{self.polls} and later are due after the deadline; not taken",
                                            "deadline", deadline=self.deadline_text))
                    break
                time.sleep(wait)
            for node in list(up):
                q = self.run(f"gpu poll {node}", self.srun(leg, node) + ["nvidia-smi", QUERY_GPU_ARG,
                                                                           "--format=csv,noheader,nounits"],
                             f"raw/nvidia-smi_{node}_{leg.job_id}.poll{i}.csv")
                if q.error and q.error.startswith("timed out"):
                    self.unresponsive(node, f"gpu poll {node}")
                    up.remove(node)
                    continue
                if q.ok:
                    self.run(f"gpu processes {node}", self.srun(leg, node) + ["nvidia-smi", QUERY_APPS_ARG,
                                                                                "--format=csv,noheader,nounits"],
                             f"raw/compute-apps_{node}_{leg.job_id}.poll{i}.csv")
        if self.polls == 1:
            self.stacks(leg, up, procs)
        self.flight_recorder(leg, up, procs)

    def srun(self, leg: ps.Leg, node: str) -> list[str]:
        return ["srun", f"--jobid={leg.job_id}", "--overlap", "-w", node, "-N1", "-n1"]

    def unresponsive(self, node: str, what: str) -> None:
        self.note(f"node {node}", live.with_fix(f"node {node} did not answer '{what}'; no further commands sent to it",
                                                "node_unresponsive", node=node,
                                                timeout=f"{self.command_timeout:.0f}s"))

    def stacks(self, leg: ps.Leg, nodes: list[str], procs: dict[str, str]) -> None:
        for node in nodes:
            if node not in procs:
                continue
            pids = trainer_pids(procs[node], leg.job_id)
            if not pids:
                self.note(f"py-spy {node}", f"no python process of job {leg.job_id} on {node}; no stacks taken")
            for pid in pids[:MAX_STACKS_PER_NODE]:
                res = self.run(f"py-spy {node} {pid}", self.srun(leg, node) + ["py-spy", "dump", "--pid", str(pid)],
                               f"stacks/{node}__{pid}.txt")
                if not res.ok and tool_absent(res, "py-spy"):
                    self.note(f"py-spy {node}", f"py-spy is not installed on {node}: no stacks")
                    break

    def flight_recorder(self, leg: ps.Leg, nodes: list[str], procs: dict[str, str]) -> None:
        """Fetch the NCCL flight-recorder dumps (read-only copies) when the leg's captured logs show
        a hang signature or a stall (``rules/live_evidence.yaml``); the decision is recorded."""
        logs = [(self.w.dir / "slurm" / f"{leg.job_id}.{ext}", f"slurm/{leg.job_id}.{ext}") for ext in ("err", "out")]
        logs = [(p, rel) for p, rel in logs if p.is_file()]
        reason, measured = live.flight_recorder_reason(logs, self.w.captured_at.timestamp())
        live.record_decision(self.w, utc_iso(datetime.now(timezone.utc)), reason, measured)
        if reason is None:
            return
        seen: set[str] = set()
        prefix_written = False
        for node in nodes:
            pids = trainer_pids(procs.get(node, ""), leg.job_id)
            if not pids:
                continue
            pid = pids[0]
            env = self.run(f"trainer environment {node} {pid}",
                           self.srun(leg, node) + ["cat", "--", f"/proc/{pid}/environ"],
                           f"raw/nccl_env_{node}_{pid}.txt",
                           keep=lambda data: "".join(f"{k}={v}\n" for k, v in sorted(live.nccl_env(data)[0].items())).encode())
            prefix = live.nccl_env(env.stdout)[1] if env.ok else live.policy()["flight_recorder"]["default_prefix"]
            if not prefix_written:
                self.w.write_bytes(f"{live.FR_DIR}/prefix.txt", (prefix + "\n").encode())
                prefix_written = True
            directory = posixpath.dirname(prefix) or "/"
            ls = self.run(f"flight recorder files {node}", self.srun(leg, node) +
                          ["ls", "-la", "--time-style=full-iso", "--", directory], f"raw/fr_ls_{node}.txt")
            if not ls.ok:
                continue
            paths = live.dump_files(parse_ls_full_iso(ls.text), prefix)
            if not paths:
                self.note(f"flight recorder {node}", f"no dump file {prefix}<rank> on {node}")
            for path in paths:
                name = posixpath.basename(path)
                if name in seen:
                    continue
                seen.add(name)
                self.run(f"flight recorder dump {node} {name}",
                         self.srun(leg, node) + ["head", "-c", str(live.max_dump_bytes()), "--", path],
                         f"{live.FR_DIR}/dumps/{_safe(node)}/{name}")


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:80]


def tool_absent(result: CommandResult, tool: str) -> bool:
    text = (result.stderr + result.stdout).decode("utf-8", errors="replace")
    return result.exit_code == 127 or (tool in text and ("No such file" in text or "not found" in text))


def trainer_pids(ps_text: str, job_id: str) -> list[int]:
    """Python processes (or Ray actors, ``ray::...``) descending from the job's slurmstepd
    (``slurmstepd: [<id>.batch]`` or a step of it) in ``ps -eo pid,ppid,etimes,args`` output, oldest first."""
    procs = ps.parse_ps_tree(ps_text)
    roots = {pid for pid, (_, _, args) in procs.items()
             if re.match(rf"slurmstepd: \[{re.escape(job_id)}\.(batch|\d+)\]", args)}
    found = []
    for pid, (ppid, etimes, args) in procs.items():
        seen, cur = set(), ppid
        while cur in procs and cur not in roots and cur not in seen:
            seen.add(cur)
            cur = procs[cur][0]
        exe = os.path.basename(args.split(None, 1)[0]) if args.split() else ""
        if cur in roots and pid not in roots and (exe.startswith("python") or args.startswith("ray::")):
            found.append((-etimes, pid))
    return [pid for _, pid in sorted(found)]


# ---- normalization (pure over the raw files of a capture directory) -----------------------------

def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return ""


def legs_from_capture(capture_dir: Path, job_id: str) -> list[ps.Leg]:
    """The afterany chain of ``job_id`` from the raw sacct / squeue / scontrol files, in
    submission order: legs with the requested job's name and user (that is how the chain was
    queried) and, when both are known, its WorkDir."""
    slurm = Path(capture_dir) / "slurm"
    legs: dict[str, ps.Leg] = {}
    for row in ps.parse_sacct_parsable2(_read(slurm / "sacct_job.txt")) + \
            ps.parse_sacct_parsable2(_read(slurm / "sacct_chain.txt")):
        if "." in row.get("JobID", ""):
            continue
        ps.merge_leg(legs, row["JobID"], "sacct", name=row.get("JobName"), user=row.get("User"),
                     raw_state=row.get("State"), submit=row.get("Submit"), start=row.get("Start"),
                     end=row.get("End"), exit_code=row.get("ExitCode"), work_dir=row.get("WorkDir"),
                     node_list=row.get("NodeList"))
    for row in ps.parse_squeue(_read(slurm / "squeue_chain.txt")):
        ps.merge_leg(legs, row["JobID"], "squeue", name=row["JobName"], raw_state=row["State"])
    for f in sorted(slurm.glob("scontrol_*.txt")):
        for rec in ps.parse_scontrol_oneliner(_read(f)):
            node_list = rec.get("NodeList") if rec.get("NodeList") not in ("", "(null)") else None
            ps.merge_leg(legs, rec["JobId"], "scontrol", name=rec.get("JobName"),
                         user=ps.scontrol_user(rec.get("UserId")), raw_state=rec.get("JobState"),
                         submit=rec.get("SubmitTime"), start=rec.get("StartTime"), end=rec.get("EndTime"),
                         exit_code=rec.get("ExitCode"), work_dir=rec.get("WorkDir"), node_list=node_list,
                         stdout=rec.get("StdOut"), stderr=rec.get("StdErr"),
                         dependency=rec.get("Dependency"),
                         restarts=read_count(rec.get("Restarts")))
    me = legs.get(job_id)
    if me is None:
        return []
    chain = [leg for leg in legs.values()
             if (leg.name is None or leg.name == me.name) and (leg.user is None or me.user is None or leg.user == me.user)
             and (leg.work_dir is None or me.work_dir is None or leg.work_dir == me.work_dir)]
    return sorted(chain, key=lambda leg: ps.job_id_key(leg.job_id))


def build_state(capture_dir: Path, job_id: str) -> ControllerState | None:
    """``state.json`` from the raw files; None when the job was not found at all.

    - ``state``: the chain's state (running/pending if any leg is, else the last leg's);
    - ``attempts``: one per chain leg in submission order (state, times, exit code; the first causal
      error of a leg is the diagnosis's judgement, made from the leg's copied logs, not written here);
    - ``failure_count``: terminal legs that ended badly, except a TIMEOUT leg followed by a later
      leg (a wall-clock chain restart is not a burn, seed 004) and PREEMPTED legs;
    - ``preemption_count``: PREEMPTED legs plus requeues (scontrol ``Restarts=``);
    - ``max_retries``: the chain's successor legs, i.e. legs - 1 (the restart budget an afterany
      chain was launched with); ``normalize_capture`` replaces it with the launch's own retry
      budget (``job.json`` ``max_retries``) when the batch script states one.
    """
    legs = legs_from_capture(capture_dir, job_id)
    if not legs:
        return None
    attempts, failures, preemptions = [], 0, 0
    for i, leg in enumerate(legs):
        word = ps.base_state(leg.raw_state)
        code, _signal = ps.parse_exit_code(leg.exit_code)
        started = ps.parse_time(leg.start) if leg.state not in ("pending", "building") else None  # a pending
        # leg's StartTime is the scheduler's forecast, not a start
        attempts.append(Attempt(attempt=i, state=leg.state, started_at=started,
                                finished_at=ps.parse_time(leg.end) if leg.terminal else None,
                                exit_code=code if leg.terminal else None))
        preemptions += (leg.restarts or 0) + (word == "PREEMPTED")
        if leg.terminal and word not in ("COMPLETED", "PREEMPTED") and not (word == "TIMEOUT" and i + 1 < len(legs)):
            failures += 1
    return ControllerState(source="slurm", state=ps.chain_state(legs), failure_count=failures,
                           preemption_count=preemptions, max_retries=len(legs) - 1, attempts=attempts)


_POLL_FILE = re.compile(r"^nvidia-smi_(?P<node>.+)_(?P<job>\d+(?:_\d+)?)(?:\.poll(?P<i>\d+))?\.csv$")


def _output_times(manifest: dict) -> dict[str, str]:
    """capture-relative output path -> when its command started (from capture.json)."""
    return {p["output"]: p["started_at"] for p in manifest.get("probes", []) if p.get("output")}


def gpu_polls_from_capture(capture_dir: Path, manifest: dict) -> list[GpuPoll]:
    """Every GPU of every poll, with its role from the node's compute processes joined with the
    node's process list through the role table (``rules/process_roles.yaml``); the time of a poll
    is when its command started."""
    capture_dir = Path(capture_dir)
    raw = capture_dir / "raw"
    times = _output_times(manifest)
    table = load_role_table()
    polls = []
    for f in sorted(raw.glob("nvidia-smi_*.csv"), key=lambda p: (p.name.split(".poll")[0], len(p.name), p.name)):
        m = _POLL_FILE.match(f.name)
        if m is None:
            continue
        node, job, i = m.group("node"), m.group("job"), m.group("i")
        inventory = parse_gpu_inventory(_read(raw / f"nvidia-smi-inventory_{node}_{job}.csv"))
        apps_file = raw / f"compute-apps_{node}_{job}.poll{i}.csv"
        apps = parse_compute_apps(_read(apps_file)) if i is not None else []
        rows = [{"pid": pid, "args": args} for pid, (_, _, args) in ps.parse_ps_tree(_read(raw / f"ps_{node}_{job}.txt")).items()]
        roles = gpu_roles(inventory, apps, rows, table) if inventory and apps_file.is_file() else {}
        t = times.get(f"raw/{f.name}") or manifest["captured_at"]
        for row in parse_query_gpu(_read(f)):
            role, procs = roles.get(row["gpu"], ("unknown", []))
            polls.append(GpuPoll(t=t, host=node, role=role, processes=procs, **row))
    return polls


def build_job_info(capture_dir: Path, manifest: dict) -> JobInfo | None:
    """``job.json`` from the raw files: the launch leg's scontrol record (nodes, GPU gres), its
    batch script (launch arguments, retry budget), the resolved configuration copied from the
    experiment directory (``config/``), and the GPU inventory of its nodes. None when none of them
    was captured. Every value names its source in ``sources``."""
    capture_dir = Path(capture_dir)
    scripts = sorted((capture_dir / "slurm").glob("batch_script_*.sh"))
    job = scripts[-1].name[len("batch_script_"):-len(".sh")] if scripts else manifest["job_id"]
    sources: dict[str, str] = {}
    record, record_rel = {}, None
    sc_path = capture_dir / "slurm" / f"scontrol_{job}.txt"
    for rec in ps.parse_scontrol_oneliner(_read(sc_path)):
        if rec.get("JobId") == job:
            record, record_rel = rec, f"slurm/scontrol_{job}.txt:1"
    args: list[tuple[str, int | None, str]] = []
    if scripts:
        rel = f"slurm/{scripts[-1].name}"
        args = [(tok, line, rel) for line, tok in lp.script_args(_read(scripts[-1]))]
    config, config_rel = live.read_config(capture_dir)
    info = JobInfo()
    live.launch_into(info, sources, config, config_rel, args)
    nodes = ps.expand_hostlist(record.get("NodeList")) if record else []
    if nodes:
        info.nodes, sources["nodes"] = nodes, f"{record_rel} NodeList"
    inventories = {}
    for f in sorted((capture_dir / "raw").glob(f"nvidia-smi-inventory_*_{job}.csv")):
        rows = parse_gpu_inventory(_read(f))
        if rows:
            inventories[f"raw/{f.name}"] = rows
    n_nodes = len(nodes) or read_count(record.get("NumNodes", "").split("-")[0])
    if inventories:
        first_rel, first_rows = next(iter(inventories.items()))
        info.hardware = HardwareInfo(gpu=gpu_class(first_rows[0]["name"]),
                                     gpus_per_node=max(len(r) for r in inventories.values()),
                                     nodes=n_nodes or len(inventories))
        sources["hardware.gpu"] = f"{first_rel}:1"
        sources["hardware.gpus_per_node"] = ", ".join(inventories)
    else:
        kind, count = lp.gres_gpus(record.get("AllocTRES") or record.get("ReqTRES") or record.get("TRES"))
        if kind and count and n_nodes:
            info.hardware = HardwareInfo(gpu=gpu_class(kind), gpus_per_node=max(1, count // n_nodes), nodes=n_nodes)
            sources["hardware.gpu"] = f"{record_rel} TRES"
            sources["hardware.gpus_per_node"] = f"{record_rel} TRES"
    info.sources = dict(sorted(sources.items()))
    if not sources:
        return None
    return info


def gpu_health_sources(capture_dir: Path) -> list[tuple[str, str | None, str | None]]:
    raw = Path(capture_dir) / "raw"
    hosts: dict[str, list] = {}
    for f in sorted(raw.glob("nvidia-smi-health_*.txt")):
        node = f.name[len("nvidia-smi-health_"):-len(".txt")].rsplit("_", 1)[0]
        hosts.setdefault(node, [None, None])[0] = f"raw/{f.name}"
    for f in sorted(raw.glob("dmesg_*.txt")):
        node = f.name[len("dmesg_"):-len(".txt")].rsplit("_", 1)[0]
        hosts.setdefault(node, [None, None])[1] = f"raw/{f.name}"
    return [(h, v[0], v[1]) for h, v in sorted(hosts.items())]


CHAIN_PROBES = ("sacct job", "sacct chain")


def chain_incomplete(manifest: dict) -> str | None:
    """Why the chain evidence of a capture is incomplete (None when complete): accounting is the
    authority for past legs, so without both sacct queries (or after an aborted probe) a
    ``state.json`` would undercount burned restarts."""
    records = {p["name"]: p for p in manifest.get("probes", [])}
    for rec in manifest.get("probes", []):
        if rec["name"] == "probe aborted":
            return rec.get("error") or "probe aborted"
    for name in CHAIN_PROBES:
        rec = records.get(name)
        if rec is None:
            return f"'{name}' was not run"
        if rec.get("error"):
            return f"'{name}' failed: {rec['error']}"
    return None


def normalize_capture(capture_dir: Path) -> str | None:
    """(Re)write ``state.json``, ``gpu_polls.jsonl``, ``job.json``, ``gpu_health.json`` and
    ``flight_recorder/summary.json`` from the raw files of a capture.

    ``state.json`` is written only from complete chain evidence; returns the reason it was not
    written, or None."""
    capture_dir = Path(capture_dir)
    manifest = json.loads((capture_dir / "capture.json").read_text())
    state = build_state(capture_dir, manifest["job_id"])
    if state is None:
        missing = f"job {manifest['job_id']} not found by scontrol, sacct or squeue"
    else:
        missing = chain_incomplete(manifest)
    info = build_job_info(capture_dir, manifest)
    if info is not None:
        (capture_dir / "job.json").write_text(json.dumps(info.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")
    if missing is None:
        if info is not None and info.max_retries is not None:
            state.max_retries = info.max_retries  # the launch's own budget beats the count of chain legs
        (capture_dir / "state.json").write_text(json.dumps(state.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")
    polls = gpu_polls_from_capture(capture_dir, manifest)
    if polls:
        (capture_dir / "gpu_polls.jsonl").write_text(
            "".join(json.dumps(p.model_dump(mode="json"), sort_keys=True) + "\n" for p in polls))
    live.write_gpu_health(capture_dir, gpu_health_sources(capture_dir))
    live.write_flight_recorder_summary(capture_dir)
    return missing


# ---- entry point (rlhealth.cli) -----------------------------------------------------------------

def capture(options: ProbeOptions, now: datetime | None = None) -> Path:
    """Probe the job named by ``options`` and write one capture; return the bundle directory."""
    job_id = str(options.job).strip()
    if not _JOB_ID.fullmatch(job_id):
        raise UsageError(f"--job: a Slurm job id is digits (or <id>_<task>), got {options.job!r}")
    host = options.host
    if not host or not _HOST.fullmatch(host):
        raise UsageError("--host: the ssh alias or host of the login node is required for --backend slurm "
                         "(letters, digits, '_', '.', '-', optional user@)")
    exp = options.experiment_dir
    if exp is not None and (not exp.startswith("/") or ".." in exp.split("/") or "\n" in exp or "\x00" in exp):
        raise UsageError(f"--experiment-dir must be an absolute path without '..': {exp!r}")
    deadline = Deadline(options.deadline_s)
    command_timeout = options.command_timeout_s
    cluster = options.cluster or DEFAULT_CLUSTER
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", cluster):
        raise UsageError(f"--cluster: not a cluster name: {cluster!r}")

    bundle = Path(options.bundle_root).expanduser() / "jobs" / cluster / "slurm" / job_id
    writer = CaptureWriter(bundle, backend="slurm", cluster=cluster, job_id=job_id, now=now)
    ssh_config = options.ssh_config
    started = datetime.now(timezone.utc)
    try:
        target = resolve_target(host, ssh_config, options.known_hosts)
    except Exception as exc:  # a broken ssh config is missing evidence, not a crash
        writer.record(ProbeRecord(name="ssh connect", api=f"ssh://{host}", started_at=utc_iso(started),
                                  finished_at=utc_iso(datetime.now(timezone.utc)),
                                  error=live.with_fix(f"could not read ssh config {ssh_config}: {type(exc).__name__}: {exc}",
                                                      "ssh_config_unreadable", ssh_config=ssh_config)))
        return bundle
    session = SshSession(target, ssh_config=ssh_config, connect_timeout=deadline.clip(command_timeout))
    try:
        try:
            session.connect()
        except Exception as exc:  # every connect failure (refused, host key, auth, DNS) is recorded
            writer.record(ProbeRecord(name="ssh connect", api=target.describe(), started_at=utc_iso(started),
                                      finished_at=utc_iso(datetime.now(timezone.utc)),
                                      error=describe_connect_error(exc, target, ssh_config)))
            return bundle
        writer.record(ProbeRecord(name="ssh connect", api=target.describe(), started_at=utc_iso(started),
                                  finished_at=utc_iso(datetime.now(timezone.utc))))
        probe = SlurmProbe(writer, session, job_id, experiment_dir=exp, command_timeout=command_timeout,
                           deadline=deadline, polls=options.polls, poll_interval=options.poll_interval_s,
                           deadline_text=options.deadline_text, host=host)
        try:
            probe.collect()
        except ProbeAborted as exc:
            kind = "deadline" if "deadline" in str(exc) else "ssh_connection_lost"
            probe.note("probe aborted", live.with_fix(f"probe stopped early, later evidence not collected: {exc}", kind,
                                                      host=host, deadline=options.deadline_text))
    finally:
        session.close()
    try:
        missing = normalize_capture(writer.dir)
        if missing:
            t = utc_iso(datetime.now(timezone.utc))
            writer.record(ProbeRecord(name="normalize", api="rlhealth:normalize", started_at=t, finished_at=t,
                                      error=f"state.json not written, controller state unknown: {missing}"))
        if (writer.dir / live.FR_DIR / "summary.json").is_file():
            t = utc_iso(datetime.now(timezone.utc))
            why = live.run_fr_trace(writer.dir)
            writer.record(ProbeRecord(name="fr_trace", api="local: python -m torch.distributed.flight_recorder.fr_trace",
                                      started_at=t, finished_at=utc_iso(datetime.now(timezone.utc)),
                                      output=None if why else f"{live.FR_DIR}/fr_trace.txt", error=why))
    except Exception as exc:  # a parser bug must not lose the capture; it is recorded
        t = utc_iso(datetime.now(timezone.utc))
        writer.record(ProbeRecord(name="normalize", api="rlhealth:normalize", started_at=t, finished_at=t,
                                  error=f"normalizing the capture failed: {type(exc).__name__}: {exc}"))
    return bundle
