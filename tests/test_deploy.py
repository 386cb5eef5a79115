"""deploy/: the compose file, the image, the Helm values and manifests, and the
containers' config are consistent with ragline and with what they name.

Nothing here starts a container (no docker in the test environment): the checks
are static, against ragline's own loaders, click commands and entry points, and
the Dagster chart's value keys (deploy/helm/dagster-chart-keys.yaml).

"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import re
import shlex
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from rag_serving.config import DagsterConfig, load_config

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "docker-compose.yml"
DOCKERFILE = DEPLOY / "Dockerfile"
CONFIG = DEPLOY / "ragline.toml"
INSTANCE = DEPLOY / "dagster.yaml"
WORKSPACE = DEPLOY / "workspace.yaml"
VALUES = DEPLOY / "helm" / "values.yaml"
CHART_KEYS = DEPLOY / "helm" / "dagster-chart-keys.yaml"
MANIFESTS = [DEPLOY / "helm" / "mcp.yaml", DEPLOY / "helm" / "workers.yaml"]
DOC = ROOT / "docs" / "deployment.md"
BENCHMARKS = ROOT / "docs" / "benchmarks.md"

# What the Celery executor needs in the image, through the `server` extra.
CELERY_DISTRIBUTIONS = ("dagster-celery", "redis")


# ---- reading the files -------------------------------------------------------


def load_yaml(path: Path) -> list[Any]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def compose() -> dict[str, Any]:
    return load_yaml(COMPOSE)[0]


def services() -> dict[str, dict[str, Any]]:
    return compose()["services"]


def raw_config() -> dict[str, Any]:
    return tomllib.loads(CONFIG.read_text(encoding="utf-8"))


def env_file_keys(path: Path) -> dict[str, str]:
    """KEY=value lines of an env file (its committed .example)."""
    example = path.with_name(path.name + ".example")
    assert example.is_file(), f"{path.relative_to(ROOT)} has no committed example"
    values = {}
    for line in example.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def service_env(service: dict[str, Any]) -> dict[str, str]:
    env: dict[str, str] = {}
    for name in service.get("env_file", []):
        env.update(env_file_keys(DEPLOY / (name if isinstance(name, str) else name["path"])))
    given = service.get("environment") or {}
    if isinstance(given, list):
        given = dict(item.partition("=")[::2] for item in given)
    env.update({k: str(v) for k, v in given.items()})
    return env


def as_argv(command: Any) -> list[str]:
    return shlex.split(command) if isinstance(command, str) else [str(c) for c in command]


def k8s_docs() -> Iterator[tuple[Path, dict[str, Any]]]:
    for path in MANIFESTS:
        for doc in load_yaml(path):
            yield path, doc


def k8s_containers() -> Iterator[tuple[str, dict[str, Any]]]:
    for path, doc in k8s_docs():
        if doc["kind"] in ("Deployment", "StatefulSet", "Job"):
            for container in doc["spec"]["template"]["spec"]["containers"]:
                yield f"{path.name}:{doc['metadata']['name']}", container


def doc_secret_keys() -> dict[str, set[str]]:
    """The keys of each Secret as docs/deployment.md creates them
    (`kubectl create secret generic NAME --from-literal=KEY=…`)."""
    secrets: dict[str, set[str]] = {}
    text = DOC.read_text(encoding="utf-8").replace("\\\n", " ")
    for match in re.finditer(r"kubectl[^\n]*create secret generic (\S+)([^\n]*)", text):
        keys = set(re.findall(r"--from-literal=([A-Za-z_][A-Za-z0-9_-]*)=", match.group(2)))
        secrets.setdefault(match.group(1), set()).update(keys)
    return secrets


def env_refs(node: Any) -> Iterator[str]:
    """The variables a Dagster instance file reads (`{env: NAME}`)."""
    if isinstance(node, dict):
        if set(node) == {"env"}:
            yield node["env"]
        for value in node.values():
            yield from env_refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from env_refs(value)


def dockerfile_copies() -> dict[str, Path]:
    """Image path → repository file, from the Dockerfile's COPY lines of files."""
    copies = {}
    for source, dest in re.findall(r"^COPY\s+(\S+)\s+(/\S+)$", DOCKERFILE.read_text(), re.M):
        copies[dest] = ROOT / source
    return copies


# ---- every file parses -------------------------------------------------------


