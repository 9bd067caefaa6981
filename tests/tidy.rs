//! The workspace's architecture rules, checked by `cargo test` so that a forbidden dependency
//! fails the build instead of waiting for a reviewer to notice it.
//!
//! The rules (docs/ARCHITECTURE.md describes the layers):
//! - domain crates do no I/O: no normal dependency on a runtime, socket, process, file or
//!   database crate, no tokio feature beyond the synchronisation primitives, and among the
//!   workspace's own crates only other domain crates; and their own sources (tests aside) name
//!   no files, processes, sockets, environment, threads or system clock (`DOMAIN_IO_NAMES`);
//! - the crate graph of docs/ARCHITECTURE.md draws every crate under `crates/` and the binary;
//! - its port table lists every `pub trait` of the domain crates with its contract suite (a
//!   macro of the testkit that some adapter's tests run), or the port is on
//!   `PORTS_WITHOUT_A_SUITE`, the written-down debt that only shrinks;
//! - adapters never depend on each other; only the HTTP adapter may drive the application crate;
//! - the application crate depends on no adapter;
//! - library crates never depend on the test kit except as a dev-dependency;
//! - the composition crate (`mcpgw-server`) wires the domain, the application and the
//!   adapters, and only the binary, the bench and examples build on it;
//! - every package is in the layer table below, lives in the folder of its layer, shares the
//!   workspace lints, and starts each library and binary with a `//!` paragraph;
//! - every library crate can be published: it is not `publish = false`, it has a description,
//!   a license and a readme, each of its path dependencies names a version, and a
//!   dev-dependency on a crate that depends on it has none (cargo then leaves it out of the
//!   published manifest, so neither crate waits for the other); the packages outside `crates/`
//!   (the binary, the benchmark harness, the examples) are `publish = false`;
//! - the repository stands on its own: no tracked text file (code, comments, docs, scripts,
//!   manifests, tests) cites a document outside it, such as an outside specification or a guide
//!   kept next to the repository. A comment states the fact itself, in the project's words, and
//!   names a file under `docs/` when one says it. `OUTSIDE_CITATIONS` lists the phrases refused.
//!
//! The checks read `cargo metadata --no-deps`, which lists each package's declared dependencies:
//! the declaration is what this test can pin to one crate. (The resolved graph unifies features
//! over the whole workspace, so it would blame a domain crate for tokio features that only an
//! adapter enabled.) Transitive edges stay honest because each crate on the way is checked too,
//! and `deny.toml`'s `wrappers` lists keep I/O crates out of the third-party graph of others.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const DOMAIN_CRATES: &[&str] = &[
    "mcpgw-core",
    "mcpgw-groups",
    "mcpgw-discovery",
    "mcpgw-authz",
    "mcpgw-config",
];
const APPLICATION_CRATES: &[&str] = &["mcpgw-gateway"];
const ADAPTER_CRATES: &[&str] = &[
    "mcpgw-http-actix",
    "mcpgw-mcp-rmcp",
    "mcpgw-runner-process",
    "mcpgw-runner-docker",
    "mcpgw-discovery-files",
    "mcpgw-config-file",
    "mcpgw-store-sqlite",
    "mcpgw-store-postgres",
    "mcpgw-oidc",
    "mcpgw-policy-opa",
    "mcpgw-audit",
    "mcpgw-otel",
    "mcpgw-ratelimit",
    "mcpgw-ratelimit-redis",
];
const TEST_SUPPORT_CRATES: &[&str] = &["mcpgw-testkit", "mcpgw-fixtures"];
/// The composition root as a library: the default adapters wired into a gateway, which the
/// binary, the bench and embedders build on.
const COMPOSITION_CRATES: &[&str] = &["mcpgw-server"];
const BINARY_PACKAGE: &str = "mcpgw";
const BENCH_PACKAGE: &str = "mcpgw-bench";
const EXAMPLE_PACKAGE_PREFIX: &str = "mcpgw-example-";

/// Adapters that drive the application's use cases (the HTTP API does); every other adapter is
/// driven by the application, so depending on it would be a cycle in the design.
const ADAPTERS_ALLOWED_TO_USE_THE_APPLICATION: &[&str] = &["mcpgw-http-actix"];

/// Crates that exist to do I/O: a domain crate that names one does I/O.
const IO_CRATES: &[&str] = &[
    "actix-web",
    "actix-ws",
    "actix-rt",
    "rusqlite",
    "reqwest",
    "hyper",
    "rmcp",
    "bollard",
    "openidconnect",
    "jsonwebtoken",
    "metrics-exporter-prometheus",
    "tokio-rusqlite",
    "libc",
    "nix",
    "mio",
    "socket2",
];

/// Features that turn a crate usable by the domain (for its channels and cancellation tokens)
/// into a runtime with sockets, processes, files, signals or timers.
const IO_FEATURES: &[(&str, &[&str])] = &[
    (
        "tokio",
        &[
            "net",
            "process",
            "fs",
            "io-std",
            "rt",
            "rt-multi-thread",
            "full",
            "signal",
            "time",
        ],
    ),
    ("tokio-util", &["net", "rt", "time", "full"]),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layer {
    Domain,
    Application,
    Adapter,
    TestSupport,
    Composition,
    Binary,
    Bench,
    Example,
}

impl Layer {
    fn of(package: &str) -> Option<Layer> {
        let layer = if DOMAIN_CRATES.contains(&package) {
            Layer::Domain
        } else if APPLICATION_CRATES.contains(&package) {
            Layer::Application
        } else if ADAPTER_CRATES.contains(&package) {
            Layer::Adapter
        } else if TEST_SUPPORT_CRATES.contains(&package) {
            Layer::TestSupport
        } else if COMPOSITION_CRATES.contains(&package) {
            Layer::Composition
        } else if package == BINARY_PACKAGE {
            Layer::Binary
        } else if package == BENCH_PACKAGE {
            Layer::Bench
        } else if package.starts_with(EXAMPLE_PACKAGE_PREFIX) {
            Layer::Example
        } else {
            return None;
        };
        Some(layer)
    }

    /// The top-level folder of the workspace that packages of this layer live in.
    fn folder(self) -> &'static str {
        match self {
            Layer::Domain
            | Layer::Application
            | Layer::Adapter
            | Layer::TestSupport
            | Layer::Composition => "crates",
            Layer::Binary => "bins",
            Layer::Bench => "bench",
            Layer::Example => "examples",
        }
    }

    /// Whether a normal dependency from the package `own_name` of this layer on a workspace
    /// package of layer `target` keeps the design's shape.
    fn may_depend_on(self, own_name: &str, target: Layer) -> bool {
        match (self, target) {
            (_, Layer::Binary | Layer::Bench | Layer::Example) => false,
            (Layer::Domain, Layer::Domain) => true,
            (Layer::Domain, _) => false,
            (Layer::Application, Layer::Domain) => true,
            (Layer::Application, _) => false,
            (Layer::Adapter, Layer::Domain) => true,
            (Layer::Adapter, Layer::Application) => {
                ADAPTERS_ALLOWED_TO_USE_THE_APPLICATION.contains(&own_name)
            }
            (Layer::Adapter, _) => false,
            (Layer::TestSupport, Layer::Domain) => true,
            (Layer::TestSupport, _) => false,
            // It wires the domain, the application and the adapters, and nothing above it.
            (Layer::Composition, Layer::Domain | Layer::Application | Layer::Adapter) => true,
            (Layer::Composition, _) => false,
            // The composition roots wire everything together.
            (Layer::Binary | Layer::Bench | Layer::Example, _) => true,
        }
    }
}

