"""Where the app listens (issue 33): ``make run`` binds to 127.0.0.1 unless asked otherwise, and team
mode refuses sign-ins over plain HTTP from the network unless the operator says so, with error
details hidden."""

from __future__ import annotations

import subprocess

import pytest
from streamlit import config as streamlit_config

from qa_core.access import plain_http_refusal
from tests import ROOT
from tests.pages import AUTH
from tests.teams import claims, shown, team_page

NETWORK_AUTH = {**AUTH, "redirect_uri": "http://rerank.example.org:8501/oauth2callback"}


def test_make_run_listens_on_loopback_unless_asked() -> None:
    def command(*overrides: str) -> str:
        out = subprocess.run(["make", "-n", "run", *overrides], cwd=ROOT, capture_output=True, text=True, check=True)
        return next(line for line in out.stdout.splitlines() if "streamlit run" in line)

    assert "--server.address 127.0.0.1" in command()
    assert "--server.address 0.0.0.0" in command("ADDRESS=0.0.0.0")


@pytest.mark.parametrize(
    ("address", "redirect", "allowed", "refused"),
    [
        ("127.0.0.1", "http://rerank.example.org/oauth2callback", False, False),
        ("::1", "http://rerank.example.org/oauth2callback", False, False),
        ("0.0.0.0", "https://rerank.example.org/oauth2callback", False, False),
        ("0.0.0.0", "http://localhost:8501/oauth2callback", False, False),
        ("0.0.0.0", "http://rerank.example.org/oauth2callback", False, True),
        ("", "http://10.0.0.5:8501/oauth2callback", False, True),
        ("", "http://10.0.0.5:8501/oauth2callback", True, False),
    ],
)
def test_team_mode_refuses_plain_http_from_the_network(address, redirect, allowed, refused) -> None:
    assert (plain_http_refusal(address, redirect, allowed) is not None) is refused


def test_a_team_page_on_a_network_address_over_http_says_so_and_hides_error_details(monkeypatch) -> None:
    previous = {key: streamlit_config.get_option(key) for key in ("server.address", "client.showErrorDetails")}
    streamlit_config.set_option("server.address", "0.0.0.0")
    try:
        app = team_page(str(ROOT / "pages" / "1_Ask.py"), claims("ada"))
        app.secrets["auth"] = NETWORK_AUTH
        app.run()
        assert "team mode refuses to serve sign-ins on address 0.0.0.0 over plain HTTP" in shown(app)
        assert streamlit_config.get_option("client.showErrorDetails") == "none"
        monkeypatch.setenv("RERANK_LAB_ALLOW_PLAIN_HTTP", "1")
        app.run()
        assert "refuses" not in shown(app)
    finally:
        for key, value in previous.items():
            streamlit_config.set_option(key, value)


@pytest.mark.parametrize("value, on", [("1", True), ("On", True), (" yes ", True), ("true", True),
                                       ("0", False), ("", False), ("off", False), ("2", False)])
def test_every_on_off_setting_reads_the_same_words(monkeypatch, value, on) -> None:
    """RERANK_LAB_ALLOW_PLAIN_HTTP once took 1/true/yes while RERANK_LAB_AMP also took "on"."""
    from qa_core.config import allow_plain_http
    from qa_core.device import amp_enabled

    monkeypatch.setenv("RERANK_LAB_ALLOW_PLAIN_HTTP", value)
    monkeypatch.setenv("RERANK_LAB_AMP", value)
    assert allow_plain_http() is on and amp_enabled() is on


def test_the_streamlit_config_makes_loopback_the_default_address() -> None:
    """Any ``streamlit run`` in the project folder reads it (tests/test_e2e_gate.py starts one)."""
    import tomllib

    settings = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    assert settings["server"]["address"] == "127.0.0.1"
