//! The attack tables, one module per class of vector, each split into tables small enough
//! to run as one test per mode.

pub mod beyond;
pub mod control;
pub mod creds;
pub mod env;
pub mod gitrun;
pub mod home;
pub mod network;
pub mod outside;
pub mod plan;
pub mod process;
pub mod races;
pub mod readonly;
pub mod tasks;
pub mod tools;
pub mod trust;

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::run::Vector;

    /// Every table the cases run, by class name.
    pub const ALL: &[(&str, &[Vector])] = &[
        ("creds_plain", creds::PLAIN),
        ("creds_indirect", creds::INDIRECT),
        ("creds_roundabout", creds::ROUNDABOUT),
        ("creds_tools", tools::TABLE),
        ("env", env::TABLE),
        ("env_strict", env::STRICT),
        ("outside_shell", outside::SHELL),
        ("outside_home", outside::HOME),
        ("outside_tools", outside::TOOLS),
        ("control_tools", control::TOOLS),
        ("control_shell", control::SHELL),
        ("plan_file", plan::TABLE),
        ("readonly_temp", readonly::TEMP),
        ("readonly_git", readonly::GIT),
        ("readonly_workspace", readonly::WORKSPACE),
        ("network_shell", network::SHELL),
        ("network_fetch", network::FETCH),
        ("process_escapes", process::ESCAPES),
        ("process_signals", process::SIGNALS),
        ("process_duplicate_ids", process::DUPLICATE_IDS),
        ("tool_races", races::TABLE),
        ("control_git_elsewhere", gitrun::TABLE),
        ("beyond_namespaces", beyond::TABLE),
        ("fallback", beyond::FALLBACK),
        ("tasks", tasks::TABLE),
        ("trusted_code", trust::TRUSTED_CODE),
        ("trusted_code_forms", trust::TRUSTED_FORMS_TABLE),
        ("foreign_project_files", trust::FOREIGN),
        ("project_named_pipes", trust::PIPES_TABLE),
        ("command_shadowing", trust::SHADOWING),
        ("prompt_injection", trust::INJECTION),
        ("home_refused", home::REFUSED),
        ("home_added_folders", home::ADDED_FOLDERS),
        ("home_start_up_files", home::START_UP_FILES),
    ];

    #[test]
    fn the_suite_has_at_least_220_vectors_with_unique_ids() {
        let ids: Vec<&str> = ALL
            .iter()
            .flat_map(|(_, table)| table.iter().map(|v| v.id))
            .collect();
        let unique: BTreeSet<&str> = ids.iter().copied().collect();
        assert_eq!(unique.len(), ids.len(), "duplicate vector ids");
        assert!(ids.len() >= 220, "only {} vectors", ids.len());
        assert!(
            ALL.iter()
                .all(|(_, t)| t.iter().all(|v| !v.steps.is_empty()))
        );
    }
}
