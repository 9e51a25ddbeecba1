//! `acpdb mcp-config`: the entry an MCP client needs to start acpdb on a project (or to reach an
//! acpdb HTTP server), printed, or merged into the client's own configuration file.
//!
//! Invariants: a merge keeps everything else the file holds, in its order (JSON objects are
//! read into an order-keeping value; TOML through `toml_edit`, comments included); a file that
//! cannot be read as its format is refused with the reason and left untouched; the file before
//! the merge is kept beside it as `FILE.bak`; the new file replaces the old one whole
//! ([`crate::replace::write`]), through a symbolic link to its target.

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::de::{MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Largest configuration file read.
const LARGEST_FILE: u64 = 16 << 20;

/// The MCP clients whose configuration acpdb writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Client {
    /// Claude Code: `.mcp.json` at the project root.
    ClaudeCode,
    /// Claude Desktop: `claude_desktop_config.json` in the user's configuration directory.
    ClaudeDesktop,
    /// Cursor: `.cursor/mcp.json` in the project.
    Cursor,
    /// VS Code: `.vscode/mcp.json` in the project.
    Vscode,
    /// Codex: `~/.codex/config.toml` (or `$CODEX_HOME/config.toml`).
    Codex,
}

/// Options of `acpdb mcp-config`.
#[derive(Debug, Clone, clap::Args)]
pub struct McpConfigArgs {
    /// The client to configure.
    #[arg(value_enum)]
    pub client: Client,
    /// Merge the entry into the client's file, keeping its other servers (the file before is
    /// kept as FILE.bak), instead of printing it.
    #[arg(long)]
    pub write: bool,
    /// Reach an acpdb HTTP server at this MCP endpoint (e.g. http://host:8080/mcp) instead of
    /// starting acpdb on the project.
    #[arg(long, value_name = "URL")]
    pub http: Option<String>,
    /// The server's name in the client's configuration.
    #[arg(long, default_value = "acp")]
    pub name: String,
}

/// How the client is to reach acpdb.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launch {
    /// Start `command` with `args` and talk over its stdio.
    Stdio {
        /// The acpdb binary, absolute.
        command: String,
        /// `-C <project> serve`.
        args: Vec<String>,
    },
    /// Talk to an HTTP server at this URL.
    Http(String),
}

impl Launch {
    /// acpdb serving `project` over stdio, started from the running binary.
    pub fn this_binary_on(project: &Path) -> Result<Launch> {
        let binary = std::env::current_exe().context("cannot tell where acpdb runs from")?;
        let binary = binary.canonicalize().unwrap_or(binary);
        Ok(Launch::Stdio {
            command: binary.display().to_string(),
            args: vec!["-C".into(), project.display().to_string(), "serve".into()],
        })
    }
}

/// The file `client` reads its MCP servers from, for a project at `project`.
pub fn config_file(client: Client, project: &Path) -> Result<PathBuf> {
    Ok(match client {
        Client::ClaudeCode => project.join(".mcp.json"),
        Client::Cursor => project.join(".cursor/mcp.json"),
        Client::Vscode => project.join(".vscode/mcp.json"),
        Client::ClaudeDesktop => desktop_config_dir()?.join("Claude/claude_desktop_config.json"),
        Client::Codex => match std::env::var_os("CODEX_HOME") {
            Some(dir) => PathBuf::from(dir).join("config.toml"),
            None => home()?.join(".codex/config.toml"),
        },
    })
}

fn home() -> Result<PathBuf> {
    let var = if cfg!(windows) { "USERPROFILE" } else { "HOME" };
    std::env::var_os(var)
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .with_context(|| format!("${var} is not set: cannot find the user's configuration"))
}

/// Where Claude Desktop keeps its configuration directory `Claude/`.
fn desktop_config_dir() -> Result<PathBuf> {
    if cfg!(target_os = "macos") {
        return Ok(home()?.join("Library/Application Support"));
    }
    if cfg!(windows) {
        return std::env::var_os("APPDATA")
            .map(PathBuf::from)
            .context("%APPDATA% is not set: cannot find Claude Desktop's configuration");
    }
    match std::env::var_os("XDG_CONFIG_HOME").filter(|dir| !dir.is_empty()) {
        Some(dir) => Ok(PathBuf::from(dir)),
        None => Ok(home()?.join(".config")),
    }
}

