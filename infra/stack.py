#!/usr/bin/env python3
"""The team stack on one machine, as plain processes on 127.0.0.1, all state under ``.stack/``.

    python infra/stack.py install      # postgresql, chromium (apt, only when missing) + pyproject's `stack` extra
    python infra/stack.py up           # make stack:        start what is not running, wait for health
    python infra/stack.py status       # make stack-status: each service up/down
    python infra/stack.py down         # make stack-down:   stop everything it started (pids under .stack/)
    python infra/stack.py compose-env  # infra/.env for infra/compose.yaml: every credential generated (0600)

Services: PostgreSQL (role ``lead``, databases ``mlflow`` and ``prefect``), ``mlflow server`` on Postgres with
proxied artifacts and MLflow's basic-auth app, a Prefect server on Postgres with its basic auth, a Prefect
process worker for the pool ``lead-local``, and a DVC folder remote ``stack`` (``--local``: .dvc/config is not
changed). Passwords are generated once into ``.stack/secrets.env`` (0600) and reach the servers through
environment variables, never a command line. ``.stack/env.sh`` holds the client settings to ``source``.

Settings (environment): LEAD_STACK_DIR (state, default ``<repo>/.stack``), LEAD_STACK_PG_PORT (5433),
LEAD_STACK_MLFLOW_PORT (5001), LEAD_STACK_PREFECT_PORT (4201), LEAD_STACK_PYLIB (the extra modules,
default ``<repo>/.stack/pylib``). Run it with the project's Python (``.venv/bin/python``): mlflow, prefect
and dvc are taken from beside it. As root, Postgres runs as the system user ``lead-stack`` (created if absent).

The servers' extra modules are pyproject.toml's ``stack`` extra (``mlflow[auth]``: Flask-WTF for the basic-auth
app; ``psycopg2-binary``: MLflow's Postgres driver), pinned by the project's lock (``infra/lock/cpu.txt``, or
``gpu.txt`` beside the GPU build of vLLM): ``install`` asks pip what the extra adds to this environment and
installs exactly those pins into LEAD_STACK_PYLIB, the servers' ``PYTHONPATH`` — not into the venv the test
suite runs in (a client of the stack needs none of them).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from base64 import b64encode
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the venv's bin: mlflow, prefect, dvc
PG_OS_USER = "lead-stack"
DB_ROLE = "lead"
ADMIN = "admin"
LOCKS = ROOT / "infra" / "lock"
SERVICES = ("postgres", "mlflow", "prefect", "worker")


class StackError(Exception):
    """One message for the user, no traceback."""


def settings() -> dict:
    state = Path(os.environ.get("LEAD_STACK_DIR") or ROOT / ".stack").resolve()
    return {
        "state": state,
        "pylib": Path(os.environ.get("LEAD_STACK_PYLIB") or ROOT / ".stack" / "pylib").resolve(),
        "ports": {
            "postgres": int(os.environ.get("LEAD_STACK_PG_PORT", "5433")),
            "mlflow": int(os.environ.get("LEAD_STACK_MLFLOW_PORT", "5001")),
            "prefect": int(os.environ.get("LEAD_STACK_PREFECT_PORT", "4201")),
        },
    }


# ---------------------------------------------------------------------------------------------- install


def pg_bindir() -> Path | None:
    """The folder with initdb, pg_ctl, psql and pg_isready: Debian's /usr/lib/postgresql/<v>/bin, else PATH."""
    tools = ("initdb", "pg_ctl", "psql", "pg_isready")
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: _version(p.parent.name))
    for folder in reversed(versions):
        if all((folder / t).is_file() for t in tools):
            return folder
    found = [shutil.which(t) for t in tools]
    if all(found):
        return Path(os.path.realpath(found[0])).parent  # type: ignore[arg-type]
    return None


def _version(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split(".") if part.isdigit())


