//! The bash sandbox as a command sees it: hidden credentials, read-only control files,
//! the private temp folder, no network in `read-only`, processes that end with the command,
//! keel's own environment out of reach, and the Landlock-only fallback. Each test runs in
//! its own process (nextest), so a test may choose the namespace layer through the
//! environment before the sandbox's one-time probe.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_agent::AgentTool;
use keel_protocol::ContentBlock;
use keel_sandbox as sandbox;
use keel_tools::bash::Bash;
use keel_tools::{EnvMode, SandboxMode, ToolEnv};
use serde_json::json;

const CANARY: &str = "KEELCANARY-sandbox-7f3a";

/// A fake home with canary credentials and a workspace beside it, outside the system temp
/// folders (which `workspace-write` may write, and so read).
struct Fixture {
    _dir: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
}

/// Where fixtures live: the build's temp folder, unless it lies in the system temp folder.
/// A sandboxed command gets a private `/tmp`, and without namespaces keel refuses to hide
/// credentials in a folder commands may write, so a fake home there would test neither; the
/// fixtures then go to keel's cache folder in the real home.
fn fixture_root() -> PathBuf {
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let target = target.canonicalize().unwrap_or(target);
    let system = std::env::temp_dir();
    let system = system.canonicalize().unwrap_or(system);
    if !target.starts_with(&system) && !target.starts_with("/tmp") {
        return target;
    }
    let home = PathBuf::from(std::env::var_os("HOME").expect("HOME is set"));
    let root = home.join(".cache/keel/test-fixtures");
    std::fs::create_dir_all(&root).unwrap();
    root
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir_in(fixture_root()).unwrap();
    let base = dir.path().canonicalize().unwrap();
    let home = base.join("home");
    let ws = base.join("ws");
    for sub in [".ssh", ".aws", ".config/gcloud", ".keel", ".docker"] {
        std::fs::create_dir_all(home.join(sub)).unwrap();
    }
    std::fs::write(home.join(".ssh/id_rsa"), format!("{CANARY}-ssh")).unwrap();
    std::fs::write(home.join(".aws/credentials"), format!("{CANARY}-aws")).unwrap();
    std::fs::write(home.join(".netrc"), format!("{CANARY}-netrc")).unwrap();
    std::fs::write(home.join(".docker/config.json"), format!("{CANARY}-docker")).unwrap();
    std::fs::write(home.join(".keel/config.yaml"), format!("# {CANARY}-keel")).unwrap();
    std::fs::write(home.join("notes.txt"), "readable").unwrap();
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::write(ws.join(".git/config"), "[core]\n\tbare = false\n").unwrap();
    std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    Fixture {
        _dir: dir,
        home,
        ws,
    }
}

fn tool(fx: &Fixture, mode: SandboxMode, adjust: impl FnOnce(&mut ToolEnv)) -> Bash {
    let mut env = ToolEnv::new(fx.ws.clone());
    env.home = Some(fx.home.clone());
    env.keel_home = Some(fx.home.join(".keel"));
    env.output_dir = fx.ws.join("../out");
    env.sandbox = mode;
    env.env_mode = Some(EnvMode::Scrub);
    let mut vars: Vec<(String, String)> = std::env::vars().filter(|(k, _)| k != "HOME").collect();
    vars.push(("HOME".into(), fx.home.to_string_lossy().into_owned()));
    env.base_env = Some(vars);
    adjust(&mut env);
    Bash::new(Arc::new(env))
}

/// What the model would read: the output, or the error that stopped the command.
async fn sh(bash: &Bash, command: &str) -> String {
    match bash
        .execute(json!({"command": command}), common::context())
        .await
    {
        Ok(out) => out
            .content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect(),
        Err(e) => e.message,
    }
}

/// Whether the namespace layer works here. Where it does not, what a test checks is not
/// promised, and keel must say so: that is checked instead.
fn namespaces() -> bool {
    match &sandbox::support().namespaces {
        Ok(_) => true,
        Err(why) => {
            eprintln!("namespaces unavailable: {why}");
            let note = sandbox::support()
                .degraded(SandboxMode::WorkspaceWrite)
                .unwrap_or_default();
            assert!(
                note.contains("can outlive keel"),
                "the fallback must say what is weaker: {note}"
            );
            false
        }
    }
}

