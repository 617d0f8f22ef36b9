"""Who may do what through the management API: user tags, vhost access and resource permissions, as RabbitMQ
decides them. Every test runs against fakerabbit and every live broker (real-3.10, real-4.0, real-4.3) with a
restricted user created (and deleted) through the API; the expected statuses and bodies are the live brokers'."""

from __future__ import annotations

import pika
import pika.exceptions
import pytest

from tests.management.conftest import Api, q

#: The fake runs these tests as 3.10 and 4.0 too (``fake-3.10``, ``fake-4.0``), beside its default 4.3.
FAKE_PROFILES = ("3.10", "4.0")

NOT_MANAGEMENT = {"error": "not_authorised", "reason": "Not management user"}
NOT_ADMIN = {"error": "not_authorised", "reason": "Not administrator user"}
NOT_MONITOR = {"error": "not_authorised", "reason": "Not monitor user"}
ACCESS_REFUSED = {"error": "not_authorised", "reason": "Access refused."}
NOT_AUTHORISED_OBJECT = {"error": "not_authorised", "reason": "User not authorised to access object"}


def no_vhost_access(api: Api) -> tuple[int, dict[str, str]]:
    """A vhost the user has no permissions on: 404 from 4.1 on (live 4.3.6), 401 before (3.10.8, 4.0.5)."""
    if api.at_least("4.1"):
        return 404, {"error": "not_found", "reason": "Not Found"}
    return 401, {"error": "not_authorised", "reason": "User not authorised to access virtual host"}


def test_a_user_without_management_tags_is_refused(api: Api) -> None:
    user = api.user("", vhost_permissions=(".*", ".*", ".*"))
    for path in ("/api/overview", "/api/whoami", "/api/queues/%2F", "/api/users", "/api/health/checks/alarms"):
        a = api.request("GET", path, auth=user)
        assert (a.status, a.body) == (401, NOT_MANAGEMENT), path


def test_a_management_user_is_not_an_administrator(api: Api) -> None:
    name, pw = user = api.user("management", vhost_permissions=(".*", ".*", ".*"))
    assert api.request("GET", "/api/whoami", auth=user).body["tags"] == ["management"]
    refused = [
        ("GET", "/api/users", None),
        ("GET", "/api/users/guest", None),  # password hashes
        ("GET", f"/api/users/{q(name)}", None),
        ("PUT", f"/api/users/{q(name)}", {"password": pw, "tags": "administrator"}),
        ("GET", "/api/definitions", None),
        ("GET", "/api/definitions/%2F", None),
        ("POST", "/api/definitions", {"users": []}),
        ("GET", "/api/permissions", None),
        ("PUT", f"/api/permissions/%2F/{q(name)}", {"configure": ".*", "write": ".*", "read": ".*"}),
        ("GET", "/api/vhosts/%2F", None),
        ("GET", "/api/vhosts/%2F/permissions", None),
        ("PUT", f"/api/vhosts/{q(api.prefix + 'v')}", {}),
        ("DELETE", "/api/vhosts/%2F", None),
    ]
    for method, path, body in refused:
        a = api.request(method, path, body, auth=user)
        assert (a.status, a.body) == (401, NOT_ADMIN), (method, path)
    assert api.request("GET", "/api/whoami", auth=user).body["tags"] == ["management"]  # still not an admin
    # what a management user may do
    assert api.request("GET", "/api/overview", auth=user).status == 200
    assert api.request("GET", "/api/queues/%2F", auth=user).status == 200
    assert api.request("GET", "/api/health/checks/alarms", auth=user).status == 200


