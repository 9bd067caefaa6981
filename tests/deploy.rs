//! The deployment files under `deploy/`: the Helm chart `deploy/helm/mcpgw` and the plain
//! manifests `deploy/kubernetes/` (the chart rendered with its defaults, applied with
//! kustomize).
//!
//! The checkers run in `.venv-deploy/` (installed by `scripts/install-test-deps.sh`), through
//! `tests/python/deploy_check.py`: Helm's own engine (helm-python-sdk, Helm 4 as a library)
//! renders and lints the chart offline, and kubernetes-validate checks every object against
//! the Kubernetes JSON schemas of the oldest Kubernetes the chart supports and of the newest
//! the validator ships, strictly (an unknown field is an error). The ServiceMonitor, a custom
//! resource, is checked against `tests/python/servicemonitor-v1.schema.json`, written from the
//! resource's published fields. A missing checker fails the test with what to run: nothing here
//! is skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

/// Kubernetes versions the objects are checked against: the chart's `kubeVersion` floor and the
/// newest schemas kubernetes-validate ships.
const KUBERNETES_VERSIONS: &[&str] = &["1.30", "1.37"];
/// One render, lint or validation takes about a second; a hung checker must not hang the run.
const CHECKER_DEADLINE: Duration = Duration::from_secs(120);
/// The release the plain manifests are rendered as (tests/python/deploy_check.py says the same).
const PLAIN_RELEASE: &str = "mcpgw";
const PLAIN_NAMESPACE: &str = "mcpgw";
/// Labels a Helm release carries and the plain manifests leave out.
const HELM_LABELS: &[&str] = &["helm.sh/chart", "app.kubernetes.io/managed-by"];
/// Values passed to a template whole (written with toYaml or merged), whose keys need no
/// reference of their own.
const VALUES_USED_WHOLE: &[&str] = &["gateway", "resources"];

// --- The checkers ---------------------------------------------------------------------------

fn repository_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .ancestors()
        .find(|dir| dir.join("deploy/helm/mcpgw/Chart.yaml").is_file())
        .unwrap_or_else(|| {
            panic!(
                "no ancestor of {} holds deploy/helm/mcpgw/Chart.yaml",
                manifest_dir.display()
            )
        })
        .to_path_buf()
}

fn chart_dir() -> PathBuf {
    repository_root().join("deploy/helm/mcpgw")
}

fn plain_dir() -> PathBuf {
    repository_root().join("deploy/kubernetes")
}

fn deploy_python() -> PathBuf {
    let python = repository_root().join(".venv-deploy/bin/python");
    assert!(
        python.is_file(),
        "the deployment checkers are missing ({} does not exist): run \
         scripts/install-test-deps.sh (scripts/test.sh runs it first)",
        python.display()
    );
    python
}

/// Runs `deploy_check.py ARGS` and returns the JSON document it printed; fails with its stderr
/// when it exits non-zero, prints no JSON, or takes longer than [`CHECKER_DEADLINE`].
#[track_caller]
fn checker(args: &[&str]) -> Value {
    let script = repository_root().join("tests/python/deploy_check.py");
    let outputs = tempfile::tempdir().expect("a temporary directory");
    let stdout_path = outputs.path().join("stdout");
    let stderr_path = outputs.path().join("stderr");
    let mut child = Command::new(deploy_python())
        .arg(&script)
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).expect("stdout file"))
        .stderr(std::fs::File::create(&stderr_path).expect("stderr file"))
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {}: {error}", script.display()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("the checker can be waited for") {
            break status;
        }
        if started.elapsed() > CHECKER_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("deploy_check.py {args:?} did not finish within {CHECKER_DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let read = |path: &Path| {
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|mut file| file.read_to_string(&mut text))
            .expect("the checker's output is readable");
        text
    };
    let (stdout, stderr) = (read(&stdout_path), read(&stderr_path));
    assert!(
        status.success(),
        "deploy_check.py {args:?} failed ({status}):\n{stderr}\n{stdout}"
    );
    serde_json::from_str(&stdout).unwrap_or_else(|error| {
        panic!("deploy_check.py {args:?} printed no JSON ({error}):\n{stdout}\n{stderr}")
    })
}

/// What Helm made of the chart with some values.
struct Render {
    /// Template path (`templates/deployment.yaml`) to its text and its objects.
    manifests: BTreeMap<String, (String, Vec<Value>)>,
    notes: String,
}

impl Render {
    fn objects(&self) -> impl Iterator<Item = &Value> {
        self.manifests.values().flat_map(|(_, objects)| objects)
    }

    #[track_caller]
    fn object(&self, kind: &str) -> &Value {
        let found: Vec<&Value> = self.objects().filter(|o| o["kind"] == kind).collect();
        assert_eq!(
            found.len(),
            1,
            "expected one {kind} in the render, found {}",
            found.len()
        );
        found[0]
    }

    fn kinds(&self) -> BTreeSet<String> {
        self.objects()
            .map(|object| object["kind"].as_str().unwrap_or("(no kind)").to_owned())
            .collect()
    }

    /// The gateway.yaml of the ConfigMap, as text.
    fn gateway_yaml(&self) -> String {
        self.object("ConfigMap")["data"]["gateway.yaml"]
            .as_str()
            .expect("the ConfigMap holds gateway.yaml")
            .to_owned()
    }

    /// The gateway.yaml of the ConfigMap, parsed.
    fn gateway_config(&self) -> Value {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("gateway.yaml");
        std::fs::write(&path, self.gateway_yaml()).expect("gateway.yaml is written");
        let mut documents = load(&path);
        assert_eq!(
            documents.len(),
            1,
            "gateway.yaml is one document: {documents:#?}"
        );
        documents.remove(0)
    }
}

