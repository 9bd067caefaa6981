"""The tools behind tests/deploy.rs, run with the Python of .venv-deploy/ (installed by
scripts/install-test-deps.sh from tests/python/deploy-requirements.txt):

  render --values-json JSON        renders the Helm chart deploy/helm/mcpgw offline with Helm's
                                   own engine (helm-python-sdk) and prints
                                   {"manifests": {"templates/x.yaml": {"text", "objects"}},
                                   "notes": TEXT}, or {"error": MESSAGE} when Helm refuses the
                                   values (a values.schema.json violation, a `fail` of a template)
  lint --values-json JSON          prints Helm's lint report of the chart (strict)
  validate --kubernetes-version V FILE...
                                   checks every object of the YAML files against the Kubernetes
                                   JSON schemas of kubernetes-validate (strict: unknown fields
                                   are errors), and ServiceMonitor objects against
                                   servicemonitor-v1.schema.json; prints one result per object
  load FILE...                     prints the YAML documents of each file as JSON
  render-plain                     prints the plain manifests deploy/kubernetes/ should hold
  write-plain                      writes them there

Every command prints one JSON document on stdout. A problem of the input (a file that does not
parse, a chart Helm cannot load) exits 1 with the reason on stderr.
"""

import argparse
import json
import os
import re
import sys
from pathlib import Path

import helm_python
import jsonschema
import kubernetes_validate
import yaml
from kubernetes_validate import utils as validate_utils
from referencing import Registry, Resource

REPOSITORY = Path(__file__).resolve().parents[2]
CHART = REPOSITORY / "deploy" / "helm" / "mcpgw"
PLAIN_DIR = REPOSITORY / "deploy" / "kubernetes"
SERVICE_MONITOR_SCHEMA = Path(__file__).resolve().parent / "servicemonitor-v1.schema.json"

# The plain manifests are the chart rendered with these values: every value at its default but
# the Secret, which the operator makes (a default render refuses to go on without one).
PLAIN_RELEASE = "mcpgw"
PLAIN_NAMESPACE = "mcpgw"
PLAIN_VALUES = {"secrets": {"existingSecret": "mcpgw"}}
# Labels that say Helm manages an object: true of a release, false of the plain manifests.
HELM_LABEL_LINE = re.compile(
    r"^\s*(helm\.sh/chart: .*|app\.kubernetes\.io/managed-by: Helm)\s*$"
)
PLAIN_HEADER = """\
# Rendered from the Helm chart deploy/helm/mcpgw (release {release}, namespace {namespace},
# secrets.existingSecret {secret}, every other value at its default) without Helm's own labels,
# by `.venv-deploy/bin/python tests/python/deploy_check.py write-plain`. Change the chart and
# run that again instead of editing this file: tests/deploy.rs checks that the two agree.
"""


class InputError(Exception):
    """A problem of the input, reported on stderr with exit status 1."""


def load_documents(path: Path) -> list:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise InputError(f"cannot read {path}: {error}") from error
    return parse_documents(text, str(path))


def parse_documents(text: str, source: str) -> list:
    try:
        return [document for document in yaml.safe_load_all(text) if document is not None]
    except yaml.YAMLError as error:
        raise InputError(f"{source} is not valid YAML: {error}") from error


def render(values: dict, release: str, namespace: str) -> dict:
    """Helm's render of the chart: {"manifests": ...} or {"error": ...}."""
    try:
        with helm_python.Chart.load(str(CHART)) as chart:
            rendered = chart.render(values, name=release, namespace=namespace, is_install=True)
    except (helm_python.HelmValuesError, helm_python.HelmRenderError) as error:
        return {"error": str(error)}
    prefix = f"{CHART.name}/"
    manifests = {}
    notes = ""
    for name, text in sorted(rendered.items()):
        name = name[len(prefix) :] if name.startswith(prefix) else name
        if name.endswith("NOTES.txt"):
            notes = text
            continue
        manifests[name] = {"text": text, "objects": parse_documents(text, name)}
    return {"manifests": manifests, "notes": notes}


def plain_manifests() -> dict:
    """{file name: text} of the plain manifests: the chart's render with PLAIN_VALUES, each
    template that rendered an object as one file, without Helm's labels."""
    result = render(PLAIN_VALUES, PLAIN_RELEASE, PLAIN_NAMESPACE)
    if "error" in result:
        raise InputError(f"the chart does not render the plain manifests: {result['error']}")
    header = PLAIN_HEADER.format(
        release=PLAIN_RELEASE,
        namespace=PLAIN_NAMESPACE,
        secret=PLAIN_VALUES["secrets"]["existingSecret"],
    )
    files = {}
    for name, manifest in result["manifests"].items():
        if not manifest["objects"]:
            continue
        lines = [
            line for line in manifest["text"].splitlines() if not HELM_LABEL_LINE.match(line)
        ]
        body = "\n".join(lines).strip("\n")
        files[os.path.basename(name)] = f"{header}{body}\n"
    return files


