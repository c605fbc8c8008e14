//! keel-shell's analyser on arbitrary command lines: it must never panic, and analysing the
//! same line twice must say the same (it reads nothing but the line and the environment).
#![no_main]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use keel_shell::shell::{ShellEnv, analyze};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else { return };
    let env = ShellEnv {
        home: Some(PathBuf::from("/home/u")),
        vars: HashMap::from([("PATH".to_owned(), "/usr/bin:/bin".to_owned())]),
    };
    let first = analyze(line, Some(Path::new("/ws")), &env);
    let second = analyze(line, Some(Path::new("/ws")), &env);
    assert_eq!(format!("{first:?}"), format!("{second:?}"));
});