/// Renders the chart as release `mcpgw` in namespace `mcpgw`: the render, or Helm's refusal.
fn try_render(values: &Value) -> Result<Render, String> {
    let values = values.to_string();
    let output = checker(&[
        "render",
        "--values-json",
        &values,
        "--release",
        PLAIN_RELEASE,
        "--namespace",
        PLAIN_NAMESPACE,
    ]);
    if let Some(error) = output.get("error") {
        return Err(error.as_str().unwrap_or_default().to_owned());
    }
    let manifests = output["manifests"]
        .as_object()
        .expect("the render lists its manifests")
        .iter()
        .map(|(name, manifest)| {
            let text = manifest["text"].as_str().unwrap_or_default().to_owned();
            let objects = manifest["objects"].as_array().cloned().unwrap_or_default();
            (name.clone(), (text, objects))
        })
        .collect();
    Ok(Render {
        manifests,
        notes: output["notes"].as_str().unwrap_or_default().to_owned(),
    })
}

#[track_caller]
fn render(values: &Value) -> Render {
    try_render(values).unwrap_or_else(|error| panic!("the chart did not render {values}: {error}"))
}

/// The values the plain manifests are rendered with: the defaults and a Secret of one's own.
fn plain_values() -> Value {
    json!({"secrets": {"existingSecret": "mcpgw"}})
}

/// Every option the chart has, turned on (or away from its default).
fn every_option_values() -> Value {
    json!({
        "replicaCount": 5,
        "image": {"repository": "registry.example.com/mcpgw", "tag": "1.2.3", "pullPolicy": "Always"},
        "imagePullSecrets": [{"name": "registry-login"}],
        "fullnameOverride": "gateway",
        "serviceAccount": {"create": true, "name": "gateway-runner", "annotations": {"team": "platform"}},
        "podAnnotations": {"example.com/owner": "platform"},
        "podLabels": {"tier": "edge"},
        "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1},
        "spread": {"nodes": "", "zones": "DoNotSchedule"},
        "nodeSelector": {"kubernetes.io/arch": "amd64"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "mcp", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [
                {"key": "pool", "operator": "In", "values": ["mcp"]}]}}]}},
        "priorityClassName": "important",
        "service": {"type": "LoadBalancer", "port": 8443, "annotations": {"example.com/lb": "internal"}},
        "podDisruptionBudget": {"enabled": true, "maxUnavailable": null, "minAvailable": 2},
        "ingress": {"enabled": true, "className": "nginx", "annotations": {"example.com/ingress": "yes"},
                    "hosts": ["mcp.example.com", "mcp.internal.example.com"], "tlsSecretName": "mcp-tls"},
        "serviceMonitor": {"enabled": true, "interval": "15s", "scrapeTimeout": "5s",
                           "labels": {"release": "prometheus"}},
        "logFilter": "debug,rmcp=info",
        "httpWorkers": 4,
        "coreThreads": 4,
        "extraEnv": [{"name": "GITHUB_TOKEN",
                      "valueFrom": {"secretKeyRef": {"name": "upstream-tokens", "key": "github"}}}],
        "store": {"url": "postgresql://gateway@pg.example.com:5432/gateway?sslmode=require",
                  "maxConnections": 4},
        "redis": {"enabled": true, "onUnavailable": "open"},
        "allowedHosts": ["gw.example.com"],
        "gateway": {
            "auth": {"enabled": true, "trusted_proxies": ["10.0.0.0/8"]},
            "rate_limit": {"rps": 50, "burst": 100},
            "tool_timeout_s": 120,
            "cluster": {"heartbeat_interval_s": 5, "lease_s": 20},
            "mcp_servers": {"time": {"mode": "subprocess", "command": ["uvx", "mcp-server-time"]}}
        },
        "secrets": {
            "existingSecret": "",
            "postgresPassword": "pg-password",
            "redisUrl": "redis://:redis-password@redis.example.com:6379/0",
            "sessionKey": "0123456789abcdef0123456789abcdef0123456789"
        }
    })
}

/// The smallest set-up: no Redis, no budget, no spread, an existing service account.
fn minimal_values() -> Value {
    json!({
        "replicaCount": 1,
        "serviceAccount": {"create": false, "name": ""},
        "podDisruptionBudget": {"enabled": false},
        "spread": {"nodes": "", "zones": ""},
        "redis": {"enabled": false},
        "secrets": {"existingSecret": "gateway-secrets"}
    })
}

/// Writes each manifest of `render` into `dir` and checks them all against the schemas of
/// every version in [`KUBERNETES_VERSIONS`]; returns the problems, one line each.
fn schema_problems_of_render(render: &Render, dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for (name, (text, objects)) in &render.manifests {
        if objects.is_empty() {
            continue;
        }
        let path = dir.join(name.replace('/', "__"));
        std::fs::write(&path, text).expect("the rendered manifest is written");
        files.push(path);
    }
    schema_problems(&files)
}

/// The objects of `files` that fail the schemas of any version in [`KUBERNETES_VERSIONS`],
/// with why, one line each; also fails when a file holds no object at all.
fn schema_problems(files: &[PathBuf]) -> Vec<String> {
    let mut problems = Vec::new();
    for version in KUBERNETES_VERSIONS {
        let mut args = vec!["validate", "--kubernetes-version", version];
        let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        args.extend(names.iter().map(String::as_str));
        let results = checker(&args);
        let results = results.as_array().expect("validate prints a list");
        for file in &names {
            if !results.iter().any(|result| result["file"] == file.as_str()) {
                problems.push(format!("{file}: no object in it"));
            }
        }
        for result in results {
            if let Some(error) = result["error"].as_str() {
                problems.push(format!(
                    "Kubernetes {version}: {} {} ({}): {error}",
                    result["kind"], result["name"], result["file"]
                ));
            }
        }
    }
    problems
}