def install(cfg: dict) -> None:
    if pg_bindir() is None:
        if os.geteuid() != 0:
            raise StackError("PostgreSQL is not installed: run `sudo apt-get install -y postgresql`")
        print("stack: installing postgresql (apt-get)", flush=True)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-qq", "postgresql"], check=True, env=env)
        if pg_bindir() is None:
            raise StackError("apt-get installed postgresql but initdb/pg_ctl are not found")
    if shutil.which("chromium") is None:  # tests/stack/test_registry_ui.py: the registry review in a browser
        if os.geteuid() != 0:
            print("stack: chromium is not installed (`sudo apt-get install -y chromium`): its test skips")
        else:
            print("stack: installing chromium (apt-get)", flush=True)
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
            subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], check=True, env=env)
    pylib = cfg["pylib"]
    stamp = pylib / ".installed"
    requirements, lock = stack_requirements(), lock_file()
    wanted = json.dumps(
        {
            "python": list(sys.version_info[:2]),
            "requirements": requirements,
            "lock": f"{lock.name} {hashlib.sha256(lock.read_bytes()).hexdigest()}",
        }
    )
    if not stamp.is_file() or stamp.read_text() != wanted:
        pins = added_pins(requirements, lock)
        print(f"stack: installing {', '.join(pins) or 'nothing'} into {pylib} (pins: {lock})", flush=True)
        shutil.rmtree(pylib, ignore_errors=True)
        pylib.mkdir(parents=True)
        if pins:
            subprocess.run(
                [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(pylib), *pins],
                check=True,
            )
        stamp.write_text(wanted)
    print(f"stack: installed (postgres in {pg_bindir()}, extras in {pylib})")


