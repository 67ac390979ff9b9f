//! The crate graph is the architecture: each crate's dependencies, read from `cargo metadata`,
//! keep the walls the code map draws (which crate may speak TCP, protobuf or SQL, and that the
//! server and its clients never depend on each other).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;

use serde_json::Value;

/// The crates a rule applies to.
#[derive(Debug, Clone, Copy)]
enum Crates {
    /// One workspace crate, by package name.
    One(&'static str),
    /// Every workspace crate but these.
    AllBut(&'static [&'static str]),
}

/// How far a rule looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// The crate's own `[dependencies]`.
    Direct,
    /// Its normal dependencies however deep: a forbidden crate is as present through another.
    Any,
}

/// One wall: `crates` never depend (normal dependencies, within `reach`) on `forbidden`.
#[derive(Debug)]
struct Rule {
    crates: Crates,
    reach: Reach,
    forbidden: &'static [&'static str],
    why: &'static str,
}

/// The SQL drivers.
const SQL: &[&str] = &["rusqlite", "libsqlite3-sys", "sqlx", "sqlx-core", "sqlx-postgres"];

/// The rules. `store` holds every SQL statement, so it is the one exception of the SQL rule.
const RULES: &[Rule] = &[
    Rule {
        crates: Crates::AllBut(&["store"]),
        reach: Reach::Direct,
        forbidden: SQL,
        why: "SQL lives in one crate; every other crate reaches the database through it",
    },
    Rule {
        crates: Crates::One("localai"),
        reach: Reach::Any,
        forbidden: &[
            "tserver",
            "tserver-proto",
            "service-client",
            "tclient",
            "prost",
            "rusqlite",
            "libsqlite3-sys",
            "sqlx",
            "axum",
        ],
        why: "localai knows nothing of the framed protocol, protobuf, SQL or serving: its host hands it what it needs",
    },
    Rule {
        crates: Crates::One("service-client"),
        reach: Reach::Any,
        forbidden: &["tserver", "tclient", "clap", "indicatif", "hdrhistogram", "rmcp"],
        why: "a display client that links the library gets no server, command line, load client or MCP server",
    },
    Rule {
        crates: Crates::One("tserver"),
        reach: Reach::Any,
        forbidden: &["service-client", "tclient"],
        why: "the server and its clients never depend on each other",
    },
    Rule {
        crates: Crates::One("plant"),
        reach: Reach::Direct,
        forbidden: &[
            "tserver",
            "tserver-proto",
            "service-client",
            "prost",
            "axum",
            "hyper",
            "rmcp",
            "clap",
        ],
        why: "the live plant knows no socket server, no wire protocol and no command line (Sparkplug's own protobuf comes through its codec)",
    },
    Rule {
        crates: Crates::One("store"),
        reach: Reach::Any,
        forbidden: &[
            "tserver",
            "tserver-proto",
            "service-client",
            "tclient",
            "prost",
            "axum",
            "rmcp",
        ],
        why: "the store keeps a solution and knows nothing of the framed protocol or serving",
    },
    Rule {
        crates: Crates::One("store"),
        reach: Reach::Any,
        forbidden: &["localai"],
        why: "SQL keeps the solution's settings without the chat paths: the settings schema is solution-settings'",
    },
    Rule {
        crates: Crates::One("solution-settings"),
        reach: Reach::Any,
        forbidden: &[
            "tserver-tls",
            "tserver-proto",
            "ai-envelope",
            "localai",
            "plant-model",
            "sparkplug",
            "modbus",
            "solution-scripts",
            "store",
            "plant",
            "tserver",
            "service-client",
            "tclient",
            "scripted-llm",
            "tserver-demo",
            "workspace-hack",
            "tserver-tests",
            "xtask",
            "tokio",
            "reqwest",
            "hyper",
            "sqlx",
            "rusqlite",
            "prost",
        ],
        why: "what a solution's model settings are is a leaf: no other crate of the workspace, no runtime, no HTTP, no SQL, no protobuf",
    },
    Rule {
        crates: Crates::One("plant-model"),
        reach: Reach::Any,
        forbidden: &[
            "tserver",
            "rusqlite",
            "libsqlite3-sys",
            "sqlx",
            "sqlx-core",
            "sqlx-postgres",
        ],
        why: "the plant's vocabulary knows no server and no database",
    },
    Rule {
        crates: Crates::One("sparkplug"),
        reach: Reach::Any,
        forbidden: &[
            "tserver",
            "rusqlite",
            "libsqlite3-sys",
            "sqlx",
            "sqlx-core",
            "sqlx-postgres",
        ],
        why: "the Sparkplug codec knows no server and no database",
    },
    Rule {
        crates: Crates::One("modbus"),
        reach: Reach::Any,
        forbidden: &["tserver", "plant", "store", "tokio", "tokio-modbus"],
        why: "the Modbus register codec does no I/O: the plant's source sends what it plans",
    },
];

