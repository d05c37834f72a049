"""The operator's front-door settings: a hostname template that gives every service a
hostname of its own, and the list of Gateways in other namespaces a spec may name."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferfleet.api.frontdoor_spec import hostname_problem, hostname_template_problem, render_hostname
from inferfleet.config import OperatorSettings, SettingsInvalid
from inferfleet.design.checks import render_problems
from tests.toolkit import a_service


@pytest.mark.parametrize(
    "template",
    ["{name}.{namespace}.llm.example.com", "{namespace}.{name}.example.com", "llm.{name}.x.{namespace}.corp"],
)
def test_templates_that_keep_every_service_apart_are_accepted(template: str) -> None:
    found = OperatorSettings.from_env(
        {"INFERFLEET_FRONT_DOOR_MATCH": "hostname", "INFERFLEET_FRONT_DOOR_HOSTNAME": template}
    )
    assert found.front_door_hostname == template


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("{name}.llm.example.com", "same-named services of two teams would share it"),
        ("{name}-{namespace}.llm.example.com", "a-b in c and a in b-c would share it"),
        ("{name}.{namespace}.{name}.example.com", "twice"),
        ("*.{name}.{namespace}.example.com", "a wildcard covers other hosts"),
        ("{name}.{namespace}.Example.com", "not lowercase"),
        ("{name}.{namespace}", "no domain of the Gateway's"),
        ("{name}.{namespace}.{tier}.example.com", "an unknown placeholder"),
        ("{name}.{namespace}..example.com", "an empty label"),
    ],
)
def test_templates_that_could_give_two_services_one_hostname_are_refused(template: str, why: str) -> None:
    with pytest.raises(SettingsInvalid, match="INFERFLEET_FRONT_DOOR_HOSTNAME"):
        OperatorSettings.from_env({"INFERFLEET_FRONT_DOOR_HOSTNAME": template})
    assert hostname_template_problem(template) is not None, why


def test_hostname_mode_needs_a_template_and_modes_are_known() -> None:
    with pytest.raises(SettingsInvalid, match="INFERFLEET_FRONT_DOOR_HOSTNAME"):
        OperatorSettings.from_env({"INFERFLEET_FRONT_DOOR_MATCH": "hostname"})
    with pytest.raises(SettingsInvalid, match="INFERFLEET_FRONT_DOOR_MATCH"):
        OperatorSettings.from_env({"INFERFLEET_FRONT_DOOR_MATCH": "everything"})
    assert OperatorSettings().front_door_match == "path"


@pytest.mark.parametrize("entry", ["gw", "/gw", "ns/", "Team/gw", "ns/gw/x", "ns/GW", "*/gw", "ns/g*"])
def test_allowed_gateways_must_be_namespace_slash_name(entry: str) -> None:
    with pytest.raises(SettingsInvalid, match="INFERFLEET_ALLOWED_GATEWAYS"):
        OperatorSettings.from_env({"INFERFLEET_ALLOWED_GATEWAYS": f"edge/gw,{entry}"})


def test_allowed_gateways_are_read_as_a_list() -> None:
    found = OperatorSettings.from_env({"INFERFLEET_ALLOWED_GATEWAYS": "edge/gw, shared/*"})
    assert found.allowed_gateways == ("edge/gw", "shared/*")


labels = st.from_regex(r"[a-z]([a-z0-9-]{0,6}[a-z0-9])?", fullmatch=True)


@st.composite
def templates(draw: st.DrawFn) -> str:
    fixed = draw(st.lists(labels, min_size=1, max_size=3))
    parts = [*fixed, "{name}", "{namespace}"]
    return ".".join(draw(st.permutations(parts)))


@settings(max_examples=200, deadline=None)
@given(template=templates(), a=st.tuples(labels, labels), b=st.tuples(labels, labels))
def test_every_accepted_template_gives_two_services_two_hostnames(
    template: str, a: tuple[str, str], b: tuple[str, str]
) -> None:
    if hostname_template_problem(template) is not None:
        return  # e.g. only placeholders next to each other; refused above
    first, second = render_hostname(template, *a), render_hostname(template, *b)
    assert (first == second) == (a == b)
    assert hostname_problem(first) is None


def test_a_hostname_the_gateway_api_would_refuse_is_a_spec_problem() -> None:
    settings_ = OperatorSettings(
        gateway_name="shared",
        front_door_match="hostname",
        front_door_hostname="{name}.{namespace}." + ".".join(["d" * 60] * 3),
    )
    long_name = "a" * 40
    service = a_service(long_name).named(long_name, "n" * 63).service()
    problems = render_problems(service, settings_)
    assert [p.path for p in problems] == ["metadata.name"]
    assert "longer than 253" in problems[0].message
    assert render_problems(a_service("chat").named("chat", "team").service(), settings_) == []
