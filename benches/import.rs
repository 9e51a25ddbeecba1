//! Import throughput (bytes of cache and vars JSON per second) at 10K symbols, and at 1M
//! symbols with `ACPDB_BENCH_LARGE=1`.

mod common;

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

use acpdb::import::{import, ImportArgs};

fn import_throughput(c: &mut Criterion) {
    let mut group = c.benchmark_group("import");
    group.sample_size(10);
    for scale in common::scales() {
        let dir = tempfile::tempdir().expect("temp dir");
        let summary = common::generate_project(dir.path(), scale);
        let project = common::project(dir.path());
        group.throughput(Throughput::Bytes(summary.cache_bytes + summary.vars_bytes));
        group.measurement_time(Duration::from_secs(if scale.is_large() { 300 } else { 5 }));
        group.bench_function(scale.name, |b| {
            b.iter(|| import(&project, &ImportArgs::default()).expect("import"))
        });
    }
    group.finish();
}

criterion_group!(benches, import_throughput);
criterion_main!(benches);