#[derive(Debug)]
struct Dependency {
    name: String,
    /// `None` for a normal dependency, `Some("dev")` or `Some("build")` otherwise.
    kind: Option<String>,
    features: Vec<String>,
    /// The version requirement; `*` when the manifest names none.
    req: String,
    /// Whether the dependency is found by path (a workspace crate).
    by_path: bool,
}

impl Dependency {
    fn is_dev(&self) -> bool {
        self.kind.as_deref() == Some("dev")
    }
}

#[derive(Debug)]
struct Package {
    name: String,
    manifest_path: PathBuf,
    /// `Some(vec![])` for `publish = false`, `None` when any registry may have it.
    publish: Option<Vec<String>>,
    description: Option<String>,
    license: Option<String>,
    readme: Option<String>,
    dependencies: Vec<Dependency>,
    /// Source files of the library and binary targets.
    crate_roots: Vec<PathBuf>,
}

#[derive(Debug)]
struct Workspace {
    root: PathBuf,
    packages: Vec<Package>,
}

fn string_at<'a>(value: &'a Value, key: &str) -> Result<&'a str, String> {
    value[key]
        .as_str()
        .ok_or_else(|| format!("cargo metadata: `{key}` is missing or not a string"))
}

fn array_at<'a>(value: &'a Value, key: &str) -> Result<&'a [Value], String> {
    value[key]
        .as_array()
        .map(Vec::as_slice)
        .ok_or_else(|| format!("cargo metadata: `{key}` is missing or not an array"))
}

impl Workspace {
    /// Reads the output of `cargo metadata --format-version 1 --no-deps`.
    fn from_metadata(metadata: &Value) -> Result<Workspace, String> {
        let mut packages = Vec::new();
        for package in array_at(metadata, "packages")? {
            let mut dependencies = Vec::new();
            for dependency in array_at(package, "dependencies")? {
                dependencies.push(Dependency {
                    name: string_at(dependency, "name")?.to_owned(),
                    kind: dependency["kind"].as_str().map(str::to_owned),
                    features: dependency["features"]
                        .as_array()
                        .map(|features| {
                            features
                                .iter()
                                .filter_map(Value::as_str)
                                .map(str::to_owned)
                                .collect()
                        })
                        .unwrap_or_default(),
                    req: dependency["req"].as_str().unwrap_or("*").to_owned(),
                    by_path: dependency["path"].is_string(),
                });
            }
            let mut crate_roots = Vec::new();
            for target in array_at(package, "targets")? {
                let kinds = array_at(target, "kind")?;
                let is_crate_root = kinds.iter().filter_map(Value::as_str).any(|kind| {
                    matches!(
                        kind,
                        "lib" | "rlib" | "dylib" | "cdylib" | "proc-macro" | "bin"
                    )
                });
                if is_crate_root {
                    crate_roots.push(PathBuf::from(string_at(target, "src_path")?));
                }
            }
            let optional = |key: &str| package[key].as_str().map(str::to_owned);
            packages.push(Package {
                name: string_at(package, "name")?.to_owned(),
                manifest_path: PathBuf::from(string_at(package, "manifest_path")?),
                publish: package["publish"].as_array().map(|registries| {
                    registries
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                }),
                description: optional("description"),
                license: optional("license"),
                readme: optional("readme"),
                dependencies,
                crate_roots,
            });
        }
        Ok(Workspace {
            root: PathBuf::from(string_at(metadata, "workspace_root")?),
            packages,
        })
    }

    fn layer_of_member(&self, name: &str) -> Option<Option<Layer>> {
        self.packages
            .iter()
            .any(|package| package.name == name)
            .then(|| Layer::of(name))
    }
}

/// Every rule that `cargo metadata` alone can decide: layers, dependency edges, folders.
fn dependency_violations(workspace: &Workspace) -> Vec<String> {
    let mut violations = Vec::new();
    for package in &workspace.packages {
        let Some(layer) = Layer::of(&package.name) else {
            violations.push(format!(
                "package `{}` is in no layer: add it to the layer table at the top of \
                 tests/tidy.rs (domain, application, adapter, test support) after deciding what \
                 it may depend on",
                package.name
            ));
            continue;
        };

        let relative_manifest = package
            .manifest_path
            .strip_prefix(&workspace.root)
            .unwrap_or(&package.manifest_path);
        if relative_manifest
            .components()
            .next()
            .map(|first| first.as_os_str())
            != Some(layer.folder().as_ref())
        {
            violations.push(format!(
                "package `{}` is at `{}` but {:?} packages live under `{}/`",
                package.name,
                relative_manifest.display(),
                layer,
                layer.folder()
            ));
        }

        for dependency in package
            .dependencies
            .iter()
            .filter(|dependency| !dependency.is_dev())
        {
            let edge = format!("`{}` -> `{}`", package.name, dependency.name);
            if let Some(target_layer) = workspace.layer_of_member(&dependency.name) {
                let allowed = target_layer
                    .is_some_and(|target_layer| layer.may_depend_on(&package.name, target_layer));
                if !allowed {
                    violations.push(format!(
                        "{edge}: a {layer:?} crate must not depend on a {} crate{}",
                        target_layer.map_or("layerless".to_owned(), |layer| format!("{layer:?}")),
                        if target_layer == Some(Layer::TestSupport) {
                            " (use it as a dev-dependency)"
                        } else {
                            "; move the shared code down a layer or invert the dependency with a \
                             port"
                        }
                    ));
                }
                continue;
            }
            if layer != Layer::Domain {
                continue;
            }
            if IO_CRATES.contains(&dependency.name.as_str()) {
                violations.push(format!(
                    "{edge}: domain crates do no I/O; put this behind a port implemented by an \
                     adapter crate"
                ));
            }
            for (crate_name, forbidden) in IO_FEATURES {
                if dependency.name != *crate_name {
                    continue;
                }
                let enabled: Vec<&str> = dependency
                    .features
                    .iter()
                    .map(String::as_str)
                    .filter(|feature| forbidden.contains(feature))
                    .collect();
                if !enabled.is_empty() {
                    violations.push(format!(
                        "{edge} with features {enabled:?}: domain crates may use {crate_name}'s \
                         synchronisation primitives only; runtimes, sockets, files, processes and \
                         timers belong in adapters"
                    ));
                }
            }
        }
    }
    violations
}

