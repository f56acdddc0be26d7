"""Every example in every command's ``--help`` runs as written: a newcomer copies them.

The examples are read from the help itself, and run from a workspace laid out as the repository is after
``bash scripts/demo.sh`` (its ``examples/``, ``annotations/demo`` and a ``runs/demo`` the demo script wrote,
with few training steps so that it is quick). Each command runs as its console script would (a wrapper per
``judge-*`` name that runs this checkout's module, forked by ``tests/forkserver.py``). Only ports change: a
server's port is swapped for a free one, in the server's command and in the commands that talk to it
(examples name 8000, 8001, ...; on a shared machine those may be taken). A server (``judge-serve``,
``judge-view`` without ``--export``) counts as running once it is ready (``judge-serve``: ``GET /ready``, its
judge loaded); its clients run, then it stops.
A command's examples that each write only their own ``--out`` folder run two at a time (each on one
thread), as two newcomers' shells would, and so do a command's servers, each with its clients;
the other examples run in the order the help gives.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import forkserver
import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
#: command -> the module that implements it
COMMANDS = {
    "judge-data": "judge.cli",
    "judge-train": "judge.cli.train",
    "judge-score": "judge.cli.score",
    "judge-report": "judge.cli.report",
    "judge-audit": "judge.cli.audit",
    "judge-calibrate": "judge.cli.calibrate",
    "judge-bench": "judge.cli.bench",
    "judge-serve": "judge.cli.serve",
    "judge-view": "judge.cli.view",
}
START = re.compile(r"^  (?:[A-Z_]+=\S+ )*(?:judge-[a-z]+|accelerate|curl) ")
#: the default port of a server command that names none
DEFAULT_PORT = {"judge-serve": 8000, "judge-view": 8765}
#: examples run side by side at most (each on one thread): the development host's 2 cores
SIDE_BY_SIDE = min(2, os.cpu_count() or 1)


def help_text(command: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", COMMANDS[command], "--help"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "100"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


def examples(text: str) -> list[str]:
    """The example commands of a help text: lines starting with a command (two spaces in), continued by a
    trailing backslash or an open quote; the description after three spaces or more is left out."""
    lines = text.splitlines()
    out, i = [], 0
    while i < len(lines):
        if not START.match(lines[i]):
            i += 1
            continue
        cmd = re.split(r" {3,}", lines[i].strip())[0]
        while cmd.endswith("\\") or cmd.count("'") % 2:
            i += 1
            cmd = (
                (cmd[:-1].rstrip() if cmd.endswith("\\") else cmd)
                + " "
                + re.split(r" {3,}", lines[i].strip())[0]
            )
        out.append(cmd)
        i += 1
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    ws = tmp_path_factory.mktemp("help-examples")
    shutil.copytree(ROOT / "examples", ws / "examples")
    (ws / "annotations").mkdir()
    (ws / "annotations" / "demo").symlink_to(ROOT / "annotations" / "demo")
    bin_dir = ws / "bin"
    bin_dir.mkdir()
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "OMP_NUM_THREADS": "1",
    }
    if forkserver.enabled():
        # `python3 scripts/demo.py` (demo.sh) and the processes `accelerate launch` starts, forked too.
        env = forkserver.python_on_path({**env, "PYTHON_EXEC": forkserver.python_shim()})
    for name, module in COMMANDS.items():  # python -m MODULE, forked by tests/forkserver.py
        forkserver.wrapper(bin_dir / name, module, env)
    # What scripts/demo.sh writes, with 4 training steps: the files the examples name under runs/demo/.
    demo = subprocess.run(
        ["bash", str(ROOT / "scripts" / "demo.sh"), "--steps", "4", "--out", str(ws / "runs" / "demo")],
        env=env, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    return ws, env, demo.stdout


def _view_line(out: str) -> str:
    """The judge-view command the demo prints (the line after its heading)."""
    lines = out.splitlines()
    return lines[lines.index(next(x for x in lines if x.startswith("== Look at what the judge did"))) + 1]


def test_the_demo_prints_its_duration_how_to_shorten_it_and_the_view_command(workspace, tmp_path):
    """The demo says how long it will take and how to shorten it, shows the time left while it trains, prints
    the command line of each step, and gives a judge-view command that runs as printed; the site it writes
    opens with the verdicts, names the calibration by its method (not its fingerprint) and shows the
    report's calibration, selective and PPI checks."""
    ws, env, out = workspace
    head = out.splitlines()[:3]
    assert "trains 4 steps and takes about" in head[0] and "--quick" in " ".join(head), head
    assert re.search(r"s so far, about .* left\]", out), "no time-left estimate while training"
    for command in ("judge-train --config demo", "judge-calibrate --judge", "judge-score ", "judge-report ",
                    "judge-audit "):  # fmt: skip
        assert f"\n$ {command}" in out, command
    assert "in all (" in out and "expected)" in out
    view = _view_line(out)
    assert view.endswith(f"{ws}/runs/demo/score --report {ws}/runs/demo/report --audit {ws}/runs/demo/audit")
    assert view.startswith(("judge-view ", "python3 -m judge.cli.view ")), view
    site = tmp_path / "site"
    got = _run(f"{view} --export {site}", ws, env)
    assert got.returncode == 0, got.stderr[-2000:]
    assert (site / "index.html").is_file()
    text = (site / "data" / "index.js").read_text()
    page = json.loads(text[len("JV.index(") : -3])["summary"]
    titles = [s["title"] for s in page["sections"]]
    assert titles[0] == "Verdict"
    for check in ("Calibration on held-out items", "Selective evaluation on held-out items",
                  "Prediction-powered inference check"):  # fmt: skip
        assert any(t.startswith(check) for t in titles), (check, titles)
    facts = dict(page["sections"][1]["tables"][0]["rows"])
    fingerprint = json.loads((ws / "runs/demo/score/run.json").read_text())["identity"]["calibration"]
    assert facts["calibration"].startswith("auto: ") and fingerprint not in text


