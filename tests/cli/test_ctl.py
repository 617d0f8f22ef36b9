"""``fakerabbit ctl``: rabbitmqctl's commands, run as a subprocess against a FakeRabbit's management API."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pika
import pytest

from fakerabbit import FakeRabbit
from tests.cli.conftest import fakerabbit_command, run_ctl
from tests.management.conftest import http


def api(rabbit: FakeRabbit, method: str, path: str, body: object = None) -> object:
    return http(rabbit.management_url, method, path, body).body


def publish(rabbit: FakeRabbit, queue: str, payload: str) -> None:
    body = {"properties": {}, "routing_key": queue, "payload": payload, "payload_encoding": "string"}
    api(rabbit, "POST", "/api/exchanges/%2F/amq.default/publish", body)


def test_set_policy_as_rabbitmq_documents_it(rabbit: FakeRabbit) -> None:
    api(rabbit, "PUT", "/api/queues/%2F/orders", {})
    r = run_ctl(rabbit, "set_policy", "DLX", ".*", '{"dead-letter-exchange":"my-dlx"}', "--apply-to", "queues")
    assert r.returncode == 0, r.stderr
    assert r.stdout == (
        'Setting policy "DLX" for pattern ".*" to "{"dead-letter-exchange":"my-dlx"}" with priority "0" '
        'for vhost "/" ...\n'
    )
    q = rabbit.queue("orders")
    assert (q.policy, dict(q.effective_policy)) == ("DLX", {"dead-letter-exchange": "my-dlx"})
    listed = run_ctl(rabbit, "list_policies")
    assert listed.stdout == (
        'Listing policies for vhost "/" ...\n'
        "vhost\tname\tpattern\tapply-to\tdefinition\tpriority\n"
        '/\tDLX\t.*\tqueues\t{"dead-letter-exchange":"my-dlx"}\t0\n'
    )
    assert run_ctl(rabbit, "clear_policy", "DLX").returncode == 0
    assert rabbit.queue("orders").policy is None


def test_options_before_the_command_and_priority(rabbit: FakeRabbit) -> None:
    api(rabbit, "PUT", "/api/vhosts/shop", {})
    r = run_ctl(rabbit, "-p", "shop", "-q", "set_policy", "--priority", "5", "ttl", "^t", '{"message-ttl":100}')
    assert (r.returncode, r.stdout) == (0, "")
    r = run_ctl(rabbit, "list_policies", "-p", "shop", "--no-table-headers", "-q")
    assert r.stdout == 'shop\tttl\t^t\tall\t{"message-ttl":100}\t5\n'


def test_policy_errors_exit_69_with_rabbitmqs_message(rabbit: FakeRabbit) -> None:
    r = run_ctl(rabbit, "set_policy", "X", ".*", '{"message-ttl":"x"}')
    assert r.returncode == 69
    assert r.stderr == 'Error:\nValidation failed\n\n<<"x">> is not a valid message TTL\n\n'
    r = run_ctl(rabbit, "set_policy", "X", ".*", "{bad")
    assert r.returncode == 69 and r.stderr.startswith("Error:\nJSON decoding error.")
    r = run_ctl(rabbit, "clear_policy", "nope")
    assert (r.returncode, r.stderr) == (69, "Error:\nParameter does not exist\n")


def test_operator_policies(rabbit: FakeRabbit) -> None:
    r = run_ctl(rabbit, "set_operator_policy", "cap", ".*", '{"max-length":3}', "--apply-to", "queues")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith('Setting operator policy override "cap" for pattern ".*"')
    api(rabbit, "PUT", "/api/queues/%2F/capped", {})
    assert rabbit.queue("capped").operator_policy == "cap"
    listed = run_ctl(rabbit, "-q", "list_operator_policies").stdout.splitlines()
    assert listed == ["vhost\tname\tpattern\tapply-to\tdefinition\tpriority", '/\tcap\t.*\tqueues\t{"max-length":3}\t0']
    assert run_ctl(rabbit, "clear_operator_policy", "cap").returncode == 0
    assert rabbit.queue("capped").operator_policy is None
    assert (
        "dead-letter-exchange"
        in run_ctl(rabbit, "set_operator_policy", "x", ".*", '{"dead-letter-exchange":"d"}').stderr
    )


def test_list_queues_exchanges_bindings(rabbit: FakeRabbit) -> None:
    api(rabbit, "PUT", "/api/queues/%2F/b-queue", {"durable": True})
    api(rabbit, "PUT", "/api/queues/%2F/a-queue", {})
    api(rabbit, "PUT", "/api/exchanges/%2F/events", {"type": "topic"})
    api(rabbit, "POST", "/api/bindings/%2F/e/events/q/a-queue", {"routing_key": "order.*"})
    publish(rabbit, "a-queue", "1")
    publish(rabbit, "a-queue", "2")
    r = run_ctl(rabbit, "list_queues")
    assert (
        r.stdout
        == "Timeout: 60.0 seconds ...\nListing queues for vhost / ...\nname\tmessages\na-queue\t2\nb-queue\t0\n"
    )
    r = run_ctl(rabbit, "-q", "list_queues", "name", "durable", "consumers", "messages_ready")
    assert r.stdout.splitlines() == [
        "name\tdurable\tconsumers\tmessages_ready",
        "a-queue\tfalse\t0\t2",
        "b-queue\ttrue\t0\t0",
    ]
    exchanges = run_ctl(rabbit, "-q", "list_exchanges").stdout.splitlines()
    assert exchanges[0] == "name\ttype" and "events\ttopic" in exchanges and "\tdirect" in exchanges
    bindings = run_ctl(rabbit, "-q", "list_bindings").stdout.splitlines()
    assert bindings == [
        "source_name\tsource_kind\tdestination_name\tdestination_kind\trouting_key\targuments",
        "\texchange\ta-queue\tqueue\ta-queue\t{}",
        "\texchange\tb-queue\tqueue\tb-queue\t{}",
        "events\texchange\ta-queue\tqueue\torder.*\t{}",
    ]


def test_unknown_column_and_bad_usage_exit_64(rabbit: FakeRabbit) -> None:
    r = run_ctl(rabbit, "list_queues", "foo")
    assert r.returncode == 64 and r.stderr.startswith("Error:\nInfo key(s) foo are not supported")
    r = run_ctl(rabbit, "set_policy", "only-a-name")
    assert r.returncode == 64 and "Error (argument validation)" in r.stderr


def test_purge_and_delete_queue(rabbit: FakeRabbit) -> None:
    api(rabbit, "PUT", "/api/queues/%2F/jobs", {})
    for i in range(3):
        publish(rabbit, "jobs", str(i))
    r = run_ctl(rabbit, "purge_queue", "jobs")
    assert (r.returncode, r.stdout) == (0, "Purging queue 'jobs' in vhost '/' ...\n")
    assert rabbit.queue("jobs").message_count == 0
    publish(rabbit, "jobs", "again")
    r = run_ctl(rabbit, "delete_queue", "jobs", "--if-empty")
    assert r.returncode == 69 and "not empty" in r.stderr
    r = run_ctl(rabbit, "delete_queue", "jobs")
    assert r.stdout.splitlines()[-1] == "Queue was successfully deleted with 1 ready messages"
    assert (run_ctl(rabbit, "delete_queue", "jobs").returncode, run_ctl(rabbit, "purge_queue", "jobs").returncode) == (
        64,
        69,
    )


def test_close_all_connections(rabbit: FakeRabbit) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(rabbit.url))
    r = run_ctl(rabbit, "close_all_connections", "maintenance")
    assert r.stdout == "Closing all connections in vhost /, reason: maintenance...\nClosed 1 connections\n"
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as info:
        for _ in range(40):
            conn.process_data_events(time_limit=0.05)
    assert (info.value.reply_code, info.value.reply_text) == (320, "CONNECTION_FORCED - maintenance")
    assert run_ctl(rabbit, "-q", "list_connections").stdout == "user\tpeer_host\tpeer_port\tstate\n"


def test_export_and_import_definitions(rabbit: FakeRabbit, tmp_path: Path) -> None:
    api(rabbit, "PUT", "/api/queues/%2F/kept", {"durable": True, "arguments": {"x-max-length": 9}})
    run_ctl(rabbit, "set_policy", "p", "^k", '{"message-ttl":60000}', "--apply-to", "queues")
    path = tmp_path / "defs.json"
    r = run_ctl(rabbit, "export_definitions", str(path))
    assert (r.returncode, r.stdout) == (0, f'Exporting definitions in JSON to a file at "{path}" ...\n')
    exported = json.loads(path.read_text())
    assert [q["name"] for q in exported["queues"]] == ["kept"]
    assert json.loads(run_ctl(rabbit, "export_definitions", "-").stdout) == exported
    with FakeRabbit(management=True) as other:
        r = run_ctl(other, "import_definitions", str(path))
        assert r.returncode == 0, r.stderr
        q = other.queue("kept")
        assert (q.durable, dict(q.arguments)["x-max-length"], q.policy) == (True, 9, "p")
        r = run_ctl(other, "-q", "import_definitions", "-", stdin='{"queues": [{"name": "piped", "vhost": "/"}]}')
        assert r.returncode == 0 and other.queue("piped").durable
        bad = run_ctl(other, "import_definitions", "-", stdin='{"queues": [{"name": "amq.nope", "vhost": "/"}]}')
        assert bad.returncode == 69 and "amq.nope" in bad.stderr


def test_advance_moves_the_clock_and_expires_messages(rabbit: FakeRabbit) -> None:
    api(rabbit, "PUT", "/api/queues/%2F/ttl", {"arguments": {"x-message-ttl": 30000}})
    publish(rabbit, "ttl", "x")
    before = rabbit.clock.now()
    r = run_ctl(rabbit, "advance", "30")
    assert r.returncode == 0, r.stderr
    assert (rabbit.clock.now() - before).total_seconds() == 30
    assert r.stdout.splitlines()[-1] == run_ctl(rabbit, "clock").stdout.strip()
    assert rabbit.queue("ttl").message_count == 0
    events = run_ctl(rabbit, "events", "--kind", "expired").stdout.splitlines()
    assert len(events) == 1 and events[0].endswith('expired queue="ttl"')
    assert run_ctl(rabbit, "advance", "soon").returncode == 64


def test_reset(rabbit: FakeRabbit) -> None:
    api(rabbit, "PUT", "/api/queues/%2F/gone", {})
    r = run_ctl(rabbit, "reset")
    assert r.returncode == 0
    assert rabbit.queues() == []


def test_vhosts_and_users(rabbit: FakeRabbit) -> None:
    assert run_ctl(rabbit, "add_vhost", "staging").returncode == 0
    assert run_ctl(rabbit, "-q", "list_vhosts").stdout == "name\n/\nstaging\n"
    assert run_ctl(rabbit, "add_user", "app", "pw").returncode == 0
    assert run_ctl(rabbit, "set_permissions", "-p", "staging", "app", ".*", ".*", ".*").returncode == 0
    pika.BlockingConnection(pika.URLParameters(f"amqp://app:pw@127.0.0.1:{rabbit.port}/staging")).close()
    assert run_ctl(rabbit, "-q", "list_users").stdout == "user\ttags\napp\t[]\nguest\t[administrator]\n"
    assert run_ctl(rabbit, "delete_vhost", "staging").returncode == 0
    assert run_ctl(rabbit, "delete_user", "app").returncode == 0


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_api_exits_69() -> None:
    import subprocess

    url = f"http://127.0.0.1:{_dead_port()}"
    r = subprocess.run(
        [*fakerabbit_command(), "ctl", "--management-url", url, "list_queues"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 69 and f"could not reach the management API at {url}" in r.stderr
    r = subprocess.run(
        [*fakerabbit_command(), "ctl", "--management-url", url, "await_startup", "--timeout", "0.3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 69


def test_credentials_from_the_url_and_env(rabbit: FakeRabbit) -> None:
    import os
    import subprocess

    port = rabbit.management_url.rsplit(":", 1)[1]
    env = {**os.environ, "FAKERABBIT_MANAGEMENT_URL": f"http://guest:wrong@127.0.0.1:{port}"}
    r = subprocess.run(
        [*fakerabbit_command(), "ctl", "list_vhosts"], capture_output=True, text=True, env=env, timeout=60
    )
    assert (r.returncode, r.stderr) == (69, "Error:\nLogin failed\n")
    r = subprocess.run(
        [*fakerabbit_command(), "ctl", "--password", "guest", "await_startup"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr


# -- await_startup must talk to fakerabbit; pipes ---------------------------------------------------------------------
def _rabbitmq_lookalike() -> tuple[str, object]:
    """A local HTTP server that answers like RabbitMQ's management API (no fakerabbit endpoints)."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/api/overview":
                body, status = b'{"rabbitmq_version":"4.3.6","product_name":"RabbitMQ"}', 200
            else:
                body, status = b'{"error":"Object Not Found","reason":"Not Found"}', 404
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}", server