impl Layer {
    /// Whether packages of this layer are published: the crates under `crates/`.
    fn is_library(self) -> bool {
        matches!(
            self,
            Layer::Domain
                | Layer::Application
                | Layer::Adapter
                | Layer::TestSupport
                | Layer::Composition
        )
    }
}

/// Whether `from` reaches `to` through normal dependencies on workspace packages.
fn depends_on(workspace: &Workspace, from: &str, to: &str) -> bool {
    let mut pending = vec![from];
    let mut seen = vec![from];
    while let Some(name) = pending.pop() {
        let Some(package) = workspace.packages.iter().find(|p| p.name == name) else {
            continue;
        };
        for dependency in package.dependencies.iter().filter(|d| !d.is_dev()) {
            if dependency.name == to {
                return true;
            }
            if !seen.contains(&dependency.name.as_str()) {
                seen.push(&dependency.name);
                pending.push(&dependency.name);
            }
        }
    }
    false
}

/// What `cargo publish` needs of a library crate, and that nothing else is published. The
/// packaging itself is checked by CI's dry run; these are the rules a new crate could break
/// without that run failing.
fn publishing_violations(workspace: &Workspace) -> Vec<String> {
    let mut violations = Vec::new();
    for package in &workspace.packages {
        let Some(layer) = Layer::of(&package.name) else {
            continue;
        };
        let name = &package.name;
        if !layer.is_library() {
            if package.publish.as_deref() != Some(&[]) {
                violations.push(format!(
                    "`{name}` is not a library crate: give it `publish = false` (only the crates \
                     under `crates/` are published)"
                ));
            }
            continue;
        }
        if package.publish.as_deref() == Some(&[]) {
            violations.push(format!(
                "`{name}` is a library crate: it must be publishable, not `publish = false`"
            ));
        }
        for (field, value) in [
            ("description", &package.description),
            ("license", &package.license),
            ("readme", &package.readme),
        ] {
            if value.as_deref().is_none_or(|value| value.trim().is_empty()) {
                violations.push(format!(
                    "`{name}` has no `{field}`: a published crate needs one (`readme` names the \
                     crate's own README.md)"
                ));
            }
        }
        for dependency in package.dependencies.iter().filter(|d| d.by_path) {
            let versioned = dependency.req != "*";
            if dependency.is_dev() {
                // crates.io takes a crate only once every dependency it names is published,
                // dev-dependencies included; a versionless one is left out of the package.
                if versioned && depends_on(workspace, &dependency.name, name) {
                    violations.push(format!(
                        "`{name}` -> `{}` (dev): `{}` depends on `{name}`, so this \
                         dev-dependency must be a path without a version, or neither crate \
                         could be published first",
                        dependency.name, dependency.name
                    ));
                }
            } else if !versioned {
                violations.push(format!(
                    "`{name}` -> `{}`: a path dependency without a version cannot be published; \
                     give its `[workspace.dependencies]` entry `version = ...`",
                    dependency.name
                ));
            }
        }
    }
    violations
}

/// The rules that need the files themselves: shared lints and the crate's opening paragraph.
fn source_violations(
    workspace: &Workspace,
    read: &dyn Fn(&Path) -> std::io::Result<String>,
) -> Vec<String> {
    let mut violations = Vec::new();
    for package in &workspace.packages {
        match read(&package.manifest_path) {
            Ok(manifest) if !uses_workspace_lints(&manifest) => violations.push(format!(
                "`{}` does not share the workspace lints: add `[lints]` with `workspace = true` \
                 to {}",
                package.name,
                package.manifest_path.display()
            )),
            Ok(_) => {}
            Err(error) => violations.push(format!(
                "cannot read {}: {error}",
                package.manifest_path.display()
            )),
        }
        for crate_root in &package.crate_roots {
            match read(crate_root) {
                Ok(source) if !starts_with_inner_doc(&source) => violations.push(format!(
                    "{} must start with a `//!` paragraph saying what the crate is for and what \
                     it must never do",
                    crate_root.display()
                )),
                Ok(_) => {}
                Err(error) => {
                    violations.push(format!("cannot read {}: {error}", crate_root.display()));
                }
            }
        }
    }
    violations
}

/// Whether a manifest has `workspace = true` in its `[lints]` table (or `lints.workspace = true`
/// at the top level).
fn uses_workspace_lints(manifest: &str) -> bool {
    let mut in_lints_table = false;
    for line in manifest.lines() {
        let line: String = line
            .split('#')
            .next()
            .unwrap_or_default()
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        if line.starts_with('[') {
            in_lints_table = line == "[lints]";
            continue;
        }
        if (in_lints_table && line == "workspace=true") || line == "lints.workspace=true" {
            return true;
        }
    }
    false
}

fn starts_with_inner_doc(source: &str) -> bool {
    source.trim_start().starts_with("//!")
}

fn all_violations(
    workspace: &Workspace,
    read: &dyn Fn(&Path) -> std::io::Result<String>,
) -> Vec<String> {
    let mut violations = dependency_violations(workspace);
    violations.extend(publishing_violations(workspace));
    violations.extend(source_violations(workspace, read));
    if !workspace
        .packages
        .iter()
        .any(|package| package.name == BINARY_PACKAGE)
    {
        violations.push(format!("the workspace has no `{BINARY_PACKAGE}` package"));
    }
    violations
}