@pytest.mark.fake_only
def test_fakerabbit_endpoints_are_for_administrators(api: Api) -> None:
    user = api.user("monitoring", vhost_permissions=(".*", ".*", ".*"))
    kept = api.name("kept")
    assert api.request("PUT", f"/api/queues/%2F/{q(kept)}", {}).status == 201
    for method, path in (
        ("GET", "/api/fakerabbit/clock"),
        ("POST", "/api/fakerabbit/clock/advance"),
        ("POST", "/api/fakerabbit/reset"),
        ("GET", "/api/fakerabbit/events"),
    ):
        a = api.request(method, path, {"seconds": 1} if method == "POST" else None, auth=user)
        assert (a.status, a.body) == (401, NOT_ADMIN), path
    assert api.request("GET", f"/api/queues/%2F/{q(kept)}").status == 200  # not reset


def test_vhost_scoped_paths_need_permissions_on_the_vhost(api: Api) -> None:
    user = api.user("management")
    for method, path in (
        ("GET", "/api/queues/%2F"),
        ("GET", "/api/queues/%2F/anything"),
        ("PUT", f"/api/queues/%2F/{q(api.prefix + 'q')}"),
        ("GET", "/api/exchanges/%2F/amq.direct"),
        ("GET", "/api/aliveness-test/%2F"),
        ("GET", "/api/policies/%2F"),
    ):
        a = api.request(method, path, {} if method == "PUT" else None, auth=user)
        assert (a.status, a.body) == no_vhost_access(api), (method, path)
    # lists leave out what the user cannot see
    name = api.name()
    assert api.request("PUT", f"/api/queues/%2F/{q(name)}", {}).status == 201
    assert [r for r in api.request("GET", "/api/queues", auth=user).body if r["name"] == name] == []
    assert api.request("GET", "/api/vhosts", auth=user).body == []


def test_monitoring_users_see_every_vhost(api: Api) -> None:
    user = api.user("monitoring")
    assert "/" in [v["name"] for v in api.request("GET", "/api/vhosts", auth=user).body]
    a = api.request("GET", "/api/queues/%2F", auth=user)  # but vhost-scoped paths still need permissions
    assert (a.status, a.body) == no_vhost_access(api)


def test_resources_need_their_configure_write_read_permissions(api: Api) -> None:
    own = api.prefix + "own"
    user = api.user("management", vhost_permissions=("^" + own, "^" + own, "^" + own))
    other = api.name("other")
    a = api.request("PUT", f"/api/queues/%2F/{q(other)}", {}, auth=user)
    assert (a.status, a.body) == (401, ACCESS_REFUSED)
    mine = api.name("own-q")
    assert api.request("PUT", f"/api/queues/%2F/{q(mine)}", {}, auth=user).status == 201
    assert api.request("PUT", f"/api/queues/%2F/{q(other)}", {}).status == 201  # as guest
    a = api.request("DELETE", f"/api/queues/%2F/{q(other)}", auth=user)
    assert (a.status, a.body) == (401, ACCESS_REFUSED)
    x = api.name("other-x", "exchanges")
    a = api.request("PUT", f"/api/exchanges/%2F/{q(x)}", {"type": "fanout"}, auth=user)
    assert (a.status, a.body) == (401, ACCESS_REFUSED)
    assert api.request("DELETE", f"/api/queues/%2F/{q(mine)}", auth=user).status == 204


def test_only_policymakers_set_policies(api: Api) -> None:
    body = {"pattern": "^" + api.prefix + "nothing$", "definition": {"max-length": 1}}
    path = f"/api/policies/%2F/{q(api.name('pol', 'policies'))}"
    manager = api.user("management", vhost_permissions=(".*", ".*", ".*"))
    assert (a := api.request("PUT", path, body, auth=manager)).body == NOT_AUTHORISED_OBJECT and a.status == 401
    outsider = api.user("policymaker")
    assert (api.request("PUT", path, body, auth=outsider).status, 0) == (no_vhost_access(api)[0], 0)
    maker = api.user("policymaker", vhost_permissions=(".*", ".*", ".*"))
    assert api.request("PUT", path, body, auth=maker).status == 201
    assert api.request("DELETE", path, auth=maker).status == 204