def test_the_demo_ends_with_its_verdict_read_from_its_files(workspace):
    """The demo's last screen is the verdict block, built from the files its steps wrote (so another run's
    files give another block); the calibration tables are printed once; the recap says its PPI run is its
    own draw, not the leaderboard's labelled sample."""
    from judge.view.verdict import read_run_files, run_verdicts, verdict_block

    ws, _, out = workspace
    demo = ws / "runs" / "demo"
    files = read_run_files(score=demo / "score", report=demo / "report", audit=demo / "audit",
                           judge=demo / "judge", scorer="trained")  # fmt: skip
    verdicts = run_verdicts(files)
    assert out.rstrip().endswith(verdict_block(verdicts, files))
    assert [v.topic for v in verdicts] == ["Agreement", "Audit", "Calibration", "Selective evaluation"]
    agreement = verdicts[0]
    assert agreement.headline.startswith("trained: Spearman ") and "of the annotators' " in agreement.headline
    for other in ("untrained", "clipscore"):
        assert any(d.startswith(f"  trained - {other}: ") for d in agreement.details), other
    for perturbation in ("blank-images", "off-topic", "unrelated-text"):
        assert any(d.strip().startswith(perturbation) for d in verdicts[1].details), perturbation
    assert out.count("Held-out comparison") == 1 and out.count("Choice of map") == 1
    assert "its own random draw" in out and "not the labelled sample of the leaderboard's PPI column" in out


