//! What the console allows: an authorizer verdict for every operation SQLite asks about while
//! preparing (and running) a statement, naming each refused one.

use anyhow::anyhow;
use rusqlite::hooks::{AuthAction, TransactionOperation};

/// Pragmas that only report on the schema, the file or the connection; an argument names an
/// object (`PRAGMA table_info(symbols)`) or a limit and never changes anything. SQLite itself
/// runs some of them inside other statements (FTS5 reads `data_version` on every query).
pub(super) const INSPECTION_PRAGMAS: &[&str] = &[
    "collation_list",
    "compile_options",
    "data_version",
    "database_list",
    "foreign_key_check",
    "foreign_key_list",
    "freelist_count",
    "function_list",
    "index_info",
    "index_list",
    "index_xinfo",
    "integrity_check",
    "module_list",
    "page_count",
    "pragma_list",
    "quick_check",
    "table_info",
    "table_list",
    "table_xinfo",
];

/// Setting pragmas that may be read (no argument) but not assigned.
pub(super) const READABLE_SETTING_PRAGMAS: &[&str] = &[
    "analysis_limit",
    "application_id",
    "auto_vacuum",
    "automatic_index",
    "busy_timeout",
    "cache_size",
    "cache_spill",
    "cell_size_check",
    "defer_foreign_keys",
    "encoding",
    "foreign_keys",
    "hard_heap_limit",
    "ignore_check_constraints",
    "journal_size_limit",
    "legacy_alter_table",
    "locking_mode",
    "max_page_count",
    "mmap_size",
    "page_size",
    "query_only",
    "recursive_triggers",
    "reverse_unordered_selects",
    "schema_version",
    "secure_delete",
    "soft_heap_limit",
    "synchronous",
    "temp_store",
    "threads",
    "trusted_schema",
    "user_version",
    "wal_autocheckpoint",
];

/// The console's verdict on one operation SQLite asks about while preparing a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Reading: allowed.
    Allow,
    /// Refused at once; the text names the operation.
    Refuse(String),
    /// A write to the schema table. SQLite asks about it before the operation that needs it
    /// (CREATE, DROP, ANALYZE), so preparing goes on until that operation is refused by name;
    /// the statement is refused either way.
    RefuseLater(String),
}