/// Whether Landlock works here. Where it does not, a sandboxed command must not run: that
/// is checked instead.
async fn landlock() -> bool {
    if sandbox::support().landlock.is_ok() {
        return true;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut env = ToolEnv::new(dir.path().canonicalize().unwrap());
    env.sandbox = SandboxMode::WorkspaceWrite;
    let bash = Bash::new(Arc::new(env));
    let refused = bash
        .execute(json!({"command": "true"}), common::context())
        .await;
    let message = refused.err().map(|e| e.message).unwrap_or_default();
    assert!(message.contains("cannot be enforced here"), "{message}");
    false
}

#[tokio::test]
async fn credential_locations_are_unreadable_in_every_form() {
    if !landlock().await {
        return;
    }
    let fx = fixture();
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
        let bash = tool(&fx, mode, |_| {});
        let out = sh(
            &bash,
            "cat ~/.ssh/id_rsa ~/.aws/credentials ~/.netrc ~/.docker/config.json ~/.keel/config.yaml; \
             cat ~/.ss?/id_*; cat {~/.ssh/id_rsa,/dev/null}; echo ~/.aws/credentials | xargs cat; \
             find ~ -name id_rsa -exec cat {} +; ln -s ~ home && cat home/.ssh/id_rsa; \
             cat home/../home/.ssh/id_rsa; python3 -c \"print(open('$HOME/.ssh/id_rsa').read())\"; \
             grep -r KEELCANARY ~; tar cf - ~/.ssh 2>/dev/null | strings; cat ~/notes.txt",
        )
        .await;
        if mode == SandboxMode::ReadOnly && !namespaces() {
            assert!(out.contains("cannot be enforced here"), "{out}");
            continue;
        }
        assert!(!out.contains(CANARY), "{mode:?} leaked: {out}");
        assert!(
            out.contains("readable"),
            "{mode:?}: other files stay readable: {out}"
        );
        let _ = std::fs::remove_file(fx.ws.join("home"));
    }
}

#[tokio::test]
async fn control_files_cannot_be_changed_and_new_ones_are_moved_aside() {
    if !landlock().await {
        return;
    }
    let fx = fixture();
    let bash = tool(&fx, SandboxMode::WorkspaceWrite, |_| {});
    let out = sh(
        &bash,
        "echo '[core]' > .git/config; echo x > .git/hooks/pre-commit; chmod +x .git/hooks/x; \
         mv .git .git2; rm -rf .git/hooks; echo '{}' > .mcp.json; mkdir -p .keel .claude; \
         echo 'sandbox: danger-full-access' > .keel/config.yaml; echo '{}' > .claude/settings.local.json; \
         echo fine > src.txt",
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(fx.ws.join(".git/config")).unwrap(),
        "[core]\n\tbare = false\n"
    );
    assert!(!fx.ws.join(".git/hooks/pre-commit").exists(), "{out}");
    assert!(fx.ws.join(".git/HEAD").exists());
    for created in [".mcp.json", ".keel", ".claude/settings.local.json"] {
        assert!(!fx.ws.join(created).exists(), "{created} stayed: {out}");
    }
    assert!(fx.ws.join(".mcp.json.keel-quarantine").exists());
    assert!(out.contains("moved aside control files"), "{out}");
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("src.txt")).unwrap(),
        "fine\n"
    );

    // In `full` permission mode the control files are the model's to change.
    let full = tool(&fx, SandboxMode::WorkspaceWrite, |env| {
        env.protect_control = false;
    });
    sh(&full, "echo '# changed' >> .git/config").await;
    assert!(
        std::fs::read_to_string(fx.ws.join(".git/config"))
            .unwrap()
            .contains("# changed")
    );
}

