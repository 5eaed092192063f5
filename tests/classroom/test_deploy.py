"""The department's path past one machine is configuration: checked against the engines' schemas and against
what the one-machine class promises (classroom/deploy/README.md)."""
from __future__ import annotations

import copy
import json

import pytest
import yaml

from classroom.settings import ClassDir
from tests.support import ROOT

jsonschema = pytest.importorskip("jsonschema")
DEPLOY = ROOT / "classroom" / "deploy"


def _schema(name: str) -> dict:
    return json.loads((DEPLOY / "schemas" / name).read_text())


def _merged(values: dict, defaults: dict) -> dict:
    """``values`` over the chart's ``defaults``, as Helm merges them before checking the chart's schema."""
    out = copy.deepcopy(defaults)
    for key, value in values.items():
        out[key] = _merged(value, out[key]) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _z2jh(values: dict) -> list[str]:
    defaults = yaml.safe_load((DEPLOY / "schemas" / "z2jh-default-values.yaml").read_text())
    return _errors(_schema("z2jh-values.schema.json"), _merged(values, defaults))


def _errors(schema: dict, doc: dict) -> list[str]:
    validator = jsonschema.Draft7Validator(schema)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


def test_the_z2jh_values_fit_the_charts_schema_and_keep_the_class_s_promises() -> None:
    values = yaml.safe_load((DEPLOY / "z2jh-values.yaml").read_text())
    assert _z2jh(values) == []
    hub = values["hub"]["config"]
    assert hub["JupyterHub"]["authenticator_class"] == "classroom.authenticators.ClassLTI13Authenticator"
    assert "access:services!service=gpu-pool" in hub["Spawner"]["server_token_scopes"]
    assert values["singleuser"]["extraEnv"]["GEMMLAB_HIDE_GPU"] == "1"
    egress = values["singleuser"]["networkPolicy"]["egressAllowRules"]
    assert values["singleuser"]["networkPolicy"]["enabled"] and egress["privateIPs"] is False
    mounts = {m["mountPath"]: m for m in values["singleuser"]["storage"]["extraVolumeMounts"]}
    where = ClassDir("/srv/class")
    assert mounts["/srv/exchange/gemmlab/outbound"]["readOnly"] is True
    assert "{username}" in mounts["/srv/exchange/gemmlab/inbound"]["subPath"]
    assert "{username}" in mounts["/srv/exchange/gemmlab/feedback"]["subPath"] and where.course_id == "gemmlab"


def test_the_schema_check_would_catch_a_mistake() -> None:
    values = yaml.safe_load((DEPLOY / "z2jh-values.yaml").read_text())
    broken = copy.deepcopy(values)
    broken["singleuser"]["networkPolicy"]["egressAllowRules"]["privateIPs"] = "no"
    broken["hub"]["imagee"] = {}
    errors = _z2jh(broken)
    assert any("privateIPs" in e for e in errors) and any("imagee" in e for e in errors), errors
    cluster = yaml.safe_load((DEPLOY / "raycluster.yaml").read_text())
    cluster["spec"]["workerGroupSpecs"][0]["replicas"] = "one"
    del cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["name"]
    errors = _errors(_schema("ray.io_v1_raycluster.schema.json"), cluster)
    assert any("replicas" in e for e in errors) and any("'name' is a required" in e for e in errors), errors


def test_the_raycluster_fits_kuberays_schema_with_token_auth_everywhere() -> None:
    cluster = yaml.safe_load((DEPLOY / "raycluster.yaml").read_text())
    assert cluster["apiVersion"] == "ray.io/v1" and cluster["kind"] == "RayCluster"
    assert _errors(_schema("ray.io_v1_raycluster.schema.json"), cluster) == []
    pods = [cluster["spec"]["headGroupSpec"]["template"]] + [g["template"] for g in cluster["spec"]["workerGroupSpecs"]]
    for pod in pods:
        for container in pod["spec"]["containers"]:
            env = {e["name"]: e for e in container.get("env", [])}
            assert env["RAY_AUTH_MODE"]["value"] == "token", container["name"]
    (pool,) = [c for c in pods[0]["spec"]["containers"] if c["name"] == "gpu-pool"]
    assert pool["command"][:5] == ["python", "-m", "pool", "serve", "--hub"] and "auto" in pool["command"]
    assert cluster["spec"]["headGroupSpec"]["rayStartParams"]["include-dashboard"] == "false"


def test_the_pool_service_and_network_policy_fit_kubernetes_schemas() -> None:
    kv = pytest.importorskip("kubernetes_validate", reason="pip install kubernetes-validate (the `test` extra)")
    docs = list(yaml.safe_load_all((DEPLOY / "pool-service.yaml").read_text()))
    for doc in docs:
        kv.validate(doc, kv.latest_version(), strict=True)
    policy = next(d for d in docs if d["kind"] == "NetworkPolicy")
    ray_rule, pool_rule = policy["spec"]["ingress"]
    assert "ports" not in ray_rule and ray_rule["from"][0]["podSelector"]["matchLabels"] == {"ray.io/cluster": "gemmlab-gpus"}
    assert pool_rule["ports"] == [{"protocol": "TCP", "port": 8765}]
    with pytest.raises(kv.ValidationError):
        kv.validate({**docs[0], "spec": {**docs[0]["spec"], "ports": [{"port": "pool"}]}}, kv.latest_version(),
                    strict=True)