fn cargo_metadata() -> Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    let output = Command::new(&cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
            "--manifest-path",
        ])
        .arg(&manifest)
        .output()
        .unwrap_or_else(|error| panic!("could not run `{cargo} metadata`: {error}"));
    assert!(
        output.status.success(),
        "`{cargo} metadata` failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("`{cargo} metadata` printed invalid JSON: {error}"))
}

#[test]
fn the_workspace_follows_the_architecture_rules() {
    let workspace =
        Workspace::from_metadata(&cargo_metadata()).unwrap_or_else(|error| panic!("{error}"));
    assert!(
        workspace
            .packages
            .iter()
            .any(|package| package.name == "mcpgw-core"),
        "cargo metadata listed no mcpgw-core: is the manifest path right?"
    );
    let violations = all_violations(&workspace, &|path| std::fs::read_to_string(path));
    assert!(
        violations.is_empty(),
        "the workspace breaks {} architecture rule(s):\n  - {}",
        violations.len(),
        violations.join("\n  - ")
    );
}

// The checker's own tests, on synthetic metadata: each proves that one kind of violation is
// caught, so that a passing workspace check means something.

/// A package with the metadata the publishing rules ask for: published under `crates/`,
/// `publish = false` elsewhere.
fn synthetic_package(name: &str, folder: &str, dependencies: Value) -> Value {
    let publish = if folder.starts_with("crates/") {
        Value::Null
    } else {
        serde_json::json!([])
    };
    serde_json::json!({
        "name": name,
        "manifest_path": format!("/ws/{folder}/Cargo.toml"),
        "publish": publish,
        "description": "a crate",
        "license": "Apache-2.0",
        "readme": "README.md",
        "dependencies": dependencies,
        "targets": [{"kind": ["lib"], "src_path": format!("/ws/{folder}/src/lib.rs")}],
    })
}

fn normal(name: &str) -> Value {
    serde_json::json!({"name": name, "kind": null, "features": []})
}

/// A dependency on the workspace crate `name` by path, of `kind` (`None`: normal), with the
/// version requirement `req` (`*`: none).
fn path_dependency(name: &str, kind: Option<&str>, req: &str) -> Value {
    serde_json::json!({"name": name, "kind": kind, "features": [], "req": req,
                       "path": format!("/ws/crates/{name}")})
}

fn synthetic_workspace(packages: Vec<Value>) -> Workspace {
    let mut packages = packages;
    packages.push(synthetic_package(
        "mcpgw",
        "bins/mcpgw",
        serde_json::json!([]),
    ));
    Workspace::from_metadata(&serde_json::json!({"workspace_root": "/ws", "packages": packages}))
        .unwrap()
}

fn only_violation(workspace: &Workspace) -> String {
    let violations = dependency_violations(workspace);
    assert_eq!(violations.len(), 1, "{violations:#?}");
    violations.into_iter().next().unwrap()
}

#[test]
fn a_domain_crate_depending_on_rusqlite_is_reported() {
    let workspace = synthetic_workspace(vec![synthetic_package(
        "mcpgw-groups",
        "crates/groups",
        serde_json::json!([normal("serde"), normal("rusqlite")]),
    )]);
    let violation = only_violation(&workspace);
    assert!(
        violation.contains("`mcpgw-groups` -> `rusqlite`"),
        "{violation}"
    );
}

#[test]
fn a_domain_crate_may_use_tokio_sync_but_not_its_runtime() {
    let with_features = |features: &[&str]| {
        synthetic_workspace(vec![synthetic_package(
            "mcpgw-core",
            "crates/mcp-core",
            serde_json::json!([{"name": "tokio", "kind": null, "features": features}]),
        )])
    };
    assert_eq!(
        dependency_violations(&with_features(&["sync"])),
        Vec::<String>::new()
    );
    let violation = only_violation(&with_features(&["sync", "rt", "net"]));
    assert!(violation.contains("`mcpgw-core` -> `tokio`"), "{violation}");
    assert!(violation.contains("\"rt\", \"net\""), "{violation}");
}

#[test]
fn dev_dependencies_of_a_domain_crate_are_free() {
    let workspace = synthetic_workspace(vec![
        synthetic_package(
            "mcpgw-authz",
            "crates/authz",
            serde_json::json!([
                {"name": "tokio", "kind": "dev", "features": ["macros", "rt"]},
                {"name": "mcpgw-testkit", "kind": "dev", "features": []},
            ]),
        ),
        synthetic_package("mcpgw-testkit", "crates/testkit", serde_json::json!([])),
    ]);
    assert_eq!(dependency_violations(&workspace), Vec::<String>::new());
}

#[test]
fn a_domain_crate_depending_on_an_adapter_is_reported() {
    let workspace = synthetic_workspace(vec![
        synthetic_package(
            "mcpgw-config",
            "crates/config",
            serde_json::json!([normal("mcpgw-core"), normal("mcpgw-store-sqlite")]),
        ),
        synthetic_package("mcpgw-core", "crates/mcp-core", serde_json::json!([])),
        synthetic_package(
            "mcpgw-store-sqlite",
            "crates/store-sqlite",
            serde_json::json!([]),
        ),
    ]);
    let violation = only_violation(&workspace);
    assert!(
        violation.contains("`mcpgw-config` -> `mcpgw-store-sqlite`"),
        "{violation}"
    );
}

#[test]
fn an_adapter_depending_on_another_adapter_is_reported() {
    let workspace = synthetic_workspace(vec![
        synthetic_package(
            "mcpgw-runner-process",
            "crates/runner-process",
            serde_json::json!([
                normal("mcpgw-core"),
                normal("mcpgw-mcp-rmcp"),
                normal("libc")
            ]),
        ),
        synthetic_package("mcpgw-mcp-rmcp", "crates/mcp-rmcp", serde_json::json!([])),
        synthetic_package("mcpgw-core", "crates/mcp-core", serde_json::json!([])),
    ]);
    let violation = only_violation(&workspace);
    assert!(
        violation.contains("`mcpgw-runner-process` -> `mcpgw-mcp-rmcp`"),
        "{violation}"
    );
}