/// The workspace's packages and the normal dependency edges between every package.
struct Graph {
    /// Package id to package name.
    names: HashMap<String, String>,
    /// Workspace package name to its id.
    members: BTreeMap<String, String>,
    /// Package id to the ids of its normal dependencies.
    normal: HashMap<String, Vec<String>>,
    /// The product's packages (the default members) that have a binary, by name.
    product_binaries: Vec<String>,
}

impl Graph {
    fn read() -> Self {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
        let output = std::process::Command::new(cargo)
            .args(["metadata", "--format-version", "1", "--manifest-path"])
            .arg(&manifest)
            .output()
            .expect("cargo metadata runs");
        assert!(
            output.status.success(),
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let metadata: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
        let text = |value: &Value| value.as_str().expect("a string").to_owned();
        let names: HashMap<String, String> = metadata["packages"]
            .as_array()
            .expect("packages")
            .iter()
            .map(|package| (text(&package["id"]), text(&package["name"])))
            .collect();
        let members = metadata["workspace_members"]
            .as_array()
            .expect("workspace members")
            .iter()
            .map(|id| (names[&text(id)].clone(), text(id)))
            .collect();
        let normal = metadata["resolve"]["nodes"]
            .as_array()
            .expect("a resolved graph")
            .iter()
            .map(|node| {
                let deps = node["deps"]
                    .as_array()
                    .expect("deps")
                    .iter()
                    .filter(|dep| {
                        dep["dep_kinds"]
                            .as_array()
                            .expect("dep kinds")
                            .iter()
                            .any(|kind| kind["kind"].is_null())
                    })
                    .map(|dep| text(&dep["pkg"]))
                    .collect();
                (text(&node["id"]), deps)
            })
            .collect();
        let default_members: Vec<String> = metadata["workspace_default_members"]
            .as_array()
            .expect("default members (cargo 1.71 or later)")
            .iter()
            .map(text)
            .collect();
        let product_binaries = metadata["packages"]
            .as_array()
            .expect("packages")
            .iter()
            .filter(|package| default_members.contains(&text(&package["id"])))
            .filter(|package| {
                package["targets"]
                    .as_array()
                    .expect("targets")
                    .iter()
                    .any(|target| {
                        target["kind"]
                            .as_array()
                            .expect("target kinds")
                            .iter()
                            .any(|kind| kind == "bin")
                    })
            })
            .map(|package| text(&package["name"]))
            .collect();
        Self {
            names,
            members,
            normal,
            product_binaries,
        }
    }

    /// The crates `crates` names, each checked to be a workspace crate.
    fn crates(&self, crates: Crates) -> Vec<&str> {
        match crates {
            Crates::One(name) => {
                assert!(
                    self.members.contains_key(name),
                    "a rule names {name:?}, which is not a workspace crate; the workspace has {:?}",
                    self.members.keys().collect::<Vec<_>>()
                );
                vec![name]
            }
            Crates::AllBut(exceptions) => {
                for name in exceptions {
                    assert!(
                        self.members.contains_key(*name),
                        "a rule excepts {name:?}, which is not a workspace crate"
                    );
                }
                self.members
                    .keys()
                    .map(String::as_str)
                    .filter(|name| !exceptions.contains(name))
                    .collect()
            }
        }
    }

    /// Every package `name` depends on within `reach`, each with the chain that reaches it
    /// (`name -> a -> b`).
    fn dependencies(&self, name: &str, reach: Reach) -> Vec<(String, String)> {
        let root = &self.members[name];
        let mut found = Vec::new();
        let mut chains: HashMap<&str, String> = HashMap::from([(root.as_str(), name.to_owned())]);
        let mut queue = VecDeque::from([root.as_str()]);
        while let Some(id) = queue.pop_front() {
            let chain = chains[id].clone();
            for dep in self.normal.get(id).into_iter().flatten() {
                if chains.contains_key(dep.as_str()) {
                    continue;
                }
                let dep_name = &self.names[dep];
                let dep_chain = format!("{chain} -> {dep_name}");
                found.push((dep_name.clone(), dep_chain.clone()));
                chains.insert(dep, dep_chain);
                if reach == Reach::Any {
                    queue.push_back(dep);
                }
            }
        }
        found
    }
}

/// What breaks the rules, one line each.
fn broken_rules(graph: &Graph, rules: &[Rule]) -> Vec<String> {
    let mut broken = Vec::new();
    for rule in rules {
        for name in graph.crates(rule.crates) {
            for (dep, chain) in graph.dependencies(name, rule.reach) {
                if rule.forbidden.contains(&dep.as_str()) {
                    broken.push(format!("{name} depends on {dep} ({chain}): {}", rule.why));
                }
            }
        }
    }
    broken
}

#[test]
fn no_crate_depends_on_what_the_code_map_forbids_it() {
    let graph = Graph::read();
    let broken = broken_rules(&graph, RULES);
    assert!(
        broken.is_empty(),
        "the crate graph breaks the architecture:\n{}",
        broken.join("\n")
    );
}

/// `cargo hakari` keeps `workspace-hack` holding every feature the product's third-party
/// crates are built with; a binary package that depends on it builds alone (`cargo run -p
/// tserver-demo`, `--bin tclient`) with the same features as `cargo build --release`, so it
/// reuses that build instead of compiling part of the tree again. `cargo xtask ci` checks the
/// crate's contents with `cargo hakari generate --diff` and `cargo hakari verify`.
#[test]
fn every_product_binary_builds_with_the_workspace_feature_set() {
    let graph = Graph::read();
    assert!(
        graph.product_binaries.len() >= 3,
        "the product's binary packages were not found: {:?}",
        graph.product_binaries
    );
    let missing: Vec<&String> = graph
        .product_binaries
        .iter()
        .filter(|name| {
            !graph
                .dependencies(name, Reach::Direct)
                .iter()
                .any(|(dep, _)| dep == "workspace-hack")
        })
        .collect();
    assert!(
        missing.is_empty(),
        "{missing:?} do not depend on workspace-hack: built alone they would pick other features \
         than the workspace build and compile part of the tree again (add \
         `workspace-hack.workspace = true` to their [dependencies])"
    );
}

/// `release` is what users deploy and the bench measures (Rust's convention): every crate at
/// level 3, none lowered; `dist` adds whole-program LTO and one codegen unit.
#[test]
fn release_is_fully_optimised_and_dist_adds_lto() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let text = std::fs::read_to_string(&manifest).expect("the workspace manifest reads");
    let manifest: toml::Table = text.parse().expect("the workspace manifest is TOML");
    let profile = |name: &str| manifest["profile"][name].clone();
    let release = profile("release");
    let level = |settings: &toml::Value| settings.get("opt-level").and_then(toml::Value::as_integer);
    // Cargo's release default is 3; a profile that says it must say 3.
    assert!(
        level(&release).is_none_or(|level| level == 3),
        "release: {release}"
    );
    assert!(
        release.get("lto").is_none_or(|lto| lto.as_str() != Some("off")),
        "release: {release}"
    );
    let lowered = |profile: &toml::Value| -> Vec<String> {
        profile
            .get("package")
            .and_then(toml::Value::as_table)
            .into_iter()
            .flatten()
            .filter(|(_, settings)| level(settings).is_some_and(|level| level < 3))
            .map(|(name, _)| name.clone())
            .collect()
    };
    assert!(
        lowered(&release).is_empty(),
        "{:?} are below level 3 in release, which users deploy",
        lowered(&release)
    );
    let dist = profile("dist");
    assert_eq!(dist["inherits"].as_str(), Some("release"), "dist: {dist}");
    assert!(level(&dist).is_none_or(|level| level == 3), "dist: {dist}");
    assert_eq!(dist["lto"].as_str(), Some("fat"), "dist: {dist}");
    assert_eq!(dist["codegen-units"].as_integer(), Some(1), "dist: {dist}");
    assert!(lowered(&dist).is_empty(), "dist: {dist}");
}