/// The plain manifests: every YAML file of deploy/kubernetes but the kustomization.
fn plain_manifest_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(plain_dir())
        .expect("deploy/kubernetes is readable")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| {
            path.extension().is_some_and(|ext| ext == "yaml")
                && path
                    .file_name()
                    .is_some_and(|name| name != "kustomization.yaml")
        })
        .collect();
    files.sort();
    files
}

#[track_caller]
fn load(path: &Path) -> Vec<Value> {
    let name = path.display().to_string();
    let loaded = checker(&["load", &name]);
    loaded[name.as_str()]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("{name} holds no YAML documents"))
}

/// `value` without the labels only a Helm release carries, wherever a `labels` map is.
fn without_helm_labels(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, inner)| {
                    let inner = match (key.as_str(), inner) {
                        ("labels", Value::Object(labels)) => Value::Object(
                            labels
                                .iter()
                                .filter(|(label, _)| !HELM_LABELS.contains(&label.as_str()))
                                .map(|(label, v)| (label.clone(), v.clone()))
                                .collect(),
                        ),
                        _ => without_helm_labels(inner),
                    };
                    (key.clone(), inner)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_helm_labels).collect()),
        other => other.clone(),
    }
}

fn file_name(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The gateway container of a Deployment.
fn gateway_container(deployment: &Value) -> &Value {
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("the Deployment has containers");
    assert_eq!(containers.len(), 1, "one container: {containers:#?}");
    &containers[0]
}

fn env_entry<'a>(container: &'a Value, name: &str) -> Option<&'a Value> {
    container["env"]
        .as_array()?
        .iter()
        .find(|entry| entry["name"] == name)
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

// --- The plain manifests --------------------------------------------------------------------

#[test]
fn the_plain_manifests_pass_the_kubernetes_schemas() {
    let files = plain_manifest_files();
    let kinds: BTreeSet<String> = files
        .iter()
        .flat_map(|file| load(file))
        .map(|object| object["kind"].as_str().unwrap_or("(no kind)").to_owned())
        .collect();
    assert_eq!(
        kinds,
        [
            "ConfigMap",
            "Deployment",
            "PodDisruptionBudget",
            "Service",
            "ServiceAccount"
        ]
        .map(String::from)
        .into(),
        "the plain manifests hold exactly these kinds (the Secret is the operator's)"
    );
    let problems = schema_problems(&files);
    assert!(
        problems.is_empty(),
        "plain manifests that fail the Kubernetes schemas:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_schema_check_refuses_broken_objects() {
    // Bad input: a Deployment whose replicas is text, a Service with a misspelt field, a
    // ServiceMonitor with a numeric port, an interval in words and an unknown metadata field,
    // an object of a kind no schema knows, and a document that is not an object at all. Each
    // must be reported, or the checks above would pass anything.
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.yaml");
    std::fs::write(
        &broken,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: three\n  \
         selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec:\n      \
         containers: [{name: c, image: i}]\n\
         ---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec:\n  prots: [{port: 80}]\n\
         ---\napiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: m, labelz: {}}\n\
         spec:\n  selector: {matchLabels: {a: b}}\n  endpoints: [{port: 8000, interval: 30 seconds}]\n\
         ---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n\
         ---\n- just\n- a list\n",
    )
    .unwrap();
    let results = checker(&[
        "validate",
        "--kubernetes-version",
        "1.37",
        &broken.display().to_string(),
    ]);
    let errors: Vec<String> = results
        .as_array()
        .expect("a list of results")
        .iter()
        .map(|result| result["error"].as_str().unwrap_or("(valid)").to_owned())
        .collect();
    assert_eq!(errors.len(), 5, "{errors:#?}");
    let expectations = [
        "spec.replicas: 'three' is not of type 'integer'",
        "'prots' was unexpected",
        "spec.endpoints.0.port: 8000 is not of type 'string'",
        "no schema to check it against",
        "not a Kubernetes object",
    ];
    for (error, expected) in errors.iter().zip(expectations) {
        assert!(
            error.contains(expected),
            "expected {expected:?} in {error:?}"
        );
    }
    assert!(
        errors[2].contains("'labelz' was unexpected"),
        "{}",
        errors[2]
    );
    assert!(
        errors[2].contains("interval: '30 seconds' does not match"),
        "{}",
        errors[2]
    );
}

#[test]
fn the_kustomization_lists_every_plain_manifest() {
    let kustomization = load(&plain_dir().join("kustomization.yaml"));
    assert_eq!(kustomization.len(), 1, "{kustomization:#?}");
    let kustomization = &kustomization[0];
    assert_eq!(kustomization["kind"], "Kustomization");
    assert_eq!(kustomization["namespace"], PLAIN_NAMESPACE);
    let listed: BTreeSet<String> = strings(&kustomization["resources"]).into_iter().collect();
    let present: BTreeSet<String> = plain_manifest_files()
        .iter()
        .map(|path| file_name(&path.display().to_string()))
        .collect();
    assert_eq!(
        listed, present,
        "kustomization.yaml must list exactly the manifests of deploy/kubernetes"
    );
}