#[test]
fn only_the_http_adapter_may_depend_on_the_application() {
    let workspace = synthetic_workspace(vec![
        synthetic_package(
            "mcpgw-http-actix",
            "crates/http-actix",
            serde_json::json!([normal("mcpgw-gateway")]),
        ),
        synthetic_package(
            "mcpgw-store-sqlite",
            "crates/store-sqlite",
            serde_json::json!([normal("mcpgw-gateway")]),
        ),
        synthetic_package("mcpgw-gateway", "crates/gateway", serde_json::json!([])),
    ]);
    let violation = only_violation(&workspace);
    assert!(
        violation.contains("`mcpgw-store-sqlite` -> `mcpgw-gateway`"),
        "{violation}"
    );
}

#[test]
fn the_application_depending_on_an_adapter_is_reported() {
    let workspace = synthetic_workspace(vec![
        synthetic_package(
            "mcpgw-gateway",
            "crates/gateway",
            serde_json::json!([normal("mcpgw-core"), normal("mcpgw-runner-process")]),
        ),
        synthetic_package("mcpgw-core", "crates/mcp-core", serde_json::json!([])),
        synthetic_package(
            "mcpgw-runner-process",
            "crates/runner-process",
            serde_json::json!([]),
        ),
    ]);
    let violation = only_violation(&workspace);
    assert!(
        violation.contains("`mcpgw-gateway` -> `mcpgw-runner-process`"),
        "{violation}"
    );
}

#[test]
fn a_library_using_the_testkit_outside_its_tests_is_reported() {
    let workspace = synthetic_workspace(vec![
        synthetic_package(
            "mcpgw-store-sqlite",
            "crates/store-sqlite",
            serde_json::json!([normal("mcpgw-testkit")]),
        ),
        synthetic_package("mcpgw-testkit", "crates/testkit", serde_json::json!([])),
    ]);
    let violation = only_violation(&workspace);
    assert!(violation.contains("dev-dependency"), "{violation}");
}

#[test]
fn unknown_packages_and_misplaced_packages_are_reported() {
    let workspace = synthetic_workspace(vec![
        synthetic_package("mcpgw-newthing", "crates/newthing", serde_json::json!([])),
        synthetic_package("mcpgw-groups", "groups", serde_json::json!([])),
    ]);
    let violations = dependency_violations(&workspace);
    assert_eq!(violations.len(), 2, "{violations:#?}");
    assert!(
        violations[0].contains("`mcpgw-newthing` is in no layer"),
        "{violations:#?}"
    );
    assert!(
        violations[1].contains("live under `crates/`"),
        "{violations:#?}"
    );
}

#[test]
fn missing_lints_and_missing_crate_docs_are_reported() {
    let workspace = synthetic_workspace(vec![synthetic_package(
        "mcpgw-groups",
        "crates/groups",
        serde_json::json!([]),
    )]);
    let files: HashMap<PathBuf, &str> = HashMap::from([
        (
            PathBuf::from("/ws/crates/groups/Cargo.toml"),
            "[package]\nname = \"x\"\n[lints.rust]\nworkspace = true\n",
        ),
        (
            PathBuf::from("/ws/crates/groups/src/lib.rs"),
            "// a plain comment\npub fn f() {}\n",
        ),
        (
            PathBuf::from("/ws/bins/mcpgw/Cargo.toml"),
            "[package]\n\n[lints]\nworkspace = true # shared\n",
        ),
        (
            PathBuf::from("/ws/bins/mcpgw/src/lib.rs"),
            "\n//! The binary.\n",
        ),
    ]);
    let read = |path: &Path| {
        files
            .get(path)
            .map(|text| (*text).to_owned())
            .ok_or_else(|| std::io::Error::other("no file"))
    };
    let violations = all_violations(&workspace, &read);
    assert_eq!(violations.len(), 2, "{violations:#?}");
    assert!(violations[0].contains("`mcpgw-groups` does not share the workspace lints"));
    assert!(violations[1].contains("crates/groups/src/lib.rs must start with a `//!`"));
}

#[test]
fn publishing_needs_metadata_and_versions_on_path_dependencies() {
    let mut groups = synthetic_package(
        "mcpgw-groups",
        "crates/groups",
        serde_json::json!([path_dependency("mcpgw-core", None, "*")]),
    );
    groups["readme"] = Value::Null;
    groups["publish"] = serde_json::json!([]);
    let mut bench = synthetic_package("mcpgw-bench", "bench", serde_json::json!([]));
    bench["publish"] = Value::Null;
    let workspace = synthetic_workspace(vec![
        groups,
        bench,
        synthetic_package("mcpgw-core", "crates/mcp-core", serde_json::json!([])),
    ]);
    let violations = publishing_violations(&workspace);
    assert_eq!(violations.len(), 4, "{violations:#?}");
    assert!(violations[0].contains("`mcpgw-groups` is a library crate"));
    assert!(violations[1].contains("`mcpgw-groups` has no `readme`"));
    assert!(violations[2].contains("`mcpgw-groups` -> `mcpgw-core`: a path dependency"));
    assert!(violations[3].contains("`mcpgw-bench` is not a library crate"));
}

#[test]
fn a_versioned_dev_dependency_back_onto_a_dependent_is_reported() {
    let workspace = |core_to_testkit: &str| {
        synthetic_workspace(vec![
            synthetic_package(
                "mcpgw-core",
                "crates/mcp-core",
                serde_json::json!([path_dependency(
                    "mcpgw-testkit",
                    Some("dev"),
                    core_to_testkit
                )]),
            ),
            synthetic_package(
                "mcpgw-testkit",
                "crates/testkit",
                serde_json::json!([path_dependency("mcpgw-groups", None, "^0.1.0")]),
            ),
            synthetic_package(
                "mcpgw-groups",
                "crates/groups",
                serde_json::json!([
                    path_dependency("mcpgw-core", None, "^0.1.0"),
                    // A dev-dependency that does not lead back needs no special treatment.
                    path_dependency("mcpgw-authz", Some("dev"), "^0.1.0"),
                ]),
            ),
            synthetic_package("mcpgw-authz", "crates/authz", serde_json::json!([])),
        ])
    };
    assert_eq!(publishing_violations(&workspace("*")), Vec::<String>::new());
    let violations = publishing_violations(&workspace("^0.1.0"));
    assert_eq!(violations.len(), 1, "{violations:#?}");
    assert!(
        violations[0].contains("`mcpgw-core` -> `mcpgw-testkit` (dev)"),
        "{violations:#?}"
    );
}

