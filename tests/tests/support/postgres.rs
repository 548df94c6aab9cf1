//! A throwaway PostgreSQL cluster for the store tests: `initdb` + `pg_ctl` on a free loopback
//! port, one per test binary, each test in its own database.
//!
//! Binaries are found through `MESH_PG_BIN`, then `PATH`, then `/usr/lib/postgresql/*/bin`
//! (where Debian's `postgresql` packages put them). `initdb` refuses to run as root, so as
//! root the cluster runs as the system user `mesh_pg` (created with `useradd` if missing). No
//! server found is a test failure naming the package, never a silent pass. The cluster stops
//! when the test binary exits: a watcher process stops it once our pid is gone (statics are
//! never dropped, so a Drop guard alone could not).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

const PG_USER: &str = "mesh_pg";

/// The running cluster.
pub(crate) struct Cluster {
    bin: PathBuf,
    port: u16,
    data: PathBuf,
    as_user: Option<&'static str>,
}

static CLUSTER: OnceLock<Cluster> = OnceLock::new();
static NEXT_DB: AtomicU32 = AtomicU32::new(0);

/// A URL to a fresh, empty database on the shared cluster (started on first use).
pub(crate) fn fresh_database_url() -> String {
    let cluster = CLUSTER.get_or_init(Cluster::start);
    let name = format!(
        "mesh_test_{}_{}",
        std::process::id(),
        NEXT_DB.fetch_add(1, Ordering::Relaxed)
    );
    cluster.run(
        "createdb",
        &[
            "-h",
            "127.0.0.1",
            "-p",
            &cluster.port.to_string(),
            "-U",
            "postgres",
            &name,
        ],
    );
    format!("postgres://postgres@127.0.0.1:{}/{name}", cluster.port)
}

fn find_bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("MESH_PG_BIN").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        assert!(
            dir.join("initdb").is_file(),
            "MESH_PG_BIN={} has no initdb: install the `postgresql` package or fix MESH_PG_BIN",
            dir.display()
        );
        return dir;
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let initdb = dir.join("initdb");
            if initdb.is_file() {
                // Debian links initdb into PATH; its siblings (pg_ctl, createdb) live next to
                // the link's target.
                let real = std::fs::canonicalize(&initdb).unwrap_or(initdb);
                return real.parent().map(Path::to_path_buf).unwrap_or(dir);
            }
        }
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("bin"))
        .filter(|bin| bin.join("initdb").is_file())
        .collect();
    versions.sort_by_key(|bin| {
        bin.parent()
            .and_then(Path::file_name)
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    versions.pop().unwrap_or_else(|| {
        panic!("PostgreSQL not found (no initdb in MESH_PG_BIN, PATH or /usr/lib/postgresql/*/bin): install the `postgresql` package")
    })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

fn ensure_user() {
    let exists = Command::new("id")
        .arg(PG_USER)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !exists {
        let status = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                PG_USER,
            ])
            .status()
            .expect("useradd could not run (needed to run PostgreSQL as non-root)");
        // Another test binary may have created it meanwhile (exit 9: already exists).
        assert!(
            status.success() || status.code() == Some(9),
            "useradd {PG_USER} failed: {status}"
        );
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    listener.local_addr().expect("local addr").port()
}

impl Cluster {
    fn start() -> Self {
        let bin = find_bin_dir();
        let as_user = is_root().then_some(PG_USER);
        if as_user.is_some() {
            ensure_user();
        }
        let data = std::env::temp_dir().join(format!(
            "mesh-pg-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::create_dir_all(&data).expect("create the cluster directory");
        let cluster = Self {
            bin,
            port: free_port(),
            data,
            as_user,
        };
        if let Some(user) = as_user {
            let status = Command::new("chown")
                .args([
                    "-R",
                    &format!("{user}:"),
                    cluster.data.to_str().expect("utf-8 path"),
                ])
                .status()
                .expect("chown the cluster directory");
            assert!(status.success(), "chown failed: {status}");
        }
        let pgdata = cluster.data.join("pgdata");
        let pgdata = pgdata.to_str().expect("utf-8 path");
        cluster.run(
            "initdb",
            &[
                "-D",
                pgdata,
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
        let mut options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c fsync=off -c max_connections=200",
            cluster.port,
            cluster.data.display()
        );
        // The worker bench counts statements per part with pg_stat_statements when the
        // server ships it (Debian's `postgresql` package does); nothing else needs it.
        let contrib = cluster
            .bin
            .parent()
            .map(|dir| dir.join("lib/pg_stat_statements.so"));
        if contrib.is_some_and(|lib| lib.is_file()) {
            options.push_str(" -c shared_preload_libraries=pg_stat_statements");
        }
        let log = cluster.data.join("log");
        cluster.run(
            "pg_ctl",
            &[
                "-D",
                pgdata,
                "-o",
                &options,
                "-l",
                log.to_str().expect("utf-8 path"),
                "-w",
                "-t",
                "60",
                "start",
            ],
        );
        cluster.watch_for_exit(pgdata);
        cluster
    }

    /// Stops the cluster and removes its files once this process is gone (bounded: one check
    /// a second, for as long as we live).
    fn watch_for_exit(&self, pgdata: &str) {
        let pg_ctl = self.bin.join("pg_ctl");
        let stop = format!("{} -D {pgdata} -m immediate stop", pg_ctl.display());
        let stop = match self.as_user {
            Some(user) => format!("runuser -u {user} -- {stop}"),
            None => stop,
        };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {stop} >/dev/null 2>&1; rm -rf {dir}",
            pid = std::process::id(),
            dir = self.data.display()
        );
        // Never waited on, by design: the watcher must outlive this process to stop the cluster.
        #[allow(clippy::zombie_processes)]
        Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the cluster's exit watcher");
    }

    fn run(&self, tool: &str, args: &[&str]) {
        let program = self.bin.join(tool);
        let mut command = match self.as_user {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(&program);
                c
            }
            None => Command::new(&program),
        };
        let out = command
            .args(args)
            .current_dir(&self.data)
            .output()
            .unwrap_or_else(|e| panic!("{} could not run: {e}", program.display()));
        assert!(
            out.status.success(),
            "{tool} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