def test_every_yaml_in_deploy_parses_to_mappings():
    files = sorted([*DEPLOY.rglob("*.yml"), *DEPLOY.rglob("*.yaml")])
    assert {COMPOSE, VALUES, CHART_KEYS, INSTANCE, WORKSPACE, *MANIFESTS} <= set(files)
    for path in files:
        docs = load_yaml(path)
        assert docs, f"{path.relative_to(ROOT)} is empty"
        assert all(isinstance(doc, dict) for doc in docs), path


def test_kubernetes_manifests_are_whole_objects():
    kinds = []
    for path, doc in k8s_docs():
        assert {"apiVersion", "kind", "metadata", "spec"} <= set(doc), path
        kinds.append(doc["kind"])
        if doc["kind"] == "Deployment":
            selector = doc["spec"]["selector"]["matchLabels"]
            labels = doc["spec"]["template"]["metadata"]["labels"]
            assert selector.items() <= labels.items(), f"{path.name}: selector misses the pods"
    assert kinds.count("Deployment") >= 3 and "Service" in kinds


# ---- compose -----------------------------------------------------------------


def documented_services() -> set[str]:
    """The first column of docs/deployment.md's `| compose service |` table."""
    names: set[str] = set()
    in_table = False
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("| compose service"):
            in_table = True
            continue
        if in_table:
            if not line.startswith("|"):
                break
            names.update(re.findall(r"`([a-z0-9-]+)`", line.split("|")[1]))
    return names


def test_the_services_the_docs_name_are_the_compose_services():
    documented = documented_services()
    assert documented, "docs/deployment.md has no `| compose service |` table"
    assert documented == set(services())


def test_compose_runs_the_roles_the_deployment_needs():
    roles = {name: as_argv(s.get("command", [])) for name, s in services().items()}
    assert roles["webserver"][0] == "dagster-webserver"
    assert roles["daemon"][:2] == ["dagster-daemon", "run"]
    assert roles["worker"][:2] == ["ragline", "worker"]
    assert roles["mcp"][:3] == ["ragline", "mcp", "--http"]
    for name in ("worker", "mcp"):
        assert services()[name]["deploy"]["replicas"] >= 2, f"{name}: one replica"
    for name, service in services().items():
        if name != "minio-init":  # a one-shot set-up
            assert "healthcheck" in service or name == "worker", f"{name} has no healthcheck"
    # state that must outlive containers lives in named volumes
    for name, volume in (("postgres", "pgdata"), ("redis", "redisdata"), ("minio", "miniodata")):
        assert any(str(v).startswith(f"{volume}:") for v in services()[name]["volumes"])
        assert volume in compose()["volumes"]


def test_compose_dependencies_exist_and_wait_for_health():
    names = set(services())
    for name, service in services().items():
        for dependency, rule in (service.get("depends_on") or {}).items():
            assert dependency in names, f"{name} depends on unknown {dependency}"
            if rule["condition"] == "service_healthy":
                assert "healthcheck" in services()[dependency], f"{dependency} has none"


def test_the_ui_and_the_object_store_console_are_not_published_to_the_network():
    for name in ("webserver", "minio"):
        for port in services()[name].get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port}"


def test_the_bucket_minio_init_creates_is_the_index_uri_bucket():
    script = "\n".join(as_argv(services()["minio-init"]["command"]))
    made = re.findall(r"mc mb\b.*?\bstore/([a-z0-9.-]+)", script)
    uri = raw_config()["index_uri"]
    assert uri.startswith("s3://")
    assert made == [uri.removeprefix("s3://").split("/", 1)[0]]


def test_the_mcp_port_is_the_same_everywhere():
    port = raw_config()["mcp"]["port"]
    argv = as_argv(services()["mcp"]["command"])
    assert int(argv[argv.index("--port") + 1]) == port
    nginx = (DEPLOY / "nginx.conf").read_text(encoding="utf-8")
    assert re.search(rf"^\s*listen {port};", nginx, re.M)
    assert re.search(rf"^\s*server mcp:{port};", nginx, re.M)
    assert f"{port}:{port}" in services()["mcp-proxy"]["ports"]
    for _, doc in k8s_docs():
        if doc["kind"] == "Service" and doc["metadata"]["name"] == "ragline-mcp":
            # the replica accepts Host headers as name:<its port>: the Service keeps it
            assert doc["spec"]["ports"][0]["port"] == port == doc["spec"]["ports"][0]["targetPort"]
            assert doc["spec"]["sessionAffinity"] == "ClientIP"
    (container,) = [c for where, c in k8s_containers() if where.endswith("ragline-mcp")]
    assert int(container["command"][container["command"].index("--port") + 1]) == port


