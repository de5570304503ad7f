"""SshHost over a real sshd on 127.0.0.1, LocalHost on this machine: output, failures, timeouts, files."""

from __future__ import annotations

import pytest

from n8n_sizer.hosts.host import ConnectionLost, HostError, LocalHost, SshHost
from tests.integration.ssh_fixtures import free_port, sshd  # noqa: F401

pytestmark = pytest.mark.integration


def _host(server, key=None, port=None) -> SshHost:
    return SshHost(
        "t1", "127.0.0.1", server.user, key_file=key or server.client_key, port=port or server.port, connect_timeout_s=5
    )


def test_ssh_run_put_get(sshd, tmp_path):  # noqa: F811
    host = _host(sshd)
    try:
        res = host.run("echo hello; echo oops >&2", timeout_s=10)
        assert res.stdout.strip() == "hello" and res.stderr.strip() == "oops" and res.exit_code == 0
        src = tmp_path / "a.txt"
        src.write_text("payload\n")
        host.put(src, str(tmp_path / "remote" / "b.txt"))
        host.get(str(tmp_path / "remote" / "b.txt"), tmp_path / "back.txt")
        assert (tmp_path / "back.txt").read_text() == "payload\n"
    finally:
        host.close()


def test_ssh_failure_names_host_command_code_stderr(sshd):  # noqa: F811
    host = _host(sshd)
    try:
        with pytest.raises(HostError) as err:
            host.run("echo first >&2; echo 'the real reason' >&2; exit 7", timeout_s=10)
        msg = str(err.value)
        assert "t1" in msg and "exit code 7" in msg and "the real reason" in msg and "exit 7" in msg
        assert "\n" not in msg
        assert host.run("exit 3", timeout_s=10, check=False).exit_code == 3
        with pytest.raises(HostError, match="timed out"):
            host.run("sleep 30", timeout_s=1)
    finally:
        host.close()


def test_ssh_wrong_key_and_unreachable(sshd):  # noqa: F811
    with pytest.raises(HostError, match="refused.*--ssh-key"):
        _host(sshd, key=sshd.wrong_key).run("true", timeout_s=5)
    with pytest.raises(HostError, match="cannot connect"):
        _host(sshd, port=free_port()).run("true", timeout_s=5)


def test_ssh_cut_connection_is_reported_not_reopened(sshd):  # noqa: F811
    host = _host(sshd)
    try:
        host.ping()
        assert sshd.cut_connections() >= 1
        with pytest.raises(ConnectionLost, match="--resume"):
            for _ in range(50):  # the transport notices the dead socket within a moment
                host.ping(timeout_s=5)
    finally:
        host.close()
    again = _host(sshd)  # a new connection (as --resume makes) works
    try:
        assert again.run("echo back", timeout_s=10).stdout.strip() == "back"
    finally:
        again.close()


def test_local_host(tmp_path):
    host = LocalHost()
    assert host.run("echo $((2+3))", timeout_s=5).stdout.strip() == "5"
    with pytest.raises(HostError, match="local.*exit code 4.*bad thing"):
        host.run("echo bad thing >&2; exit 4", timeout_s=5)
    with pytest.raises(HostError, match="timed out"):
        host.run("sleep 20", timeout_s=0.5)


def test_ssh_tunnel_reaches_a_port_on_the_host(sshd):  # noqa: F811
    import http.server
    import threading
    import urllib.request

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"through the tunnel"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host = _host(sshd)
    try:
        with host.tunnel(server.server_address[1]) as local_port:
            assert local_port != server.server_address[1]
            with urllib.request.urlopen(f"http://127.0.0.1:{local_port}/", timeout=10) as resp:
                assert resp.read() == b"through the tunnel"
    finally:
        host.close()
        server.shutdown()
        server.server_close()
