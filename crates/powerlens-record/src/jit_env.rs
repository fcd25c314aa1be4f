//! The environment that makes managed runtimes name their JIT code (`record --jit-names`):
//! each runtime reads one variable at start and then writes `/tmp/perf-PID.map`, which
//! the end of the recording reads ([`crate::symbols`]). What the user set is never
//! replaced: options are appended to a list variable, and a switch the user set either
//! way is left as it is.

/// One runtime's variable.
struct Variable {
    name: &'static str,
    /// What it gets.
    value: &'static str,
    /// Whether the variable is a space-separated option list (appended to), rather than
    /// one switch (left alone when set).
    list: bool,
    /// Options that, already in the user's list, make the runtime write a map: nothing is
    /// appended then.
    enough: &'static [&'static str],
    runtime: &'static str,
}

const VARIABLES: [Variable; 4] = [
    Variable {
        name: "NODE_OPTIONS",
        // JavaScript functions only: plain `--perf-basic-prof` also names V8's stubs, but
        // makes V8 write an `isolate-…-v8.log` into the working directory of every node
        // process, litter in the user's project. The stubs that matter are builtins in
        // the node executable, which its symbols name.
        value: "--perf-basic-prof-only-functions",
        list: true,
        enough: &[
            "--perf-basic-prof",
            "--perf-basic-prof-only-functions",
            "--perf-prof",
        ],
        runtime: "Node.js",
    },
    Variable {
        name: "JAVA_TOOL_OPTIONS",
        // The map is written when the JVM exits normally (not when it is killed).
        value: "-XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit",
        list: true,
        enough: &["-XX:+DumpPerfMapAtExit"],
        runtime: "Java",
    },
    Variable {
        name: "DOTNET_PerfMapEnabled",
        value: "1",
        list: false,
        enough: &[],
        runtime: ".NET",
    },
    Variable {
        name: "PYTHONPERFSUPPORT",
        // Python 3.12 and later; earlier versions ignore it.
        value: "1",
        list: false,
        enough: &[],
        runtime: "Python ≥ 3.12",
    },
];

/// What `--jit-names` does to the command's environment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JitEnvironment {
    /// Variables to set in the command's environment (name, full value).
    pub set: Vec<(String, String)>,
    /// One line for the user: what was set, appended to or left alone.
    pub told: String,
}

/// The environment for a command whose own environment has `current` (a lookup: the
/// recorder's environment, which the command inherits).
pub fn jit_environment(current: impl Fn(&str) -> Option<String>) -> JitEnvironment {
    let mut set = Vec::new();
    let mut said = Vec::new();
    for v in &VARIABLES {
        match current(v.name) {
            None => {
                set.push((v.name.to_string(), v.value.to_string()));
                said.push(format!("{}={} ({})", v.name, v.value, v.runtime));
            }
            Some(yours) if v.list && !has_any(&yours, v.enough) => {
                let value = if yours.trim().is_empty() {
                    v.value.to_string()
                } else {
                    format!("{} {}", yours.trim_end(), v.value)
                };
                said.push(format!("{}: appended {} to yours", v.name, v.value));
                set.push((v.name.to_string(), value));
            }
            Some(_) if v.list => said.push(format!("{}: yours writes the map already", v.name)),
            Some(yours) => said.push(format!("{}={yours}: yours, left as it is", v.name)),
        }
    }
    let told = format!(
        "--jit-names: for the command's managed runtimes to write perf maps of their JIT code: {} (--no-jit-names leaves the environment alone)",
        said.join(", ")
    );
    JitEnvironment { set, told }
}

/// Whether one of `options` is among `value`'s.
fn has_any(value: &str, options: &[&str]) -> bool {
    value.split_whitespace().any(|o| options.contains(&o))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value<'a>(env: &'a JitEnvironment, name: &str) -> Option<&'a str> {
        env.set
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn an_empty_environment_gets_every_runtime_s_option() {
        let env = jit_environment(|_| None);
        assert_eq!(
            env.set,
            [
                ("NODE_OPTIONS", "--perf-basic-prof-only-functions"),
                (
                    "JAVA_TOOL_OPTIONS",
                    "-XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit"
                ),
                ("DOTNET_PerfMapEnabled", "1"),
                ("PYTHONPERFSUPPORT", "1"),
            ]
            .map(|(n, v)| (n.to_string(), v.to_string()))
        );
        assert!(
            env.told
                .contains("NODE_OPTIONS=--perf-basic-prof-only-functions (Node.js)"),
            "{}",
            env.told
        );
    }

    /// The user's options stay, first; a switch the user set (even to off) is theirs; a
    /// list that makes the runtime write a map already gets nothing more.
    #[test]
    fn what_the_user_set_is_appended_to_never_replaced() {
        let user = |name: &str| match name {
            "NODE_OPTIONS" => Some("--max-old-space-size=4096 ".to_string()),
            "JAVA_TOOL_OPTIONS" => {
                Some("-Xmx1g -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit".to_string())
            }
            "DOTNET_PerfMapEnabled" => Some("0".to_string()),
            _ => None,
        };
        let env = jit_environment(user);
        assert_eq!(
            value(&env, "NODE_OPTIONS"),
            Some("--max-old-space-size=4096 --perf-basic-prof-only-functions")
        );
        assert_eq!(value(&env, "JAVA_TOOL_OPTIONS"), None);
        assert_eq!(value(&env, "DOTNET_PerfMapEnabled"), None);
        assert_eq!(value(&env, "PYTHONPERFSUPPORT"), Some("1"));
        for said in [
            "NODE_OPTIONS: appended --perf-basic-prof-only-functions to yours",
            "JAVA_TOOL_OPTIONS: yours writes the map already",
            "DOTNET_PerfMapEnabled=0: yours, left as it is",
            "PYTHONPERFSUPPORT=1 (Python ≥ 3.12)",
        ] {
            assert!(env.told.contains(said), "{said} not in {}", env.told);
        }
    }
}
