"""Fixtures for the real-Slurm, real-sshd integration tests (marker ``slurm``).

Needs: the local single-node Slurm started by ``scripts/services/slurm.sh`` (CI runs it first via
``scripts/test``), root (to start sshd and submit jobs as the job user), and ``/usr/sbin/sshd``.
If anything is missing the tests FAIL with a message saying so; only ``RLHEALTH_SKIP_SLURM=1``
(local development) skips them.

Each sshd here is a real OpenSSH server on 127.0.0.1 with its own generated host key, own port,
own config and key-only auth for the job user. ``sshd(path_prefix=DIR)`` starts one whose sessions
get ``PATH=DIR:...`` through sshd's ``SetEnv`` -- the test-only way to put a fake slow ``sacct``
in front of the real one without touching the probe (see test_faults.py).
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# helper modules next to this conftest (pytest runs with --import-mode=importlib)
sys.path.insert(0, str(Path(__file__).parent))

JOB_USER = os.environ.get("RLHEALTH_SLURM_USER", "rlhtest")
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
BASE_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"


def _services_problem() -> str | None:
    if os.geteuid() != 0:
        return "must run as root (starts sshd, submits jobs as the job user)"
    if not os.path.exists(SSHD):
        return f"{SSHD} not found"
    for tool in ("sbatch", "sacct", "sinfo", "scontrol", "runuser", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} not on PATH"
    try:
        subprocess.run(["id", JOB_USER], check=True, capture_output=True)
        out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20)
        if out.returncode != 0 or not any(s in out.stdout for s in ("idle", "mixed", "allocated")):
            return f"sinfo shows no usable node: {out.stdout.strip()} {out.stderr.strip()}"
        out = subprocess.run(["sacct", "-n", "-X", "-S", "now-1hours"], capture_output=True, text=True, timeout=20)
        if out.returncode != 0:
            return f"sacct fails: {out.stderr.strip()}"
    except (subprocess.SubprocessError, OSError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


@pytest.fixture(scope="session")
def slurm_services():
    if os.environ.get("RLHEALTH_SKIP_SLURM") == "1":
        pytest.skip("RLHEALTH_SKIP_SLURM=1 (local development only)")
    problem = _services_problem()
    if problem:
        pytest.fail(f"local Slurm/sshd test services are not usable: {problem}. "
                    "Run `bash scripts/services/slurm.sh` as root first (scripts/test does).", pytrace=False)


@pytest.fixture(scope="session")
def workroot(slurm_services):
    """A world-readable scratch root owned by the job user (experiment dirs live here)."""
    root = Path(tempfile.mkdtemp(prefix="rlhealth-slurm-"))
    root.chmod(0o755)
    shutil.chown(root, user=JOB_USER)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rlhealth-test", "-f", str(path)],
                   check=True, capture_output=True)
    return (path.with_suffix(".pub") if path.suffix else Path(str(path) + ".pub")).read_text().strip()


@dataclass
class Sshd:
    """One running test sshd and the client files that reach it."""
    dir: Path
    port: int
    proc: subprocess.Popen
    host_pub: str
    log: Path
    ssh_config: Path
    known_hosts: Path
    alias: str = "slurm-test"
    extra: list = field(default_factory=list)

    def session_starts(self) -> int:
        """How many exec sessions sshd started so far (LogLevel VERBOSE logs one line each)."""
        try:
            return self.log.read_text(errors="replace").count("Starting session: command")
        except OSError:
            return 0

    def descendants(self) -> list[int]:
        children: dict[int, list[int]] = {}
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                children.setdefault(ppid, []).append(int(d.name))
        out, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            for c in children.get(pid, []):
                out.append(c)
                todo.append(c)
        return out

    def kill_all(self) -> None:
        """Stop this sshd and every session it serves (the server 'goes away')."""
        pids = self.descendants()
        for pid in [self.proc.pid] + pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.kill_all()


@pytest.fixture(scope="session")
def client_key(slurm_services):
    d = Path(tempfile.mkdtemp(prefix="rlhealth-sshkeys-"))
    d.chmod(0o755)
    pub = _keygen(d / "id_ed25519")
    (d / "authorized_keys").write_text(pub + "\n")
    (d / "authorized_keys").chmod(0o644)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def start_sshd(client_key):
    """Factory: start a real sshd; ``path_prefix`` puts a directory first on the sessions' PATH."""
    started: list[Sshd] = []
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)

    def start(path_prefix: Path | None = None, without: tuple[str, ...] = ()) -> Sshd:
        """``without``: programs the sessions must not find, whatever this host has installed (the
        sessions' PATH is then one directory of links to every other program of ``BASE_PATH``)."""
        d = Path(tempfile.mkdtemp(prefix="rlhealth-sshd-"))
        d.chmod(0o755)
        host_pub = _keygen(d / "host_ed25519")
        port = free_port()
        log = d / "sshd.log"
        base = BASE_PATH
        if without:
            bin_dir = d / "bin"
            bin_dir.mkdir(mode=0o755)
            for directory in reversed(BASE_PATH.split(":")):    # the first directory on PATH wins
                if not os.path.isdir(directory):
                    continue
                for name in os.listdir(directory):
                    target = os.path.join(directory, name)
                    if name in without or not os.access(target, os.X_OK) or os.path.isdir(target):
                        continue
                    link = bin_dir / name
                    if link.is_symlink():
                        link.unlink()
                    link.symlink_to(target)
            base = str(bin_dir)
        path = f"{path_prefix}:{base}" if path_prefix else base
        (d / "sshd_config").write_text(f"""\
Port {port}
ListenAddress 127.0.0.1
HostKey {d}/host_ed25519
PidFile {d}/sshd.pid
AuthorizedKeysFile {client_key}/authorized_keys
AllowUsers {JOB_USER}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
UsePAM no
StrictModes no
LogLevel VERBOSE
SetEnv PATH={path}
""")
        proc = subprocess.Popen([SSHD, "-D", "-f", str(d / "sshd_config"), "-E", str(log)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(100):
            if proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {proc.stderr.read().decode()} {log.read_text() if log.exists() else ''}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.1)
        else:
            proc.kill()
            raise RuntimeError("sshd did not listen within 10s")
        ssh_config = d / "ssh_config"
        ssh_config.write_text(f"""\
Host slurm-test
    HostName 127.0.0.1
    Port {port}
    User {JOB_USER}
    IdentityFile {client_key}/id_ed25519
    IdentitiesOnly yes
""")
        known_hosts = d / "known_hosts"
        known_hosts.write_text(f"[127.0.0.1]:{port} {' '.join(host_pub.split()[:2])}\n")
        s = Sshd(d, port, proc, host_pub, log, ssh_config, known_hosts)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()
        shutil.rmtree(s.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def sshd(start_sshd) -> Sshd:
    return start_sshd()


# ---- jobs ---------------------------------------------------------------------------------------

def as_job_user(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", JOB_USER, "--"] + argv, capture_output=True, text=True,
                          timeout=60, **kw)


@dataclass
class Experiment:
    """An experiment directory with logs/ like Marin's: <exp>/logs/<jobname>_<jobid>.out|.err."""
    dir: Path
    name: str

    def script(self, name: str, body: str) -> Path:
        path = self.dir / name
        path.write_text("#!/bin/bash\n" + body)
        path.chmod(0o755)
        shutil.chown(path, user=JOB_USER)
        return path

    def submit(self, script: Path, *sbatch_args: str, after: str | None = None) -> str:
        argv = ["sbatch", "--parsable", "-J", self.name, "-D", str(self.dir),
                "-o", f"{self.dir}/logs/%x_%j.out", "-e", f"{self.dir}/logs/%x_%j.err", *sbatch_args]
        if after:
            argv.append(f"--dependency=afterany:{after}")
        out = as_job_user(argv + [str(script)])
        assert out.returncode == 0, f"sbatch failed: {out.stderr}"
        return out.stdout.strip().split(";")[0]


@pytest.fixture(scope="session")
def new_experiment(workroot):
    def make(tag: str) -> Experiment:
        name = f"rlh-{tag}-{uuid.uuid4().hex[:6]}"
        d = workroot / name
        (d / "logs").mkdir(parents=True)
        for p in (d, d / "logs"):
            shutil.chown(p, user=JOB_USER)
        return Experiment(d, name)
    return make


def job_state(job_id: str) -> str:
    """Current state from sacct (terminal) or squeue (live)."""
    out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True)
    if out.returncode == 0 and out.stdout.strip():
        return out.stdout.strip()
    out = subprocess.run(["sacct", "-n", "-X", "-P", "-j", job_id, "--format=State"], capture_output=True, text=True)
    return out.stdout.strip().split(" ")[0] if out.stdout.strip() else "UNKNOWN"


def sacct_by_name(name: str) -> list[str]:
    out = as_job_user(["sacct", "-n", "-X", "-P", f"--user={JOB_USER}", f"--name={name}",
                       "--starttime=2000-01-01", "--format=JobID"])
    return out.stdout.split()


def wait_for(predicate, timeout: float, what: str, interval: float = 1.0):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def wait_state(job_id: str, states: set[str], timeout: float = 60) -> str:
    return wait_for(lambda: (s := job_state(job_id)) in states and s, timeout,
                    f"job {job_id} in {sorted(states)} (now {job_state(job_id)})")


def cancel_jobs(ids: list[str]) -> None:
    if ids:
        subprocess.run(["scancel", *ids], capture_output=True)


# ---- the scenarios, all submitted once per session so their waits overlap ----------------------

@dataclass
class Scenarios:
    same_failure: list[str]        # legs: crash, crash, running in bring-up (no step yet), pending
    timeout_chain: list[str]       # legs: TIMEOUT after 1 minute, healthy resumed successor
    running: str                   # one healthy running leg
    pending: str                   # one leg waiting for its begin time
    cancelled: str                 # one leg cancelled while running
    experiments: dict


@pytest.fixture(scope="session")
def scenarios(new_experiment):
    from slurm_jobs import FAKE_TRAINER, trainer_script

    submitted: list[str] = []
    exps = {}

    def exp(tag):
        e = new_experiment(tag)
        (e.dir / "fake_trainer.py").write_text(FAKE_TRAINER)
        exps[tag] = e
        return e

    # 1. restarts that repeat the same failure: two crashed legs, a third running, a fourth queued
    e = exp("samefail")
    crash = e.script("crash.sh", trainer_script("crash", e.dir))
    bringup = e.script("bringup.sh", trainer_script("bringup", e.dir))
    a = e.submit(crash)
    b = e.submit(crash, after=a)
    c = e.submit(bringup, after=b)
    d = e.submit(bringup, after=c)
    same = [a, b, c, d]
    # 2. a wall-clock TIMEOUT (1 minute limit) then a healthy resumed successor
    e = exp("timeout")
    healthy_t = e.script("run.sh", trainer_script("healthy", e.dir))
    t1 = e.submit(healthy_t, "--time=1")
    t2 = e.submit(healthy_t, after=t1)
    # 3. running, 4. pending, 5. cancelled
    e = exp("running")
    running = e.submit(e.script("run.sh", trainer_script("healthy", e.dir)))
    e = exp("pending")
    pending = e.submit(e.script("run.sh", trainer_script("healthy", e.dir)), "--begin=now+3600")
    e = exp("cancelled")
    cancelled = e.submit(e.script("run.sh", trainer_script("healthy", e.dir)))
    submitted += same + [t1, t2, running, pending, cancelled]
    try:
        wait_state(cancelled, {"RUNNING"}, 60)
        wait_for(lambda: "Step 1" in _read(exps["cancelled"].dir / "logs" / f"{exps['cancelled'].name}_{cancelled}.out"),
                 60, "the cancelled leg to print a step")
        subprocess.run(["scancel", cancelled], check=True)
        wait_state(cancelled, {"CANCELLED"}, 60)
        wait_state(c, {"RUNNING"}, 60)
        wait_state(running, {"RUNNING"}, 60)
        # accounting is eventually consistent: a user+name query lists fresh jobs seconds later
        wait_for(lambda: {a, b, c} <= set(sacct_by_name(exps["samefail"].name)), 60,
                 "sacct to list the crashed legs by user and name")
        yield Scenarios(same, [t1, t2], running, pending, cancelled, exps)
    finally:
        cancel_jobs(submitted)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