#[test]
fn the_plain_manifests_are_the_chart_rendered_with_its_defaults() {
    let rendered = render(&plain_values());
    let rendered: BTreeMap<String, Vec<Value>> = rendered
        .manifests
        .iter()
        .filter(|(_, (_, objects))| !objects.is_empty())
        .map(|(name, (_, objects))| {
            (
                file_name(name),
                objects.iter().map(without_helm_labels).collect(),
            )
        })
        .collect();
    let plain: BTreeMap<String, Vec<Value>> = plain_manifest_files()
        .iter()
        .map(|path| (file_name(&path.display().to_string()), load(path)))
        .collect();
    let regenerate = "change the chart, then run `.venv-deploy/bin/python \
                      tests/python/deploy_check.py write-plain`";
    assert_eq!(
        rendered.keys().collect::<Vec<_>>(),
        plain.keys().collect::<Vec<_>>(),
        "deploy/kubernetes holds other files than the chart renders: {regenerate}"
    );
    for (name, objects) in &rendered {
        assert_eq!(
            &plain[name], objects,
            "deploy/kubernetes/{name} differs from the chart's render: {regenerate}"
        );
    }
}

// --- The chart ------------------------------------------------------------------------------

#[test]
fn the_chart_lints_clean() {
    let values = plain_values().to_string();
    let report = checker(&["lint", "--values-json", &values]);
    assert_eq!(report["total_charts_linted"], 1, "{report:#}");
    assert_eq!(report["errors"], json!([]), "{report:#}");
    // Severity 1 is information (such as "icon is recommended"); 2 and up are warnings and
    // errors.
    let findings: Vec<&Value> = report["messages"]
        .as_array()
        .expect("lint lists its messages")
        .iter()
        .filter(|message| message["severity"].as_u64().unwrap_or(3) >= 2)
        .collect();
    assert!(findings.is_empty(), "helm lint found: {findings:#?}");
}

#[test]
fn every_option_renders_objects_that_pass_the_schemas() {
    let dir = tempfile::tempdir().unwrap();
    for (label, values, kinds) in [
        (
            "every option",
            every_option_values(),
            &[
                "ConfigMap",
                "Deployment",
                "Ingress",
                "PodDisruptionBudget",
                "Secret",
                "Service",
                "ServiceAccount",
                "ServiceMonitor",
            ][..],
        ),
        (
            "the smallest set-up",
            minimal_values(),
            &["ConfigMap", "Deployment", "Service"][..],
        ),
    ] {
        let rendered = render(&values);
        assert_eq!(
            rendered.kinds(),
            kinds.iter().map(|kind| kind.to_string()).collect(),
            "{label}"
        );
        let case_dir = dir.path().join(label.replace(' ', "-"));
        std::fs::create_dir(&case_dir).unwrap();
        let problems = schema_problems_of_render(&rendered, &case_dir);
        assert!(
            problems.is_empty(),
            "{label}: rendered objects that fail the schemas:\n{}",
            problems.join("\n")
        );
    }
}