#[tokio::test]
async fn read_only_writes_only_its_private_temp_folder_and_has_no_network() {
    if !landlock().await {
        return;
    }
    let fx = fixture();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let marker = format!("keel-ro-{}", std::process::id());
    let bash = tool(&fx, SandboxMode::ReadOnly, |_| {});
    let out = sh(
        &bash,
        &format!(
            "echo x > /tmp/{marker}; echo x > /var/tmp/{marker}; echo x > /dev/shm/{marker}; \
             echo x > ws.txt; echo ok > $TMPDIR/t && cat $TMPDIR/t; stat -c 'tmp-mode=%a' $TMPDIR; \
             (exec 3<>/dev/tcp/127.0.0.1/{port}) && echo CONNECTED; \
             python3 -c \"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {port}))\" && echo SENT"
        ),
    )
    .await;
    if !namespaces() {
        assert!(out.contains("cannot be enforced here"), "{out}");
        return;
    }
    for dir in ["/tmp", "/var/tmp", "/dev/shm"] {
        assert!(!Path::new(dir).join(&marker).exists(), "{dir}: {out}");
    }
    assert!(!fx.ws.join("ws.txt").exists(), "{out}");
    assert!(out.contains("ok"), "{out}");
    assert!(
        out.contains("tmp-mode=700"),
        "the session's temp folder is private: {out}"
    );
    assert!(!out.contains("CONNECTED") && !out.contains("SENT"), "{out}");
    listener.set_nonblocking(true).unwrap();
    assert!(listener.accept().is_err(), "a connection got through");

    // workspace-write reaches the machine's network only where every host is allowed
    // (tests/network.rs holds the proxy's own rows).
    let open = tool(&fx, SandboxMode::WorkspaceWrite, |env| {
        env.network = keel_tools::netproxy::NetworkRules::new(["*".to_owned()], []);
    });
    let out = sh(
        &open,
        &format!("(exec 3<>/dev/tcp/127.0.0.1/{port}) && echo CONNECTED"),
    )
    .await;
    assert!(out.contains("CONNECTED"), "{out}");
}

fn running_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(marker) {
                found.push(format!(
                    "{}: {cmdline}",
                    entry.file_name().to_string_lossy()
                ));
            }
        }
    }
    found
}

#[tokio::test]
async fn nothing_a_command_starts_outlives_it() {
    if !landlock().await || !namespaces() {
        return;
    }
    let fx = fixture();
    let bash = tool(&fx, SandboxMode::WorkspaceWrite, |_| {});
    let out = sh(
        &bash,
        "(setsid sleep 3131 &); nohup sleep 3132 >/dev/null 2>&1 & disown; \
         setsid -f sleep 3133; (sleep 3134 &) ; echo started",
    )
    .await;
    assert!(out.contains("started"), "{out}");
    // The namespace ends with its first process; give the kernel a moment to reap.
    std::thread::sleep(std::time::Duration::from_millis(200));
    for marker in ["sleep 3131", "sleep 3132", "sleep 3133", "sleep 3134"] {
        let left = running_with(marker);
        for line in &left {
            let pid: i32 = line.split(':').next().unwrap().parse().unwrap();
            let _ = std::process::Command::new("kill")
                .arg("-9")
                .arg(pid.to_string())
                .status();
        }
        assert!(left.is_empty(), "{marker} survived: {left:?}");
    }
}

#[tokio::test]
async fn keel_and_other_processes_are_out_of_sight() {
    if !landlock().await || !namespaces() {
        return;
    }
    let fx = fixture();
    let bash = tool(&fx, SandboxMode::WorkspaceWrite, |_| {});
    let out = sh(
        &bash,
        "echo ppid=$PPID; ls /proc | grep -c '^[0-9]'; cat /proc/1/cmdline | tr '\\0' ' '",
    )
    .await;
    assert!(out.contains("ppid=0"), "{out}");
    let count: usize = out
        .lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(usize::MAX);
    assert!(count < 10, "the command sees {count} processes: {out}");
}