/// The members of a server's entry that say how the client reaches it: acpdb writes them, and
/// replaces them whole. The others (`env`, `disabled`, approvals, timeouts) are the user's, and
/// a merge keeps them.
const LAUNCH_KEYS: [&str; 4] = ["type", "command", "args", "url"];

/// The client's entry for the server, as the client's file spells it.
fn json_entry(client: Client, launch: &Launch) -> Result<Vec<(String, Json)>> {
    let text = |s: &str| Json::String(s.to_string());
    let mut entry = Vec::new();
    match launch {
        Launch::Stdio { command, args } => {
            if client == Client::Vscode {
                entry.push(("type".into(), text("stdio")));
            }
            entry.push(("command".into(), text(command)));
            entry.push((
                "args".into(),
                Json::Array(args.iter().map(|a| text(a)).collect()),
            ));
        }
        Launch::Http(url) => {
            match client {
                Client::ClaudeDesktop => bail!(
                    "Claude Desktop's configuration file starts local servers only: add {url} as a custom connector in its settings, or configure it without --http"
                ),
                Client::ClaudeCode | Client::Vscode => {
                    entry.push(("type".into(), text("http")));
                }
                Client::Cursor | Client::Codex => {}
            }
            entry.push(("url".into(), text(url)));
        }
    }
    Ok(entry)
}

/// The member of a JSON client's file that holds its servers.
fn servers_member(client: Client) -> &'static str {
    match client {
        Client::Vscode => "servers",
        _ => "mcpServers",
    }
}

/// `existing` (a JSON client's file, or nothing) with the server `name` set to the members
/// `entry`, and the members of its entry there that are not [`LAUNCH_KEYS`].
fn merge_json(
    client: Client,
    existing: Option<&str>,
    name: &str,
    mut entry: Vec<(String, Json)>,
) -> Result<String> {
    let mut root = match existing {
        Some(text) if !text.trim().is_empty() => serde_json::from_str::<Json>(text)
            .map_err(|err| anyhow::anyhow!("not valid JSON ({err})"))?,
        _ => Json::Object(Vec::new()),
    };
    let Json::Object(members) = &mut root else {
        bail!("its top level is not a JSON object");
    };
    let key = servers_member(client);
    let servers = match members.iter_mut().find(|(k, _)| k == key) {
        Some((_, servers)) => servers,
        None => {
            members.push((key.into(), Json::Object(Vec::new())));
            &mut members.last_mut().expect("just pushed").1
        }
    };
    let Json::Object(servers) = servers else {
        bail!("its `{key}` is not a JSON object");
    };
    match servers.iter_mut().find(|(k, _)| k == name) {
        Some((_, old)) => {
            if let Json::Object(before) = std::mem::replace(old, Json::Null) {
                let theirs = before
                    .into_iter()
                    .filter(|(key, _)| !LAUNCH_KEYS.contains(&key.as_str()));
                entry.extend(theirs);
            }
            *old = Json::Object(entry);
        }
        None => servers.push((name.into(), Json::Object(entry))),
    }
    Ok(serde_json::to_string_pretty(&root)? + "\n")
}

