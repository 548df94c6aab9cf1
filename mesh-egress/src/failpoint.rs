//! Named crash points for the crash tests (feature `failpoints`, never on in production).
//!
//! A crash test starts a real child process with `MESH_FAILPOINT=<name>`; when the process
//! reaches the point of that name it writes one line `{"failpoint":"<name>"}` to stderr and
//! waits, so the test can send SIGKILL at exactly that point. Without the feature, [`hit`] is an
//! empty `async fn` the compiler removes, and the environment is never read; with it, the
//! variable is read once per process.
//!
//! The points (where each stops is in the `store` module docs): `after_commit`,
//! `between_parts`, `after_send_before_mark`, `between_stream_calls`, `drafts_only` (the
//! outbox), and
//! `follow_up_claimed`, `follow_up_committed` (the worker). One point makes something fail
//! instead of stopping: `journal_unwritable`, the first write of a stream's journal after a
//! call the surface confirmed fails once, as a database that stopped answering would
//! ([`fails_once`]).

/// The environment variable naming the point to stop at.
#[cfg(feature = "failpoints")]
pub(crate) const VARIABLE: &str = "MESH_FAILPOINT";

/// How long a process stopped at a failpoint waits for its SIGKILL before it exits on its own
/// (code 86), so a crash test that fails to kill it cannot leave it running.
#[cfg(feature = "failpoints")]
const WAIT_FOR_KILL: std::time::Duration = std::time::Duration::from_secs(60);

/// Stops the process at `name` when `MESH_FAILPOINT` names it (see the module docs).
#[cfg(feature = "failpoints")]
pub(crate) async fn hit(name: &'static str) {
    use std::io::Write as _;
    if chosen() != Some(name) {
        return;
    }
    {
        // Scoped, not dropped: a lock guard alive across the await below would make every
        // future that reaches a failpoint `!Send`.
        let mut stderr = std::io::stderr().lock();
        // The test is waiting for this line; a failed write leaves it to its own timeout.
        let _ = writeln!(stderr, "{{\"failpoint\":\"{name}\"}}");
        let _ = stderr.flush();
    }
    tokio::time::sleep(WAIT_FOR_KILL).await;
    std::process::exit(86);
}

/// Whether `MESH_FAILPOINT` names `name`, the first time it is asked in this process: a point
/// that makes something fail once rather than stop the process (`journal_unwritable`: the next
/// write of a stream's journal fails, as a database that stopped answering would).
#[cfg(feature = "failpoints")]
pub(crate) fn fails_once(name: &'static str) -> bool {
    static FIRED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    chosen() == Some(name) && !FIRED.swap(true, std::sync::atomic::Ordering::SeqCst)
}

/// The point `MESH_FAILPOINT` names, read once per process.
#[cfg(feature = "failpoints")]
fn chosen() -> Option<&'static str> {
    // Read once per process: a crash test names the point when it starts the child, and the
    // sends that pass a point should not each pay an environment lookup.
    static CHOSEN: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    CHOSEN
        .get_or_init(|| std::env::var(VARIABLE).ok())
        .as_deref()
}

/// Stops the process at `name` when `MESH_FAILPOINT` names it (see the module docs).
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub(crate) async fn hit(_name: &'static str) {}
