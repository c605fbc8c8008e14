//! keel's sandbox spawner as the real binary runs it: a fresh `keel-spawner` process, child
//! of keel, that ends with keel and takes every command with it, even after SIGKILL.

use std::io::Read as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Every pid in `/proc`.
fn pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The children of `pid` named `name`.
fn children_named(pid: u32, name: &str) -> Vec<u32> {
    pids()
        .into_iter()
        .filter(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
            let parent = stat
                .rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().nth(1))
                .and_then(|ppid| ppid.parse::<u32>().ok());
            parent == Some(pid) && comm.trim() == name
        })
        .collect()
}

/// Live (not zombie) processes whose command line holds `mark`.
fn running_with(mark: &str) -> Vec<u32> {
    pids()
        .into_iter()
        .filter(|p| {
            let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).contains(mark) && alive(*p)
        })
        .collect()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
    })
}

#[test]
fn the_spawner_and_every_command_end_when_keel_is_killed() {
    let support = keel_sandbox::support();
    if support.landlock.is_err() || support.namespaces.is_err() {
        eprintln!("skipped: this system runs commands without the spawner");
        return;
    }
    let dir = super::temp_dir("spawner");
    let mark = format!("30{}.25", std::process::id() % 1000);
    let script = super::script(
        dir.path(),
        &format!(
            r#"[{{"tool_calls": [{{"id": "c1", "name": "bash", "arguments": {{"command": "sleep {mark}1 & sleep {mark}"}}}}]}},
               {{"text": "never"}}]"#
        ),
    );
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let mut keel = super::keel()
        .arg("exec")
        .arg("--cwd")
        .arg(&work)
        .arg("--mock-script")
        .arg(&script)
        .arg("go")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while running_with(&mark).len() < 2 {
        if Instant::now() > deadline || keel.try_wait().unwrap().is_some() {
            let _ = keel.kill();
            let mut err = String::new();
            let _ = keel.stderr.take().unwrap().read_to_string(&mut err);
            panic!("the commands never started: {err}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let spawners = children_named(keel.id(), "keel-spawner");
    assert_eq!(spawners.len(), 1, "keel has one spawner: {spawners:?}");
    keel.kill().unwrap();
    keel.wait().unwrap();
    let killed = Instant::now();
    // A generous bound, and the time it took reported: no tight timing.
    let bound = Duration::from_secs(20);
    while (!running_with(&mark).is_empty() || spawners.iter().any(|p| alive(*p)))
        && killed.elapsed() < bound
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = running_with(&mark);
    for pid in &left {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    println!("gone {:?} after SIGKILL of keel", killed.elapsed());
    assert!(left.is_empty(), "commands outlived keel: {left:?}");
    assert!(
        !spawners.iter().any(|p| alive(*p)),
        "the spawner outlived keel"
    );
}
