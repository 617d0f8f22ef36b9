"""Small things a user touches: x-death routing keys compare with lists, assertion helpers on a real broker's
counts, the version list in ``serve --help``."""

from __future__ import annotations

import operator
import subprocess
import sys
from datetime import UTC, datetime

import pika
import pytest

from fakerabbit import FakeRabbit
from fakerabbit.broker.profile import ACCEPTED_VERSIONS
from fakerabbit.cli import version_families
from fakerabbit.testing import RoutingKeys, XDeathEntry, assert_bodies, assert_empty, assert_message_count, x_death
from fakerabbit_pytest.real import RealQueue


def test_routing_keys_equal_lists_and_tuples() -> None:
    entry = XDeathEntry.from_header(
        {
            "queue": "q",
            "reason": "rejected",
            "count": 1,
            "time": datetime.now(UTC),
            "exchange": "",
            "routing-keys": [b"k"],
        }
    )
    assert entry.routing_keys == ["k"] and operator.eq(["k"], entry.routing_keys)  # both ways round
    assert entry.routing_keys == ("k",) and entry.routing_keys != ["k", "j"] and entry.routing_keys != ["j"]
    assert isinstance(entry.routing_keys, tuple) and hash(entry.routing_keys) == hash(("k",))
    with pytest.raises(AttributeError):
        entry.routing_keys.append("x")  # type: ignore[attr-defined]
    assert RoutingKeys(["a", "b"]) == ["a", "b"] and repr(RoutingKeys(["a"])) == "['a']"


def test_routing_keys_of_a_dead_lettered_message() -> None:
    with FakeRabbit() as rabbit:
        ch = pika.BlockingConnection(pika.URLParameters(rabbit.url)).channel()
        ch.queue_declare("dlq")
        ch.queue_declare("work", arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"})
        ch.basic_publish("", "work", b"m", pika.BasicProperties(headers={"CC": ["cc"]}))
        method, _props, _body = ch.basic_get("work")
        ch.basic_reject(method.delivery_tag, requeue=False)
        message = rabbit.queue("dlq").messages[0]
        assert message.x_death[0].routing_keys == ["work", "cc"]
        assert message.routing_keys == ["dlq"]
        _method, props, _body = ch.basic_get("dlq", auto_ack=True)
        assert x_death(props)[0].routing_keys == ["work", "cc"]


def test_count_helpers_on_a_real_queue() -> None:
    q = RealQueue("orders", "/", message_count=2, consumer_count=0, unacked_count=1)
    assert_message_count(q, 2, unacked=1)
    with pytest.raises(AssertionError, match="message counts differ"):
        assert_message_count(q, 1)
    with pytest.raises(AssertionError, match="is not empty: 2 ready, 1 unacked"):
        assert_empty(q)
    with pytest.raises(AssertionError, match="queue 'orders': message counts differ"):
        assert_bodies(q, [b"a"])
    with pytest.raises(pytest.skip.Exception, match=r"rabbit.queue\(...\).messages needs fakerabbit"):
        assert_bodies(q, [b"a", b"b"])  # the counts agree: comparing bodies needs the fake
    empty = RealQueue("orders", "/", message_count=0, consumer_count=0, unacked_count=0)
    assert_empty(empty)
    assert_bodies(empty, [])


def test_serve_help_lists_the_accepted_versions() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "fakerabbit", "serve", "--help"], capture_output=True, text=True, check=True
    ).stdout
    flat = " ".join(out.split())
    assert "Accepted: " + ", ".join(ACCEPTED_VERSIONS) in flat
    # which versions behave alike is worked out from the profiles (3.11 is 3.10; 4.1 and 4.2 each differ a little)
    assert "behave alike: 3.10 = 3.11; 3.12; 3.13; 4.0; 4.1; 4.2; 4.3." in flat and "Default: the newest, 4.3" in flat
    assert [v for family in version_families() for v in family] == list(ACCEPTED_VERSIONS)
    bad = subprocess.run(
        [sys.executable, "-m", "fakerabbit", "serve", "--rabbitmq-version", "9.9"], capture_output=True, text=True
    )
    assert bad.returncode == 2
    assert "argument --rabbitmq-version: unsupported RabbitMQ version '9.9'; accepted: 3.10" in bad.stderr
