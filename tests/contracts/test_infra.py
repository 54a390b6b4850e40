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
    assert set(deps) == {
        "lead-pipeline/local",
        "lead-pipeline/gpu",
        "lead-ablation/local",
        "lead-cell/pool",
        "lead-cell/gpu",
    }
    for key, dep in deps.items():
        flow = load_flow_from_entrypoint(str(ROOT / dep["entrypoint"]))
        assert flow.name == key.split("/")[0]
        accepted = set(parameter_schema(flow.fn).properties)
        assert set(dep.get("parameters", {})) <= accepted, key
        # one run per DVC workspace; a cell runs in a clone of its own, as many at once as the pool takes
        assert dep.get("concurrency_limit") == (None if key.startswith("lead-cell/") else 1), key
    for key in ("lead-cell/pool", "lead-cell/gpu", "lead-pipeline/gpu"):  # each run in a fresh clone
        clone, cd = deps[key]["pull"]
        assert clone["prefect.deployments.steps.git_clone"]["repository"] == "{{ $LEAD_GIT_REPOSITORY }}"
        assert cd["prefect.deployments.steps.set_working_directory"]["directory"] == "{{ clone.directory }}"
    assert deps["lead-cell/gpu"]["work_pool"] == deps["lead-pipeline/gpu"]["work_pool"]  # a whole node each
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
            if re.search(r"PASSWORD|SECRET|ACCESS_KEY|ROOT_USER|AUTH_STRING|API_KEY", key):
                assert str(value).startswith("${"), (name, key)
    assert "PASSWORD=\n" in (INFRA / ".env.example").read_text()  # no default password shipped


def env_example() -> dict[str, str]:
    lines = (INFRA / ".env.example").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def test_compose_turns_on_each_tools_auth_with_no_credential_on_a_command_line():
    import configparser

    text = (INFRA / "compose.yaml").read_text()
    services = yaml.safe_load(text)["services"]
    # Every variable compose reads is in .env.example (what `stack.py compose-env` generates), but the
    # workspace path of `serve`, which has a default.
    used = set(re.findall(r"\$\{(\w+)", re.sub(r"#.*", "", text)))  # comments aside
    assert used - {"LEAD_WORKSPACE"} <= set(env_example()), used - set(env_example())
    for name, service in services.items():
        for field in ("command", "entrypoint"):
            argv = json.dumps(service.get(field, ""))
            assert not re.search(r"\$|PASSWORD|SECRET|AUTH_STRING|API_KEY|--api-key|URI|URL|MC_HOST", argv), (
                name,
                field,
                argv,
            )

    def env(service: str) -> dict[str, str]:
        return services[service]["environment"]

    # MLflow: the basic-auth app, its admin and Flask secret from the environment, options read from variables
    # (MLFLOW_BACKEND_STORE_URI holds the Postgres password), its config file without a secret.
    mlflow = services["mlflow"]
    assert mlflow["command"][-2:] == ["--app-name", "basic-auth"]
    assert env("mlflow")["MLFLOW_AUTH_ADMIN_PASSWORD"].startswith("${MLFLOW_ADMIN_PASSWORD:?")
    assert env("mlflow")["MLFLOW_FLASK_SERVER_SECRET_KEY"].startswith("${MLFLOW_FLASK_SECRET_KEY:?")
    assert "${POSTGRES_PASSWORD}" in env("mlflow")["MLFLOW_BACKEND_STORE_URI"]
    mounted = {v.split(":")[1]: v.split(":")[0] for v in mlflow["volumes"] if v.startswith("./")}
    ini = configparser.ConfigParser()
    ini.read(INFRA / mounted[env("mlflow")["MLFLOW_AUTH_CONFIG_PATH"]])
    assert ini["mlflow"]["default_permission"] == "READ" and "admin_password" not in ini["mlflow"]
    assert "mlflow:5000" in env("mlflow")["MLFLOW_SERVER_ALLOWED_HOSTS"].split(
        ","
    )  # the worker's Host header
    # Prefect: the server's auth string, the same string on its clients (the worker, the UI's own calls).
    auth = env("prefect-server")["PREFECT_SERVER_API_AUTH_STRING"]
    assert auth.startswith("${PREFECT_AUTH_STRING:?")
    assert (
        env("worker")["PREFECT_API_AUTH_STRING"] == env("prefect-server")["PREFECT_API_AUTH_STRING"] == auth
    )
    # The worker's MLflow account is the admin's; its key for vLLM is the one `serve` requires.
    assert env("worker")["MLFLOW_TRACKING_PASSWORD"] == env("mlflow")["MLFLOW_AUTH_ADMIN_PASSWORD"]
    assert env("worker")["MLFLOW_TRACKING_USERNAME"] == env("mlflow")["MLFLOW_AUTH_ADMIN_USERNAME"]
    assert services["serve"]["command"][:2] == ["lead", "serve"] and services["serve"]["profiles"] == ["gpu"]
    assert env("serve")["LEAD_SERVE_API_KEY"] == env("worker")["LEAD_SERVE_API_KEY"]
    assert env("serve")["LEAD_SERVE_API_KEY"].startswith("${LEAD_SERVE_API_KEY:?")


def test_compose_env_generates_every_credential_once_and_stays_out_of_git(tmp_path):
    import importlib.util
    import subprocess

    spec = importlib.util.spec_from_file_location("stack_script", INFRA / "stack.py")
    stack = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stack)
    out = tmp_path / ".env"
    stack.compose_env(out)
    assert out.stat().st_mode & 0o777 == 0o600
    values = dict(line.split("=", 1) for line in out.read_text().splitlines() if not line.startswith("#"))
    assert set(values) == set(env_example()) and all(values.values())
    assert values["PREFECT_AUTH_STRING"].startswith("admin:") and len(values["POSTGRES_PASSWORD"]) >= 24
    assert re.fullmatch(r"[\w-]+", values["POSTGRES_PASSWORD"])  # safe inside the database URLs
    with pytest.raises(stack.StackError, match="exists"):
        stack.compose_env(out)  # never replaces the credentials the containers were created with
    ignored = subprocess.run(["git", "check-ignore", "-q", "infra/.env"], cwd=ROOT)
    assert ignored.returncode == 0  # the real file, infra/.env, is git-ignored


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