def test_await_startup_refuses_a_real_rabbitmq_on_the_port() -> None:
    import subprocess

    url, server = _rabbitmq_lookalike()
    try:
        r = subprocess.run(
            [*fakerabbit_command(), "ctl", "--management-url", url, "--timeout", "5", "await_startup"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        server.shutdown()  # type: ignore[attr-defined]
    assert r.returncode == 69
    assert "is not fakerabbit's (it says RabbitMQ 4.3.6): another broker holds that port" in r.stderr
    assert "Traceback" not in r.stderr


def test_await_startup_refuses_the_live_rabbitmq() -> None:
    import subprocess

    from tests.realbrokers import real_brokers

    live = [b for b in real_brokers() if b.management_up()]
    if not live:
        pytest.skip("no live RabbitMQ")
    for b in live:
        r = subprocess.run(
            [*fakerabbit_command(), "ctl", "--management-url", b.management_url, "--timeout", "5", "await_startup"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 69, (b.label, r.stderr)
        assert f"is not fakerabbit's (it says RabbitMQ {b.version})" in r.stderr


def test_await_startup_accepts_fakerabbit(rabbit: FakeRabbit) -> None:
    r = run_ctl(rabbit, "await_startup")
    assert (r.returncode, r.stderr) == (0, "")


def test_a_closed_pipe_is_not_a_traceback(rabbit: FakeRabbit) -> None:
    import subprocess

    def many() -> None:  # more output than a pipe holds, so the writer meets the closed pipe
        v = rabbit._broker.vhosts["/"]
        for i in range(4000):
            name = f"queue-with-a-long-name-for-the-pipe-{i:05d}"
            v.declare_queue(None, name, passive=False, durable=True, exclusive=False, auto_delete=False, arguments={})

    rabbit._call(many)
    cmd = [*fakerabbit_command(), "ctl", "--management-url", rabbit.management_url, "list_queues"]
    cmd_text = " ".join(f"'{c}'" for c in cmd)
    r = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f"{cmd_text} | head -1"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert "BrokenPipe" not in r.stderr