#[tokio::test]
async fn the_provider_key_never_reaches_a_command_even_with_cleaning_off() {
    let fx = fixture();
    let bash = tool(&fx, SandboxMode::DangerFullAccess, |env| {
        env.env_mode = Some(EnvMode::Off);
        env.secret_env_names = vec!["KEEL_TEST_PROVIDER_KEY".into()];
        env.base_env = Some(vec![
            ("PATH".into(), std::env::var("PATH").unwrap()),
            (
                "KEEL_TEST_PROVIDER_KEY".into(),
                format!("{CANARY}-provider"),
            ),
        ]);
    });
    let out = sh(&bash, "env").await;
    assert!(!out.contains(CANARY), "{out}");
}

#[tokio::test]
async fn the_landlock_only_fallback_still_hides_credentials_and_says_what_is_weaker() {
    #[expect(
        unsafe_code,
        reason = "set before any thread of this test process reads it"
    )]
    // SAFETY: this test's process sets the variable before the sandbox's probe reads it.
    unsafe {
        std::env::set_var(sandbox::NAMESPACES_VARIABLE, "off");
    }
    if !landlock().await {
        return;
    }
    assert!(sandbox::support().namespaces.is_err());
    let fx = fixture();
    let bash = tool(&fx, SandboxMode::WorkspaceWrite, |_| {});
    let out = sh(
        &bash,
        "cat ~/.ssh/id_rsa ~/.netrc ~/.aws/credentials; cat ~/notes.txt; ls ~/.ssh; echo x > ../outside",
    )
    .await;
    assert!(!out.contains(CANARY), "{out}");
    assert!(out.contains("readable"), "{out}");
    assert!(!fx.ws.join("../outside").exists());
    assert!(out.contains("Landlock alone"), "{out}");
    let again = sh(&bash, "true").await;
    assert!(!again.contains("Landlock alone"), "said once: {again}");

    let read_only = tool(&fx, SandboxMode::ReadOnly, |_| {});
    let out = sh(&read_only, "echo hi").await;
    assert!(
        out.contains("cannot be enforced here") && out.contains("namespaces"),
        "{out}"
    );
}

#[tokio::test]
async fn keels_environment_is_unreadable_without_namespaces_too() {
    #[expect(
        unsafe_code,
        reason = "set before any thread of this test process reads them"
    )]
    // SAFETY: this test's process sets the variables before anything else reads them.
    unsafe {
        std::env::set_var(sandbox::NAMESPACES_VARIABLE, "off");
        // On the `scrub` list, so the command's own environment lacks it: only keel's has it.
        std::env::set_var("OPENAI_API_KEY", format!("{CANARY}-environ"));
    }
    if !landlock().await {
        return;
    }
    assert!(sandbox::make_undumpable());
    let fx = fixture();
    let bash = tool(&fx, SandboxMode::WorkspaceWrite, |_| {});
    let out = sh(
        &bash,
        "cat /proc/$PPID/environ; tr '\\0' '\\n' < /proc/$PPID/environ; head -c 64 /proc/$PPID/mem; \
         for f in /proc/[0-9]*/environ; do cat $f; done 2>/dev/null | tr '\\0' '\\n' | grep KEELCANARY",
    )
    .await;
    assert!(!out.contains(CANARY), "{out}");
}

#[tokio::test]
async fn hard_links_never_make_an_outside_file_writable() {
    if !landlock().await {
        return;
    }
    let fx = fixture();
    let outside = fx.ws.join("../outside.txt");
    std::fs::write(&outside, "original").unwrap();
    let bash = tool(&fx, SandboxMode::WorkspaceWrite, |_| {});
    let out = sh(
        &bash,
        "ln ../outside.txt inside.txt; echo changed >> inside.txt; ln /etc/hostname h2; ln -s ../outside.txt s && echo changed >> s",
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(&outside).unwrap(),
        "original",
        "{out}"
    );
}

/// Which part of [`a_command_cannot_type_into_keels_terminal`] this process plays.
const TTY_ROLE: &str = "KEEL_TEST_TTY_ROLE";
/// What the command tries to push into the terminal's input.
const TYPED: &[u8] = b"touch keel-typed\n";