/// `existing` (Codex's TOML file, or nothing) with `[mcp_servers.<name>]` set for `launch`,
/// its keys that are not [`LAUNCH_KEYS`] kept.
fn merge_toml(existing: Option<&str>, name: &str, launch: &Launch) -> Result<String> {
    let mut doc: toml_edit::DocumentMut = existing
        .unwrap_or_default()
        .parse()
        .map_err(|err| anyhow::anyhow!("not valid TOML ({err})"))?;
    let servers = doc
        .entry("mcp_servers")
        .or_insert_with(|| {
            let mut table = toml_edit::Table::new();
            table.set_implicit(true);
            toml_edit::Item::Table(table)
        })
        .as_table_mut()
        .context("its `mcp_servers` is not a table")?;
    let table = servers
        .entry(name)
        .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()))
        .as_table_like_mut()
        .with_context(|| format!("its server `{name}` is not a table"))?;
    for key in LAUNCH_KEYS {
        table.remove(key);
    }
    match launch {
        Launch::Stdio { command, args } => {
            table.insert("command", toml_edit::value(command.as_str()));
            let args: toml_edit::Array = args.iter().map(String::as_str).collect();
            table.insert("args", toml_edit::value(args));
        }
        Launch::Http(url) => {
            table.insert("url", toml_edit::value(url.as_str()));
        }
    }
    Ok(doc.to_string())
}

/// The client's file content after the merge of the server `name` for `launch` into
/// `existing` (`None`: no file yet).
pub fn merged(
    client: Client,
    existing: Option<&str>,
    name: &str,
    launch: &Launch,
) -> Result<String> {
    match client {
        Client::Codex => merge_toml(existing, name, launch),
        _ => merge_json(client, existing, name, json_entry(client, launch)?),
    }
}

/// Runs `acpdb mcp-config`.
pub fn run(project: &crate::project::Project, args: &McpConfigArgs) -> Result<()> {
    if args.name.is_empty() {
        bail!("--name must not be empty");
    }
    let launch = match &args.http {
        Some(url) if url.starts_with("http://") || url.starts_with("https://") => {
            Launch::Http(url.clone())
        }
        Some(url) => bail!("--http wants an http:// or https:// URL, got {url}"),
        None => Launch::this_binary_on(&project.root)?,
    };
    let file = config_file(args.client, &project.root)?;
    if !args.write {
        let entry = merged(args.client, None, &args.name, &launch)?;
        print!("{entry}");
        eprintln!(
            "acpdb: add this to {} (or run again with --write to merge it in)",
            file.display()
        );
        return Ok(());
    }
    // Through a symbolic link (a dotfiles manager's, say) to the file it names.
    let file = file.canonicalize().unwrap_or(file);
    let existing = read_existing(&file)?;
    let text = merged(args.client, existing.as_deref(), &args.name, &launch).with_context(|| {
        format!(
            "cannot merge into {}: fix or move it, or print the entry (without --write) and add it by hand; the file is left as it was",
            file.display()
        )
    })?;
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let backup = match &existing {
        Some(before) => {
            let backup = PathBuf::from(format!("{}.bak", file.display()));
            // As private as the file it copies (which may hold tokens in `env`).
            crate::replace::write_like(&backup, before.as_bytes(), &file)
                .with_context(|| format!("cannot write {}", backup.display()))?;
            Some(backup)
        }
        None => None,
    };
    crate::replace::write(&file, text.as_bytes())
        .with_context(|| format!("cannot write {}", file.display()))?;
    match backup {
        Some(backup) => eprintln!(
            "acpdb: wrote server `{}` to {} (the file before is {})",
            args.name,
            file.display(),
            backup.display()
        ),
        None => eprintln!("acpdb: wrote server `{}` to {}", args.name, file.display()),
    }
    Ok(())
}

/// The file's text, `None` when there is none.
fn read_existing(file: &Path) -> Result<Option<String>> {
    let opened = match crate::regular_file::open(file) {
        Ok(opened) => opened,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err).with_context(|| format!("cannot read {}", file.display())),
    };
    let bytes = crate::regular_file::read_limited(opened, LARGEST_FILE)
        .with_context(|| format!("cannot read {}", file.display()))?;
    let text = String::from_utf8(bytes).with_context(|| {
        format!(
            "cannot merge into {}: it is not UTF-8 text; the file is left as it was",
            file.display()
        )
    })?;
    Ok(Some(text))
}