def test_the_demo_refuses_a_bad_option_with_its_usage():
    for args, words in (
        (["--steps", "x"], "--steps: invalid int value: 'x'"),
        (["--steps", "1"], "--steps must be at least 2, got 1"),
        (["--quick", "--steps", "5"], "not allowed with argument"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ):
        got = subprocess.run(
            ["bash", str(ROOT / "scripts" / "demo.sh"), *args], capture_output=True, text=True
        )
        assert got.returncode == 2 and words in got.stderr and "usage: bash scripts/demo.sh" in got.stderr, (
            args,
            got.stderr,
        )
        assert "Traceback" not in got.stderr and not got.stdout.startswith("The demo trains")


def _run(cmd: str, ws: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", cmd], cwd=ws, env=env, capture_output=True, text=True, timeout=900)


def _serve(cmd: str, ws: Path, env: dict, path: str, clients: list[str]) -> None:
    """Start a server example, wait until it answers ``path`` at the address it prints, run its clients."""
    proc = subprocess.Popen(
        ["bash", "-c", f"exec env {cmd}"], cwd=ws, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    # A server started with a key wants it on every route but /health.
    key = re.search(r"\bJUDGE_API_KEY=(\S+)", cmd)
    headers = {"Authorization": f"Bearer {key.group(1)}"} if key else {}
    try:
        deadline = time.monotonic() + 600
        while True:
            assert proc.poll() is None, f"{cmd!r} exited: {''.join(lines)[-3000:]}"
            found = re.search(r"http://[^\s/]+:(\d+)", "".join(lines))
            if found:
                try:
                    got = httpx.get(f"http://127.0.0.1:{found.group(1)}/{path}", headers=headers, timeout=5)
                except httpx.HTTPError:
                    pass
                else:
                    if got.status_code == 200:
                        break
                    assert got.status_code == 503, (cmd, got.status_code, got.text)  # 503: still loading
            assert time.monotonic() < deadline, f"{cmd!r} never answered: {''.join(lines)[-3000:]}"
            time.sleep(1)
        for client in clients:
            got = _run(client, ws, env)
            assert got.returncode == 0, (client, got.stdout[-2000:], got.stderr[-2000:])
            if client.startswith("curl"):  # curl exits 0 on an error answer too: the answer must be scores
                assert '"criteria"' in got.stdout or '"score"' in got.stdout, got.stdout[-2000:]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _ports(cmds: list[str]) -> dict[int, int]:
    named = {int(p) for c in cmds for p in re.findall(r"(?::|--port )(\d{4})\b", c)}
    named |= set(DEFAULT_PORT.values())
    return {p: free_port() for p in sorted(named)}


def _with_ports(cmd: str, ports: dict[int, int]) -> str:
    for old, new in ports.items():
        cmd = re.sub(rf"(:|--port ){old}\b", rf"\g<1>{new}", cmd)
    return cmd


def _independent(cmds: list[str]) -> list[str]:
    """The examples that may run side by side: all of them when each writes only its own ``--out`` folder
    and none names another's (a command whose examples build on each other, or write into a folder another
    reads, such as judge-train's and judge-calibrate's, runs in order); a launcher of several processes
    (``accelerate``) runs alone, after them."""
    own = [c for c in cmds if _name(c) != "accelerate"]
    outs = [re.search(r"--out (\S+)", c) for c in own]
    if len(own) < 2 or not all(outs):
        return []
    folders = [m.group(1) for m in outs if m]
    if len(set(folders)) < len(folders):
        return []
    if any(f in c for f in folders for c in cmds if not c.endswith(f"--out {f}") and f"--out {f} " not in c):
        return []
    return own


def _name(cmd: str) -> str:
    return next(w for w in cmd.split() if w.startswith("judge-") or w in ("curl", "accelerate"))


def _is_server(cmd: str) -> bool:
    name = _name(cmd)
    return name == "judge-serve" or (name == "judge-view" and "--export" not in cmd.split())


@pytest.mark.slow
@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "judge-data"])
def test_every_help_example_runs_as_written(workspace, command):
    ws, env, _ = workspace
    cmds = examples(help_text(command))
    assert cmds, f"{command} --help shows no example"
    ports = _ports(cmds)
    servers = [c for c in cmds if _is_server(c)]
    clients = [c for c in cmds if c.startswith("curl") or "--server http" in c]
    plain = [c for c in cmds if c not in servers and c not in clients]
    together = _independent(plain)
    # Independent examples two at a time (each runs one thread: OMP_NUM_THREADS=1), the rest in order.
    with ThreadPoolExecutor(SIDE_BY_SIDE) as pool:
        done = list(pool.map(lambda c: (c, _run(c, ws, env)), together))
    for cmd in plain:
        got = next((g for c, g in done if c == cmd), None) or _run(cmd, ws, env)
        assert got.returncode == 0, (cmd, got.stdout[-2000:], got.stderr[-2000:])
    jobs = []
    for server in servers:
        m = re.search(r"--port (\d+)", server)
        port = int(m.group(1)) if m else DEFAULT_PORT[_name(server)]
        mine = [c for c in clients if re.search(rf":{port}\b", c)]
        cmd = _with_ports(server if m else f"{server} --port {port}", ports)
        path = "ready" if _name(server) == "judge-serve" else "index.html"
        jobs.append((cmd, path, [_with_ports(c, ports) for c in mine]))
        clients = [c for c in clients if c not in mine]
    # The servers (each on its own port, reading what the examples above wrote) two at a time, as above.
    with ThreadPoolExecutor(SIDE_BY_SIDE) as pool:
        for _ in pool.map(lambda job: _serve(job[0], ws, env, job[1], job[2]), jobs):
            pass
    # A client whose server is another command's example (judge-score --server): the judge-serve example it
    # names, on its port.
    for port in sorted({int(p) for c in clients for p in re.findall(r":(\d{4})\b", c)}):
        mine = [c for c in clients if re.search(rf":{port}\b", c)]
        server = _with_ports(f"judge-serve --judge runs/demo/judge --port {port}", ports)
        _serve(server, ws, env, "ready", [_with_ports(c, ports) for c in mine])


def test_examples_are_read_from_the_help():
    """The parser of this module finds continued lines and open quotes, and leaves descriptions out."""
    text = (
        "examples:\n"
        "  judge-score a.jsonl --judge tiny \\\n"
        "              --out runs/x      what it does\n"
        "                                      more words\n"
        '  curl -s localhost:8000/v1/score -d \'{"items": [1,\n'
        "       2]}'\n"
        "  JUDGE_API_KEY=k judge-serve --judge J --port 8002   with a key\n"
    )
    assert examples(text) == [
        "judge-score a.jsonl --judge tiny --out runs/x",
        "curl -s localhost:8000/v1/score -d '{\"items\": [1, 2]}'",
        "JUDGE_API_KEY=k judge-serve --judge J --port 8002",
    ]
    assert (
        _with_ports("curl localhost:8000/x --port 8000", {8000: 1234}) == "curl localhost:1234/x --port 1234"
    )