/// Regression: `/dev/tty` was writable with every device right, so a command could push
/// characters into the input of keel's terminal (`TIOCSTI`), which the user's shell ran,
/// unsandboxed, once keel ended. The test plays three parts, chosen by [`TTY_ROLE`]: the
/// test itself gives a terminal to a copy of this test (`keel`) that runs, sandboxed, a
/// third copy (`type`) that tries to type; then the terminal's input must be empty.
#[tokio::test]
async fn a_command_cannot_type_into_keels_terminal() {
    match std::env::var(TTY_ROLE).as_deref() {
        Ok("type") => return type_into_the_terminal(),
        Ok("keel") => return run_the_typist().await,
        _ => {}
    }
    if !landlock().await {
        return;
    }
    #[expect(unsafe_code, reason = "asking the kernel for its Landlock version")]
    // SAFETY: the version query takes no pointer.
    let abi = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, 0usize, 0usize, 1u32) };
    if abi < 5 {
        // Device ioctls are only Landlock's to refuse from ABI 5 (Linux 6.10).
        eprintln!("Landlock ABI {abi}: device ioctls are not restricted here");
        return;
    }
    let (mut master, mut slave) = (0, 0);
    #[expect(unsafe_code, reason = "a pseudo-terminal for the test")]
    // SAFETY: openpty fills the two descriptors; the rest may be null.
    let opened = unsafe {
        libc::openpty(
            &raw mut master,
            &raw mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(opened, 0, "openpty: {}", std::io::Error::last_os_error());
    // Raw, so every typed byte counts as input at once.
    #[expect(unsafe_code, reason = "terminal attributes")]
    // SAFETY: a termios read from and written back to the descriptor just opened.
    unsafe {
        let mut attrs: libc::termios = std::mem::zeroed();
        assert_eq!(libc::tcgetattr(slave, &raw mut attrs), 0);
        libc::cfmakeraw(&raw mut attrs);
        assert_eq!(libc::tcsetattr(slave, libc::TCSANOW, &raw const attrs), 0);
    }
    let mut keel = std::process::Command::new(std::env::current_exe().unwrap());
    keel.args([
        "--exact",
        "a_command_cannot_type_into_keels_terminal",
        "--nocapture",
    ])
    .env(TTY_ROLE, "keel");
    #[expect(unsafe_code, reason = "giving the child the terminal")]
    // SAFETY: setsid and ioctl with integer arguments, between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut keel, move || {
            if libc::setsid() < 0 || libc::ioctl(slave, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let output = keel.output().unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{report}");
    let mut waiting: libc::c_int = 0;
    #[expect(unsafe_code, reason = "how much input the terminal holds")]
    // SAFETY: FIONREAD writes one int; both descriptors are closed after.
    unsafe {
        assert_eq!(libc::ioctl(slave, libc::FIONREAD, &raw mut waiting), 0);
        libc::close(slave);
        libc::close(master);
    }
    assert_eq!(
        waiting, 0,
        "the command typed into keel's terminal: {report}"
    );
}

/// The `keel` part: a sandboxed command runs the `type` part, in this process's terminal.
async fn run_the_typist() {
    let fx = fixture();
    let bash = tool(&fx, SandboxMode::WorkspaceWrite, |_| {});
    // The command must see this test binary: a build in the system temp folder is behind the
    // command's private `/tmp`, so a copy goes into the workspace.
    let exe = std::env::current_exe().unwrap();
    let exe = if exe.starts_with(std::env::temp_dir()) || exe.starts_with("/tmp") {
        let copy = fx.ws.join("typist");
        std::fs::copy(&exe, &copy).unwrap();
        copy
    } else {
        exe
    };
    let out = sh(
        &bash,
        &format!(
            "{TTY_ROLE}=type '{}' --exact a_command_cannot_type_into_keels_terminal --nocapture",
            exe.display()
        ),
    )
    .await;
    // The typist ran and said what it could do (the test judges the terminal, not this).
    assert!(out.contains("typist:"), "{out}");
    println!("{out}");
}

/// The `type` part: pushes [`TYPED`] into the controlling terminal, as far as it may.
fn type_into_the_terminal() {
    use std::os::fd::AsRawFd as _;
    let tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .or_else(|_| std::fs::File::open("/dev/tty"));
    let Ok(tty) = tty else {
        println!("typist: cannot open /dev/tty: {tty:?}");
        return;
    };
    for byte in TYPED {
        #[expect(unsafe_code, reason = "the attack under test")]
        // SAFETY: TIOCSTI reads one byte from a valid pointer.
        let done = unsafe { libc::ioctl(tty.as_raw_fd(), libc::TIOCSTI, byte) };
        if done != 0 {
            println!(
                "typist: TIOCSTI refused: {}",
                std::io::Error::last_os_error()
            );
            return;
        }
    }
    println!("typist: typed");
}

#[tokio::test]
async fn session_sockets_and_terminals_are_out_of_reach() {
    if !landlock().await || !namespaces() {
        return;
    }
    let fx = fixture();
    // A server socket of the user's session outside the workspace, as tmux makes one.
    let dir = std::path::PathBuf::from(format!("/tmp/keel-sock-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("default");
    let _ = std::fs::remove_file(&socket);
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    // One of the workspace's own stays reachable.
    let own = fx.ws.join("app.sock");
    let _own = std::os::unix::net::UnixListener::bind(&own).unwrap();
    let bash = tool(&fx, SandboxMode::WorkspaceWrite, |_| {});
    let out = sh(
        &bash,
        &format!(
            "[ -S {} ] && echo SESSION-SOCKET; [ -S app.sock ] && echo OWN-SOCKET; \
             ls /dev/pts | grep -v ptmx | grep . && echo OTHER-TERMINALS; \
             tty; (exec 3<>/dev/tty) 2>/dev/null && echo CONTROLLING-TERMINAL; echo end",
            socket.display()
        ),
    )
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.contains("end"), "{out}");
    assert!(!out.contains("SESSION-SOCKET"), "{out}");
    assert!(out.contains("OWN-SOCKET"), "{out}");
    assert!(!out.contains("OTHER-TERMINALS"), "{out}");
    assert!(!out.contains("CONTROLLING-TERMINAL"), "{out}");
    assert!(out.contains("not a tty"), "{out}");
}

#[tokio::test]
async fn descriptors_keel_inherited_do_not_reach_commands() {
    if !landlock().await {
        return;
    }
    let fx = fixture();
    let secret = fx.home.join("inherited.txt");
    std::fs::write(&secret, "x").unwrap();
    let file = std::fs::File::open(&secret).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
    #[expect(
        unsafe_code,
        reason = "clearing close-on-exec to play a descriptor keel inherited"
    )]
    // SAFETY: fcntl on a descriptor this test owns.
    unsafe {
        libc::fcntl(fd, libc::F_SETFD, 0);
    }
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
        let bash = tool(&fx, mode, |_| {});
        let out = sh(
            &bash,
            "for f in /proc/self/fd/*; do readlink $f; done; echo end",
        )
        .await;
        if mode == SandboxMode::ReadOnly && !namespaces() {
            continue;
        }
        assert!(out.contains("end"), "{out}");
        assert!(!out.contains("inherited.txt"), "{mode:?}: {out}");
    }
    drop(file);
}