def stack_requirements() -> list[str]:
    """pyproject.toml's ``stack`` extra: what the servers need beyond the project's own dependencies."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return list(project["optional-dependencies"]["stack"])


def lock_file() -> Path:
    """The lock this environment was installed from: gpu.txt beside the GPU build of vLLM, else cpu.txt."""
    try:
        importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return LOCKS / "cpu.txt"
    return LOCKS / "gpu.txt"


def _lock_pins(lock: Path) -> dict[str, str]:
    pins = {}
    for line in lock.read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.strip().split("==", 1)
            pins[_normal(name)] = version
    return pins


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def added_pins(requirements: list[str], lock: Path) -> list[str]:
    """``name==version`` of every package ``requirements`` add to this environment (pip's resolution against
    what is installed, under the lock's constraints); each must be pinned by the lock."""
    pip = [sys.executable, "-m", "pip", "install", "-q", "--dry-run", "--report", "-", "-c", str(lock)]
    report = subprocess.run(
        [*pip, *requirements],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    locked = _lock_pins(lock)
    pins = []
    for item in json.loads(report)["install"]:
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        if locked.get(_normal(name)) != version:
            raise StackError(
                f"{name} {version} (for pyproject.toml's `stack` extra) is not pinned by {lock}: "
                "`make lock` rewrites the locks with the extra"
            )
        pins.append(f"{name}=={version}")
    return sorted(pins)


def compose_env(path: Path) -> None:
    """``infra/.env`` for ``docker compose --env-file``: every credential of infra/compose.yaml generated,
    written once (0600; git-ignored). The keys are those of infra/.env.example."""
    if path.exists():
        raise StackError(f"{path} exists: it holds the credentials the containers were created with; keep it")
    example = ROOT / "infra" / ".env.example"
    users = {"POSTGRES_USER": DB_ROLE, "MINIO_ROOT_USER": DB_ROLE, "MLFLOW_ADMIN_USER": ADMIN}
    values = {}
    for line in example.read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key = line.split("=", 1)[0].strip()
            if key in users:
                values[key] = users[key]
            elif key == "PREFECT_AUTH_STRING":
                values[key] = f"{ADMIN}:{secrets.token_urlsafe(24)}"
            else:
                values[key] = secrets.token_urlsafe(32 if "SECRET" in key else 24)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("# generated by `python infra/stack.py compose-env`; never commit, never print\n")
        f.writelines(f"{k}={v}\n" for k, v in values.items())
    print(
        f"stack: wrote {path} ({', '.join(values)}); `docker compose -f infra/compose.yaml --env-file {path} up -d`"
    )


# ---------------------------------------------------------------------------------------------- helpers


def secrets_file(cfg: dict) -> dict[str, str]:
    """The generated passwords (created on first use, mode 0600)."""
    path = cfg["state"] / "secrets.env"
    if not path.exists():
        values = {
            "LEAD_STACK_PG_PASSWORD": secrets.token_urlsafe(24),
            "LEAD_STACK_MLFLOW_ADMIN_PASSWORD": secrets.token_urlsafe(24),
            "LEAD_STACK_PREFECT_PASSWORD": secrets.token_urlsafe(24),
            "LEAD_STACK_MLFLOW_SECRET_KEY": secrets.token_urlsafe(32),  # Flask's CSRF key
        }
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("# generated by infra/stack.py; never commit, never print\n")
            f.writelines(f"{k}={v}\n" for k, v in values.items())
    out = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            out[key] = value
    return out


def alive(pid: int) -> bool:
    """A process that runs (a zombie, waiting for a parent that is gone, does not count)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def group_alive(pgid: int) -> list[int]:
    """The running processes of the process group ``pgid`` (a service and all its children)."""
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, IndexError):
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                pids.append(int(proc.name))
    return pids


def read_pid(cfg: dict, name: str) -> int | None:
    path = cfg["state"] / "pids" / f"{name}.pid"
    if name == "postgres":
        path = cfg["state"] / "pg" / "data" / "postmaster.pid"
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(path.read_text().split()[0])
    return None


def port_free(port: int) -> bool:
    """Whether nothing listens on 127.0.0.1:``port``. SO_REUSEADDR, as the servers set it: the closing
    connections of a server that was killed (FIN-WAIT, TIME-WAIT) do not keep its port from it."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def check_port(name: str, port: int) -> None:
    if not port_free(port):
        var = {"postgres": "LEAD_STACK_PG_PORT", "mlflow": "LEAD_STACK_MLFLOW_PORT"}.get(
            name, "LEAD_STACK_PREFECT_PORT"
        )
        raise StackError(
            f"{name}: port 127.0.0.1:{port} is taken by another process (`ss -ltnp 'sport = :{port}'` shows "
            f"which). Stop it, or choose another port: `{var}={port + 10} make stack` (and the same variable "
            "for stack-status/stack-down)"
        )


def http_status(url: str, auth: tuple[str, str] | None = None, data: bytes | None = None) -> int | None:
    request = urllib.request.Request(url, data=data)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if auth:
        request.add_header("Authorization", "Basic " + b64encode(f"{auth[0]}:{auth[1]}".encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=3) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, ValueError):
        return None


def as_pg_user(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", PG_OS_USER, "--", *cmd] if os.geteuid() == 0 else cmd


def urls(cfg: dict) -> dict[str, str]:
    p = cfg["ports"]
    return {
        "mlflow": f"http://127.0.0.1:{p['mlflow']}",
        "prefect": f"http://127.0.0.1:{p['prefect']}/api",
        "prefect_ui": f"http://127.0.0.1:{p['prefect']}",
    }


def client_env(cfg: dict, sec: dict[str, str]) -> dict[str, str]:
    """What a client of the stack needs (lead, dvc repro, prefect, the worker)."""
    u = urls(cfg)
    return {
        "MLFLOW_TRACKING_URI": u["mlflow"],
        "MLFLOW_TRACKING_USERNAME": ADMIN,
        "MLFLOW_TRACKING_PASSWORD": sec["LEAD_STACK_MLFLOW_ADMIN_PASSWORD"],
        "PREFECT_API_URL": u["prefect"],
        "PREFECT_API_AUTH_STRING": f"{ADMIN}:{sec['LEAD_STACK_PREFECT_PASSWORD']}",
    }


# ---------------------------------------------------------------------------------------------- services


def start_postgres(cfg: dict, sec: dict[str, str]) -> None:
    bindir = pg_bindir()
    if bindir is None:
        raise StackError("PostgreSQL is not installed: run `python infra/stack.py install` first")
    pg = cfg["state"] / "pg"
    data, sock, port = pg / "data", pg / "sock", cfg["ports"]["postgres"]
    ready = [str(bindir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port)]
    pid = read_pid(cfg, "postgres")
    if pid and alive(pid):
        if subprocess.run(ready).returncode == 0:
            print(f"postgres: already running (pid {pid}, 127.0.0.1:{port})")
            return
        raise StackError(f"postgres: runs (pid {pid}) but not on 127.0.0.1:{port}: `make stack-down` first")
    check_port("postgres", port)
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam(PG_OS_USER)
        except KeyError:
            subprocess.run(
                ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PG_OS_USER],
                check=True,
            )
    pg.mkdir(parents=True, exist_ok=True)
    sock.mkdir(mode=0o700, exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(pg, PG_OS_USER)
        shutil.chown(sock, PG_OS_USER)
    fresh = not (data / "PG_VERSION").exists()
    if fresh:
        print("postgres: initdb (first use)", flush=True)
        initdb = [str(bindir / "initdb"), "-D", str(data), "-E", "UTF8", "--locale=C", "--auth-local=peer"]
        initdb.append("--auth-host=scram-sha-256")
        subprocess.run(
            as_pg_user(initdb),
            check=True,
            stdout=subprocess.DEVNULL,
        )
    options = f"-p {port} -k {sock} -c listen_addresses=127.0.0.1"
    pg_ctl = [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(pg / "postgres.log"), "-o", options, "-w"]
    pg_ctl += ["-t", "60", "start"]
    subprocess.run(
        as_pg_user(pg_ctl),
        check=True,
        stdout=subprocess.DEVNULL,
    )
    # The role and databases, idempotent; the password through psql's standard input, not its command line.
    password = sec["LEAD_STACK_PG_PASSWORD"]
    sql = f"""
SELECT format('CREATE ROLE {DB_ROLE} LOGIN PASSWORD %L', '{password}')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{DB_ROLE}')\\gexec
""" + "".join(
        f"SELECT 'CREATE DATABASE {db} OWNER {DB_ROLE}'"
        f" WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '{db}')\\gexec\n"
        for db in ("mlflow", "prefect")
    )
    psql = [str(bindir / "psql"), "-q", "-v", "ON_ERROR_STOP=1", "-h", str(sock), "-p", str(port)]
    psql += ["-d", "postgres"]
    subprocess.run(
        as_pg_user(psql),
        input=sql,
        text=True,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    print(f"postgres: started (127.0.0.1:{port}, role {DB_ROLE}, databases mlflow, prefect)")


def spawn(cfg: dict, name: str, cmd: list[str], env: dict[str, str]) -> int:
    """Start ``cmd`` in a session of its own (stopped as a group), its output in .stack/logs/<name>.log."""
    (cfg["state"] / "logs").mkdir(parents=True, exist_ok=True)
    (cfg["state"] / "pids").mkdir(parents=True, exist_ok=True)
    with open(cfg["state"] / "logs" / f"{name}.log", "ab") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env={**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", **env},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    (cfg["state"] / "pids" / f"{name}.pid").write_text(f"{proc.pid}\n")
    return proc.pid


def db_uri(cfg: dict, sec: dict[str, str], database: str, driver: str = "") -> str:
    scheme = f"postgresql+{driver}" if driver else "postgresql"
    return f"{scheme}://{DB_ROLE}:{sec['LEAD_STACK_PG_PASSWORD']}@127.0.0.1:{cfg['ports']['postgres']}/{database}"


def mlflow_health(cfg: dict) -> bool:
    return http_status(urls(cfg)["mlflow"] + "/health") == 200


def prefect_health(cfg: dict) -> bool:
    return http_status(urls(cfg)["prefect"] + "/health") == 200


def running(cfg: dict, name: str) -> int | None:
    pid = read_pid(cfg, name)
    return pid if pid and alive(pid) else None


def to_start(cfg: dict, name: str, where: str, port: int | None = None) -> bool:
    """Whether ``name`` must be started: False (said) when it already runs; else its ``port`` must be free."""
    pid = running(cfg, name)
    if pid:
        print(f"{name}: already running (pid {pid}, {where})")
        return False
    if port is not None:
        check_port(name, port)
    return True


def start_mlflow(cfg: dict, sec: dict[str, str]) -> int | None:
    port = cfg["ports"]["mlflow"]
    if not to_start(cfg, "mlflow", urls(cfg)["mlflow"], port):
        return None
    if not (cfg["pylib"] / ".installed").is_file():
        raise StackError(
            f"mlflow: its extra modules are missing ({cfg['pylib']}): run `python infra/stack.py install`"
        )
    state = cfg["state"]
    auth_ini = state / "mlflow-auth.ini"
    auth_ini.write_text(
        "[mlflow]\ndefault_permission = READ\n"
        f"database_uri = sqlite:///{state / 'mlflow-auth.db'}\n"
        f"admin_username = {ADMIN}\n"
        "# admin_password: from MLFLOW_AUTH_ADMIN_PASSWORD (infra/stack.py, .stack/secrets.env)\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
        "# a password's PBKDF2 check once a minute, not on every request (one worker: no stale entries)\n"
        "auth_cache_ttl_seconds = 60\n"
    )
    env = {
        "MLFLOW_BACKEND_STORE_URI": db_uri(cfg, sec, "mlflow", "psycopg2"),
        "MLFLOW_ARTIFACTS_DESTINATION": str(state / "mlartifacts"),
        "MLFLOW_AUTH_CONFIG_PATH": str(auth_ini),
        "MLFLOW_AUTH_ADMIN_PASSWORD": sec["LEAD_STACK_MLFLOW_ADMIN_PASSWORD"],
        "MLFLOW_FLASK_SERVER_SECRET_KEY": sec["LEAD_STACK_MLFLOW_SECRET_KEY"],
        # No job runner (GenAI scorers, judges; lead uses none): its 7 idle huey consumers poll a core's third.
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        "PYTHONPATH": str(cfg["pylib"]),
    }
    cmd = [str(BIN / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    return spawn(cfg, "mlflow", [*cmd, "--serve-artifacts", "--app-name", "basic-auth"], env)


# The server streams each run's log to whoever watches it (`prefect deployment run --watch`): without these, a
# watched run shows Prefect's state changes only, not the stages' lines (Prefect's defaults are off).
LOG_STREAM_ENV = {
    "PREFECT_SERVER_LOGS_STREAM_OUT_ENABLED": "true",
    "PREFECT_SERVER_LOGS_STREAM_PUBLISHING_ENABLED": "true",
}


def prefect_env(cfg: dict) -> dict[str, str]:
    home = cfg["state"] / "prefect-home"
    home.mkdir(parents=True, exist_ok=True)
    return {"PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


def start_prefect(cfg: dict, sec: dict[str, str]) -> int | None:
    port = cfg["ports"]["prefect"]
    if not to_start(cfg, "prefect", urls(cfg)["prefect_ui"], port):
        return None
    env = {
        **prefect_env(cfg),
        **LOG_STREAM_ENV,
        "PREFECT_API_DATABASE_CONNECTION_URL": db_uri(cfg, sec, "prefect", "asyncpg"),
        "PREFECT_SERVER_API_AUTH_STRING": f"{ADMIN}:{sec['LEAD_STACK_PREFECT_PASSWORD']}",
        "PREFECT_API_AUTH_STRING": f"{ADMIN}:{sec['LEAD_STACK_PREFECT_PASSWORD']}",  # the UI's own calls
        "PREFECT_UI_API_URL": urls(cfg)["prefect"],
    }
    cmd = [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    return spawn(cfg, "prefect", cmd, env)


def start_worker(cfg: dict, sec: dict[str, str]) -> None:
    if not to_start(cfg, "worker", "pool lead-local"):
        return
    env = {**prefect_env(cfg), **client_env(cfg, sec)}
    prefect = str(BIN / "prefect")
    subprocess.run(
        [prefect, "work-pool", "create", "lead-local", "--type", "process", "--overwrite"],
        env={**os.environ, **env},
        check=True,
        stdout=subprocess.DEVNULL,
    )
    pid = spawn(
        cfg, "worker", [prefect, "worker", "start", "--pool", "lead-local", "--name", "lead-stack"], env
    )
    print(f"worker: started (pid {pid}, pool lead-local, workspace {ROOT})")


def wait_healthy(cfg: dict, checks: dict, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    pending = dict(checks)
    while pending:
        for name, check in list(pending.items()):
            if check(cfg):
                print(f"{name}: healthy ({urls(cfg)[name]})", flush=True)
                del pending[name]
                continue
            if not running(cfg, name):
                log = cfg["state"] / "logs" / f"{name}.log"
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:]) if log.exists() else ""
                raise StackError(
                    f"{name}: exited before it was healthy (`make stack-down` stops the rest); the end of "
                    f"{log}:\n{tail}"
                )
        if pending and time.monotonic() > deadline:
            raise StackError(
                f"{', '.join(pending)}: not healthy after {timeout:.0f} s (logs in {cfg['state']}/logs)"
            )
        if pending:
            time.sleep(0.5)


def write_env_sh(cfg: dict, sec: dict[str, str]) -> Path:
    """Client settings to ``source``; the passwords are read from secrets.env, not copied."""
    secret_file = cfg["state"] / "secrets.env"

    def secret(key: str) -> str:
        return f"\"$(sed -n 's/^{key}=//p' {secret_file})\""

    env = client_env(cfg, sec)
    lines = [
        "# source this file: the team stack on this machine (infra/stack.py; `make stack-down` stops it)",
        f"export MLFLOW_TRACKING_URI={env['MLFLOW_TRACKING_URI']}",
        f"export MLFLOW_TRACKING_USERNAME={ADMIN}",
        f"export MLFLOW_TRACKING_PASSWORD={secret('LEAD_STACK_MLFLOW_ADMIN_PASSWORD')}",
        f"export PREFECT_API_URL={env['PREFECT_API_URL']}",
        f"export PREFECT_API_AUTH_STRING={ADMIN}:{secret('LEAD_STACK_PREFECT_PASSWORD')}",
    ]
    path = cfg["state"] / "env.sh"
    path.write_text("\n".join(lines) + "\n")
    return path


def dvc_remote(cfg: dict) -> None:
    remote = cfg["state"] / "dvc-remote"
    remote.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [str(BIN / "dvc"), "remote", "add", "-d", "--local", "--force", "stack", str(remote)],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    print(f"dvc: default remote `stack` = {remote} (.dvc/config.local)")


def up(cfg: dict, *, dvc: bool = True) -> None:
    started = time.monotonic()
    cfg["state"].mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        cfg["state"].chmod(0o711)  # the Postgres user must reach .stack/pg; the files stay root's
    sec = secrets_file(cfg)
    start_postgres(cfg, sec)
    start_mlflow(cfg, sec)
    start_prefect(cfg, sec)
    wait_healthy(cfg, {"mlflow": mlflow_health, "prefect": prefect_health})
    start_worker(cfg, sec)
    if dvc:
        dvc_remote(cfg)
    env_sh = write_env_sh(cfg, sec)
    u = urls(cfg)
    print(
        f"\nstack: up in {time.monotonic() - started:.1f} s\n"
        f"  MLflow   {u['mlflow']}   (user {ADMIN}, password in {cfg['state'] / 'secrets.env'})\n"
        f"  Prefect  {u['prefect_ui']}   (API {u['prefect']}, basic auth {ADMIN}:<password>)\n"
        f"  Postgres 127.0.0.1:{cfg['ports']['postgres']}   (role {DB_ROLE})\n"
        f"  logs     {cfg['state'] / 'logs'}\n"
        f"Use it:  source {env_sh}\n" + "".join(f"  {line}\n" for line in env_sh.read_text().splitlines()[1:])
    )


def stop_groups(groups: dict[str, int], timeout: float = 20.0) -> None:
    """SIGTERM each process group of ``groups`` (name -> leader pid) once, all at once; SIGKILL what is left of
    them after ``timeout`` seconds. (Once only: a second SIGTERM makes a Prefect worker SIGKILL itself.)"""
    for pid in groups.values():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(group_alive(pid) for pid in groups.values()) and time.monotonic() < deadline:
        time.sleep(0.2)
    for name, pid in groups.items():
        left = group_alive(pid)
        for each in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(each, signal.SIGKILL)
        print(f"{name}: stopped (pid {pid}{', killed ' + str(left) if left else ''})")


def down(cfg: dict) -> None:
    for name in ("worker", "prefect", "mlflow"):
        pid = read_pid(cfg, name)
        if pid and (alive(pid) or group_alive(pid)):
            stop_groups({name: pid})  # one after the other: the worker leaves before its server stops
        else:
            print(f"{name}: not running")
        with contextlib.suppress(FileNotFoundError):
            (cfg["state"] / "pids" / f"{name}.pid").unlink()
    pid = read_pid(cfg, "postgres")
    bindir = pg_bindir()
    if pid and alive(pid) and bindir:
        data = cfg["state"] / "pg" / "data"
        subprocess.run(
            as_pg_user([str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]),
            check=True,
            stdout=subprocess.DEVNULL,
        )
        print(f"postgres: stopped (pid {pid})")
    else:
        print("postgres: not running")


def status(cfg: dict) -> bool:
    u = urls(cfg)
    bindir = pg_bindir()
    port = cfg["ports"]["postgres"]
    ready = [str(bindir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port)] if bindir else []
    pg_ok = bool(ready) and subprocess.run(ready).returncode == 0
    rows = {
        "postgres": (running(cfg, "postgres"), pg_ok, f"127.0.0.1:{port}"),
        "mlflow": (running(cfg, "mlflow"), mlflow_health(cfg), u["mlflow"]),
        "prefect": (running(cfg, "prefect"), prefect_health(cfg), u["prefect_ui"]),
        "worker": (running(cfg, "worker"), bool(running(cfg, "worker")), "pool lead-local"),
    }
    for name, (pid, healthy, where) in rows.items():
        state = "up" if pid and healthy else ("starting/unhealthy" if pid else "down")
        print(f"{name:9} {state:19} {where}" + (f"  (pid {pid})" if pid else ""))
    return all(pid and healthy for pid, healthy, _ in rows.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["install", "up", "down", "status", "compose-env"])
    parser.add_argument("--no-dvc-remote", action="store_true", help="up: leave the DVC remotes as they are")
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "infra" / ".env",
        help="compose-env: the file (default: infra/.env)",
    )
    args = parser.parse_args(argv)
    cfg = settings()
    try:
        if args.command == "install":
            install(cfg)
        elif args.command == "up":
            os.umask(0o077)  # logs, the auth store, the artifacts: this user's only
            up(cfg, dvc=not args.no_dvc_remote)
        elif args.command == "down":
            down(cfg)
        elif args.command == "compose-env":
            compose_env(args.out)
        else:
            return 0 if status(cfg) else 3
    except StackError as exc:
        print(f"stack: {exc}", file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as exc:
        print(f"stack: {exc.cmd[0]} failed (exit {exc.returncode}); logs in {cfg['state']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
