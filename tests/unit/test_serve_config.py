"""The serve config group (strict keys, limits, binding rules) and secret redaction."""

from __future__ import annotations

import pytest

from fixgraph.config import ConfigError, compose, to_dict
from fixgraph.redact import REDACTED, redact, redact_flat
from fixgraph.serve.settings import build_settings, check_binding, is_loopback


def settings(**changes: object) -> object:
    node = to_dict(compose([]).serve)
    node.update(changes)
    return build_settings(node)


def test_serve_options_are_strict_about_their_keys() -> None:
    node = to_dict(compose([]).serve)
    node["max_body_byte"] = 10
    with pytest.raises(ConfigError, match=r"unknown key\(s\) max_body_byte"):
        build_settings(node)
    with pytest.raises(ConfigError, match="must be positive: max_k=0"):
        settings(max_k=0, k=1)
    with pytest.raises(ConfigError, match="k=20 exceeds max_k=5"):
        settings(k=20, max_k=5)


def test_loopback_by_default_elsewhere_only_with_the_flag_and_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4")
    check_binding(settings(), allow_remote=False)  # the default config binds to loopback
    public = settings(host="0.0.0.0", api_key_env="FIXGRAPH_TEST_SERVE_KEY")
    monkeypatch.delenv("FIXGRAPH_TEST_SERVE_KEY", raising=False)
    with pytest.raises(ConfigError, match="--allow-remote"):
        check_binding(public, allow_remote=False)
    with pytest.raises(ConfigError, match=r"needs an API key: set \$FIXGRAPH_TEST_SERVE_KEY"):
        check_binding(public, allow_remote=True)
    monkeypatch.setenv("FIXGRAPH_TEST_SERVE_KEY", "k")
    check_binding(public, allow_remote=True)


def test_secrets_are_redacted_but_empty_values_and_token_counts_are_not() -> None:
    tree = {"llm": {"api_key": "sk-1", "max_tokens": 200, "token_delay_s": 0.1}, "db": {"password": ""}}
    tree["judge"] = {"llm": {"auth_token": "t"}, "nested": [{"secret": "s"}]}
    out = redact(tree)
    assert out["llm"] == {"api_key": REDACTED, "max_tokens": 200, "token_delay_s": 0.1}
    assert out["db"]["password"] == "" and out["judge"]["llm"]["auth_token"] == REDACTED
    assert out["judge"]["nested"] == [{"secret": REDACTED}] and tree["llm"]["api_key"] == "sk-1"
    flat = redact_flat({"llm.api_key": "sk", "llm.max_tokens": "200", "x.api_key": ""})
    assert flat == {"llm.api_key": REDACTED, "llm.max_tokens": "200", "x.api_key": ""}