# ---- images ------------------------------------------------------------------


def image_refs() -> Iterator[tuple[str, str]]:
    for name, service in services().items():
        assert "image" in service, f"compose service {name} names no image"
        yield f"compose {name}", service["image"]
    for stage in re.findall(r"^FROM\s+(\S+)", DOCKERFILE.read_text(), re.M):
        yield "Dockerfile FROM", stage
    values = load_yaml(VALUES)[0]
    images = [
        ("dagsterWebserver", values["dagsterWebserver"]["image"]),
        ("dagsterDaemon", values["dagsterDaemon"]["image"]),
    ] + [(d["name"], d["image"]) for d in values["dagster-user-deployments"]["deployments"]]
    for where, image in images:
        yield f"values {where}", f"{image['repository']}:{image.get('tag', '')}"
    for where, container in k8s_containers():
        yield where, container["image"]


def tag_of(ref: str) -> str:
    name = ref.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.partition(":")[2]


@pytest.mark.parametrize("ref", ["postgres", "redis:latest", "registry:5000/x", "x:"])
def test_tag_of_finds_unpinned_images(ref):
    assert tag_of(ref) in ("", "latest")


def test_every_image_is_pinned():
    refs = list(image_refs())
    assert len(refs) >= 10
    for where, ref in refs:
        assert tag_of(ref) not in ("", "latest"), f"{where}: {ref} is not pinned"


def test_ragline_images_carry_the_package_version():
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    ragline = [
        ref
        for _, ref in image_refs()
        if ref.split("@")[0].rsplit("/", 1)[-1].startswith("ragline:")
    ]
    assert len(ragline) >= 4
    assert {tag_of(ref) for ref in ragline} == {version}


# ---- commands ----------------------------------------------------------------


def click_command(script: str) -> click.Command:
    """The click command behind a console script of an installed distribution."""
    (entry,) = [
        e for e in importlib.metadata.entry_points(group="console_scripts") if e.name == script
    ]
    target = entry.load()
    if isinstance(target, click.Command):
        return target
    module = importlib.import_module(entry.module)
    for name in ("cli", "main"):
        if isinstance(getattr(module, name, None), click.Command):
            return getattr(module, name)
    raise AssertionError(f"{script}: {entry.value} is no click command")


def parse(command: click.Command, argv: list[str], name: str) -> list[str]:
    """Parse ``argv`` as the command line would (nothing is run); returns the
    (sub)command path. Raises click's UsageError on unknown commands or options."""
    ctx = command.make_context(name, list(argv))
    if isinstance(command, click.Group):
        rest = [*getattr(ctx, "_protected_args", ctx.protected_args), *ctx.args]
        assert rest, f"{name}: no subcommand given"
        sub_name, sub, sub_argv = command.resolve_command(ctx, rest)
        return [name, *parse(sub, sub_argv, sub_name)]
    return [name]


def in_image(argv: list[str]) -> list[str]:
    """Arguments naming files baked into the image, as the repository files they are."""
    copies = {dest: str(source) for dest, source in dockerfile_copies().items()}
    return [copies.get(arg, arg) for arg in argv]


PYTHON_SCRIPTS = {"ragline", "dagster", "dagster-webserver", "dagster-daemon", "dagster-celery"}


def ragline_commands() -> Iterator[tuple[str, list[str]]]:
    for name, service in services().items():
        argv = as_argv(service.get("command", []))
        if argv and argv[0] in PYTHON_SCRIPTS:
            yield f"compose {name}", argv
        test = (service.get("healthcheck") or {}).get("test", [])
        if test and test[0] == "CMD" and test[1] in PYTHON_SCRIPTS:
            yield f"compose {name} healthcheck", test[1:]
    for where, container in k8s_containers():
        argv = [*container.get("command", []), *container.get("args", [])]
        if argv and argv[0] in PYTHON_SCRIPTS:
            yield where, argv
    for deployment in load_yaml(VALUES)[0]["dagster-user-deployments"]["deployments"]:
        yield (
            f"values {deployment['name']}",
            ["dagster", "api", "grpc", *deployment["dagsterApiGrpcArgs"]],
        )