#[tokio::test]
async fn without_namespaces_control_files_are_put_back_after_the_command() {
    #[expect(
        unsafe_code,
        reason = "set before any thread of this test process reads it"
    )]
    // SAFETY: this test's process sets the variable before the sandbox's probe reads it.
    unsafe {
        std::env::set_var(sandbox::NAMESPACES_VARIABLE, "off");
    }
    if !landlock().await {
        return;
    }
    let fx = fixture();
    let bash = tool(&fx, SandboxMode::WorkspaceWrite, |_| {});
    let out = sh(
        &bash,
        "printf '[core]\\n\\tfsmonitor = evil\\n' > .git/config; echo '#!/bin/sh' > .git/hooks/pre-commit; \
         chmod +x .git/hooks/pre-commit; echo '{}' > .mcp.json; echo done",
    )
    .await;
    assert!(out.contains("done"), "{out}");
    assert_eq!(
        std::fs::read_to_string(fx.ws.join(".git/config")).unwrap(),
        "[core]\n\tbare = false\n",
        "{out}"
    );
    assert!(!fx.ws.join(".git/hooks/pre-commit").exists(), "{out}");
    assert!(!fx.ws.join(".mcp.json").exists(), "{out}");
    assert!(out.contains("undid"), "{out}");
}

#[tokio::test]
async fn modes_owners_and_times_outside_the_workspace_stay_as_they_are() {
    if !landlock().await || !namespaces() {
        return;
    }
    let fx = fixture();
    let outside = fx.ws.join("../outside.txt");
    std::fs::write(&outside, "x").unwrap();
    let before = std::fs::metadata(&outside).unwrap();
    let bash = tool(&fx, SandboxMode::WorkspaceWrite, |_| {});
    let out = sh(
        &bash,
        "chmod 777 ../outside.txt; touch -d 2001-01-01 ../outside.txt; chown 1:1 ../outside.txt; \
         touch inside.txt && chmod 600 inside.txt && echo inside-ok",
    )
    .await;
    let after = std::fs::metadata(&outside).unwrap();
    use std::os::unix::fs::MetadataExt as _;
    assert_eq!(before.mode(), after.mode(), "{out}");
    assert_eq!(before.mtime(), after.mtime(), "{out}");
    assert_eq!(before.uid(), after.uid(), "{out}");
    assert!(out.contains("inside-ok"), "{out}");
}

