//! The index and journal migrations are embedded at compile time (`refinery::embed_migrations!`):
//! a migration added or changed must rebuild the crate.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