def test_the_scripts_are_console_scripts_of_installed_distributions():
    scripts = {argv[0] for _, argv in ragline_commands()}
    assert {"ragline", "dagster-webserver", "dagster-daemon", "dagster"} <= scripts
    installed = {e.name: e for e in importlib.metadata.entry_points(group="console_scripts")}
    for script in scripts | {"dagster-celery"}:
        assert script in installed, f"{script} is no console script here"
    assert installed["ragline"].dist.name == "ragline"
    assert installed["dagster-webserver"].dist.name == "dagster-webserver"
    assert installed["dagster-daemon"].dist.name == "dagster"


@pytest.mark.parametrize(
    "where, argv", list(ragline_commands()), ids=[w for w, _ in ragline_commands()]
)
def test_each_command_parses_with_its_real_cli(where, argv):
    path = parse(click_command(argv[0]), in_image(argv[1:]), argv[0])
    assert path[0] == argv[0] and len(path) >= 1


def test_a_wrong_command_does_not_parse():
    """The check above can fail: an unknown subcommand or option is refused."""
    with pytest.raises(click.UsageError):
        parse(click_command("ragline"), ["mcp", "--htttp"], "ragline")
    with pytest.raises(click.UsageError):
        parse(click_command("dagster-daemon"), ["runn"], "dagster-daemon")


def test_the_code_location_is_ragline_s_module():
    (location,) = load_yaml(WORKSPACE)[0]["load_from"]
    module = location["python_module"]["module_name"]
    assert module == "rag_assets.definitions"
    assert importlib.util.find_spec(module) is not None
    for deployment in load_yaml(VALUES)[0]["dagster-user-deployments"]["deployments"]:
        args = deployment["dagsterApiGrpcArgs"]
        assert args[args.index("-m") + 1] == module


# ---- the image ---------------------------------------------------------------


def test_the_dockerfile_installs_an_extra_that_exists():
    text = DOCKERFILE.read_text(encoding="utf-8")
    extras = re.findall(r'pip install "\.\[([\w,-]+)\]"', text)
    assert extras, "the Dockerfile installs no ragline extra"
    defined = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for extra in ",".join(extras).split(","):
        assert extra in defined, f"the Dockerfile installs .[{extra}], which pyproject.toml lacks"
    server = " ".join(defined["server"])
    assert "dagster-postgres" in server and "psycopg2" in server
    missing = [d for d in CELERY_DISTRIBUTIONS if not re.search(rf"\b{d}\b", server)]
    assert not missing, f"the `server` extra lacks {missing} (the Celery executor)"


def test_the_dockerfile_copies_what_exists_and_the_environment_points_at_it():
    text = DOCKERFILE.read_text(encoding="utf-8")
    for source in re.findall(r"^COPY\s+(.+)\s+\S+$", text, re.M):
        for part in source.split():
            assert (ROOT / part).exists(), f"COPY {part}: not in the repository"
    copies = dockerfile_copies()
    env = dict(
        re.findall(
            r"(\w+)=(\S+)", " ".join(re.findall(r"^ENV ((?:[^\n]*\\\n)*[^\n]*)", text, re.M))
        )
    )
    assert copies[env["RAGLINE_CONFIG"]] == CONFIG
    assert copies[env["DAGSTER_HOME"] + "/dagster.yaml"] == INSTANCE
    assert copies["/opt/dagster/workspace.yaml"] == WORKSPACE
    # No PyTorch in the image (issue 29): the embedder runs on ONNX Runtime.
    assert not re.search(r"pip install[^\n]*torch", text)
    # Every package pyproject.toml builds is copied in (rag_sources was once missing).
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"
    ]["find"]["include"]
    copied = {source.strip("./") for source in re.findall(r"^COPY\s+(\S+)\s+\S+$", text, re.M)}
    assert {p.rstrip("*") for p in packages} <= copied, (packages, copied)
    assert "setup.py" in re.search(r"^COPY ([^\n]*) \./$", text, re.M).group(1)
    assert re.search(r"^USER (?!root)\S+", text, re.M), "the image runs as root"
    # the data dir of the config is where the image gives the user a writable folder
    assert raw_config()["data_dir"] in re.findall(r"mkdir -p ([^&]+)", text)[0].split()


# ---- the containers' config --------------------------------------------------


def test_the_deploy_config_loads_as_it_is():
    config = load_config(CONFIG)
    assert str(config.index_uri).startswith("s3://")
    assert config.dagster.executor == "celery"
    assert config.dagster.storage == "postgres"
    assert config.mcp.host == "0.0.0.0" and config.mcp.tokens
    assert all(token.token_env and not token.token for token in config.mcp.tokens)
    assert str(config.data_dir) == "/var/lib/ragline"
    assert all(str(source.path).startswith("/srv/sources/") for source in config.sources)