// ----- citations of documents outside the repository -------------------------------------------

/// Phrases that cite a document outside the repository: an outside specification and its
/// companion notes, or a guide kept next to the repository instead of in it. Each is assembled
/// from two pieces so that this file, which has to name them, does not cite them itself.
const OUTSIDE_CITATIONS: &[&str] = &[
    concat!("the ", "seed"),
    concat!("seed", "'s"),
    concat!("the con", "tract's"),
    concat!("ARCHITECTURE", "-GUIDE"),
    concat!("CONTRACT", ".md"),
    concat!("USERS", ".md"),
    concat!("TOOL", "ING.md"),
    concat!("../", "shared/"),
];

/// The phrase of [`OUTSIDE_CITATIONS`] that `line` uses, if any. Case does not matter (ASCII),
/// and a phrase counts only as whole words: a longer word that starts or ends with one is no
/// citation, nor is a repository's own "contract suite" or an RNG's "seed".
fn outside_citation(line: &str) -> Option<&'static str> {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let line = line.to_ascii_lowercase();
    OUTSIDE_CITATIONS.iter().copied().find(|phrase| {
        let phrase_lower = phrase.to_ascii_lowercase();
        line.match_indices(&phrase_lower).any(|(start, _)| {
            let end = start + phrase_lower.len();
            let free_before = !phrase_lower.starts_with(is_word)
                || !line[..start].chars().next_back().is_some_and(is_word);
            let free_after = !phrase_lower.ends_with(is_word)
                || !line[end..].chars().next().is_some_and(is_word);
            free_before && free_after
        })
    })
}

/// `path:line: text` for every line of the file `path` (its contents `text`) that cites a
/// document outside the repository.
fn outside_citations_in(path: &str, text: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| outside_citation(line).is_some())
        .map(|(index, line)| format!("{path}:{}: {}", index + 1, line.trim()))
        .collect()
}

/// The files git tracks under `root`, relative to it, without anything under `target/`.
fn tracked_files(root: &Path) -> Vec<String> {
    let output = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["ls-files", "-z"])
        .output()
        .unwrap_or_else(|error| panic!("could not run `git ls-files`: {error}"));
    assert!(
        output.status.success(),
        "`git ls-files` in {} failed ({}):\n{}",
        root.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output
        .stdout
        .split(|byte| *byte == 0)
        .filter(|path| !path.is_empty())
        .map(|path| String::from_utf8_lossy(path).into_owned())
        .filter(|path| !path.starts_with("target/"))
        .collect()
}

#[test]
fn no_file_cites_a_document_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let files = tracked_files(&root);
    assert!(
        files.iter().any(|path| path == "tests/tidy.rs"),
        "`git ls-files` did not list tests/tidy.rs: is {} the repository?",
        root.display()
    );
    let mut citations = Vec::new();
    for path in &files {
        let bytes = match std::fs::read(root.join(path)) {
            Ok(bytes) => bytes,
            // Deleted in the working tree and not committed yet: nothing to read.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(error) => panic!("cannot read {path}: {error}"),
        };
        // A NUL byte marks a binary file, as git itself decides.
        if bytes.contains(&0) {
            continue;
        }
        citations.extend(outside_citations_in(path, &String::from_utf8_lossy(&bytes)));
    }
    assert!(
        citations.is_empty(),
        "{} line(s) cite a document outside the repository; state the fact itself in the \
         project's own words (and name the file under docs/ that says it, if one does):\n  {}",
        citations.len(),
        citations.join("\n  ")
    );
}

#[test]
fn citations_of_outside_documents_are_found_and_harmless_words_are_not() {
    let citing = [
        concat!("/// Built-in roles in the se", "ed's order."),
        concat!("clients see THE SE", "ED's three messages"),
        concat!("/// The Contr", "act's defaults: 10 requests per second."),
        concat!("//! The rules (from `ARCHITECTURE-GU", "IDE.md`):"),
        concat!("# keys as in CONTR", "ACT.md"),
        concat!("see us", "ers.md and too", "ling.md"),
        concat!("include = \"../sha", "red/notes.md\""),
    ];
    for line in citing {
        assert!(outside_citation(line).is_some(), "not caught: {line}");
    }
    let harmless = [
        concat!("prove it with the con", "tract suite of their port"),
        concat!("// ----- the con", "tract cases -----"),
        "Contract for implementors: `save` is an upsert",
        "let mut rng = StdRng::seed_from_u64(7); // a rand seed",
        "/// A generator with a fixed seed: the same seed gives the same numbers.",
        concat!("the se", "eded generator repeats itself"),
        "runs each target over its seed corpus",
        "../x is not a valid id",
    ];
    for line in harmless {
        assert_eq!(outside_citation(line), None, "{line}");
    }
    let text = concat!(
        "fn main() {}\n",
        "    // as the se",
        "ed says\n",
        "// rand seed\n"
    );
    assert_eq!(
        outside_citations_in("src/x.rs", text),
        [concat!("src/x.rs:2: // as the se", "ed says")]
    );
}

// --- domain sources do no I/O ---------------------------------------------------------------

/// What a domain crate's own source must not name: files, processes, sockets, the environment,
/// threads and the system clock. The domain reaches all of them through ports (`Clock`,
/// `TaskSpawner`, the launcher and store ports), which is what keeps it testable with fakes.
/// Value types such as `std::net::IpAddr` are not I/O and stay allowed.
const DOMAIN_IO_NAMES: &[&str] = &[
    "std::fs",
    "tokio::fs",
    "File::open",
    "File::create",
    "std::process",
    "tokio::process",
    "TcpStream",
    "TcpListener",
    "UdpSocket",
    "UnixStream",
    "UnixListener",
    "tokio::net",
    "std::env",
    "thread::spawn",
    "thread::sleep",
    "Instant::now",
    "SystemTime::now",
];

