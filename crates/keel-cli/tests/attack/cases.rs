//! One test per table and mode, so nextest spreads the runs over the cores.

use crate::run::{Mode, run_table};
use crate::vectors::{
    beyond, control, creds, env, gitrun, network, outside, process, races, readonly, tools,
};

macro_rules! table {
    ($name:ident, $table:expr) => {
        mod $name {
            use super::*;

            #[test]
            fn ask() {
                run_table(stringify!($name), $table, Mode::Ask);
            }

            #[test]
            fn auto() {
                run_table(stringify!($name), $table, Mode::Auto);
            }

            #[test]
            fn plan() {
                run_table(stringify!($name), $table, Mode::Plan);
            }
        }
    };
}

table!(creds_plain, creds::PLAIN);
table!(creds_indirect, creds::INDIRECT);
table!(creds_roundabout, creds::ROUNDABOUT);
table!(creds_tools, tools::TABLE);
table!(env_default, env::TABLE);
table!(env_strict, env::STRICT);
table!(outside_shell, outside::SHELL);
table!(outside_home, outside::HOME);
table!(outside_tools, outside::TOOLS);
table!(control_tools, control::TOOLS);
table!(control_shell, control::SHELL);
table!(readonly_temp, readonly::TEMP);
table!(readonly_git, readonly::GIT);
table!(readonly_workspace, readonly::WORKSPACE);
table!(network_shell, network::SHELL);
table!(network_fetch, network::FETCH);
table!(process_escapes, process::ESCAPES);
table!(process_signals, process::SIGNALS);
table!(process_duplicate_ids, process::DUPLICATE_IDS);
table!(tool_races, races::TABLE);
table!(control_git_elsewhere, gitrun::TABLE);
table!(beyond_namespaces, beyond::TABLE);
table!(fallback, beyond::FALLBACK);

/// A table run in `full` only: the model may change control files there, but credentials
/// and keel's secrets must stay hidden all the same.
macro_rules! full_table {
    ($name:ident, $table:expr) => {
        mod $name {
            use super::*;

            #[test]
            fn full() {
                run_table(stringify!($name), $table, Mode::Full);
            }
        }
    };
}

full_table!(creds_plain_full, creds::PLAIN);
full_table!(creds_indirect_full, creds::INDIRECT);
full_table!(creds_roundabout_full, creds::ROUNDABOUT);
full_table!(creds_tools_full, tools::TABLE);
full_table!(env_default_full, env::TABLE);
