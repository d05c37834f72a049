"""The generated CRD on a real API server: accepted (structural schema, CEL compiled
and within its cost budget), documented by `kubectl explain`, and enforcing its rules."""

from __future__ import annotations

import copy

import yaml

from tests.conftest import REPO_ROOT
from tests.e2e.harness import Cluster, example

CRD_NAME = "inferenceservices.inferfleet.dev"


def test_crd_is_accepted_established_and_serves_its_short_name(cluster: Cluster) -> None:
    # Re-applying the file as it is in the repository must be accepted as is (the API
    # server compiles every CEL rule and estimates its cost on each write).
    done = cluster.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=inferfleet-e2e",
        "-f",
        str(REPO_ROOT / "crds" / f"{CRD_NAME}.yaml"),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    crd = cluster.kubectl_json("get", "crd", CRD_NAME)
    conditions = {c["type"]: c for c in crd["status"]["conditions"]}
    assert conditions["Established"]["status"] == "True"
    assert conditions["NamesAccepted"]["status"] == "True"
    assert conditions.get("NonStructuralSchema", {}).get("status") != "True"
    assert crd["status"]["acceptedNames"]["shortNames"] == ["ifs"]
    served = {v["name"] for v in crd["spec"]["versions"] if v["served"]}
    assert served == {"v1alpha1"}
    (version,) = crd["spec"]["versions"]
    assert version["subresources"] == {"status": {}}
    assert cluster.kubectl("get", "ifs", "-A").returncode == 0


def test_kubectl_explain_documents_the_spec(cluster: Cluster) -> None:
    spec = cluster.kubectl("explain", "inferenceservice.spec").stdout
    for field in ("model", "workload", "tiers", "scaling", "cache", "serving"):
        assert f"  {field}\t" in spec or f"  {field} " in spec, (
            f"{field} missing from kubectl explain:\n{spec}"
        )
    tiers = cluster.kubectl("explain", "ifs.spec.tiers.minReplicas").stdout
    assert "FIELD: minReplicas <integer>" in tiers
    assert "DESCRIPTION:" in tiers and len(tiers.split("DESCRIPTION:")[1].strip()) > 10


def test_api_server_enforces_cel_rules_with_field_paths(cluster: Cluster, namespace: str) -> None:
    """No operator and no webhook here: only the CRD's own rules stand between the user
    and a bad spec."""
    body = example("llama-8b-chat", namespace)
    bad = copy.deepcopy(body)
    bad["spec"]["tiers"][0]["minReplicas"] = 9
    bad["spec"]["tiers"][0]["maxReplicas"] = 2
    bad["spec"]["workload"]["inputTokens"] = {"p50": 3000, "p95": 2000, "p99": 4000}
    done = cluster.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(bad), check=False)
    assert done.returncode != 0
    message = done.stderr
    assert "spec.tiers[0]" in message and "minReplicas" in message, message
    assert "spec.workload.inputTokens" in message, message
    # Nothing was stored.
    assert (
        cluster.kubectl("get", "ifs", body["metadata"]["name"], "-n", namespace, check=False).returncode != 0
    )

    duplicate = copy.deepcopy(body)
    duplicate["spec"]["tiers"][1]["name"] = duplicate["spec"]["tiers"][0]["name"]
    done = cluster.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(duplicate), check=False)
    assert done.returncode != 0 and "spec.tiers" in done.stderr, done.stderr

    # An unknown field: server-side apply refuses it by name (the typed patch needs a
    # schema); a plain create that skips field validation gets it pruned, never stored.
    typo = copy.deepcopy(body)
    typo["spec"]["model"]["notAField"] = "x"
    done = cluster.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(typo), check=False)
    assert done.returncode != 0 and "notAField" in done.stderr, done.stderr
    done = cluster.kubectl("create", "--validate=false", "-f", "-", stdin=yaml.safe_dump(typo), check=False)
    assert done.returncode == 0, done.stderr
    stored = cluster.service(namespace, body["metadata"]["name"])
    assert "notAField" not in stored["spec"]["model"]
    assert [t["name"] for t in stored["spec"]["tiers"]] == [t["name"] for t in body["spec"]["tiers"]]