/// The lines of `source` (a file of a domain crate) that name I/O, as `(line number, name)`.
/// Comments are skipped, and so is every item marked `#[cfg(test)]` (a test module may
/// measure time or read fixtures): a `mod tests;` line, or a block up to its closing brace.
fn domain_io_uses(source: &str) -> Vec<(usize, &'static str)> {
    let mut uses = Vec::new();
    let mut test_item_next = false;
    let mut test_block_depth: Option<i64> = None;
    for (index, line) in source.lines().enumerate() {
        let code = line.trim_start();
        let code = if code.starts_with("//") {
            ""
        } else {
            code.split(" //").next().unwrap_or(code)
        };
        if let Some(depth) = test_block_depth.as_mut() {
            *depth += brace_balance(code);
            if *depth <= 0 {
                test_block_depth = None;
            }
            continue;
        }
        if code.starts_with("#[cfg(test)]") {
            test_item_next = true;
            continue;
        }
        if test_item_next && !code.is_empty() && !code.starts_with("#[") {
            test_item_next = false;
            let depth = brace_balance(code);
            if depth > 0 {
                test_block_depth = Some(depth);
            }
            continue;
        }
        for name in DOMAIN_IO_NAMES {
            if code.contains(name) {
                uses.push((index + 1, *name));
            }
        }
    }
    uses
}

/// Opening minus closing braces on a line (braces in strings are rare enough in these files
/// not to matter).
fn brace_balance(code: &str) -> i64 {
    code.chars().fold(0, |depth, c| match c {
        '{' => depth + 1,
        '}' => depth - 1,
        _ => depth,
    })
}

