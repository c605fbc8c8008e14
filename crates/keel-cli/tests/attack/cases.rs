//! One test per table and mode, so nextest spreads the runs over the cores.

use crate::run::{Mode, run_table};
use crate::vectors::{
    beyond, control, creds, env, gitrun, home, network, outside, plan, process, races, readonly,
    tasks, tools, trust,
};

macro_rules! table {
    ($name:ident, $table:expr) => {
        table!(@module $name, $table,);
    };
    // Also `auto` with the namespace layer off, for classes whose guarantees hold there too
    // (process containment, for one, does not: keel says so instead).
    ($name:ident, $table:expr, landlock) => {
        table!(@module $name, $table,
            #[test]
            fn auto_landlock_only() {
                run_table(stringify!($name), $table, Mode::AutoLandlock);
            }
        );
    };
    // Only the modes named: classes whose rows do not depend on the mode, or where `full`
    // lets the model change control files by design.
    ($name:ident, $table:expr, modes [$($mode:ident),+]) => {
        mod $name {
            use super::*;

            $(
                #[test]
                #[allow(non_snake_case)]
                fn $mode() {
                    run_table(stringify!($name), $table, Mode::$mode);
                }
            )+
        }
    };
    (@module $name:ident, $table:expr, $($extra:item)*) => {
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

            #[test]
            fn full() {
                run_table(stringify!($name), $table, Mode::Full);
            }

            #[test]
            fn plan_landlock_only() {
                run_table(stringify!($name), $table, Mode::PlanLandlock);
            }

            $($extra)*
        }
    };
}

table!(creds_plain, creds::PLAIN, landlock);
table!(creds_indirect, creds::INDIRECT, landlock);
table!(creds_roundabout, creds::ROUNDABOUT, landlock);
table!(creds_tools, tools::TABLE, landlock);
table!(env_default, env::TABLE, landlock);
table!(env_strict, env::STRICT, landlock);
table!(outside_shell, outside::SHELL, landlock);
table!(outside_home, outside::HOME, landlock);
table!(outside_tools, outside::TOOLS, landlock);
table!(control_tools, control::TOOLS, landlock);
table!(control_shell, control::SHELL, landlock);
table!(plan_file, plan::TABLE, landlock);
table!(readonly_temp, readonly::TEMP, landlock);
table!(readonly_git, readonly::GIT, landlock);
table!(readonly_workspace, readonly::WORKSPACE, landlock);
table!(network_shell, network::SHELL, landlock);
table!(network_fetch, network::FETCH, landlock);
table!(process_escapes, process::ESCAPES);
table!(process_signals, process::SIGNALS, landlock);
table!(process_duplicate_ids, process::DUPLICATE_IDS);
table!(tool_races, races::TABLE);
table!(control_git_elsewhere, gitrun::TABLE);
table!(beyond_namespaces, beyond::TABLE);
table!(fallback, beyond::FALLBACK);
table!(tasks_child_sessions, tasks::TABLE);
table!(
    trusted_code,
    trust::TRUSTED_CODE,
    modes [Ask, Auto, Plan, AutoLandlock, PlanLandlock]
);
table!(
    trusted_code_forms,
    trust::TRUSTED_FORMS_TABLE,
    modes [Ask, Auto, AutoLandlock]
);
table!(foreign_project_files, trust::FOREIGN, modes [Ask, Auto]);
table!(project_named_pipes, trust::PIPES_TABLE, modes[Auto]);
table!(command_shadowing, trust::SHADOWING, modes[Auto]);
table!(prompt_injection, trust::INJECTION, modes[Auto]);
table!(home_refused, home::REFUSED, modes[Auto]);
table!(
    home_added_folders,
    home::ADDED_FOLDERS,
    modes [Ask, Auto, Plan, Full, AutoLandlock]
);
table!(
    home_start_up_files,
    home::START_UP_FILES,
    modes [Ask, Auto, Plan, AutoLandlock, PlanLandlock]
);
