//! The two candidates for the `compress` option, on this machine: zstd (at
//! the levels an application would pick) and lz4 (lz4_flex, no levels), on a
//! JSON document and on a 1 MB binary that does not compress (an image's
//! bytes). Bytes saved, and µs per MB to compress and to decompress (the
//! median of several runs). Writes bench/COMPRESSION.md:
//!
//! ```text
//! cargo bench --profile tests --target <host> --bench compression
//! ```

use std::fmt::Write as _;
use std::time::Instant;

const RUNS: usize = 15;
const MB: f64 = 1024.0 * 1024.0;

/// A JSON document like an API's answer: 1 500 records of ids, names,
/// prices, flags and short texts (~190 KB).
fn json_document() -> Vec<u8> {
  let mut out = String::from("{\"items\":[");
  for i in 0..1_500u32 {
    if i > 0 {
      out.push(',');
    }
    let _ = write!(
      out,
      "{{\"id\":{i},\"sku\":\"SKU-{:06}\",\"name\":\"Product {i} of the catalogue\",\"price\":{}.{:02},\"inStock\":{},\"tags\":[\"home\",\"sale\",\"t{}\"],\"updatedAt\":\"2026-11-{:02}T10:{:02}:00Z\"}}",
      i * 7919 % 1_000_000,
      i % 300,
      i % 100,
      i % 3 == 0,
      i % 17,
      1 + i % 28,
      i % 60
    );
  }
  out.push_str("]}");
  out.into_bytes()
}

/// 1 MB of bytes that do not compress: what an image or an archive is.
fn binary() -> Vec<u8> {
  let mut state = 0x9e37_79b9_7f4a_7c15u64;
  (0..1 << 20)
    .map(|_| {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      (state >> 24) as u8
    })
    .collect()
}

/// The median µs per MB of `run` over `input_len` bytes.
fn per_mb(input_len: usize, mut run: impl FnMut()) -> f64 {
  run();
  let mut times: Vec<f64> = (0..RUNS)
    .map(|_| {
      let started = Instant::now();
      run();
      started.elapsed().as_secs_f64() * 1e6
    })
    .collect();
  times.sort_by(f64::total_cmp);
  times[RUNS / 2] * MB / input_len as f64
}

struct Row {
  codec: String,
  data: &'static str,
  input: usize,
  output: usize,
  compress: f64,
  decompress: f64,
}

fn zstd_row(data: &'static str, input: &[u8], level: i32) -> Row {
  let packed = zstd::bulk::compress(input, level).unwrap();
  let compress = per_mb(input.len(), || {
    std::hint::black_box(zstd::bulk::compress(input, level).unwrap());
  });
  let decompress = per_mb(input.len(), || {
    std::hint::black_box(zstd::stream::decode_all(&packed[..]).unwrap());
  });
  assert_eq!(zstd::stream::decode_all(&packed[..]).unwrap(), input);
  Row {
    codec: format!("zstd level {level}"),
    data,
    input: input.len(),
    output: packed.len(),
    compress,
    decompress,
  }
}

fn lz4_row(data: &'static str, input: &[u8]) -> Row {
  let packed = lz4_flex::compress_prepend_size(input);
  let compress = per_mb(input.len(), || {
    std::hint::black_box(lz4_flex::compress_prepend_size(input));
  });
  let decompress = per_mb(input.len(), || {
    std::hint::black_box(lz4_flex::decompress_size_prepended(&packed).unwrap());
  });
  assert_eq!(lz4_flex::decompress_size_prepended(&packed).unwrap(), input);
  Row {
    codec: "lz4 (lz4_flex)".into(),
    data,
    input: input.len(),
    output: packed.len(),
    compress,
    decompress,
  }
}

fn main() {
  let inputs: [(&'static str, Vec<u8>); 2] = [
    ("JSON document", json_document()),
    ("1 MB binary", binary()),
  ];
  let mut rows = Vec::new();
  for (data, input) in &inputs {
    for level in [1, 3, 9] {
      rows.push(zstd_row(data, input, level));
    }
    rows.push(lz4_row(data, input));
  }
  let mut md = String::from(
    "# Compression of stored values: zstd or lz4\n\n\
     Written by `cargo bench --profile tests --target <host> --bench compression` \
     (benches/compression.rs) on this machine: bytes saved, and µs per MB of \
     input to compress and to decompress (median of 15 runs). The binary is \
     1 MB of bytes that do not compress, as an image's or an archive's.\n\n\
     | codec | data | bytes in | bytes stored | saved | compress µs/MB | decompress µs/MB |\n\
     |---|---|---:|---:|---:|---:|---:|\n",
  );
  for r in &rows {
    let saved = 100.0 * (1.0 - r.output as f64 / r.input as f64);
    let _ = writeln!(
      md,
      "| {} | {} | {} | {} | {saved:.1} % | {:.0} | {:.0} |",
      r.codec, r.data, r.input, r.output, r.compress, r.decompress
    );
  }
  let find = |codec: &str, data: &str| {
    rows
      .iter()
      .find(|r| r.codec.starts_with(codec) && r.data == data)
      .unwrap()
  };
  let (zstd, lz4) = (
    find("zstd level 3", "JSON document"),
    find("lz4", "JSON document"),
  );
  let saved = |r: &Row| 100.0 * (1.0 - r.output as f64 / r.input as f64);
  let _ = write!(
    md,
    "\nOn the JSON document zstd at its default level (3) stores {:.1} % fewer \
     bytes at {:.0} µs/MB to compress and {:.0} µs/MB to decompress; lz4 {:.1} % \
     fewer at {:.0} and {:.0} µs/MB. herdcache uses zstd (level 3 unless \
     `compress.level` says otherwise): what is compressed is written once and \
     read by every instance from Redis's memory and network, where bytes are the \
     cost, and a value is decompressed off the JS thread. A value whose \
     compressed bytes are not fewer is stored as it is (the 1 MB binary: zstd \
     level 3 spends {:.0} µs/MB to find that out).\n",
    saved(zstd),
    zstd.compress,
    zstd.decompress,
    saved(lz4),
    lz4.compress,
    lz4.decompress,
    find("zstd level 3", "1 MB binary").compress,
  );
  let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/COMPRESSION.md");
  std::fs::write(&out, &md).unwrap();
  print!("{md}");
  println!("\nwritten to {}", out.display());
}