def test_nodes_need_monitoring(api: Api) -> None:
    manager = api.user("management", vhost_permissions=(".*", ".*", ".*"))
    a = api.request("GET", "/api/nodes", auth=manager)
    assert (a.status, a.body) == (401, NOT_MONITOR)
    monitor = api.user("monitoring")
    nodes = api.request("GET", "/api/nodes", auth=monitor).body
    assert len(nodes) == 1 and nodes[0]["running"] is True


def test_a_new_vhost_grants_permissions_to_its_creator_only(api: Api) -> None:
    creator = api.user("administrator")
    vhost = api.name("vh", "vhosts")
    assert api.request("PUT", f"/api/vhosts/{q(vhost)}", {}, auth=creator).status == 201
    perms = api.request("GET", f"/api/vhosts/{q(vhost)}/permissions").body
    assert [(p["user"], p["configure"], p["write"], p["read"]) for p in perms] == [(creator[0], ".*", ".*", ".*")]
    assert api.request("GET", f"/api/permissions/{q(vhost)}/guest").status == 404
    url = api.amqp_url.rsplit("/", 1)[0] + "/" + q(vhost)
    with pytest.raises(pika.exceptions.ProbableAccessDeniedError) as exc:
        pika.BlockingConnection(pika.URLParameters(url))
    assert f"access to vhost '{vhost}' refused for user 'guest'" in str(exc.value)


def _code_points(text: str) -> list[int]:
    return [ord(c) for c in text]


def test_invalid_permission_regexps_are_refused(api: Api) -> None:
    name, _ = api.user("")
    path = f"/api/permissions/%2F/{q(name)}"
    a = api.request("PUT", path, {"configure": "(", "write": ".*", "read": ".*"})
    message = "missing closing parenthesis" if api.at_least("4.1") else "missing )"  # 4.3.6 vs 4.0.5, 3.10.8
    assert (a.status, a.body) == (
        400,
        {"error": "bad_request", "reason": ["invalid_regexp", _code_points("("), [_code_points(message), 1]]},
    )
    if api.at_least("4.1"):
        a = api.request("PUT", path, {"configure": ".*", "write": "[", "read": ".*"})
        expected = ["invalid_regexp", [91], [_code_points("missing terminating ] for character class"), 1]]
        assert (a.status, a.body) == (400, {"error": "bad_request", "reason": expected})
    assert api.request("GET", path).status == 404  # nothing was stored


def test_invalid_permission_regexps_are_refused_at_import(api: Api) -> None:
    name, _ = api.user("")
    defs = {"permissions": [{"user": name, "vhost": "/", "configure": "(", "write": ".*", "read": ".*"}]}
    a = api.request("POST", "/api/definitions", defs)
    if api.at_least("4.1"):  # live 4.3.6
        reason: object = '{invalid_regexp,"(",{"missing closing parenthesis",1}}'
    elif api.at_least("4.0"):  # live 4.0.5: the term as text, PCRE's wording
        reason = '{invalid_regexp,"(",{"missing )",1}}'
    else:
        reason = ["invalid_regexp", [40], [_code_points("missing )"), 1]]
    assert (a.status, a.body) == (400, {"error": "bad_request", "reason": reason})
    assert api.request("GET", f"/api/permissions/%2F/{q(name)}").status == 404


def test_malformed_password_hashes_are_refused_at_import(api: Api) -> None:
    name = api.name("imported", "users")
    for value in ("abc", "!!!notbase64"):
        user = {"name": name, "password_hash": value, "hashing_algorithm": "rabbit_password_hashing_sha256"}
        defs = {"users": [{**user, "tags": ""}]}
        a = api.request("POST", "/api/definitions", {**defs, "vhosts": []})
        reason: object = f'{{not_base64,<<"{value}">>}}' if api.at_least("4.0") else ["not_base64", value]
        assert (a.status, a.body) == (400, {"error": "bad_request", "reason": reason})
    assert api.request("GET", f"/api/users/{q(name)}").status == 404


