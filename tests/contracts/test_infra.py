"""infra/ and prefect.yaml checked with the tools' own parsers (Docker and Kubernetes do not run here)."""

import json
import re

import pytest
import yaml

from tests.conftest import ROOT

INFRA = ROOT / "infra"


def deployments() -> dict[str, dict]:
    """prefect.yaml's deployments by ``<flow>/<name>``, as `prefect deployment run` names them."""
    out = {}
    for d in yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"]:
        flow = d["entrypoint"].split(":")[-1].replace("_", "-")
        out[f"{flow}/{d['name']}"] = d
    return out


def test_prefect_yaml_deploys_the_flows_with_parameters_they_accept():
    from prefect.flows import load_flow_from_entrypoint
    from prefect.utilities.callables import parameter_schema

    deps = deployments()
    assert set(deps) == {"lead-pipeline/local", "lead-pipeline/gpu", "lead-ablation/local"}
    for key, dep in deps.items():
        flow = load_flow_from_entrypoint(str(ROOT / dep["entrypoint"]))
        assert flow.name == key.split("/")[0]
        accepted = set(parameter_schema(flow.fn).properties)
        assert set(dep["parameters"]) <= accepted, key
        assert dep["concurrency_limit"] == 1  # one run per DVC workspace
    for key in ("lead-pipeline/local", "lead-ablation/local"):
        assert deps[key]["work_pool"]["name"] == "lead-local" and "pull" not in deps[key]
    assert deps["lead-pipeline/gpu"]["parameters"] == {"overrides": [], "pull": True, "push": True}
    assert deps["lead-ablation/local"]["parameters"]["concurrency"] == 2


def test_gpu_job_template_renders_with_the_gpu_deployment_variables():
    from prefect.utilities.templating import apply_values

    template = json.loads((INFRA / "k8s/gpu-base-job-template.json").read_text())
    declared = set(template["variables"]["properties"])
    used = set(re.findall(r"{{\s*(\w+)\s*}}", json.dumps(template["job_configuration"])))
    assert used <= declared, used - declared
    variables = {**deployments()["lead-pipeline/gpu"]["work_pool"]["job_variables"], "image": "lead-gpu:test"}
    assert set(variables) <= declared
    # What a worker does: schema defaults, overridden by the deployment's job variables, into the template.
    defaults = {k: v["default"] for k, v in template["variables"]["properties"].items() if "default" in v}
    config = apply_values(template["job_configuration"], {**defaults, **variables})
    container = config["job_manifest"]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert container["image"] == "lead-gpu:test"


def test_compose_takes_credentials_from_the_environment_and_binds_localhost():
    compose = yaml.safe_load((INFRA / "compose.yaml").read_text())
    services = compose["services"]
    assert {"postgres", "minio", "mlflow", "prefect-server", "worker"} <= set(services)
    for name, service in services.items():
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), (name, port)
        env = service.get("environment", {})
        for key, value in env.items():
            if re.search(r"PASSWORD|SECRET|ACCESS_KEY|ROOT_USER", key):
                assert str(value).startswith("${"), (name, key)
    assert "PASSWORD=\n" in (INFRA / ".env.example").read_text()  # no default password shipped


@pytest.mark.parametrize("name", ["zero3.yaml", "zero3-vllm-server.yaml"])
def test_accelerate_configs_load(name):
    from accelerate.commands.config.config_args import ClusterConfig

    config = ClusterConfig.from_yaml_file(INFRA / "accelerate" / name)
    assert config.distributed_type == "DEEPSPEED" and config.deepspeed_config["zero_stage"] == 3
    assert config.mixed_precision == "bf16"


def test_kubernetes_worker_polls_the_gpu_pool():
    docs = list(yaml.safe_load_all((INFRA / "k8s/worker.yaml").read_text()))
    kinds = {d["kind"] for d in docs}
    assert {"Namespace", "ServiceAccount", "Role", "RoleBinding", "Deployment"} <= kinds
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--pool") + 1] == deployments()["lead-pipeline/gpu"]["work_pool"]["name"]
