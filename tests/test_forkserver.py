"""The fork server the tests start their commands through (tests/forkserver.py) behaves as running the command
fresh does, in what the tests rely on: argv, working folder, environment, standard streams, exit status,
signals; a killed client takes its command with it; a command whose import-time environment differs from
every server's runs fresh; ``JUDGE_TEST_FORK=0`` runs it fresh.

The command is a probe module in the test's folder (``python -m probe``), so what it reports is the process
it ran in, not the judge."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import forkserver
import pytest

pytestmark = pytest.mark.slow  # the server imports torch and transformers once

PROBE = """
import json, os, signal, sys, time
mode = sys.argv[1]
if mode == "report":
    print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "path0": sys.path[0], "var": os.environ.get("PROBE_VAR"),
                      "stdin": sys.stdin.read(), "torch_loaded": "torch" in sys.modules, "pid": os.getpid(),
                      "tests_on_path": any(p.endswith("/tests") for p in sys.path)}))
    print("to stderr", file=sys.stderr)
    sys.exit(3)
if mode == "sigterm":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))
print("ready", flush=True)
time.sleep(120)
"""


@pytest.fixture
def probe(tmp_path):
    (tmp_path / "probe.py").write_text(PROBE)
    env = {**os.environ, "PROBE_VAR": "from the test"}
    forkserver.wait_ready(env)
    return tmp_path, env


def start(folder, env, *args, **kwargs) -> subprocess.Popen:
    cmd = forkserver.command("probe", *args, env=env)
    return subprocess.Popen(cmd, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **kwargs)  # fmt: skip


def wait_line(proc: subprocess.Popen) -> None:
    assert proc.stdout.readline().strip() == "ready"


def test_a_forked_command_sees_what_a_fresh_one_sees(probe):
    folder, env = probe
    runs = {}
    for name, run_env in (("forked", env), ("fresh", {**env, "JUDGE_TEST_FORK": "0"})):
        proc = subprocess.Popen(forkserver.command("probe", "report", "x y", env=env), cwd=folder, env=run_env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        out, err = proc.communicate("given on stdin", timeout=120)
        got = json.loads(out)
        runs[name] = (proc.returncode, got, err, got["pid"] != proc.pid)
    (code, got, err, forked), (fresh_code, fresh, fresh_err, fresh_forked) = runs["forked"], runs["fresh"]
    assert forked and not fresh_forked  # the first was forked by the server, the second exec'd in place
    assert got["torch_loaded"] and not fresh["torch_loaded"]
    assert code == fresh_code == 3 and err == fresh_err == "to stderr\n"
    for key in ("argv", "cwd", "path0", "var", "stdin", "tests_on_path"):
        assert got[key] == fresh[key], key
    assert got["argv"] == ["report", "x y"] and got["path0"] == str(folder) and got["var"] == "from the test"
    assert not got["tests_on_path"]


def test_signals_reach_the_command_and_the_client_ends_as_it_did(probe):
    folder, env = probe
    handled = start(folder, env, "sigterm")
    wait_line(handled)
    assert forkserver.real_pid(handled.pid) != handled.pid
    handled.send_signal(signal.SIGTERM)
    assert handled.wait(timeout=30) == 7  # the command's own handler ran and chose the exit code
    plain = start(folder, env, "sleep")
    wait_line(plain)
    plain.send_signal(signal.SIGTERM)
    assert plain.wait(timeout=30) == -signal.SIGTERM  # killed by the signal, as a fresh process would be


def test_an_ignored_sigint_stays_ignored(probe):
    """A job started in the background ignores SIGINT, and so does the command it runs."""
    folder, env = probe
    proc = start(folder, env, "sleep", preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    wait_line(proc)
    proc.send_signal(signal.SIGINT)
    time.sleep(1)
    assert proc.poll() is None
    proc.terminate()
    assert proc.wait(timeout=30) == -signal.SIGTERM


def test_a_killed_client_takes_its_command_with_it(probe):
    folder, env = probe
    proc = start(folder, env, "sleep")
    wait_line(proc)
    command = forkserver.real_pid(proc.pid)
    assert command != proc.pid
    proc.kill()
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{command}") and "zombie" not in _state(command):
        assert time.monotonic() < deadline, "the command outlived its client"
        time.sleep(0.1)


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(line for line in f if line.startswith("State:")).lower()
    except (FileNotFoundError, StopIteration):
        return "zombie"


def test_another_import_time_environment_runs_fresh(probe):
    """A variable read while the libraries import (a thread count here) differs from every server's: the
    command is not forked from a parent that imported with another value."""
    folder, env = probe
    other = {**env, "OMP_NUM_THREADS": "3" if env.get("OMP_NUM_THREADS") != "3" else "4"}
    # The argv made for `env` (its server is listening), run with the other environment.
    proc = subprocess.Popen(forkserver.command("probe", "report", env=env), cwd=folder, env=other,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)  # fmt: skip
    out, _ = proc.communicate(timeout=120)
    got = json.loads(out)
    assert got["pid"] == proc.pid and not got["torch_loaded"]


def test_a_signal_while_the_command_is_forked_ends_the_command_not_the_server(probe):
    """A signal sent at once (before the server has answered with the command's pid) reaches the command,
    which ends by it; the server and the other commands it runs are untouched."""
    folder, env = probe
    bystander = start(folder, env, "sleep")
    wait_line(bystander)
    for _ in range(20):
        proc = start(folder, env, "sleep")
        time.sleep(0.005)  # the client is connecting or waiting for the fork
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == -signal.SIGTERM
    assert bystander.poll() is None  # the server did not stop (it would have killed every command)
    bystander.terminate()
    assert bystander.wait(timeout=30) == -signal.SIGTERM


def test_a_client_whose_server_goes_ends_as_killed(probe):
    folder, env = probe
    proc = start(folder, env, "sleep")
    wait_line(proc)
    forkserver.stop()  # the server ends, killing its commands
    assert proc.wait(timeout=30) == -signal.SIGKILL
    assert "Traceback" not in proc.stderr.read()


def test_killpg_of_a_new_session_reaches_what_the_command_started(probe):
    """A test that starts a command in a session of its own and stops it with killpg (the --help examples'
    servers) stops what the command started too, as with a fresh process."""
    folder, env = probe
    (folder / "spawner.py").write_text(
        "import subprocess, sys, time\n"
        "child = subprocess.Popen(['sleep', '300'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(300)\n"
    )
    for fork in ("1", "0"):
        run_env = {**env, "JUDGE_TEST_FORK": fork} if fork == "0" else env
        proc = subprocess.Popen(forkserver.command("spawner", env=env), cwd=folder, env=run_env,
                                stdout=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
        grandchild = int(proc.stdout.readline())
        assert (forkserver.real_pid(proc.pid) != proc.pid) == (fork == "1")
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == -signal.SIGTERM
        deadline = time.monotonic() + 10
        while "zombie" not in _state(grandchild):
            assert time.monotonic() < deadline, f"fork={fork}: the command's child outlived the killpg"
            time.sleep(0.05)