#[test]
fn every_option_reaches_the_objects_it_names() {
    let rendered = render(&every_option_values());
    let deployment = rendered.object("Deployment");
    let pod = &deployment["spec"]["template"];
    let container = gateway_container(deployment);
    assert_eq!(deployment["metadata"]["name"], "gateway");
    assert_eq!(deployment["spec"]["replicas"], 5);
    assert_eq!(container["image"], "registry.example.com/mcpgw:1.2.3");
    assert_eq!(container["imagePullPolicy"], "Always");
    assert_eq!(
        pod["spec"]["imagePullSecrets"],
        json!([{"name": "registry-login"}])
    );
    assert_eq!(pod["spec"]["serviceAccountName"], "gateway-runner");
    assert_eq!(pod["spec"]["priorityClassName"], "important");
    assert_eq!(pod["metadata"]["labels"]["tier"], "edge");
    assert_eq!(
        pod["metadata"]["annotations"]["example.com/owner"],
        "platform"
    );
    assert!(pod["metadata"]["annotations"]["checksum/secret"].is_string());
    assert_eq!(pod["spec"]["nodeSelector"]["kubernetes.io/arch"], "amd64");
    assert_eq!(pod["spec"]["tolerations"][0]["key"], "dedicated");
    assert!(pod["spec"]["affinity"]["nodeAffinity"].is_object());
    let spread = pod["spec"]["topologySpreadConstraints"].as_array().unwrap();
    assert_eq!(spread.len(), 1, "only the zone constraint: {spread:#?}");
    assert_eq!(spread[0]["topologyKey"], "topology.kubernetes.io/zone");
    assert_eq!(spread[0]["whenUnsatisfiable"], "DoNotSchedule");
    assert_eq!(
        deployment["spec"]["strategy"]["rollingUpdate"],
        json!({"maxSurge": "25%", "maxUnavailable": 1})
    );
    assert_eq!(
        env_entry(container, "MCP_LOG").unwrap()["value"],
        "debug,rmcp=info"
    );
    assert_eq!(
        env_entry(container, "MCP_HTTP_WORKERS").unwrap()["value"],
        "4"
    );
    assert_eq!(
        env_entry(container, "MCP_CORE_THREADS").unwrap()["value"],
        "4"
    );
    assert_eq!(
        env_entry(container, "GITHUB_TOKEN").unwrap()["valueFrom"]["secretKeyRef"]["name"],
        "upstream-tokens"
    );

    let account = rendered.object("ServiceAccount");
    assert_eq!(account["metadata"]["name"], "gateway-runner");
    assert_eq!(account["metadata"]["annotations"]["team"], "platform");

    let service = rendered.object("Service");
    assert_eq!(service["spec"]["type"], "LoadBalancer");
    assert_eq!(service["spec"]["ports"][0]["port"], 8443);
    assert_eq!(
        service["metadata"]["annotations"]["example.com/lb"],
        "internal"
    );

    let budget = rendered.object("PodDisruptionBudget");
    assert_eq!(budget["spec"]["minAvailable"], 2);
    assert!(budget["spec"].get("maxUnavailable").is_none(), "{budget:#}");

    let ingress = rendered.object("Ingress");
    assert_eq!(ingress["spec"]["ingressClassName"], "nginx");
    assert_eq!(
        ingress["metadata"]["annotations"]["example.com/ingress"],
        "yes"
    );
    assert_eq!(
        ingress["spec"]["tls"],
        json!([{"secretName": "mcp-tls", "hosts": ["mcp.example.com", "mcp.internal.example.com"]}])
    );
    let rules = ingress["spec"]["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 2);
    for rule in rules {
        let backend = &rule["http"]["paths"][0]["backend"]["service"];
        assert_eq!(backend["name"], "gateway");
        assert_eq!(backend["port"]["name"], "http");
    }

    let monitor = rendered.object("ServiceMonitor");
    assert_eq!(monitor["metadata"]["labels"]["release"], "prometheus");
    assert_eq!(
        monitor["spec"]["endpoints"],
        json!([{"port": "http", "path": "/metrics", "interval": "15s", "scrapeTimeout": "5s"}])
    );
    assert_eq!(
        monitor["spec"]["selector"]["matchLabels"], service["spec"]["selector"],
        "the ServiceMonitor selects the gateway's Service"
    );

    // The Secret the chart makes holds the given values under the keys the pod reads, and no
    // others: the one session key is the fleet's only shared secret.
    let secret = rendered.object("Secret");
    let keys: BTreeSet<&str> = secret["data"]
        .as_object()
        .expect("the Secret has data")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        BTreeSet::from(["postgres-password", "redis-url", "session-key"])
    );
    let decoded = |key: &str| {
        let encoded = secret["data"][key]
            .as_str()
            .unwrap_or_else(|| panic!("no {key}"));
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .unwrap(),
        )
        .unwrap()
    };
    assert_eq!(decoded("postgres-password"), "pg-password");
    assert_eq!(
        decoded("redis-url"),
        "redis://:redis-password@redis.example.com:6379/0"
    );
    assert_eq!(
        decoded("session-key"),
        "0123456789abcdef0123456789abcdef0123456789"
    );

    // gateway.yaml: the given sections as they are, the chart's own added.
    let gateway = rendered.gateway_config();
    assert_eq!(gateway["tool_timeout_s"], 120);
    assert_eq!(
        gateway["auth"],
        json!({"enabled": true, "trusted_proxies": ["10.0.0.0/8"]})
    );
    assert_eq!(
        gateway["rate_limit"],
        json!({"rps": 50, "burst": 100, "backend": "redis",
               "redis": {"url": "${MCPGW_REDIS_URL}", "on_unavailable": "open"}})
    );
    assert_eq!(
        gateway["cluster"],
        json!({"heartbeat_interval_s": 5, "lease_s": 20,
               "secret_file": "/run/secrets/mcpgw/session-key"})
    );
    assert_eq!(
        gateway["store"],
        json!({"url": "postgresql://gateway@pg.example.com:5432/gateway?sslmode=require",
               "password_file": "/run/secrets/mcpgw/postgres-password", "max_connections": 4})
    );
    assert_eq!(
        gateway["mcp_servers"],
        json!({"time": {"mode": "subprocess", "command": ["uvx", "mcp-server-time"]}})
    );
    assert_eq!(
        gateway["allowed_hosts"],
        json!([
            "gateway",
            "gateway.mcpgw",
            "gateway.mcpgw.svc",
            "gateway.mcpgw.svc.cluster.local",
            "mcp.example.com",
            "mcp.internal.example.com",
            "gw.example.com"
        ])
    );
    assert!(
        rendered.notes.contains("https://mcp.example.com/mcp"),
        "{}",
        rendered.notes
    );
}

