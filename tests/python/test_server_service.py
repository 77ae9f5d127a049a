"""tests/python/test_server_service.py — jetson-llm-server under systemd's protocols, without
systemd: READY=1 only once the model is loaded (a datagram socket stands in for $NOTIFY_SOCKET),
WATCHDOG=1 pings at half of $WATCHDOG_USEC, STOPPING=1 on SIGTERM; SIGHUP reopens --log-file
after a rotation; and the unit file that scripts/install_service.sh renders passes
`systemd-analyze verify`."""
import http.client
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from server_harness import BUILD, MODEL, ROOT, Server, binary_path, require_artifacts


def notify_socket():
    d = tempfile.mkdtemp(prefix="jllm-notify-")
    path = os.path.join(d, "notify")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(0.2)
    return s, path, d


def drain(s, seconds):
    msgs = []
    end = time.time() + seconds
    while time.time() < end:
        try:
            msgs.append(s.recv(4096).decode())
        except socket.timeout:
            pass
    return msgs


def test_notify_ready_watchdog_and_stopping():
    s, path, d = notify_socket()
    try:
        srv = Server(env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "400000"})
        try:
            msgs = drain(s, 1.5)
            text = "\n".join(msgs)
            assert "READY=1" in text, msgs
            ready = next(i for i, m in enumerate(msgs) if "READY=1" in m)
            assert any(m.startswith("STATUS=loading") for m in msgs[:ready]), msgs  # loading first
            assert "serving" in msgs[ready]
            assert sum("WATCHDOG=1" in m for m in msgs) >= 3, msgs  # every 0.2 s
            srv.assert_healthy()
            assert srv.terminate() == 0
            assert any("STOPPING=1" in m for m in drain(s, 0.5))
        finally:
            srv.stop()
    finally:
        s.close()
        shutil.rmtree(d, ignore_errors=True)


def test_sighup_reopens_the_log_file(tmp_path):
    require_artifacts()
    log = tmp_path / "server.log"
    proc = subprocess.Popen([binary_path(), "-m", MODEL, "-p", "0", "-c", "256", "-t", "2", "--log-file", str(log)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 30
        text = ""
        while "ready:" not in text and time.time() < deadline:
            time.sleep(0.05)
            text = log.read_text() if log.exists() else ""
        assert "ready:" in text, text
        port = int(re.search(r"listening on http://127\.0\.0\.1:(\d+)", text).group(1))
        os.rename(log, str(log) + ".1")  # logrotate's move
        proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 5
        while not (log.exists() and "reopened" in log.read_text()) and time.time() < deadline:
            time.sleep(0.05)
        assert log.exists() and "reopened" in log.read_text(), "SIGHUP did not reopen the log"
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)  # SIGHUP does not stop it
        c.request("GET", "/health")
        assert c.getresponse().status == 200
        c.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert "shutting down" in log.read_text()  # the new file has the rest of the log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_unit_file_verifies(tmp_path):
    if shutil.which("systemd-analyze") is None:
        if os.environ.get("JLLM_REQUIRE_MODELS") == "1":
            pytest.fail("systemd-analyze is missing (scripts/deps.sh installs systemd)")
        pytest.skip("no systemd-analyze")
    prefix = tmp_path / "prefix"
    os.makedirs(prefix / "bin")
    shutil.copy(os.path.join(BUILD, "apps", "server", "jetson-llm-server"), prefix / "bin")
    out = tmp_path / "unit"
    subprocess.run([os.path.join(ROOT, "scripts", "install_service.sh"), "--render", str(out), "--prefix",
                    str(prefix)], check=True, capture_output=True)
    r = subprocess.run(["systemd-analyze", "verify", str(out / "jetson-llm-server.service")],
                       capture_output=True, text=True)
    assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr
    env = (out / "jetson-llm").read_text()
    assert "JLLM_MODEL=" in env and "JLLM_KV_DIR=/var/lib/jetson-llm/kv" in env
