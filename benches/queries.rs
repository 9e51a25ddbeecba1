//! Latency of each query family, in process (the same calls as `acpdb bench`'s default mix,
//! through `acpdb::tools::call`), at 10K symbols, and at 1M symbols with `ACPDB_BENCH_LARGE=1`.
//!
//! One benchmark per report group of the default mix; each iteration makes the next call of
//! that group's sampled calls, round robin.

mod common;

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};

use acpdb::bench::workload::{default_mix, Call, MixOptions};
use acpdb::db;
use acpdb::import::{import, ImportArgs};
use acpdb::tools;

fn query_families(c: &mut Criterion) {
    for scale in common::scales() {
        let dir = tempfile::tempdir().expect("temp dir");
        common::generate_project(dir.path(), scale);
        let project = common::project(dir.path());
        import(&project, &ImportArgs::default()).expect("import");
        let conn = db::read_pool(&project.db, 1)
            .and_then(|pool| Ok(pool.get()?))
            .expect("open database");
        let options = MixOptions {
            samples: 16,
            seed: 42,
        };
        let workload = default_mix(&conn, options).expect("default mix");

        let mut group = c.benchmark_group(format!("queries/{}", scale.name));
        group.sample_size(20);
        group.warm_up_time(Duration::from_millis(300));
        group.measurement_time(Duration::from_secs(if scale.is_large() { 3 } else { 1 }));
        for label in workload.groups() {
            let calls: Vec<&Call> = workload
                .calls
                .iter()
                .filter(|call| call.group() == label)
                .collect();
            let mut next = 0;
            group.bench_function(label.as_str(), |b| {
                b.iter(|| {
                    let call = calls[next % calls.len()];
                    next += 1;
                    tools::call(&conn, &call.tool, &call.arguments).expect(&call.tool)
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, query_families);
criterion_main!(benches);