/// The Rust files of a crate's `src/`, without its test-only files (`tests.rs`,
/// `*_tests.rs`, anything under a `tests` folder).
fn production_sources(folder: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![folder.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let entries = std::fs::read_dir(&folder)
            .unwrap_or_else(|error| panic!("cannot list {}: {error}", folder.display()));
        for entry in entries {
            let path = entry
                .unwrap_or_else(|error| panic!("cannot list {}: {error}", folder.display()))
                .path();
            let name = path
                .file_name()
                .and_then(|name| name.to_str())
                .unwrap_or("");
            if path.is_dir() {
                if name != "tests" {
                    pending.push(path);
                }
            } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn domain_crates_name_no_io_in_their_sources() {
    let workspace =
        Workspace::from_metadata(&cargo_metadata()).unwrap_or_else(|error| panic!("{error}"));
    let mut violations = Vec::new();
    let mut files_read = 0;
    for package in &workspace.packages {
        if !DOMAIN_CRATES.contains(&package.name.as_str()) {
            continue;
        }
        let src = package
            .manifest_path
            .parent()
            .expect("a manifest has a folder")
            .join("src");
        for file in production_sources(&src) {
            let source = std::fs::read_to_string(&file)
                .unwrap_or_else(|error| panic!("cannot read {}: {error}", file.display()));
            files_read += 1;
            for (line, name) in domain_io_uses(&source) {
                violations.push(format!(
                    "{}:{line}: `{name}` is I/O; a domain crate reaches it through a port",
                    file.display()
                ));
            }
        }
    }
    assert!(
        files_read >= DOMAIN_CRATES.len(),
        "no domain sources were read"
    );
    assert!(
        violations.is_empty(),
        "domain crates name I/O:\n  - {}",
        violations.join("\n  - ")
    );
}

#[test]
fn io_in_a_domain_source_is_found_outside_comments_and_tests() {
    let source = "\
use std::net::IpAddr;
#[cfg(test)]
mod tests;
// std::fs is only mentioned here
fn now() -> std::time::Instant { std::time::Instant::now() }
#[cfg(test)]
mod inline {
    fn t() {
        std::thread::sleep(std::time::Duration::ZERO);
    }
}
fn read() { let _ = std::fs::read(\"x\"); } // reads a file
";
    assert_eq!(
        domain_io_uses(source),
        [(5, "Instant::now"), (12, "std::fs")]
    );
}

// --- the architecture document names every crate ---------------------------------------------

/// The crate graph of `docs/ARCHITECTURE.md`: the first fenced block after its "Bird's-eye view"
/// heading.
fn architecture_graph(document: &str) -> Option<&str> {
    let view = document.find("## Bird's-eye view")?;
    let rest = &document[view..];
    let open = rest.find("```")? + 3;
    let close = open + rest[open..].find("```")?;
    Some(&rest[open..close])
}

/// Whether `word` appears in `text` as a whole word (crate folder names contain `-`, which
/// counts as part of the word).
fn names_as_word(text: &str, word: &str) -> bool {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

#[test]
fn the_architecture_document_draws_every_crate() {
    let workspace =
        Workspace::from_metadata(&cargo_metadata()).unwrap_or_else(|error| panic!("{error}"));
    let path = workspace.root.join("docs/ARCHITECTURE.md");
    let document = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
    let graph = architecture_graph(&document).unwrap_or_else(|| {
        panic!(
            "{} has no crate graph under `## Bird's-eye view`",
            path.display()
        )
    });
    let mut missing = Vec::new();
    for package in &workspace.packages {
        let folder = package
            .manifest_path
            .parent()
            .expect("a manifest has a folder");
        let relative = folder.strip_prefix(&workspace.root).unwrap_or(folder);
        // Libraries and the binary; the bench harness and the examples are not part of the design.
        let name = match relative
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
        {
            Some("crates") => relative.file_name().and_then(|name| name.to_str()),
            Some("bins") => relative.to_str(),
            _ => None,
        };
        if let Some(name) = name
            && !names_as_word(graph, name)
        {
            missing.push(format!("`{name}` ({})", package.name));
        }
    }
    assert!(
        missing.is_empty(),
        "the crate graph in {} does not draw: {}",
        path.display(),
        missing.join(", ")
    );
}

#[test]
fn crate_names_count_only_as_whole_words() {
    assert!(names_as_word("  groups (strategies)", "groups"));
    assert!(names_as_word(
        "bins/mcpgw  (composition root)",
        "bins/mcpgw"
    ));
    assert!(!names_as_word("discovery-files only", "discovery"));
    assert!(!names_as_word("mcp-core-extra", "mcp-core"));
}

/// Ports that have no contract suite yet. Each entry is a debt: its suite, run against every
/// in-tree adapter of the port, replaces the entry. A port added to a domain crate must come
/// with its suite; it cannot be added here to pass.
const PORTS_WITHOUT_A_SUITE: &[&str] = &[];

/// The names of the `pub trait`s declared in `source`.
fn public_traits(source: &str) -> Vec<String> {
    source
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("pub trait "))
        .filter_map(|rest| {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

/// The rows of the port table in `document` (between `<!-- ports -->` and `<!-- /ports -->`):
/// each port's name and its suite column, unquoted.
fn port_table(document: &str) -> Option<Vec<(String, String)>> {
    let start = document.find("<!-- ports -->")?;
    let end = document[start..].find("<!-- /ports -->")? + start;
    let rows = document[start..end]
        .lines()
        .filter(|line| line.starts_with("| `"))
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let port = cells.get(1)?.trim_matches('`').to_owned();
            let suite = cells.get(4)?.trim_matches('`').to_owned();
            Some((port, suite))
        })
        .collect();
    Some(rows)
}

/// What is wrong with the port table, given the domain's traits, the suite macros the testkit
/// defines, and the suite macros invoked outside the testkit.
fn port_table_problems(
    traits: &[String],
    table: &[(String, String)],
    defined_suites: &[String],
    invoked_suites: &[String],
    without_a_suite: &[&str],
) -> Vec<String> {
    let mut problems = Vec::new();
    for port in traits {
        if !table.iter().any(|(name, _)| name == port) {
            problems.push(format!("the port `{port}` is missing from the table"));
        }
    }
    for (port, suite) in table {
        if !traits.contains(port) {
            problems.push(format!(
                "the table lists `{port}`, which no domain crate declares"
            ));
        }
        let waiting = without_a_suite.contains(&port.as_str());
        match suite.strip_suffix('!') {
            None if waiting => {}
            None => problems.push(format!(
                "the port `{port}` has no contract suite: write one in mcpgw-testkit and run it \
                 against its adapters"
            )),
            Some(_) if waiting => problems.push(format!(
                "`{port}` has a suite now: take it off PORTS_WITHOUT_A_SUITE"
            )),
            Some(name) => {
                if !defined_suites.iter().any(|defined| defined == name) {
                    problems.push(format!(
                        "the suite `{name}!` of `{port}` is not a macro of mcpgw-testkit"
                    ));
                } else if !invoked_suites.iter().any(|invoked| invoked == name) {
                    problems.push(format!(
                        "the suite `{name}!` of `{port}` runs against no adapter"
                    ));
                }
            }
        }
    }
    problems
}

/// Every Rust file under `folder`, tests included.
fn rust_files(folder: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![folder.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for path in entries.flatten().map(|entry| entry.path()) {
            let name = path
                .file_name()
                .and_then(|name| name.to_str())
                .unwrap_or("");
            if path.is_dir() && name != "target" && !name.starts_with('.') {
                pending.push(path);
            } else if name.ends_with(".rs") {
                files.push(path);
            }
        }
    }
    files
}

#[test]
fn every_port_is_in_the_architecture_table_with_its_contract_suite() {
    let workspace =
        Workspace::from_metadata(&cargo_metadata()).unwrap_or_else(|error| panic!("{error}"));
    let root = &workspace.root;
    let mut traits = Vec::new();
    for package in &workspace.packages {
        if !DOMAIN_CRATES.contains(&package.name.as_str()) {
            continue;
        }
        let folder = package
            .manifest_path
            .parent()
            .expect("a manifest has a folder")
            .join("src");
        for file in production_sources(&folder) {
            let source = std::fs::read_to_string(&file)
                .unwrap_or_else(|error| panic!("cannot read {}: {error}", file.display()));
            traits.extend(public_traits(&source));
        }
    }
    let testkit = root.join("crates/testkit");
    let mut defined = Vec::new();
    let mut invoked = Vec::new();
    for file in rust_files(root) {
        let source = std::fs::read_to_string(&file).unwrap_or_default();
        if file.starts_with(&testkit) {
            defined.extend(
                source
                    .lines()
                    .filter_map(|line| line.trim_start().strip_prefix("macro_rules! "))
                    .filter_map(|rest| rest.split_whitespace().next())
                    .filter(|name| name.ends_with("_contract_suite"))
                    .map(str::to_owned),
            );
        } else {
            for line in source.lines() {
                if let Some(at) = line.find("_contract_suite!") {
                    let start = line[..at]
                        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .map_or(0, |i| i + 1);
                    invoked.push(line[start..at + "_contract_suite".len()].to_owned());
                }
            }
        }
    }
    let path = root.join("docs/ARCHITECTURE.md");
    let document = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
    let table = port_table(&document)
        .unwrap_or_else(|| panic!("{} has no port table (`<!-- ports -->`)", path.display()));
    let problems = port_table_problems(&traits, &table, &defined, &invoked, PORTS_WITHOUT_A_SUITE);
    assert!(
        problems.is_empty(),
        "the port table of {} is out of date:\n  - {}",
        path.display(),
        problems.join("\n  - ")
    );
}

#[test]
fn a_port_without_a_row_or_a_suite_is_reported() {
    let names = |names: &[&str]| {
        names
            .iter()
            .map(|name| (*name).to_owned())
            .collect::<Vec<_>>()
    };
    let row = |port: &str, suite: &str| (port.to_owned(), suite.to_owned());
    let traits = names(&["Kept", "Waiting", "New"]);
    let table = vec![
        row("Kept", "kept_contract_suite!"),
        row("Waiting", "none yet"),
        row("Gone", "none yet"),
    ];
    let suites = names(&["kept_contract_suite"]);
    let problems = port_table_problems(&traits, &table, &suites, &suites, &["Waiting", "Gone"]);
    assert_eq!(
        problems,
        [
            "the port `New` is missing from the table",
            "the table lists `Gone`, which no domain crate declares",
        ]
    );
    // A port neither with a suite nor on the list of debts, a listed suite that does not
    // exist, one that runs nowhere, and a debt that was paid but is still listed.
    let table = vec![
        row("Kept", "missing_contract_suite!"),
        row("Waiting", "none yet"),
        row("New", "kept_contract_suite!"),
    ];
    let problems = port_table_problems(&traits, &table, &suites, &[], &["New"]);
    assert_eq!(
        problems,
        [
            "the suite `missing_contract_suite!` of `Kept` is not a macro of mcpgw-testkit",
            "the port `Waiting` has no contract suite: write one in mcpgw-testkit and run it \
             against its adapters",
            "`New` has a suite now: take it off PORTS_WITHOUT_A_SUITE",
        ]
    );
    assert_eq!(
        public_traits("pub trait Clock: Send {\n    pub trait Inner<T> {}\nfn x() {}"),
        ["Clock", "Inner"]
    );
}