#[test]
fn the_deployment_rolls_gracefully_and_runs_with_least_privilege() {
    let rendered = render(&plain_values());
    let deployment = rendered.object("Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let container = gateway_container(deployment);

    assert_eq!(deployment["spec"]["replicas"], 3);
    assert_eq!(
        deployment["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
    );

    // The command line of the gateway, listening where the probes and the Service look.
    assert_eq!(container["command"], json!(["mcpgw"]));
    assert_eq!(
        strings(&container["args"]),
        [
            "--http",
            "--host",
            "0.0.0.0",
            "--port",
            "8000",
            "--config",
            "/etc/mcpgw/gateway.yaml",
            "--data-dir",
            "/var/lib/mcpgw"
        ]
    );
    assert_eq!(
        container["ports"],
        json!([{"name": "http", "containerPort": 8000, "protocol": "TCP"}])
    );
    for (probe, path) in [
        ("startupProbe", "/health/startup"),
        ("readinessProbe", "/health/ready"),
        ("livenessProbe", "/health/live"),
    ] {
        assert_eq!(
            container[probe]["httpGet"],
            json!({"path": path, "port": "http"}),
            "{probe}"
        );
    }

    // Stopping: the preStop sleep lets the endpoints drop the pod before SIGTERM, and the grace
    // period covers the sleep plus the gateway's 30 s of draining.
    let sleep = container["lifecycle"]["preStop"]["sleep"]["seconds"]
        .as_u64()
        .expect("a preStop sleep");
    let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
    assert!(sleep >= 5, "preStop sleep of {sleep} s");
    assert!(grace > sleep + 30, "grace {grace} s, sleep {sleep} s");

    // Least privilege.
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(
        rendered.object("ServiceAccount")["automountServiceAccountToken"],
        false
    );
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_ne!(pod["securityContext"]["runAsUser"], 0);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let security = &container["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["privileged"], false);
    assert_eq!(security["capabilities"]["drop"], json!(["ALL"]));
    assert!(container["resources"]["requests"]["memory"].is_string());
    assert!(container["resources"]["limits"]["memory"].is_string());

    // Spread over nodes, each rollout's pods counted on their own.
    let spread = pod["topologySpreadConstraints"].as_array().unwrap();
    let by_node = spread
        .iter()
        .find(|c| c["topologyKey"] == "kubernetes.io/hostname")
        .expect("a spread over nodes");
    assert_eq!(
        by_node["labelSelector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    assert_eq!(by_node["matchLabelKeys"], json!(["pod-template-hash"]));

    // The Service and the budget select the gateway's pods.
    let selector = &deployment["spec"]["selector"]["matchLabels"];
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (key, value) in selector.as_object().unwrap() {
        assert_eq!(
            &pod_labels[key], value,
            "the pods carry the selector's {key}"
        );
    }
    let service = rendered.object("Service");
    assert_eq!(&service["spec"]["selector"], selector);
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "http");
    let budget = rendered.object("PodDisruptionBudget");
    assert_eq!(&budget["spec"]["selector"]["matchLabels"], selector);
    assert_eq!(budget["spec"]["maxUnavailable"], 1);
}

#[test]
fn the_configuration_names_the_files_and_variables_the_pod_provides() {
    let rendered = render(&plain_values());
    let deployment = rendered.object("Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let container = gateway_container(deployment);
    let mounts = container["volumeMounts"].as_array().unwrap();
    let volumes = pod["volumes"].as_array().unwrap();
    let mount_of = |name: &str| {
        let mount = mounts
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("no mount {name}"));
        let volume = volumes
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no volume {name}"));
        (mount["mountPath"].as_str().unwrap().to_owned(), volume)
    };

    let (config_dir, config_volume) = mount_of("config");
    assert_eq!(
        config_volume["configMap"]["name"],
        rendered.object("ConfigMap")["metadata"]["name"]
    );
    assert_eq!(
        format!("{config_dir}/gateway.yaml"),
        "/etc/mcpgw/gateway.yaml"
    );

    let (secret_dir, secret_volume) = mount_of("secrets");
    assert_eq!(secret_volume["secret"]["secretName"], "mcpgw");
    let secret_files: Vec<String> = secret_volume["secret"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| format!("{secret_dir}/{}", item["path"].as_str().unwrap()))
        .collect();
    let gateway = rendered.gateway_config();
    for file in [
        &gateway["store"]["password_file"],
        &gateway["cluster"]["secret_file"],
    ] {
        let file = file
            .as_str()
            .unwrap_or_else(|| panic!("no secret file in {gateway:#}"));
        assert!(
            secret_files.iter().any(|mounted| mounted == file),
            "gateway.yaml names {file}, the pod mounts {secret_files:?}"
        );
    }

    // The Redis URL comes from the Secret into the variable gateway.yaml expands, quoted so
    // that the expansion is escaped.
    assert_eq!(gateway["rate_limit"]["redis"]["url"], "${MCPGW_REDIS_URL}");
    assert!(
        rendered
            .gateway_yaml()
            .contains("url: \"${MCPGW_REDIS_URL}\""),
        "{}",
        rendered.gateway_yaml()
    );
    let redis = env_entry(container, "MCPGW_REDIS_URL").expect("MCPGW_REDIS_URL is set");
    assert_eq!(
        redis["valueFrom"]["secretKeyRef"],
        json!({"name": "mcpgw", "key": "redis-url"})
    );
    // The fleet's shared secret reaches the gateway only as the file cluster.secret_file names,
    // mounted from the Secret's session-key: no variable gives it too (the file would win over
    // one anyway, so a variable could only hold a second, unused copy).
    let session_key_file = gateway["cluster"]["secret_file"].as_str().unwrap();
    let session_key_item = secret_volume["secret"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| {
            let path = item["path"].as_str().unwrap();
            format!("{secret_dir}/{path}") == session_key_file
        })
        .unwrap_or_else(|| panic!("no mounted item is {session_key_file}: {secret_volume:#}"));
    assert_eq!(session_key_item["key"], "session-key");
    assert_eq!(
        secret_files,
        [
            "/run/secrets/mcpgw/postgres-password",
            "/run/secrets/mcpgw/session-key"
        ],
        "the pod mounts the Secret's files and nothing else of it"
    );
    for variable in ["MCP_CLUSTER_SECRET", "MCP_REQUEST_STATE_SECRET"] {
        assert!(
            env_entry(container, variable).is_none(),
            "{variable} is set: {container:#}"
        );
    }

    // The data directory and /tmp are writable scratch volumes.
    for (name, path) in [("data", "/var/lib/mcpgw"), ("tmp", "/tmp")] {
        let (mounted, volume) = mount_of(name);
        assert_eq!(mounted, path);
        assert!(volume["emptyDir"]["sizeLimit"].is_string(), "{volume:#}");
    }

    // The Host names the Service is reached by in the cluster are answered.
    assert_eq!(
        gateway["allowed_hosts"],
        json!([
            "mcpgw",
            "mcpgw.mcpgw",
            "mcpgw.mcpgw.svc",
            "mcpgw.mcpgw.svc.cluster.local"
        ])
    );

    // Without Redis, no variable and no Redis in the rate limits.
    let rendered = render(&minimal_values());
    let container = gateway_container(rendered.object("Deployment"));
    assert!(env_entry(container, "MCPGW_REDIS_URL").is_none());
    let gateway = rendered.gateway_config();
    assert_eq!(
        gateway["rate_limit"],
        json!({"rps": 10, "burst": 20}),
        "{gateway:#}"
    );
}

#[test]
fn bad_values_are_refused_with_a_clear_error() {
    let secrets = every_option_values()["secrets"].clone();
    let with_secrets = |mut values: Value| {
        values["secrets"] = secrets.clone();
        values
    };
    let mut short_key = secrets.clone();
    short_key["sessionKey"] = json!("too-short");
    let mut old_request_state_secret = secrets.clone();
    old_request_state_secret["requestStateSecret"] = json!("a-long-random-request-state-secret");
    let mut bad_redis = secrets.clone();
    bad_redis["redisUrl"] = json!("http://redis:6379");
    // Each case is bad input and the words the refusal must carry.
    let cases = [
        // The defaults: no Secret named and no secret given.
        (
            json!({}),
            "set secrets.existingSecret to a Secret you manage, or give secrets.postgresPassword, secrets.sessionKey, secrets.redisUrl",
        ),
        // A session key shorter than 32 characters.
        (
            json!({"secrets": short_key}),
            "secrets.sessionKey: must be 32 or more",
        ),
        // The separate request-state secret of earlier charts: the session key is the only one.
        (
            json!({"secrets": old_request_state_secret}),
            "additional properties 'requestStateSecret' not allowed",
        ),
        // A Redis URL of another scheme.
        (
            json!({"secrets": bad_redis}),
            "secrets.redisUrl: must be a redis:// or rediss:// URL",
        ),
        // A misspelt key.
        (
            json!({"replica": 3, "secrets": {"existingSecret": "s"}}),
            "additional properties 'replica' not allowed",
        ),
        // Values of the wrong type or out of range.
        (
            json!({"replicaCount": "three", "secrets": {"existingSecret": "s"}}),
            "/replicaCount",
        ),
        (
            json!({"replicaCount": 0, "secrets": {"existingSecret": "s"}}),
            "/replicaCount",
        ),
        (
            json!({"spread": {"nodes": "Sometimes"}, "secrets": {"existingSecret": "s"}}),
            "/spread/nodes",
        ),
        (
            json!({"store": {"url": "mysql://db/mcpgw"}, "secrets": {"existingSecret": "s"}}),
            "/store/url",
        ),
        (
            json!({"store": {"maxConnections": 500}, "secrets": {"existingSecret": "s"}}),
            "/store/maxConnections",
        ),
        // Both budgets at once.
        (
            json!({"podDisruptionBudget": {"minAvailable": 1}, "secrets": {"existingSecret": "s"}}),
            "set exactly one of maxUnavailable and minAvailable",
        ),
        // An Ingress without a host.
        (
            json!({"ingress": {"enabled": true}, "secrets": {"existingSecret": "s"}}),
            "ingress.hosts: name at least one host",
        ),
        // Sections of gateway.yaml that the chart writes itself.
        (
            with_secrets(json!({"gateway": {"store": {"url": "postgres://x@y/z"}}})),
            "gateway.store: the chart writes this itself",
        ),
        (
            with_secrets(json!({"gateway": {"allowed_hosts": ["x"]}})),
            "gateway.allowed_hosts: the chart writes this itself; set allowedHosts",
        ),
        (
            with_secrets(json!({"gateway": {"rate_limit": {"backend": "memory"}}})),
            "gateway.rate_limit.backend: the chart writes this itself",
        ),
        (
            with_secrets(json!({"gateway": {"cluster": {"secret_file": "/x"}}})),
            "gateway.cluster.secret_file: the chart writes this itself",
        ),
        // Authentication turned off on pods that listen on every address.
        (
            with_secrets(json!({"gateway": {"auth": {"enabled": false}}})),
            "gateway.auth.enabled: must stay true",
        ),
        // A grace period too short for the preStop sleep and the draining.
        (
            with_secrets(json!({"terminationGracePeriodSeconds": 30})),
            "terminationGracePeriodSeconds (30) must exceed",
        ),
    ];
    for (values, expected) in cases {
        match try_render(&values) {
            Ok(_) => panic!("the chart rendered {values} instead of refusing it"),
            Err(error) => assert!(
                error.contains(expected),
                "refusing {values}, Helm said {error:?}; expected it to say {expected:?}"
            ),
        }
    }
}

#[test]
fn the_session_key_is_counted_as_the_gateway_counts_it() {
    let with_session_key = |key: &str| {
        let mut values = every_option_values();
        values["secrets"]["sessionKey"] = json!(key);
        values
    };
    let thirty_one = "0123456789abcdef0123456789abcde";
    // Keys the gateway takes: 32 characters, also with the line break of a key read from a file
    // (`--set-file`), and 32 characters of two bytes each.
    for key in [
        format!("{thirty_one}f"),
        format!("{thirty_one}f\n"),
        "é".repeat(32),
    ] {
        let rendered = try_render(&with_session_key(&key))
            .unwrap_or_else(|error| panic!("the chart refused the session key {key:?}: {error}"));
        let encoded = rendered.object("Secret")["data"]["session-key"]
            .as_str()
            .expect("the Secret holds the session key");
        assert_eq!(
            base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .unwrap(),
            key.as_bytes()
        );
    }
    // Keys the gateway refuses, which are 32 bytes or more: 31 characters and line breaks,
    // and 31 characters of two bytes each.
    for (key, characters) in [(format!("{thirty_one}\n\r\n"), 31), ("é".repeat(31), 31)] {
        match try_render(&with_session_key(&key)) {
            Ok(_) => panic!("the chart took the session key {key:?}"),
            Err(error) => assert!(
                error.contains(&format!(
                    "secrets.sessionKey: must be 32 or more random characters, got {characters}"
                )),
                "refusing {key:?}, Helm said {error:?}"
            ),
        }
    }
}

// --- Values and templates -------------------------------------------------------------------

/// The key paths of `values` (dotted), down to the leaves: scalars, lists and empty maps.
fn value_paths(values: &Value, prefix: &str, paths: &mut Vec<String>) {
    match values {
        Value::Object(map) if !map.is_empty() => {
            for (key, inner) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                paths.push(path.clone());
                value_paths(inner, &path, paths);
            }
        }
        _ => {}
    }
}

/// The `.Values.a.b` references of a template's text, as `a.b`.
fn value_references(text: &str) -> BTreeSet<String> {
    let marker = ".Values.";
    text.match_indices(marker)
        .map(|(start, _)| {
            text[start + marker.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
                .collect::<String>()
                .trim_end_matches('.')
                .to_owned()
        })
        .filter(|reference| !reference.is_empty())
        .collect()
}

/// What is wrong between `values` and `templates`: a value no template reads (neither itself
/// nor a map above it passed whole, see [`VALUES_USED_WHOLE`]), or a template reference to a
/// value that values.yaml does not declare (Helm would render it as nothing).
fn value_usage_problems(values: &Value, templates: &[(String, String)]) -> Vec<String> {
    let mut declared = Vec::new();
    value_paths(values, "", &mut declared);
    let declared_set: BTreeSet<&str> = declared.iter().map(String::as_str).collect();
    let mut referenced: BTreeMap<String, String> = BTreeMap::new();
    for (name, text) in templates {
        for reference in value_references(text) {
            referenced.entry(reference).or_insert_with(|| name.clone());
        }
    }
    let mut problems = Vec::new();
    for (reference, template) in &referenced {
        if !declared_set.contains(reference.as_str()) {
            problems.push(format!(
                "{template} reads .Values.{reference}, which values.yaml does not declare"
            ));
        }
    }
    for path in &declared {
        let is_leaf = !declared
            .iter()
            .any(|other| other.starts_with(&format!("{path}.")));
        if !is_leaf {
            continue;
        }
        let used = referenced.contains_key(path)
            || VALUES_USED_WHOLE.iter().any(|whole| {
                path.starts_with(&format!("{whole}.")) && referenced.contains_key(*whole)
            });
        if !used {
            problems.push(format!(
                "values.yaml declares {path}, which no template reads"
            ));
        }
    }
    problems
}

fn chart_templates() -> Vec<(String, String)> {
    let dir = chart_dir().join("templates");
    let mut templates: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("the chart's templates are readable")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.is_file())
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("a template is text");
            (file_name(&path.display().to_string()), text)
        })
        .collect();
    templates.sort();
    templates
}

#[test]
fn every_value_is_read_by_a_template_and_every_read_value_is_declared() {
    let values = load(&chart_dir().join("values.yaml"));
    assert_eq!(values.len(), 1, "values.yaml is one document");
    let templates = chart_templates();
    assert!(
        templates.iter().any(|(name, _)| name == "deployment.yaml"),
        "{templates:?}"
    );
    let problems = value_usage_problems(&values[0], &templates);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_value_usage_check_finds_unread_and_undeclared_values() {
    // Bad input: a value no template reads (`unused.key`), a reference to a value that is not
    // declared (`.Values.servce.port`, misspelt), and a key below a map that is passed whole
    // (`resources.limits.cpu`, which counts as read).
    let values = json!({
        "service": {"port": 8000},
        "unused": {"key": 1},
        "resources": {"limits": {"cpu": "1"}}
    });
    let templates = vec![(
        "t.yaml".to_owned(),
        "port: {{ .Values.service.port }} {{ .Values.servce.port }}\n\
         resources: {{ toYaml .Values.resources }}"
            .to_owned(),
    )];
    let problems = value_usage_problems(&values, &templates);
    assert_eq!(
        problems,
        [
            "t.yaml reads .Values.servce.port, which values.yaml does not declare",
            "values.yaml declares unused.key, which no template reads",
        ],
        "{problems:#?}"
    );
}

// --- The gateway's own check of gateway.yaml ------------------------------------------------

#[test]
fn the_configuration_of_the_chart_passes_config_check() {
    // The Redis URL carries characters that need escaping inside the quoted expansion (`#`,
    // `:` and `@`), as a password may.
    let redis_url = "redis://:p#ss:w@rd@redis.example.com:6379/0";
    let dir = tempfile::tempdir().unwrap();
    let mut refusals = Vec::new();
    for (label, values) in [
        ("defaults", plain_values()),
        ("every option", every_option_values()),
        ("the smallest set-up", minimal_values()),
    ] {
        let path = dir.path().join(format!("{}.yaml", label.replace(' ', "-")));
        let gateway = render(&values).gateway_yaml();
        std::fs::write(&path, &gateway).unwrap();
        let output = Command::new(env!("CARGO_BIN_EXE_mcpgw"))
            .args(["config", "check", "--config"])
            .arg(&path)
            .env("MCPGW_REDIS_URL", redis_url)
            .env_remove("MCP_CONFIG")
            .stdin(Stdio::null())
            .output()
            .expect("the gateway binary runs");
        if !output.status.success() {
            refusals.push(format!(
                "--- {label}: {}\n{gateway}",
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
    }
    assert!(
        refusals.is_empty(),
        "`mcpgw config check` refuses the gateway.yaml the chart writes:\n{}",
        refusals.join("\n")
    );
}