/// Decides whether the console may do `action`.
pub fn authorize(action: &AuthAction<'_>) -> Verdict {
    use AuthAction as A;
    let refused = match *action {
        A::Select | A::Read { .. } | A::Recursive => return Verdict::Allow,
        A::Function { function_name } if !function_name.eq_ignore_ascii_case("load_extension") => {
            return Verdict::Allow
        }
        A::Function { function_name } => format!("the function {function_name}()"),
        A::Pragma {
            pragma_name,
            pragma_value,
        } => {
            let listed = |list: &[&str]| list.iter().any(|p| p.eq_ignore_ascii_case(pragma_name));
            match pragma_value {
                _ if listed(INSPECTION_PRAGMAS) => return Verdict::Allow,
                None if listed(READABLE_SETTING_PRAGMAS) => return Verdict::Allow,
                None => format!("PRAGMA {pragma_name}"),
                Some(value) => format!("PRAGMA {pragma_name} = {value}"),
            }
        }
        A::Insert { table_name } => format!("INSERT into {table_name}"),
        A::Update {
            table_name,
            column_name,
        } => format!("UPDATE of {table_name}.{column_name}"),
        A::Delete { table_name } => format!("DELETE from {table_name}"),
        A::CreateTable { table_name } => format!("CREATE TABLE {table_name}"),
        A::CreateTempTable { table_name } => format!("CREATE TEMP TABLE {table_name}"),
        A::CreateIndex {
            index_name,
            table_name,
        } => {
            format!("CREATE INDEX {index_name} on {table_name}")
        }
        A::CreateTempIndex {
            index_name,
            table_name,
        } => {
            format!("CREATE TEMP INDEX {index_name} on {table_name}")
        }
        A::CreateView { view_name } => format!("CREATE VIEW {view_name}"),
        A::CreateTempView { view_name } => format!("CREATE TEMP VIEW {view_name}"),
        A::CreateTrigger {
            trigger_name,
            table_name,
        } => {
            format!("CREATE TRIGGER {trigger_name} on {table_name}")
        }
        A::CreateTempTrigger {
            trigger_name,
            table_name,
        } => {
            format!("CREATE TEMP TRIGGER {trigger_name} on {table_name}")
        }
        A::CreateVtable {
            table_name,
            module_name,
        } => {
            format!("CREATE VIRTUAL TABLE {table_name} USING {module_name}")
        }
        A::DropTable { table_name } => format!("DROP TABLE {table_name}"),
        A::DropTempTable { table_name } => format!("DROP TEMP TABLE {table_name}"),
        A::DropIndex { index_name, .. } => format!("DROP INDEX {index_name}"),
        A::DropTempIndex { index_name, .. } => format!("DROP TEMP INDEX {index_name}"),
        A::DropView { view_name } => format!("DROP VIEW {view_name}"),
        A::DropTempView { view_name } => format!("DROP TEMP VIEW {view_name}"),
        A::DropTrigger { trigger_name, .. } => format!("DROP TRIGGER {trigger_name}"),
        A::DropTempTrigger { trigger_name, .. } => format!("DROP TEMP TRIGGER {trigger_name}"),
        A::DropVtable { table_name, .. } => format!("DROP VIRTUAL TABLE {table_name}"),
        A::AlterTable { table_name, .. } => format!("ALTER TABLE {table_name}"),
        A::Attach { filename } => format!("ATTACH '{filename}'"),
        A::Detach { database_name } => format!("DETACH {database_name}"),
        A::Reindex { index_name } => format!("REINDEX {index_name}"),
        A::Analyze { table_name } => format!("ANALYZE {table_name}"),
        A::Transaction { operation } => {
            format!("{} (transaction control)", operation_name(operation))
        }
        A::Savepoint {
            operation,
            savepoint_name,
        } => match operation {
            TransactionOperation::Begin => format!("SAVEPOINT {savepoint_name}"),
            other => format!(
                "{} {savepoint_name} (transaction control)",
                operation_name(other)
            ),
        },
        A::Unknown {
            code: rusqlite::ffi::SQLITE_ATTACH,
            ..
        } => "ATTACH".to_owned(),
        A::Unknown {
            code: rusqlite::ffi::SQLITE_DETACH,
            ..
        } => "DETACH".to_owned(),
        A::Unknown { code, .. } => {
            format!("an operation SQLite reports with authorizer code {code}")
        }
        _ => format!("{action:?}"),
    };
    match *action {
        A::Insert { table_name } | A::Update { table_name, .. } | A::Delete { table_name }
            if is_schema_table(table_name) =>
        {
            Verdict::RefuseLater(refused)
        }
        _ => Verdict::Refuse(refused),
    }
}

/// Whether `name` is the schema table (`sqlite_master` or one of its aliases).
pub(super) fn is_schema_table(name: &str) -> bool {
    [
        "sqlite_master",
        "sqlite_schema",
        "sqlite_temp_master",
        "sqlite_temp_schema",
    ]
    .iter()
    .any(|schema| schema.eq_ignore_ascii_case(name))
}

/// The statement keyword of a transaction operation.
pub(super) fn operation_name(operation: TransactionOperation) -> &'static str {
    match operation {
        TransactionOperation::Begin => "BEGIN",
        TransactionOperation::Rollback => "ROLLBACK",
        TransactionOperation::Release => "RELEASE",
        _ => "COMMIT",
    }
}

/// The error for a refused operation.
pub(super) fn refusal(what: &str) -> anyhow::Error {
    anyhow!(
        "refused: acpdb sql is read-only ({what} is not allowed); use `acpdb import` to rebuild \
         the index"
    )
}