# ---- environment: every variable a config reads is given ---------------------


def ragline_needs(role: str) -> set[str]:
    """The variables a ragline container reads by the deploy config."""
    raw = raw_config()
    dagster = raw.get("dagster", {})
    needs = {dagster.get("postgres_url_env", "RAGLINE_DAGSTER_POSTGRES_URL")}
    if dagster.get("executor") == "celery":
        needs.add(dagster["celery_broker_url_env"])
    if str(raw.get("index_uri", "")).startswith("s3"):
        needs |= {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"}
    if role == "mcp":
        needs |= {t["token_env"] for t in raw.get("mcp", {}).get("tokens", []) if "token_env" in t}
    return needs


def test_compose_gives_each_container_the_variables_it_reads():
    instance_vars = set(env_refs(load_yaml(INSTANCE)[0]))
    assert instance_vars == {"RAGLINE_DAGSTER_STORAGE_URL"}
    for name, service in services().items():
        env = service_env(service)
        argv = as_argv(service.get("command", []))
        needs: set[str] = set()
        if service.get("image", "").startswith("ragline:"):
            needs |= ragline_needs("mcp" if argv[:2] == ["ragline", "mcp"] else name)
            if argv[0].startswith("dagster"):
                needs |= instance_vars  # read from dagster.yaml without ragline
        # $$NAME in a command or healthcheck: the container's own environment
        shell = " ".join([*argv, *map(str, (service.get("healthcheck") or {}).get("test", []))])
        needs |= set(re.findall(r"\$\$\{?([A-Za-z_][A-Za-z0-9_]*)", shell))
        if name == "postgres":
            needs |= {"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"}
        if name == "minio":
            needs |= {"MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD"}
        missing = needs - set(env)
        assert not missing, f"compose service {name} lacks {sorted(missing)}"
    assert "RAGLINE_MCP_TOKEN_TEAM" in ragline_needs("mcp")


def test_the_env_examples_agree_with_each_other():
    ragline = env_file_keys(DEPLOY / "env" / "ragline.env")
    postgres = env_file_keys(DEPLOY / "env" / "postgres.env")
    url = ragline["RAGLINE_DAGSTER_POSTGRES_URL"]
    who = f"{postgres['POSTGRES_USER']}:{postgres['POSTGRES_PASSWORD']}@"
    assert who in url and url.endswith("/" + postgres["POSTGRES_DB"])
    # what ragline itself would hand dagster-postgres, for the processes without it
    config = DagsterConfig(storage="postgres", postgres_url=url)
    assert ragline["RAGLINE_DAGSTER_STORAGE_URL"] == config.storage_url()
    assert ragline["RAGLINE_CELERY_BROKER_URL"].startswith("redis://redis:6379/")
    assert ragline["AWS_ENDPOINT_URL"] == "http://minio:9000"
    assert len(ragline["RAGLINE_MCP_TOKEN_TEAM"]) >= 16  # ragline's minimum for a token
    ignored = (DEPLOY / ".gitignore").read_text(encoding="utf-8")
    assert "env/*.env" in ignored.split()


def test_kubernetes_gives_each_ragline_container_the_variables_it_reads():
    secrets = doc_secret_keys()
    assert {
        "ragline-object-store",
        "ragline-dagster-postgres",
        "ragline-celery",
        "ragline-mcp-tokens",
    } <= set(secrets)
    checked = 0
    for where, container in k8s_containers():
        argv = [*container.get("command", []), *container.get("args", [])]
        if argv[:1] != ["ragline"]:
            continue
        given = {e["name"] for e in container.get("env", [])}
        for source in container.get("envFrom", []):
            given |= secrets[source["secretRef"]["name"]]
        for item in container.get("env", []):
            ref = (item.get("valueFrom") or {}).get("secretKeyRef")
            if ref:
                assert ref["key"] in secrets[ref["name"]], (
                    f"{where}: {ref} is not created in the docs"
                )
        role = "mcp" if argv[:2] == ["ragline", "mcp"] else "worker"
        missing = ragline_needs(role) - given
        assert not missing, f"{where} lacks {sorted(missing)}"
        checked += 1
    assert checked >= 2
    values = load_yaml(VALUES)[0]
    for deployment in values["dagster-user-deployments"]["deployments"]:
        given = set().union(*(secrets[s["name"]] for s in deployment["envSecrets"]))
        assert not ragline_needs("location") - given, deployment["name"]
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    given = set().union(*(secrets[s["name"]] for s in launcher["envSecrets"]))
    assert not ragline_needs("run") - given


# ---- the Dagster instance ----------------------------------------------------


def test_the_containers_instance_holds_ragline_s_settings(tmp_path, monkeypatch):
    from dagster._core.instance.config import dagster_instance_config

    from rag_assets.instance import instance_settings

    deployed = load_yaml(INSTANCE)[0]
    runs = deployed["concurrency"]["runs"]["max_concurrent_runs"]
    ours = yaml.safe_load(instance_settings("postgres", runs))
    for key, value in ours.items():
        assert deployed.get(key) == value, f"deploy/dagster.yaml: {key} differs from ragline's"
    # Dagster itself accepts the file (and the chart's extra instance config)
    monkeypatch.setenv("RAGLINE_DAGSTER_STORAGE_URL", "postgresql+psycopg2://u:p@db:5432/dagster")
    (tmp_path / "dagster.yaml").write_text(INSTANCE.read_text(encoding="utf-8"), encoding="utf-8")
    dagster_instance_config(str(tmp_path))
    extra = load_yaml(VALUES)[0]["additionalInstanceConfig"]
    assert extra["concurrency"] == ours["concurrency"]
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(extra), encoding="utf-8")
    dagster_instance_config(str(tmp_path))