/// The settings leaf's rule names every other workspace crate, so a crate added later is
/// forbidden to it too rather than missing from the list.
#[test]
fn the_settings_leaf_is_forbidden_every_other_workspace_crate() {
    let graph = Graph::read();
    let leaf = RULES
        .iter()
        .find(|rule| matches!(rule.crates, Crates::One("solution-settings")))
        .expect("a rule for solution-settings");
    let unlisted: Vec<&String> = graph
        .members
        .keys()
        .filter(|name| *name != "solution-settings" && !leaf.forbidden.contains(&name.as_str()))
        .collect();
    assert!(
        unlisted.is_empty(),
        "{unlisted:?} are missing from solution-settings' forbidden crates"
    );
}

#[test]
fn a_forbidden_dependency_is_named_with_the_chain_that_reaches_it() {
    let graph = Graph::read();
    // tserver does speak protobuf: a rule forbidding it must catch that, through the crate
    // that brings it.
    let broken = broken_rules(
        &graph,
        &[Rule {
            crates: Crates::One("tserver"),
            reach: Reach::Any,
            forbidden: &["prost"],
            why: "a rule the real graph breaks",
        }],
    );
    assert!(
        broken
            .iter()
            .any(|line| line.starts_with("tserver depends on prost (tserver -> ")
                && line.ends_with("a rule the real graph breaks")),
        "{broken:?}"
    );
}