def schema_directory(version: str) -> str:
    """The strict schema folder kubernetes-validate uses for `version` (the newest it ships that
    is not newer)."""
    wanted = validate_utils.major_minor(version.lstrip("v"))
    known = [
        known
        for known in validate_utils.all_versions()
        if tuple(map(int, validate_utils.major_minor(known).split(".")))
        <= tuple(map(int, wanted.split(".")))
    ]
    if not known:
        raise InputError(f"kubernetes-validate ships no schemas for Kubernetes {version}")
    return f"kubernetes-json-schema/v{known[-1]}-local-strict"


def service_monitor_validator(version: str) -> jsonschema.protocols.Validator:
    definitions = validate_utils.schema_contents(
        f"{schema_directory(version)}/_definitions.json", version
    )
    registry = Resource.from_contents(definitions) @ Registry()
    schema = json.loads(SERVICE_MONITOR_SCHEMA.read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema, registry=registry)


def describe(error: jsonschema.ValidationError) -> str:
    path = ".".join(str(part) for part in error.absolute_path) or "(the object)"
    return f"{path}: {error.message}"


def validate_object(document, version: str, monitor_validator) -> str | None:
    """None when the object is valid, else what is wrong with it."""
    if not isinstance(document, dict) or "kind" not in document or "apiVersion" not in document:
        return "not a Kubernetes object: a mapping with apiVersion and kind is expected"
    if document["kind"] == "ServiceMonitor":
        errors = sorted(monitor_validator.iter_errors(document), key=lambda e: list(e.path))
        return "; ".join(describe(error) for error in errors) or None
    try:
        kubernetes_validate.validate(document, version, strict=True)
    except kubernetes_validate.ValidationError as error:
        return describe(error)
    except validate_utils.SchemaNotFoundError as error:
        return f"no schema to check it against: {error.message}"
    return None


def validate(files: list, version: str) -> list:
    monitor_validator = service_monitor_validator(version)
    results = []
    for file in files:
        for index, document in enumerate(load_documents(Path(file))):
            metadata = document.get("metadata") if isinstance(document, dict) else None
            results.append(
                {
                    "file": file,
                    "index": index,
                    "kind": document.get("kind") if isinstance(document, dict) else None,
                    "name": metadata.get("name") if isinstance(metadata, dict) else None,
                    "error": validate_object(document, version, monitor_validator),
                }
            )
    return results


def values_argument(text: str) -> dict:
    try:
        values = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"--values-json is not JSON: {error}") from error
    if not isinstance(values, dict):
        raise InputError("--values-json must be a JSON object")
    return values


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    render_command = commands.add_parser("render")
    render_command.add_argument("--values-json", default="{}")
    render_command.add_argument("--release", default=PLAIN_RELEASE)
    render_command.add_argument("--namespace", default=PLAIN_NAMESPACE)
    lint_command = commands.add_parser("lint")
    lint_command.add_argument("--values-json", default="{}")
    validate_command = commands.add_parser("validate")
    validate_command.add_argument("--kubernetes-version", required=True)
    validate_command.add_argument("files", nargs="+")
    load_command = commands.add_parser("load")
    load_command.add_argument("files", nargs="+")
    commands.add_parser("render-plain")
    commands.add_parser("write-plain")
    arguments = parser.parse_args()

    try:
        if arguments.command == "render":
            output = render(
                values_argument(arguments.values_json), arguments.release, arguments.namespace
            )
        elif arguments.command == "lint":
            output = helm_python.lint(
                str(CHART), values_argument(arguments.values_json), strict=True
            )
        elif arguments.command == "validate":
            output = validate(arguments.files, arguments.kubernetes_version)
        elif arguments.command == "load":
            output = {file: load_documents(Path(file)) for file in arguments.files}
        elif arguments.command == "render-plain":
            output = plain_manifests()
        else:
            files = plain_manifests()
            for name, text in files.items():
                (PLAIN_DIR / name).write_text(text, encoding="utf-8")
            output = sorted(files)
    except InputError as error:
        print(error, file=sys.stderr)
        return 1
    print(json.dumps(output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