# ---- Helm values against the chart -------------------------------------------


def unknown_keys(values: Any, keys: Any, where: str = "") -> Iterator[str]:
    if keys == "*" or keys is None:
        return
    if isinstance(values, dict):
        for key, value in values.items():
            if key not in keys or key == "[]":
                yield f"{where}{key}"
            else:
                yield from unknown_keys(value, keys[key], f"{where}{key}.")
    elif isinstance(values, list) and "[]" in keys:
        for i, item in enumerate(values):
            yield from unknown_keys(item, keys["[]"], f"{where}[{i}].")


def test_the_helm_values_use_only_keys_of_the_dagster_chart():
    keys = load_yaml(CHART_KEYS)[0]
    values = load_yaml(VALUES)[0]
    assert "dagsterWebserver" in keys and "dagster-user-deployments" in keys
    assert list(unknown_keys(values, keys)) == []
    # the walk finds a misspelt key, deep or at the top
    values["runLauncher"]["config"]["k8sRunLauncher"]["envSecret"] = []
    values["dagsterWebServer"] = {}
    values["dagster-user-deployments"]["deployments"][0]["grpcArgs"] = []
    assert sorted(unknown_keys(values, keys)) == [
        "dagster-user-deployments.deployments.[0].grpcArgs",
        "dagsterWebServer",
        "runLauncher.config.k8sRunLauncher.envSecret",
    ]


def test_the_helm_values_choose_what_the_docs_say():
    values = load_yaml(VALUES)[0]
    assert values["runLauncher"]["type"] in ("K8sRunLauncher", "CeleryK8sRunLauncher")
    assert values["dagster-user-deployments"]["enabled"] is True
    assert values["telemetry"]["enabled"] is False
    coordinator = values["dagsterDaemon"]["runCoordinator"]
    assert coordinator["type"] == "QueuedRunCoordinator"
    max_runs = raw_config()["dagster"].get("max_concurrent_runs")
    assert coordinator["config"]["queuedRunCoordinator"]["maxConcurrentRuns"] == max_runs
    postgres = values["postgresql"]
    assert postgres["enabled"] or postgres["postgresqlHost"]


# ---- the sizing figures are the measured ones --------------------------------


def benchmark_section(name: str) -> str:
    text = BENCHMARKS.read_text(encoding="utf-8")
    match = re.search(rf"<!-- {name}:start -->(.*?)<!-- {name}:end -->", text, re.S)
    assert match, f"docs/benchmarks.md has no section {name}"
    return match.group(1)


def test_every_measured_figure_the_sizing_uses_is_in_its_benchmarks_section():
    """docs/deployment.md's `| figure |` table: each value appears in the section it names."""
    rows = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[2].startswith("benchmarks.md, "):
            rows.append(cells)
    assert len(rows) >= 5, "docs/deployment.md cites too few measured figures"
    for _what, value, source, _ in rows:
        section = benchmark_section(source.removeprefix("benchmarks.md, ").strip("`"))
        number = re.search(r"[\d,.]+", value).group(0)  # type: ignore[union-attr]
        assert number in section, f"{value} is not in benchmarks.md's {source}"