#[tokio::test]
async fn tmp_is_the_sessions_own_and_saved_outputs_are_read_only() {
    if !landlock().await || !namespaces() {
        return;
    }
    // A file another program keeps in the real /tmp.
    let theirs = PathBuf::from(format!("/tmp/keel-theirs-{}", std::process::id()));
    std::fs::write(&theirs, "someone else's").unwrap();
    // A workspace that itself lies under /tmp stays where it is.
    let ws = tempfile::tempdir_in("/tmp").unwrap();
    let ws_path = ws.path().canonicalize().unwrap();
    let outputs = tempfile::tempdir_in("/tmp").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(outputs.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(outputs.path().join("old.log"), "saved").unwrap();
    let mut env = ToolEnv::new(ws_path.clone());
    env.output_dir = outputs.path().to_path_buf();
    env.sandbox = SandboxMode::WorkspaceWrite;
    env.env_mode = Some(EnvMode::Scrub);
    let bash = Bash::new(Arc::new(env));
    let out = sh(
        &bash,
        &format!(
            "echo TMPDIR=$TMPDIR; cat {} || echo HIDDEN; echo mine > /tmp/mine && cat /tmp/mine; \
             echo ws > in-ws.txt && cat in-ws.txt; cat {out}/old.log; echo x > {out}/new.log || echo OUTPUTS-READ-ONLY; \
             mv {out} {out}.moved || echo OUTPUTS-PINNED",
            theirs.display(),
            out = outputs.path().display()
        ),
    )
    .await;
    let _ = std::fs::remove_file(&theirs);
    assert!(out.contains("TMPDIR=/tmp"), "{out}");
    assert!(
        out.contains("HIDDEN") && !out.contains("someone else's"),
        "{out}"
    );
    assert!(out.contains("mine"), "{out}");
    assert_eq!(
        std::fs::read_to_string(ws_path.join("in-ws.txt")).unwrap(),
        "ws\n"
    );
    assert!(out.contains("saved"), "{out}");
    assert!(
        out.contains("OUTPUTS-READ-ONLY") && out.contains("OUTPUTS-PINNED"),
        "{out}"
    );
    assert!(!outputs.path().join("new.log").exists());
    assert!(
        !PathBuf::from("/tmp/mine").exists(),
        "the command's /tmp is its own"
    );
}