/// The modules that may change a tag's value as the field reports it (`Plant::write`,
/// `write_at`, `write_batch`): the sources, the simulator, the plant itself, and the acting
/// path carrying out an operator's write of a tag no source feeds. Everything else acts
/// through `Runtime::act`.
const FIELD_WRITERS: &[&str] = &[
    "crates/plant/src/sources/",
    "crates/plant/src/simulator.rs",
    "crates/plant/src/plant/",
    "crates/plant/src/actions/write.rs",
];

/// Where a receipt of a recorded audit may be made: the acting path's recorder only.
const RECEIPT_MAKER: &str = "crates/plant/src/actions/mod.rs";

/// What in `text` (the source of `file`, before its unit tests) acts on the plant outside the
/// acting path: a field write outside [`FIELD_WRITERS`], or an audit receipt made outside
/// [`RECEIPT_MAKER`]. Carrying out an act takes a receipt, so together these leave no way to
/// act unaudited.
fn acts_outside_the_acting_path(file: &str, text: &str) -> Vec<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    // Method chains are often split over lines: look at the code as one line of tokens.
    let flat: String = code.split_whitespace().collect();
    let mut found = Vec::new();
    if !FIELD_WRITERS.iter().any(|allowed| file.starts_with(allowed)) {
        for call in [
            "plant.write(",
            "plant().write(",
            "plant.write_at(",
            "plant().write_at(",
        ] {
            if flat.contains(call) {
                found.push(format!("{file}: {call}...) writes a tag outside the acting path"));
            }
        }
        for call in ["plant.write_batch(", "plant().write_batch("] {
            if flat.contains(call) {
                found.push(format!("{file}: {call}...) writes tags outside the acting path"));
            }
        }
    }
    if file != RECEIPT_MAKER && flat.contains("Audited(()") {
        found.push(format!("{file}: makes an audit receipt outside the acting path"));
    }
    found
}

#[test]
fn nothing_outside_the_acting_path_can_carry_out_an_act() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    crate::tidy::rust_files(&root.join("crates"), &mut files);
    let mut found = Vec::new();
    let mut receipts = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable source");
        let file = path
            .strip_prefix(&root)
            .expect("under the root")
            .to_string_lossy()
            .replace('\\', "/");
        found.extend(acts_outside_the_acting_path(&file, &text));
        receipts += usize::from(file == RECEIPT_MAKER && text.contains("Audited(())"));
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
    assert_eq!(
        receipts, 1,
        "the acting path makes its receipts in {RECEIPT_MAKER}"
    );
    // Carrying out takes the receipt: the functions that act on the field and on alarms
    // cannot be called without one.
    for (file, signature) in [
        ("crates/plant/src/sources/mod.rs", "_: &Audited,"),
        ("crates/plant/src/plant/mod.rs", "_: &Audited)"),
    ] {
        let text = std::fs::read_to_string(root.join(file)).expect("readable source");
        assert!(text.contains(signature), "{file} carries out only with a receipt");
    }
}

#[test]
fn a_write_or_a_receipt_outside_the_acting_path_is_named() {
    let sneaky = "fn f(runtime: &Runtime) {\n    runtime\n        .plant()\n        .write(\"Tank1.Level\", v, q);\n    let r = Audited(());\n}\n#[cfg(test)]\nmod tests { fn g(p: &Plant) { p.plant.write_batch([]); } }";
    let found = acts_outside_the_acting_path("crates/tserver/src/calls/sneaky.rs", sneaky);
    assert_eq!(
        found,
        [
            "crates/tserver/src/calls/sneaky.rs: plant().write(...) writes a tag outside the acting path",
            "crates/tserver/src/calls/sneaky.rs: makes an audit receipt outside the acting path",
        ]
    );
    assert!(acts_outside_the_acting_path("crates/plant/src/sources/mqtt.rs", sneaky).len() == 1);
}