/// A JSON value whose objects keep their members in the order read (and repeated names, as
/// written), so that a merge changes only the member it sets.
#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            Json::Null => serializer.serialize_unit(),
            Json::Bool(b) => serializer.serialize_bool(*b),
            Json::Number(n) => n.serialize(serializer),
            Json::String(s) => serializer.serialize_str(s),
            Json::Array(items) => items.serialize(serializer),
            Json::Object(members) => {
                let mut map = serializer.serialize_map(Some(members.len()))?;
                for (key, value) in members {
                    map.serialize_entry(key, value)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Json, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Json, E> {
        Ok(Json::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Json, E> {
        Ok(Json::Number(n.into()))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Json, E> {
        Ok(Json::Number(n.into()))
    }
    fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<Json, E> {
        serde_json::Number::from_f64(n)
            .map(Json::Number)
            .ok_or_else(|| E::custom("a number JSON cannot hold"))
    }
    fn visit_str<E>(self, s: &str) -> Result<Json, E> {
        Ok(Json::String(s.to_string()))
    }
    fn visit_string<E>(self, s: String) -> Result<Json, E> {
        Ok(Json::String(s))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut members = Vec::new();
        while let Some((key, value)) = map.next_entry()? {
            members.push((key, value));
        }
        Ok(Json::Object(members))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdio() -> Launch {
        Launch::Stdio {
            command: "/opt/acpdb".into(),
            args: vec!["-C".into(), "/p".into(), "serve".into()],
        }
    }

    #[test]
    fn a_merge_changes_only_the_server_it_sets() {
        let before = r#"{
  "z": 1,
  "mcpServers": {"other": {"command": "x", "args": ["b", "a"], "env": {"Z": "1", "A": "2"}}},
  "a": [1.5, null, true]
}"#;
        let after = merged(Client::ClaudeCode, Some(before), "acp", &stdio()).unwrap();
        // The object members, in the order written.
        let keys: Vec<&str> = after
            .lines()
            .filter_map(|line| {
                let (key, rest) = line.trim().strip_prefix('"')?.split_once('"')?;
                rest.starts_with(':').then_some(key)
            })
            .collect();
        let expected = [
            "z",
            "mcpServers",
            "other",
            "command",
            "args",
            "env",
            "Z",
            "A",
            "acp",
            "command",
            "args",
            "a",
        ];
        assert_eq!(keys, expected);
        let value: serde_json::Value = serde_json::from_str(&after).unwrap();
        assert_eq!(value["mcpServers"]["acp"]["args"][1], "/p");
        assert_eq!(value["a"][0], 1.5);
        // Merged again: the same file.
        assert_eq!(
            merged(Client::ClaudeCode, Some(&after), "acp", &stdio()).unwrap(),
            after
        );
    }

    #[test]
    fn codex_keeps_comments_and_other_servers() {
        let before = "# mine\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"x\" # keep\n";
        let after = merged(Client::Codex, Some(before), "acp", &stdio()).unwrap();
        assert!(after.starts_with(before), "{after}");
        let doc: toml_edit::DocumentMut = after.parse().unwrap();
        assert_eq!(
            doc["mcp_servers"]["acp"]["command"].as_str(),
            Some("/opt/acpdb")
        );
        let http = merged(
            Client::Codex,
            None,
            "acp",
            &Launch::Http("http://h/mcp".into()),
        )
        .unwrap();
        assert_eq!(http, "[mcp_servers.acp]\nurl = \"http://h/mcp\"\n");
    }

    #[test]
    fn what_cannot_be_merged_is_refused() {
        for bad in ["{\"mcpServers\": ", "[1]", "{\"mcpServers\": []}"] {
            assert!(
                merged(Client::Cursor, Some(bad), "acp", &stdio()).is_err(),
                "{bad}"
            );
        }
        assert!(merged(Client::Codex, Some("mcp_servers = 3"), "acp", &stdio()).is_err());
        assert!(merged(Client::Codex, Some("[[["), "acp", &stdio()).is_err());
        let http = Launch::Http("http://h/mcp".into());
        assert!(merged(Client::ClaudeDesktop, None, "acp", &http).is_err());
    }
}
