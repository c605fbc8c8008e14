//! Compares keel's token estimate with o200k on files given as arguments (default: the
//! repository's own Rust sources and docs), per file and per kind of text.

use std::path::PathBuf;

// The estimator itself, compiled here without the rest of keel-context.
#[allow(dead_code, missing_docs)]
#[path = "../../../crates/keel-context/src/measure.rs"]
mod measure;

fn files(args: Vec<String>) -> Vec<PathBuf> {
    if !args.is_empty() {
        return args.into_iter().map(PathBuf::from).collect();
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut out = Vec::new();
    let mut stack = vec![root.join("crates"), root.join("docs")];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs" || e == "md" || e == "json") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn main() {
    let bpe = tiktoken_rs::o200k_base().expect("o200k");
    let mut rows: Vec<(String, usize, u64, f64)> = Vec::new();
    let (mut real_sum, mut est_sum) = (0usize, 0u64);
    let mut worst = f64::MAX;
    for path in files(std::env::args().skip(1).collect()) {
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        if text.len() < 256 {
            continue;
        }
        let real = bpe.encode_ordinary(&text).len();
        let est = measure::text_size(&text).tokens;
        let ratio = est as f64 / real.max(1) as f64;
        worst = worst.min(ratio);
        real_sum += real;
        est_sum += est;
        rows.push((path.display().to_string(), real, est, ratio));
    }
    rows.sort_by(|a, b| a.3.total_cmp(&b.3));
    println!("lowest ratios (estimate / o200k):");
    for (path, real, est, ratio) in rows.iter().take(8) {
        println!("  {ratio:.3}  o200k {real:>7}  estimate {est:>7}  {path}");
    }
    println!("highest ratios:");
    for (path, real, est, ratio) in rows.iter().rev().take(4) {
        println!("  {ratio:.3}  o200k {real:>7}  estimate {est:>7}  {path}");
    }
    let ratios: Vec<f64> = rows.iter().map(|r| r.3).collect();
    let mean = ratios.iter().sum::<f64>() / ratios.len().max(1) as f64;
    println!(
        "files {}  o200k {}  estimate {}  overall {:.3}  mean {:.3}  lowest {:.3}",
        rows.len(),
        real_sum,
        est_sum,
        est_sum as f64 / real_sum.max(1) as f64,
        mean,
        worst
    );
}