def test_an_unknown_hashing_algorithm_is_stored_and_never_logs_in(api: Api) -> None:
    """RabbitMQ 3.10.8 and 4.3.6 accept an algorithm name they do not know; that user cannot log in."""
    name = api.name("algo", "users")
    user = {"name": name, "password_hash": "YWJjZGVmZ2g=", "hashing_algorithm": "rabbit_password_hashing_sha999"}
    assert api.request("POST", "/api/definitions", {"users": [{**user, "tags": "administrator"}]}).status == 204
    assert api.request("GET", f"/api/users/{q(name)}").body["hashing_algorithm"] == "rabbit_password_hashing_sha999"
    a = api.request("GET", "/api/overview", auth=(name, "anything"))
    assert a.status == 401
    perms = {"configure": ".*", "write": ".*", "read": ".*"}
    assert api.request("PUT", f"/api/permissions/%2F/{q(name)}", perms).status == 201
    url = api.amqp_url.replace("guest:guest@", f"{name}:anything@")
    with pytest.raises(pika.exceptions.ProbableAuthenticationError):
        pika.BlockingConnection(pika.URLParameters(url))
    if api.fake is not None:
        assert api.fake._broker.problems == []
    a = api.request("POST", "/api/definitions", {"users": [{**user, "hashing_algorithm": 5, "tags": ""}]})
    assert (a.status, a.body) == (400, {"error": "bad_request", "reason": "function_clause"})


def test_management_users_see_and_close_only_their_own_connections(api: Api) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(api.amqp_url))  # guest's
    try:
        local_port = conn._impl._transport._sock.getsockname()[1]  # type: ignore[union-attr]
        found = api.poll(
            lambda: api.request("GET", "/api/connections"),
            lambda a: any(f":{local_port} ->" in c["name"] for c in a.body),
        )
        name = next(c["name"] for c in found.body if f":{local_port} ->" in c["name"])
        user = api.user("management", vhost_permissions=(".*", ".*", ".*"))
        for method, path in (
            ("GET", f"/api/connections/{q(name)}"),
            ("GET", f"/api/connections/{q(name)}/channels"),
            ("DELETE", f"/api/connections/{q(name)}"),
        ):
            a = api.request(method, path, auth=user)
            assert (a.status, a.body) == (401, NOT_AUTHORISED_OBJECT), (method, path)
        assert [c for c in api.request("GET", "/api/connections", auth=user).body if c["name"] == name] == []
        monitor = api.user("monitoring")
        assert api.request("GET", f"/api/connections/{q(name)}", auth=monitor).status == 200
        assert conn.is_open
    finally:
        conn.close()


def test_auth_refuses_bad_patterns_and_names_the_permission_per_profile() -> None:
    """The broker model: an invalid pattern never reaches a permission check; 4.x texts name the permission."""
    from fakerabbit.broker import errors
    from fakerabbit.broker.auth import Auth, InvalidRegexp

    auth = Auth({"u": "pw"})
    with pytest.raises(InvalidRegexp) as exc:
        auth.set_permissions("u", "/", "(", ".*", ".*")
    assert (exc.value.pattern, exc.value.message, exc.value.offset) == ("(", "missing closing parenthesis", 1)
    assert ("u", "/") not in auth.permissions
    auth.set_permissions("u", "/", "^mine$", ".*", "")
    with pytest.raises(errors.AccessRefused) as refused:
        auth.check("u", "/", "configure", "queue", "q")
    assert refused.value.explanation == "access to queue 'q' in vhost '/' refused for user 'u'"
    auth.names_permission = True
    with pytest.raises(errors.AccessRefused) as refused:
        auth.check("u", "/", "read", "queue", "q")
    assert refused.value.explanation == "read access to queue 'q' in vhost '/' refused for user 'u'"
